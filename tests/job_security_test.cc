// Bad input to the dashboard, each rejected with nothing changed: missing or
// wrong token, cross-site mutations, path traversal in ids, package names and
// archives, a 1 GB body, invalid JSON.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "common/process.h"
#include "absl/strings/str_cat.h"
#include "dashboard/tar_writer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/job_cluster.h"
#include "tests/raw_socket.h"

namespace manta::testing {
namespace {

using nlohmann::json;

class JobSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::Status s = cluster_.Start();
    ASSERT_TRUE(s.ok()) << s;
    cli::JobClient client = cluster_.Client();
    auto id = client.Submit({{"entrypoint", "echo kept"}, {"submission_id", "kept-job"}});
    ASSERT_TRUE(id.ok()) << id.status();
    ASSERT_TRUE(JobCluster::WaitFor([&] { return (*client.GetJob("kept-job"))["status"] == "SUCCEEDED"; }));
    before_ = Snapshot();
  }

  // Everything a rejected request must leave alone.
  std::string Snapshot() {
    auto jobs = cluster_.Client().ListJobs();
    std::string out = jobs.ok() ? jobs->dump() : "unreachable";
    for (const char* sub : {"/runtime_resources/packages", "/runtime_resources/working_dir", "/logs", "/jobs"}) {
      for (const std::string& f : ListDir(cluster_.session_dir() + sub)) absl::StrAppend(&out, "\n", sub, "/", f);
    }
    return out;
  }

  // curl's HTTP status for `args`.
  std::string Status(std::vector<std::string> args) {
    args.insert(args.begin(), {"-o", "/dev/null", "-w", "%{http_code}"});
    return cluster_.Curl(args).out;
  }

  JobCluster cluster_;
  std::string before_;
};

