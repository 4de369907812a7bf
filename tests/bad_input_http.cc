// The HTTP and CLI rows of the bad-input table: the dashboard's Jobs API
// spoken in raw HTTP/1.1 (so ids may hold NUL, invalid UTF-8 and encoded
// slashes), and `manta job submit` / `manta start` with bad flags.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/process.h"
#include "dashboard/tar_writer.h"
#include "tests/bad_input_table.h"
#include "tests/raw_socket.h"

namespace manta::testing {

std::string HttpRequest(const std::string& method, const std::string& path, const std::vector<std::string>& headers,
                        const std::string& body) {
  std::string out = absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
  for (const std::string& h : headers) absl::StrAppend(&out, h, "\r\n");
  bool framed = false;
  for (const std::string& h : headers) {
    framed = framed || absl::StartsWithIgnoreCase(h, "Content-Length:") ||
             absl::StartsWithIgnoreCase(h, "Transfer-Encoding:");
  }
  if (!framed && (!body.empty() || method == "POST" || method == "PUT")) {
    absl::StrAppend(&out, "Content-Length: ", body.size(), "\r\n");
  }
  absl::StrAppend(&out, "\r\n", body);
  return out;
}

Outcome SendHttp(int port, const std::string& raw) {
  int fd = ConnectLoopback(port);
  if (fd < 0) return {"no answer", "connect failed"};
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  size_t sent = 0;
  std::string response;
  bool closed = false;
  while (!closed && absl::Now() < deadline) {
    pollfd p{fd, static_cast<short>(POLLIN | (sent < raw.size() ? POLLOUT : 0)), 0};
    if (poll(&p, 1, 100) <= 0) continue;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[65536];
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0)
        closed = true;
      else
        response.append(buf, static_cast<size_t>(n));
      // Stop sending once the server answered: it refused the rest.
      sent = raw.size();
    } else if (p.revents & POLLOUT) {
      ssize_t n = send(fd, raw.data() + sent, std::min<size_t>(raw.size() - sent, 1 << 20), MSG_NOSIGNAL);
      if (n <= 0)
        sent = raw.size();
      else
        sent += static_cast<size_t>(n);
    }
  }
  close(fd);
  int status = 0;
  if (response.rfind("HTTP/1.1 ", 0) != 0 || !absl::SimpleAtoi(response.substr(9, 3), &status)) {
    return {"no answer", response.substr(0, 200)};
  }
  size_t body = response.find("\r\n\r\n");
  return {absl::StrCat("HTTP ", status), body == std::string::npos ? "" : response.substr(body + 4)};
}

namespace {

struct HttpRows {
  const Target& t;
  std::vector<BadInput>* out;

