#include "train/kernels/mesh.h"

#include "gtest/gtest.h"

namespace manta::train {
namespace {

DistributedEnv Env(int processes, int chips, int slices = 1, int pid = 0) {
  DistributedEnv env;
  env.num_processes = processes;
  env.chips_per_host = chips;
  env.num_slices = slices;
  env.process_id = pid;
  env.slice_id = pid / (processes / slices);
  return env;
}

ParallelismConfig Par(int64_t dd, int64_t df, int64_t dt, int64_t id, int64_t if_, int64_t it) {
  ParallelismConfig p;
  p.dcn_data = dd;
  p.dcn_fsdp = df;
  p.dcn_tensor = dt;
  p.ici_data = id;
  p.ici_fsdp = if_;
  p.ici_tensor = it;
  return p;
}

TEST(TrainMeshTest, FillsMinusOneAndLaysOutTensorMinor) {
  auto mesh = Mesh::Create(Par(-1, 1, 1, 1, -1, 2), Env(2, 4));
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->data(), 1);
  EXPECT_EQ(mesh->fsdp(), 4);
  EXPECT_EQ(mesh->tensor(), 2);
  EXPECT_EQ(mesh->Coord(3).tensor, 1);
  EXPECT_EQ(mesh->Coord(3).fsdp, 1);
  EXPECT_EQ(mesh->GroupMembers(kTensorAxis, 2), (std::vector<int>{2, 3}));
  EXPECT_EQ(mesh->GroupMembers(kFsdpAxis, 1), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(mesh->BatchShard(5), 2);
}

TEST(TrainMeshTest, DcnIsMajorAcrossSlices) {
  auto mesh = Mesh::Create(Par(1, 2, 1, 1, 2, 1), Env(2, 2, 2));
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->fsdp(), 4);
  for (int d = 0; d < 4; ++d) EXPECT_EQ(mesh->Coord(d).fsdp, d);
  EXPECT_EQ(mesh->Coord(2).dcn_fsdp, 1);
  EXPECT_EQ(mesh->SliceOf(2), 1);
}

TEST(TrainMeshTest, ProductMismatchNamesTheValues) {
  auto mesh = Mesh::Create(Par(1, 1, 1, 1, 2, 2), Env(1, 8));
  ASSERT_FALSE(mesh.ok());
  const std::string msg(mesh.status().message());
  EXPECT_NE(msg.find("ici_fsdp_parallelism=2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ici_tensor_parallelism=2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("8 devices per slice"), std::string::npos) << msg;
  auto dcn = Mesh::Create(Par(2, 1, 1, 1, -1, 1), Env(2, 2, 1));
  ASSERT_FALSE(dcn.ok());
  EXPECT_NE(std::string(dcn.status().message()).find("dcn_data_parallelism=2"), std::string::npos);
  auto fill = Mesh::Create(Par(1, 1, 1, -1, 3, 1), Env(1, 4));
  ASSERT_FALSE(fill.ok());
  EXPECT_NE(std::string(fill.status().message()).find("ici_data_parallelism"), std::string::npos);
}

TEST(TrainMeshTest, EnvValidation) {
  DistributedEnv env = Env(4, 1, 2, 3);
  EXPECT_TRUE(env.Validate().ok());
  env.slice_id = 0;
  EXPECT_FALSE(env.Validate().ok());
  EXPECT_FALSE(Env(3, 1, 2).Validate().ok());
}

}  // namespace
}  // namespace manta::train
