// Collectives on sub-groups of the mesh: in memory inside a process and
// through gloo between processes (here two Communicators in one test
// process, each with its own device threads).
#include "train/kernels/communicator.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iostream>
#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/process.h"
#include "gtest/gtest.h"
#include "train/kernels/collective_error.h"
#include "train/kernels/rendezvous.h"

namespace manta::train {
namespace {

int FreePort() {
  auto port = PickCoordinatorPort();
  EXPECT_TRUE(port.ok()) << port.status();
  return port.value_or(0);
}

ParallelismConfig Par(int64_t fsdp, int64_t tensor, int64_t dcn_fsdp = 1) {
  ParallelismConfig p;
  p.dcn_data = 1;
  p.dcn_fsdp = dcn_fsdp;
  p.ici_data = 1;
  p.ici_fsdp = fsdp;
  p.ici_tensor = tensor;
  return p;
}

// Runs `body(comm, device)` on one thread per device of every process.
void RunMesh(int processes, int chips, const ParallelismConfig& par,
             const std::function<void(Communicator&, int)>& body, int slices = 1) {
  const std::string address = "127.0.0.1:" + std::to_string(FreePort());
  // Every process keeps its communicator until all are done: one that
  // closes its pairs right after the last barrier can break a peer still
  // taking that barrier's last message.
  absl::BlockingCounter all_done(processes);
  absl::Notification release;
  std::vector<std::thread> procs;
  for (int p = 0; p < processes; ++p) {
    procs.emplace_back([&, p] {
      // Counts this process done once, even when it stops on a failure.
      struct Arrival {
        absl::BlockingCounter* counter;
        bool counted = false;
        void AndWait(absl::Notification* release) {
          counted = true;
          counter->DecrementCount();
          release->WaitForNotification();
        }
        ~Arrival() {
          if (!counted) counter->DecrementCount();
        }
      } arrival{&all_done};
      DistributedEnv env;
      env.coordinator_address = address;
      env.process_id = p;
      env.num_processes = processes;
      env.chips_per_host = chips;
      env.num_slices = slices;
      env.slice_id = p / (processes / slices);
      auto mesh = Mesh::Create(par, env);
      ASSERT_TRUE(mesh.ok()) << mesh.status();
      auto comm = Communicator::Create(*mesh, env, absl::Seconds(30));
      ASSERT_TRUE(comm.ok()) << comm.status();
      std::vector<std::thread> devices;
      for (int d = env.first_device(); d < env.first_device() + chips; ++d) {
        devices.emplace_back([&, d] { body(**comm, d); });
      }
      for (auto& t : devices) t.join();
      arrival.AndWait(&release);  // `comm` lives until every process is here
    });
  }
  all_done.Wait();
  release.Notify();
  for (auto& t : procs) t.join();
}

void CheckAllOps(Communicator& comm, int device) {
  const Mesh& mesh = comm.mesh();
  const int n = 1000;
  // AllReduce over everything: sum of device ids at every position.
  std::vector<float> x(n, static_cast<float>(device));
  comm.AllReduce(kAllAxes, device, x.data(), n);
  const float all = mesh.num_devices() * (mesh.num_devices() - 1) / 2.0f;
  EXPECT_EQ(x[0], all);
  EXPECT_EQ(x[n - 1], all);
  // Tensor group: only the devices that share fsdp index.
  std::vector<int> tg = mesh.GroupMembers(kTensorAxis, device);
  float tsum = 0;
  for (int d : tg) tsum += d;
  std::vector<float> t(n, static_cast<float>(device));
  comm.AllReduce(kTensorAxis, device, t.data(), n);
  EXPECT_EQ(t[7], tsum);
  // AllGather and ReduceScatter over fsdp, repeated back to back on the
  // same buffers with changing values.
  std::vector<int> fg = mesh.GroupMembers(kFsdpAxis, device);
  const int g = static_cast<int>(fg.size());
  const int me = comm.IndexInGroup(kFsdpAxis, device);
  std::vector<float> shard(n), full(n * g), part(n);
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < n; ++i) shard[i] = device * 1000.0f + i + round;
    comm.AllGather(kFsdpAxis, device, shard.data(), n, full.data());
    for (int k = 0; k < g; ++k) {
      ASSERT_EQ(full[k * n + 5], fg[k] * 1000.0f + 5 + round) << "round " << round;
    }
    // Part k of every member's input holds k * 100 + its own values: each
    // member must get the sum of its own part, not another's.
    for (int i = 0; i < n * g; ++i) full[i] = static_cast<float>((i / n) * 100 + i % n + device + round);
    comm.ReduceScatter(kFsdpAxis, device, full.data(), n, part.data());
    float dsum = 0;
    for (int d : fg) dsum += d;
    ASSERT_EQ(part[3], g * (me * 100.0f + 3.0f + round) + dsum) << "round " << round;
    // The same in double.
    std::vector<double> wide(n * g), wide_part(n);
    for (int i = 0; i < n * g; ++i) wide[i] = (i / n) * 100.0 + i % n + device + round + 0.25;
    comm.ReduceScatter(kFsdpAxis, device, wide.data(), n, wide_part.data());
    ASSERT_EQ(wide_part[3], g * (me * 100.0 + 3.25 + round) + dsum) << "round " << round;
  }
  std::vector<double> wide_sum(n, device + 0.5);
  comm.AllReduce(kAllAxes, device, wide_sum.data(), n);
  EXPECT_EQ(wide_sum[n - 1], all + 0.5 * mesh.num_devices());
  EXPECT_EQ(me, std::find(fg.begin(), fg.end(), device) - fg.begin());
  // Broadcast from the group's member 1.
  std::vector<float> b(n, static_cast<float>(device));
  comm.Broadcast(kFsdpAxis, device, b.data(), n, 1);
  EXPECT_EQ(b[9], static_cast<float>(fg[1]));
  comm.Barrier(kAllAxes, device);
  EXPECT_GT(comm.SecondsInCollectives(device), 0.0);
}

