// manta::tpu: the per-process environment (pure), and listing and reserving
// slices against the FakeCoreWorker's node table and placement groups.
#include "manta/tpu.h"

#include <algorithm>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/tpu.h"
#include "gtest/gtest.h"
#include "manta/api.h"
#include "runtime/core_worker/fake_core_worker.h"

namespace manta_tpu_test {

std::string Describe() { return "host"; }
class Trainer {
 public:
  static Trainer* Create(int steps) { return new Trainer(); }
  int Step() { return 0; }
};
MANTA_REMOTE(Describe, Trainer::Create, &Trainer::Step);

using manta::core::FakeCoreWorker;
using manta::core::NodeData;

template <typename F>
absl::Status Thrown(F&& f) {
  try {
    f();
  } catch (const manta::Error& e) {
    return e.status();
  }
  return absl::OkStatus();
}

// ---- ProcessEnv, without a cluster ---------------------------------------------

std::vector<manta::tpu::SliceInfo> TwoSlices() {
  std::vector<manta::tpu::SliceInfo> slices(2);
  for (int s = 0; s < 2; ++s) {
    slices[s].name = "tpu-group-" + std::to_string(s);
    slices[s].pod_type = "v6e-16";
    slices[s].topology = "4x4";
    slices[s].num_hosts = slices[s].expected_hosts = 4;
    slices[s].chips_per_host = 4;
  }
  return slices;
}

const std::vector<std::vector<std::string>> kIps = {{"10.0.0.10", "10.0.0.11", "10.0.0.12", "10.0.0.13"},
                                                    {"10.0.1.10", "10.0.1.11", "10.0.1.12", "10.0.1.13"}};

TEST(SliceProcessEnvTest, MultiSliceGetsMegascaleVariables) {
  auto env = manta::tpu::SliceProcessEnv(TwoSlices(), kIps, 1, 2, 8081);
  EXPECT_EQ(env.at("TPU_WORKER_ID"), "2");
  EXPECT_EQ(env.at("TPU_WORKER_HOSTNAMES"), "10.0.1.10,10.0.1.11,10.0.1.12,10.0.1.13");
  EXPECT_EQ(env.at("TPU_NAME"), "tpu-group-1");
  EXPECT_EQ(env.at("TPU_ACCELERATOR_TYPE"), "v6e-16");
  EXPECT_EQ(env.at("TPU_TOPOLOGY"), "4x4");
  // Worker 0 of slice 0, as Ray gives it: the address, the port apart.
  EXPECT_EQ(env.at("MEGASCALE_COORDINATOR_ADDRESS"), "10.0.0.10");
  EXPECT_EQ(env.at("MEGASCALE_PORT"), "8081");
  EXPECT_EQ(env.at("MEGASCALE_NUM_SLICES"), "2");
  EXPECT_EQ(env.at("MEGASCALE_SLICE_ID"), "1");
  EXPECT_EQ(env.size(), 9u);

  auto first = manta::tpu::SliceProcessEnv(TwoSlices(), kIps, 0, 0, 9000);
  EXPECT_EQ(first.at("MEGASCALE_SLICE_ID"), "0");
  EXPECT_EQ(first.at("MEGASCALE_PORT"), "9000");
  EXPECT_EQ(first.at("TPU_WORKER_HOSTNAMES"), "10.0.0.10,10.0.0.11,10.0.0.12,10.0.0.13");
}

TEST(SliceProcessEnvTest, SingleSliceRemovesMegascaleVariables) {
  std::vector<manta::tpu::SliceInfo> one = {TwoSlices()[0]};
  auto env = manta::tpu::SliceProcessEnv(one, {kIps[0]}, 0, 3);
  EXPECT_EQ(env.at("TPU_WORKER_ID"), "3");
  EXPECT_EQ(env.at("TPU_NAME"), "tpu-group-0");
  for (const char* name :
       {"MEGASCALE_COORDINATOR_ADDRESS", "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID", "MEGASCALE_PORT"}) {
    ASSERT_EQ(env.count(name), 1u) << name;
    EXPECT_EQ(env.at(name), "") << name;  // "" means: remove what the process inherited
  }
}

TEST(SliceShapeTest, ShapesFollowRaysRules) {
  auto v6e = manta::tpu::TrySliceShapeOf("TPU-V6E", "4x4");
  ASSERT_TRUE(v6e.ok()) << v6e.status();
  EXPECT_EQ(v6e->pod_type, "v6e-16");
  EXPECT_EQ(v6e->accelerator_type, "TPU-V6E");
  EXPECT_EQ(v6e->chips_per_host, 4);
  EXPECT_EQ(v6e->hosts_per_slice, 4);
  auto single = manta::tpu::TrySliceShapeOf("v6e", "2x4");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->hosts_per_slice, 1);
  EXPECT_EQ(single->chips_per_host, 8);
  auto v4 = manta::tpu::TrySliceShapeOf("v4", "2x2x2");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->pod_type, "v4-16");
  EXPECT_EQ(v4->hosts_per_slice, 2);
  EXPECT_EQ(manta::tpu::TrySliceShapeOf("v6e", "3x5").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manta::tpu::TrySliceShapeOf("v9z", "4x4").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manta::tpu::TrySliceShapeOf("v6e", "4by4").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SliceProcessEnvTest, OutOfRangeIsInvalidArgument) {
  EXPECT_TRUE(absl::IsInvalidArgument(Thrown([] { manta::tpu::SliceProcessEnv(TwoSlices(), kIps, 2, 0); })));
  EXPECT_TRUE(absl::IsInvalidArgument(Thrown([] { manta::tpu::SliceProcessEnv(TwoSlices(), kIps, 0, 4); })));
  EXPECT_TRUE(absl::IsInvalidArgument(Thrown([] { manta::tpu::SliceProcessEnv(TwoSlices(), kIps, -1, 0); })));
}

