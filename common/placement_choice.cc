#include "common/placement_choice.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace manta::pg {
namespace {

// A node and what it is left with as bundles are assigned.
struct Candidate {
  NodeOption option;
  double load;
};

// Kuhn's augmenting paths: assigns each bundle (left) a distinct node
// (right). `edges[b]` lists the nodes bundle b may use, best first.
bool Augment(size_t b, const std::vector<std::vector<size_t>>& edges, std::vector<int>& owner,
             std::vector<bool>& seen) {
  for (size_t n : edges[b]) {
    if (seen[n]) continue;
    seen[n] = true;
    if (owner[n] < 0 || Augment(owner[n], edges, owner, seen)) {
      owner[n] = static_cast<int>(b);
      return true;
    }
  }
  return false;
}

// Matches every bundle to its own node; nullopt when impossible.
std::optional<std::vector<size_t>> Match(const std::vector<std::vector<size_t>>& edges, size_t num_nodes) {
  std::vector<int> owner(num_nodes, -1);
  for (size_t b = 0; b < edges.size(); ++b) {
    std::vector<bool> seen(num_nodes, false);
    if (!Augment(b, edges, owner, seen)) return std::nullopt;
  }
  std::vector<size_t> node_of(edges.size());
  for (size_t n = 0; n < num_nodes; ++n) {
    if (owner[n] >= 0) node_of[owner[n]] = n;
  }
  return node_of;
}

void Assign(const std::vector<BundleWant>& wants, size_t w, Candidate& c, Choice& choice) {
  choice.nodes[wants[w].index] = c.option.id;
  c.option.available.Subtract(wants[w].demand);
}

Choice Placed(Choice choice) {
  choice.placed = true;
  return choice;
}

// PACK and STRICT_PACK on one node, a node already holding bundles of the
// group first. nullopt when PACK must spread over several nodes.
std::optional<Choice> ChooseOneNode(Strategy strategy, const std::vector<BundleWant>& wants,
                                    std::vector<Candidate>& nodes, const absl::flat_hash_set<NodeId>& used) {
  ResourceSet sum;
  for (const BundleWant& w : wants) sum.Add(w.demand);
  auto fits = [&](const Candidate& c, const ResourceSet& have) {
    if (strategy == Strategy::kStrictPack && !used.empty() && !used.contains(c.option.id)) return false;
    for (size_t w = 0; w < wants.size(); ++w) {
      if (!c.option.matches[w]) return false;
    }
    return have.Contains(sum);
  };
  Choice choice;
  for (int pass = 0; pass < 2; ++pass) {
    for (Candidate& c : nodes) {
      if ((pass == 0) != used.contains(c.option.id) || !fits(c, c.option.available)) continue;
      for (size_t w = 0; w < wants.size(); ++w) Assign(wants, w, c, choice);
      return Placed(std::move(choice));
    }
  }
  if (strategy != Strategy::kStrictPack) return std::nullopt;
  bool ever = false;
  for (const Candidate& c : nodes) ever |= fits(c, c.option.total);
  choice.infeasible = !ever;
  choice.message = ever ? "no node has room for every bundle at once now"
                        : "no alive node could ever hold every bundle (STRICT_PACK)";
  return choice;
}

Choice ChooseStrictSpread(const std::vector<BundleWant>& wants, std::vector<Candidate>& nodes,
                          const absl::flat_hash_set<NodeId>& used) {
  std::vector<size_t> usable;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!used.contains(nodes[i].option.id)) usable.push_back(i);
  }
  auto match = [&](bool now) {
    std::vector<std::vector<size_t>> edges(wants.size());
    for (size_t w = 0; w < wants.size(); ++w) {
      for (size_t i : usable) {
        const NodeOption& o = nodes[i].option;
        if (o.matches[w] && (now ? o.available : o.total).Contains(wants[w].demand)) edges[w].push_back(i);
      }
    }
    return Match(edges, nodes.size());
  };
  Choice choice;
  if (auto m = match(true)) {
    for (size_t w = 0; w < wants.size(); ++w) Assign(wants, w, nodes[(*m)[w]], choice);
    return Placed(std::move(choice));
  }
  bool ever = match(false).has_value();
  choice.infeasible = !ever;
  choice.message = ever ? "not enough nodes have room for one bundle each now"
                        : "too few alive nodes could hold one bundle each (STRICT_SPREAD)";
  return choice;
}

// PACK (when one node is not enough) and SPREAD: bundle by bundle,
// preferring nodes the group uses (PACK) or does not (SPREAD).
Choice ChooseGreedy(Strategy strategy, const std::vector<BundleWant>& wants, std::vector<Candidate>& nodes,
                    const absl::flat_hash_set<NodeId>& used) {
  absl::flat_hash_set<NodeId> taken = used;
  Choice choice;
  for (size_t w = 0; w < wants.size(); ++w) {
    Candidate* best = nullptr;
    for (Candidate& c : nodes) {
      if (!c.option.matches[w] || !c.option.available.Contains(wants[w].demand)) continue;
      bool preferred = strategy == Strategy::kPack ? taken.contains(c.option.id) : !taken.contains(c.option.id);
      if (preferred) {
        best = &c;
        break;
      }
      if (best == nullptr) best = &c;
    }
    if (best == nullptr) {
      Choice none;
      none.message = absl::StrCat("no node has room for ", wants[w].what, " now");
      return none;
    }
    Assign(wants, w, *best, choice);
    taken.insert(best->option.id);
  }
  return Placed(std::move(choice));
}

}  // namespace