TEST_F(JobSecurityTest, TokenIsRequiredOnEveryRoute) {
  const std::string u = cluster_.url();
  for (const auto& [method, path] :
       std::vector<std::pair<std::string, std::string>>{{"GET", "/api/version"},
                                                        {"GET", "/api/jobs/"},
                                                        {"GET", "/api/jobs/kept-job"},
                                                        {"GET", "/api/jobs/kept-job/logs"},
                                                        {"GET", "/api/jobs/kept-job/logs/tail"},
                                                        {"POST", "/api/jobs/kept-job/stop"},
                                                        {"DELETE", "/api/jobs/kept-job"},
                                                        {"GET", "/api/packages/gcs/x.tar"},
                                                        {"PUT", "/api/packages/gcs/x.tar"},
                                                        {"GET", "/no/such/route"}}) {
    EXPECT_EQ(Status({"-X", method, u + path}), "401") << method << " " << path;
    EXPECT_EQ(Status({"-X", method, u + path, "-H", "Authorization: Bearer wrong"}), "403") << method << " " << path;
  }
  EXPECT_EQ(Status({"-X", "POST", u + "/api/jobs/", "-H", "Content-Type: application/json", "-d",
                    R"({"entrypoint": "touch /tmp/should_not_exist"})"}),
            "401");
  EXPECT_EQ(cluster_.ClientWithToken("").Submit({{"entrypoint", "true"}}).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(cluster_.ClientWithToken(std::string(64, 'a')).Submit({{"entrypoint", "true"}}).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Snapshot(), before_);
}

TEST_F(JobSecurityTest, CrossSiteMutationsAreRefused) {
  const std::string u = cluster_.url();
  const std::string auth = cluster_.AuthHeader();
  for (const std::string& marker : {std::string("Sec-Fetch-Site: cross-site"),
                                    std::string("Origin: http://evil.example"), std::string("Origin: null")}) {
    EXPECT_EQ(Status({"-X", "POST", u + "/api/jobs/", "-H", auth, "-H", marker, "-H", "Content-Type: application/json",
                      "-d", R"({"entrypoint": "true"})"}),
              "403")
        << marker;
    EXPECT_EQ(Status({"-X", "DELETE", u + "/api/jobs/kept-job", "-H", auth, "-H", marker}), "403") << marker;
    EXPECT_EQ(Status({"-X", "POST", u + "/api/jobs/kept-job/stop", "-H", auth, "-H", marker}), "403") << marker;
    EXPECT_EQ(Status({"-X", "PUT", u + "/api/packages/gcs/x.tar", "-H", auth, "-H", marker, "--data-binary", "x"}),
              "403")
        << marker;
  }
  // Reads stay allowed, and the dashboard's own origin may write.
  EXPECT_EQ(Status({u + "/api/jobs/", "-H", auth, "-H", "Sec-Fetch-Site: cross-site"}), "200");
  EXPECT_EQ(Snapshot(), before_);
  EXPECT_EQ(Status({"-X", "POST", u + "/api/jobs/kept-job/stop", "-H", auth, "-H", "Origin: " + u}), "200");
}

TEST_F(JobSecurityTest, PathTraversalIsRejected) {
  const std::string u = cluster_.url();
  const std::string auth = cluster_.AuthHeader();
  for (std::string path : {"/api/jobs/..%2F..%2F..%2Fetc%2Fpasswd", "/api/jobs/..%2Fkept-job", "/api/jobs/..",
                           "/api/jobs/%2E%2E/logs", "/api/jobs/..%2F..%2Ftoken/logs", "/api/jobs/a%00b/logs"}) {
    std::string code = Status({"--path-as-is", u + path, "-H", auth});
    EXPECT_TRUE(code == "400" || code == "404") << path << " -> " << code;
    code = Status({"--path-as-is", "-X", "DELETE", u + path, "-H", auth});
    EXPECT_TRUE(code == "400" || code == "404") << path << " -> " << code;
  }
  CommandResult body = cluster_.Curl({"--path-as-is", u + "/api/jobs/..%2F..%2Ftoken/logs", "-H", auth});
  EXPECT_FALSE(absl::StrContains(body.out, cluster_.token()));
  for (std::string name : {"..%2F..%2Fevil.tar", "..%2Ftoken.tar", "x.sh", "%2Ftmp%2Fx.tar"}) {
    std::string code = Status(
        {"--path-as-is", "-X", "PUT", u + "/api/packages/gcs/" + name, "-H", auth, "--data-binary", "not a tar"});
    EXPECT_TRUE(code == "400" || code == "404") << name << " -> " << code;
  }
  // Submissions naming such ids or packages are refused too.
  cli::JobClient client = cluster_.Client();
  EXPECT_EQ(client.Submit({{"entrypoint", "true"}, {"submission_id", "../../escape"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client.Submit({{"entrypoint", "true"}, {"runtime_env", {{"working_dir", "gcs://../../token.tar"}}}})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Snapshot(), before_);
}

TEST_F(JobSecurityTest, EscapingArchivesAreRejectedWhole) {
  cli::JobClient client = cluster_.Client();
  auto archive = [](std::initializer_list<std::tuple<std::string, char, std::string>> entries) {
    std::string out;
    dashboard::AppendTarEntry(&out, "harmless.txt", '0', "fine");
    for (const auto& [path, type, link] : entries) {
      dashboard::AppendTarEntry(&out, path, type, type == '0' ? "pwned" : "", link);
    }
    dashboard::FinishTar(&out);
    return out;
  };
  std::vector<std::string> bad = {
      archive({{"../../escaped.txt", '0', ""}}),
      archive({{"/tmp/escaped.txt", '0', ""}}),
      archive({{"link", '2', "../../.."}}),
      archive({{"link", '2', "/etc"}}),
      archive({{"link", '2', "."}, {"link/../../x", '0', ""}}),
      archive({{"hard", '1', "../../token"}}),
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    // Under their own names (their contents' hashes): refused for what they hold.
    absl::Status s = client.UploadPackage(dashboard::PackageName(bad[i]), bad[i]);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << i << ": " << s;
    EXPECT_FALSE(absl::StrContains(s.message(), "not named by its contents")) << s;
    auto gz = dashboard::Gzip(bad[i]);
    s = client.UploadPackage(dashboard::PackageName(*gz), *gz);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << i << ": " << s;
  }
  EXPECT_EQ(client
                .Submit({{"entrypoint", "true"},
                         {"runtime_env", {{"working_dir", "gcs://" + dashboard::PackageName(bad[0])}}}})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Snapshot(), before_);
}

TEST_F(JobSecurityTest, APackageIsStoredOnlyUnderItsContentsName) {
  cli::JobClient client = cluster_.Client();
  std::string mine, theirs;
  dashboard::AppendTarEntry(&mine, "job.sh", '0', "echo mine");
  dashboard::FinishTar(&mine);
  dashboard::AppendTarEntry(&theirs, "job.sh", '0', "echo replaced");
  dashboard::FinishTar(&theirs);
  const std::string name = dashboard::PackageName(mine);
  ASSERT_TRUE(client.UploadPackage(name, mine).ok());
  // Another archive under that name (or any name not its own) is refused,
  // and what was stored stays.
  absl::Status s = client.UploadPackage(name, theirs);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), dashboard::PackageName(theirs))) << s;
  EXPECT_EQ(client.UploadPackage("mine.tar", mine).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(client.UploadPackage(name, mine).ok()) << "the same bytes again";
  auto id = client.Submit({{"entrypoint", "sh job.sh"}, {"runtime_env", {{"working_dir", "gcs://" + name}}}});
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(JobCluster::WaitFor([&] { return (*client.GetJob(*id))["status"] == "SUCCEEDED"; }));
  EXPECT_EQ(*client.GetLogs(*id), "mine\n");
}

TEST_F(JobSecurityTest, ThePageSignsInWithASessionThatSignsOut) {
  const std::string u = cluster_.url();
  const std::string origin = "Origin: " + u;
  CommandResult login =
      cluster_.Curl({"-D", "-", "-o", "/dev/null", "-X", "POST", u + "/api/login", "-H", origin, "-H",
                     "Content-Type: application/json", "--data-binary", json{{"token", cluster_.token()}}.dump()});
  const size_t at = login.out.find("manta_session=");
  ASSERT_NE(at, std::string::npos) << login.out;
  const std::string cookie = login.out.substr(at, login.out.find(';', at) - at);
  EXPECT_FALSE(absl::StrContains(login.out, cluster_.token())) << "the cookie is a session, not the token";
  EXPECT_TRUE(absl::StrContains(login.out, "HttpOnly")) << login.out;
  EXPECT_TRUE(absl::StrContains(login.out, "Max-Age=")) << login.out;
  EXPECT_EQ(Status({u + "/api/jobs/", "-H", "Cookie: " + cookie}), "200");
  EXPECT_EQ(Status({"-X", "POST", u + "/api/logout", "-H", origin, "-H", "Cookie: " + cookie}), "204");
  EXPECT_EQ(Status({u + "/api/jobs/", "-H", "Cookie: " + cookie}), "403") << "the session ended at sign-out";
  // Wrong tokens: after a few, the peer waits (429 with Retry-After).
  std::string last;
  for (int i = 0; i < 20 && last != "429"; ++i) {
    last = Status({"-X", "POST", u + "/api/login", "-H", origin, "-H", "Content-Type: application/json",
                   "--data-binary", R"({"token": "wrong"})"});
  }
  EXPECT_EQ(last, "429");
  CommandResult throttled = cluster_.Curl({"-D", "-", "-o", "/dev/null", "-X", "POST", u + "/api/login", "-H", origin,
                                           "--data-binary", R"({"token": "wrong"})"});
  EXPECT_TRUE(absl::StrContains(throttled.out, "Retry-After:")) << throttled.out;
  EXPECT_EQ(Snapshot(), before_);
}

// Sends a request declaring a 1 GiB body and streams zeros until the server
// answers; returns the status line.
std::string StreamHugeBody(int port, const std::string& token, const std::string& request_line) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "connect failed";
  }
  std::string head = absl::StrCat(request_line, " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ", token,
                                  "\r\nContent-Type: application/octet-stream\r\nContent-Length: 1073741824\r\n\r\n");
  send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  std::string zeros(1 << 20, '\0');
  size_t sent = 0;
  std::string response;
  while (sent < (1ull << 30)) {
    pollfd p{fd, POLLIN | POLLOUT, 0};
    if (poll(&p, 1, 5000) <= 0) break;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) break;
    ssize_t n = send(fd, zeros.data(), zeros.size(), MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  char buf[4096];
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 5000) > 0) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n > 0) response.assign(buf, static_cast<size_t>(n));
  }
  close(fd);
  EXPECT_LT(sent, 200ull << 20) << "the server read far more of the body than it needed to refuse it";
  return response.substr(0, response.find("\r\n"));
}

