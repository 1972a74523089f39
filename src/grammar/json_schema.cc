// JSON Schema -> Grammar (grammar/json_schema.h). Each distinct subschema becomes one rule
// (shared by every place that uses it); objects keep the property order as written.
#include "grammar/json_schema.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "grammar/json_overlap.h"
#include "grammar/regex.h"

namespace flashserve::grammar {
namespace {

using base::Error;
using base::ErrorCode;
using Json = nlohmann::ordered_json;

const std::set<std::string> kUnsupported = {
    "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies", "patternProperties",
    "propertyNames", "unevaluatedProperties", "unevaluatedItems", "contains", "minContains", "maxContains",
    "minProperties", "maxProperties", "multipleOf", "$dynamicRef", "$dynamicAnchor", "$recursiveRef",
    "additionalItems"};
const std::set<std::string> kAnnotations = {
    "title", "description", "$schema", "$id", "$comment", "default", "examples", "example", "deprecated",
    "readOnly", "writeOnly", "$anchor", "contentEncoding", "contentMediaType", "discriminator", "externalDocs",
    "xml", "$defs", "definitions"};
const std::set<std::string> kObjectWords = {"properties", "required", "additionalProperties"};
const std::set<std::string> kArrayWords = {"items", "prefixItems", "minItems", "maxItems"};
const std::set<std::string> kStringWords = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string> kNumberWords = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};

// Anchored regexes (JSON Schema `format`) over the decoded string.
const std::map<std::string, std::string> kFormats = {
    {"date", R"((\d\d(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29|\d{4}-((0[13578]|1[02])-(0[1-9]|[12]\d|3[01])|(0[469]|11)-(0[1-9]|[12]\d|30)|02-(0[1-9]|1\d|2[0-8])))"},
    {"time", R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
    {"uuid", R"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"},
    {"email", R"([A-Za-z0-9_+-]+(\.[A-Za-z0-9_+-]+)*@([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,24})"},
    {"ipv4", R"((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3})"},
    {"ipv6", R"([0-9a-f]{1,4}(:[0-9a-f]{1,4}){7})"},
    {"uri", R"([a-z][a-z0-9+.-]*://[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:\d{1,5})?(/[A-Za-z0-9._~!$&'()*+,;=:@-]*)*(\?[A-Za-z0-9._~!$&'()*+,;=:@/?-]*)?)"},
};

std::string Join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

Error At(const std::string& path, const std::string& what) {
  return Error(ErrorCode::kInvalidArgument, fmt::format("{}: {}", path.empty() ? "(schema root)" : path, what));
}

base::Result<int64_t> Count(const Json& schema, const char* key, int64_t fallback, const std::string& path) {
  const auto it = schema.find(key);
  if (it == schema.end()) return fallback;
  if (!it->is_number_integer() || it->get<int64_t>() < 0) return At(Join(path, key), "must be a non-negative integer");
  if (it->get<int64_t>() > 10000) return At(Join(path, key), "above 10000 cannot be enforced");
  return it->get<int64_t>();
}

std::string Decimal(uint64_t v) { return std::to_string(v); }

}  // namespace

class SchemaCompiler {
 public:
  SchemaCompiler(Grammar* g, const Json& root, const JsonGrammarOptions& o) : root_(root), o_(o), g_(g) {
    ws_ = g_->Optional(g_->Alt({g_->Bytes(" "), g_->Seq({g_->Bytes("\n"), g_->Repeat(g_->Bytes(" "), 0, o.max_indent)})}));
    digit_ = g_->Set(Range('0', '9'));
  }

  ExprId AnyValue() { return g_->Ref(AnyRule("value")); }
  base::Result<ExprId> Value(const Json& schema, const std::string& path) {
    FS_ASSIGN_OR_RETURN(int32_t rule, RuleFor(schema, path));
    return g_->Ref(rule);
  }

  base::Result<Grammar> Run() {
    FS_ASSIGN_OR_RETURN(int32_t root, RuleFor(root_, ""));
    const int32_t start = g_->AddRule("root");
    g_->Define(start, g_->Seq({g_->Ref(root)}));
    g_->set_root(start);
    return std::move(*g_);
  }

  Grammar AnyObject() {
    const int32_t start = g_->AddRule("root");
    g_->Define(start, g_->Ref(AnyRule("object")));
    g_->set_root(start);
    return std::move(*g_);
  }

 private:
  static ByteSet Range(int lo, int hi) {
    ByteSet s;
    for (int b = lo; b <= hi; ++b) s.set(static_cast<size_t>(b));
    return s;
  }
  ExprId Lit(const std::string& s) { return g_->Bytes(s); }
  // Every value rule ends with its own trailing whitespace, so what may follow a value is only
  // ',', ':', '}' or ']' (few tokens start with those): a separator is "," then whitespace.
  ExprId Sep() { return g_->Seq({Lit(","), ws_}); }

  bool EndsWithWs(ExprId id) const {
    const Expr& e = g_->expr(id);
    if (e.kind == ExprKind::kRef) return ws_rules_.count(e.rule) > 0;
    if (e.kind == ExprKind::kSeq) return EndsWithWs(e.items.back());
    if (e.kind == ExprKind::kAlt) {
      for (ExprId item : e.items) {
        if (!EndsWithWs(item)) return false;
      }
      return true;
    }
    return false;
  }
  ExprId WithWs(ExprId body) { return EndsWithWs(body) ? body : g_->Seq({body, ws_}); }
  ExprId Digits(int min, int max) { return g_->Repeat(digit_, min, max); }