TEST(TrainCommunicatorTest, OneProcessFourDevicesStaysInMemory) { RunMesh(1, 4, Par(2, 2), CheckAllOps); }

TEST(TrainCommunicatorTest, TwoProcessesFsdpAcrossTensorInside) { RunMesh(2, 2, Par(2, 2), CheckAllOps); }

TEST(TrainCommunicatorTest, TwoProcessesFsdpOverAllFourDevices) { RunMesh(2, 2, Par(4, 1), CheckAllOps); }

// Four processes: the ring passes each part's running sum through every
// process before it lands.
TEST(TrainCommunicatorTest, FourProcessesFsdpAcross) { RunMesh(4, 1, Par(4, 1), CheckAllOps); }

TEST(TrainCommunicatorTest, FourProcessesFsdpAcrossTensorInside) { RunMesh(4, 2, Par(4, 2), CheckAllOps); }

TEST(TrainCommunicatorTest, ThreeProcesses) { RunMesh(3, 1, Par(3, 1), CheckAllOps); }

// fsdp 4 = dcn 2 x ici 2 over 2 slices of 2 processes: the exchange runs
// inside each slice and then across slices.
TEST(TrainCommunicatorTest, TwoSlicesOfTwoProcessesGoHierarchical) {
  RunMesh(4, 1, Par(2, 1, 2), CheckAllOps, /*slices=*/2);
}

TEST(TrainCommunicatorTest, UnreachableCoordinatorIsAnError) {
  DistributedEnv env;
  env.coordinator_address = "127.0.0.1:" + std::to_string(FreePort());
  env.process_id = 1;
  env.num_processes = 2;
  auto mesh = Mesh::Create(Par(2, 1), env);
  ASSERT_TRUE(mesh.ok());
  auto comm = Communicator::Create(*mesh, env, absl::Milliseconds(300));
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kUnavailable);
}

// gloo's pairs listen on ephemeral ports and take the first connection that
// arrives, so nothing of ours may ever retry a connection into that range:
// coordinators live below it.
TEST(TrainCommunicatorTest, CoordinatorPortsAreFreeAndNeverEphemeral) {
  const int ephemeral = EphemeralPortLow();
  for (int i = 0; i < 200; ++i) {
    auto port = PickCoordinatorPort();
    ASSERT_TRUE(port.ok()) << port.status();
    EXPECT_GE(*port, 1024);
    EXPECT_LT(*port, ephemeral);
  }
  auto port = PickCoordinatorPort();
  ASSERT_TRUE(port.ok());
  auto server = RendezvousServer::Start(*port);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->port(), *port);
}