TEST_F(JobSecurityTest, OneGigabyteBodyIsRefusedAndTheServerStaysUp) {
  int port = std::stoi(cluster_.url().substr(cluster_.url().rfind(':') + 1));
  EXPECT_EQ(StreamHugeBody(port, cluster_.token(), "PUT /api/packages/gcs/_manta_pkg_big.tar"),
            "HTTP/1.1 413 Payload Too Large");
  EXPECT_EQ(StreamHugeBody(port, cluster_.token(), "POST /api/jobs/"), "HTTP/1.1 413 Payload Too Large");
  // curl streaming 1 GiB from a pipe, declared (413), undeclared (chunked:
  // 411) and both at once (curl's default with a Content-Length: 400, as
  // a request two parsers could frame differently).
  for (const auto& [length_header, expected] : std::vector<std::pair<std::string, std::string>>{
           {"-H 'Transfer-Encoding:' -H 'Content-Length: 1073741824'", "413"},
           {"", "411"},
           {"-H 'Content-Length: 1073741824'", "400"}}) {
    SpawnOptions sh;
    sh.executable = "/bin/sh";
    sh.args = {"-c", absl::StrCat("head -c 1073741824 /dev/zero | curl -sS -o /dev/null -w '%{http_code}' ",
                                  "-H 'Authorization: Bearer ", cluster_.token(), "' ", length_header, " -T - ",
                                  cluster_.url(), "/api/packages/gcs/_manta_pkg_big2.tar")};
    absl::Time start = absl::Now();
    auto r = RunAndCapture(sh, absl::Seconds(60));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->out, expected) << r->err;
    EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "the body was read before it was refused";
  }
  // Alive and unchanged.
  auto version = cluster_.Client().Version();
  EXPECT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(Snapshot(), before_);
}

