// The worker side of a group that can re-form: what a loop that keeps its
// state across groups (RunMaxText) says to the controller. Internal to
// train/; every call is for a worker while its loop runs (manta::Error
// otherwise).
//
//   JoinInstruction join = internal::CurrentJoin();
//   while (true) {
//     ... join the group as `join` says, then per step:
//     internal::CommitReply c = internal::CommitStep(metrics, checkpoint, replicated);
//     if (!c.commit) ... discard the step; if (c.pause) ... apply it, then stop
//     ...
//     std::optional<JoinInstruction> next = internal::AwaitNextGroup(next_step, "paused", unreported);
//     if (!next) return;  // this worker is not in the next group
//     join = *next;        // GetContext() now describes the new group
//   }
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "manta/train.h"
#include "train/protocol.h"

namespace manta::train::internal {

// How this worker gets its state for the group it is in now.
JoinInstruction CurrentJoin();

struct CommitReply {
  bool commit = false;                  // apply the step (every rank of the group reported it)
  bool pause = false;                   // then stop: the group re-forms
  std::optional<Checkpoint> committed;  // the latest committed checkpoint
};
// Reports a step whose gradients are ready (and the checkpoint saved after
// the previous one, if any) and returns the group's decision. A barrier,
// as Report. `replicated`: every slice holds the whole state. Never throws
// for a group that ended: that is commit == false.
CommitReply CommitStep(const std::map<std::string, double>& metrics, const std::optional<Checkpoint>& checkpoint,
                       bool replicated);

// The group ended (paused after a step, or broke): blocks until the
// controller says how to go on. nullopt: this worker leaves (its loop
// should return). Otherwise the new group's instruction; GetContext() and
// the process's JAX/MEGASCALE variables now describe the new group.
// `checkpoint`: one saved after the last step and not yet reported.
std::optional<JoinInstruction> AwaitNextGroup(int64_t next_step, const std::string& why,
                                              const std::optional<Checkpoint>& checkpoint);

// Called (from another thread) when the controller interrupts the current
// group: the loop's collectives must fail soon. Cleared when the loop ends.
void SetInterruptHandler(std::function<void(const std::string&)> handler);

}  // namespace manta::train::internal
