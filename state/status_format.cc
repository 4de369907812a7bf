#include "state/status_format.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/placement_group_resources.h"
#include "common/resources.h"

namespace manta::state {
namespace {

// Quantities are summed in fixed point so that used = total - available has
// no float noise ("0.30000000000000004"), in 128 bits: a cluster's memory in
// bytes passes int64 at this scale from about 920 TB (2,000 hosts of 460 GB).
using Units = __int128;
Units ToUnits(double v) { return static_cast<Units>(std::round(v * Quantity::kScale)); }
double FromUnits(Units u) { return static_cast<double>(u) / Quantity::kScale; }

bool IsMemoryResource(const std::string& name) { return name == "memory" || name == "object_store_memory"; }

std::string NodeLabel(const NodeView& node) { return "node_" + node.node_id; }

std::string FormatAmount(const std::string& name, Units units) {
  return IsMemoryResource(name) ? FormatMemory(FromUnits(units)) : FormatQuantity(FromUnits(units));
}

std::string UsageReport(const ClusterView& view) {
  struct Sum {
    Units total = 0;
    Units available = 0;
  };
  std::map<std::string, Sum> sums;  // plain resources
  // By base name: the wildcard group resources (CPU_group_<hex>), summed
  // over groups and nodes. Indexed names repeat them and are not counted.
  std::map<std::string, Sum> reserved;
  auto add = [&](const std::string& name, double v, Units Sum::*field) {
    pg::SummaryName s = pg::SummarizeName(name);
    if (s.kind == pg::SummaryName::kPlain) sums[s.name].*field += ToUnits(v);
    if (s.kind == pg::SummaryName::kReserved) reserved[s.name].*field += ToUnits(v);
  };
  for (const NodeUsage& node : view.usage) {
    for (const auto& [name, v] : node.total) add(name, v, &Sum::total);
    for (const auto& [name, v] : node.available) add(name, v, &Sum::available);
  }
  for (const auto& [base, v] : view.reserved.total) reserved[base].total += ToUnits(v);
  for (const auto& [base, v] : view.reserved.available) reserved[base].available += ToUnits(v);
  std::string out;
  for (const auto& [name, sum] : sums) {
    if (name.find("node:") != std::string::npos) continue;
    Units used = sum.total - sum.available;
    std::string note;
    if (auto it = reserved.find(name); it != reserved.end()) {
      // The plain resource's available excludes the whole reservation; count
      // only what runs in the groups, as `ray status` does.
      Units pg_total = it->second.total;
      Units pg_used = std::max<Units>(0, pg_total - it->second.available);
      used = used - pg_total + pg_used;
      note = absl::StrCat(" (", FormatAmount(name, pg_used), " used of ", FormatAmount(name, pg_total),
                          " reserved in placement groups)");
    }
    used = std::max<Units>(0, used);
    absl::StrAppend(&out, " ", FormatAmount(name, used), "/", FormatAmount(name, sum.total), " ", name, note, "\n");
  }
  return out;
}

// "{'TPU': 4.0} * 4 (STRICT_SPREAD)": what Ray groups pending groups by.
std::string GroupShape(const PlacementGroupView& group) {
  std::vector<std::string> shapes;
  for (const auto& [shape, count] : CountBundleShapes(group.bundles)) {
    shapes.push_back(absl::StrCat(FormatShape(shape), " * ", count));
  }
  if (shapes.empty()) shapes.push_back("(no bundles)");
  return absl::StrCat(absl::StrJoin(shapes, ", "), " (", group.strategy, ")");
}

std::string DemandReport(const ClusterView& view) {
  std::vector<std::string> lines;
  for (const DemandView& d : view.demands) {
    if (d.num_ready > 0) {
      lines.push_back(absl::StrCat(" ", FormatShape(d.shape), ": ", d.num_ready, "+ pending tasks/actors"));
    }
    if (d.num_infeasible > 0) {
      lines.push_back(
          absl::StrCat(" ", FormatShape(d.shape), ": ", d.num_infeasible, "+ pending tasks/actors (infeasible)"));
    }
  }
  // Identical groups make one line, in order of first appearance; the
  // infeasible ones apart from the rest.
  std::vector<std::pair<std::string, bool>> keys;
  std::map<std::pair<std::string, bool>, int> counts;
  for (const PlacementGroupView& g : view.pending_placement_groups) {
    std::pair<std::string, bool> key(GroupShape(g), g.infeasible);
    if (counts[key]++ == 0) keys.push_back(key);
  }
  for (const auto& key : keys) {
    lines.push_back(absl::StrCat(" ", key.first, ": ", counts[key], "+ pending placement groups",
                                 key.second ? " (infeasible)" : ""));
  }
  if (lines.empty()) return " (no resource demands)";
  return absl::StrJoin(lines, "\n");
}

}  // namespace

std::string FormatTimestamp(absl::Time t, absl::TimeZone tz) { return absl::FormatTime("%Y-%m-%d %H:%M:%E6S", t, tz); }

std::string FormatDrainMessage(const NodeView& node, absl::TimeZone tz) {
  std::string out = "draining: " + node.drain_reason;
  if (node.drain_deadline_ms > 0) {
    absl::StrAppend(&out, " (deadline ",
                    absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixMillis(node.drain_deadline_ms), tz), ")");
  }
  return out;
}

