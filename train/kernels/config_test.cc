#include "train/kernels/config.h"

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace manta::train {
namespace {

std::string BaseYaml() {
  std::ifstream in(std::string(MANTA_TRAIN_SOURCE_DIR) + "/configs/base.yml");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(TrainConfigTest, BaseLoadsWithOverrides) {
  auto c = ConfigFromYaml(
      BaseYaml(), {"model_name=tiny", "steps=7", "learning_rate=0.01", "ici_tensor_parallelism=2", "run_name=r1"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->steps, 7);
  EXPECT_EQ(c->model.emb_dim, 64);
  EXPECT_EQ(c->parallelism.ici_tensor, 2);
  EXPECT_DOUBLE_EQ(c->learning_rate, 0.01);
  EXPECT_EQ(c->schedule_steps, 7);
  EXPECT_EQ(c->run_name, "r1");
}

TEST(TrainConfigTest, LlamaPresetsHaveTheRealParameterCounts) {
  auto c8 = ConfigFromYaml(BaseYaml(), {"model_name=llama3-8b"});
  ASSERT_TRUE(c8.ok()) << c8.status();
  EXPECT_EQ(c8->model.ParamCount(), 8030261248LL);
  EXPECT_EQ(c8->model.num_kv_heads, 8);
  EXPECT_FLOAT_EQ(c8->model.rope_max_timescale, 500000.0f);
  auto c70 = ConfigFromYaml(BaseYaml(), {"model_name=llama3-70b"});
  ASSERT_TRUE(c70.ok()) << c70.status();
  EXPECT_EQ(c70->model.ParamCount(), 70553706496LL);
  auto c35 = ConfigFromYaml(BaseYaml(), {"model_name=manta-35m"});
  ASSERT_TRUE(c35.ok());
  EXPECT_GE(c35->model.ParamCount(), 25000000);
  EXPECT_LE(c35->model.ParamCount(), 50000000);
}

void ExpectErrorNames(const std::vector<std::string>& overrides, const std::string& key) {
  auto c = ConfigFromYaml(BaseYaml(), overrides);
  ASSERT_FALSE(c.ok()) << "accepted " << overrides.back();
  EXPECT_NE(std::string(c.status().message()).find(key), std::string::npos) << c.status();
}

TEST(TrainConfigTest, ErrorsNameTheKey) {
  ExpectErrorNames({"no_such_key=1"}, "no_such_key");
  ExpectErrorNames({"steps=abc"}, "steps");
  ExpectErrorNames({"steps=0"}, "steps");
  ExpectErrorNames({"per_device_batch_size=-1"}, "per_device_batch_size");
  ExpectErrorNames({"enable_checkpointing=maybe"}, "enable_checkpointing");
  ExpectErrorNames({"model_name=gpt5"}, "model_name");
  ExpectErrorNames({"dataset_type=c4"}, "dataset_type");
  ExpectErrorNames({"weight_dtype=bfloat16"}, "weight_dtype");
  ExpectErrorNames({"ici_fsdp_parallelism=0"}, "ici_fsdp_parallelism");
  ExpectErrorNames({"base_num_query_heads=6", "base_num_kv_heads=4"}, "base_num_kv_heads");
  ExpectErrorNames({"model_name=llama3-8b", "base_emb_dim=128"}, "base_emb_dim");
  ExpectErrorNames({"enable_checkpointing=true", "run_name="}, "run_name");
  ExpectErrorNames({"run_name=../x"}, "run_name");
  ExpectErrorNames({"steps"}, "steps");
}

TEST(TrainConfigTest, OverrideModelConfigAllowsChangingPresetKeys) {
  auto c = ConfigFromYaml(BaseYaml(), {"model_name=tiny", "override_model_config=true", "base_num_decoder_layers=1"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model.num_layers, 1);
}

TEST(TrainConfigTest, YamlSubset) {
  auto kv = ParseFlatYaml("a: 1 # comment\nb: \"x # y\"\n\n# only comment\nc: 'q'\n");
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_EQ((*kv)["a"], "1");
  EXPECT_EQ((*kv)["b"], "x # y");
  EXPECT_EQ((*kv)["c"], "q");
  EXPECT_FALSE(ParseFlatYaml("a:\n  b: 1\n").ok());
  EXPECT_FALSE(ParseFlatYaml("a: 1\na: 2\n").ok());
  EXPECT_FALSE(ParseFlatYaml("- x\n").ok());
}

TEST(TrainConfigTest, EverySizeIsBoundedAndEveryStringIsText) {
  // Past any machine: refused with the bound, never wrapped into a small
  // number by the memory estimate.
  for (const char* bad : {"max_target_length=1152921504606846976", "max_target_length=1000000000000",
                          "base_emb_dim=4194304", "base_num_decoder_layers=100000", "vocab_size=999999999",
                          "per_device_batch_size=1000000", "ici_fsdp_parallelism=1000000"}) {
    auto c = ConfigFromYaml(BaseYaml(), {bad});
    ASSERT_FALSE(c.ok()) << bad;
    const bool names_the_bound = c.status().message().find("at most") != std::string::npos ||
                                 c.status().message().find("from 1 to") != std::string::npos;
    EXPECT_TRUE(names_the_bound) << bad << ": " << c.status();
  }
  auto bytes = ConfigFromYaml(BaseYaml(), {"run_name=x\xff"});
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("'run_name': is not UTF-8 text"), std::string::npos) << bytes.status();
  EXPECT_FALSE(ConfigFromYaml(BaseYaml(), {"base_output_directory=/tmp/\xc3("}).ok());
  EXPECT_TRUE(ConfigFromYaml(BaseYaml(), {"run_name=caf\xc3\xa9"}).ok()) << "UTF-8 names are fine";
}
}  // namespace
}  // namespace manta::train
