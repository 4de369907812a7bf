// The gRPC rows of the bad-input table: the GCS's services and the head
// raylet's NodeManagerService, each given one malformed field on top of an
// otherwise valid request.
#include <grpcpp/generic/generic_stub.h>

#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_util.h"
#include "gcs_service.pb.h"
#include "node_manager.pb.h"
#include "tests/bad_input_table.h"

namespace manta::testing {

Outcome CallGrpc(const std::string& target, const std::string& method, const google::protobuf::Message& request,
                 const std::string& token, google::protobuf::Message* reply) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  args.SetMaxReceiveMessageSize(-1);
  // A fresh channel per call: a refused call must not poison the next row.
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, token, absl::Seconds(10));
  std::string bytes = request.SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer req(&slice, 1);
  grpc::ByteBuffer resp;
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  grpc::Status status;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &req, &resp, [&](grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    status = std::move(s);
    finished = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return finished; });
  static const char* const kNames[] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  int code = static_cast<int>(status.error_code());
  Outcome out{code >= 0 && code <= 16 ? kNames[code] : absl::StrCat("code ", code), status.error_message()};
  if (status.ok() && reply != nullptr) {
    std::vector<grpc::Slice> slices;
    std::string whole;
    if (resp.Dump(&slices).ok()) {
      for (const auto& s : slices) whole.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    if (!reply->ParseFromString(whole)) out = {"unparsable reply", ""};
  }
  return out;
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The bad quantities every resource map is tried with, and what the error
// says about each.
struct BadQuantity {
  const char* what;
  double value;
  const char* message;
};
const BadQuantity kBadQuantities[] = {
    {"NaN", kNaN, "NaN"},
    {"negative", -1, "negative"},
    {"infinite", kInf, "infinite"},
    {"above 9e14", 9.5e14, "larger than the maximum"},
};

std::string Bytes(size_t n, char c) { return std::string(n, c); }

const char kNodeInfo[] = "/manta.rpc.NodeInfoGcsService/";
const char kResource[] = "/manta.rpc.NodeResourceGcsService/";
const char kKv[] = "/manta.rpc.InternalKvGcsService/";
const char kActor[] = "/manta.rpc.ActorGcsService/";
const char kPg[] = "/manta.rpc.PlacementGroupGcsService/";
const char kPubSub[] = "/manta.rpc.PubSubGcsService/";
const char kRaylet[] = "/manta.rpc.NodeManagerService/";

// A node that is not there (nothing listens on port 1) but valid otherwise.
rpc::RegisterNodeRequest ValidNode() {
  rpc::RegisterNodeRequest r;
  rpc::NodeInfo* n = r.mutable_node_info();
  n->set_node_id(Bytes(28, '\x7e'));
  n->set_node_ip("127.0.0.1");
  n->set_node_manager_port(1);
  n->set_node_name("bad-input");
  (*n->mutable_resources_total())["CPU"] = 1;
  return r;
}

rpc::CreatePlacementGroupRequest ValidGroup() {
  rpc::CreatePlacementGroupRequest r;
  rpc::PlacementGroupInfo* g = r.mutable_spec();
  g->set_placement_group_id(Bytes(18, '\x5a'));
  g->set_name("bad-input-group");
  rpc::Bundle* b = g->add_bundles();
  b->set_index(0);
  (*b->mutable_resources())["CPU"] = 1;
  return r;
}

rpc::RegisterActorRequest ValidActor() {
  rpc::RegisterActorRequest r;
  rpc::TaskSpec* s = r.mutable_creation_task();
  s->set_type(rpc::TaskSpec::ACTOR_CREATION_TASK);
  s->set_actor_id(Bytes(16, '\x3c'));
  s->set_job_id(Bytes(4, '\x01'));
  s->set_function_name("BadInput::Create");
  s->set_worker_executable("/bin/true");
  (*s->mutable_resources())["CPU"] = 1;
  s->mutable_caller_address()->set_ip("127.0.0.1");
  s->mutable_caller_address()->set_port(1);
  s->mutable_caller_address()->set_worker_id(Bytes(28, '\x02'));
  return r;
}

rpc::RequestWorkerLeaseRequest ValidLease() {
  rpc::RequestWorkerLeaseRequest r;
  r.set_lease_id(Bytes(16, '\x4b'));
  r.set_fail_if_infeasible(true);
  rpc::TaskSpec* s = r.mutable_spec();
  s->set_type(rpc::TaskSpec::NORMAL_TASK);
  s->set_job_id(Bytes(4, '\x01'));
  s->set_function_name("BadInput");
  s->set_worker_executable("/bin/true");
  (*s->mutable_resources())["CPU"] = 1;
  return r;
}

rpc::PrepareBundlesRequest ValidPrepare() {
  rpc::PrepareBundlesRequest r;
  rpc::Bundle* b = r.add_bundles();
  b->set_placement_group_id(Bytes(18, '\x6b'));
  b->set_index(0);
  (*b->mutable_resources())["CPU"] = 1;
  return r;
}

// Rows for one method: `mutate` applied to `base` makes the bad request.
template <typename Request>
struct Rows {
  const Target& t;
  std::vector<BadInput>* out;
  std::string entry_point;
  std::string address;
  std::string method;
  Request base;

  void Add(const std::string& input, std::function<void(Request*)> mutate, const std::string& code,
           const std::string& message, const std::string& token_override = "\x01") {
    Request r = base;
    mutate(&r);
    std::string address_copy = address, method_copy = method;
    std::string token = token_override == "\x01" ? t.token : token_override;
    out->push_back({entry_point, input, [=] { return CallGrpc(address_copy, method_copy, r, token); }, code, message});
  }
  // With a reply whose verdict `judge` turns into an Outcome.
  template <typename Reply>
  void AddJudged(const std::string& input, std::function<void(Request*)> mutate,
                 std::function<Outcome(const Reply&)> judge, const std::string& code, const std::string& message) {
    Request r = base;
    mutate(&r);
    std::string address_copy = address, method_copy = method, token = t.token;
    out->push_back({entry_point, input,
                    [=] {
                      Reply reply;
                      Outcome o = CallGrpc(address_copy, method_copy, r, token, &reply);
                      return o.code == "OK" ? judge(reply) : o;
                    },
                    code, message});
  }
  // The rows are a table, one call a row, laid out by hand: clang-format 14
  // breaks a call whose lambda is not its last argument right after its "(".
  // clang-format off
  // The four bad quantities, each set by `set`.
  void AddQuantities(const std::string& where, std::function<void(Request*, double)> set,
                     const std::string& code = "INVALID_ARGUMENT") {
    for (const BadQuantity& q : kBadQuantities) {
      double v = q.value;
      Add(absl::StrCat(q.what, " ", where), [set, v](Request* r) { set(r, v); }, code, q.message);
    }
  }
  // Missing and wrong token.
  void AddTokens() {
    Add("no token", [](Request*) {}, "UNAUTHENTICATED", "", "");
    Add("wrong token", [](Request*) {}, "UNAUTHENTICATED", "", Bytes(64, 'f'));
  }
};

template <typename Request>
Rows<Request> MakeRows(const Target& t, std::vector<BadInput>* out, const std::string& service,
                       const std::string& name, const std::string& address, Request base) {
  return Rows<Request>{t, out, (service == kRaylet ? "raylet " : "GCS ") + name, address, service + name,
                       std::move(base)};
}

void NodeRows(const Target& t, std::vector<BadInput>* out) {
  auto reg = MakeRows(t, out, kNodeInfo, "RegisterNode", t.gcs_address, ValidNode());
  reg.AddQuantities("CPU total", [](auto* r, double v) { (*r->mutable_node_info()->mutable_resources_total())["CPU"] = v; });
  reg.Add("node_id of 27 bytes", [](auto* r) { r->mutable_node_info()->set_node_id(Bytes(27, 'a')); },
          "INVALID_ARGUMENT", "node_id must be 28 bytes");
  reg.Add("node_id of 0 bytes", [](auto* r) { r->mutable_node_info()->clear_node_id(); }, "INVALID_ARGUMENT",
          "node_id must be 28 bytes");
  reg.Add("unknown state 99",
          [](auto* r) { r->mutable_node_info()->set_state(static_cast<rpc::NodeInfo::State>(99)); },
          "INVALID_ARGUMENT", "state");
  reg.Add("port 70000", [](auto* r) { r->mutable_node_info()->set_node_manager_port(70000); }, "INVALID_ARGUMENT",
          "node_manager_port 70000 is invalid");
  reg.Add("1 MB node_name", [](auto* r) { r->mutable_node_info()->set_node_name(Bytes(1 << 20, 'n')); },
          "INVALID_ARGUMENT", "node_name is too long");
  reg.Add("5000 resources",
          [](auto* r) {
            for (int i = 0; i < 5000; ++i) (*r->mutable_node_info()->mutable_resources_total())[absl::StrCat("r", i)] = 1;
          },
          "INVALID_ARGUMENT", "too many resources");
  reg.Add("resource name with a space", [](auto* r) { (*r->mutable_node_info()->mutable_resources_total())["a b"] = 1; },
          "INVALID_ARGUMENT", "space or control character");
  reg.Add("unknown TPU accelerator-type label",
          [](auto* r) { (*r->mutable_node_info()->mutable_labels())["manta.io/accelerator-type"] = "TPU-V99"; },
          "INVALID_ARGUMENT", "TPU-V99");
  reg.Add("malformed TPU topology label",
          [](auto* r) { (*r->mutable_node_info()->mutable_labels())["manta.io/tpu-topology"] = "4x0x"; },
          "INVALID_ARGUMENT", "4x0x");
  reg.Add("unknown TPU pod-type label",
          [](auto* r) { (*r->mutable_node_info()->mutable_labels())["manta.io/tpu-pod-type"] = "v99-8"; },
          "INVALID_ARGUMENT", "v99-8");
  reg.AddTokens();

  auto drain = MakeRows(t, out, kNodeInfo, "DrainNode", t.gcs_address, rpc::DrainNodeRequest());
  drain.Add("node_id of 3 bytes", [](auto* r) { r->set_node_id("abc"), r->set_reason("x"); }, "INVALID_ARGUMENT",
            "node_id must be 28 bytes");
  drain.Add("negative deadline", [&t](auto* r) { r->set_node_id(t.node_id), r->set_reason("x"), r->set_deadline_ms(-5); },
            "INVALID_ARGUMENT", "negative");
  drain.Add("non-UTF-8 reason", [&t](auto* r) { r->set_node_id(t.node_id), r->set_reason("\xff\xfe"); },
            "INVALID_ARGUMENT", "not valid UTF-8");
  drain.AddTokens();

  auto unreg = MakeRows(t, out, kNodeInfo, "UnregisterNode", t.gcs_address, rpc::UnregisterNodeRequest());
  unreg.Add("node_id of 29 bytes", [](auto* r) { r->set_node_id(Bytes(29, 'z')); }, "INVALID_ARGUMENT", "28 bytes");
  unreg.AddTokens();

  auto report = MakeRows(t, out, kResource, "ReportResources", t.gcs_address, rpc::ReportResourcesRequest());
  report.base.mutable_resources()->set_node_id(t.node_id);
  // An old version: a report that got through would be ignored, not kept.
  report.base.mutable_resources()->set_version(1);
  (*report.base.mutable_resources()->mutable_total())["CPU"] = 4;
  (*report.base.mutable_resources()->mutable_available())["CPU"] = 4;
  report.AddQuantities("available CPU of the head",
                       [](auto* r, double v) { (*r->mutable_resources()->mutable_available())["CPU"] = v; });
  report.AddQuantities("task demand shape", [](auto* r, double v) { (*r->add_demands()->mutable_shape())["CPU"] = v; });
  report.Add("negative queued count", [](auto* r) {
    auto* d = r->add_demands();
    (*d->mutable_shape())["CPU"] = 1;
    d->set_num_ready_requests_queued(-3);
  }, "INVALID_ARGUMENT", "negative");
  report.Add("node_id of 5 bytes", [](auto* r) { r->mutable_resources()->set_node_id("short"); }, "INVALID_ARGUMENT",
             "28 bytes");
  report.AddTokens();
}

void GroupAndActorRows(const Target& t, std::vector<BadInput>* out) {
  auto pg = MakeRows(t, out, kPg, "CreatePlacementGroup", t.gcs_address, ValidGroup());
  pg.AddQuantities("CPU in bundle 0", [](auto* r, double v) { (*r->mutable_spec()->mutable_bundles(0)->mutable_resources())["CPU"] = v; });
  pg.Add("id of 17 bytes", [](auto* r) { r->mutable_spec()->set_placement_group_id(Bytes(17, 'p')); },
         "INVALID_ARGUMENT", "placement_group_id must be 18 bytes");
  pg.Add("unknown strategy 99", [](auto* r) { r->mutable_spec()->set_strategy(static_cast<rpc::PlacementGroupInfo::Strategy>(99)); },
         "INVALID_ARGUMENT", "unknown strategy");
  pg.Add("20000 bundles", [](auto* r) {
    for (int i = 1; i < 20000; ++i) *r->mutable_spec()->add_bundles() = r->spec().bundles(0), r->mutable_spec()->mutable_bundles(i)->set_index(i);
  }, "INVALID_ARGUMENT", "at most");
  pg.Add("2 KB name", [](auto* r) { r->mutable_spec()->set_name(Bytes(2048, 'n')); }, "INVALID_ARGUMENT",
         "at most 1024 bytes");
  pg.Add("bundle index 5 at position 0", [](auto* r) { r->mutable_spec()->mutable_bundles(0)->set_index(5); },
         "INVALID_ARGUMENT", "bundle 0 has index 5");
  pg.Add("empty bundle", [](auto* r) { r->mutable_spec()->mutable_bundles(0)->clear_resources(); },
         "INVALID_ARGUMENT", "is empty");
  pg.Add("unknown TPU type in bundle selector", [](auto* r) {
    (*r->mutable_spec()->mutable_bundles(0)->mutable_label_selector())["manta.io/accelerator-type"] = "TPU-V99";
  }, "INVALID_ARGUMENT", "TPU-V99");
  pg.Add("bad TPU topology in bundle selector", [](auto* r) {
    (*r->mutable_spec()->mutable_bundles(0)->mutable_label_selector())["manta.io/tpu-topology"] = "in(4x4,0x9)";
  }, "INVALID_ARGUMENT", "0x9");
  pg.Add("malformed selector", [](auto* r) {
    (*r->mutable_spec()->mutable_bundles(0)->mutable_label_selector())["k"] = "in()";
  }, "INVALID_ARGUMENT", "bundle 0");
  pg.Add("placement-group resource name in a bundle", [](auto* r) {
    (*r->mutable_spec()->mutable_bundles(0)->mutable_resources())["CPU_group_0_5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a"] = 1;
  }, "INVALID_ARGUMENT", "placement-group");
  pg.AddTokens();

  auto remove = MakeRows(t, out, kPg, "RemovePlacementGroup", t.gcs_address, rpc::RemovePlacementGroupRequest());
  remove.Add("id of 3 bytes", [](auto* r) { r->set_placement_group_id("abc"); }, "INVALID_ARGUMENT", "18 bytes");

  auto actor = MakeRows(t, out, kActor, "RegisterActor", t.gcs_address, ValidActor());
  actor.AddQuantities("CPU", [](auto* r, double v) { (*r->mutable_creation_task()->mutable_resources())["CPU"] = v; });
  actor.Add("actor_id of 15 bytes", [](auto* r) { r->mutable_creation_task()->set_actor_id(Bytes(15, 'a')); },
            "INVALID_ARGUMENT", "actor_id must be 16 bytes");
  actor.Add("job_id of 5 bytes", [](auto* r) { r->mutable_creation_task()->set_job_id(Bytes(5, 'j')); },
            "INVALID_ARGUMENT", "job_id must be 4 bytes");
  actor.Add("unknown task type 99", [](auto* r) { r->mutable_creation_task()->set_type(static_cast<rpc::TaskSpec::Type>(99)); },
            "INVALID_ARGUMENT", "ACTOR_CREATION_TASK");
  actor.Add("2 KB actor name", [](auto* r) { r->mutable_creation_task()->mutable_actor_creation()->set_name(Bytes(2048, 'n')); },
            "INVALID_ARGUMENT", "name exceeds 1024 bytes");
  actor.Add("20000 args", [](auto* r) { for (int i = 0; i < 20000; ++i) r->mutable_creation_task()->add_args(); },
            "INVALID_ARGUMENT", "too many args");
  actor.Add("max_restarts -7", [](auto* r) { r->mutable_creation_task()->mutable_actor_creation()->set_max_restarts(-7); },
            "INVALID_ARGUMENT", "max_restarts");
  actor.Add("malformed label selector", [](auto* r) { (*r->mutable_creation_task()->mutable_label_selector())["k"] = "!in()"; },
            "INVALID_ARGUMENT", "label");
  actor.Add("unknown TPU type in label selector", [](auto* r) {
    (*r->mutable_creation_task()->mutable_label_selector())["manta.io/accelerator-type"] = "TPU-V99";
  }, "INVALID_ARGUMENT", "TPU-V99");
  actor.AddTokens();

  auto info = MakeRows(t, out, kActor, "GetActorInfo", t.gcs_address, rpc::GetActorInfoRequest());
  info.Add("actor_id of 40 bytes", [](auto* r) { r->set_actor_id(Bytes(40, 'x')); }, "INVALID_ARGUMENT", "16 bytes");
  auto list = MakeRows(t, out, kActor, "ListActors", t.gcs_address, rpc::ListActorsRequest());
  list.Add("unknown state 99", [](auto* r) { r->add_states(static_cast<rpc::ActorInfo::State>(99)); },
           "INVALID_ARGUMENT", "unknown actor state 99");
}

void KvAndPollRows(const Target& t, std::vector<BadInput>* out) {
  auto put = MakeRows(t, out, kKv, "Put", t.gcs_address, rpc::KvPutRequest());
  put.base.set_ns("bad_input");
  put.base.set_key("k");
  put.base.set_value("v");
  put.Add("80 MB value", [](auto* r) { r->set_value(Bytes(80 << 20, 'v')); }, "RESOURCE_EXHAUSTED", "");
  put.Add("1 MB key", [](auto* r) { r->set_key(Bytes(1 << 20, 'k')); }, "INVALID_ARGUMENT", "key");
  put.Add("empty key", [](auto* r) { r->clear_key(); }, "INVALID_ARGUMENT", "key");
  put.Add("1 MB namespace", [](auto* r) { r->set_ns(Bytes(1 << 20, 'n')); }, "INVALID_ARGUMENT",
          "namespace is too long");
  put.AddTokens();
  auto keys = MakeRows(t, out, kKv, "Keys", t.gcs_address, rpc::KvKeysRequest());
  keys.base.set_ns("job");
  keys.AddTokens();

  auto poll = MakeRows(t, out, kPubSub, "Poll", t.gcs_address, rpc::PollRequest());
  poll.base.set_max_wait_ms(1);
  poll.Add("unknown channel 99", [](auto* r) { r->add_channels(static_cast<rpc::PubMessage::Channel>(99)); },
           "INVALID_ARGUMENT", "unknown channel 99");
  poll.Add("100000 keys", [](auto* r) { for (int i = 0; i < 100000; ++i) r->add_keys("k"); }, "INVALID_ARGUMENT",
           "at most 10000");
  poll.Add("subscriber_job_id of 9 bytes", [](auto* r) { r->set_subscriber_job_id(Bytes(9, 'j')); },
           "INVALID_ARGUMENT", "subscriber_job_id must be 4 bytes");
  poll.Add("subscriber_node_id of 3 bytes", [](auto* r) { r->set_subscriber_node_id("abc"); }, "INVALID_ARGUMENT",
           "subscriber_node_id must be 28 bytes");
  poll.AddTokens();

  // The stream is refused before its first reply, as the poll is.
  auto sub = MakeRows(t, out, kPubSub, "Subscribe", t.gcs_address, rpc::PollRequest());
  sub.Add("unknown channel 99", [](auto* r) { r->add_channels(static_cast<rpc::PubMessage::Channel>(99)); },
          "INVALID_ARGUMENT", "unknown channel 99");
  sub.Add("100000 keys", [](auto* r) { for (int i = 0; i < 100000; ++i) r->add_keys("k"); }, "INVALID_ARGUMENT",
          "at most 10000");
  sub.Add("subscriber_node_id of 3 bytes", [](auto* r) { r->set_subscriber_node_id("abc"); }, "INVALID_ARGUMENT",
          "subscriber_node_id must be 28 bytes");
  sub.AddTokens();
}

}  // namespace

