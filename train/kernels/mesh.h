// The distributed environment of one process and the device mesh.
//
// A job runs `num_processes` processes, each owning `chips_per_host`
// logical devices; processes are grouped into `num_slices` slices of equal
// size. Device ids are global: process p owns devices
// [p * chips_per_host, (p + 1) * chips_per_host).
//
// The mesh has MaxText's axes data, fsdp and tensor. Each axis is the
// product of a dcn part (across slices, major) and an ici part (inside a
// slice, minor). Within a slice devices are laid out data-major,
// tensor-minor, so tensor groups stay inside a process when they can.
//
//   auto mesh = Mesh::Create(config.parallelism, env);
//   int fsdp_rank = mesh->Coord(device).fsdp;
//   std::vector<int> peers = mesh->GroupMembers(kFsdpAxis, device);
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "train/kernels/config.h"

namespace manta::train {

// What `jax.distributed.initialize` is told on each host.
struct DistributedEnv {
  std::string coordinator_address = "127.0.0.1:0";  // host:port of process 0's rendezvous
  // Where this process's peers reach it; empty means the local address of
  // this host's connection to the coordinator.
  std::string host_address;
  int process_id = 0;
  int num_processes = 1;
  int slice_id = 0;
  int num_slices = 1;
  int chips_per_host = 1;

  int num_devices() const { return num_processes * chips_per_host; }
  int first_device() const { return process_id * chips_per_host; }

  // OK when the fields are consistent (ids in range, slices of equal size,
  // slice_id matching the process id); otherwise names the bad field.
  absl::Status Validate() const;
};

// Bits naming a set of mesh axes; a group spans the axes in its mask.
enum AxisMask : unsigned {
  kDataAxis = 1,
  kFsdpAxis = 2,
  kTensorAxis = 4,
  kBatchAxes = kDataAxis | kFsdpAxis,  // devices that hold different batch rows
  kAllAxes = kDataAxis | kFsdpAxis | kTensorAxis,
};

struct DeviceCoord {
  int data = 0, fsdp = 0, tensor = 0;
  int dcn_data = 0, dcn_fsdp = 0, dcn_tensor = 0;
  int ici_data = 0, ici_fsdp = 0, ici_tensor = 0;
};

// Immutable after Create; safe to share between threads.
class Mesh {
 public:
  // Resolves -1 entries and checks that the ici product equals the devices
  // per slice and the dcn product equals the slice count. Errors name the
  // config keys and their values.
  static absl::StatusOr<Mesh> Create(const ParallelismConfig& parallelism, const DistributedEnv& env);

  int num_devices() const { return num_devices_; }
  int chips_per_host() const { return chips_per_host_; }
  int data() const { return dcn_[0] * ici_[0]; }
  int fsdp() const { return dcn_[1] * ici_[1]; }
  int tensor() const { return dcn_[2] * ici_[2]; }
  int dcn(int axis) const { return dcn_[axis]; }
  int ici(int axis) const { return ici_[axis]; }
  // Number of distinct batch shards (data x fsdp).
  int batch_shards() const { return data() * fsdp(); }

  DeviceCoord Coord(int device) const;
  int ProcessOf(int device) const { return device / chips_per_host_; }
  int SliceOf(int device) const { return device / devices_per_slice_; }
  // Index of the batch rows this device holds: data-major, fsdp-minor.
  int BatchShard(int device) const;

  // Devices that agree with `device` on every axis outside `mask`, sorted by
  // id. For a single-axis mask the order is the axis index order.
  std::vector<int> GroupMembers(unsigned mask, int device) const;

  // e.g. "data 1 (dcn 1 x ici 1), fsdp 4 (dcn 2 x ici 2), tensor 1 (...)".
  std::string DebugString() const;

 private:
  int num_devices_ = 1;
  int chips_per_host_ = 1;
  int devices_per_slice_ = 1;
  int dcn_[3] = {1, 1, 1};
  int ici_[3] = {1, 1, 1};
};

}  // namespace manta::train