  // The generic JSON rules: value, object, array, string, number.
  int32_t AnyRule(const std::string& which) {
    if (any_.empty()) {
      for (const char* n : {"value", "object", "array", "string", "number"}) any_[n] = g_->AddRule(std::string("any-") + n);
      const ExprId value = g_->Ref(any_["value"]), str = g_->Ref(any_["string"]);
      g_->Define(any_["string"], g_->Seq({Lit("\""), g_->Star(CharacterIn(ComplementRanges({}), true, g_)), Lit("\"")}));
      g_->Define(any_["number"], NumberExpr(std::nullopt, false, std::nullopt, false));
      const ExprId member = g_->Seq({str, ws_, Lit(":"), ws_, value});
      g_->Define(any_["object"], g_->Seq({Lit("{"), ws_, g_->Optional(g_->Seq({member, g_->Star(g_->Seq({Sep(), member}))})), Lit("}")}));
      g_->Define(any_["array"], g_->Seq({Lit("["), ws_, g_->Optional(g_->Seq({value, g_->Star(g_->Seq({Sep(), value}))})), Lit("]")}));
      g_->Define(any_["value"], g_->Seq({g_->Alt({g_->Ref(any_["object"]), g_->Ref(any_["array"]), str, g_->Ref(any_["number"]),
                                               Lit("true"), Lit("false"), Lit("null")}), ws_}));
      ws_rules_.insert(any_["value"]);
    }
    return any_[which];
  }

  // One rule per distinct subschema.
  base::Result<int32_t> RuleFor(const Json& schema, const std::string& path) {
    const std::string key = schema.dump();
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    if (schema.is_boolean() && schema.get<bool>()) return memo_[key] = AnyRule("value");
    const int32_t rule = g_->AddRule(fmt::format("s{}", memo_.size()));
    memo_[key] = rule;
    ws_rules_.insert(rule);
    FS_ASSIGN_OR_RETURN(ExprId body, Body(schema, path));
    g_->Define(rule, WithWs(body));
    return rule;
  }

  base::Result<const Json*> Resolve(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#') return At(path, fmt::format("only local references (#/...) are supported, not '{}'", ref));
    try {
      const Json::json_pointer pointer(ref.substr(1));
      if (!root_.contains(pointer)) return At(path, fmt::format("reference '{}' points nowhere", ref));
      return &root_.at(pointer);
    } catch (const Json::exception&) {
      return At(path, fmt::format("malformed reference '{}'", ref));
    }
  }

  static bool HasAssertions(const Json& schema, const std::set<std::string>& except) {
    for (const auto& [k, v] : schema.items()) {
      if (!kAnnotations.count(k) && !except.count(k) && k.rfind("x-", 0) != 0) return true;
    }
    return false;
  }

  base::Result<ExprId> Body(const Json& schema, const std::string& path) {
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return g_->Ref(AnyRule("value"));
      return At(path, "the schema `false` allows no value");
    }
    if (!schema.is_object()) return At(path, "a schema must be an object or a boolean");
    for (const auto& [k, v] : schema.items()) {
      if (kUnsupported.count(k)) return At(Join(path, k), fmt::format("the keyword `{}` cannot be enforced", k));
      if (k == "uniqueItems" && v == true) return At(Join(path, k), "the keyword `uniqueItems` cannot be enforced");
    }
    if (schema.contains("$ref")) {
      if (HasAssertions(schema, {"$ref"})) return At(Join(path, "$ref"), "`$ref` beside other keywords is not supported");
      if (!schema["$ref"].is_string()) return At(Join(path, "$ref"), "must be a string");
      const std::string ref = schema["$ref"].get<std::string>();
      FS_ASSIGN_OR_RETURN(const Json* target, Resolve(ref, Join(path, "$ref")));
      if (auto it = ref_rules_.find(ref); it != ref_rules_.end()) return g_->Ref(it->second);
      const int32_t rule = g_->AddRule(fmt::format("ref{}", ref_rules_.size()));
      ref_rules_[ref] = rule;
      ws_rules_.insert(rule);
      FS_ASSIGN_OR_RETURN(ExprId body, Value(*target, ref));
      g_->Define(rule, body);
      return g_->Ref(rule);
    }
    if (schema.contains("allOf")) {
      FS_ASSIGN_OR_RETURN(Json merged, MergeAllOf(schema, path));
      return Value(merged, path);
    }
    if (schema.contains("anyOf") || schema.contains("oneOf")) return Union(schema, path);
    if (schema.contains("const")) return Lit(schema["const"].dump());
    if (schema.contains("enum")) {
      const Json& values = schema["enum"];
      if (!values.is_array() || values.empty()) return At(Join(path, "enum"), "must be a non-empty array");
      std::vector<ExprId> alts;
      for (const Json& v : values) alts.push_back(Lit(v.dump()));
      return g_->Alt(std::move(alts));
    }
    FS_ASSIGN_OR_RETURN(std::vector<std::string> types, Types(schema, path));
    if (types.empty()) return g_->Ref(AnyRule("value"));
    std::vector<ExprId> alts;
    for (const std::string& t : types) {
      FS_ASSIGN_OR_RETURN(ExprId e, TypeBody(t, schema, path));
      alts.push_back(e);
    }
    return g_->Alt(std::move(alts));
  }

