// What every HTTP front reads of a connection before a handler runs
// (FrontReader over a policy like the servers'): the raw bytes of a
// connection, split into reads where the fuzzer says (a trickle), must give
// the same decision however they are split; a refusal is a whole response;
// a request handed on is a restated head and at most its route's limit of
// body; nothing past what was decided is taken, and the loop's budget is
// back to zero once the reader is done.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/http/front_reader.h"
#include "fuzz/fuzz_check.h"

namespace {

using manta::http::BodyBudget;
using manta::http::FrontPolicy;
using manta::http::FrontReader;
using manta::http::HttpLimits;

const FrontPolicy& Policy() {
  static const FrontPolicy* policy = [] {
    auto* p = new FrontPolicy();
    p->routes = {{.method = "GET", .path = "/", .is_public = true},
                 {.method = "POST", .path = "/api/login", .is_public = true, .max_body = 64, .json_body = true},
                 {.method = "POST", .path = "/generate", .max_body = 512, .chunked = true, .json_body = true},
                 {.method = "PUT", .path = "/api/packages/*", .max_body = 1 << 20},
                 {.method = "GET", .path = "/metrics"}};
    p->authenticate = [](const manta::http::RequestHead& head) { return manta::http::BearerCredential(head, "token"); };
    return p;
  }();
  return *policy;
}

struct Decision {
  FrontReader::Kind kind = FrontReader::Kind::kMore;
  std::string bytes;
  uint64_t left = 0;
};

// Feeds `pieces` in order until the reader decides.
Decision Run(const std::vector<std::string_view>& pieces, const HttpLimits& limits) {
  BodyBudget budget(4096);
  Decision d;
  {
    FrontReader reader(&Policy(), &limits, "127.0.0.1", &budget);
    for (std::string_view piece : pieces) {
      FrontReader::Step s = reader.Feed(piece);
      FUZZ_CHECK(budget.used() <= 4096);
      if (s.kind == FrontReader::Kind::kMore) continue;
      d = {s.kind, s.bytes, s.left};
      break;
    }
  }
  FUZZ_CHECK(budget.used() == 0);  // a reader gives back what it reserved
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  HttpLimits limits;
  limits.max_loop_body_bytes = 1024;
  limits.max_header_bytes = 2048;
  // The first byte says where reads end: every `step` bytes.
  const size_t step = 1 + data[0] % 17;
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<std::string_view> pieces;
  for (size_t i = 0; i < input.size(); i += step) pieces.push_back(input.substr(i, step));
  const Decision split = Run(pieces, limits);
  const Decision whole = Run({input}, limits);
  FUZZ_CHECK(split.kind == whole.kind);
  if (whole.kind == FrontReader::Kind::kUpload) {
    // The start of an upload's body is what came with its head's last read.
    const size_t head = whole.bytes.find("\r\n\r\n");
    FUZZ_CHECK(split.bytes.compare(0, head + 4, whole.bytes, 0, head + 4) == 0);
    FUZZ_CHECK(split.bytes.size() + split.left == whole.bytes.size() + whole.left);
  } else {
    FUZZ_CHECK(split.bytes == whole.bytes);
    FUZZ_CHECK(split.left == whole.left);
  }
  switch (whole.kind) {
    case FrontReader::Kind::kMore:
      break;
    case FrontReader::Kind::kRefuse:
      FUZZ_CHECK(whole.bytes.rfind("HTTP/1.1 ", 0) == 0);
      FUZZ_CHECK(whole.bytes.find("\r\n\r\n") != std::string::npos);
      break;
    case FrontReader::Kind::kHandOff:
    case FrontReader::Kind::kUpload: {
      // A head httplib reads, with its length; no more body than was sent,
      // and no more than a route takes.
      const size_t end = whole.bytes.find("\r\n\r\n");
      FUZZ_CHECK(end != std::string::npos);
      FUZZ_CHECK(whole.bytes.find("Transfer-Encoding") == std::string::npos);
      FUZZ_CHECK(whole.bytes.find("Content-Length: ") < end);
      const size_t body = whole.bytes.size() - end - 4;
      FUZZ_CHECK(body <= input.size());
      FUZZ_CHECK(body + whole.left <= (1u << 20));
      break;
    }
  }
  return 0;
}
