// The front ends by language: which texts a regex, an EBNF grammar, a choice list and a JSON
// Schema accept and reject (through the matcher), and the errors for what they cannot do.
#include <gtest/gtest.h>

#include "grammar/ebnf.h"
#include "grammar/test_util.h"

namespace flashserve::grammar {
namespace {

using protocol::ConstraintKind;
using testing::Matches;
using testing::MustCompile;
using testing::SchemaError;

TEST(Regex, LiteralsClassesQuantifiersAndAlternation) {
  auto g = MustCompile(ConstraintKind::kRegex, R"((ab|cd)+[x-z]?\d{2,3})");
  EXPECT_TRUE(Matches(g, "ab12"));
  EXPECT_TRUE(Matches(g, "abcdz123"));
  EXPECT_FALSE(Matches(g, "ab1"));
  EXPECT_FALSE(Matches(g, "ab1234"));
  EXPECT_FALSE(Matches(g, "x12"));
  auto lazy = MustCompile(ConstraintKind::kRegex, R"(^a.*?b$)");
  EXPECT_TRUE(Matches(lazy, "a\xC3\xA9zb"));
  EXPECT_FALSE(Matches(lazy, "a\nb"));  // '.' stops at line ends
}

TEST(Regex, UnicodeClassesAndNegation) {
  auto g = MustCompile(ConstraintKind::kRegex, "[^a-z\\s]+");
  EXPECT_TRUE(Matches(g, "ABC\xE4\xB8\xAD"));  // 中
  EXPECT_FALSE(Matches(g, "AbC"));
  EXPECT_FALSE(Matches(g, "A C"));
  EXPECT_FALSE(Matches(g, "\xE4\xB8"));  // a partial character is not a sentence
  auto cjk = MustCompile(ConstraintKind::kRegex, "[\\u4e00-\\u9fff]{2}");
  EXPECT_TRUE(Matches(cjk, "\xE4\xB8\xAD\xE6\x96\x87"));
  EXPECT_FALSE(Matches(cjk, "\xE4\xB8\xAD"));
}

TEST(Regex, RefusesWhatItCannotEnforce) {
  for (const char* bad : {"(?=a)b", "(a)\\1", "a\\bb", "a{3,1}", "(ab", "[a-", "\\p{L}"}) {
    auto g = BuildGrammar({ConstraintKind::kRegex, bad});
    EXPECT_FALSE(g.ok()) << bad;
  }
}

TEST(Choice, ExactlyOneOfTheStrings) {
  auto g = MustCompile(ConstraintKind::kChoice, R"(["yes", "no", "maybe so"])");
  EXPECT_TRUE(Matches(g, "yes"));
  EXPECT_TRUE(Matches(g, "maybe so"));
  EXPECT_FALSE(Matches(g, "maybe"));
  EXPECT_FALSE(BuildGrammar({ConstraintKind::kChoice, "[]"}).ok());
  EXPECT_FALSE(BuildGrammar({ConstraintKind::kChoice, "[1]"}).ok());
}

TEST(Ebnf, GbnfStyleGrammar) {
  const std::string text = R"G(# arithmetic
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= num | "(" expr ")"
num  ::= [0-9]+
)G";
  auto g = MustCompile(ConstraintKind::kGrammar, text);
  EXPECT_TRUE(Matches(g, "1+(22-3)"));
  EXPECT_TRUE(Matches(g, "((7))"));
  EXPECT_FALSE(Matches(g, "1+"));
  EXPECT_FALSE(Matches(g, "(1"));
  auto rep = MustCompile(ConstraintKind::kGrammar, "root ::= \"a\"{2,3} [^x]? /b+c/");
  EXPECT_TRUE(Matches(rep, "aabbc"));
  EXPECT_TRUE(Matches(rep, "aaaybc"));
  EXPECT_FALSE(Matches(rep, "abc"));
  EXPECT_FALSE(Matches(rep, "aaxbc"));
}

TEST(Ebnf, ErrorsNameLineAndColumn) {
  auto missing = ParseEbnf("root ::= item\n");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("rule 'item' is used but never defined"), std::string::npos);
  auto bad = ParseEbnf("root ::= \"a\"\nx ::= [b");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("line 2"), std::string::npos) << bad.error().message();
  auto no_root = ParseEbnf("start ::= \"a\"");
  ASSERT_FALSE(no_root.ok());
  EXPECT_NE(no_root.error().message().find("root"), std::string::npos);
  auto left = CompileConstraint({ConstraintKind::kGrammar, "root ::= root \"a\" | \"b\""}, testing::ByteVocabulary());
  ASSERT_FALSE(left.ok());
  EXPECT_NE(left.error().message().find("left recursion"), std::string::npos);
  auto empty = CompileConstraint({ConstraintKind::kGrammar, "root ::= \"a\" root"}, testing::ByteVocabulary());
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message().find("matches nothing"), std::string::npos);
}

