#include "dashboard/request_guard.h"

#include <httplib.h>

#include "common/clock.h"
#include "dashboard/session_store.h"
#include "gtest/gtest.h"

namespace manta::dashboard {
namespace {

constexpr char kToken[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

SessionStore& Sessions() {
  static SessionStore* sessions = new SessionStore();
  return *sessions;
}

GuardConfig Config() {
  GuardConfig c;
  c.token = kToken;
  c.allowed_origins = OwnOrigins("127.0.0.1", 8265);
  c.sessions = &Sessions();
  return c;
}

// A signed-in page's cookie.
std::string SessionCookie() {
  static const std::string id = Sessions().Create();
  return std::string(kSessionCookie) + "=" + id;
}

httplib::Request Req(const std::string& method, const std::string& path, bool with_token = true) {
  httplib::Request r;
  r.method = method;
  r.path = path;
  if (with_token) r.headers.emplace("Authorization", std::string("Bearer ") + kToken);
  return r;
}

TEST(RequestGuardTest, TokenIsRequired) {
  EXPECT_EQ(CheckRequest(Config(), Req("GET", "/api/jobs/", false)).status, 401);
  auto wrong = Req("GET", "/api/jobs/", false);
  wrong.headers.emplace("Authorization", "Bearer nope");
  EXPECT_EQ(CheckRequest(Config(), wrong).status, 403);
  auto basic = Req("GET", "/api/jobs/", false);
  basic.headers.emplace("Authorization", std::string("Basic ") + kToken);
  EXPECT_EQ(CheckRequest(Config(), basic).status, 403);
  EXPECT_TRUE(CheckRequest(Config(), Req("GET", "/api/jobs/")).allowed());
  GuardConfig none = Config();
  none.token.clear();
  EXPECT_TRUE(CheckRequest(none, Req("GET", "/api/jobs/", false)).allowed());
}

TEST(RequestGuardTest, CrossSiteMutationsAreRefused) {
  for (const char* method : {"POST", "PUT", "DELETE", "PATCH"}) {
    auto r = Req(method, "/api/jobs/x");
    r.headers.emplace("Sec-Fetch-Site", "cross-site");
    EXPECT_EQ(CheckRequest(Config(), r).status, 403) << method;
    auto o = Req(method, "/api/jobs/x");
    o.headers.emplace("Origin", "http://evil.example");
    EXPECT_EQ(CheckRequest(Config(), o).status, 403) << method;
    auto null_origin = Req(method, "/api/jobs/x");
    null_origin.headers.emplace("Origin", "null");
    EXPECT_EQ(CheckRequest(Config(), null_origin).status, 403) << method;
  }
  auto own = Req("POST", "/api/jobs/");
  own.headers.emplace("Origin", "http://localhost:8265");
  own.headers.emplace("Sec-Fetch-Site", "same-origin");
  EXPECT_TRUE(CheckRequest(Config(), own).allowed());
  auto get = Req("GET", "/api/jobs/");
  get.headers.emplace("Sec-Fetch-Site", "cross-site");
  EXPECT_TRUE(CheckRequest(Config(), get).allowed());
}

TEST(RequestGuardTest, DeclaredBodySizeIsCheckedPerRoute) {
  auto json = Req("POST", "/api/jobs/");
  json.headers.emplace("Content-Length", std::to_string((1 << 20) + 1));
  EXPECT_EQ(CheckRequest(Config(), json).status, 413);
  auto package = Req("PUT", "/api/packages/gcs/x.tar.gz");
  package.headers.emplace("Content-Length", std::to_string(50 << 20));
  EXPECT_TRUE(CheckRequest(Config(), package).allowed());
  auto huge = Req("PUT", "/api/packages/gcs/x.tar.gz");
  huge.headers.emplace("Content-Length", "1073741824");
  EXPECT_EQ(CheckRequest(Config(), huge).status, 413);
  auto bad = Req("POST", "/api/jobs/");
  bad.headers.emplace("Content-Length", "12abc");
  EXPECT_EQ(CheckRequest(Config(), bad).status, 400);
  auto chunked = Req("PUT", "/api/packages/gcs/x.tar.gz");
  chunked.headers.emplace("Transfer-Encoding", "chunked");
  EXPECT_EQ(CheckRequest(Config(), chunked).status, 411);
  // Authentication is checked before size: no hint to anonymous clients.
  auto anonymous = Req("PUT", "/api/packages/gcs/x.tar.gz", false);
  anonymous.headers.emplace("Content-Length", "1073741824");
  EXPECT_EQ(CheckRequest(Config(), anonymous).status, 401);
}

TEST(RequestGuardTest, TheTokenComesAsAHeaderRaysProxyHeaderOrThePagesSession) {
  auto ray = Req("GET", "/api/v0/nodes", false);
  ray.headers.emplace("X-Ray-Authorization", std::string("Bearer ") + kToken);
  EXPECT_TRUE(CheckRequest(Config(), ray).allowed());
  auto cookie = Req("GET", "/api/v0/nodes", false);
  cookie.headers.emplace("Cookie", "theme=dark; " + SessionCookie() + "; other=1");
  EXPECT_TRUE(CheckRequest(Config(), cookie).allowed());
  auto bad_cookie = Req("GET", "/api/v0/nodes", false);
  bad_cookie.headers.emplace("Cookie", "manta_session=nope");
  EXPECT_EQ(CheckRequest(Config(), bad_cookie).status, 403);
  // The cookie never carries the token itself.
  auto token_cookie = Req("GET", "/api/v0/nodes", false);
  token_cookie.headers.emplace("Cookie", std::string("manta_session=") + kToken);
  EXPECT_EQ(CheckRequest(Config(), token_cookie).status, 403);
  auto prefixed = Req("GET", "/api/v0/nodes", false);
  prefixed.headers.emplace("Cookie", "x" + SessionCookie());
  EXPECT_EQ(CheckRequest(Config(), prefixed).status, 401) << "another cookie whose name ends the same";
}

TEST(RequestGuardTest, ARevokedOrExpiredSessionIsRefused) {
  ManualClock clock;
  SessionStore sessions(clock.AsClock(), absl::Hours(1));
  GuardConfig c = Config();
  c.sessions = &sessions;
  const std::string id = sessions.Create();
  auto with = [&](const std::string& session) {
    auto r = Req("GET", "/api/jobs/", false);
    r.headers.emplace("Cookie", std::string(kSessionCookie) + "=" + session);
    return CheckRequest(c, r).status;
  };
  EXPECT_EQ(with(id), 0);
  clock.Advance(absl::Minutes(59));
  EXPECT_EQ(with(id), 0);
  clock.Advance(absl::Minutes(2));
  EXPECT_EQ(with(id), 403) << "past its lifetime";
  const std::string other = sessions.Create();
  EXPECT_EQ(with(other), 0);
  sessions.Revoke(other);
  EXPECT_EQ(with(other), 403) << "signed out";
}

TEST(RequestGuardTest, FailedSignInsFromAPeerSlowItDown) {
  ManualClock clock;
  LoginThrottle throttle(clock.AsClock());
  GuardConfig c = Config();
  c.throttle = &throttle;
  auto login = [&](const std::string& peer) {
    auto r = Req("POST", "/api/login", false);
    r.remote_addr = peer;
    return CheckRequest(c, r);
  };
  for (int i = 0; i < LoginThrottle::kFreeFailures - 1; ++i) {
    EXPECT_TRUE(login("10.0.0.7").allowed()) << i;
    throttle.Failed("10.0.0.7");
  }
  throttle.Failed("10.0.0.7");
  GuardVerdict v = login("10.0.0.7");
  EXPECT_EQ(v.status, 429);
  EXPECT_NE(v.message.find("try again in 1 s"), std::string::npos) << v.message;
  EXPECT_TRUE(login("10.0.0.8").allowed()) << "another peer is not slowed";
  clock.Advance(absl::Seconds(2));
  EXPECT_TRUE(login("10.0.0.7").allowed());
  throttle.Failed("10.0.0.7");
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(login("10.0.0.7").status, 429) << "the wait doubles";
  clock.Advance(absl::Seconds(2));
  throttle.Succeeded("10.0.0.7");
  EXPECT_TRUE(login("10.0.0.7").allowed());
  // The front refuses it before reading the sign-in's body.
  http::FrontPolicy front = DashboardFront(std::make_shared<GuardConfig>(c));
  for (int i = 0; i < LoginThrottle::kFreeFailures; ++i) throttle.Failed("10.0.0.9");
  auto head = http::ParseRequestHead("POST /api/login HTTP/1.1\r\nContent-Length: 20\r\n\r\n");
  ASSERT_TRUE(head.ok());
  head->peer_ip = "10.0.0.9";
  http::FrontVerdict refused = http::CheckFront(front, *head);
  EXPECT_EQ(refused.status, 429);
  ASSERT_FALSE(refused.headers.empty());
  EXPECT_EQ(refused.headers[0].first, "Retry-After");
}

TEST(RequestGuardTest, ThePageAndItsSignInNeedNoTokenAndNothingElseIsOpen) {
  for (const char* path : {"/", "/static/app.js", "/static/app.css", "/static/uPlot.iife.min.js"}) {
    EXPECT_TRUE(CheckRequest(Config(), Req("GET", path, false)).allowed()) << path;
  }
  EXPECT_TRUE(CheckRequest(Config(), Req("POST", "/api/login", false)).allowed());
  auto big_login = Req("POST", "/api/login", false);
  big_login.headers.emplace("Content-Length", "100000");
  EXPECT_EQ(CheckRequest(Config(), big_login).status, 413) << "a sign-in is small";
  for (const char* path : {"/static/other.js", "/api/jobs/", "/index.html", "/static/../api/jobs/"}) {
    EXPECT_EQ(CheckRequest(Config(), Req("GET", path, false)).status, 401) << path;
  }
  EXPECT_EQ(CheckRequest(Config(), Req("POST", "/", false)).status, 401);
  // The sign-in is a POST like any other: not from another origin.
  auto login = Req("POST", "/api/login", false);
  login.headers.emplace("Origin", "http://evil.example");
  EXPECT_EQ(CheckRequest(Config(), login).status, 403);
}

TEST(RequestGuardTest, ACookieIsHonouredOnlyFromTheDashboardsOwnPages) {
  auto by_cookie = [](const std::string& method) {
    auto r = Req(method, "/api/jobs/raysubmit_x/stop", false);
    r.headers.emplace("Cookie", SessionCookie());
    return r;
  };
  auto cross = by_cookie("GET");
  cross.headers.emplace("Sec-Fetch-Site", "cross-site");
  EXPECT_EQ(CheckRequest(Config(), cross).status, 403) << "a read another site made the browser send";
  auto no_origin = by_cookie("POST");
  EXPECT_EQ(CheckRequest(Config(), no_origin).status, 403) << "a cookie POST without Origin";
  auto other_port = by_cookie("POST");
  other_port.headers.emplace("Origin", "http://127.0.0.1:9999");  // same site, another origin
  other_port.headers.emplace("Sec-Fetch-Site", "same-site");
  EXPECT_EQ(CheckRequest(Config(), other_port).status, 403);
  auto page = by_cookie("POST");
  page.headers.emplace("Origin", "http://127.0.0.1:8265");
  page.headers.emplace("Sec-Fetch-Site", "same-origin");
  EXPECT_TRUE(CheckRequest(Config(), page).allowed());
  // Bound to every address: the page's origin is the one it was sent to.
  GuardConfig any = Config();
  any.allowed_origins = OwnOrigins("0.0.0.0", 8265);
  auto lan = by_cookie("POST");
  lan.headers.emplace("Host", "10.0.0.5:8265");
  lan.headers.emplace("Origin", "http://10.0.0.5:8265");
  EXPECT_TRUE(CheckRequest(any, lan).allowed());
  lan.headers.erase("Origin");
  lan.headers.emplace("Origin", "http://10.0.0.6:8265");
  EXPECT_EQ(CheckRequest(any, lan).status, 403);
}

}  // namespace
}  // namespace manta::dashboard
