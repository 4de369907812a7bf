#include "state/list_placement_groups.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"
#include "state/list_format.h"
#include "state/status_format.h"

namespace manta::state {
namespace {

// "{'manta.io/tpu-slice-name': 'tpu-group-0'}".
std::string FormatLabels(const std::map<std::string, std::string>& labels) {
  std::vector<std::string> items;
  for (const auto& [k, v] : labels) items.push_back(absl::StrCat(PythonRepr(k), ": ", PythonRepr(v)));
  return "{" + absl::StrJoin(items, ", ") + "}";
}

std::vector<std::string> BundleSummary(const std::vector<BundleView>& bundles) {
  std::vector<std::string> lines;
  for (const auto& [shape, count] : CountBundleShapes(bundles)) {
    lines.push_back(absl::StrCat(count, " x ", FormatShape(shape)));
  }
  return lines;
}

std::vector<std::string> BundleDetail(const std::vector<BundleView>& bundles) {
  std::vector<std::string> lines;
  for (const BundleView& b : bundles) {
    std::string line = absl::StrCat(b.index, ": ", FormatShape(b.resources));
    if (!b.label_selector.empty()) absl::StrAppend(&line, " labels=", FormatLabels(b.label_selector));
    if (!b.node_id.empty()) absl::StrAppend(&line, " node=", b.node_id);
    lines.push_back(std::move(line));
  }
  return lines;
}

// A table cell is one line per entry: keep a message on one.
std::string StateMessage(const PlacementGroupView& g) {
  if (g.state == "CREATED") return "";
  return absl::StrReplaceAll(g.state_message, {{"\r\n", " "}, {"\n", " "}, {"\r", " "}});
}

}  // namespace

std::string FormatPlacementGroupList(const std::vector<PlacementGroupView>& groups, int limit, bool detail,
                                     absl::Time now, absl::TimeZone tz) {
  std::vector<std::string> headers = {"PLACEMENT_GROUP_ID", "NAME", "CREATOR_JOB_ID", "STATE", "STRATEGY"};
  if (detail) headers.insert(headers.end(), {"RAY_NAMESPACE", "IS_DETACHED", "NUM_RESCHEDULES"});
  headers.insert(headers.end(), {"BUNDLES", "STATE_MESSAGE"});
  std::vector<std::vector<std::vector<std::string>>> rows;
  for (const PlacementGroupView& g : groups) {
    std::vector<std::vector<std::string>> row = {
        {g.placement_group_id}, {g.name}, {g.creator_job_id}, {g.state}, {g.strategy}};
    if (detail) {
      row.push_back({g.ray_namespace});
      row.push_back({g.detached ? "True" : "False"});
      row.push_back({std::to_string(g.num_reschedules)});
    }
    row.push_back(detail ? BundleDetail(g.bundles) : BundleSummary(g.bundles));
    row.push_back({StateMessage(g)});
    rows.push_back(std::move(row));
  }
  return FormatListHeader(groups.size(), limit, now, tz) + FormatTable(headers, rows);
}

nlohmann::json PlacementGroupListJson(const std::vector<PlacementGroupView>& groups) {
  nlohmann::json out = nlohmann::json::array();
  for (const PlacementGroupView& g : groups) {
    nlohmann::json bundles = nlohmann::json::array();
    for (const BundleView& b : g.bundles) {
      nlohmann::json jb;
      jb["bundle_index"] = b.index;
      jb["unit_resources"] = b.resources;
      jb["label_selector"] = b.label_selector;
      jb["node_id"] = b.node_id;
      bundles.push_back(std::move(jb));
    }
    nlohmann::json j;
    j["placement_group_id"] = g.placement_group_id;
    j["name"] = g.name;
    j["ray_namespace"] = g.ray_namespace;
    j["creator_job_id"] = g.creator_job_id;
    j["state"] = g.state;
    j["strategy"] = g.strategy;
    j["bundles"] = std::move(bundles);
    j["is_detached"] = g.detached;
    j["state_message"] = g.state_message;
    j["infeasible"] = g.infeasible;
    j["create_time_ms"] = g.create_time_ms;
    j["ready_time_ms"] = g.ready_time_ms;
    j["remove_time_ms"] = g.remove_time_ms;
    j["num_reschedules"] = g.num_reschedules;
    out.push_back(std::move(j));
  }
  return out;
}

std::string FormatPlacementGroupListJson(const std::vector<PlacementGroupView>& groups) {
  return PlacementGroupListJson(groups).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace manta::state