TEST(JsonSchema, ObjectWithRequiredAndOptionalPropertiesInOrder) {
  auto g = MustCompile(ConstraintKind::kJsonSchema, R"({"type":"object","properties":{
      "name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150},
      "email":{"type":"string","format":"email"}},"required":["name","age"]})");
  EXPECT_TRUE(Matches(g, R"({"name":"Ada","age":36})"));
  EXPECT_TRUE(Matches(g, R"({"name": "Ada", "age": 36, "email": "ada@example.org"})"));
  EXPECT_TRUE(Matches(g, "{\n  \"name\": \"A\\\"b\",\n  \"age\": 0\n}"));
  EXPECT_FALSE(Matches(g, R"({"age":36,"name":"Ada"})"));         // order as written
  EXPECT_FALSE(Matches(g, R"({"name":"Ada"})"));                  // required
  EXPECT_FALSE(Matches(g, R"({"name":"Ada","age":151})"));        // maximum
  EXPECT_FALSE(Matches(g, R"({"name":"Ada","age":-1})"));         // minimum
  EXPECT_FALSE(Matches(g, R"({"name":"Ada","age":36,"x":1})"));   // no extra properties
  EXPECT_FALSE(Matches(g, R"({"name":"Ada","age":36,"email":"nope"})"));
  EXPECT_FALSE(Matches(g, "{\"name\":\"Ada\",\n\n\"age\":1}"));   // whitespace is bounded
}

TEST(JsonSchema, OptionalOnlyObjectsPlaceCommasCorrectly) {
  auto g = MustCompile(ConstraintKind::kJsonSchema, R"({"type":"object","properties":{
      "a":{"type":"boolean"},"b":{"type":"null"},"c":{"const":3}}})");
  for (const char* ok : {"{}", R"({"b":null})", R"({"a":true,"c":3})", R"({"a":false,"b":null,"c":3})"}) {
    EXPECT_TRUE(Matches(g, ok)) << ok;
  }
  for (const char* bad : {R"({,"b":null})", R"({"a":true,})", R"({"c":3,"a":true})", R"({"c":4})"}) {
    EXPECT_FALSE(Matches(g, bad)) << bad;
  }
}

TEST(JsonSchema, IntegerRangesAreExact) {
  auto g = MustCompile(ConstraintKind::kJsonSchema, R"({"type":"integer","minimum":-37,"exclusiveMaximum":1205})");
  for (int v = -60; v <= 1300; ++v) {
    EXPECT_EQ(Matches(g, std::to_string(v)), v >= -37 && v < 1205) << v;
  }
  EXPECT_FALSE(Matches(g, "007"));
  EXPECT_FALSE(Matches(g, "-0"));
}

TEST(JsonSchema, NumberBoundsWithFractions) {
  auto g = MustCompile(ConstraintKind::kJsonSchema, R"({"type":"number","minimum":-2,"exclusiveMaximum":3})");
  for (const char* ok : {"-2", "-2.0", "-1.5", "0", "0.25", "2.999", "-0.5"}) EXPECT_TRUE(Matches(g, ok)) << ok;
  for (const char* bad : {"-2.5", "3", "3.0", "3.1", "1e2", "-3"}) EXPECT_FALSE(Matches(g, bad)) << bad;
  auto pos = MustCompile(ConstraintKind::kJsonSchema, R"({"type":"number","exclusiveMinimum":0})");
  EXPECT_TRUE(Matches(pos, "0.001"));
  EXPECT_TRUE(Matches(pos, "12"));
  EXPECT_FALSE(Matches(pos, "0"));
  EXPECT_FALSE(Matches(pos, "0.000"));
  EXPECT_FALSE(Matches(pos, "-1"));
}

TEST(JsonSchema, ArraysWithBoundsAndPrefixItems) {
  auto g = MustCompile(ConstraintKind::kJsonSchema, R"({"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3})");
  EXPECT_TRUE(Matches(g, R"(["a"])"));
  EXPECT_TRUE(Matches(g, R"(["a", "b", "c"])"));
  EXPECT_FALSE(Matches(g, "[]"));
  EXPECT_FALSE(Matches(g, R"(["a","b","c","d"])"));
  auto tuple = MustCompile(ConstraintKind::kJsonSchema, R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"boolean"}],"items":false})");
  EXPECT_TRUE(Matches(tuple, "[1, true]"));
  EXPECT_FALSE(Matches(tuple, "[1, true, 2]"));
  EXPECT_FALSE(Matches(tuple, "[true, 1]"));
}