// ---- Against a fake cluster --------------------------------------------------------

class TpuSlicesTest : public ::testing::Test {
 protected:
  void SetUp() override { core_ = FakeCoreWorker::Install(); }
  void TearDown() override { FakeCoreWorker::Uninstall(); }

  // One node per host of a v6e-16 slice named `name`, with the resources and
  // labels a raylet derives (and `labels` of worker w, given), hosts added
  // in the order `workers` gives.
  std::vector<manta::NodeId> AddSlice(const std::string& name, int subnet, std::vector<int> workers = {3, 1, 0, 2},
                                      std::map<int, std::map<std::string, std::string>> labels = {}) {
    std::vector<manta::NodeId> ids;
    for (int w : workers) {
      manta::tpu::TpuHost host;
      host.pod_type = *manta::tpu::ParsePodType("v6e-16");
      host.topology = {4, 4};
      host.topology_str = "4x4";
      host.slice_name = name;
      host.worker_id = w;
      host.chips_per_host = 4;
      host.hosts_per_slice = 4;
      NodeData n;
      n.ip = absl::StrCat("10.0.", subnet, ".", 10 + w);
      n.resources_total = host.Resources();
      n.resources_total["CPU"] = 8;
      n.labels = host.Labels();
      n.labels.insert(labels[w].begin(), labels[w].end());
      ids.push_back(core_->AddNode(n));
    }
    return ids;
  }

  FakeCoreWorker* core_ = nullptr;
};

TEST_F(TpuSlicesTest, InvalidRequestsFailBeforeTouchingTheCluster) {
  FakeCoreWorker::Uninstall();  // no cluster at all: validation comes first
  auto code = [](manta::tpu::SliceOptions o) { return Thrown([&] { manta::tpu::ReserveSlices(o); }); };
  EXPECT_TRUE(absl::IsInvalidArgument(code({.topology = "4x4", .accelerator_version = "v99"})));
  EXPECT_TRUE(absl::IsInvalidArgument(code({.topology = "4xq", .accelerator_version = "v6e"})));
  absl::Status s = code({.topology = "4x2", .accelerator_version = "v6e"});  // v6e-8, but not a slice shape Ray accepts
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(std::string(s.message()).find("4x2"), std::string::npos) << s;
  EXPECT_TRUE(absl::IsInvalidArgument(code({.topology = "2x2x2", .accelerator_version = "TPU-V6E"})));
  EXPECT_TRUE(absl::IsInvalidArgument(code({.topology = "4x4", .accelerator_version = "v6e", .num_slices = 0})));
  // A valid request without a cluster is refused for that reason.
  EXPECT_TRUE(absl::IsFailedPrecondition(code({.topology = "4x4", .accelerator_version = "TPU-V6E"})));
  core_ = FakeCoreWorker::Install();
}

