// Money, windows, price books and tenant validation (meter/tenant.h).
#include "meter/tenant.h"

#include <gtest/gtest.h>

namespace flashserve::meter {
namespace {

TEST(TenantTest, MoneyIsExactInMicroUnits) {
  EXPECT_EQ(*ParseMoney("0.15"), 150000);
  EXPECT_EQ(*ParseMoney("0.003"), 3000);
  EXPECT_EQ(*ParseMoney("2"), 2000000);
  EXPECT_EQ(*ParseMoney("999999999999.999999"), 999'999'999'999'999'999);
  for (const char* bad : {"", ".5", "1.", "-1", "1e3", "0.1234567", "1,5", "1000000000000", " 1"})
    EXPECT_FALSE(ParseMoney(bad).ok()) << bad;
  EXPECT_EQ(FormatMoney(150000), "0.15");
  EXPECT_EQ(FormatMoney(3000), "0.003");
  EXPECT_EQ(FormatMoney(2000000), "2");
  EXPECT_EQ(FormatMoney(-2500000), "-2.5");
  EXPECT_EQ(FormatMoney(0), "0");
}

TEST(TenantTest, OffPeakWindowsWrapPastMidnight) {
  PriceBook book;
  book.standard = {100, 10, 400};
  auto window = ParseWindow("16:30-00:30");
  ASSERT_TRUE(window.ok());
  EXPECT_EQ(window->first, 990);
  EXPECT_EQ(window->second, 30);
  book.off_peak = OffPeak{window->first, window->second, {50, 5, 200}};
  const int64_t day = 1'790'000'000 - 1'790'000'000 % 86400;  // a midnight UTC
  EXPECT_EQ(book.RatesAt(day + 16 * 3600 + 29 * 60).output, 400);  // 16:29
  EXPECT_EQ(book.RatesAt(day + 16 * 3600 + 30 * 60).output, 200);  // 16:30
  EXPECT_EQ(book.RatesAt(day + 23 * 3600).output, 200);
  EXPECT_EQ(book.RatesAt(day + 86400 + 29 * 60).output, 200);      // 00:29 next day
  EXPECT_EQ(book.RatesAt(day + 86400 + 30 * 60).output, 400);      // 00:30
  for (const char* bad : {"16:30", "24:00-01:00", "16:30-00:60", "1:30-02:00", "16:30-00:30x"})
    EXPECT_FALSE(ParseWindow(bad).ok()) << bad;
  EXPECT_EQ(FormatWindow(990, 30), "16:30-00:30");
}

TEST(TenantTest, PriceBooksAndLimitsRoundTripThroughJson) {
  PriceBook book;
  book.currency = "EUR";
  book.standard = {150000, 3000, 600000};
  book.off_peak = OffPeak{990, 30, {75000, 1500, 300000}};
  auto back = PriceBookFromJson(PriceBookJson(book));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, book);
  Limits limits{60, 1000, 500, 3, 2'500'000};
  auto lim = LimitsFromJson(LimitsJson(limits));
  ASSERT_TRUE(lim.ok());
  EXPECT_EQ(*lim, limits);
  EXPECT_FALSE(LimitsFromJson(Json{{"requests_per_minute", "60"}}).ok());
  EXPECT_FALSE(PriceBookFromJson(Json{{"currency", "USD"}, {"per_million_tokens", {{"input", 0.15}}}}).ok());
}

TEST(TenantTest, ValidationNamesTheField) {
  Tenant t;
  t.name = "acme";
  t.cache_namespace = "acme";
  EXPECT_TRUE(ValidateTenant(t).ok());
  t.prices.currency = "usd";
  EXPECT_NE(ValidateTenant(t).error().message().find("currency"), std::string::npos);
  t.prices.currency = "USD";
  t.cache_namespace = "a/b";
  EXPECT_NE(ValidateTenant(t).error().message().find("namespace"), std::string::npos);
  t.cache_namespace = "acme";
  t.prices.off_peak = OffPeak{60, 60, {}};
  EXPECT_NE(ValidateTenant(t).error().message().find("off-peak"), std::string::npos);
  t.prices.off_peak.reset();
  t.limits.concurrent_requests = -1;
  EXPECT_NE(ValidateTenant(t).error().message().find("limits"), std::string::npos);
}

}  // namespace
}  // namespace flashserve::meter
