#include "gcs/kv_manager.h"

#include <thread>

#include "common/package_name.h"
#include "common/sha256.h"
#include "gcs/in_memory_store.h"
#include "gcs/test_util.h"
#include "gtest/gtest.h"

namespace manta::gcs {
namespace {

TEST(KvManagerTest, PutGetDelKeysAndRecovery) {
  EventLoop loop;
  InMemoryStore store(&loop);
  auto ok = [](const absl::Status& s) { EXPECT_TRUE(s.ok()) << s; };
  {
    KvManager kv(&store);
    rpc::KvPutRequest put;
    put.set_ns("job");
    for (const char* k : {"a/1", "a/2", "b/1"}) {
      put.set_key(k);
      put.set_value(std::string("v-") + k);
      rpc::KvPutReply reply;
      kv.HandlePut(put, &reply, ok);
      EXPECT_TRUE(reply.added());
    }
    put.set_key("a/1");
    put.set_value("changed");
    rpc::KvPutReply reply;
    kv.HandlePut(put, &reply, ok);  // overwrite=false keeps the old value
    EXPECT_FALSE(reply.added());
    rpc::KvDelRequest del;
    del.set_ns("job");
    del.set_key("b/");
    del.set_by_prefix(true);
    rpc::KvDelReply del_reply;
    kv.HandleDel(del, &del_reply, ok);
    EXPECT_EQ(del_reply.deleted(), 1);
    Pump(loop);
  }
  KvManager kv(&store);
  ASSERT_TRUE(kv.Initialize().ok());
  rpc::KvKeysRequest keys;
  keys.set_ns("job");
  keys.set_prefix("a/");
  rpc::KvKeysReply keys_reply;
  kv.HandleKeys(keys, &keys_reply, ok);
  ASSERT_EQ(keys_reply.keys_size(), 2);
  EXPECT_EQ(keys_reply.keys(0), "a/1");
  rpc::KvGetRequest get;
  get.set_ns("job");
  get.set_key("a/1");
  rpc::KvGetReply got;
  kv.HandleGet(get, &got, ok);
  EXPECT_TRUE(got.found());
  EXPECT_EQ(got.value(), "v-a/1");
  get.set_ns("other");
  rpc::KvGetReply missing;
  kv.HandleGet(get, &missing, ok);
  EXPECT_FALSE(missing.found());
}

TEST(KvManagerTest, RejectsBadKeys) {
  EventLoop loop;
  InMemoryStore store(&loop);
  KvManager kv(&store);
  rpc::KvPutRequest put;
  rpc::KvPutReply reply;
  absl::Status result;
  kv.HandlePut(put, &reply, [&](const absl::Status& s) { result = s; });
  EXPECT_EQ(result.code(), absl::StatusCode::kInvalidArgument);
  put.set_key(std::string(5000, 'k'));
  kv.HandlePut(put, &reply, [&](const absl::Status& s) { result = s; });
  EXPECT_EQ(result.code(), absl::StatusCode::kInvalidArgument);
  put.set_key("k");
  put.set_ns(std::string("a\0b", 3));
  kv.HandlePut(put, &reply, [&](const absl::Status& s) { result = s; });
  EXPECT_EQ(result.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store.ReadAll("kv")->empty());
}

// Packages are stored by content: a name that is not the value's own is
// refused, so a raylet never fetches other bytes under a package's name.
TEST(KvManagerTest, PackagesMustBeNamedByTheirContent) {
  EventLoop loop;
  InMemoryStore store(&loop);
  KvManager kv(&store);
  rpc::KvPutRequest put;
  put.set_ns(kPackageKvNamespace);
  put.set_value("archive bytes");
  put.set_key(PackageNameOf("other bytes"));
  rpc::KvPutReply reply;
  absl::Status result;
  kv.HandlePut(put, &reply, [&](const absl::Status& s) { result = s; });
  EXPECT_EQ(result.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.message().find("does not match its content"), std::string::npos) << result;
  put.set_key(PackageNameOf(put.value()));
  bool stored = false;
  kv.HandlePut(put, &reply, [&](const absl::Status& s) {
    stored = true;
    result = s;
  });
  Pump(loop);
  EXPECT_TRUE(stored);
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_TRUE(reply.added());
}

// A front end's exported functions are stored under the SHA-256 of their
// bytes: a worker never unpickles other bytes under a function's name.
TEST(KvManagerTest, FunctionsMustBeNamedByTheirContent) {
  EventLoop loop;
  InMemoryStore store(&loop);
  KvManager kv(&store);
  rpc::KvPutRequest put;
  put.set_ns(kFunctionKvNamespace);
  put.set_value("pickled function");
  put.set_key(Sha256Hex("another function"));
  rpc::KvPutReply reply;
  absl::Status result;
  kv.HandlePut(put, &reply, [&](const absl::Status& s) { result = s; });
  EXPECT_EQ(result.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.message().find("does not match its content"), std::string::npos) << result;
  put.set_key(Sha256Hex(put.value()));
  bool stored = false;
  kv.HandlePut(put, &reply, [&](const absl::Status& s) {
    stored = true;
    result = s;
  });
  Pump(loop);
  EXPECT_TRUE(stored && result.ok()) << result;
}

// The managers live on the GCS's loop thread, bound by their first call:
// a handler called from another thread aborts instead of racing with it.
TEST(KvManagerTest, AHandlerCalledOffItsThreadAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        EventLoop loop;
        InMemoryStore store(&loop);
        KvManager kv(&store);
        rpc::KvGetRequest get;
        get.set_ns("job");
        get.set_key("a");
        rpc::KvGetReply reply;
        kv.HandleGet(get, &reply, [](const absl::Status&) {});
        std::thread([&] { kv.HandleGet(get, &reply, [](const absl::Status&) {}); }).join();
      },
      "kv_manager.cc:[0-9]+: CHECK.*called off the thread it lives on");
}

}  // namespace
}  // namespace manta::gcs