TEST_F(TpuSlicesTest, ListSlicesShowsCompleteSlicesOnly) {
  AddSlice("tpu-group-0", 0);
  AddSlice("tpu-group-1", 1, {0, 1, 2});  // worker 3 missing
  auto all = manta::tpu::ListSlices();
  ASSERT_EQ(all.size(), 1u);
  ASSERT_EQ(all.at("v6e-16").size(), 1u);
  const manta::tpu::SliceInfo& s = all.at("v6e-16")[0];
  EXPECT_EQ(s.name, "tpu-group-0");
  EXPECT_EQ(s.topology, "4x4");
  EXPECT_EQ(s.num_hosts, 4);
  EXPECT_EQ(s.expected_hosts, 4);
  EXPECT_EQ(s.chips_per_host, 4);
  EXPECT_EQ(s.head_ip, "10.0.0.10");
  EXPECT_TRUE(s.head_free);
  EXPECT_TRUE(s.chips_free);
}

TEST_F(TpuSlicesTest, ReservesTwoSlicesInOneGroupOrderedByWorkerId) {
  AddSlice("tpu-group-0", 0);
  AddSlice("tpu-group-1", 1, {1, 0, 3, 2});
  manta::tpu::SliceReservation r =
      manta::tpu::ReserveSlices({.topology = "4x4", .accelerator_version = "v6e", .num_slices = 2});
  ASSERT_EQ(r.num_slices(), 2);
  EXPECT_EQ(r.hosts_per_slice(), 4);
  ASSERT_EQ(r.groups().size(), 1u);
  EXPECT_EQ(r.BundleResources(), (std::map<std::string, double>{{"TPU", 4}}));
  // One group, made in one call: 8 bundles, bundle s*4+h for worker h of
  // slice s, each slice a domain of the slice-name label; bundle 0 of each
  // slice also holds its head.
  EXPECT_EQ(core_->LivePlacementGroupCount(), 1u);
  auto created = core_->CreatedPlacementGroups();
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].strategy, manta::core::PlacementStrategy::kStrictSpread);
  EXPECT_EQ(created[0].same_label, manta::tpu::kLabelSliceName);
  for (int i = 0; i < 8; ++i) {
    const manta::core::BundleData& b = created[0].bundles.at(i);
    EXPECT_EQ(b.label_domain, i / 4);
    EXPECT_EQ(b.label_selector.at(manta::tpu::kLabelWorkerId), std::to_string(i % 4));
    EXPECT_EQ(b.label_selector.at(manta::tpu::kLabelPodType), "v6e-16");
    std::map<std::string, double> want = {{"TPU", 4}};
    if (i % 4 == 0) want["TPU-v6e-16-head"] = 1;
    EXPECT_EQ(b.resources, want) << "bundle " << i;
  }
  std::vector<manta::BundleLocation> bundles = r.groups()[0].Bundles();
  ASSERT_EQ(bundles.size(), 8u);
  std::set<std::string> names;
  for (int s = 0; s < 2; ++s) {
    names.insert(r.slices()[s].name);
    EXPECT_EQ(r.slices()[s].pod_type, "v6e-16");
    for (int h = 0; h < 4; ++h) {
      auto [group, index] = r.Bundle(s, h);
      EXPECT_EQ(group, r.groups()[0]);
      EXPECT_EQ(index, s * 4 + h);
      const manta::BundleLocation& b = bundles[index];
      EXPECT_EQ(b.node_labels.at(manta::tpu::kLabelWorkerId), std::to_string(h));
      EXPECT_EQ(b.node_labels.at(manta::tpu::kLabelSliceName), r.slices()[s].name);
      EXPECT_EQ(r.host_ips(s)[h], b.node_ip);
    }
    EXPECT_EQ(r.slices()[s].head_ip, r.host_ips(s)[0]);
  }
  EXPECT_EQ(names, (std::set<std::string>{"tpu-group-0", "tpu-group-1"}));

  auto env = r.ProcessEnv(1, 2);
  EXPECT_EQ(env.at("TPU_WORKER_ID"), "2");
  EXPECT_EQ(env.at("TPU_NAME"), r.slices()[1].name);
  EXPECT_EQ(env.at("MEGASCALE_COORDINATOR_ADDRESS"), r.host_ips(0)[0]);
  EXPECT_EQ(env.at("MEGASCALE_NUM_SLICES"), "2");
  EXPECT_EQ(env.at("MEGASCALE_SLICE_ID"), "1");
  EXPECT_EQ(env.at("TPU_WORKER_HOSTNAMES"), absl::StrJoin(r.host_ips(1), ","));

  // Every chip and both heads are held: a second client waits and gives up
  // without leaving anything behind.
  auto held = manta::tpu::ListSlices();  // a range-for over a temporary's member would dangle
  ASSERT_EQ(held.at("v6e-16").size(), 2u);
  for (const auto& s : held.at("v6e-16")) {
    EXPECT_FALSE(s.head_free);
    EXPECT_FALSE(s.chips_free);
  }
  absl::Status second = Thrown([] {
    manta::tpu::ReserveSlices({.topology = "4x4", .accelerator_version = "v6e", .timeout = absl::Milliseconds(20)});
  });
  EXPECT_TRUE(absl::IsDeadlineExceeded(second)) << second;
  EXPECT_EQ(core_->LivePlacementGroupCount(), 1u);

  r.Release();
  EXPECT_EQ(core_->LivePlacementGroupCount(), 0u);
  EXPECT_NO_THROW(r.Release());
  auto released = manta::tpu::ListSlices();
  ASSERT_EQ(released.at("v6e-16").size(), 2u);
  for (const auto& s : released.at("v6e-16")) EXPECT_TRUE(s.head_free && s.chips_free);
}

