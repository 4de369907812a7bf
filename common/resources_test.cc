#include "common/resources.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace manta {
namespace {

TEST(QuantityTest, RejectsNanInfNegativeAndTiny) {
  EXPECT_FALSE(Quantity::FromDouble(std::nan("")).ok());
  EXPECT_FALSE(Quantity::FromDouble(std::numeric_limits<double>::infinity()).ok());
  EXPECT_FALSE(Quantity::FromDouble(-1).ok());
  EXPECT_FALSE(Quantity::FromDouble(1e16).ok());
  EXPECT_FALSE(Quantity::FromDouble(0.00001).ok());
  EXPECT_TRUE(Quantity::FromDouble(0).ok());
}

TEST(QuantityTest, LargeValuesNeverWrapNegative) {
  auto max = Quantity::FromDouble(Quantity::kMaxValue);
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_EQ(max->units(), static_cast<int64_t>(Quantity::kMaxValue) * Quantity::kScale);
  EXPECT_DOUBLE_EQ(max->ToDouble(), Quantity::kMaxValue);
  for (double v : {9.3e14, 1e15, 9.3e18}) {
    auto q = Quantity::FromDouble(v);
    ASSERT_FALSE(q.ok()) << v << " -> " << q->units();
    EXPECT_NE(q.status().message().find("larger than the maximum 9e+14"), std::string::npos) << q.status();
  }
}

TEST(QuantityTest, SumsSaturateInsteadOfOverflowing) {
  Quantity max = *Quantity::FromDouble(Quantity::kMaxValue);
  Quantity total;
  for (int i = 0; i < 20; ++i) total = total + max;
  EXPECT_EQ(total.units(), Quantity::kMaxUnits);
  EXPECT_EQ((Quantity::FromUnits(Quantity::kMaxUnits) + Quantity::FromUnits(1)).units(), Quantity::kMaxUnits);
  EXPECT_EQ((Quantity::FromUnits(5) + Quantity::FromUnits(7)).units(), 12);
}

TEST(QuantityTest, FixedPointHasNoDrift) {
  Quantity total;
  auto tenth = *Quantity::FromDouble(0.1);
  for (int i = 0; i < 10; ++i) total = total + tenth;
  EXPECT_EQ(total, *Quantity::FromDouble(1.0));
  EXPECT_EQ(tenth.units(), 1000);
}

TEST(ResourceSetTest, AddSubtractContains) {
  auto a = *ResourceSet::FromMap({{"CPU", 2}, {"TPU", 4}});
  auto b = *ResourceSet::FromMap({{"TPU", 4}});
  EXPECT_TRUE(a.Contains(b));
  a.Subtract(b);
  EXPECT_FALSE(a.Contains(b));
  EXPECT_EQ(a.size(), 1u);  // TPU went to zero and is absent
  a.Add(b);
  EXPECT_EQ(a.Get("TPU").ToDouble(), 4.0);
}

TEST(ResourceSetTest, ErrorsNameTheResource) {
  auto r = ResourceSet::FromMap({{"TPU", std::nan("")}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("TPU"), std::string::npos);
  EXPECT_FALSE(ResourceSet::FromMap({{"bad name", 1}}).ok());
  EXPECT_FALSE(ResourceSet::FromMap({{"", 1}}).ok());
}

TEST(ResourceSetTest, ParsesJson) {
  auto r = ParseResourcesJson(R"({"custom": 2.5, "TPU": 4})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->Get("custom").units(), 25000);
  EXPECT_FALSE(ParseResourcesJson("{not json").ok());
  EXPECT_FALSE(ParseResourcesJson("[1,2]").ok());
  EXPECT_FALSE(ParseResourcesJson(R"({"a": "x"})").ok());
  EXPECT_FALSE(ParseResourcesJson(R"({"a": -1})").ok());
  EXPECT_FALSE(ParseResourcesJson(R"({"a": 1e300})").ok());
}

TEST(ResourceSetTest, JsonWithANameGivenTwiceIsRefused) {
  auto r = ParseResourcesJson(R"({"custom": 1, "other": 2, "custom": 3})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "resource 'custom' is given twice");
  EXPECT_TRUE(ParseResourcesJson(R"({"a": 1, "b": 1})").ok());
}

TEST(CheckCustomResourceNameTest, RefusesNamesMantaSetsItself) {
  for (const char* name : {"node:__internal_head__", "node:10.0.0.7", "TPU", "TPU-v6e-16-head", "TPU-v4-8-head"}) {
    absl::Status s = CheckCustomResourceName(name);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(s.message().find(std::string("'") + name + "' is reserved"), std::string::npos) << s;
  }
  for (const char* name : {"custom", "tpu", "TPU-v6e-16", "accelerator_type:TPU-V6E", "node", "my-TPU-head"}) {
    EXPECT_TRUE(CheckCustomResourceName(name).ok()) << name;
  }
}

TEST(FormatQuantityTest, LooksLikePythonFloats) {
  EXPECT_EQ(FormatQuantity(0), "0.0");
  EXPECT_EQ(FormatQuantity(32), "32.0");
  EXPECT_EQ(FormatQuantity(0.5), "0.5");
  EXPECT_EQ(FormatQuantity(0.001), "0.001");
}

}  // namespace
}  // namespace manta