TEST_F(JobSecurityTest, InvalidJsonIsRejectedWithAClearMessage) {
  const std::string u = cluster_.url();
  const std::string auth = cluster_.AuthHeader();
  for (const std::string& body :
       {std::string("{not json"), std::string("[]"), std::string("{\"entrypoint\": 5}"),
        std::string("{\"entrypoint\": \"x\", \"extra\": 1}"), std::string(""),
        std::string("{\"entrypoint\": \"x\", \"entrypoint_num_cpus\": -2}"), std::string("\xff\xfe{")}) {
    CommandResult r = cluster_.Curl({"-w", "\n%{http_code}", "-X", "POST", u + "/api/jobs/", "-H", auth, "-H",
                                     "Content-Type: application/json", "--data-binary", body});
    EXPECT_TRUE(absl::EndsWith(r.out, "\n400")) << body << " -> " << r.out;
    EXPECT_GT(r.out.size(), 10u) << "no message for " << body;
  }
  CommandResult r = cluster_.Curl({"-X", "POST", u + "/api/jobs/", "-H", auth, "--data-binary", "{not json"});
  EXPECT_TRUE(absl::StrContains(r.out, "not valid JSON")) << r.out;
  EXPECT_EQ(Snapshot(), before_);
}

// Slowloris: hundreds of idle and half-sent requests held open neither delay
// a real request nor stay open past the header deadline.
TEST_F(JobSecurityTest, IdleAndSlowConnectionsDoNotHoldTheServer) {
  int port = std::stoi(cluster_.url().substr(cluster_.url().rfind(':') + 1));
  std::vector<int> idle, partial;
  for (int i = 0; i < 300; ++i) idle.push_back(ConnectLoopback(port));
  for (int i = 0; i < 200; ++i) {
    int fd = ConnectLoopback(port);
    std::string half = "GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    if (fd >= 0) (void)!write(fd, half.data(), half.size());
    partial.push_back(fd);
  }
  // Real requests are answered while the attack holds its connections; each
  // is given a few seconds (with httplib's thread per connection it waited
  // for minutes).
  for (int i = 0; i < 5; ++i) {
    SpawnOptions curl;
    curl.executable = "/usr/bin/curl";
    curl.args = {"-sS",
                 "-o",
                 "/dev/null",
                 "-w",
                 "%{http_code}",
                 "--max-time",
                 "5",
                 "-H",
                 "Authorization: Bearer " + cluster_.token(),
                 cluster_.url() + "/api/version"};
    auto r = RunAndCapture(curl, absl::Seconds(30));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->out, "200") << "request " << i << " was not served under the attack: " << r->err;
  }
  // The half-sent requests are closed by the server (408), the idle ones too.
  for (int fd : partial) {
    pollfd p{fd, POLLIN, 0};
    ASSERT_GT(poll(&p, 1, 30000), 0) << "a half-sent request was kept open";
    char buf[256];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      EXPECT_TRUE(absl::StartsWith(std::string(buf, static_cast<size_t>(n)), "HTTP/1.1 408"));
    }
  }
  for (int fd : idle) {
    pollfd p{fd, POLLIN, 0};
    ASSERT_GT(poll(&p, 1, 30000), 0) << "an idle connection was kept open";
    char buf[64];
    EXPECT_LE(recv(fd, buf, sizeof(buf), 0), 0);
  }
  for (int fd : idle) close(fd);
  for (int fd : partial) close(fd);
  EXPECT_EQ(Snapshot(), before_);
}

}  // namespace
}  // namespace manta::testing