TEST_F(TpuSlicesTest, PrefersAWhollyFreeSliceToAHeldOne) {
  AddSlice("tpu-group-0", 0);  // the fake would try this head first
  auto first = manta::tpu::ReserveSlices({.topology = "4x4", .accelerator_version = "v6e"});
  ASSERT_EQ(first.slices()[0].name, "tpu-group-0");
  AddSlice("tpu-group-1", 1);
  auto second =
      manta::tpu::ReserveSlices({.topology = "4x4", .accelerator_version = "v6e", .timeout = absl::Seconds(1)});
  EXPECT_EQ(second.slices()[0].name, "tpu-group-1");
  second.Release();
  first.Release();
}

TEST_F(TpuSlicesTest, ASliceWhoseHeadIsHeldElsewhereIsNotTaken) {
  // Another client reserved tpu-group-0 through its head, as Ray does.
  AddSlice("tpu-group-0", 0);
  AddSlice("tpu-group-1", 1);
  manta::PlacementGroup head =
      manta::CreatePlacementGroup({.bundles = {{.resources = {{"TPU-v6e-16-head", 1}},
                                                .label_selector = {{manta::tpu::kLabelSliceName, "tpu-group-0"}}}}});
  ASSERT_TRUE(head.Wait(absl::Seconds(1)));
  auto r = manta::tpu::ReserveSlices({.topology = "4x4", .accelerator_version = "v6e", .timeout = absl::Seconds(1)});
  EXPECT_EQ(r.slices()[0].name, "tpu-group-1");
  r.Release();
  manta::RemovePlacementGroup(head);
}

TEST_F(TpuSlicesTest, OneGroupPerSlice) {
  AddSlice("tpu-group-0", 0);
  AddSlice("tpu-group-1", 1);
  auto r =
      manta::tpu::ReserveSlices({.topology = "4x4", .accelerator_version = "v6e", .num_slices = 2, .one_group = false});
  ASSERT_EQ(r.groups().size(), 2u);
  EXPECT_EQ(core_->LivePlacementGroupCount(), 2u);
  auto [group, index] = r.Bundle(1, 2);
  EXPECT_EQ(group, r.groups()[1]);
  EXPECT_EQ(index, 2);
  EXPECT_EQ(group.Bundles()[2].node_labels.at(manta::tpu::kLabelWorkerId), "2");
  EXPECT_TRUE(absl::IsInvalidArgument(Thrown([&] { r.Bundle(2, 0); })));
  r.Release();
  EXPECT_EQ(core_->LivePlacementGroupCount(), 0u);
}

TEST_F(TpuSlicesTest, SingleSliceAndCustomBundles) {
  AddSlice("tpu-group-0", 0);
  auto r = manta::tpu::ReserveSlices(
      {.topology = "4x4", .accelerator_version = "TPU-V6E", .resources_per_bundle = {{"TPU", 4}, {"CPU", 1}}});
  EXPECT_EQ(r.num_slices(), 1);
  EXPECT_EQ(r.BundleResources(), (std::map<std::string, double>{{"CPU", 1}, {"TPU", 4}}));
  EXPECT_EQ(r.ProcessEnv(0, 1).at("MEGASCALE_NUM_SLICES"), "");
  r.Release();
}

