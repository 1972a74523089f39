// The DSML tool-call grammar against blocks rendered by encoding::AppendToolCallsBlock (what the
// output parser reads back): forced calls, one call when parallel calls are off, strict
// arguments held to their schemas, free text before a block in auto mode, and no DSML markup
// inside raw values.
#include <gtest/gtest.h>

#include "encoding/dsml.h"
#include "grammar/test_util.h"
#include "grammar/tool_calls.h"

namespace flashserve::grammar {
namespace {

using Json = nlohmann::ordered_json;
using protocol::ConstraintKind;

const Json kWeather = {{"name", "get_weather"}, {"strict", true},
                       {"parameters", {{"type", "object"},
                                       {"properties", {{"city", {{"type", "string"}}},
                                                       {"days", {{"type", "integer"}, {"minimum", 1}, {"maximum", 7}}},
                                                       {"unit", {{"enum", {"c", "f"}}}}}},
                                       {"required", {"city"}}}}};
const Json kNow = {{"name", "now"}, {"parameters", {{"type", "object"}, {"properties", Json::object()}}}};

std::string Block(const std::vector<encoding::DsmlCall>& calls) {
  encoding::PieceList pieces;
  encoding::AppendToolCallsBlock(pieces, encoding::TagsFor(encoding::EncodingVersion::kV4), calls);
  std::string text;
  for (const auto& p : pieces) text += encoding::PieceText(p);
  return text;
}

std::shared_ptr<const CompiledGrammar> Compile(Json spec) {
  spec["dsml"] = "｜DSML｜";
  return testing::MustCompile(ConstraintKind::kToolCalls, spec.dump(), testing::ByteVocabulary({"｜DSML｜"}));
}

TEST(ToolCalls, RequiredCallsReadAsTheEncoderWritesThem) {
  auto g = Compile({{"mode", "required"}, {"parallel", true}, {"tools", {kWeather, kNow}}});
  const std::string one = Block({{"get_weather", {{"city", true, "Paris"}, {"days", false, "3"}}}});
  EXPECT_TRUE(testing::Matches(g, one)) << one;
  EXPECT_TRUE(testing::Matches(g, Block({{"get_weather", {{"city", true, "a < b"}, {"unit", true, "f"}}}, {"now", {}}})));
  EXPECT_FALSE(testing::Matches(g, "Sure. " + one)) << "required: no text before the block";
  EXPECT_FALSE(testing::Matches(g, Block({{"get_weather", {{"days", false, "3"}}}}))) << "city is required";
  EXPECT_FALSE(testing::Matches(g, Block({{"get_weather", {{"city", true, "Paris"}, {"days", false, "9"}}}}))) << "days <= 7";
  EXPECT_FALSE(testing::Matches(g, Block({{"get_weather", {{"city", true, "Paris"}, {"unit", true, "k"}}}})));
  EXPECT_FALSE(testing::Matches(g, Block({{"get_weather", {{"days", false, "3"}, {"city", true, "Paris"}}}}))) << "order";
  EXPECT_FALSE(testing::Matches(g, Block({{"search", {}}}))) << "unknown tool";
  EXPECT_FALSE(testing::Matches(g, Block({{"get_weather", {{"city", true, "x｜DSML｜y"}}}}))) << "markup in a value";
}

TEST(ToolCalls, OneCallWhenParallelCallsAreOff) {
  auto g = Compile({{"mode", "required"}, {"parallel", false}, {"tools", {kNow}}});
  EXPECT_TRUE(testing::Matches(g, Block({{"now", {}}})));
  EXPECT_FALSE(testing::Matches(g, Block({{"now", {}}, {"now", {}}})));
}

TEST(ToolCalls, AutoAllowsTextThenAtMostOneBlock) {
  auto g = Compile({{"mode", "auto"}, {"parallel", true}, {"tools", {kWeather}}});
  EXPECT_TRUE(testing::Matches(g, "It is sunny."));
  EXPECT_TRUE(testing::Matches(g, ""));
  EXPECT_TRUE(testing::Matches(g, "Let me check." + Block({{"get_weather", {{"city", true, "Oslo"}}}})));
  EXPECT_FALSE(testing::Matches(g, "Text <｜DSML｜invoke name=\"x\">"));
}

TEST(ToolCalls, NonStrictToolsTakeAnyValueOfTheirParametersWhenNotForced) {
  Json loose = kWeather;
  loose["strict"] = false;
  auto g = Compile({{"mode", "auto"}, {"tools", {loose}}});
  EXPECT_TRUE(testing::Matches(g, Block({{"get_weather", {{"city", false, "[1, 2]"}, {"days", true, "many"}}}})));
  EXPECT_FALSE(testing::Matches(g, Block({{"get_weather", {{"days", true, "many"}}}}))) << "required still holds";
}

// A forced call follows the schema of a tool that is not strict wherever it can; a parameter
// whose schema cannot be enforced (multipleOf) takes any value instead of a refusal.
TEST(ToolCalls, ForcedCallsFollowSchemasWherePossible) {
  Json loose = kWeather;
  loose["strict"] = false;
  loose["parameters"]["properties"]["days"]["multipleOf"] = 2;
  auto g = Compile({{"mode", "required"}, {"tools", {loose}}});
  EXPECT_TRUE(testing::Matches(g, Block({{"get_weather", {{"city", true, "Paris"}, {"days", false, "3"}}}})))
      << "days is free";
  EXPECT_TRUE(testing::Matches(g, Block({{"get_weather", {{"city", true, "P"}, {"days", true, "many"}}}}))) << "of either kind";
  EXPECT_FALSE(testing::Matches(g, Block({{"get_weather", {{"city", false, "[1]"}}}}))) << "city is a string";
  EXPECT_FALSE(testing::Matches(g, Block({{"get_weather", {{"city", true, "P"}, {"unit", true, "k"}}}})));
}

// Raw string values keep pattern, format and length bounds, over the text as written (no JSON
// escaping), and never contain the marker's first character.
TEST(ToolCalls, StrictRawStringsKeepPatternFormatAndLength) {
  Json tool = {{"name", "f"}, {"strict", true},
               {"parameters", {{"type", "object"},
                               {"properties", {{"code", {{"type", "string"}, {"pattern", "^[A-Z]{2}-\\d+$"}}},
                                               {"day", {{"type", "string"}, {"format", "date"}}},
                                               {"note", {{"type", "string"}, {"minLength", 2}, {"maxLength", 4}}}}},
                               {"required", {"code", "day", "note"}}}}};
  auto g = Compile({{"mode", "required"}, {"tools", {tool}}});
  auto call = [](const std::string& code, const std::string& day, const std::string& note) {
    return Block({{"f", {{"code", true, code}, {"day", true, day}, {"note", true, note}}}});
  };
  EXPECT_TRUE(testing::Matches(g, call("AB-12", "2024-02-29", "a\"é")));  // quotes and é raw
  EXPECT_FALSE(testing::Matches(g, call("ab-12", "2024-02-29", "ok")));
  EXPECT_FALSE(testing::Matches(g, call("AB-12", "2023-02-29", "ok"))) << "not a date";
  EXPECT_FALSE(testing::Matches(g, call("AB-12", "2024-02-29", "a"))) << "minLength";
  EXPECT_FALSE(testing::Matches(g, call("AB-12", "2024-02-29", "abcde"))) << "maxLength";
  EXPECT_FALSE(testing::Matches(g, call("AB-12", "2024-02-29", "a｜b"))) << "the marker's character";
}

}  // namespace
}  // namespace flashserve::grammar
