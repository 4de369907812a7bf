// The bad-input table: hostile inputs to every entry point of a head node
// (the GCS's and the raylet's gRPC services, the dashboard's Jobs API and the
// `manta` CLI), each with the refusal it must get.
//
//   Target target = ...;  // addresses and token of a running JobCluster
//   for (const BadInput& b : GcsBadInputs(target)) {
//     Outcome got = b.send();
//     if (!b.Matches(got)) ...
//   }
//
// Every callable sends its input once and reports what came back; none of
// them may change the cluster's state. Not thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "tests/job_cluster.h"

namespace google::protobuf {
class Message;
}

namespace manta::testing {

// What an entry point answered: "INVALID_ARGUMENT" (a gRPC code), "lease
// INVALID" (a verdict inside an OK reply), "HTTP 400", "exit 1".
struct Outcome {
  std::string code;
  std::string message;
};

struct BadInput {
  std::string entry_point;  // "GCS RegisterNode", "POST /api/jobs/", "manta job submit"
  std::string input;        // "NaN CPU"
  std::function<Outcome()> send;
  std::string code;     // the expected Outcome::code
  std::string message;  // a substring of the expected message

  bool Matches(const Outcome& got) const { return got.code == code && absl::StrContains(got.message, message); }
};

// Where the head's daemons listen.
struct Target {
  const JobCluster* cluster = nullptr;
  std::string gcs_address;     // "127.0.0.1:port"
  std::string raylet_address;  // the head raylet's NodeManagerService
  std::string node_id;         // the head node's id (binary)
  std::string token;
  int dashboard_port = 0;
};

// A unary call of `method` ("/manta.rpc.NodeInfoGcsService/RegisterNode")
// with `request` and `token` (none when empty), a 10 s deadline. On OK,
// `reply` (if given) is parsed from the answer.
Outcome CallGrpc(const std::string& target, const std::string& method, const google::protobuf::Message& request,
                 const std::string& token, google::protobuf::Message* reply = nullptr);

// Sends `raw` (a whole HTTP/1.1 request) to 127.0.0.1:`port`, streaming it
// until the server answers or closes, and reads the answer until the server
// closes (10 s at most). code "HTTP <status>", message the body; "no
// answer" when none came.
Outcome SendHttp(int port, const std::string& raw);

// "METHOD path HTTP/1.1" with Host, Connection: close, Content-Length (for a
// body), `headers` ("Name: value" each) and the body.
std::string HttpRequest(const std::string& method, const std::string& path, const std::vector<std::string>& headers,
                        const std::string& body = "");

// The tables, one per kind of entry point.
std::vector<BadInput> GcsBadInputs(const Target& t);
std::vector<BadInput> RayletBadInputs(const Target& t);
std::vector<BadInput> HttpBadInputs(const Target& t);
std::vector<BadInput> CliBadInputs(const Target& t);

}  // namespace manta::testing
