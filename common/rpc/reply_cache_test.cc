#include "common/rpc/reply_cache.h"

#include "gtest/gtest.h"
#include "proto/gcs_service.pb.h"

namespace manta::rpc {
namespace {

using Cache = ReplyCache<KvDelReply>;

// A handler that counts its runs, answering deleted = runs (so a second run
// would be visible in the reply), and leaves completion to the test.
struct Handler {
  explicit Handler(size_t capacity = 100) : cache(capacity) {}
  Cache cache;
  int runs = 0;
  Done pending;

  void Handle(const std::string& id, KvDelReply* reply, Done done) {
    if (cache.Replay(id, reply, done)) return;
    done = cache.Record(id, reply, std::move(done));
    reply->set_deleted(++runs);
    pending = std::move(done);
  }
  void Finish(const absl::Status& s = absl::OkStatus()) {
    Done d = std::move(pending);
    d(s);
  }
};

TEST(ReplyCacheTest, RetryGetsTheFirstReply) {
  Handler h;
  KvDelReply first, second;
  absl::Status s1 = absl::UnknownError("unset"), s2 = absl::UnknownError("unset");
  h.Handle("id", &first, [&](const absl::Status& s) { s1 = s; });
  h.Finish();
  h.Handle("id", &second, [&](const absl::Status& s) { s2 = s; });
  EXPECT_TRUE(s1.ok());
  EXPECT_TRUE(s2.ok());
  EXPECT_EQ(h.runs, 1);
  EXPECT_EQ(second.deleted(), first.deleted());
}

TEST(ReplyCacheTest, RetryWhileRunningWaitsForTheFirst) {
  Handler h;
  KvDelReply first, second;
  int answered = 0;
  h.Handle("id", &first, [&](const absl::Status&) { ++answered; });
  Done keep = std::move(h.pending);
  h.Handle("id", &second, [&](const absl::Status&) { ++answered; });
  EXPECT_EQ(answered, 0);
  EXPECT_EQ(h.runs, 1);
  keep(absl::OkStatus());
  EXPECT_EQ(answered, 2);
  EXPECT_EQ(second.deleted(), 1);
}

TEST(ReplyCacheTest, FailureIsNotKept) {
  Handler h;
  KvDelReply reply;
  absl::Status got;
  h.Handle("id", &reply, [&](const absl::Status& s) { got = s; });
  h.Finish(absl::UnavailableError("store down"));
  EXPECT_TRUE(absl::IsUnavailable(got));
  h.Handle("id", &reply, [&](const absl::Status& s) { got = s; });
  h.Finish();
  EXPECT_TRUE(got.ok());
  EXPECT_EQ(h.runs, 2);
}

TEST(ReplyCacheTest, EmptyIdIsNeverCached) {
  Handler h;
  KvDelReply reply;
  h.Handle("", &reply, [](const absl::Status&) {});
  h.Finish();
  h.Handle("", &reply, [](const absl::Status&) {});
  h.Finish();
  EXPECT_EQ(h.runs, 2);
  EXPECT_EQ(h.cache.size(), 0u);
}

TEST(ReplyCacheTest, OldestIdsAreForgotten) {
  Handler h(2);
  KvDelReply reply;
  for (const char* id : {"a", "b", "c"}) {
    h.Handle(id, &reply, [](const absl::Status&) {});
    h.Finish();
  }
  EXPECT_EQ(h.cache.size(), 2u);
  h.Handle("a", &reply, [](const absl::Status&) {});  // forgotten: runs again
  h.Finish();
  EXPECT_EQ(h.runs, 4);
  h.Handle("c", &reply, [](const absl::Status&) {});  // kept
  EXPECT_EQ(h.runs, 4);
}

TEST(ReplyCacheTest, RequestIdsAreBounded) {
  EXPECT_TRUE(ValidateRequestId("").ok());
  EXPECT_TRUE(ValidateRequestId(NewRequestId()).ok());
  EXPECT_NE(NewRequestId(), NewRequestId());
  EXPECT_EQ(ValidateRequestId(std::string(65, 'x')).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace manta::rpc