double Load(const ResourceSet& total, const ResourceSet& available) {
  double used = 0;
  int counted = 0;
  for (const auto& [name, q] : total.entries()) {
    if (q.IsZero()) continue;
    used += 1.0 - available.Get(name).ToDouble() / q.ToDouble();
    ++counted;
  }
  return counted == 0 ? 0 : used / counted;
}

Choice ChoosePlacement(Strategy strategy, const std::vector<BundleWant>& wants, std::vector<NodeOption> options,
                       const absl::flat_hash_set<NodeId>& used) {
  if (wants.empty()) return Placed(Choice());
  std::vector<Candidate> nodes;
  nodes.reserve(options.size());
  for (NodeOption& o : options) {
    double load = Load(o.total, o.available);
    o.matches.resize(wants.size(), false);
    nodes.push_back({std::move(o), load});
  }
  std::stable_sort(nodes.begin(), nodes.end(), [](const Candidate& a, const Candidate& b) { return a.load < b.load; });
  // Every bundle needs some node that could ever hold it.
  for (size_t w = 0; w < wants.size(); ++w) {
    bool any = false;
    for (const Candidate& c : nodes) any |= c.option.matches[w] && c.option.total.Contains(wants[w].demand);
    if (!any) {
      Choice none;
      none.infeasible = true;
      none.message = absl::StrCat("no alive node could ever hold ", wants[w].what);
      return none;
    }
  }
  if (strategy == Strategy::kStrictPack || strategy == Strategy::kPack) {
    if (auto one = ChooseOneNode(strategy, wants, nodes, used)) return *std::move(one);
  }
  if (strategy == Strategy::kStrictSpread) return ChooseStrictSpread(wants, nodes, used);
  return ChooseGreedy(strategy, wants, nodes, used);
}

namespace {

// The label values of `nodes`, least loaded node's first.
std::vector<std::string> LabelValues(const std::vector<NodeOption>& nodes) {
  std::vector<const NodeOption*> sorted;
  for (const NodeOption& o : nodes) {
    if (!o.label_value.empty()) sorted.push_back(&o);
  }
  std::stable_sort(sorted.begin(), sorted.end(), [](const NodeOption* a, const NodeOption* b) {
    return Load(a->total, a->available) < Load(b->total, b->available);
  });
  std::vector<std::string> values;
  absl::flat_hash_set<std::string> seen;
  for (const NodeOption* o : sorted) {
    if (seen.insert(o->label_value).second) values.push_back(o->label_value);
  }
  return values;
}

// The nodes of one label value, each with the matches of the wants `idx`.
std::vector<NodeOption> NodesOf(const std::vector<NodeOption>& nodes, const std::string& value,
                                const std::vector<size_t>& idx) {
  std::vector<NodeOption> out;
  for (const NodeOption& o : nodes) {
    if (o.label_value != value) continue;
    NodeOption copy{o.id, o.total, o.available, {}, o.label_value};
    for (size_t w : idx) copy.matches.push_back(w < o.matches.size() && o.matches[w]);
    out.push_back(std::move(copy));
  }
  return out;
}

}  // namespace

Choice ChoosePlacementByLabel(Strategy strategy, const std::vector<BundleWant>& wants, std::vector<NodeOption> nodes,
                              const absl::flat_hash_set<NodeId>& used, const std::map<int, std::string>& fixed) {
  std::map<int, std::vector<size_t>> domains;
  for (size_t w = 0; w < wants.size(); ++w) domains[wants[w].domain].push_back(w);
  const std::vector<std::string> values = LabelValues(nodes);
  absl::flat_hash_set<std::string> taken;
  for (const auto& [domain, value] : fixed) taken.insert(value);
  Choice result;
  for (const auto& [domain, idx] : domains) {
    std::vector<BundleWant> sub;
    for (size_t w : idx) sub.push_back(wants[w]);
    auto f = fixed.find(domain);
    bool placed = false, ever = false;
    for (const std::string& value : values) {
      const bool allowed = f != fixed.end() ? value == f->second : !taken.contains(value);
      std::vector<NodeOption> options = NodesOf(nodes, value, idx);
      absl::flat_hash_set<NodeId> here;
      for (const NodeOption& o : options) {
        if (used.contains(o.id)) here.insert(o.id);
      }
      Choice c = ChoosePlacement(strategy, sub, std::move(options), here);
      ever |= !c.infeasible;
      if (!allowed || !c.placed) continue;
      for (size_t i = 0; i < sub.size(); ++i) {
        const NodeId& node = c.nodes.at(sub[i].index);
        result.nodes[sub[i].index] = node;
        for (NodeOption& o : nodes) {
          if (o.id == node) o.available.Subtract(sub[i].demand);
        }
      }
      taken.insert(value);
      placed = true;
      break;
    }
    if (!placed) {
      Choice none;
      none.infeasible = !ever;
      none.message = ever ? absl::StrCat("no label value has room for every bundle of domain ", domain, " now")
                          : absl::StrCat("no nodes sharing one label value could ever hold the bundles of domain ",
                                         domain, " (", sub.front().what, ", ...)");
      return none;
    }
  }
  return Placed(std::move(result));
}

}  // namespace manta::pg
