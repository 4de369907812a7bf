#include "gcs/client/fake_gcs_client.h"

#include <algorithm>

#include "common/id.h"

namespace manta::gcs {
namespace {
constexpr absl::Duration kMaxPollWait = absl::Seconds(30);

std::string NewToken() { return NodeId::FromRandom().Binary(); }

// A List call's answer: the entries of `table` whose job (`job_of`) is
// `job` (any when empty) and that `keep` keeps, at most `limit` of them (0:
// all); how many match.
template <typename Table, typename Out, typename JobOf>
int64_t ListOfJob(const Table& table, const std::string& job, int limit, Out* out, JobOf job_of,
                  const std::function<bool(const typename Table::mapped_type&)>& keep = nullptr) {
  int64_t total = 0;
  for (const auto& [key, entry] : table) {
    if (!job.empty() && job_of(entry) != job) continue;
    if (keep && !keep(entry)) continue;
    ++total;
    if (limit <= 0 || out->size() < limit) *out->Add() = entry;
  }
  return total;
}
}  // namespace

FakeGcsClient::FakeGcsClient(EventLoop* loop) : loop_(loop), cluster_id_(NewToken()), incarnation_(NewToken()) {}

FakeGcsClient::~FakeGcsClient() = default;

template <typename Reply>
bool FakeGcsClient::Admit(const std::string& method, Callback<Reply>& cb) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  ++calls_[method];
  if (delay_next_.erase(method) > 0) {
    cb = [this, cb = std::move(cb)](const absl::Status& s, Reply&& reply) {
      auto held = std::make_shared<Reply>(std::move(reply));
      delayed_.push_back([cb, s, held] { cb(s, std::move(*held)); });
    };
  }
  if (auto it = fail_next_.find(method); it != fail_next_.end()) {
    absl::Status s = std::move(it->second);
    fail_next_.erase(it);
    Answer(std::move(cb), std::move(s), Reply());
    return false;
  }
  if (reachable_) return true;
  Answer(std::move(cb), absl::UnavailableError("failed to connect to the GCS"), Reply());
  return false;
}

void FakeGcsClient::ReleaseDelayed() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  for (auto& answer : delayed_) loop_->Post(std::move(answer));
  delayed_.clear();
}

template <typename Reply>
void FakeGcsClient::Answer(Callback<Reply> cb, absl::Status s, Reply reply) {
  loop_->Post([cb = std::move(cb), s = std::move(s), reply = std::move(reply)]() mutable { cb(s, std::move(reply)); });
}

// ---------------------------------------------------------------- nodes

