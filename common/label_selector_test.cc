#include "common/label_selector.h"

#include "gtest/gtest.h"

namespace manta {
namespace {

using Labels = std::map<std::string, std::string>;

TEST(LabelSelectorTest, ExactNegatedAndInMatch) {
  Labels node = {{"zone", "a"}, {"manta.io/tpu-slice-name", "tpu-group-0"}};
  auto exact = LabelSelector::Parse(Labels{{"zone", "a"}});
  ASSERT_TRUE(exact.ok());
  EXPECT_TRUE(exact->Matches(node));
  EXPECT_FALSE(exact->Matches(Labels{{"zone", "b"}}));
  EXPECT_FALSE(exact->Matches(Labels{}));

  auto negated = *LabelSelector::Parse(Labels{{"zone", "!a"}});
  EXPECT_FALSE(negated.Matches(node));
  EXPECT_TRUE(negated.Matches(Labels{{"zone", "b"}}));
  EXPECT_TRUE(negated.Matches(Labels{}));

  auto in = *LabelSelector::Parse(Labels{{"manta.io/tpu-slice-name", "in(tpu-group-1, tpu-group-0)"}});
  EXPECT_TRUE(in.Matches(node));
  auto not_in = *LabelSelector::Parse(Labels{{"manta.io/tpu-slice-name", "!in(tpu-group-0)"}});
  EXPECT_FALSE(not_in.Matches(node));
  EXPECT_TRUE(not_in.Matches(Labels{}));

  auto both = *LabelSelector::Parse(Labels{{"zone", "a"}, {"pool", "tpu"}});
  EXPECT_FALSE(both.Matches(node));
  EXPECT_TRUE(LabelSelector().Matches(node));
}

TEST(LabelSelectorTest, RejectsMalformed) {
  EXPECT_FALSE(LabelSelector::Parse(Labels{{"", "a"}}).ok());
  EXPECT_FALSE(LabelSelector::Parse(Labels{{"zone", ""}}).ok());
  EXPECT_FALSE(LabelSelector::Parse(Labels{{"zone", "a b"}}).ok());
  EXPECT_FALSE(LabelSelector::Parse(Labels{{"zone", "in(a,b"}}).ok());
  EXPECT_FALSE(LabelSelector::Parse(Labels{{"zone", "in()"}}).ok());
  EXPECT_FALSE(LabelSelector::Parse(Labels{{"zone", std::string(64, 'x')}}).ok());
  EXPECT_FALSE(LabelSelector::Parse(Labels{{"bad key", "a"}}).ok());
}

TEST(LabelSelectorTest, RejectsUnknownTpuValues) {
  EXPECT_TRUE(LabelSelector::Parse(Labels{{"manta.io/accelerator-type", "TPU-V6E"}}).ok());
  EXPECT_TRUE(LabelSelector::Parse(Labels{{"manta.io/tpu-pod-type", "in(v6e-16,v4-8)"}}).ok());
  EXPECT_TRUE(LabelSelector::Parse(Labels{{"manta.io/tpu-topology", "!4x4"}}).ok());
  auto bad = LabelSelector::Parse(Labels{{"manta.io/accelerator-type", "TPU-V99"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TPU-V99"), std::string::npos) << bad.status();
  EXPECT_FALSE(LabelSelector::Parse(Labels{{"manta.io/tpu-pod-type", "in(v6e-16,v99-8)"}}).ok());
  EXPECT_FALSE(LabelSelector::Parse(Labels{{"manta.io/tpu-topology", "0x9"}}).ok());
  // Other keys keep any well-formed value.
  EXPECT_TRUE(LabelSelector::Parse(Labels{{"accelerator-type", "TPU-V99"}}).ok());
}

}  // namespace
}  // namespace manta