TEST(JsonSchema, RefsDefsAndRecursion) {
  auto g = MustCompile(ConstraintKind::kJsonSchema, R"({"$defs":{"node":{"type":"object","properties":{
      "v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v","kids"]}},
      "$ref":"#/$defs/node"})");
  EXPECT_TRUE(Matches(g, R"({"v":1,"kids":[{"v":2,"kids":[]},{"v":3,"kids":[{"v":4,"kids":[]}]}]})"));
  EXPECT_FALSE(Matches(g, R"({"v":1,"kids":[{"v":2}]})"));
}

TEST(JsonSchema, UnionsEnumsConstAndNullable) {
  auto g = MustCompile(ConstraintKind::kJsonSchema, R"({"anyOf":[{"type":"string","enum":["red","green"]},
      {"type":"integer","nullable":true},{"const":{"k":[1,"x"]}}]})");
  for (const char* ok : {R"("red")", "12", "null", R"({"k":[1,"x"]})"}) EXPECT_TRUE(Matches(g, ok)) << ok;
  for (const char* bad : {R"("blue")", "1.5", R"({"k":[1]})"}) EXPECT_FALSE(Matches(g, bad)) << bad;
  auto types = MustCompile(ConstraintKind::kJsonSchema, R"({"type":["string","null"],"maxLength":2})");
  EXPECT_TRUE(Matches(types, R"("ab")"));
  EXPECT_TRUE(Matches(types, "null"));
  EXPECT_FALSE(Matches(types, R"("abc")"));
}

TEST(JsonSchema, OneOfIsExactWhereBranchesCannotOverlap) {
  // A tagged union through references, a null, and constants: each value matches one branch.
  auto g = MustCompile(ConstraintKind::kJsonSchema, R"({"$defs":{
      "card":{"type":"object","properties":{"method":{"const":"card"},"last4":{"type":"string"}},"required":["method","last4"]},
      "bank":{"type":"object","properties":{"method":{"enum":["iban","ach"]},"account":{"type":"string"}},"required":["method","account"]}},
      "oneOf":[{"$ref":"#/$defs/card"},{"$ref":"#/$defs/bank"},{"type":"null"},{"enum":[1,2]},{"type":"string","maxLength":3}]})");
  for (const char* ok : {R"({"method":"card","last4":"1234"})", R"({"method":"ach","account":"x"})", "null", "2", R"("abc")"})
    EXPECT_TRUE(Matches(g, ok)) << ok;
  for (const char* bad : {R"({"method":"cash","last4":"1"})", "3", R"("abcd")"}) EXPECT_FALSE(Matches(g, bad)) << bad;
  // Branches that may share a value are refused, naming the pair; anyOf takes them.
  const std::vector<std::pair<std::string, std::string>> overlapping = {
      {R"({"oneOf":[{"type":"number"},{"type":"integer"}]})", "0 and 1"},
      {R"({"oneOf":[{"type":"string"},{"type":"boolean"},{"type":"string","maxLength":2}]})", "0 and 2"},
      {R"({"oneOf":[{"type":"object","properties":{"a":{"type":"string"}}},{"type":"object"}]})", "0 and 1"},
      {R"({"oneOf":[{"type":"object","properties":{"k":{"enum":["a","b"]}},"required":["k"]},
                    {"type":"object","properties":{"k":{"const":"b"}},"required":["k"]}]})", "0 and 1"},
      {R"({"oneOf":[{"const":3},{"type":"number","maximum":9}]})", "0 and 1"},
      {R"({"oneOf":[{"type":"string"},{}]})", "0 and 1"},
      // Without `type`, a branch's keywords leave values of other types free.
      {R"({"oneOf":[{"type":"string"},{"properties":{"a":{"type":"integer"}}}]})", "0 and 1"},
      {R"({"oneOf":[{"type":"integer"},{"maxLength":3}]})", "0 and 1"},
      // Objects are equal whatever their members' order.
      {R"({"oneOf":[{"const":{"a":1,"b":2}},{"enum":[{"b":2,"a":1}]}]})", "0 and 1"},
  };
  for (const auto& [schema, pair] : overlapping) {
    const std::string error = SchemaError(schema);
    EXPECT_EQ(error.rfind("oneOf: branches " + pair + " may both match one value", 0), 0u) << schema << " -> " << error;
    std::string any = schema;
    any.replace(any.find("oneOf"), 5, "anyOf");
    EXPECT_EQ(SchemaError(any), "<compiled>") << any;
  }
  // A constant the other branch's type cannot hold is disjoint from it.
  EXPECT_EQ(SchemaError(R"({"oneOf":[{"const":"auto"},{"type":"integer"},{"const":2.5}]})"), "<compiled>");
}