  void Add(const std::string& method, const std::string& path, const std::string& input,
           std::vector<std::string> headers, const std::string& body, int status, const std::string& message,
           bool with_token = true) {
    if (with_token) headers.push_back("Authorization: Bearer " + t.token);
    if (!body.empty()) headers.push_back("Content-Type: application/json");
    std::string raw = HttpRequest(method, path, headers, body);
    int port = t.dashboard_port;
    out->push_back({method + " " + path.substr(0, 40), input, [port, raw] { return SendHttp(port, raw); },
                    absl::StrCat("HTTP ", status), message});
  }
  // POST /api/jobs/ with `body`: refused 400 naming `message`.
  void Submit(const std::string& input, const std::string& body, const std::string& message, int status = 400) {
    Add("POST", "/api/jobs/", input, {}, body, status, message);
  }
  // PUT of `archive` under its own name (the SHA-256 its contents have), or `name`.
  void Upload(const std::string& input, const std::string& archive, int status, const std::string& message,
              std::string name = "") {
    if (name.empty()) name = dashboard::PackageName(archive);
    std::string raw =
        HttpRequest("PUT", "/api/packages/gcs/" + name,
                    {"Authorization: Bearer " + t.token, "Content-Type: application/octet-stream"}, archive);
    int port = t.dashboard_port;
    out->push_back({"PUT /api/packages/gcs/", input, [port, raw] { return SendHttp(port, raw); },
                    absl::StrCat("HTTP ", status), message});
  }
};

std::string Archive(const std::string& path, char type, const std::string& link) {
  std::string out;
  dashboard::AppendTarEntry(&out, "ok.txt", '0', "fine");
  dashboard::AppendTarEntry(&out, path, type, type == '0' ? "pwned" : "", link);
  dashboard::FinishTar(&out);
  return out;
}

void SubmitRows(HttpRows& h) {
  h.Submit("malformed JSON", R"({"entrypoint": "true",)", "not valid JSON");
  h.Submit("a JSON array", R"(["true"])", "must be a JSON object");
  h.Submit("entrypoint a number", R"({"entrypoint": 5})", "'entrypoint' is required and must be a string");
  h.Submit("entrypoint_num_cpus a string", R"({"entrypoint": "true", "entrypoint_num_cpus": "4"})", "must be a number");
  h.Submit("NaN entrypoint_num_cpus", R"({"entrypoint": "true", "entrypoint_num_cpus": NaN})", "not valid JSON");
  h.Submit("negative entrypoint_num_cpus", R"({"entrypoint": "true", "entrypoint_num_cpus": -1})", "negative");
  h.Submit("1e400 entrypoint_num_cpus", R"({"entrypoint": "true", "entrypoint_num_cpus": 1e400})", "not valid JSON");
  h.Submit("1e15 entrypoint_memory", R"({"entrypoint": "true", "entrypoint_memory": 1e15})", "larger than the maximum");
  h.Submit("negative entrypoint_num_gpus", R"({"entrypoint": "true", "entrypoint_num_gpus": -0.5})", "negative");
  h.Submit("huge entrypoint_resources value", R"({"entrypoint": "true", "entrypoint_resources": {"TPU": 1e300}})",
           "larger than the maximum");
  h.Submit("entrypoint_resources value a string", R"({"entrypoint": "true", "entrypoint_resources": {"x": "1"}})",
           "must be a number");
  h.Submit("reserved name CPU in entrypoint_resources", R"({"entrypoint": "true", "entrypoint_resources": {"CPU": 1}})",
           "entrypoint_num_cpus");
  h.Submit("empty name in entrypoint_resources", R"({"entrypoint": "true", "entrypoint_resources": {"": 1}})",
           "resource name is empty");
  h.Submit("placement-group name in entrypoint_resources",
           R"({"entrypoint": "true", "entrypoint_resources": {"CPU_group_0123456789abcdef0123456789abcdef0123": 1}})",
           "placement-group");
  h.Submit("non-UTF-8 entrypoint", "{\"entrypoint\": \"echo \xff\xfe\"}", "not valid UTF-8");
  h.Submit("unknown field", R"({"entrypoint": "true", "priority": 1})", "unknown field 'priority'");
  h.Submit("submission_id with /", R"({"entrypoint": "true", "submission_id": "a/b"})", "a/b");
  h.Submit("submission_id ..", R"({"entrypoint": "true", "submission_id": ".."})", "..");
  h.Submit("submission_id with NUL", R"({"entrypoint": "true", "submission_id": "a\u0000b"})", "submission");
  h.Submit("package URI gcs://../x.zip", R"({"entrypoint": "true", "runtime_env": {"working_dir": "gcs://../x.zip"}})",
           "invalid package name");
  h.Submit("package URI s3://bucket/x.zip",
           R"({"entrypoint": "true", "runtime_env": {"working_dir": "s3://bucket/x.zip"}})", "gcs://");
  h.Submit("env var name with =", R"({"entrypoint": "true", "runtime_env": {"env_vars": {"A=B": "1"}}})",
           "not a variable name");
  h.Submit("3 MB body",
           absl::StrCat(R"({"entrypoint": "true", "metadata": {"x": ")", std::string(3 << 20, 'x'), "\"}}"),
           "larger than", 413);
}

void PathRows(HttpRows& h) {
  // An encoded slash is decoded before routing: no route takes the result.
  for (const char* path : {"/api/jobs/..%2F..", "/api/jobs/..%2F..%2Ftoken"}) {
    h.Add("GET", path, "traversal in a job path", {}, "", 404, "No route");
    h.Add("DELETE", path, "traversal in a job path", {}, "", 404, "No route");
    h.Add("POST", std::string(path) + "/stop", "traversal in a job path", {}, "", 404, "No route");
    h.Add("GET", std::string(path) + "/logs", "traversal in a job path", {}, "", 404, "No route");
  }
  for (const char* path : {"/api/jobs/..", "/api/jobs/a%00b", "/api/jobs/%ff%fe"}) {
    h.Add("GET", path, "traversal or bad id in a job path", {}, "", 400, "submission");
    h.Add("DELETE", path, "traversal or bad id in a job path", {}, "", 400, "submission");
    h.Add("POST", std::string(path) + "/stop", "traversal or bad id in a job path", {}, "", 400, "submission");
    h.Add("GET", std::string(path) + "/logs", "traversal or bad id in a job path", {}, "", 400, "submission");
  }
  h.Add("GET", "/api/jobs/no-such-job", "unknown job", {}, "", 404, "no-such-job");
  h.Add("GET", "/api/packages/gcs/..%2Ftoken.tar", "traversal in a package name", {}, "", 404, "No route");
  h.Add("PUT", "/api/packages/gcs/..%2F..%2Fevil.tar", "traversal in a package name", {}, "", 404, "No route");
  h.Add("PUT", "/api/packages/gcs/..", "package name ..", {}, "", 400, "package");
  h.Add("PUT", "/api/packages/s3/x.tar", "unknown package protocol", {}, "", 400, "gcs://");
  h.Add("GET", "/api/nothing", "unknown route", {}, "", 404, "");
  h.Add("PATCH", "/api/jobs/", "unknown method", {}, "", 404, "");
  h.Add("BREW", "/api/jobs/", "invalid method", {}, "", 400, "");
  h.Add("GET", "/api/jobs/", "no token", {}, "", 401, "", false);
  h.Add("GET", "/api/jobs/", "wrong token", {"Authorization: Bearer " + std::string(64, 'f')}, "", 403, "", false);
  h.Add("POST", "/api/jobs/", "submit without a token", {}, R"({"entrypoint": "true"})", 401, "", false);
  h.Add("POST", "/api/jobs/", "cross-site submit (Sec-Fetch-Site)", {"Sec-Fetch-Site: cross-site"},
        R"({"entrypoint": "true"})", 403, "");
  h.Add("POST", "/api/jobs/", "cross-site submit (Origin)", {"Origin: http://evil.example"},
        R"({"entrypoint": "true"})", 403, "");
  h.Add("POST", "/api/jobs/", "chunked body", {"Transfer-Encoding: chunked"}, "5\r\nhello\r\n0\r\n\r\n", 411, "");
  h.Add("PUT", "/api/packages/gcs/x.tar", "declared 110 MB package", {"Content-Length: 115343360"}, "", 413, "");
}

void ArchiveRows(HttpRows& h) {
  h.Upload("absolute path in archive", Archive("/tmp/escaped", '0', ""), 400, "escaped");
  h.Upload("../ in archive", Archive("../../escaped", '0', ""), 400, "escaped");
  h.Upload("symlink out of the archive", Archive("link", '2', "/etc"), 400, "link");
  h.Upload("hardlink out of the archive", Archive("hard", '1', "../../token"), 400, "hard");
  std::string huge;
  dashboard::AppendTarEntry(&huge, "big", '0', "x");
  // Declare 8 GiB for an entry of 1 byte: octal 100000000000 in the size field.
  std::memcpy(&huge[124], "100000000000", 12);
  unsigned sum = 0;
  std::memset(&huge[148], ' ', 8);
  for (int i = 0; i < 512; ++i) sum += static_cast<unsigned char>(huge[i]);
  std::snprintf(&huge[148], 8, "%06o", sum);
  dashboard::FinishTar(&huge);
  h.Upload("entry declaring 8 GiB", huge, 400, "truncated");
  h.Upload("not an archive", "junk", 400, "");
  h.Upload("junk under a made-up .tar.gz name", "junk", 400, "not named by its contents", "_manta_pkg_junk.tar.gz");
  // Stored only under the name its contents have.
  const std::string mine = Archive("mine.txt", '0', "");
  h.Upload("an archive under another package's name", mine, 400, "not named by its contents",
           dashboard::PackageName(Archive("theirs.txt", '0', "")));
  h.Upload("an archive under a name of one's choosing", mine, 400, "not named by its contents", "mine.tar");
  // Checked whole before it is stored: depth, names, paths.
  std::string deep;
  for (int i = 0; i < 1500; ++i) deep += "d/";
  h.Upload("a 1,500-deep working directory", Archive(deep + "f", '0', ""), 400, "at most 1024");
  std::string tall;
  for (int i = 0; i < 65; ++i) tall += "d/";
  h.Upload("a 65-deep working directory", Archive(tall + "f", '0', ""), 400, "directories deep");
  h.Upload("a 5,000-byte entry name", Archive(std::string(5000, 'n'), '0', ""), 400, "at most");
}

void FrontRows(HttpRows& h) {
  // Decided from the head: the body is never read.
  h.Add("POST", "/api/jobs/", "chunked body without a token", {"Transfer-Encoding: chunked"},
        "100000\r\n" + std::string(1 << 20, 'x'), 401, "missing cluster token", false);
  h.Add("POST", "/api/jobs/", "Content-Length and Transfer-Encoding both",
        {"Content-Length: 5", "Transfer-Encoding: chunked"}, "0\r\n\r\n", 400, "both");
  h.Add("POST", "/api/jobs/", "a gzip-encoded body", {"Content-Encoding: gzip", "Content-Length: 4"}, "abcd", 415,
        "Content-Encoding");
  h.Add("POST", "/api/login", "a 100 KB sign-in", {"Content-Length: 102400"}, "", 413, "larger than", false);
  // The same refusal for an unknown column, whether or not there are entries.
  for (const char* list : {"/api/v0/nodes", "/api/v0/actors", "/api/v0/placement_groups", "/api/v0/tasks"}) {
    h.Add("GET", std::string(list) + "?filter_keys=no_such_column&filter_predicates=%3D&filter_values=x",
          "a filter on an unknown column", {}, "", 400, "no such column");
  }
}

}  // namespace