TEST_F(TpuSlicesTest, NeverChoosesASliceWithAMissingHost) {
  // The incomplete slice's head joins first, so a naive choice would take it.
  AddSlice("tpu-group-9", 9, {0, 1, 2});
  AddSlice("tpu-group-0", 0);
  auto r = manta::tpu::ReserveSlices({.topology = "4x4", .accelerator_version = "v6e", .timeout = absl::Seconds(1)});
  EXPECT_EQ(r.slices()[0].name, "tpu-group-0");
  r.Release();
}

TEST_F(TpuSlicesTest, WaitsForAMissingHostWhenTooFewSlicesAreWhole) {
  // A host of tpu-group-1 was killed and its replacement is on its way: the
  // only way to two slices is through tpu-group-1, so the reservation's group
  // waits for the host.
  AddSlice("tpu-group-0", 0);
  AddSlice("tpu-group-1", 1, {0, 1, 3});
  absl::StatusOr<manta::tpu::SliceReservation> r = absl::UnknownError("not returned");
  std::thread reserving([&] {
    r = manta::tpu::TryReserveSlices(
        {.topology = "4x4", .accelerator_version = "v6e", .num_slices = 2, .timeout = absl::Seconds(30)});
  });
  ASSERT_TRUE(core_->AwaitCreatedPlacementGroups(1, absl::Seconds(10)));
  ASSERT_EQ(core_->CreatedPlacementGroups().size(), 1u);  // the slices' group waits
  EXPECT_EQ(core_->LivePlacementGroupCount(), 1u);
  AddSlice("tpu-group-1", 1, {2});
  reserving.join();
  ASSERT_TRUE(r.ok()) << r.status();
  std::set<std::string> names;
  for (const auto& slice : r->slices()) names.insert(slice.name);
  EXPECT_EQ(names, (std::set<std::string>{"tpu-group-0", "tpu-group-1"}));
  EXPECT_EQ(r->host_ips(r->slices()[0].name == "tpu-group-1" ? 0 : 1)[2], "10.0.1.12");
  r->Release();
}

TEST_F(TpuSlicesTest, ALabelSelectorTakesOnlySlicesWhoseEveryHostMatches) {
  const std::map<std::string, std::string> pool_a = {{"pool", "a"}};
  AddSlice("tpu-group-0", 0);  // no pool; the fake would try this head first
  AddSlice("tpu-group-1", 1, {0, 1, 2, 3}, {{0, pool_a}, {1, pool_a}, {2, pool_a}, {3, {{"pool", "b"}}}});
  AddSlice("tpu-group-2", 2, {0, 1, 2, 3}, {{0, pool_a}, {1, pool_a}, {2, pool_a}, {3, pool_a}});
  auto listed = manta::tpu::ListSlices(pool_a);
  ASSERT_EQ(listed.at("v6e-16").size(), 1u);
  EXPECT_EQ(listed.at("v6e-16")[0].name, "tpu-group-2");
  EXPECT_EQ(manta::tpu::ListSlices().at("v6e-16").size(), 3u);

  auto r = manta::tpu::ReserveSlices(
      {.topology = "4x4", .accelerator_version = "v6e", .label_selector = pool_a, .timeout = absl::Seconds(1)});
  EXPECT_EQ(r.slices()[0].name, "tpu-group-2");
  for (const auto& group : core_->CreatedPlacementGroups()) {
    for (const auto& b : group.bundles) EXPECT_EQ(b.label_selector.at("pool"), "a");
  }
  // The only other slice with a head in pool a has a host that is not: a
  // second slice is never had.
  absl::Status second = Thrown([&] {
    manta::tpu::ReserveSlices(
        {.topology = "4x4", .accelerator_version = "v6e", .label_selector = pool_a, .timeout = absl::Milliseconds(20)});
  });
  EXPECT_TRUE(absl::IsDeadlineExceeded(second)) << second;
  EXPECT_EQ(core_->LivePlacementGroupCount(), 1u);
  r.Release();

  // By name, among the slices the caller names.
  auto named =
      manta::tpu::ReserveSlices({.topology = "4x4",
                                 .accelerator_version = "v6e",
                                 .num_slices = 2,
                                 .label_selector = {{manta::tpu::kLabelSliceName, "in(tpu-group-1,tpu-group-2)"}},
                                 .timeout = absl::Seconds(1)});
  std::set<std::string> names;
  for (const auto& s : named.slices()) names.insert(s.name);
  EXPECT_EQ(names, (std::set<std::string>{"tpu-group-1", "tpu-group-2"}));
  named.Release();

  // Refused before the cluster is asked: a worker id, another pod type, bad syntax.
  for (auto selector : std::vector<std::map<std::string, std::string>>{
           {{manta::tpu::kLabelWorkerId, "0"}}, {{manta::tpu::kLabelPodType, "v5p-8"}}, {{"pool", "in()"}}}) {
    const size_t before = core_->CreatedPlacementGroups().size();
    absl::Status s = Thrown([&] {
      manta::tpu::ReserveSlices({.topology = "4x4", .accelerator_version = "v6e", .label_selector = selector});
    });
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_NE(std::string(s.message()).find("label_selector"), std::string::npos) << s;
    EXPECT_EQ(core_->CreatedPlacementGroups().size(), before);
  }
}

