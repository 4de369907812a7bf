// LeaseQueue: the leases a raylet holds waiting, in one FIFO per shape, so
// that a shape that cannot run costs nothing until something it could use
// is freed.
//
// A shape's key names everything that makes two leases interchangeable
// (the LeaseManager builds it: demand with its placement-group bundle,
// label selector, scheduling strategy, the worker the lease needs, the
// request's flags): leases of one shape get the same decision from the
// same node and cluster state, so only a shape's head is ever decided, and
// while it must wait so must every lease behind it. A shape is
//   ready       to be decided. Front() is the ready shape whose head came
//               first, so deciding heads in turn decides leases in arrival
//               order, as one FIFO of every lease would.
//   blocked     (Park) its head cannot run here now and no other node has
//               room for it. Woken by WakeFreed when resources it demands
//               come back and it fits, or by WakeAll.
//   infeasible  (Park) no node can ever hold its head. Woken by WakeAll.
// A lease joins its shape's FIFO in O(1) and does not wake it; a new shape
// starts ready. A shape is forgotten when its last lease leaves.
//
// Also counts the waiting leases by demand (infeasible or not), for
// resource reports, and tells whether the counts changed since last asked.
//
// Not thread-safe: its owner's thread only (the LeaseManager's loop, which
// the LeaseManager checks).
//
//   LeaseQueue queue;
//   LeaseQueue::Handle h = queue.Push({.key = key, .demand = demand, .kind = worker}, seq, lease_id);
//   while (LeaseQueue::Shape* s = queue.Front()) {
//     ... decide s->head() ...; then queue.Remove(h) (it ran or was answered)
//     ... or queue.Park(s, LeaseQueue::Verdict::kBlocked) (it waits)
//   }
//   ResourceSet freed = local.AllocatedResources(allocation.id);
//   local.Release(allocation.id);
//   queue.WakeFreed(freed, [&](const ResourceSet& d) { return local.CanFitNow(d); });
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "common/resources.h"

namespace manta::raylet {

class LeaseQueue {
  struct Count;  // waiting leases of one demand

 public:
  // What a shape is known by; given with each lease, used when the lease
  // starts a new shape.
  struct ShapeSpec {
    std::string key;     // equal keys: interchangeable leases
    ResourceSet demand;  // what each lease takes (WakeFreed matches names)
    std::string kind;    // the owner's label (the worker the leases need)
  };
  // A shape's last decision.
  enum class Verdict {
    kNone,        // new: not decided yet
    kBlocked,     // must wait for room
    kInfeasible,  // no node can ever hold it
  };
  struct Entry {
    uint64_t seq;  // arrival order, increasing
    std::string id;
  };
  class Shape {
   public:
    const ShapeSpec& spec() const { return spec_; }
    const Entry& head() const { return fifo_.front(); }
    size_t size() const { return fifo_.size(); }
    bool ready() const { return ready_; }
    Verdict verdict() const { return verdict_; }
    // The owner's note, kept with the shape: the ClusterView version at
    // which no other node had room for it (0: never looked).
    uint64_t no_room_version = 0;

   private:
    friend class LeaseQueue;
    ShapeSpec spec_;
    std::list<Entry> fifo_;
    bool ready_ = true;
    Verdict verdict_ = Verdict::kNone;
    // In blocked_by_name_: from its last Park as blocked until parked
    // otherwise or forgotten.
    bool indexed_ = false;
    Count* count_ = nullptr;  // its demand's bucket in counts_
  };
  // Where a lease waits; valid until Remove.
  struct Handle {
    Shape* shape = nullptr;
    std::list<Entry>::iterator pos;
  };

  LeaseQueue();
  ~LeaseQueue();
  LeaseQueue(const LeaseQueue&) = delete;
  LeaseQueue& operator=(const LeaseQueue&) = delete;

  // Appends a lease to its shape (made from `shape`, ready, when new).
  Handle Push(const ShapeSpec& shape, uint64_t seq, std::string id);
  // Takes a lease out (it ran, was answered or cancelled); forgets its shape
  // when it was the last. `h` is invalid from then on.
  void Remove(const Handle& h);

  // The ready shape whose head came first; null when none is ready.
  Shape* Front() const { return ready_.empty() ? nullptr : ready_.begin()->second; }
  // A ready shape waits, `verdict` (kBlocked or kInfeasible) saying why.
  void Park(Shape* shape, Verdict verdict);
  // Local resources named in `freed` came back (named as available() names
  // them: a bundle's lease frees its indexed and its wildcard names): every
  // blocked shape that demands one of them and for which `fits_now(demand)`
  // holds is ready. Returns how many were woken.
  size_t WakeFreed(const ResourceSet& freed, const std::function<bool(const ResourceSet&)>& fits_now);
  // Every blocked and infeasible shape is ready (the cluster, this node's
  // totals or its draining changed).
  void WakeAll();

  size_t size() const { return size_; }
  size_t num_shapes() const { return shapes_.size(); }
  // Every shape, in no particular order.
  void ForEachShape(const std::function<void(const Shape&)>& fn) const;
  // Waiting leases by demand, ordered by demand: (ready or blocked,
  // infeasible), each pair with at least one lease.
  using DemandCounts = std::map<std::map<std::string, double>, std::pair<int64_t, int64_t>>;
  DemandCounts Demands() const;
  // Whether Demands() differs from what it was at the last call (or, at
  // the first, from empty). O(demands touched since).
  bool TakeDemandsChanged();

 private:
  struct Count {
    int64_t ready = 0;
    int64_t infeasible = 0;
    int64_t told_ready = 0;  // as of the last TakeDemandsChanged
    int64_t told_infeasible = 0;
    int shapes = 0;  // shapes counted here
    bool touched = false;
    const std::map<std::string, double>* demand = nullptr;  // its key in counts_
  };

  // `n` leases join (or, negative, leave) the shape's bucket.
  void AddCount(Shape* shape, int64_t n);
  void SetVerdict(Shape* shape, Verdict verdict);
  void Wake(Shape* shape);
  void Unindex(Shape* shape);
  void Forget(Shape* shape);

  absl::flat_hash_map<std::string, std::unique_ptr<Shape>> shapes_;  // by key
  // Ready shapes by their heads' arrival.
  std::set<std::pair<uint64_t, Shape*>> ready_;
  // Blocked shapes by each resource name they demand (and shapes woken
  // since they were last parked blocked).
  absl::flat_hash_map<std::string, absl::flat_hash_set<Shape*>> blocked_by_name_;
  size_t size_ = 0;
  std::map<std::map<std::string, double>, Count> counts_;  // by demand
  std::vector<Count*> touched_;
};

}  // namespace manta::raylet
