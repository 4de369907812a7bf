// LabelSelector: which nodes a task or actor may run on, by node label.
//
// Ray's syntax, one condition per key, all of which must hold:
//   "value"         the node has the label with exactly this value
//   "!value"        the node lacks the label or has another value
//   "in(a,b,c)"     the node has the label with one of these values
//   "!in(a,b,c)"    the node lacks the label or has none of these values
// Immutable after Parse; thread-compatible.
//
//   ASSIGN_OR_RETURN(LabelSelector s, LabelSelector::Parse(spec.label_selector()));
//   if (s.Matches(node_labels)) ...
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace manta {

class LabelSelector {
 public:
  LabelSelector() = default;

  // InvalidArgument, naming the key, for a malformed key (Kubernetes' rules:
  // 1-253 of [A-Za-z0-9._/-]), value (at most 63 of [A-Za-z0-9._-]) or
  // operator, an empty in() list, or a value of a TPU label that names no
  // known accelerator type, pod type or topology (tpu::ValidateTpuLabel).
  template <typename Map>
  static absl::StatusOr<LabelSelector> Parse(const Map& selector) {
    return Parse(std::map<std::string, std::string>(selector.begin(), selector.end()));
  }
  static absl::StatusOr<LabelSelector> Parse(const std::map<std::string, std::string>& selector);

  template <typename Map>
  bool Matches(const Map& labels) const {
    for (const Condition& c : conditions_) {
      auto it = labels.find(c.key);
      if (!c.Holds(it == labels.end() ? nullptr : &it->second)) return false;
    }
    return true;
  }
  bool empty() const { return conditions_.empty(); }

 private:
  struct Condition {
    std::string key;
    std::vector<std::string> values;
    bool negated = false;
    // `value` is null when the node lacks the label.
    bool Holds(const std::string* value) const;
  };
  std::vector<Condition> conditions_;
};

}  // namespace manta

namespace manta::raylet {
using ::manta::LabelSelector;
}  // namespace manta::raylet
