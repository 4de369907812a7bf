// What the ranks of a GroupEngine send each other (group_engine.cc and
// group_transfer.cc): a call as floats, and a K/V transfer's header.
// Internal to serve/engine.
//
// A float holds every integer in [0, 2^24) exactly, and not all of those
// past it (2^24 + 1 arrives as 2^24). So token ids, slots, lengths and
// counts travel only below 2^24, and a request id, as two halves (id / 2^20
// and id % 2^20), only below 2^44. The encoders here check that and return
// InvalidArgument for a value out of range, so nothing is sent changed:
//
//   wire::Encoder call(wire::kPrefill);
//   call.AddInt(n, "a prompt's length").AddInt(slot, "a slot");
//   for (int32_t t : prompt) call.AddToken(t);
//   absl::StatusOr<std::vector<float>> floats = std::move(call).Finish();
//   if (!floats.ok()) return floats.status();   // nothing was sent
//   Send(*std::move(floats));
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace manta::serve::wire {

// A call, as every rank receives it:
//   [op, n, ...]  prefill: slot, tokens[n]; decode: slots[n], tokens[n]; release: slot;
//                 prefill to move: id_hi, id_lo, tokens[n]; import: slots[n], id_his[n], id_los[n]
enum Op { kNoop = 0, kPrefill = 1, kDecode = 2, kRelease = 3, kStop = 4, kPrefillOut = 5, kImport = 6 };

// A transfer's header: [id_hi, id_lo, length, first token]; id_hi is one of
// these when no transfer follows.
constexpr float kHeaderNoop = -1, kHeaderDone = -2;

// How long a leader's chip (or a transfer thread) waits for work before it
// sends a no-op.
constexpr absl::Duration kQuiet = absl::Seconds(1);

// Integers in [0, kIntLimit) are exact in a float.
constexpr int64_t kIntLimit = int64_t{1} << 24;
// A request id goes as id / kIdHalf and id % kIdHalf, both below kIntLimit.
constexpr int64_t kIdHalf = int64_t{1} << 20;
constexpr int64_t kIdLimit = kIntLimit * kIdHalf;  // 2^44

// OK when 0 <= value < 2^24; InvalidArgument naming `what` otherwise.
inline absl::Status CheckInt(int64_t value, const char* what) {
  if (value >= 0 && value < kIntLimit) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " of ", value, " is out of the serving group's range [0, 2^24)"));
}

// OK when 0 <= id < 2^44; InvalidArgument otherwise.
inline absl::Status CheckId(int64_t id) {
  if (id >= 0 && id < kIdLimit) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("request id ", id, " is out of the serving group's range [0, 2^44)"));
}

// A call (or, empty to begin with, a header) being encoded. Each Add checks
// its value; the first one out of range is kept as the error, and nothing
// more is appended.
class Encoder {
 public:
  Encoder() = default;
  explicit Encoder(Op op) : floats_{static_cast<float>(op)} {}

  // A count, slot or length (`what` names it in the error): 0 <= value < 2^24.
  Encoder& AddInt(int64_t value, const char* what) {
    if (status_.ok()) status_ = CheckInt(value, what);
    if (status_.ok()) floats_.push_back(static_cast<float>(value));
    return *this;
  }
  // A token id: 0 <= token < 2^24.
  Encoder& AddToken(int64_t token) { return AddInt(token, "a token id"); }
  // A request id's halves: 0 <= id < 2^44.
  Encoder& AddIdHigh(int64_t id) { return AddIdPart(id, id / kIdHalf); }
  Encoder& AddIdLow(int64_t id) { return AddIdPart(id, id % kIdHalf); }

  // The floats, or InvalidArgument naming the first value out of range.
  absl::StatusOr<std::vector<float>> Finish() && {
    if (!status_.ok()) return status_;
    return std::move(floats_);
  }

 private:
  Encoder& AddIdPart(int64_t id, int64_t part) {
    if (status_.ok()) status_ = CheckId(id);
    if (status_.ok()) floats_.push_back(static_cast<float>(part));
    return *this;
  }

  std::vector<float> floats_;
  absl::Status status_;
};

// What AddInt wrote. InvalidArgument unless `f` is a whole number in
// [0, 2^24) (a peer's header, say, that is not one of ours).
inline absl::StatusOr<int64_t> ReadInt(float f, const char* what) {
  if (!(f >= 0 && f < static_cast<float>(kIntLimit)) || std::floor(f) != f) {
    return absl::InvalidArgumentError(absl::StrCat(what, " of ", f, " is not an integer in [0, 2^24)"));
  }
  return static_cast<int64_t>(f);
}

// The id that AddIdHigh and AddIdLow wrote. InvalidArgument unless both are
// such halves.
inline absl::StatusOr<int64_t> JoinId(float high, float low) {
  absl::StatusOr<int64_t> h = ReadInt(high, "a request id's high half");
  if (!h.ok()) return h.status();
  absl::StatusOr<int64_t> l = ReadInt(low, "a request id's low half");
  if (!l.ok()) return l.status();
  if (*l >= kIdHalf) {
    return absl::InvalidArgumentError(absl::StrCat("a request id's low half of ", *l, " is not below 2^20"));
  }
  return *h * kIdHalf + *l;
}

// A K/V transfer's header, as the transfer threads send it.
struct TransferHeader {
  static constexpr int kFloats = 4;

  int64_t id = 0;
  int64_t len = 0;
  int32_t first_token = 0;

  // Writes [id_hi, id_lo, len, first_token] to out[0..3]. InvalidArgument,
  // `out` unchanged, if a field is out of range.
  absl::Status Encode(float* out) const {
    Encoder e;
    e.AddIdHigh(id).AddIdLow(id).AddInt(len, "a transfer's length").AddToken(first_token);
    absl::StatusOr<std::vector<float>> floats = std::move(e).Finish();
    if (!floats.ok()) return floats.status();
    std::copy(floats->begin(), floats->end(), out);
    return absl::OkStatus();
  }
  // Reads what Encode wrote (not a kHeaderNoop or kHeaderDone marker).
  // InvalidArgument if `in` is not such a header.
  static absl::StatusOr<TransferHeader> Decode(const float* in) {
    TransferHeader h;
    absl::StatusOr<int64_t> id = JoinId(in[0], in[1]);
    if (!id.ok()) return id.status();
    absl::StatusOr<int64_t> len = ReadInt(in[2], "a transfer's length");
    if (!len.ok()) return len.status();
    absl::StatusOr<int64_t> token = ReadInt(in[3], "a transfer's first token");
    if (!token.ok()) return token.status();
    h.id = *id;
    h.len = *len;
    h.first_token = static_cast<int32_t>(*token);
    return h;
  }
};

}  // namespace manta::serve::wire
