// FrontReader: one connection's request, read as its bytes arrive and
// decided by the server's front (http_front.h) from its head, before any of
// its body is taken. GatedHttpServer's accepting loop runs one per
// connection and does what it answers; the fuzz target feeds it raw bytes.
//
//   FrontReader reader(&front, &limits, peer, &budget);
//   FrontReader::Step step = reader.Feed(bytes);
//   switch (step.kind) { case kMore: ...; case kRefuse: send(step.bytes), linger; ... }
//
// What it answers:
//   kMore     wants more bytes;
//   kRefuse   send step.bytes (a whole response), then close: the request's
//             body is never read;
//   kHandOff  the request is whole: step.bytes is it, restated for httplib
//             (its head with a Content-Length, its body decoded and read);
//   kUpload   an accepted body larger than the loop reads: step.bytes is
//             the restated head and the start of the body, and `left` more
//             body bytes are for the handling thread to read, capped.
// Not thread-safe: one connection, one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "common/http/http_front.h"
#include "common/http/http_limits.h"
#include "common/http/request_head.h"

namespace manta::http {

// What the readers of one server share: the bytes the loop may hold for
// bodies being read, and the connections reading public routes' bodies per
// peer. Loop thread only.
class BodyBudget {
 public:
  explicit BodyBudget(uint64_t max_bytes) : max_bytes_(max_bytes) {}
  bool Reserve(uint64_t bytes) {
    if (used_ + bytes > max_bytes_) return false;
    used_ += bytes;
    return true;
  }
  void Release(uint64_t bytes) { used_ -= bytes; }
  uint64_t used() const { return used_; }

 private:
  const uint64_t max_bytes_;
  uint64_t used_ = 0;
};

class FrontReader {
 public:
  enum class Kind { kMore, kRefuse, kHandOff, kUpload };
  struct Step {
    Kind kind = Kind::kMore;
    std::string bytes;
    std::string interim;       // to send now ("100 Continue" when the client waits for it)
    uint64_t left = 0;         // kUpload: body bytes still to read
    absl::Duration body_time;  // kUpload: how long the whole body may take
    bool is_public = false;    // the route needs no credential
  };

  // `front`, `limits` and `budget` outlive the reader.
  FrontReader(const FrontPolicy* front, const HttpLimits* limits, std::string peer, BodyBudget* budget);
  ~FrontReader();
  FrontReader(const FrontReader&) = delete;
  FrontReader& operator=(const FrontReader&) = delete;

  Step Feed(std::string_view bytes);
  // Gives up on the request (the server refused it for its own reasons):
  // what it reserved of the budget is free again.
  void Abandon();

  // Whether the head has been read and accepted (the body is being read).
  bool reading_body() const { return phase_ == Phase::kBody; }
  // Reading the body of a public route (what anyone may send).
  bool public_body() const { return phase_ == Phase::kBody && verdict_.is_public; }
  // kBody: how long the body may still take from when its head was read.
  absl::Duration body_time() const { return body_time_; }
  bool has_bytes() const { return !bytes_.empty() || phase_ != Phase::kHead; }
  const std::string& peer() const { return peer_; }

  // A refusal with `status` and `message`, as this server writes them.
  std::string Refusal(int status, const std::string& message) const;

 private:
  enum class Phase { kHead, kBody, kDone };
  Step OnHead(std::string_view body_start);
  Step OnBody(std::string_view bytes);
  Step Refuse(const FrontVerdict& verdict);
  Step Refuse(int status, const std::string& message);
  Step HandOff(uint64_t length, const std::string& body);
  void ReleaseBudget();

  const FrontPolicy* const front_;
  const HttpLimits* const limits_;
  const std::string peer_;
  BodyBudget* const budget_;
  Phase phase_ = Phase::kHead;
  std::string bytes_;  // the head as it arrives, then the body (Content-Length)
  RequestHead head_;
  FrontVerdict verdict_;
  uint64_t reserved_ = 0;
  absl::Duration body_time_;
  std::unique_ptr<ChunkedDecoder> chunked_;
};

// The head httplib reads: the request line and headers as parsed, the body
// restated as `content_length` bytes, a JSON route's Content-Type as JSON,
// without Expect and with Connection: close.
std::string RestatedHead(const RequestHead& head, uint64_t content_length, bool json_body);

// How long a body of `bytes` may take to arrive: the grace, then the rate.
absl::Duration BodyAllowance(const HttpLimits& limits, uint64_t bytes);

}  // namespace manta::http
