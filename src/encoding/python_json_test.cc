// Python json.dumps(ensure_ascii=False) compatibility. Expected strings were produced by
// CPython 3 (`json.dumps(x, ensure_ascii=False)`, `repr(float)`).
#include "encoding/python_json.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace flashserve::encoding {
namespace {

using Json = nlohmann::ordered_json;

TEST(PythonJsonTest, FloatRepr) {
  const std::pair<double, const char*> cases[] = {
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {1.0, "1.0"},
      {1.5, "1.5"},
      {0.1, "0.1"},
      {1e+16, "1e+16"},
      {1000000000000000.0, "1000000000000000.0"},
      {9999999999999998.0, "9999999999999998.0"},
      {1.2345678901234568e+17, "1.2345678901234568e+17"},
      {0.001, "0.001"},
      {0.0001, "0.0001"},
      {1e-05, "1e-05"},
      {1.5e-07, "1.5e-07"},
      {1e+22, "1e+22"},
      {1e-300, "1e-300"},
      {5e-324, "5e-324"},
      {1.7976931348623157e+308, "1.7976931348623157e+308"},
      {100.0, "100.0"},
      {0.30000000000000004, "0.30000000000000004"},
      {1.0 / 3.0, "0.3333333333333333"},
      {12345.678, "12345.678"},
      {-1e-10, "-1e-10"},
  };
  for (const auto& [value, expected] : cases)
    EXPECT_EQ(PythonFloatRepr(value), expected) << expected;
  EXPECT_EQ(PythonFloatRepr(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(PythonFloatRepr(std::numeric_limits<double>::infinity()), "Infinity");
  EXPECT_EQ(PythonFloatRepr(-std::numeric_limits<double>::infinity()), "-Infinity");
}

TEST(PythonJsonTest, DumpsMatchesPython) {
  Json value = Json::parse(
      "{\"a\": [1, 2.0, null, true, \"x\\\"\\\\\\n\\r\\t\\b\\f\\u0001\\u001f\\u007f é😀\"], "
      "\"b\": {}, \"c\": [], \"d\": -7, \"e\": 18446744073709551615}");
  EXPECT_EQ(PythonJsonDumps(value),
            "{\"a\": [1, 2.0, null, true, \"x\\\"\\\\\\n\\r\\t\\b\\f\\u0001\\u001f\x7f é😀\"], "
            "\"b\": {}, \"c\": [], \"d\": -7, \"e\": 18446744073709551615}");
}

TEST(PythonJsonTest, DumpsKeepsInsertionOrderAndParsedFloats) {
  // json.loads keeps key order and the first position of a repeated key (with the last value).
  Json value = Json::parse(R"({"z": 1, "a": 1e4, "m": 1E-7, "z": 2.50})");
  EXPECT_EQ(PythonJsonDumps(value), R"({"z": 2.5, "a": 10000.0, "m": 1e-07})");
}

TEST(PythonJsonTest, LoadsRejectsWhatPythonRejects) {
  EXPECT_TRUE(PythonJsonLoads(" {\"a\": 1} ").has_value());
  EXPECT_TRUE(PythonJsonLoads("\"s\"").has_value());
  EXPECT_FALSE(PythonJsonLoads("\xEF\xBB\xBF{}").has_value());
  EXPECT_FALSE(PythonJsonLoads("{\"a\": 1} x").has_value());
  EXPECT_FALSE(PythonJsonLoads("city=Paris").has_value());
  EXPECT_FALSE(PythonJsonLoads("").has_value());
}

}  // namespace
}  // namespace flashserve::encoding
