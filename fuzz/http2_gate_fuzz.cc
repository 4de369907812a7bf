// What a ConnectionGate reads from a connection before any of it reaches
// gRPC: the start of an HTTP/2 connection (ParseFirstRequest, with
// nghttp2's HPACK decoder) and, on a refused connection, everything the
// client sends after (RefusingConnection). A start asks for more than it
// has or ends in a request on an odd stream; a refused connection's
// answers are whole frames however the input is split, and it answers at
// most once per request.
#include <cstdint>
#include <string>
#include <string_view>

#include "common/rpc/first_request.h"
#include "common/rpc/http2_frames.h"
#include "common/rpc/refusing_connection.h"
#include "fuzz/fuzz_check.h"

namespace {

// Whole frames, counting HEADERS answers.
int CountAnswers(std::string_view out) {
  int headers = 0;
  while (!out.empty()) {
    FUZZ_CHECK(out.size() >= manta::rpc::http2::kFrameHeaderSize);
    auto h = manta::rpc::http2::ReadFrameHeader(out);
    FUZZ_CHECK(out.size() >= manta::rpc::http2::kFrameHeaderSize + h.length);
    if (h.type == manta::rpc::http2::kHeaders) ++headers;
    out.remove_prefix(manta::rpc::http2::kFrameHeaderSize + h.length);
  }
  return headers;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  manta::rpc::FirstRequest first = manta::rpc::ParseFirstRequest(input);
  switch (first.kind) {
    case manta::rpc::FirstRequest::kNeedMore:
      FUZZ_CHECK(first.need > size);
      FUZZ_CHECK(first.need <= manta::rpc::kMaxFirstRequestBytes);
      break;
    case manta::rpc::FirstRequest::kHeaders:
      FUZZ_CHECK(first.stream_id % 2 == 1);
      break;
    case manta::rpc::FirstRequest::kInvalid:
      FUZZ_CHECK(!first.error.empty());
      break;
  }
  // Whole, then in two pieces split by the first byte: the same answers.
  manta::rpc::RefusingConnection whole("missing cluster token", "abc");
  const int answered = CountAnswers(whole.Consume(input));
  FUZZ_CHECK(answered == whole.answered());
  const size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  manta::rpc::RefusingConnection split("missing cluster token", "abc");
  int split_answered = CountAnswers(split.Consume(input.substr(0, cut)));
  split_answered += CountAnswers(split.Consume(input.substr(cut)));
  FUZZ_CHECK(split_answered == answered);
  FUZZ_CHECK(split.done() == whole.done());
  return 0;
}
