#include "gcs/placement_group_manager.h"

#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "gcs/fake_raylet_client.h"
#include "gcs/fake_timers.h"
#include "gcs/in_memory_store.h"
#include "gcs/test_util.h"
#include "gtest/gtest.h"

namespace manta::gcs {
namespace {

using Info = rpc::PlacementGroupInfo;

class PlacementGroupManagerTest : public ::testing::Test {
 protected:
  PlacementGroupManagerTest() { Restart(); }

  // A fresh scheduler and manager over the same store: a restarted GCS.
  void Restart() {
    manager_.reset();
    scheduler_ = std::make_unique<PlacementGroupScheduler>(
        [this](const NodeId& n) -> const rpc::NodeResources* {
          auto it = view_.find(n);
          return it == view_.end() ? nullptr : &it->second;
        },
        [this](const rpc::NodeResources& r) { view_[*NodeId::FromBinary(r.node_id())] = r; }, &raylets_);
    manager_ = std::make_unique<PlacementGroupManager>(&store_, &pub_, scheduler_.get(), &raylets_, timers_.RunAfter());
    manager_->SetRemovedListener([this](const std::string& id) { removed_.push_back(id); });
    ASSERT_TRUE(manager_->Initialize().ok());
  }

  // Adds a node and answers its sync; returns the bundles the sync kept.
  NodeId AddNode(std::map<std::string, double> resources, rpc::ReleaseUnusedBundlesRequest* sync = nullptr,
                 std::optional<NodeId> reuse = std::nullopt) {
    NodeId id = reuse.value_or(NodeId::FromRandom());
    rpc::NodeInfo n;
    n.set_node_id(id.Binary());
    n.set_node_ip("10.0.0.1");
    n.set_node_manager_port(7000);
    n.mutable_resources_total()->insert(resources.begin(), resources.end());
    rpc::NodeResources r;
    r.set_node_id(id.Binary());
    r.mutable_total()->insert(resources.begin(), resources.end());
    r.mutable_available()->insert(resources.begin(), resources.end());
    view_[id] = r;
    manager_->OnNodeAdded(n);
    EXPECT_FALSE(raylets_.releases.empty());
    auto call = std::move(raylets_.releases.back());
    raylets_.releases.pop_back();
    if (sync != nullptr) *sync = call.request;
    call.cb(absl::OkStatus(), {});
    return id;
  }

  // Answers every prepare (reserving in the view) and every commit.
  void AnswerRaylets() {
    while (!raylets_.prepares.empty() || !raylets_.commits.empty()) {
      while (!raylets_.prepares.empty()) {
        auto c = std::move(raylets_.prepares.front());
        raylets_.prepares.pop_front();
        rpc::PrepareBundlesReply reply;
        reply.set_success(true);
        reply.set_committed(c.request.commit());
        rpc::NodeResources r = view_.at(c.node);
        for (const auto& b : c.request.bundles()) {
          for (const auto& [k, v] : b.resources()) (*r.mutable_available())[k] -= v;
        }
        r.set_version(r.version() + 1);
        *reply.mutable_resources() = r;
        c.cb(absl::OkStatus(), std::move(reply));
      }
      while (!raylets_.commits.empty()) {
        auto c = std::move(raylets_.commits.front());
        raylets_.commits.pop_front();
        c.cb(absl::OkStatus(), {});
      }
    }
  }

  static Info Spec(Info::Strategy strategy, std::vector<std::map<std::string, double>> bundles,
                   const std::string& name = "") {
    Info g;
    g.set_placement_group_id(PlacementGroupId::FromRandom().Binary());
    g.set_strategy(strategy);
    g.set_name(name);
    for (size_t i = 0; i < bundles.size(); ++i) {
      rpc::Bundle* b = g.add_bundles();
      b->set_index(static_cast<int>(i));
      b->mutable_resources()->insert(bundles[i].begin(), bundles[i].end());
    }
    return g;
  }