TEST_F(TpuSlicesTest, TimeoutRemovesEverything) {
  AddSlice("tpu-group-0", 0);
  absl::Status s = Thrown([] {
    manta::tpu::ReserveSlices(
        {.topology = "4x4", .accelerator_version = "v6e", .num_slices = 2, .timeout = absl::Milliseconds(20)});
  });
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_NE(std::string(s.message()).find("the slices' group"), std::string::npos) << s;
  EXPECT_EQ(core_->LivePlacementGroupCount(), 0u);
  EXPECT_EQ(core_->CreatedPlacementGroups().size(), 1u);  // made, then removed

  // The slices' bundles cannot be placed (a host's chips are taken): same.
  manta::PlacementGroup squatter = manta::CreatePlacementGroup(
      {.bundles = {{.resources = {{"TPU", 1}}, .label_selector = {{manta::tpu::kLabelWorkerId, "3"}}}}});
  ASSERT_TRUE(squatter.Wait(absl::Seconds(1)));
  s = Thrown([] {
    manta::tpu::ReserveSlices({.topology = "4x4", .accelerator_version = "v6e", .timeout = absl::Milliseconds(20)});
  });
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_EQ(core_->LivePlacementGroupCount(), 1u);  // only the squatter
}

TEST_F(TpuSlicesTest, GcsErrorsSurfaceAndLeaveNothing) {
  AddSlice("tpu-group-0", 0);
  core_->InjectGcsError("GetAllNodes", absl::UnavailableError("GCS unreachable"), 1);
  absl::Status s = Thrown([] { manta::tpu::ReserveSlices({.topology = "4x4", .accelerator_version = "v6e"}); });
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(std::string(s.message()).find("GCS unreachable"), std::string::npos) << s;
  EXPECT_EQ(core_->LivePlacementGroupCount(), 0u);
}

TEST_F(TpuSlicesTest, RunOnSlicesAndActorsOnSlicesUseEachHostsBundleAndEnv) {
  AddSlice("tpu-group-0", 0);
  AddSlice("tpu-group-1", 1);
  auto r = manta::tpu::ReserveSlices({.topology = "4x4", .accelerator_version = "v6e", .num_slices = 2});
  auto refs = manta::tpu::RunOnSlices(r, Describe);
  ASSERT_EQ(refs.size(), 8u);
  EXPECT_EQ(*manta::Get(refs[7]), "host");
  manta::core::TaskOptions last = core_->last_task_options();  // slice 1, host 3
  EXPECT_EQ(last.placement_group_id, r.groups()[0].ID());
  EXPECT_EQ(last.bundle_index, 7);
  EXPECT_EQ(last.resources, r.BundleResources());
  EXPECT_EQ(last.env_vars, r.ProcessEnv(1, 3));

  auto actors = manta::tpu::ActorsOnSlices(r, Trainer::Create, 10);
  ASSERT_EQ(actors.size(), 8u);
  manta::core::ActorOptions o = core_->actor_options(actors[5].ID());  // slice 1, host 1
  EXPECT_EQ(o.placement_group_id, r.groups()[0].ID());
  EXPECT_EQ(o.bundle_index, 5);
  EXPECT_EQ(o.resources, (std::map<std::string, double>{{"TPU", 4}}));
  EXPECT_EQ(o.env_vars.at("TPU_WORKER_ID"), "1");
  EXPECT_EQ(o.env_vars.at("MEGASCALE_SLICE_ID"), "1");
  r.Release();
}

}  // namespace manta_tpu_test
