#include "common/rpc/first_request.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/rpc/grpc_util.h"
#include "common/rpc/http2_frames.h"
#include "common/rpc/http2_test_frames.h"
#include "gtest/gtest.h"

namespace manta::rpc {
namespace {

using testing::Block;
using testing::Frame;

// What a real gRPC client sends first when it calls `method` with `token`
// on a connection this test accepts and answers with the server preface.
std::string RealClientStart(const std::string& token, const std::string& method) {
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(listener);
    return "";
  }
  auto channel = MakeChannel("127.0.0.1:" + std::to_string(ntohs(addr.sin_port)));
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  PrepareContext(&ctx, token, absl::Seconds(5));
  grpc::Slice body(std::string(1000, 'b'));
  grpc::ByteBuffer request(&body, 1), reply;
  absl::Notification done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &reply, [&](grpc::Status) { done.Notify(); });
  std::string bytes;
  int fd = accept(listener, nullptr, nullptr);
  if (fd >= 0) {
    const std::string preface = http2::ServerPreface();
    (void)!write(fd, preface.data(), preface.size());
    absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (absl::Now() < deadline && ParseFirstRequest(bytes).kind == FirstRequest::kNeedMore) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) break;
      bytes.append(buf, static_cast<size_t>(n));
    }
    close(fd);
  }
  close(listener);
  ctx.TryCancel();
  done.WaitForNotification();
  return bytes;
}

TEST(FirstRequestTest, AnUnmodifiedGrpcClientsTokenAndMethodAreRead) {
  const std::string start = RealClientStart("sekrit-token", "/manta.rpc.InternalKvGcsService/Put");
  FirstRequest r = ParseFirstRequest(start);
  ASSERT_EQ(r.kind, FirstRequest::kHeaders) << r.error;
  EXPECT_EQ(r.stream_id, 1u);
  EXPECT_EQ(r.path, "/manta.rpc.InternalKvGcsService/Put");
  ASSERT_TRUE(r.authorization.has_value());
  EXPECT_EQ(*r.authorization, "Bearer sekrit-token");
  // Every shorter start asks for more, and never for fewer bytes than it has.
  for (size_t n = 0; n < start.size(); ++n) {
    FirstRequest part = ParseFirstRequest(std::string_view(start).substr(0, n));
    if (part.kind == FirstRequest::kHeaders) continue;  // the body may follow the headers
    ASSERT_EQ(part.kind, FirstRequest::kNeedMore) << n << ": " << part.error;
    EXPECT_GT(part.need, n);
  }
  // Without a token there is no authorization header.
  FirstRequest none = ParseFirstRequest(RealClientStart("", "/a/b"));
  ASSERT_EQ(none.kind, FirstRequest::kHeaders) << none.error;
  EXPECT_FALSE(none.authorization.has_value());
}

TEST(FirstRequestTest, HeadersAcrossContinuationsWithPaddingAndPriority) {
  const std::string block = Block({{":path", "/x/y"}, {"authorization", "Bearer t"}});
  std::string headers_payload;
  headers_payload.push_back(3);                // pad length
  headers_payload.append(5, '\0');             // priority
  headers_payload.append(block.substr(0, 7));  // the first fragment
  headers_payload.append(3, '\0');             // padding
  std::string bytes = std::string(testing::kClientPreface) + Frame(4, 0, 0, "") +
                      Frame(8, 0, 0, std::string(4, '\x01')) + Frame(1, 0x8 | 0x20, 3, headers_payload) +
                      Frame(9, 0, 3, block.substr(7, 5)) + Frame(9, 0x4, 3, block.substr(12));
  FirstRequest r = ParseFirstRequest(bytes);
  ASSERT_EQ(r.kind, FirstRequest::kHeaders) << r.error;
  EXPECT_EQ(r.stream_id, 3u);
  EXPECT_EQ(r.path, "/x/y");
  EXPECT_EQ(r.authorization, "Bearer t");
}

TEST(FirstRequestTest, WhatNoGrpcClientSendsIsInvalid) {
  const std::string block = Block({{":path", "/x/y"}});
  const std::string settings = Frame(4, 0, 0, "");
  struct Case {
    const char* name;
    std::string bytes;
  } cases[] = {
      {"an HTTP/1 request", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"DATA before any request", std::string(testing::kClientPreface) + settings + Frame(0, 0, 1, "body")},
      {"a frame larger than allowed", std::string(testing::kClientPreface) + Frame(4, 0, 0, std::string(16385, '\0'))},
      {"a request on an even stream", std::string(testing::kClientPreface) + Frame(1, 0x4, 2, block)},
      {"a request on stream 0", std::string(testing::kClientPreface) + Frame(1, 0x4, 0, block)},
      {"an interrupted header block", std::string(testing::kClientPreface) + Frame(1, 0, 1, block) + settings},
      {"a continuation of another stream",
       std::string(testing::kClientPreface) + Frame(1, 0, 1, block) + Frame(9, 0x4, 3, "")},
      {"padding longer than the frame",
       std::string(testing::kClientPreface) + Frame(1, 0x4 | 0x8, 1, std::string(1, '\x7f'))},
      {"headers that do not decode", std::string(testing::kClientPreface) + Frame(1, 0x4, 1, "\xff\xff\xff\xff\xff")},
      {"GOAWAY first", std::string(testing::kClientPreface) + Frame(7, 0, 0, std::string(8, '\0'))},
  };
  for (const Case& c : cases) {
    FirstRequest r = ParseFirstRequest(c.bytes);
    EXPECT_EQ(r.kind, FirstRequest::kInvalid) << c.name;
    EXPECT_FALSE(r.error.empty()) << c.name;
  }
  // Headers that never end within the limit.
  std::string endless = std::string(testing::kClientPreface) + Frame(1, 0, 1, block);
  while (endless.size() < kMaxFirstRequestBytes) endless += Frame(9, 0, 1, std::string(16000, '\0'));
  EXPECT_EQ(ParseFirstRequest(endless).kind, FirstRequest::kInvalid);
}

}  // namespace
}  // namespace manta::rpc