TEST(TrainCommunicatorTest, LoopbackListenersTakeAnAddressOfTheirOwn) {
  for (int i = 0; i < 50; ++i) {
    const std::string a = GlooListenAddress("127.0.0.1");
    EXPECT_TRUE(absl::StartsWith(a, "127.")) << a;
    EXPECT_FALSE(absl::StartsWith(a, "127.0.")) << a;
  }
  EXPECT_EQ(GlooListenAddress("10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(GlooListenAddress("tpu-host-0"), "tpu-host-0");
  EXPECT_EQ(GlooListenAddress("::1"), "::1");
}

// Another program's client knocking on every ephemeral port of 127.0.0.1
// (as one retrying a server that has gone does, on whatever port the kernel
// handed on) cannot take a peer's place in a group forming on this host.
TEST(TrainCommunicatorTest, AStrayClientOnLoopbackCannotTakeAPeersPlace) {
  int low = 32768, high = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> accepted{0};
  std::thread stray([&] {
    while (!stop) {
      for (int port = low; port <= high && !stop; ++port) {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(static_cast<uint16_t>(port));
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) ++accepted;
        ::close(fd);
      }
    }
  });
  for (int round = 0; round < 3; ++round) RunMesh(4, 2, Par(4, 2), CheckAllOps);
  stop = true;
  stray.join();
  std::cout << "the stray client's connections that were accepted: " << accepted << "\n";
}

// A join whose run was aborted stops knocking on the coordinator at once
// rather than until its timeout.
TEST(TrainCommunicatorTest, AnAbortStopsAJoinStillLookingForItsCoordinator) {
  DistributedEnv env;
  env.coordinator_address = "127.0.0.1:" + std::to_string(FreePort());  // nobody listens
  env.process_id = 1;
  env.num_processes = 2;
  auto mesh = Mesh::Create(Par(2, 1), env);
  ASSERT_TRUE(mesh.ok());
  std::unique_ptr<Communicator> comm = Communicator::Make(*mesh, env);
  absl::Status joined;
  std::thread join([&] { joined = comm->Connect(absl::Seconds(30)); });
  comm->Abort("the attempt ended");
  join.join();
  EXPECT_EQ(joined.code(), absl::StatusCode::kCancelled) << joined;
  EXPECT_NE(joined.message().find("the attempt ended"), std::string::npos) << joined;
}

// Whether thread `tid` of this process is blocked in a wait (state S).
bool BlockedInAWait(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
  const std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::vector<absl::string_view> fields = ProcStatFields(s);
  return !fields.empty() && fields[0] == "S";
}

// A ring reduce-scatter waiting for a peer that never sends ends (throws)
// when the peer aborts, and when its own process aborts from another
// thread, once the ring's thread is blocked in its wait. Devices 0 and 1
// are process 0's, devices 2 and 3 process 1's; fsdp pairs 0 with 2. The
// communicators' timeout is 30 s: a wait that only the timeout ended would
// take that long, so the call must end well before. (An abort while the
// bytes of a part are moving takes the other path in NetGroup::Abort; gloo
// gives a test no way to hold a transfer halfway.)
void AbortDuringAReduceScatter(int aborter) {
  std::atomic<pid_t> waiting{0};
  RunMesh(2, 2, Par(2, 2), [&](Communicator& comm, int device) {
    if (device == 0) {
      std::vector<double> in(2 * 1000, 1.0), out(1000);
      const absl::Time start = absl::Now();
      waiting = gettid();
      EXPECT_THROW(comm.ReduceScatter(kFsdpAxis, device, in.data(), 1000, out.data()), CollectiveError);
      EXPECT_LT(absl::Now() - start, absl::Seconds(15));
      return;
    }
    if (device != aborter) return;
    PollUntil([&] { return waiting != 0 && BlockedInAWait(waiting); }, absl::Now() + absl::Seconds(20));
    comm.Abort("device " + std::to_string(aborter) + " aborts");
  });
}

TEST(TrainCommunicatorTest, APeersAbortEndsAReduceScatterWaitingForIt) { AbortDuringAReduceScatter(2); }

TEST(TrainCommunicatorTest, AnAbortInTheProcessEndsItsReduceScatter) { AbortDuringAReduceScatter(1); }

}  // namespace
}  // namespace manta::train