  base::Result<std::vector<std::string>> Types(const Json& schema, const std::string& path) {
    std::vector<std::string> types;
    if (const auto it = schema.find("type"); it != schema.end()) {
      if (it->is_string()) {
        types.push_back(it->get<std::string>());
      } else if (it->is_array() && !it->empty()) {
        for (const Json& t : *it) {
          if (!t.is_string()) return At(Join(path, "type"), "must be a string or an array of strings");
          types.push_back(t.get<std::string>());
        }
      } else {
        return At(Join(path, "type"), "must be a string or an array of strings");
      }
    } else {
      auto has_any = [&](const std::set<std::string>& words) {
        for (const std::string& w : words) {
          if (schema.contains(w)) return true;
        }
        return false;
      };
      if (has_any(kObjectWords)) types.push_back("object");
      if (has_any(kArrayWords)) types.push_back("array");
      if (has_any(kStringWords)) types.push_back("string");
      if (has_any(kNumberWords)) types.push_back("number");
    }
    static const std::set<std::string> kKnown = {"string", "integer", "number", "boolean", "null", "array", "object"};
    for (const std::string& t : types) {
      if (!kKnown.count(t)) return At(Join(path, "type"), fmt::format("unknown type '{}'", t));
    }
    const auto nullable = schema.find("nullable");
    if (nullable != schema.end() && !nullable->is_boolean()) return At(Join(path, "nullable"), "must be a boolean");
    if (nullable != schema.end() && nullable->get<bool>() && std::find(types.begin(), types.end(), "null") == types.end() &&
        !types.empty()) {
      types.push_back("null");
    }
    return types;
  }

  base::Result<ExprId> TypeBody(const std::string& type, const Json& schema, const std::string& path) {
    if (type == "null") return Lit("null");
    if (type == "boolean") return g_->Alt({Lit("true"), Lit("false")});
    if (type == "string") return StringBody(schema, path);
    if (type == "integer") return IntegerBody(schema, path);
    if (type == "number") return NumberBody(schema, path);
    if (type == "array") return ArrayBody(schema, path);
    return ObjectBody(schema, path);
  }

  // ---- strings ----
  base::Result<ExprId> StringBody(const Json& schema, const std::string& path) {
    if (!schema.contains("format") && !schema.contains("pattern") && !schema.contains("minLength") &&
        !schema.contains("maxLength")) {
      return g_->Ref(AnyRule("string"));
    }
    FS_ASSIGN_OR_RETURN(ExprId body, BoundedStringText(schema, path, true, {}, g_));
    return g_->Seq({Lit("\""), body, Lit("\"")});
  }

  // ---- numbers ----
  struct Bound {
    std::optional<double> value;
    bool exclusive = false;
  };

  base::Result<std::pair<Bound, Bound>> Bounds(const Json& schema, const std::string& path) {
    Bound lo, hi;
    auto number = [&](const char* key) -> base::Result<std::optional<double>> {
      const auto it = schema.find(key);
      if (it == schema.end() || it->is_boolean()) return std::optional<double>();
      if (!it->is_number()) return At(Join(path, key), "must be a number");
      return std::optional<double>(it->get<double>());
    };
    FS_ASSIGN_OR_RETURN(lo.value, number("minimum"));
    FS_ASSIGN_OR_RETURN(hi.value, number("maximum"));
    FS_ASSIGN_OR_RETURN(std::optional<double> xlo, number("exclusiveMinimum"));
    FS_ASSIGN_OR_RETURN(std::optional<double> xhi, number("exclusiveMaximum"));
    if (schema.value("exclusiveMinimum", Json()).is_boolean()) lo.exclusive = schema["exclusiveMinimum"].get<bool>();
    if (schema.value("exclusiveMaximum", Json()).is_boolean()) hi.exclusive = schema["exclusiveMaximum"].get<bool>();
    if (xlo && (!lo.value || *xlo >= *lo.value)) lo = {xlo, true};
    if (xhi && (!hi.value || *xhi <= *hi.value)) hi = {xhi, true};
    return std::make_pair(lo, hi);
  }