TEST(JsonSchema, AllOfMergesObjects) {
  auto g = MustCompile(ConstraintKind::kJsonSchema, R"({"allOf":[
      {"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
      {"properties":{"b":{"type":"string"}},"required":["b"]}]})");
  EXPECT_TRUE(Matches(g, R"({"a":1,"b":"x"})"));
  EXPECT_FALSE(Matches(g, R"({"a":1})"));
}

TEST(JsonSchema, FormatsAndPatterns) {
  auto date = MustCompile(ConstraintKind::kJsonSchema, R"({"type":"string","format":"date"})");
  EXPECT_TRUE(Matches(date, R"("2024-02-29")"));
  EXPECT_FALSE(Matches(date, R"("2023-02-29")"));
  EXPECT_FALSE(Matches(date, R"("2024-04-31")"));
  auto dt = MustCompile(ConstraintKind::kJsonSchema, R"({"type":"string","format":"date-time"})");
  EXPECT_TRUE(Matches(dt, R"("2026-12-05T17:15:24Z")"));
  EXPECT_TRUE(Matches(dt, R"("2026-12-05T17:15:24.5+01:00")"));
  auto uuid = MustCompile(ConstraintKind::kJsonSchema, R"({"type":"string","format":"uuid"})");
  EXPECT_TRUE(Matches(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  auto ip = MustCompile(ConstraintKind::kJsonSchema, R"({"type":"string","format":"ipv4"})");
  EXPECT_TRUE(Matches(ip, R"("192.168.0.255")"));
  EXPECT_FALSE(Matches(ip, R"("256.1.1.1")"));
  auto pat = MustCompile(ConstraintKind::kJsonSchema, R"({"type":"string","pattern":"^[A-Z]{2}-\\d+$"})");
  EXPECT_TRUE(Matches(pat, R"("AB-12")"));
  EXPECT_FALSE(Matches(pat, R"("AB-")"));
  auto search = MustCompile(ConstraintKind::kJsonSchema, R"({"type":"string","pattern":"\""})");
  EXPECT_TRUE(Matches(search, R"("say \"hi\"")"));  // unanchored: a quote anywhere, written escaped
  EXPECT_FALSE(Matches(search, R"("no quote")"));
}

TEST(JsonSchema, AdditionalPropertiesNeverRepeatAListedName) {
  auto g = MustCompile(ConstraintKind::kJsonSchema, R"({"type":"object","properties":{"id":{"type":"integer"}},
      "required":["id"],"additionalProperties":{"type":"boolean"}})");
  EXPECT_TRUE(Matches(g, R"({"id":1,"idx":true,"i":false})"));
  EXPECT_FALSE(Matches(g, R"({"id":1,"id":true})"));
  auto any = MustCompile(ConstraintKind::kJsonObject, "");
  EXPECT_TRUE(Matches(any, R"({"a":[1,{"b":null}],"c":"d"})"));
  EXPECT_FALSE(Matches(any, R"([1])"));
}

TEST(JsonSchema, UnsupportedKeywordsNameTheirPath) {
  EXPECT_EQ(SchemaError(R"({"type":"object","properties":{"tags":{"type":"array","uniqueItems":true}}})"),
            "properties.tags.uniqueItems: the keyword `uniqueItems` cannot be enforced");
  EXPECT_EQ(SchemaError(R"({"not":{"type":"string"}})"), "not: the keyword `not` cannot be enforced");
  EXPECT_EQ(SchemaError(R"({"type":"number","minimum":0.5})"), "minimum: a non-integer bound on a number cannot be enforced");
  EXPECT_EQ(SchemaError(R"({"type":"string","format":"hostname"})"), "format: the format 'hostname' cannot be enforced");
  EXPECT_EQ(SchemaError(R"({"$ref":"#/$defs/missing"})"), "$ref: reference '#/$defs/missing' points nowhere");
  EXPECT_EQ(SchemaError(R"({"type":"strnig"})"), "type: unknown type 'strnig'");
  EXPECT_EQ(SchemaError("{"), "the schema is not valid JSON");
  // Read with a default before, so a non-boolean threw out of the compiler (a 500 over HTTP).
  EXPECT_EQ(SchemaError(R"({"type":"string","nullable":0})"), "nullable: must be a boolean");
  auto path = BuildGrammar({ConstraintKind::kJsonSchema, R"({"properties":{"a":{"multipleOf":2}}})"});
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(SchemaErrorPath(path.error()), "properties.a.multipleOf");
}

}  // namespace
}  // namespace flashserve::grammar
