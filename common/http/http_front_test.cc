#include "common/http/http_front.h"

#include <string>

#include "absl/strings/match.h"
#include "common/http/front_reader.h"
#include "gtest/gtest.h"

namespace manta::http {
namespace {

constexpr char kToken[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

FrontPolicy Policy() {
  FrontPolicy p;
  p.routes = {{.method = "GET", .path = "/healthcheck"},
              {.method = "POST", .path = "/generate", .max_body = 100, .chunked = true, .json_body = true},
              {.method = "GET", .path = "/", .is_public = true},
              {.method = "PUT", .path = "/api/packages/*", .max_body = 1 << 30}};
  p.authenticate = [](const RequestHead& head) { return BearerCredential(head, kToken); };
  p.json_errors = true;
  return p;
}

RequestHead Head(const std::string& text) {
  auto head = ParseRequestHead(text);
  EXPECT_TRUE(head.ok()) << head.status();
  return head.ok() ? *head : RequestHead{};
}

std::string Auth() { return std::string("Authorization: Bearer ") + kToken + "\r\n"; }

TEST(HttpFrontTest, TheCredentialComesBeforeEverythingButPublicRoutes) {
  const FrontPolicy p = Policy();
  EXPECT_EQ(CheckFront(p, Head("POST /generate HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")).status, 401);
  EXPECT_EQ(CheckFront(p, Head("POST /generate HTTP/1.1\r\nAuthorization: Bearer x\r\n\r\n")).status, 401);
  // An unknown path or a body far too large tells an anonymous client nothing.
  EXPECT_EQ(CheckFront(p, Head("GET /secret HTTP/1.1\r\n\r\n")).status, 401);
  EXPECT_EQ(CheckFront(p, Head("POST /generate HTTP/1.1\r\nContent-Length: 999999999\r\n\r\n")).status, 401);
  EXPECT_TRUE(CheckFront(p, Head("GET / HTTP/1.1\r\n\r\n")).accepted());
  FrontVerdict v = CheckFront(p, Head("GET /healthcheck HTTP/1.1\r\n" + Auth() + "\r\n"));
  EXPECT_TRUE(v.accepted());
  FrontPolicy wrong403 = p;
  wrong403.wrong_credential_status = 403;
  EXPECT_EQ(CheckFront(wrong403, Head("GET /x HTTP/1.1\r\nAuthorization: Bearer nope\r\n\r\n")).status, 403);
  FrontPolicy none = p;
  none.authenticate = nullptr;  // --auth=none
  EXPECT_TRUE(CheckFront(none, Head("GET /healthcheck HTTP/1.1\r\n\r\n")).accepted());
}

TEST(HttpFrontTest, RoutesAndBodiesAreCheckedFromTheHead) {
  const FrontPolicy p = Policy();
  EXPECT_EQ(CheckFront(p, Head("GET /nowhere HTTP/1.1\r\n" + Auth() + "\r\n")).status, 404);
  EXPECT_EQ(CheckFront(p, Head("DELETE /generate HTTP/1.1\r\n" + Auth() + "\r\n")).status, 405);
  EXPECT_EQ(CheckFront(p, Head("POST /generate HTTP/1.1\r\n" + Auth() + "Content-Length: 101\r\n\r\n")).status, 413);
  EXPECT_TRUE(CheckFront(p, Head("POST /generate HTTP/1.1\r\n" + Auth() + "Content-Length: 100\r\n\r\n")).accepted());
  EXPECT_EQ(CheckFront(p, Head("GET /healthcheck HTTP/1.1\r\n" + Auth() + "Content-Length: 1\r\n\r\n")).status, 413)
      << "a route without a body takes none";
  EXPECT_EQ(
      CheckFront(p, Head("PUT /api/packages/x HTTP/1.1\r\n" + Auth() + "Transfer-Encoding: chunked\r\n\r\n")).status,
      411);
  EXPECT_TRUE(CheckFront(p, Head("PUT /api/packages/gcs/a.tar HTTP/1.1\r\n" + Auth() + "Content-Length: 5\r\n\r\n"))
                  .accepted());
  EXPECT_TRUE(CheckFront(p, Head("HEAD /healthcheck HTTP/1.1\r\n" + Auth() + "\r\n")).accepted());
}

TEST(HttpFrontTest, APrecheckRefusesFirst) {
  FrontPolicy p = Policy();
  p.precheck = [](const RequestHead& head) -> std::optional<FrontVerdict> {
    if (head.peer_ip != "10.0.0.9") return std::nullopt;
    FrontVerdict v;
    v.status = 429;
    v.message = "slow down";
    v.headers.emplace_back("Retry-After", "4");
    return v;
  };
  RequestHead head = Head("GET / HTTP/1.1\r\n\r\n");
  head.peer_ip = "10.0.0.9";
  FrontVerdict v = CheckFront(p, head);
  EXPECT_EQ(v.status, 429);
  const std::string response = RefusalResponse(v, true);
  EXPECT_TRUE(absl::StartsWith(response, "HTTP/1.1 429 Too Many Requests\r\n")) << response;
  EXPECT_NE(response.find("Retry-After: 4\r\n"), std::string::npos);
  EXPECT_NE(response.find("{\"error\":\"slow down\"}"), std::string::npos);
  EXPECT_NE(response.find("Connection: close"), std::string::npos);
}

// The reader of one connection, fed bytes as they arrive.
class FrontReaderTest : public ::testing::Test {
 protected:
  FrontReaderTest() {
    limits_.max_loop_body_bytes = 1000;
    limits_.max_header_bytes = 4096;
  }
  FrontReader::Step Feed(FrontReader& r, const std::string& bytes, size_t step = 1 << 20) {
    FrontReader::Step last;
    for (size_t i = 0; i < bytes.size(); i += step) {
      last = r.Feed(std::string_view(bytes).substr(i, step));
      if (last.kind != FrontReader::Kind::kMore) break;
    }
    return last;
  }
  FrontPolicy policy_ = Policy();
  HttpLimits limits_;
  BodyBudget budget_{5000};
};

TEST_F(FrontReaderTest, ARefusedRequestsBodyIsNeverTaken) {
  FrontReader r(&policy_, &limits_, "127.0.0.1", &budget_);
  // The head of a chunked bomb with no token: refused at its blank line.
  FrontReader::Step s = Feed(r, "POST /generate HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n100000\r\n");
  ASSERT_EQ(s.kind, FrontReader::Kind::kRefuse);
  EXPECT_TRUE(absl::StartsWith(s.bytes, "HTTP/1.1 401 ")) << s.bytes;
  EXPECT_EQ(budget_.used(), 0u);
  // Whatever follows is not read into anything.
  EXPECT_EQ(r.Feed(std::string(1 << 20, 'x')).kind, FrontReader::Kind::kMore);
  EXPECT_FALSE(r.reading_body());
}

TEST_F(FrontReaderTest, AChunkedBodyIsDecodedUpToTheRoutesLimitAndHandedOnWithALength) {
  for (size_t step : {1u, 5u, 1000u}) {
    BodyBudget budget(5000);
    FrontReader r(&policy_, &limits_, "127.0.0.1", &budget);
    FrontReader::Step s = Feed(r,
                               "POST /generate HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n" +
                                   Auth() + "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n",
                               step);
    ASSERT_EQ(s.kind, FrontReader::Kind::kHandOff) << step;
    EXPECT_TRUE(absl::EndsWith(s.bytes, "Content-Length: 7\r\nConnection: close\r\n\r\n{\"a\":1}")) << s.bytes;
    EXPECT_EQ(s.bytes.find("Transfer-Encoding"), std::string::npos);
    EXPECT_NE(s.bytes.find("Content-Type: application/json\r\n"), std::string::npos) << "a JSON route's body";
    EXPECT_EQ(s.bytes.find("x-www-form-urlencoded"), std::string::npos);
    EXPECT_EQ(budget.used(), 0u);
  }
  FrontReader big(&policy_, &limits_, "127.0.0.1", &budget_);
  FrontReader::Step s = Feed(big, "POST /generate HTTP/1.1\r\n" + Auth() + "Transfer-Encoding: chunked\r\n\r\n60\r\n" +
                                      std::string(96, 'a') + "\r\n60\r\n");
  ASSERT_EQ(s.kind, FrontReader::Kind::kRefuse);
  EXPECT_TRUE(absl::StartsWith(s.bytes, "HTTP/1.1 413 ")) << s.bytes;
  EXPECT_EQ(budget_.used(), 0u);
}

TEST_F(FrontReaderTest, BodiesAreReadWholeWithinTheBudgetAndUploadsGoToTheirThread) {
  FrontReader r(&policy_, &limits_, "127.0.0.1", &budget_);
  FrontReader::Step s =
      Feed(r, "POST /generate HTTP/1.1\r\n" + Auth() + "Content-Length: 10\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(s.kind, FrontReader::Kind::kMore);
  EXPECT_EQ(s.interim, "HTTP/1.1 100 Continue\r\n\r\n");
  EXPECT_EQ(budget_.used(), 10u);
  s = Feed(r, "0123456789EXTRA");
  ASSERT_EQ(s.kind, FrontReader::Kind::kHandOff);
  EXPECT_TRUE(absl::EndsWith(s.bytes, "\r\n\r\n0123456789")) << "nothing past the length";
  EXPECT_EQ(s.bytes.find("Expect"), std::string::npos);
  EXPECT_EQ(budget_.used(), 0u);

  // Past the budget: 503, nothing reserved.
  BodyBudget tight(50);
  FrontReader full(&policy_, &limits_, "127.0.0.1", &tight);
  s = Feed(full, "POST /generate HTTP/1.1\r\n" + Auth() + "Content-Length: 99\r\n\r\n");
  ASSERT_EQ(s.kind, FrontReader::Kind::kRefuse);
  EXPECT_TRUE(absl::StartsWith(s.bytes, "HTTP/1.1 503 ")) << s.bytes;

  // An upload larger than the loop reads: the start, and what is left.
  FrontReader up(&policy_, &limits_, "127.0.0.1", &budget_);
  s = Feed(up, "PUT /api/packages/gcs/a.tar HTTP/1.1\r\n" + Auth() + "Content-Length: 5000\r\n\r\nabc");
  ASSERT_EQ(s.kind, FrontReader::Kind::kUpload);
  EXPECT_TRUE(absl::EndsWith(s.bytes, "Content-Length: 5000\r\nConnection: close\r\n\r\nabc"));
  EXPECT_EQ(s.left, 4997u);
  EXPECT_EQ(budget_.used(), 0u);
}

TEST_F(FrontReaderTest, HeadsAreBoundedAndMalformedOnesRefused) {
  FrontReader r(&policy_, &limits_, "127.0.0.1", &budget_);
  FrontReader::Step s = Feed(r, "GET / HTTP/1.1\r\nX: " + std::string(5000, 'a'));
  ASSERT_EQ(s.kind, FrontReader::Kind::kRefuse);
  EXPECT_TRUE(absl::StartsWith(s.bytes, "HTTP/1.1 431 ")) << s.bytes;
  FrontReader smuggle(&policy_, &limits_, "127.0.0.1", &budget_);
  s = Feed(smuggle,
           "POST /generate HTTP/1.1\r\n" + Auth() + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
           3);
  ASSERT_EQ(s.kind, FrontReader::Kind::kRefuse);
  EXPECT_TRUE(absl::StartsWith(s.bytes, "HTTP/1.1 400 ")) << s.bytes;
}

}  // namespace
}  // namespace manta::http
