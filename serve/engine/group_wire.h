// What the ranks of a GroupEngine send each other (group_engine.cc and
// group_transfer.cc): a call as floats, and a K/V transfer's header.
// Internal to serve/engine.
#pragma once

#include <cstdint>

#include "absl/time/time.h"

namespace manta::serve::wire {

// A call, as every rank receives it: floats (token ids and slots are exact
// in a float below 2^24; request ids go as two halves of 20 bits).
//   [op, n, ...]  prefill: slot, tokens[n]; decode: slots[n], tokens[n]; release: slot;
//                 prefill to move: id_hi, id_lo, tokens[n]; import: slots[n], id_his[n], id_los[n]
enum Op { kNoop = 0, kPrefill = 1, kDecode = 2, kRelease = 3, kStop = 4, kPrefillOut = 5, kImport = 6 };

// A transfer's header: [id_hi, id_lo, length, first token]; id_hi is one of
// these when no transfer follows.
constexpr float kHeaderNoop = -1, kHeaderDone = -2;

// How long a leader's chip (or a transfer thread) waits for work before it
// sends a no-op.
constexpr absl::Duration kQuiet = absl::Seconds(1);

constexpr int64_t kIdHalf = int64_t{1} << 20;
inline float IdHigh(int64_t id) { return static_cast<float>(id / kIdHalf); }
inline float IdLow(int64_t id) { return static_cast<float>(id % kIdHalf); }
inline int64_t JoinId(float high, float low) {
  return static_cast<int64_t>(high) * kIdHalf + static_cast<int64_t>(low);
}

}  // namespace manta::serve::wire