std::vector<BadInput> GcsBadInputs(const Target& t) {
  std::vector<BadInput> out;
  NodeRows(t, &out);
  GroupAndActorRows(t, &out);
  KvAndPollRows(t, &out);
  return out;
}

std::vector<BadInput> RayletBadInputs(const Target& t) {
  std::vector<BadInput> out;
  auto verdict = [](const rpc::RequestWorkerLeaseReply& r) {
    return Outcome{"lease " + rpc::RequestWorkerLeaseReply::Outcome_Name(r.outcome()), r.message()};
  };
  auto lease = MakeRows(t, &out, kRaylet, "RequestWorkerLease", t.raylet_address, ValidLease());
  for (const BadQuantity& q : kBadQuantities) {
    double v = q.value;
    lease.AddJudged<rpc::RequestWorkerLeaseReply>(
        absl::StrCat(q.what, " CPU"), [v](auto* r) { (*r->mutable_spec()->mutable_resources())["CPU"] = v; },
        verdict, "lease INVALID", q.message);
  }
  lease.AddJudged<rpc::RequestWorkerLeaseReply>("TPU: 3", [](auto* r) { (*r->mutable_spec()->mutable_resources())["TPU"] = 3; },
                                                verdict, "lease INVALID", "not a valid TPU request");
  lease.AddJudged<rpc::RequestWorkerLeaseReply>("job_id of 9 bytes", [](auto* r) { r->mutable_spec()->set_job_id(Bytes(9, 'j')); },
                                                verdict, "lease INVALID", "spec.job_id");
  lease.AddJudged<rpc::RequestWorkerLeaseReply>("lease_id of 100 bytes", [](auto* r) { r->set_lease_id(Bytes(100, 'l')); },
                                                verdict, "lease INVALID", "lease_id must be 1 to 64 bytes");
  lease.AddJudged<rpc::RequestWorkerLeaseReply>("unknown TPU type in selector", [](auto* r) {
    (*r->mutable_spec()->mutable_label_selector())["manta.io/accelerator-type"] = "TPU-V99";
  }, verdict, "lease INVALID", "TPU-V99");
  lease.AddJudged<rpc::RequestWorkerLeaseReply>("malformed selector", [](auto* r) {
    (*r->mutable_spec()->mutable_label_selector())["k"] = "in(";
  }, verdict, "lease INVALID", "k");
  lease.AddTokens();

  auto prepare = MakeRows(t, &out, kRaylet, "PrepareBundles", t.raylet_address, ValidPrepare());
  prepare.AddQuantities("CPU in a bundle", [](auto* r, double v) { (*r->mutable_bundles(0)->mutable_resources())["CPU"] = v; });
  prepare.Add("group id of 4 bytes", [](auto* r) { r->mutable_bundles(0)->set_placement_group_id("abcd"); },
              "INVALID_ARGUMENT", "placement_group_id");
  prepare.Add("negative index", [](auto* r) { r->mutable_bundles(0)->set_index(-2); }, "INVALID_ARGUMENT",
              "negative");
  prepare.Add("no bundles", [](auto* r) { r->clear_bundles(); }, "INVALID_ARGUMENT", "no bundles");
  prepare.Add("unknown TPU type in selector", [](auto* r) {
    (*r->mutable_bundles(0)->mutable_label_selector())["manta.io/accelerator-type"] = "TPU-V99";
  }, "INVALID_ARGUMENT", "TPU-V99");
  prepare.AddTokens();

  auto drain = MakeRows(t, &out, kRaylet, "DrainRaylet", t.raylet_address, rpc::DrainRayletRequest());
  drain.Add("negative deadline", [](auto* r) { r->set_reason("x"), r->set_deadline_ms(-1); }, "INVALID_ARGUMENT",
            "negative");
  drain.AddTokens();
  return out;
}
// clang-format on

}  // namespace manta::testing
