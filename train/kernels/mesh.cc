#include "train/kernels/mesh.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace manta::train {
namespace {

// Replaces a single -1 with total / product(others); errors name the keys.
absl::Status Resolve(const char* scope, const char* const names[3], int64_t in[3], int total, const std::string& what,
                     int out[3]) {
  int64_t known = 1;
  int fill = -1;
  for (int i = 0; i < 3; ++i) {
    if (in[i] == -1) {
      if (fill != -1) {
        return absl::InvalidArgumentError(absl::StrCat("mesh: only one ", scope, " axis may be -1, but ", names[fill],
                                                       " and ", names[i], " both are"));
      }
      fill = i;
    } else {
      known *= in[i];
    }
  }
  if (fill != -1) {
    if (known <= 0 || total % known != 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("mesh: cannot fill %s=-1: %s=%d, %s=%d, %s=%d leave no integer share of the %d %s",
                          names[fill], names[0], in[0], names[1], in[1], names[2], in[2], total, what));
    }
    in[fill] = total / known;
  }
  if (in[0] * in[1] * in[2] != total) {
    return absl::InvalidArgumentError(absl::StrFormat("mesh: %s=%d * %s=%d * %s=%d = %d does not equal the %d %s",
                                                      names[0], in[0], names[1], in[1], names[2], in[2],
                                                      in[0] * in[1] * in[2], total, what));
  }
  for (int i = 0; i < 3; ++i) out[i] = static_cast<int>(in[i]);
  return absl::OkStatus();
}

}  // namespace

absl::Status DistributedEnv::Validate() const {
  if (num_processes < 1)
    return absl::InvalidArgumentError(absl::StrCat("num_processes must be >= 1, got ", num_processes));
  if (process_id < 0 || process_id >= num_processes) {
    return absl::InvalidArgumentError(absl::StrCat("process_id ", process_id, " is outside [0, ", num_processes, ")"));
  }
  if (chips_per_host < 1)
    return absl::InvalidArgumentError(absl::StrCat("chips_per_host must be >= 1, got ", chips_per_host));
  if (num_slices < 1 || num_processes % num_slices != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_slices ", num_slices, " must divide num_processes ", num_processes));
  }
  int per_slice = num_processes / num_slices;
  if (slice_id != process_id / per_slice) {
    return absl::InvalidArgumentError(absl::StrCat("slice_id ", slice_id, " does not match process_id ", process_id,
                                                   " (", per_slice,
                                                   " processes per slice, slices hold consecutive process ids)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Mesh> Mesh::Create(const ParallelismConfig& p, const DistributedEnv& env) {
  absl::Status valid = env.Validate();
  if (!valid.ok()) return valid;
  Mesh mesh;
  mesh.num_devices_ = env.num_devices();
  mesh.chips_per_host_ = env.chips_per_host;
  mesh.devices_per_slice_ = mesh.num_devices_ / env.num_slices;
  static const char* const kIci[3] = {"ici_data_parallelism", "ici_fsdp_parallelism", "ici_tensor_parallelism"};
  static const char* const kDcn[3] = {"dcn_data_parallelism", "dcn_fsdp_parallelism", "dcn_tensor_parallelism"};
  int64_t ici[3] = {p.ici_data, p.ici_fsdp, p.ici_tensor};
  int64_t dcn[3] = {p.dcn_data, p.dcn_fsdp, p.dcn_tensor};
  absl::Status s = Resolve("ici", kIci, ici, mesh.devices_per_slice_,
                           absl::StrFormat("devices per slice (chips_per_host %d x %d processes / %d slices)",
                                           env.chips_per_host, env.num_processes, env.num_slices),
                           mesh.ici_);
  if (!s.ok()) return s;
  s = Resolve("dcn", kDcn, dcn, env.num_slices, "slices (num_slices)", mesh.dcn_);
  if (!s.ok()) return s;
  return mesh;
}

DeviceCoord Mesh::Coord(int device) const {
  DeviceCoord c;
  int slice = device / devices_per_slice_;
  int local = device % devices_per_slice_;
  c.ici_tensor = local % ici_[2];
  c.ici_fsdp = (local / ici_[2]) % ici_[1];
  c.ici_data = local / (ici_[2] * ici_[1]);
  c.dcn_tensor = slice % dcn_[2];
  c.dcn_fsdp = (slice / dcn_[2]) % dcn_[1];
  c.dcn_data = slice / (dcn_[2] * dcn_[1]);
  c.data = c.dcn_data * ici_[0] + c.ici_data;
  c.fsdp = c.dcn_fsdp * ici_[1] + c.ici_fsdp;
  c.tensor = c.dcn_tensor * ici_[2] + c.ici_tensor;
  return c;
}

int Mesh::BatchShard(int device) const {
  DeviceCoord c = Coord(device);
  return c.data * fsdp() + c.fsdp;
}

std::vector<int> Mesh::GroupMembers(unsigned mask, int device) const {
  DeviceCoord me = Coord(device);
  std::vector<int> members;
  for (int d = 0; d < num_devices_; ++d) {
    DeviceCoord c = Coord(d);
    if (!(mask & kDataAxis) && c.data != me.data) continue;
    if (!(mask & kFsdpAxis) && c.fsdp != me.fsdp) continue;
    if (!(mask & kTensorAxis) && c.tensor != me.tensor) continue;
    members.push_back(d);
  }
  return members;
}

std::string Mesh::DebugString() const {
  return absl::StrFormat("data %d (dcn %d x ici %d), fsdp %d (dcn %d x ici %d), tensor %d (dcn %d x ici %d)", data(),
                         dcn_[0], ici_[0], fsdp(), dcn_[1], ici_[1], tensor(), dcn_[2], ici_[2]);
}

}  // namespace manta::train