void FakeGcsClient::GetClusterId(Callback<rpc::GetClusterIdReply> cb) {
  if (!Admit("GetClusterId", cb)) return;
  rpc::GetClusterIdReply reply;
  reply.set_cluster_id(cluster_id_);
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

void FakeGcsClient::RegisterNode(const rpc::RegisterNodeRequest& request, Callback<rpc::RegisterNodeReply> cb) {
  if (!Admit("RegisterNode", cb)) return;
  const std::string& id = request.node_info().node_id();
  if (!request.cluster_id().empty() && request.cluster_id() != cluster_id_) {
    return Answer(std::move(cb), absl::FailedPreconditionError("this GCS serves another cluster"),
                  rpc::RegisterNodeReply());
  }
  auto it = nodes_.find(id);
  if (it != nodes_.end() && it->second.state() == rpc::NodeInfo::DEAD) {
    return Answer(std::move(cb), absl::FailedPreconditionError("the node was marked dead; start a new raylet"),
                  rpc::RegisterNodeReply());
  }
  nodes_[id] = request.node_info();
  PublishNode(nodes_[id]);
  rpc::RegisterNodeReply reply;
  reply.set_cluster_id(cluster_id_);
  reply.set_gcs_incarnation(incarnation_);
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

void FakeGcsClient::UnregisterNode(const rpc::UnregisterNodeRequest& request, absl::Duration,
                                   Callback<rpc::UnregisterNodeReply> cb) {
  if (!Admit("UnregisterNode", cb)) return;
  auto it = nodes_.find(request.node_id());
  if (it != nodes_.end() && it->second.state() == rpc::NodeInfo::ALIVE) {
    it->second.set_state(rpc::NodeInfo::DEAD);
    it->second.set_death_expected(true);
    it->second.set_death_reason(request.reason());
    PublishNode(it->second);
  }
  Answer(std::move(cb), absl::OkStatus(), rpc::UnregisterNodeReply());
}

void FakeGcsClient::DrainNode(const rpc::DrainNodeRequest& request, absl::Duration, Callback<rpc::DrainNodeReply> cb) {
  if (!Admit("DrainNode", cb)) return;
  rpc::DrainNodeReply reply;
  auto it = nodes_.find(request.node_id());
  if (it == nodes_.end() || it->second.state() == rpc::NodeInfo::DEAD) {
    reply.set_rejection_reason("the node is dead");
  } else {
    reply.set_accepted(true);
    it->second.set_draining(true);
    it->second.set_drain_reason(request.reason());
    it->second.set_drain_deadline_ms(request.deadline_ms());
    PublishNode(it->second);
  }
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

void FakeGcsClient::GetAllNodeInfo(const rpc::GetAllNodeInfoRequest& request, Callback<rpc::GetAllNodeInfoReply> cb) {
  if (!Admit("GetAllNodeInfo", cb)) return;
  rpc::GetAllNodeInfoReply reply;
  for (const auto& [id, n] : nodes_) {
    if (!request.filter_alive() || n.state() == rpc::NodeInfo::ALIVE) *reply.add_nodes() = n;
  }
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

void FakeGcsClient::DeclareDead(const std::string& node_id, const std::string& reason) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.state() == rpc::NodeInfo::DEAD) return;
  it->second.set_state(rpc::NodeInfo::DEAD);
  it->second.set_death_reason(reason);
  PublishNode(it->second);
}

const rpc::NodeInfo* FakeGcsClient::node(const std::string& node_id) const {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? nullptr : &it->second;
}

void FakeGcsClient::PublishNode(const rpc::NodeInfo& info) {
  rpc::PubMessage m;
  m.set_channel(rpc::PubMessage::NODE_INFO);
  m.set_key(info.node_id());
  *m.mutable_node_info() = info;
  Publish(std::move(m));
}

// ---------------------------------------------------------------- resources

void FakeGcsClient::ReportResources(const rpc::ReportResourcesRequest& request,
                                    Callback<rpc::ReportResourcesReply> cb) {
  if (!Admit("ReportResources", cb)) return;
  keepalives_ += request.keepalive();
  const std::string& id = request.resources().node_id();
  auto node = nodes_.find(id);
  rpc::ReportResourcesReply reply;
  reply.set_known_node(node != nodes_.end() && node->second.state() == rpc::NodeInfo::ALIVE);
  if (reply.known_node() && !request.keepalive()) {
    resources_[id] = request.resources();
    rpc::PubMessage m;
    m.set_channel(rpc::PubMessage::NODE_RESOURCES);
    m.set_key(id);
    *m.mutable_node_resources() = request.resources();
    Publish(std::move(m));
  }
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

void FakeGcsClient::GetClusterResources(const rpc::GetClusterResourcesRequest&,
                                        Callback<rpc::GetClusterResourcesReply> cb) {
  if (!Admit("GetClusterResources", cb)) return;
  rpc::GetClusterResourcesReply reply;
  for (const auto& [id, r] : resources_) {
    auto node = nodes_.find(id);
    if (node != nodes_.end() && node->second.state() == rpc::NodeInfo::ALIVE) *reply.add_nodes() = r;
  }
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

// ---------------------------------------------------------------- pub/sub

void FakeGcsClient::Publish(rpc::PubMessage message) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  message.set_sequence(next_sequence_++);
  log_.push_back(std::move(message));
  AnswerHeld();
}

void FakeGcsClient::ForgetUpTo(int64_t sequence) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  while (!log_.empty() && log_.front().sequence() <= sequence) log_.pop_front();
  forgotten_up_to_ = std::max(forgotten_up_to_, sequence);
}

rpc::PollReply FakeGcsClient::Collect(const rpc::PollRequest& request) const {
  rpc::PollReply reply;
  reply.set_gcs_incarnation(incarnation_);
  // Another incarnation's sequence means nothing here: from the start.
  const int64_t after = request.gcs_incarnation() == incarnation_ ? request.after_sequence() : 0;
  reply.set_gap(after < forgotten_up_to_);
  int64_t last = std::max(after, forgotten_up_to_);
  for (const rpc::PubMessage& m : log_) {
    last = std::max(last, m.sequence());
    if (m.sequence() <= after) continue;
    if (std::find(request.channels().begin(), request.channels().end(), m.channel()) == request.channels().end()) {
      continue;
    }
    *reply.add_messages() = m;
  }
  reply.set_last_sequence(last);
  return reply;
}

void FakeGcsClient::Poll(const rpc::PollRequest& request, Callback<rpc::PollReply> cb) {
  if (!Admit("Poll", cb)) return;
  rpc::PollReply reply = Collect(request);
  if (reply.messages_size() > 0 || reply.gap() || request.max_wait_ms() <= 0) {
    return Answer(std::move(cb), absl::OkStatus(), std::move(reply));
  }
  auto held = std::make_unique<HeldPoll>();
  HeldPoll* raw = held.get();
  held->request = request;
  held->cb = std::move(cb);
  held->timer = loop_->RunAfter(std::min(absl::Milliseconds(request.max_wait_ms()), kMaxPollWait), [this, raw] {
    auto it = std::find_if(held_.begin(), held_.end(), [raw](const auto& h) { return h.get() == raw; });
    if (it == held_.end()) return;
    std::unique_ptr<HeldPoll> mine = std::move(*it);
    held_.erase(it);
    Answer(std::move(mine->cb), absl::OkStatus(), Collect(mine->request));
    loop_->Post([mine = std::shared_ptr<HeldPoll>(std::move(mine))] {});  // not freed inside its own timer
  });
  held_.push_back(std::move(held));
}

void FakeGcsClient::AnswerHeld() {
  std::vector<std::unique_ptr<HeldPoll>> keep;
  for (auto& h : held_) {
    rpc::PollReply reply = Collect(h->request);
    if (reply.messages_size() == 0 && !reply.gap()) {
      keep.push_back(std::move(h));
      continue;
    }
    h->timer.reset();
    Answer(std::move(h->cb), absl::OkStatus(), std::move(reply));
  }
  held_ = std::move(keep);
}

void FakeGcsClient::EndHeld(const absl::Status& s) {
  for (auto& h : held_) {
    h->timer.reset();
    if (s.ok()) {
      Answer(std::move(h->cb), s, Collect(h->request));
    } else {
      Answer(std::move(h->cb), s, rpc::PollReply());
    }
  }
  held_.clear();
}

void FakeGcsClient::PublishLogs(const rpc::PublishLogsRequest&, Callback<rpc::PublishLogsReply> cb) {
  if (!Admit("PublishLogs", cb)) return;
  Answer(std::move(cb), absl::OkStatus(), rpc::PublishLogsReply());
}

// ---------------------------------------------------------------- control

void FakeGcsClient::SetReachable(bool reachable) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  reachable_ = reachable;
  if (!reachable) EndHeld(absl::UnavailableError("the GCS went away"));
}

void FakeGcsClient::Restart() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  incarnation_ = NewToken();
  EndHeld(absl::UnavailableError("the GCS restarted"));
}