std::string FormatMemory(double bytes) {
  static constexpr std::pair<const char*, double> kUnits[] = {
      {"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0}};
  char buf[64];
  for (const auto& [suffix, size] : kUnits) {
    if (bytes >= size) {
      std::snprintf(buf, sizeof(buf), "%.2f%s", bytes / size, suffix);
      return buf;
    }
  }
  std::snprintf(buf, sizeof(buf), "%lldB", static_cast<long long>(bytes));
  return buf;
}

std::string PythonRepr(const std::string& s) {
  char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    if (c == quote || c == '\\') out += '\\';
    out += c;
  }
  out += quote;
  return out;
}

std::string FormatShape(const std::map<std::string, double>& shape) {
  std::vector<std::string> items;
  for (const auto& [name, v] : shape) items.push_back(absl::StrCat(PythonRepr(name), ": ", FormatQuantity(v)));
  return "{" + absl::StrJoin(items, ", ") + "}";
}

std::vector<std::pair<std::map<std::string, double>, int>> CountBundleShapes(const std::vector<BundleView>& bundles) {
  std::vector<std::pair<std::map<std::string, double>, int>> out;
  for (const BundleView& b : bundles) {
    std::string shape = FormatShape(b.resources);
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return FormatShape(e.first) == shape; });
    if (it == out.end()) {
      out.emplace_back(b.resources, 1);
    } else {
      ++it->second;
    }
  }
  return out;
}

std::string FormatStatus(const ClusterView& view, absl::Time now, absl::TimeZone tz) {
  std::string header = absl::StrCat("======== Cluster status: ", FormatTimestamp(now, tz), " ========");
  std::string separator(header.size(), '-');

  std::vector<const NodeView*> alive;
  std::vector<const NodeView*> draining;
  std::vector<const NodeView*> failed;
  for (const NodeView& n : view.nodes) {
    if (n.alive && n.draining) {
      draining.push_back(&n);
    } else if (n.alive) {
      alive.push_back(&n);
    } else if (!n.death_expected) {
      failed.push_back(&n);
    }
  }
  auto head_first = [](const NodeView* a, const NodeView* b) {
    if (a->is_head != b->is_head) return a->is_head;
    return a->start_time_ms < b->start_time_ms;
  };
  std::stable_sort(alive.begin(), alive.end(), head_first);
  std::stable_sort(draining.begin(), draining.end(), head_first);
  std::stable_sort(failed.begin(), failed.end(),
                   [](const NodeView* a, const NodeView* b) { return a->end_time_ms > b->end_time_ms; });
  if (failed.size() > static_cast<size_t>(kMaxFailuresShown)) failed.resize(kMaxFailuresShown);

  std::string out;
  absl::StrAppend(&out, header, "\n");
  if (view.auth_disabled) absl::StrAppend(&out, kStatusAuthDisabledLine, "\n");
  absl::StrAppend(&out, "Node status\n", separator, "\nActive:\n");
  if (alive.empty()) out += " (no active nodes)\n";
  for (const NodeView* n : alive) absl::StrAppend(&out, " 1 ", NodeLabel(*n), "\n");
  if (!draining.empty()) out += "Draining:\n";
  for (const NodeView* n : draining) {
    absl::StrAppend(&out, " 1 ", NodeLabel(*n), ": ", FormatDrainMessage(*n, tz), "\n");
  }
  out += "Pending:\n (no pending nodes)\nRecent failures:\n";
  if (failed.empty()) out += " (no failures)\n";
  for (const NodeView* n : failed) {
    absl::StrAppend(&out, " ", NodeLabel(*n), ": NodeTerminated (ip: ", n->node_ip, ")\n");
  }
  absl::StrAppend(&out, "\nResources\n", separator, "\nUsage:\n", UsageReport(view), "\nDemands:\n", DemandReport(view),
                  "\n");
  return out;
}

}  // namespace manta::state
