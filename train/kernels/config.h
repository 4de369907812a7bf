// Training configuration: a MaxText-style flat YAML base file plus
// `key=value` overrides.
//
//   absl::StatusOr<Config> config =
//       LoadConfig({"train/kernels/configs/base.yml", "model_name=tiny", "steps=5"});
//
// Every key must appear in the base file; an override naming any other key,
// a value of the wrong type, or values that contradict each other is an
// error whose message names the key.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace manta::train {

// Shape of a Llama-style decoder.
struct ModelShape {
  int64_t emb_dim = 0;
  int64_t num_query_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t mlp_dim = 0;
  int64_t num_layers = 0;
  int64_t vocab_size = 0;
  float norm_eps = 1e-5f;
  float rope_max_timescale = 10000.0f;

  // Total number of trainable parameters.
  int64_t ParamCount() const;
};

// The per-axis parallelism; -1 means "fill with the remaining devices".
struct ParallelismConfig {
  int64_t dcn_data = -1, dcn_fsdp = 1, dcn_tensor = 1;
  int64_t ici_data = 1, ici_fsdp = -1, ici_tensor = 1;
};

struct Config {
  std::string run_name;
  std::string model_name;
  ModelShape model;

  double per_device_batch_size = 0;
  int64_t max_target_length = 0;
  int64_t steps = 0;

  double learning_rate = 0;
  double warmup_steps_fraction = 0;
  double cosine_final_fraction = 0;
  int64_t schedule_steps = 0;  // learning_rate_schedule_steps, -1 resolved to steps
  double adam_b1 = 0, adam_b2 = 0, adam_eps = 0, adam_weight_decay = 0;
  double gradient_clipping_threshold = 0;

  ParallelismConfig parallelism;

  std::string dataset_type;    // synthetic | text
  std::string dataset_path;    // text: a file, or a folder of text files
  std::string tokenizer_path;  // text: a saved tokenizer; empty trains one on the corpus
  uint64_t data_shuffle_seed = 0;
  uint64_t init_weights_seed = 0;

  std::string load_parameters_path;        // serving: a checkpoint step folder
  int64_t max_prefill_predict_length = 0;  // serving: the longest prompt
  int64_t prometheus_port = -1;            // serving: metrics port, -1 for none
  std::string base_output_directory;
  bool enable_checkpointing = false;
  int64_t checkpoint_period = 0;
  std::string metrics_file;
  // Elastic runs: keep the global batch of the largest group at every size
  // (devices of a smaller group accumulate gradients over more rows), so a
  // resized run trains the same model as one that never was.
  bool elastic_fixed_global_batch = true;
  // Sum gradients over micro-batches and devices in double precision, so
  // the model trained does not depend on how the batch is split (elastic
  // runs with a fixed global batch turn it on).
  bool exact_gradient_sums = false;
};

// Parses the flat `key: value` YAML subset: one pair per line, `#` comments,
// optional single or double quotes around scalars. Nested maps and lists are
// rejected with the line number.
absl::StatusOr<std::map<std::string, std::string>> ParseFlatYaml(const std::string& text);

// Builds a Config from a base YAML file and `key=value` overrides, applying
// the `model_name` preset. args[0] is the path of the base file.
absl::StatusOr<Config> LoadConfig(const std::vector<std::string>& args);

// As LoadConfig, with the base file's text given directly.
absl::StatusOr<Config> ConfigFromYaml(const std::string& yaml_text, const std::vector<std::string>& overrides);

// Names of the model presets accepted by `model_name`.
std::vector<std::string> ModelPresetNames();

// Rows of a device's `rows` of the global batch it takes at once (its
// micro-batch): per_device_batch_size when it is whole and divides them,
// else all of them.
int64_t MicroRows(const Config& config, int64_t rows);
// The global batch of per_device_batch_size on each of `devices`;
// InvalidArgument (naming the key) when that is not a whole number.
absl::StatusOr<int64_t> GlobalBatch(const Config& config, int devices);

}  // namespace manta::train