  base::Result<ExprId> IntegerBody(const Json& schema, const std::string& path) {
    FS_ASSIGN_OR_RETURN(auto bounds, Bounds(schema, path));
    std::optional<int64_t> lo, hi;
    constexpr double kLimit = 9.0e18;
    if (bounds.first.value && *bounds.first.value > -kLimit) {
      double v = std::ceil(*bounds.first.value);
      if (bounds.first.exclusive && v == *bounds.first.value) v += 1;
      if (v > kLimit) return At(path, "the lower bound is out of range");
      lo = static_cast<int64_t>(v);
    }
    if (bounds.second.value && *bounds.second.value < kLimit) {
      double v = std::floor(*bounds.second.value);
      if (bounds.second.exclusive && v == *bounds.second.value) v -= 1;
      if (v < -kLimit) return At(path, "the upper bound is out of range");
      hi = static_cast<int64_t>(v);
    }
    if (const auto f = schema.find("format"); f != schema.end() && f->is_string()) {
      if (*f == "int32") {
        lo = std::max<int64_t>(lo.value_or(INT32_MIN), INT32_MIN);
        hi = std::min<int64_t>(hi.value_or(INT32_MAX), INT32_MAX);
      } else if (*f == "int64") {
        lo = std::max<int64_t>(lo.value_or(INT64_MIN + 1), INT64_MIN + 1);
        hi = std::min<int64_t>(hi.value_or(INT64_MAX), INT64_MAX);
      } else {
        return At(Join(path, "format"), fmt::format("the format '{}' cannot be enforced on an integer", f->get<std::string>()));
      }
    }
    if (lo && hi && *lo > *hi) return At(path, "no integer lies within the bounds");
    return IntegerExpr(lo, hi);
  }

  // Decimal numerals without leading zeros for every integer in [lo, hi] (hi empty = unbounded).
  ExprId NonNegative(uint64_t lo, std::optional<uint64_t> hi) {
    std::vector<ExprId> alts;
    const size_t lo_len = Decimal(lo).size();
    const size_t hi_len = hi ? Decimal(*hi).size() : static_cast<size_t>(o_.max_digits);
    for (size_t len = lo_len; len <= hi_len; ++len) {
      std::string a = len == lo_len ? Decimal(lo) : std::string(len, '0');
      if (len != lo_len) a[0] = '1';
      const std::string b = hi && len == hi_len ? Decimal(*hi) : std::string(len, '9');
      alts.push_back(SameLength(a, b));
    }
    return g_->Alt(std::move(alts));
  }

  ExprId SameLength(const std::string& a, const std::string& b) {
    const size_t n = a.size();
    if (n == 1) return g_->Set(Range(a[0], b[0]));
    const std::string ra = a.substr(1), rb = b.substr(1);
    if (a[0] == b[0]) return g_->Seq({Lit(std::string(1, a[0])), SameLength(ra, rb)});
    const bool low_full = ra == std::string(n - 1, '0'), high_full = rb == std::string(n - 1, '9');
    const int32_t tail = static_cast<int32_t>(n - 1);
    if (low_full && high_full) return g_->Seq({g_->Set(Range(a[0], b[0])), Digits(tail, tail)});
    std::vector<ExprId> alts;
    alts.push_back(g_->Seq({Lit(std::string(1, a[0])), SameLength(ra, std::string(n - 1, '9'))}));
    if (b[0] - a[0] >= 2) alts.push_back(g_->Seq({g_->Set(Range(a[0] + 1, b[0] - 1)), Digits(tail, tail)}));
    alts.push_back(g_->Seq({Lit(std::string(1, b[0])), SameLength(std::string(n - 1, '0'), rb)}));
    return g_->Alt(std::move(alts));
  }

  ExprId IntegerExpr(std::optional<int64_t> lo, std::optional<int64_t> hi) {
    std::vector<ExprId> alts;
    if (!hi || *hi >= 0) {
      const uint64_t a = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
      alts.push_back(NonNegative(a, hi ? std::optional<uint64_t>(static_cast<uint64_t>(*hi)) : std::nullopt));
    }
    if (!lo || *lo < 0) {
      const uint64_t a = hi && *hi < 0 ? static_cast<uint64_t>(-*hi) : 1;
      std::optional<uint64_t> b;
      if (lo) b = static_cast<uint64_t>(-*lo);
      alts.push_back(g_->Seq({Lit("-"), NonNegative(a, b)}));
    }
    return g_->Alt(std::move(alts));
  }

  base::Result<ExprId> NumberBody(const Json& schema, const std::string& path) {
    FS_ASSIGN_OR_RETURN(auto bounds, Bounds(schema, path));
    for (const auto& [b, key] : {std::make_pair(bounds.first, "minimum"), std::make_pair(bounds.second, "maximum")}) {
      if (b.value && (*b.value != std::floor(*b.value) || std::fabs(*b.value) > 1e18)) {
        return At(Join(path, key), "a non-integer bound on a number cannot be enforced");
      }
    }
    auto to_int = [](const Bound& b) { return b.value ? std::optional<int64_t>(static_cast<int64_t>(*b.value)) : std::nullopt; };
    const auto lo = to_int(bounds.first), hi = to_int(bounds.second);
    if (lo && hi && (*lo > *hi || (*lo == *hi && (bounds.first.exclusive || bounds.second.exclusive)))) {
      return At(path, "no number lies within the bounds");
    }
    return NumberExpr(lo, bounds.first.exclusive, hi, bounds.second.exclusive);
  }