  // Creates `spec` and runs the loop until the store has it and the call is
  // answered.
  absl::Status Create(const Info& spec, Info* out = nullptr) {
    rpc::CreatePlacementGroupRequest req;
    *req.mutable_spec() = spec;
    auto reply = std::make_shared<rpc::CreatePlacementGroupReply>();
    auto answer = std::make_shared<std::optional<absl::Status>>();
    manager_->HandleCreatePlacementGroup(req, reply.get(), [answer, reply](const absl::Status& s) { *answer = s; });
    if (!answer->has_value()) Pump(loop_);
    if (out != nullptr) *out = reply->placement_group();
    return answer->has_value() ? **answer : absl::UnknownError("not answered");
  }

  Info Get(const Info& spec) {
    const Info* info = manager_->Get(*PlacementGroupId::FromBinary(spec.placement_group_id()));
    EXPECT_NE(info, nullptr);
    return info == nullptr ? Info() : *info;
  }

  // Creates `spec` and answers the raylets: whether it ended CREATED.
  bool Placed(const Info& spec) {
    if (!Create(spec).ok()) return false;
    AnswerRaylets();
    return Get(spec).state() == Info::CREATED;
  }

  // The call's answer, once it has come.
  using Answer = std::shared_ptr<std::optional<absl::Status>>;
  Answer StartRemove(const Info& spec) {
    rpc::RemovePlacementGroupRequest req;
    req.set_placement_group_id(spec.placement_group_id());
    auto reply = std::make_shared<rpc::RemovePlacementGroupReply>();
    auto answer = std::make_shared<std::optional<absl::Status>>();
    manager_->HandleRemovePlacementGroup(req, reply.get(), [answer, reply](const absl::Status& s) { *answer = s; });
    return answer;
  }
  absl::Status Remove(const Info& spec) {
    Answer answer = StartRemove(spec);
    return answer->has_value() ? **answer : absl::UnknownError("not answered");
  }

  EventLoop loop_;
  InMemoryStore store_{&loop_};
  Publisher pub_{&loop_, "inc"};
  FakeTimers timers_;
  FakeRayletClientPool raylets_;
  absl::flat_hash_map<NodeId, rpc::NodeResources> view_;
  std::unique_ptr<PlacementGroupScheduler> scheduler_;
  std::unique_ptr<PlacementGroupManager> manager_;
  std::vector<std::string> removed_;
};

TEST_F(PlacementGroupManagerTest, BadSpecsAreRefusedAndChangeNothing) {
  std::vector<Info> bad;
  bad.push_back(Spec(Info::PACK, {}));                                                     // no bundles
  bad.push_back(Spec(Info::PACK, {{}}));                                                   // empty bundle
  bad.push_back(Spec(Info::PACK, {{{"CPU", -1}}}));                                        // negative
  bad.push_back(Spec(Info::PACK, {{{"CPU", std::numeric_limits<double>::quiet_NaN()}}}));  // NaN
  Info strategy = Spec(Info::PACK, {{{"CPU", 1}}});
  strategy.set_strategy(static_cast<Info::Strategy>(42));
  bad.push_back(strategy);
  Info index = Spec(Info::PACK, {{{"CPU", 1}}});
  index.mutable_bundles(0)->set_index(3);
  bad.push_back(index);
  Info id = Spec(Info::PACK, {{{"CPU", 1}}});
  id.set_placement_group_id("short");
  bad.push_back(id);
  Info domain = Spec(Info::PACK, {{{"CPU", 1}}, {{"CPU", 1}}});
  domain.mutable_bundles(1)->set_label_domain(1);  // a domain without same_label
  bad.push_back(domain);
  Info same = Spec(Info::PACK, {{{"CPU", 1}}});
  same.set_same_label("not a key!");
  bad.push_back(same);
  Info range = Spec(Info::PACK, {{{"CPU", 1}}});
  range.set_same_label("slice");
  range.mutable_bundles(0)->set_label_domain(-1);
  bad.push_back(range);
  for (const Info& spec : bad) {
    absl::Status s = Create(spec);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << spec.ShortDebugString();
    EXPECT_FALSE(s.message().empty());
  }
  EXPECT_EQ(store_.ReadAll("placement_groups")->size(), 0u);
  rpc::ListPlacementGroupsReply list;
  manager_->HandleListPlacementGroups({}, &list, [](const absl::Status&) {});
  EXPECT_EQ(list.placement_groups_size(), 0);
}

// A Store whose writes land at once but report completion only on Land():
// a write still on its way to the disk.
class HeldStore : public Store {
 public:
  explicit HeldStore(Store* inner) : inner_(inner) {}
  absl::StatusOr<Rows> ReadAll(const std::string& table) override { return inner_->ReadAll(table); }
  void Put(const std::string& table, std::string key, std::string value, Done done) override {
    inner_->Put(table, std::move(key), std::move(value), nullptr);
    if (done) held_.push_back(std::move(done));
  }
  void Delete(const std::string& table, std::string key, Done done) override {
    inner_->Delete(table, std::move(key), nullptr);
    if (done) held_.push_back(std::move(done));
  }
  void Land() {
    for (Done& done : std::exchange(held_, {})) done(absl::OkStatus());
  }

