#include "raylet/lease_queue.h"

#include "common/check.h"

namespace manta::raylet {

LeaseQueue::LeaseQueue() = default;
LeaseQueue::~LeaseQueue() = default;

LeaseQueue::Handle LeaseQueue::Push(const ShapeSpec& spec, uint64_t seq, std::string id) {
  auto [it, added] = shapes_.try_emplace(spec.key);
  if (added) {
    it->second = std::make_unique<Shape>();
    Shape* shape = it->second.get();
    shape->spec_ = spec;
    auto [c, fresh] = counts_.try_emplace(spec.demand.ToMap());
    c->second.demand = &c->first;
    ++c->second.shapes;
    shape->count_ = &c->second;
  }
  Shape* shape = it->second.get();
  CHECK(shape->fifo_.empty() || shape->fifo_.back().seq < seq) << "leases must arrive in seq order";
  shape->fifo_.push_back(Entry{seq, std::move(id)});
  if (added) ready_.emplace(seq, shape);
  ++size_;
  AddCount(shape, 1);
  return Handle{shape, std::prev(shape->fifo_.end())};
}

void LeaseQueue::Remove(const Handle& h) {
  Shape* shape = h.shape;
  const bool head = h.pos == shape->fifo_.begin();
  if (head && shape->ready_) ready_.erase({h.pos->seq, shape});
  shape->fifo_.erase(h.pos);
  --size_;
  AddCount(shape, -1);
  if (shape->fifo_.empty()) return Forget(shape);
  if (head && shape->ready_) ready_.emplace(shape->fifo_.front().seq, shape);
}

void LeaseQueue::Park(Shape* shape, Verdict verdict) {
  CHECK(shape->ready_ && verdict != Verdict::kNone) << "only a ready shape is parked, with a reason";
  ready_.erase({shape->fifo_.front().seq, shape});
  shape->ready_ = false;
  SetVerdict(shape, verdict);
  if (verdict == Verdict::kBlocked && !shape->indexed_) {
    for (const auto& [name, q] : shape->spec_.demand.entries()) blocked_by_name_[name].insert(shape);
    shape->indexed_ = true;
  } else if (verdict != Verdict::kBlocked) {
    Unindex(shape);
  }
}

size_t LeaseQueue::WakeFreed(const ResourceSet& freed, const std::function<bool(const ResourceSet&)>& fits_now) {
  std::vector<Shape*> candidates;
  for (const auto& [name, q] : freed.entries()) {
    auto it = blocked_by_name_.find(name);
    if (it != blocked_by_name_.end()) candidates.insert(candidates.end(), it->second.begin(), it->second.end());
  }
  size_t woken = 0;
  for (Shape* shape : candidates) {
    // A shape demanding several freed names is listed once per name.
    if (shape->ready_ || !fits_now(shape->spec_.demand)) continue;
    Wake(shape);
    ++woken;
  }
  return woken;
}

void LeaseQueue::WakeAll() {
  for (auto& [key, shape] : shapes_) {
    if (!shape->ready_) Wake(shape.get());
  }
}

void LeaseQueue::Wake(Shape* shape) {
  // Still indexed: most woken shapes wait again at once (WakeFreed passes
  // over ready ones).
  shape->ready_ = true;
  ready_.emplace(shape->fifo_.front().seq, shape);
}

void LeaseQueue::Unindex(Shape* shape) {
  if (!shape->indexed_) return;
  shape->indexed_ = false;
  for (const auto& [name, q] : shape->spec_.demand.entries()) {
    auto it = blocked_by_name_.find(name);
    if (it == blocked_by_name_.end()) continue;
    it->second.erase(shape);
    if (it->second.empty()) blocked_by_name_.erase(it);
  }
}

void LeaseQueue::SetVerdict(Shape* shape, Verdict verdict) {
  const int64_t n = static_cast<int64_t>(shape->fifo_.size());
  AddCount(shape, -n);
  shape->verdict_ = verdict;
  AddCount(shape, n);
}

void LeaseQueue::AddCount(Shape* shape, int64_t n) {
  Count* c = shape->count_;
  (shape->verdict_ == Verdict::kInfeasible ? c->infeasible : c->ready) += n;
  if (!c->touched) {
    c->touched = true;
    touched_.push_back(c);
  }
}

void LeaseQueue::Forget(Shape* shape) {
  // A ready shape's entry in ready_ went with its last lease (Remove).
  Unindex(shape);
  Count* c = shape->count_;
  --c->shapes;
  if (!c->touched) {
    c->touched = true;  // erased by TakeDemandsChanged once told
    touched_.push_back(c);
  }
  shapes_.erase(shape->spec_.key);  // `shape` is gone from here on
}

void LeaseQueue::ForEachShape(const std::function<void(const Shape&)>& fn) const {
  for (const auto& [key, shape] : shapes_) fn(*shape);
}

LeaseQueue::DemandCounts LeaseQueue::Demands() const {
  DemandCounts out;
  for (const auto& [demand, c] : counts_) {
    if (c.ready > 0 || c.infeasible > 0) out.emplace(demand, std::make_pair(c.ready, c.infeasible));
  }
  return out;
}

bool LeaseQueue::TakeDemandsChanged() {
  bool changed = false;
  for (Count* c : touched_) {
    changed |= c->ready != c->told_ready || c->infeasible != c->told_infeasible;
    c->told_ready = c->ready;
    c->told_infeasible = c->infeasible;
    c->touched = false;
    if (c->shapes == 0) counts_.erase(*c->demand);  // no lease: it counts none
  }
  touched_.clear();
  return changed;
}

}  // namespace manta::raylet