  ExprId NumberExpr(std::optional<int64_t> lo, bool lo_x, std::optional<int64_t> hi, bool hi_x) {
    const int d = o_.max_digits;
    if (!lo && !hi) {
      const ExprId integer = g_->Alt({Lit("0"), g_->Seq({g_->Set(Range('1', '9')), Digits(0, d - 1)})});
      const ExprId frac = g_->Optional(g_->Seq({Lit("."), Digits(1, d)}));
      const ExprId exp = g_->Optional(g_->Seq({g_->Set(Range('E', 'E') | Range('e', 'e')), g_->Optional(g_->Set(Range('+', '+') | Range('-', '-'))), Digits(1, 3)}));
      return g_->Seq({g_->Optional(Lit("-")), integer, frac, exp});
    }
    std::vector<ExprId> alts;
    if (!hi || *hi > 0 || (*hi == 0 && !hi_x)) {
      const bool from_zero = !lo || *lo < 0;
      alts.push_back(NonNegativeDecimal(from_zero ? 0 : static_cast<uint64_t>(*lo), from_zero ? false : lo_x,
                                        hi ? std::optional<uint64_t>(static_cast<uint64_t>(*hi)) : std::nullopt, hi_x));
    }
    if (!lo || *lo < 0) {  // -w for w in (max(-hi, 0), -lo]
      const bool through_zero = !hi || *hi >= 0;
      alts.push_back(g_->Seq({Lit("-"), NonNegativeDecimal(through_zero ? 0 : static_cast<uint64_t>(-*hi), through_zero ? true : hi_x,
                                                          lo ? std::optional<uint64_t>(static_cast<uint64_t>(-*lo)) : std::nullopt, lo_x)}));
    }
    return g_->Alt(std::move(alts));
  }

  // Decimals w with a <= w <= b (either end exclusive), a and b integers, no exponent.
  ExprId NonNegativeDecimal(uint64_t a, bool a_x, std::optional<uint64_t> b, bool b_x) {
    const int d = o_.max_digits;
    const ExprId any_frac = g_->Optional(g_->Seq({Lit("."), Digits(1, d)}));
    const ExprId zero_frac = g_->Optional(g_->Seq({Lit("."), g_->Repeat(Lit("0"), 1, d)}));
    const ExprId pos_frac = g_->Seq({Lit("."), Digits(0, d - 1), g_->Set(Range('1', '9'))});
    const ExprId a_lit = Lit(Decimal(a));
    std::vector<ExprId> alts;
    if (b && *b == a) return a_x || b_x ? g_->Set(ByteSet{}) : g_->Seq({a_lit, zero_frac});
    alts.push_back(g_->Seq({a_lit, a_x ? pos_frac : any_frac}));
    if (!b || *b > a + 1) alts.push_back(g_->Seq({NonNegative(a + 1, b ? std::optional<uint64_t>(*b - 1) : std::nullopt), any_frac}));
    if (b && !b_x) alts.push_back(g_->Seq({Lit(Decimal(*b)), zero_frac}));
    return g_->Alt(std::move(alts));
  }

  // ---- arrays ----
  base::Result<ExprId> ArrayBody(const Json& schema, const std::string& path) {
    FS_ASSIGN_OR_RETURN(int64_t min, Count(schema, "minItems", 0, path));
    FS_ASSIGN_OR_RETURN(int64_t max, Count(schema, "maxItems", kUnbounded, path));
    if (max != kUnbounded && max < min) return At(Join(path, "maxItems"), "is below minItems");
    std::vector<ExprId> prefix;
    if (const auto it = schema.find("prefixItems"); it != schema.end()) {
      if (!it->is_array()) return At(Join(path, "prefixItems"), "must be an array of schemas");
      for (size_t i = 0; i < it->size() && (max == kUnbounded || static_cast<int64_t>(i) < max); ++i) {
        FS_ASSIGN_OR_RETURN(ExprId e, Value((*it)[i], Join(path, fmt::format("prefixItems.{}", i))));
        prefix.push_back(e);
      }
    }
    const Json items = schema.value("items", Json(true));
    const bool more_allowed = !(items.is_boolean() && !items.get<bool>());
    const auto p = static_cast<int64_t>(prefix.size());
    if (!more_allowed && min > p) return At(Join(path, "minItems"), "needs more items than `prefixItems` with `items: false` allow");
    std::optional<ExprId> item;
    if (more_allowed && (max == kUnbounded || max > p)) {
      FS_ASSIGN_OR_RETURN(ExprId e, Value(items, Join(path, "items")));
      item = e;
    }
    // The prefix is written in full (a valid choice whenever the bounds allow it).
    const int64_t rest_min = std::max<int64_t>(0, min - p);
    const int64_t rest_max = !item ? 0 : max == kUnbounded ? kUnbounded : max - p;
    std::vector<ExprId> seq = {Lit("["), ws_};
    for (size_t i = 0; i < prefix.size(); ++i) {
      if (i > 0) seq.push_back(Sep());
      seq.push_back(prefix[i]);
    }
    if (item && rest_max != 0) {
      const ExprId more = g_->Seq({Sep(), *item});
      if (prefix.empty()) {
        const int32_t reps_min = static_cast<int32_t>(std::max<int64_t>(0, rest_min - 1));
        const int32_t reps_max = rest_max == kUnbounded ? kUnbounded : static_cast<int32_t>(rest_max - 1);
        const ExprId list = g_->Seq({*item, g_->Repeat(more, reps_min, reps_max)});
        seq.push_back(rest_min == 0 ? g_->Optional(list) : list);
      } else {
        seq.push_back(g_->Repeat(more, static_cast<int32_t>(rest_min), rest_max == kUnbounded ? kUnbounded : static_cast<int32_t>(rest_max)));
      }
    }
    seq.push_back(Lit("]"));
    return g_->Seq(std::move(seq));
  }