 private:
  Store* const inner_;
  std::vector<Done> held_;
};

TEST_F(PlacementGroupManagerTest, CreateIsAnsweredOnceTheGroupIsStored) {
  HeldStore held(&store_);
  manager_ = std::make_unique<PlacementGroupManager>(&held, &pub_, scheduler_.get(), &raylets_, timers_.RunAfter());
  ASSERT_TRUE(manager_->Initialize().ok());
  AddNode({{"CPU", 8}});
  Info spec = Spec(Info::PACK, {{{"CPU", 1}}});
  rpc::CreatePlacementGroupRequest req;
  *req.mutable_spec() = spec;
  rpc::CreatePlacementGroupReply first, retry;
  std::optional<absl::Status> first_answer, retry_answer;
  manager_->HandleCreatePlacementGroup(req, &first, [&](const absl::Status& s) { first_answer = s; });
  // Placement does not wait for the write; the answer does, and so does a
  // retry of the call meanwhile.
  EXPECT_EQ(raylets_.prepares.size(), 1u);
  manager_->HandleCreatePlacementGroup(req, &retry, [&](const absl::Status& s) { retry_answer = s; });
  Pump(loop_);
  EXPECT_FALSE(first_answer.has_value());
  EXPECT_FALSE(retry_answer.has_value());
  held.Land();
  ASSERT_TRUE(first_answer.has_value() && retry_answer.has_value());
  EXPECT_TRUE(first_answer->ok() && retry_answer->ok());
  EXPECT_EQ(first.placement_group().state(), Info::PENDING);
  // Once answered, the group is in the store: a restarted GCS has it.
  Restart();
  EXPECT_EQ(Get(spec).state(), Info::PENDING);

  // A create still unanswered at shutdown is refused (the caller makes it
  // again on the next GCS), and so is every later one.
  manager_ = std::make_unique<PlacementGroupManager>(&held, &pub_, scheduler_.get(), &raylets_, timers_.RunAfter());
  ASSERT_TRUE(manager_->Initialize().ok());
  Info late = Spec(Info::PACK, {{{"CPU", 1}}});
  *req.mutable_spec() = late;
  std::optional<absl::Status> late_answer;
  manager_->HandleCreatePlacementGroup(req, &first, [&](const absl::Status& s) { late_answer = s; });
  manager_->Shutdown();
  ASSERT_TRUE(late_answer.has_value());
  EXPECT_EQ(late_answer->code(), absl::StatusCode::kUnavailable);
  held.Land();  // harmless
  EXPECT_EQ(Create(Spec(Info::PACK, {{{"CPU", 1}}})).code(), absl::StatusCode::kUnavailable);
}

// A create with wait_ready_ms is one round trip: answered once the group is
// CREATED, or with its state when the wait runs out.
TEST_F(PlacementGroupManagerTest, ACreateThatWaitsIsAnsweredOnceCreatedOrOnTime) {
  AddNode({{"CPU", 2}});
  rpc::CreatePlacementGroupRequest req;
  *req.mutable_spec() = Spec(Info::PACK, {{{"CPU", 2}}});
  req.set_wait_ready_ms(60000);
  rpc::CreatePlacementGroupReply reply;
  std::optional<absl::Status> answer;
  manager_->HandleCreatePlacementGroup(req, &reply, [&](const absl::Status& s) { answer = s; });
  Pump(loop_);  // stored: still waiting for the raylet
  EXPECT_FALSE(answer.has_value());
  AnswerRaylets();
  ASSERT_TRUE(answer.has_value());
  EXPECT_TRUE(answer->ok());
  EXPECT_EQ(reply.placement_group().state(), Info::CREATED);
  EXPECT_FALSE(reply.placement_group().bundles(0).node_id().empty());

  // No room: answered PENDING when its wait runs out, and the group stays.
  rpc::CreatePlacementGroupRequest full = req;
  *full.mutable_spec() = Spec(Info::PACK, {{{"CPU", 2}}});
  full.set_wait_ready_ms(50);
  rpc::CreatePlacementGroupReply pending;
  answer.reset();
  manager_->HandleCreatePlacementGroup(full, &pending, [&](const absl::Status& s) { answer = s; });
  Pump(loop_);
  EXPECT_FALSE(answer.has_value());
  timers_.FireAll();
  ASSERT_TRUE(answer.has_value());
  EXPECT_TRUE(answer->ok());
  EXPECT_EQ(pending.placement_group().state(), Info::PENDING);
  EXPECT_EQ(Get(full.spec()).state(), Info::PENDING);

  // A negative wait is refused and makes nothing.
  rpc::CreatePlacementGroupRequest bad = req;
  *bad.mutable_spec() = Spec(Info::PACK, {{{"CPU", 1}}});
  bad.set_wait_ready_ms(-1);
  answer.reset();
  manager_->HandleCreatePlacementGroup(bad, &reply, [&](const absl::Status& s) { answer = s; });
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->Get(*PlacementGroupId::FromBinary(bad.spec().placement_group_id())), nullptr);
}

// same_label: each domain's bundles on nodes sharing one value of the label,
// two domains never on one value.
TEST_F(PlacementGroupManagerTest, SameLabelPutsEachDomainOnOneValue) {
  auto labelled = [this](const std::string& slice, int worker) {
    NodeId id = NodeId::FromRandom();
    rpc::NodeInfo n;
    n.set_node_id(id.Binary());
    n.set_node_ip("10.0.0.1");
    n.set_node_manager_port(7000);
    (*n.mutable_resources_total())["TPU"] = 4;
    (*n.mutable_labels())["slice"] = slice;
    (*n.mutable_labels())["worker"] = std::to_string(worker);
    rpc::NodeResources r;
    r.set_node_id(id.Binary());
    (*r.mutable_total())["TPU"] = 4;
    (*r.mutable_available())["TPU"] = 4;
    view_[id] = r;
    manager_->OnNodeAdded(n);
    auto call = std::move(raylets_.releases.back());
    raylets_.releases.pop_back();
    call.cb(absl::OkStatus(), {});
    return id;
  };
  // Slice a is missing worker 1; b and c are whole.
  labelled("a", 0);
  std::map<NodeId, std::string> slice_of;
  for (const std::string slice : {"b", "c"}) {
    for (int w = 0; w < 2; ++w) slice_of[labelled(slice, w)] = slice;
  }
  Info spec = Spec(Info::STRICT_SPREAD, {{{"TPU", 4}}, {{"TPU", 4}}, {{"TPU", 4}}, {{"TPU", 4}}});
  spec.set_same_label("slice");
  for (int i = 0; i < 4; ++i) {
    (*spec.mutable_bundles(i)->mutable_label_selector())["worker"] = std::to_string(i % 2);
    spec.mutable_bundles(i)->set_label_domain(i / 2);
  }
  ASSERT_TRUE(Placed(spec));
  Info got = Get(spec);
  EXPECT_EQ(got.same_label(), "slice");
  std::vector<std::string> slices;
  for (const rpc::Bundle& b : got.bundles()) slices.push_back(slice_of.at(*NodeId::FromBinary(b.node_id())));
  EXPECT_EQ(slices[0], slices[1]);
  EXPECT_EQ(slices[2], slices[3]);
  EXPECT_NE(slices[0], slices[2]);
}

TEST_F(PlacementGroupManagerTest, CreateWaitRemove) {
  NodeId node = AddNode({{"CPU", 8}});
  Info spec = Spec(Info::STRICT_PACK, {{{"CPU", 2}}, {{"CPU", 2}}}, "g");
  Info created;
  ASSERT_TRUE(Create(spec, &created).ok());
  EXPECT_EQ(created.state(), Info::PENDING);

  rpc::WaitPlacementGroupReadyRequest wait;
  wait.set_placement_group_id(spec.placement_group_id());
  wait.set_timeout_ms(1000);
  rpc::WaitPlacementGroupReadyReply ready;
  bool answered = false;
  manager_->HandleWaitPlacementGroupReady(wait, &ready, [&](const absl::Status& s) { answered = s.ok(); });
  EXPECT_FALSE(answered);
  AnswerRaylets();
  ASSERT_TRUE(answered);
  EXPECT_TRUE(ready.ready());
  EXPECT_EQ(Get(spec).state(), Info::CREATED);
  Info info = Get(spec);
  for (const auto& b : info.bundles()) EXPECT_EQ(b.node_id(), node.Binary());

  // Idempotent by id; a live name is taken.
  Info again;
  ASSERT_TRUE(Create(spec, &again).ok());
  EXPECT_EQ(again.state(), Info::CREATED);
  EXPECT_EQ(Create(Spec(Info::PACK, {{{"CPU", 1}}}, "g")).code(), absl::StatusCode::kAlreadyExists);

  // Removed at once, answered when the node has returned the bundles (and
  // stopped what ran in them); a second remover waits for the same.
  Answer first = StartRemove(spec);
  EXPECT_EQ(Get(spec).state(), Info::REMOVED);
  ASSERT_EQ(raylets_.cancels.size(), 1u);
  EXPECT_EQ(raylets_.cancels[0].node, node);
  EXPECT_EQ(raylets_.cancels[0].request.indices_size(), 2);
  EXPECT_EQ(removed_, std::vector<std::string>{spec.placement_group_id()});
  Answer second = StartRemove(spec);
  EXPECT_FALSE(first->has_value());
  EXPECT_FALSE(second->has_value());
  raylets_.cancels[0].cb(absl::OkStatus(), {});
  ASSERT_TRUE(first->has_value() && second->has_value());
  EXPECT_TRUE(first->value().ok());
  EXPECT_TRUE(second->value().ok());
  EXPECT_TRUE(Remove(spec).ok());  // idempotent, answered at once now
  EXPECT_EQ(raylets_.cancels.size(), 1u);
  EXPECT_TRUE(Create(Spec(Info::PACK, {{{"CPU", 1}}}, "g")).ok());  // the name is free again
}

TEST_F(PlacementGroupManagerTest, RemoveIsAnsweredWhenEveryNodeAnsweredOrFailedOrAtShutdown) {
  NodeId a = AddNode({{"CPU", 2}});
  NodeId b = AddNode({{"CPU", 2}});
  Info spread = Spec(Info::STRICT_SPREAD, {{{"CPU", 1}}, {{"CPU", 1}}});
  ASSERT_TRUE(Placed(spread));
  Answer removed = StartRemove(spread);
  ASSERT_EQ(raylets_.cancels.size(), 2u);
  EXPECT_NE(raylets_.cancels[0].node, raylets_.cancels[1].node);
  EXPECT_TRUE(raylets_.cancels[0].node == a || raylets_.cancels[0].node == b);
  raylets_.cancels[0].cb(absl::OkStatus(), {});
  EXPECT_FALSE(removed->has_value());
  // An unreachable node does not hold the caller forever.
  raylets_.cancels[1].cb(absl::UnavailableError("node gone"), {});
  ASSERT_TRUE(removed->has_value());
  EXPECT_TRUE(removed->value().ok());

  Info other = Spec(Info::PACK, {{{"CPU", 1}}});
  ASSERT_TRUE(Placed(other));
  Answer held = StartRemove(other);
  EXPECT_FALSE(held->has_value());
  manager_->Shutdown();
  ASSERT_TRUE(held->has_value());
  EXPECT_TRUE(held->value().ok());
}

TEST_F(PlacementGroupManagerTest, RemoveIsAnsweredWhenANodeHoldingBundlesDies) {
  NodeId a = AddNode({{"CPU", 2}});
  NodeId b = AddNode({{"CPU", 2}});
  Info spread = Spec(Info::STRICT_SPREAD, {{{"CPU", 1}}, {{"CPU", 1}}});
  ASSERT_TRUE(Placed(spread));
  // a was killed just before: its cancel is being retried, unanswered.
  Answer removed = StartRemove(spread);
  ASSERT_EQ(raylets_.cancels.size(), 2u);
  auto to_a = raylets_.cancels[0].node == a ? std::move(raylets_.cancels[0]) : std::move(raylets_.cancels[1]);
  auto to_b = raylets_.cancels[0].node == b ? std::move(raylets_.cancels[0]) : std::move(raylets_.cancels[1]);
  raylets_.cancels.clear();
  to_b.cb(absl::OkStatus(), {});
  EXPECT_FALSE(removed->has_value());
  // Its death answers the remover: the bundles and workers went with it.
  scheduler_->OnNodeDead(a);
  manager_->OnNodeDead(a);
  view_.erase(a);
  ASSERT_TRUE(removed->has_value());
  EXPECT_TRUE(removed->value().ok());
  to_a.cb(absl::UnavailableError("node gone"), {});  // late, and harmless
  EXPECT_EQ(Get(spread).state(), Info::REMOVED);

  // A live node's answer is still waited for when another node dies.
  Info other = Spec(Info::PACK, {{{"CPU", 1}}});
  ASSERT_TRUE(Placed(other));
  Answer held = StartRemove(other);
  ASSERT_EQ(raylets_.cancels.size(), 1u);
  EXPECT_EQ(raylets_.cancels[0].node, b);
  NodeId c = AddNode({{"CPU", 2}});
  scheduler_->OnNodeDead(c);
  manager_->OnNodeDead(c);
  EXPECT_FALSE(held->has_value());
  raylets_.cancels[0].cb(absl::OkStatus(), {});
  ASSERT_TRUE(held->has_value());
}

TEST_F(PlacementGroupManagerTest, InfeasibleGroupWaitsForANode) {
  AddNode({{"CPU", 2}});
  Info spec = Spec(Info::PACK, {{{"TPU", 4}}});
  ASSERT_TRUE(Create(spec).ok());
  Info info = Get(spec);
  EXPECT_EQ(info.state(), Info::PENDING);
  EXPECT_TRUE(info.infeasible());
  EXPECT_NE(info.state_message().find("TPU"), std::string::npos) << info.state_message();
  rpc::GetClusterResourcesReply demands;
  manager_->AppendPending(&demands);
  EXPECT_EQ(demands.pending_placement_groups_size(), 1);

  AddNode({{"TPU", 4}});
  AnswerRaylets();
  EXPECT_EQ(Get(spec).state(), Info::CREATED);
  EXPECT_FALSE(Get(spec).infeasible());
}

TEST_F(PlacementGroupManagerTest, ShutdownAnswersHeldWaitsAndEveryLaterOne) {
  AddNode({{"CPU", 2}});
  Info spec = Spec(Info::PACK, {{{"TPU", 4}}});  // waits for a node
  ASSERT_TRUE(Create(spec).ok());
  rpc::WaitPlacementGroupReadyRequest wait;
  wait.set_placement_group_id(spec.placement_group_id());
  wait.set_timeout_ms(60000);
  rpc::WaitPlacementGroupReadyReply held_reply, late_reply;
  int answered = 0;
  manager_->HandleWaitPlacementGroupReady(wait, &held_reply, [&](const absl::Status& s) { answered += s.ok(); });
  EXPECT_EQ(answered, 0);
  manager_->Shutdown();
  EXPECT_EQ(answered, 1);
  EXPECT_FALSE(held_reply.ready());
  // A wait taken by the server before it stopped, handled after: answered
  // at once, or the server's shutdown would wait for its timeout.
  manager_->HandleWaitPlacementGroupReady(wait, &late_reply, [&](const absl::Status& s) { answered += s.ok(); });
  EXPECT_EQ(answered, 2);
  EXPECT_FALSE(late_reply.ready());
  EXPECT_EQ(late_reply.placement_group().state(), Info::PENDING);
}

TEST_F(PlacementGroupManagerTest, ANodeDeathReschedulesItsBundles) {
  NodeId a = AddNode({{"CPU", 4}});
  NodeId b = AddNode({{"CPU", 4}});
  Info spec = Spec(Info::STRICT_SPREAD, {{{"CPU", 4}}, {{"CPU", 4}}});
  ASSERT_TRUE(Placed(spec));
  std::string kept = b.Binary();  // a dies
  int lost_index = Get(spec).bundles(0).node_id() == a.Binary() ? 0 : 1;

  scheduler_->OnNodeDead(a);
  manager_->OnNodeDead(a);
  view_.erase(a);
  Info info = Get(spec);
  EXPECT_EQ(info.state(), Info::RESCHEDULING);
  EXPECT_EQ(info.num_reschedules(), 1);
  EXPECT_TRUE(info.bundles(lost_index).node_id().empty());
  EXPECT_EQ(info.bundles(1 - lost_index).node_id(), kept);

  NodeId c = AddNode({{"CPU", 4}});
  AnswerRaylets();
  info = Get(spec);
  EXPECT_EQ(info.state(), Info::CREATED);
  EXPECT_EQ(info.bundles(lost_index).node_id(), c.Binary());
  EXPECT_EQ(info.bundles(1 - lost_index).node_id(), kept);
}

TEST_F(PlacementGroupManagerTest, ARestartedGcsKeepsCreatedGroupsAndReplacesTheOthers) {
  NodeId node = AddNode({{"CPU", 4}});
  Info created = Spec(Info::PACK, {{{"CPU", 2}}});
  ASSERT_TRUE(Create(created).ok());
  AnswerRaylets();
  Info pending = Spec(Info::PACK, {{{"CPU", 2}}});
  ASSERT_TRUE(Create(pending).ok());  // its prepare is never answered
  ASSERT_EQ(raylets_.prepares.size(), 1u);
  raylets_.prepares.clear();
  Pump(loop_);

  Restart();
  EXPECT_EQ(Get(created).state(), Info::CREATED);
  EXPECT_EQ(Get(pending).state(), Info::PENDING);
  EXPECT_TRUE(Get(pending).bundles(0).node_id().empty());
  // The node's sync keeps exactly the created group's bundle.
  rpc::ReleaseUnusedBundlesRequest sync;
  AddNode({{"CPU", 4}}, &sync, node);
  ASSERT_EQ(sync.bundles_in_use_size(), 1);
  EXPECT_EQ(sync.bundles_in_use(0).placement_group_id(), created.placement_group_id());
  AnswerRaylets();
  EXPECT_EQ(Get(pending).state(), Info::CREATED);
}

TEST_F(PlacementGroupManagerTest, AJobsGroupsGoWithItUnlessDetached) {
  AddNode({{"CPU", 4}});
  Info owned = Spec(Info::PACK, {{{"CPU", 1}}});
  owned.set_creator_job_id(std::string("\x01\x00\x00\x00", 4));
  Info detached = owned;
  detached.set_placement_group_id(PlacementGroupId::FromRandom().Binary());
  detached.set_detached(true);
  ASSERT_TRUE(Create(owned).ok());
  ASSERT_TRUE(Create(detached).ok());
  AnswerRaylets();
  manager_->OnJobFinished(owned.creator_job_id());
  EXPECT_EQ(Get(owned).state(), Info::REMOVED);
  EXPECT_EQ(Get(detached).state(), Info::CREATED);
}

}  // namespace
}  // namespace manta::gcs
