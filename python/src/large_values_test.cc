#include "python/src/large_values.h"

#include "gtest/gtest.h"

namespace manta::python {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

std::shared_ptr<const std::string> Value(LargeValues& pool, size_t bytes) {
  std::string s = pool.Take(bytes);
  s.append(bytes, 'x');
  return pool.Share(std::move(s));
}

TEST(LargeValuesTest, AFreedValuesBufferIsTheNextOnesWithItsPagesInPlace) {
  LargeValues pool;
  auto first = Value(pool, 8 * kMiB);
  const char* buffer = first->data();
  EXPECT_EQ(pool.pooled_bytes(), 0u);
  first.reset();
  EXPECT_GE(pool.pooled_bytes(), 8 * kMiB);
  std::string next = pool.Take(7 * kMiB);
  EXPECT_EQ(next.data(), buffer);
  EXPECT_TRUE(next.empty());
  EXPECT_EQ(pool.pooled_bytes(), 0u);
}

TEST(LargeValuesTest, SmallValuesAndFarLargerBuffersAreNotReused) {
  LargeValues pool;
  Value(pool, 64 * 1024).reset();
  EXPECT_EQ(pool.pooled_bytes(), 0u);
  auto big = Value(pool, 20 * kMiB);
  const char* buffer = big->data();
  big.reset();
  std::string small = pool.Take(5 * kMiB);  // 20 MiB would be 4 times too big
  EXPECT_NE(small.data(), buffer);
  EXPECT_GE(pool.pooled_bytes(), 20 * kMiB);
}

TEST(LargeValuesTest, ThePoolHoldsAtMostItsBoundDroppingTheOldest) {
  LargeValues pool(/*max_pooled_bytes=*/25 * kMiB);
  std::vector<std::shared_ptr<const std::string>> values;
  std::vector<const char*> buffers;
  for (int i = 0; i < 4; ++i) {
    values.push_back(Value(pool, 10 * kMiB));
    buffers.push_back(values.back()->data());
  }
  for (auto& v : values) v.reset();  // oldest first
  EXPECT_LE(pool.pooled_bytes(), 25 * kMiB);
  EXPECT_GE(pool.pooled_bytes(), 20 * kMiB);
  const std::string reused = pool.Take(10 * kMiB);
  EXPECT_TRUE(reused.data() == buffers[2] || reused.data() == buffers[3]);
}

}  // namespace
}  // namespace manta::python