  // ---- objects ----
  struct Member {
    ExprId expr;
    bool required;
  };

  base::Result<ExprId> ObjectBody(const Json& schema, const std::string& path) {
    const Json empty = Json::object();
    const Json& props = schema.contains("properties") ? schema["properties"] : empty;
    if (!props.is_object()) return At(Join(path, "properties"), "must be an object");
    std::set<std::string> required;
    if (const auto it = schema.find("required"); it != schema.end()) {
      if (!it->is_array()) return At(Join(path, "required"), "must be an array of strings");
      for (const Json& r : *it) {
        if (!r.is_string()) return At(Join(path, "required"), "must be an array of strings");
        required.insert(r.get<std::string>());
      }
    }
    std::vector<Member> members;
    std::set<std::string> names;
    for (const auto& [name, sub] : props.items()) {
      if (sub.is_boolean() && !sub.get<bool>()) {
        if (required.count(name)) return At(Join(Join(path, "properties"), name), "is required but its schema is `false`");
        continue;
      }
      FS_ASSIGN_OR_RETURN(ExprId value, Value(sub, Join(Join(path, "properties"), name)));
      members.push_back({g_->Seq({Lit(Json(name).dump()), ws_, Lit(":"), ws_, value}), required.count(name) > 0});
      names.insert(name);
    }
    for (const std::string& name : required) {
      if (names.count(name)) continue;
      members.push_back({g_->Seq({Lit(Json(name).dump()), ws_, Lit(":"), ws_, g_->Ref(AnyRule("value"))}), true});
      names.insert(name);
    }
    // Extra members: `additionalProperties` when given; an object without `properties` takes any.
    std::optional<ExprId> extra;
    const Json add = schema.value("additionalProperties", Json(props.empty() && required.empty()));
    if (!(add.is_boolean() && !add.get<bool>())) {
      FS_ASSIGN_OR_RETURN(ExprId value, Value(add, Join(path, "additionalProperties")));
      const ExprId key = names.empty() ? g_->Ref(AnyRule("string")) : KeyNotIn(names);
      extra = g_->Seq({key, ws_, Lit(":"), ws_, value});
    }
    return ObjectExpr(members, extra);
  }

  // A property name written with [A-Za-z0-9_-] that is none of `names`.
  ExprId KeyNotIn(const std::set<std::string>& names) {
    const ByteSet word = Range('A', 'Z') | Range('a', 'z') | Range('0', '9') | Range('_', '_') | Range('-', '-');
    auto build = [&](auto&& self, const std::vector<std::string>& group, size_t depth) -> ExprId {
      bool is_name = false;
      std::map<char, std::vector<std::string>> next;
      for (const std::string& n : group) {
        if (n.size() == depth) is_name = true;
        else next[n[depth]].push_back(n);
      }
      ByteSet others = word;
      std::vector<ExprId> alts;
      for (const auto& [c, sub] : next) {
        others.reset(static_cast<unsigned char>(c));
        if (word[static_cast<unsigned char>(c)]) alts.push_back(g_->Seq({Lit(std::string(1, c)), self(self, sub, depth + 1)}));
      }
      if (others.any()) alts.push_back(g_->Seq({g_->Set(others), g_->Star(g_->Set(word))}));
      if (!is_name && depth > 0) alts.push_back(g_->Empty());
      return alts.empty() ? g_->Set(ByteSet{}) : g_->Alt(std::move(alts));
    };
    const std::vector<std::string> all(names.begin(), names.end());
    return g_->Seq({Lit("\""), build(build, all, 0), Lit("\"")});
  }

  // Members in order, optional ones skippable, commas only between written members, then any
  // extra members. after[i]: members i.. once something was written (a rule each, shared).
  ExprId ObjectExpr(const std::vector<Member>& members, std::optional<ExprId> extra) {
    const size_t n = members.size();
    bool all_required = true;
    for (const Member& m : members) all_required = all_required && m.required;
    const ExprId tail = extra ? g_->Star(g_->Seq({Sep(), *extra})) : g_->Empty();
    if (all_required && n > 0) {
      std::vector<ExprId> seq = {Lit("{"), ws_};
      for (size_t i = 0; i < n; ++i) {
        if (i > 0) seq.push_back(Sep());
        seq.push_back(members[i].expr);
      }
      seq.insert(seq.end(), {tail, Lit("}")});
      return g_->Seq(std::move(seq));
    }
    std::vector<ExprId> after(n + 1);
    after[n] = tail;
    for (size_t i = n; i-- > 0;) {
      const ExprId write = g_->Seq({Sep(), members[i].expr});
      const ExprId body = g_->Seq({members[i].required ? write : g_->Optional(write), after[i + 1]});
      const int32_t rule = g_->AddRule(fmt::format("m{}", rule_count_++));
      g_->Define(rule, body);
      after[i] = g_->Ref(rule);
    }
    // none[i]: members i.. when nothing was written yet.
    ExprId none = extra ? g_->Optional(g_->Seq({*extra, tail})) : g_->Empty();
    for (size_t i = n; i-- > 0;) {
      const ExprId write = g_->Seq({members[i].expr, after[i + 1]});
      none = members[i].required ? write : g_->Alt({write, none});
    }
    return g_->Seq({Lit("{"), ws_, none, Lit("}")});
  }

