#include "serve/slice/current_group.h"

#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace manta::serve {
namespace {

// Only compared, never called through.
GroupEngine* FakeGroup() {
  static char place;
  return reinterpret_cast<GroupEngine*>(&place);
}

TEST(CurrentGroupTest, APromptThatArrivesWhileTheGroupFormsWaitsForIt) {
  CurrentGroup current;
  // The group forms a moment after the prompt arrives (that moment is what
  // is tested, hence the pause).
  std::thread forming([&] {
    absl::SleepFor(absl::Milliseconds(200));
    current.Set(FakeGroup());
  });
  GroupEngine* seen = nullptr;
  absl::Status status = current.With(absl::Seconds(60), [&](GroupEngine* g) {
    seen = g;
    return absl::OkStatus();
  });
  forming.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(seen, FakeGroup());
}

TEST(CurrentGroupTest, NoGroupInTimeIsUnavailableAndRunsNothing) {
  CurrentGroup current;
  bool ran = false;
  absl::Status s = current.With(absl::Milliseconds(20), [&](GroupEngine*) {
    ran = true;
    return absl::OkStatus();
  });
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_FALSE(ran);
}

TEST(CurrentGroupTest, ClearedGroupIsNoLongerReachedAndFnStatusIsReturned) {
  CurrentGroup current;
  current.Set(FakeGroup());
  EXPECT_TRUE(absl::IsResourceExhausted(
      current.With(absl::ZeroDuration(), [](GroupEngine*) { return absl::ResourceExhaustedError("backlog"); })));
  current.Clear();
  EXPECT_TRUE(absl::IsUnavailable(current.With(absl::ZeroDuration(), [](GroupEngine*) { return absl::OkStatus(); })));
}

}  // namespace
}  // namespace manta::serve