std::vector<BadInput> HttpBadInputs(const Target& t) {
  std::vector<BadInput> out;
  HttpRows h{t, &out};
  SubmitRows(h);
  PathRows(h);
  ArchiveRows(h);
  FrontRows(h);
  return out;
}

std::vector<BadInput> CliBadInputs(const Target& t) {
  std::vector<BadInput> out;
  const JobCluster* c = t.cluster;
  auto manta = [c](std::vector<std::string> args, std::vector<std::pair<std::string, std::string>> env) {
    return [c, args, env] {
      CommandResult r = c->RunManta(args, env, absl::Seconds(30));
      return Outcome{absl::StrCat("exit ", r.exit_code), r.out + r.err};
    };
  };
  const std::string url = "http://127.0.0.1:" + std::to_string(t.dashboard_port);
  const std::vector<std::pair<std::string, std::string>> env = {{"MANTA_TOKEN", t.token}};
  auto submit = [&](const std::string& input, std::vector<std::string> flags, const std::string& message) {
    std::vector<std::string> args = {"job", "submit", "--address", url, "--no-wait"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "true"});
    out.push_back({"manta job submit", input, manta(args, env), "exit 1", message});
  };
  submit("NaN --entrypoint-num-cpus", {"--entrypoint-num-cpus=nan"}, "NaN");
  submit("negative --entrypoint-num-cpus", {"--entrypoint-num-cpus=-2"}, "negative");
  submit("1e300 --entrypoint-num-cpus", {"--entrypoint-num-cpus=1e300"}, "larger than the maximum");
  submit("inf --entrypoint-memory", {"--entrypoint-memory=inf"}, "infinite");
  submit("non-UTF-8 --submission-id", {"--submission-id=\xff\xfe"}, "--submission-id");
  submit("--submission-id ../x", {"--submission-id=../x"}, "--submission-id");
  submit("NaN in --entrypoint-resources", {"--entrypoint-resources={\"x\": NaN}"}, "--entrypoint-resources");
  out.push_back({"manta job submit", "--address not a URL",
                 manta({"job", "submit", "--address", "::not a url::", "--", "true"}, env), "exit 1", "address"});
  out.push_back({"manta job submit", "--address with a closed port",
                 manta({"job", "submit", "--address", "http://127.0.0.1:1", "--", "true"}, env), "exit 1",
                 "127.0.0.1:1"});
  out.push_back({"manta job submit", "wrong token",
                 manta({"job", "submit", "--address", url, "--", "true"}, {{"MANTA_TOKEN", std::string(64, 'f')}}),
                 "exit 1", "Invalid cluster token"});
  // Another shape than the cluster up there: named, nothing started.
  out.push_back({"manta up", "--slices 2 while another cluster is up",
                 manta({"up", "--temp-dir", c->temp_dir(), "--tpu", "v6e-16", "--slices", "2"}, env), "exit 1",
                 "already up"});
  // The trainer: its config is checked before anything is reserved, and a
  // program that finds no cluster says so in one line.
  auto trainer = [](std::vector<std::string> args, std::vector<std::pair<std::string, std::string>> env) {
    return [args, env] {
      SpawnOptions o;
      o.executable = JobCluster::BinDir() + "/maxtext_trainer";
      o.args = args;
      o.env = env;
      o.unset_env = {"MANTA_ADDRESS", "RAY_ADDRESS", "MANTA_TOKEN"};
      auto r = RunAndCapture(o, absl::Seconds(60));
      if (!r.ok()) return Outcome{"no answer", std::string(r.status().message())};
      return Outcome{absl::StrCat("exit ", r->exit_code), r->out + r->err};
    };
  };
  const std::string base = std::string(MANTA_SOURCE_DIR) + "/train/kernels/configs/base.yml";
  const std::vector<std::pair<std::string, std::string>> cluster_env = {{"MANTA_ADDRESS", t.gcs_address},
                                                                        {"MANTA_TOKEN", t.token}};
  out.push_back({"maxtext_trainer", "run_name not UTF-8",
                 trainer({base, "model_name=tiny", "run_name=x\xff"}, cluster_env), "exit 1", "not UTF-8"});
  out.push_back({"maxtext_trainer", "max_target_length 2^60",
                 trainer({base, "model_name=tiny", "max_target_length=1152921504606846976"}, cluster_env), "exit 1",
                 "at most"});
  out.push_back({"maxtext_trainer", "no cluster",
                 trainer({"--temp-dir=" + c->temp_dir() + "/no_cluster_here", base}, {}), "exit 1",
                 "maxtext_trainer: "});
  const std::string join = "--address=" + t.gcs_address;
  for (const auto& [input, flag, message] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"NaN --num-cpus", "--num-cpus=nan", "--num-cpus"},
           {"negative --memory", "--memory=-1", "--memory"},
           {"reserved TPU in --resources", "--resources={\"TPU\": 4}", "TPU"},
           {"1e300 in --resources", "--resources={\"x\": 1e300}", "larger than the maximum"}}) {
    out.push_back({"manta start", input, manta({"start", join, "--temp-dir", c->temp_dir() + "/bad_start", flag}, env),
                   "exit 1", message});
  }
  return out;
}

}  // namespace manta::testing