  // ---- combinators ----
  base::Result<ExprId> Union(const Json& schema, const std::string& path) {
    if (schema.contains("anyOf") && schema.contains("oneOf")) return At(Join(path, "oneOf"), "`anyOf` and `oneOf` together are not supported");
    const char* key = schema.contains("anyOf") ? "anyOf" : "oneOf";
    const Json& branches = schema[key];
    if (!branches.is_array() || branches.empty()) return At(Join(path, key), "must be a non-empty array of schemas");
    Json rest = schema;
    rest.erase(key);
    const bool shared = HasAssertions(rest, {});
    std::vector<ExprId> alts;
    std::vector<BranchShape> shapes;
    for (size_t i = 0; i < branches.size(); ++i) {
      const std::string bpath = Join(path, fmt::format("{}.{}", key, i));
      Json branch = branches[i];
      if (shared) {
        FS_ASSIGN_OR_RETURN(branch, Merge(rest, branches[i], bpath));
      }
      FS_ASSIGN_OR_RETURN(ExprId e, Value(branch, bpath));
      alts.push_back(e);
      if (std::string_view(key) == "oneOf") {
        FS_ASSIGN_OR_RETURN(BranchShape shape, Shape(branch, bpath));
        for (size_t j = 0; j < shapes.size(); ++j) {
          if (MayOverlap(shapes[j], shape)) {
            return At(Join(path, key), fmt::format("branches {} and {} may both match one value, and `oneOf` allows exactly one: it is "
                                                   "enforced where branches cannot overlap (different types, distinct constants, or a "
                                                   "required property with distinct constants); use `anyOf` if either may match", j, i));
          }
        }
        shapes.push_back(std::move(shape));
      }
    }
    return g_->Alt(std::move(alts));
  }

  // What a oneOf branch shows of the values it takes (grammar/json_overlap.h).
  base::Result<BranchShape> Shape(Json schema, const std::string& path) {
    FS_ASSIGN_OR_RETURN(schema, Dereference(std::move(schema), path));
    BranchShape shape;
    if (!schema.is_object() || schema.contains("anyOf") || schema.contains("oneOf")) return shape;  // any value, as far as shown
    if (schema.contains("allOf")) {
      FS_ASSIGN_OR_RETURN(schema, MergeAllOf(schema, path));
    }
    if (schema.contains("const") || schema.contains("enum")) {
      shape.values = schema.contains("const") ? std::vector<nlohmann::json>{Unordered(schema["const"])} : UnorderedList(schema["enum"]);
      return shape;
    }
    if (!schema.contains("type")) return shape;  // keywords of one type leave the others free
    FS_ASSIGN_OR_RETURN(shape.types, Types(schema, path));
    const bool object = std::find(shape.types.begin(), shape.types.end(), "object") != shape.types.end();
    if (!object || !schema.contains("required") || !schema.contains("properties")) return shape;
    for (const Json& name : schema["required"]) {
      if (!name.is_string() || !schema["properties"].contains(name.get<std::string>())) continue;
      FS_ASSIGN_OR_RETURN(Json property, Dereference(schema["properties"][name.get<std::string>()], path));
      if (property.is_object() && property.contains("const")) shape.tags[name.get<std::string>()] = {Unordered(property["const"])};
      else if (property.is_object() && property.contains("enum") && property["enum"].is_array())
        shape.tags[name.get<std::string>()] = UnorderedList(property["enum"]);
    }
    return shape;
  }

  // A schema that is only a `$ref`, followed to its target.
  base::Result<Json> Dereference(Json schema, const std::string& path) {
    for (int depth = 0; schema.is_object() && schema.contains("$ref") && schema["$ref"].is_string(); ++depth) {
      if (depth > 16) return At(path, "references nest too deeply");
      FS_ASSIGN_OR_RETURN(const Json* target, Resolve(schema["$ref"].get<std::string>(), Join(path, "$ref")));
      schema = *target;
    }
    return schema;
  }

  base::Result<Json> MergeAllOf(const Json& schema, const std::string& path) {
    const Json& parts = schema["allOf"];
    if (!parts.is_array() || parts.empty()) return At(Join(path, "allOf"), "must be a non-empty array of schemas");
    Json merged = schema;
    merged.erase("allOf");
    for (size_t i = 0; i < parts.size(); ++i) {
      FS_ASSIGN_OR_RETURN(merged, Merge(merged, parts[i], Join(path, fmt::format("allOf.{}", i))));
    }
    return merged;
  }

