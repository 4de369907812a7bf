#include "serve/slice/current_group.h"

#include <thread>

#include "absl/time/clock.h"
#include "common/process.h"
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
  GroupEngine* seen = nullptr;
  absl::Status status;
  std::thread prompt([&] {
    status = current.With(absl::Seconds(60), [&](GroupEngine* g) {
      seen = g;
      return absl::OkStatus();
    });
  });
  // The group forms only once the prompt is waiting for it.
  EXPECT_TRUE(PollUntil([&] { return current.waiting() == 1; }, absl::Now() + absl::Seconds(10)))
      << "the prompt did not wait for the group";
  current.Set(FakeGroup());
  prompt.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(seen, FakeGroup());
  EXPECT_EQ(current.waiting(), 0);
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