void FakeGcsClient::ServeAnotherCluster() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  cluster_id_ = NewToken();
  incarnation_ = NewToken();
  nodes_.clear();
  resources_.clear();
  EndHeld(absl::UnavailableError("the GCS restarted"));
}

int FakeGcsClient::calls(const std::string& method) const {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto it = calls_.find(method);
  return it == calls_.end() ? 0 : it->second;
}

// ---------------------------------------------------------------- KV, actors, groups, jobs

void FakeGcsClient::KvPut(const rpc::KvPutRequest& request, Callback<rpc::KvPutReply> cb) {
  if (!Admit("KvPut", cb)) return;
  std::string key = request.ns() + '\0' + request.key();
  rpc::KvPutReply reply;
  const bool exists = kv_.count(key) > 0;
  if (!exists || request.overwrite()) kv_[key] = request.value();
  reply.set_added(!exists);
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

void FakeGcsClient::KvGet(const rpc::KvGetRequest& request, Callback<rpc::KvGetReply> cb) {
  if (!Admit("KvGet", cb)) return;
  rpc::KvGetReply reply;
  auto it = kv_.find(request.ns() + '\0' + request.key());
  if (it != kv_.end()) {
    reply.set_found(true);
    reply.set_value(it->second);
  }
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

void FakeGcsClient::KvDel(const rpc::KvDelRequest& request, Callback<rpc::KvDelReply> cb) {
  if (!Admit("KvDel", cb)) return;
  rpc::KvDelReply reply;
  reply.set_deleted(static_cast<int64_t>(kv_.erase(request.ns() + '\0' + request.key())));
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

void FakeGcsClient::KvKeys(const rpc::KvKeysRequest& request, Callback<rpc::KvKeysReply> cb) {
  if (!Admit("KvKeys", cb)) return;
  rpc::KvKeysReply reply;
  const std::string from = request.ns() + '\0' + request.prefix();
  for (auto it = kv_.lower_bound(from); it != kv_.end() && it->first.compare(0, from.size(), from) == 0; ++it) {
    reply.add_keys(it->first.substr(request.ns().size() + 1));
  }
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

void FakeGcsClient::PutActor(const rpc::ActorInfo& info) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  actors_[info.actor_id()] = info;
  rpc::PubMessage m;
  m.set_channel(rpc::PubMessage::ACTOR);
  m.set_key(info.actor_id());
  *m.mutable_actor_info() = info;
  Publish(std::move(m));
}

void FakeGcsClient::RegisterActor(const rpc::RegisterActorRequest& request, Callback<rpc::RegisterActorReply> cb) {
  if (!Admit("RegisterActor", cb)) return;
  const std::string& id = request.creation_task().actor_id();
  if (!actors_.count(id)) {
    rpc::ActorInfo info;
    info.set_actor_id(id);
    info.set_state(rpc::ActorInfo::PENDING_CREATION);
    PutActor(info);
  }
  rpc::RegisterActorReply reply;
  *reply.mutable_actor() = actors_[id];
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

void FakeGcsClient::GetActorInfo(const rpc::GetActorInfoRequest& request, Callback<rpc::GetActorInfoReply> cb) {
  if (!Admit("GetActorInfo", cb)) return;
  rpc::GetActorInfoReply reply;
  auto it = actors_.find(request.actor_id());
  if (it != actors_.end()) *reply.mutable_actor() = it->second;
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

void FakeGcsClient::GetNamedActor(const rpc::GetNamedActorRequest& request, Callback<rpc::GetNamedActorReply> cb) {
  if (!Admit("GetNamedActor", cb)) return;
  for (const auto& [id, a] : actors_) {
    if (a.name() == request.name() && a.ray_namespace() == request.ray_namespace() &&
        a.state() != rpc::ActorInfo::DEAD) {
      rpc::GetNamedActorReply reply;
      *reply.mutable_actor() = a;
      return Answer(std::move(cb), absl::OkStatus(), std::move(reply));
    }
  }
  Answer(std::move(cb), absl::NotFoundError("no live actor named '" + request.name() + "'"), rpc::GetNamedActorReply());
}

void FakeGcsClient::KillActor(const rpc::KillActorRequest& request, Callback<rpc::KillActorReply> cb) {
  if (!Admit("KillActor", cb)) return;
  auto it = actors_.find(request.actor_id());
  if (it == actors_.end()) return Answer(std::move(cb), absl::NotFoundError("no actor"), rpc::KillActorReply());
  rpc::ActorInfo info = it->second;
  info.set_state(request.no_restart() ? rpc::ActorInfo::DEAD : rpc::ActorInfo::RESTARTING);
  PutActor(info);
  Answer(std::move(cb), absl::OkStatus(), rpc::KillActorReply());
}

void FakeGcsClient::ListActors(const rpc::ListActorsRequest& request, Callback<rpc::ListActorsReply> cb) {
  if (!Admit("ListActors", cb)) return;
  std::set<int> states;
  for (int state : request.states()) {
    if (!rpc::ActorInfo::State_IsValid(state)) {
      return Answer(std::move(cb), absl::InvalidArgumentError("unknown actor state " + std::to_string(state)),
                    rpc::ListActorsReply());
    }
    states.insert(state);
  }
  rpc::ListActorsReply reply;
  reply.set_total(ListOfJob(
      actors_, request.job_id(), request.limit(), reply.mutable_actors(),
      [](const rpc::ActorInfo& a) { return a.job_id(); },
      [&](const rpc::ActorInfo& a) { return states.empty() || states.count(a.state()) > 0; }));
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

void FakeGcsClient::ReportWorkerFailure(const rpc::ReportWorkerFailureRequest& request,
                                        Callback<rpc::ReportWorkerFailureReply> cb) {
  if (!Admit("ReportWorkerFailure", cb)) return;
  worker_failures_.push_back(request);
  Answer(std::move(cb), absl::OkStatus(), rpc::ReportWorkerFailureReply());
}

void FakeGcsClient::PutPlacementGroup(const rpc::PlacementGroupInfo& info) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  groups_[info.placement_group_id()] = info;
}

void FakeGcsClient::GetPlacementGroup(const rpc::GetPlacementGroupRequest& request,
                                      Callback<rpc::GetPlacementGroupReply> cb) {
  if (!Admit("GetPlacementGroup", cb)) return;
  const rpc::PlacementGroupInfo* group =
      FindGroup(request.placement_group_id(), request.name(), request.ray_namespace());
  if (group == nullptr && request.placement_group_id().empty()) {
    return Answer(std::move(cb), absl::NotFoundError("no placement group named '" + request.name() + "'"),
                  rpc::GetPlacementGroupReply());
  }
  rpc::GetPlacementGroupReply reply;
  if (group != nullptr) *reply.mutable_placement_group() = *group;
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

const rpc::PlacementGroupInfo* FakeGcsClient::FindGroup(const std::string& id, const std::string& name,
                                                        const std::string& ray_namespace) const {
  if (!id.empty()) {
    auto it = groups_.find(id);
    return it == groups_.end() ? nullptr : &it->second;
  }
  for (const auto& [gid, g] : groups_) {
    if (g.name() == name && g.ray_namespace() == ray_namespace && g.state() != rpc::PlacementGroupInfo::REMOVED) {
      return &g;
    }
  }
  return nullptr;
}

void FakeGcsClient::CreatePlacementGroup(const rpc::CreatePlacementGroupRequest& request,
                                         Callback<rpc::CreatePlacementGroupReply> cb) {
  if (!Admit("CreatePlacementGroup", cb)) return;
  const rpc::PlacementGroupInfo& spec = request.spec();
  if (groups_.count(spec.placement_group_id()) ||
      (!spec.name().empty() && FindGroup("", spec.name(), spec.ray_namespace()) != nullptr)) {
    return Answer(std::move(cb),
                  absl::AlreadyExistsError("a placement group named '" + spec.name() + "' already exists"),
                  rpc::CreatePlacementGroupReply());
  }
  rpc::PlacementGroupInfo& group = groups_[spec.placement_group_id()] = spec;
  group.set_state(rpc::PlacementGroupInfo::CREATED);
  rpc::CreatePlacementGroupReply reply;
  *reply.mutable_placement_group() = group;
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

void FakeGcsClient::RemovePlacementGroup(const rpc::RemovePlacementGroupRequest& request, absl::Duration,
                                         Callback<rpc::RemovePlacementGroupReply> cb) {
  if (!Admit("RemovePlacementGroup", cb)) return;
  auto it = groups_.find(request.placement_group_id());
  if (it == groups_.end()) {
    return Answer(std::move(cb), absl::NotFoundError("no placement group"), rpc::RemovePlacementGroupReply());
  }
  it->second.set_state(rpc::PlacementGroupInfo::REMOVED);
  Answer(std::move(cb), absl::OkStatus(), rpc::RemovePlacementGroupReply());
}

void FakeGcsClient::WaitPlacementGroupReady(const rpc::WaitPlacementGroupReadyRequest& request,
                                            Callback<rpc::WaitPlacementGroupReadyReply> cb) {
  if (!Admit("WaitPlacementGroupReady", cb)) return;
  auto it = groups_.find(request.placement_group_id());
  if (it == groups_.end()) {
    return Answer(std::move(cb), absl::NotFoundError("no placement group"), rpc::WaitPlacementGroupReadyReply());
  }
  rpc::WaitPlacementGroupReadyReply reply;
  reply.set_ready(it->second.state() == rpc::PlacementGroupInfo::CREATED);
  *reply.mutable_placement_group() = it->second;
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

void FakeGcsClient::ListPlacementGroups(const rpc::ListPlacementGroupsRequest& request,
                                        Callback<rpc::ListPlacementGroupsReply> cb) {
  if (!Admit("ListPlacementGroups", cb)) return;
  rpc::ListPlacementGroupsReply reply;
  reply.set_total(ListOfJob(groups_, request.job_id(), request.limit(), reply.mutable_placement_groups(),
                            [](const rpc::PlacementGroupInfo& g) { return g.creator_job_id(); }));
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

// ---------------------------------------------------------------- tasks, training runs

void FakeGcsClient::AddTaskEvents(const rpc::AddTaskEventsRequest& request, Callback<rpc::AddTaskEventsReply> cb) {
  if (!Admit("AddTaskEvents", cb)) return;
  for (const rpc::TaskEvent& e : request.events()) tasks_[e.task_id()] = e;
  Answer(std::move(cb), absl::OkStatus(), rpc::AddTaskEventsReply());
}

void FakeGcsClient::ListTasks(const rpc::ListTasksRequest& request, Callback<rpc::ListTasksReply> cb) {
  if (!Admit("ListTasks", cb)) return;
  rpc::ListTasksReply reply;
  reply.set_total(ListOfJob(tasks_, request.job_id(), request.limit(), reply.mutable_tasks(),
                            [](const rpc::TaskEvent& t) { return t.job_id(); }));
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

void FakeGcsClient::ReportTrainRun(const rpc::ReportTrainRunRequest& request, Callback<rpc::ReportTrainRunReply> cb) {
  if (!Admit("ReportTrainRun", cb)) return;
  rpc::TrainRunInfo& run = train_runs_[request.run().run_id()];
  auto metrics = std::move(*run.mutable_metrics());
  run = request.run();
  *run.mutable_metrics() = std::move(metrics);
  for (const rpc::TrainMetricPoint& p : request.new_metrics()) *run.add_metrics() = p;
  Answer(std::move(cb), absl::OkStatus(), rpc::ReportTrainRunReply());
}

void FakeGcsClient::ListTrainRuns(const rpc::ListTrainRunsRequest& request, Callback<rpc::ListTrainRunsReply> cb) {
  if (!Admit("ListTrainRuns", cb)) return;
  rpc::ListTrainRunsReply reply;
  for (const auto& [id, r] : train_runs_) {
    if (!request.job_id().empty() && r.job_id() != request.job_id()) continue;
    rpc::TrainRunInfo* out = reply.add_runs();
    *out = r;
    if (!request.with_metrics()) out->clear_metrics();
  }
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

void FakeGcsClient::AddJob(const rpc::AddJobRequest& request, Callback<rpc::AddJobReply> cb) {
  if (!Admit("AddJob", cb)) return;
  rpc::JobInfo job = request.job();
  std::string id(JobId::kSize, '\0');
  const int n = next_job_++;
  for (size_t i = 0; i < id.size(); ++i) id[id.size() - 1 - i] = static_cast<char>((n >> (8 * i)) & 0xff);
  job.set_job_id(id);
  jobs_[id] = job;
  rpc::AddJobReply reply;
  reply.set_job_id(id);
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

void FakeGcsClient::MarkJobFinished(const rpc::MarkJobFinishedRequest& request,
                                    Callback<rpc::MarkJobFinishedReply> cb) {
  if (!Admit("MarkJobFinished", cb)) return;
  auto it = jobs_.find(request.job_id());
  if (it == jobs_.end()) {
    return Answer(std::move(cb), absl::NotFoundError("no such job"), rpc::MarkJobFinishedReply());
  }
  it->second.set_is_dead(true);
  Answer(std::move(cb), absl::OkStatus(), rpc::MarkJobFinishedReply());
}

void FakeGcsClient::GetAllJobInfo(const rpc::GetAllJobInfoRequest& request, Callback<rpc::GetAllJobInfoReply> cb) {
  if (!Admit("GetAllJobInfo", cb)) return;
  rpc::GetAllJobInfoReply reply;
  for (const auto& [id, job] : jobs_) {
    if (request.job_id().empty() || request.job_id() == id) *reply.add_jobs() = job;
  }
  Answer(std::move(cb), absl::OkStatus(), std::move(reply));
}

}  // namespace manta::gcs