  // The conjunction of two schemas, where it is again one schema (object properties and
  // required lists unite, types intersect, bounds tighten); otherwise an error.
  base::Result<Json> Merge(Json a, const Json& input, const std::string& path, int depth = 0) {
    if (depth > 16) return At(path, "references nest too deeply to merge");
    Json b = input;
    while (b.is_object() && b.contains("$ref") && !HasAssertions(b, {"$ref"})) {
      FS_ASSIGN_OR_RETURN(const Json* target, Resolve(b["$ref"].get<std::string>(), Join(path, "$ref")));
      b = *target;
      if (++depth > 16) return At(path, "references nest too deeply to merge");
    }
    if (b.is_boolean()) {
      if (b.get<bool>()) return a;
      return At(path, "the schema `false` allows no value");
    }
    if (!b.is_object()) return At(path, "a schema must be an object or a boolean");
    if (b.contains("allOf")) {
      FS_ASSIGN_OR_RETURN(b, MergeAllOf(b, path));
    }
    for (const auto& [k, v] : b.items()) {
      if (kAnnotations.count(k)) continue;
      if (!a.contains(k)) {
        a[k] = v;
      } else if (k == "properties") {
        for (const auto& [name, sub] : v.items()) {
          if (!a[k].contains(name) || a[k][name] == sub) a[k][name] = sub;
          else a[k][name] = Json{{"allOf", Json::array({a[k][name], sub})}};
        }
      } else if (k == "required") {
        for (const Json& r : v) {
          if (std::find(a[k].begin(), a[k].end(), r) == a[k].end()) a[k].push_back(r);
        }
      } else if (k == "type" && a[k] != v) {
        if ((a[k] == "integer" && v == "number") || (a[k] == "number" && v == "integer")) a[k] = "integer";
        else return At(Join(path, k), "conflicting types in a conjunction");
      } else if ((k == "minimum" || k == "minLength" || k == "minItems") && v.is_number()) {
        if (v > a[k]) a[k] = v;
      } else if ((k == "maximum" || k == "maxLength" || k == "maxItems") && v.is_number()) {
        if (v < a[k]) a[k] = v;
      } else if (a[k] != v) {
        return At(Join(path, k), "conflicting values in a conjunction cannot be enforced");
      }
    }
    return a;
  }

  const Json& root_;
  JsonGrammarOptions o_;
  Grammar* g_;
  ExprId ws_ = -1, digit_ = -1;
  std::map<std::string, int32_t> memo_, ref_rules_, any_;
  std::set<int32_t> ws_rules_;  // rules that end with their own trailing whitespace
  int rule_count_ = 0;
};

JsonValues::JsonValues(Grammar* grammar, const nlohmann::ordered_json& root, const JsonGrammarOptions& options)
    : impl_(std::make_unique<SchemaCompiler>(grammar, root, options)) {}

JsonValues::~JsonValues() = default;

base::Result<ExprId> JsonValues::Value(const nlohmann::ordered_json& schema, const std::string& path) {
  return impl_->Value(schema, path);
}

ExprId JsonValues::AnyValue() { return impl_->AnyValue(); }

base::Result<ExprId> BoundedStringText(const Json& schema, const std::string& path, bool json_string,
                                       const CodepointRanges& exclude, Grammar* g) {
  const bool has_len = schema.contains("minLength") || schema.contains("maxLength");
  const RegexContext anchored{json_string, false, exclude}, search{json_string, true, exclude};
  if (schema.contains("format")) {
    if (!schema["format"].is_string()) return At(Join(path, "format"), "must be a string");
    const std::string f = schema["format"].get<std::string>();
    std::string pattern;
    if (f == "date-time") pattern = kFormats.at("date") + "T" + kFormats.at("time");
    else if (auto it = kFormats.find(f); it != kFormats.end()) pattern = "(" + it->second + ")";
    else return At(Join(path, "format"), fmt::format("the format '{}' cannot be enforced", f));
    if (has_len || schema.contains("pattern")) return At(Join(path, "format"), "`format` with `pattern` or a length bound cannot be enforced");
    return CompileRegex(pattern, anchored, g);
  }
  if (schema.contains("pattern")) {
    if (!schema["pattern"].is_string()) return At(Join(path, "pattern"), "must be a string");
    if (has_len) return At(Join(path, "pattern"), "`pattern` with `minLength` / `maxLength` cannot be enforced");
    auto body = CompileRegex(schema["pattern"].get<std::string>(), search, g);
    if (!body.ok()) return At(Join(path, "pattern"), body.error().message());
    return *body;
  }
  FS_ASSIGN_OR_RETURN(int64_t min, Count(schema, "minLength", 0, path));
  FS_ASSIGN_OR_RETURN(int64_t max, Count(schema, "maxLength", kUnbounded, path));
  if (max != kUnbounded && max < min) return At(Join(path, "maxLength"), "is below minLength");
  CodepointRanges chars = ComplementRanges(exclude);
  return g->Repeat(CharacterIn(chars, json_string, g), static_cast<int32_t>(min), static_cast<int32_t>(max));
}

base::Result<Grammar> JsonSchemaGrammar(const nlohmann::ordered_json& schema, const JsonGrammarOptions& options) {
  Grammar g;
  return SchemaCompiler(&g, schema, options).Run();
}

Grammar JsonObjectGrammar(const JsonGrammarOptions& options) {
  static const Json kEmpty = Json::object();
  Grammar g;
  return SchemaCompiler(&g, kEmpty, options).AnyObject();
}

std::string SchemaErrorPath(const base::Error& error) {
  const std::string& m = error.message();
  const size_t colon = m.find(": ");
  if (colon == std::string::npos || m.compare(0, colon, "(schema root)") == 0) return "";
  const std::string head = m.substr(0, colon);
  return head.find(' ') == std::string::npos ? head : "";
}

}  // namespace flashserve::grammar
