// The serving group's wire: what a float carries exactly goes through, and
// a token, slot or id past that is an error instead of a changed value.
#include "serve/engine/group_wire.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace manta::serve::wire {
namespace {

bool Mentions(const absl::Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

TEST(GroupWireTest, IntegersBelowTwoToThe24GoThroughExactly) {
  Encoder e(kPrefill);
  e.AddInt(0, "a count").AddInt(kIntLimit - 1, "a slot").AddToken(12345).AddToken(kIntLimit - 1);
  absl::StatusOr<std::vector<float>> floats = std::move(e).Finish();
  ASSERT_TRUE(floats.ok()) << floats.status();
  ASSERT_EQ(floats->size(), 5u);
  EXPECT_EQ((*floats)[0], static_cast<float>(kPrefill));
  EXPECT_EQ(*ReadInt((*floats)[1], "a count"), 0);
  EXPECT_EQ(*ReadInt((*floats)[2], "a slot"), kIntLimit - 1);
  EXPECT_EQ(*ReadInt((*floats)[3], "a token"), 12345);
  EXPECT_EQ(*ReadInt((*floats)[4], "a token"), kIntLimit - 1);
}

TEST(GroupWireTest, ATokenOfTwoToThe24OrMoreIsAnError) {
  for (int64_t token : {kIntLimit, kIntLimit + 1, int64_t{std::numeric_limits<int32_t>::max()}, int64_t{-1}}) {
    Encoder e(kDecode);
    e.AddInt(1, "a count").AddInt(0, "a slot").AddToken(token);
    absl::StatusOr<std::vector<float>> floats = std::move(e).Finish();
    ASSERT_FALSE(floats.ok()) << token;
    EXPECT_EQ(floats.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Mentions(floats.status(), "a token id of " + std::to_string(token))) << floats.status();
  }
}

TEST(GroupWireTest, TheFirstValueOutOfRangeIsTheErrorAndNothingLaterIsKept) {
  Encoder e(kDecode);
  e.AddInt(2, "a count").AddInt(kIntLimit, "a slot").AddToken(-5).AddToken(7);
  absl::StatusOr<std::vector<float>> floats = std::move(e).Finish();
  ASSERT_FALSE(floats.ok());
  EXPECT_TRUE(Mentions(floats.status(), "a slot of 16777216")) << floats.status();
}

TEST(GroupWireTest, IdsBelowTwoToThe44RoundTrip) {
  for (int64_t id : {int64_t{0}, int64_t{1}, kIdHalf - 1, kIdHalf, int64_t{123456789012}, kIdLimit - 1}) {
    Encoder e(kPrefillOut);
    e.AddIdHigh(id).AddIdLow(id);
    absl::StatusOr<std::vector<float>> floats = std::move(e).Finish();
    ASSERT_TRUE(floats.ok()) << id << ": " << floats.status();
    ASSERT_EQ(floats->size(), 3u);
    absl::StatusOr<int64_t> back = JoinId((*floats)[1], (*floats)[2]);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, id);
  }
}

TEST(GroupWireTest, AnIdOfTwoToThe44OrMoreIsAnError) {
  for (int64_t id : {kIdLimit, kIdLimit + 1, std::numeric_limits<int64_t>::max(), int64_t{-1}}) {
    for (bool high : {true, false}) {
      Encoder e(kPrefillOut);
      if (high) {
        e.AddIdHigh(id);
      } else {
        e.AddIdLow(id);
      }
      absl::StatusOr<std::vector<float>> floats = std::move(e).Finish();
      ASSERT_FALSE(floats.ok()) << id;
      EXPECT_EQ(floats.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_TRUE(Mentions(floats.status(), "request id " + std::to_string(id))) << floats.status();
    }
  }
}

TEST(GroupWireTest, ReadingRefusesWhatNoEncoderWrites) {
  for (float f : {-1.0f, 0.5f, static_cast<float>(kIntLimit), std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(ReadInt(f, "a slot").status().code(), absl::StatusCode::kInvalidArgument) << f;
  }
  EXPECT_EQ(JoinId(1, static_cast<float>(kIdHalf)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(JoinId(-2, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GroupWireTest, ATransferHeaderRoundTripsAndRefusesWhatDoesNotFit) {
  const TransferHeader sent{kIdLimit - 3, 48, 257};
  float header[TransferHeader::kFloats] = {0, 0, 0, 0};
  ASSERT_TRUE(sent.Encode(header).ok());
  absl::StatusOr<TransferHeader> got = TransferHeader::Decode(header);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->id, sent.id);
  EXPECT_EQ(got->len, sent.len);
  EXPECT_EQ(got->first_token, sent.first_token);

  const float before[TransferHeader::kFloats] = {kHeaderNoop, 1, 2, 3};
  for (const TransferHeader& bad : {TransferHeader{kIdLimit, 1, 1}, TransferHeader{1, kIntLimit, 1},
                                    TransferHeader{1, 1, static_cast<int32_t>(kIntLimit)}}) {
    std::copy(before, before + TransferHeader::kFloats, header);
    absl::Status s = bad.Encode(header);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    for (int i = 0; i < TransferHeader::kFloats; ++i) EXPECT_EQ(header[i], before[i]) << "written: " << i;
  }
  const float garbage[TransferHeader::kFloats] = {1, 2, -3, 4};
  EXPECT_EQ(TransferHeader::Decode(garbage).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace manta::serve::wire
