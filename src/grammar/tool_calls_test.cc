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
// whose schema cannot be enforced (a bounded raw string) takes any value instead of a refusal.
TEST(ToolCalls, ForcedCallsFollowSchemasWherePossible) {
  Json loose = kWeather;
  loose["strict"] = false;
  loose["parameters"]["properties"]["city"]["maxLength"] = 3;
  auto g = Compile({{"mode", "required"}, {"tools", {loose}}});
  EXPECT_TRUE(testing::Matches(g, Block({{"get_weather", {{"city", true, "Paris"}, {"days", false, "3"}}}})))
      << "the bounded string is free";
  EXPECT_TRUE(testing::Matches(g, Block({{"get_weather", {{"city", false, "[1]"}}}}))) << "of either kind";
  EXPECT_FALSE(testing::Matches(g, Block({{"get_weather", {{"city", true, "P"}, {"days", false, "9"}}}}))) << "days <= 7";
  EXPECT_FALSE(testing::Matches(g, Block({{"get_weather", {{"city", true, "P"}, {"days", true, "many"}}}})));
  EXPECT_FALSE(testing::Matches(g, Block({{"get_weather", {{"city", true, "P"}, {"unit", true, "k"}}}})));
}

TEST(ToolCalls, RefusesStringBoundsItCannotEnforceRaw) {
  Json bounded = kWeather;
  bounded["parameters"]["properties"]["city"]["maxLength"] = 10;
  Json spec = {{"mode", "required"}, {"tools", {bounded}}};
  auto g = ToolCallGrammar(spec);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message().find("tools[0].parameters.properties.city"), std::string::npos);
}

}  // namespace
}  // namespace flashserve::grammar
