#include "train/kernels/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/utf8.h"

namespace manta::train {
namespace {

using Preset = std::map<std::string, std::string>;

// Model presets, as MaxText's configs/models/*.yml set them.
const std::map<std::string, Preset>& Presets() {
  static const auto* presets = new std::map<std::string, Preset>{
      {"default", {}},
      {"tiny",
       {{"base_emb_dim", "64"},
        {"base_num_query_heads", "8"},
        {"base_num_kv_heads", "4"},
        {"base_mlp_dim", "128"},
        {"base_num_decoder_layers", "2"},
        {"head_dim", "8"},
        {"vocab_size", "256"}}},
      {"manta-35m",
       {{"base_emb_dim", "512"},
        {"base_num_query_heads", "8"},
        {"base_num_kv_heads", "4"},
        {"base_mlp_dim", "1536"},
        {"base_num_decoder_layers", "8"},
        {"head_dim", "64"},
        {"vocab_size", "8192"}}},
      {"llama2-7b",
       {{"base_emb_dim", "4096"},
        {"base_num_query_heads", "32"},
        {"base_num_kv_heads", "32"},
        {"base_mlp_dim", "11008"},
        {"base_num_decoder_layers", "32"},
        {"head_dim", "128"},
        {"vocab_size", "32000"},
        {"normalization_layer_epsilon", "1.0e-5"},
        {"rope_max_timescale", "10000"}}},
      {"llama3-8b",
       {{"base_emb_dim", "4096"},
        {"base_num_query_heads", "32"},
        {"base_num_kv_heads", "8"},
        {"base_mlp_dim", "14336"},
        {"base_num_decoder_layers", "32"},
        {"head_dim", "128"},
        {"vocab_size", "128256"},
        {"normalization_layer_epsilon", "1.0e-5"},
        {"rope_max_timescale", "500000"}}},
      {"llama3-70b",
       {{"base_emb_dim", "8192"},
        {"base_num_query_heads", "64"},
        {"base_num_kv_heads", "8"},
        {"base_mlp_dim", "28672"},
        {"base_num_decoder_layers", "80"},
        {"head_dim", "128"},
        {"vocab_size", "128256"},
        {"normalization_layer_epsilon", "1.0e-5"},
        {"rope_max_timescale", "500000"}}},
  };
  return *presets;
}

absl::Status KeyError(const std::string& key, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("config key '", key, "': ", what));
}

std::string Unquote(std::string v) {
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) {
    return v.substr(1, v.size() - 2);
  }
  return v;
}

// Typed reads from the merged key/value map; each error names the key.
class Reader {
 public:
  explicit Reader(const std::map<std::string, std::string>& kv) : kv_(kv) {}

  absl::Status Int(const std::string& key, int64_t* out) const {
    if (!absl::SimpleAtoi(Get(key), out)) return KeyError(key, "expected an integer, got '" + Get(key) + "'");
    return absl::OkStatus();
  }
  absl::Status Double(const std::string& key, double* out) const {
    if (!absl::SimpleAtod(Get(key), out)) return KeyError(key, "expected a number, got '" + Get(key) + "'");
    return absl::OkStatus();
  }
  absl::Status Bool(const std::string& key, bool* out) const {
    std::string v = absl::AsciiStrToLower(Get(key));
    if (v == "true")
      *out = true;
    else if (v == "false")
      *out = false;
    else
      return KeyError(key, "expected true or false, got '" + Get(key) + "'");
    return absl::OkStatus();
  }
  std::string String(const std::string& key) const { return Get(key); }

 private:
  std::string Get(const std::string& key) const {
    auto it = kv_.find(key);
    return it == kv_.end() ? "" : it->second;
  }
  const std::map<std::string, std::string>& kv_;
};

absl::Status Positive(const std::string& key, double v) {
  if (!(v > 0)) return KeyError(key, absl::StrCat("must be positive, got ", v));
  return absl::OkStatus();
}

// Positive and at most `max`: every size the memory estimate multiplies is
// bounded, so no product of them can overflow.
absl::Status InRange(const std::string& key, double v, int64_t max) {
  RETURN_IF_ERROR(Positive(key, v));
  if (v > static_cast<double>(max)) return KeyError(key, absl::StrCat("must be at most ", max, ", got ", v));
  return absl::OkStatus();
}

// Strings become file names, protobuf fields and log lines: UTF-8 only, no NUL.
absl::Status Text(const std::string& key, const std::string& v) {
  if (!IsValidUtf8(v) || v.find('\0') != std::string::npos) {
    return KeyError(key, absl::StrCat("is not UTF-8 text: '", PrintableAscii(v, 80), "'"));
  }
  return absl::OkStatus();
}

absl::Status ReadAll(const Reader& r, Config* c) {
  c->run_name = r.String("run_name");
  c->model_name = r.String("model_name");
  ModelShape& m = c->model;
  RETURN_IF_ERROR(r.Int("base_emb_dim", &m.emb_dim));
  RETURN_IF_ERROR(r.Int("base_num_query_heads", &m.num_query_heads));
  RETURN_IF_ERROR(r.Int("base_num_kv_heads", &m.num_kv_heads));
  RETURN_IF_ERROR(r.Int("base_mlp_dim", &m.mlp_dim));
  RETURN_IF_ERROR(r.Int("base_num_decoder_layers", &m.num_layers));
  RETURN_IF_ERROR(r.Int("head_dim", &m.head_dim));
  RETURN_IF_ERROR(r.Int("vocab_size", &m.vocab_size));
  double d = 0;
  RETURN_IF_ERROR(r.Double("normalization_layer_epsilon", &d));
  m.norm_eps = static_cast<float>(d);
  RETURN_IF_ERROR(r.Double("rope_max_timescale", &d));
  m.rope_max_timescale = static_cast<float>(d);
  for (const char* key : {"weight_dtype", "dtype"}) {
    if (r.String(key) != "float32") return KeyError(key, "only float32 is supported, got '" + r.String(key) + "'");
  }
  RETURN_IF_ERROR(r.Double("per_device_batch_size", &c->per_device_batch_size));
  RETURN_IF_ERROR(r.Int("max_target_length", &c->max_target_length));
  RETURN_IF_ERROR(r.Int("steps", &c->steps));
  RETURN_IF_ERROR(r.Double("learning_rate", &c->learning_rate));
  RETURN_IF_ERROR(r.Double("warmup_steps_fraction", &c->warmup_steps_fraction));
  RETURN_IF_ERROR(r.Double("cosine_learning_rate_final_fraction", &c->cosine_final_fraction));
  RETURN_IF_ERROR(r.Int("learning_rate_schedule_steps", &c->schedule_steps));
  RETURN_IF_ERROR(r.Double("adam_b1", &c->adam_b1));
  RETURN_IF_ERROR(r.Double("adam_b2", &c->adam_b2));
  RETURN_IF_ERROR(r.Double("adam_eps", &c->adam_eps));
  RETURN_IF_ERROR(r.Double("adam_weight_decay", &c->adam_weight_decay));
  RETURN_IF_ERROR(r.Double("gradient_clipping_threshold", &c->gradient_clipping_threshold));
  ParallelismConfig& p = c->parallelism;
  RETURN_IF_ERROR(r.Int("dcn_data_parallelism", &p.dcn_data));
  RETURN_IF_ERROR(r.Int("dcn_fsdp_parallelism", &p.dcn_fsdp));
  RETURN_IF_ERROR(r.Int("dcn_tensor_parallelism", &p.dcn_tensor));
  RETURN_IF_ERROR(r.Int("ici_data_parallelism", &p.ici_data));
  RETURN_IF_ERROR(r.Int("ici_fsdp_parallelism", &p.ici_fsdp));
  RETURN_IF_ERROR(r.Int("ici_tensor_parallelism", &p.ici_tensor));
  c->dataset_type = r.String("dataset_type");
  c->dataset_path = r.String("dataset_path");
  c->tokenizer_path = r.String("tokenizer_path");
  int64_t seed = 0;
  RETURN_IF_ERROR(r.Int("data_shuffle_seed", &seed));
  c->data_shuffle_seed = static_cast<uint64_t>(seed);
  RETURN_IF_ERROR(r.Int("init_weights_seed", &seed));
  c->init_weights_seed = static_cast<uint64_t>(seed);
  c->base_output_directory = r.String("base_output_directory");
  c->load_parameters_path = r.String("load_parameters_path");
  RETURN_IF_ERROR(r.Int("max_prefill_predict_length", &c->max_prefill_predict_length));
  RETURN_IF_ERROR(r.Int("prometheus_port", &c->prometheus_port));
  RETURN_IF_ERROR(r.Bool("enable_checkpointing", &c->enable_checkpointing));
  RETURN_IF_ERROR(r.Int("checkpoint_period", &c->checkpoint_period));
  c->metrics_file = r.String("metrics_file");
  RETURN_IF_ERROR(r.Bool("elastic_fixed_global_batch", &c->elastic_fixed_global_batch));
  RETURN_IF_ERROR(r.Bool("exact_gradient_sums", &c->exact_gradient_sums));
  return absl::OkStatus();
}

absl::Status Validate(Config* c) {
  const ModelShape& m = c->model;
  for (const auto& [key, v] : {std::pair<const char*, const std::string*>{"run_name", &c->run_name},
                               {"model_name", &c->model_name},
                               {"dataset_type", &c->dataset_type},
                               {"dataset_path", &c->dataset_path},
                               {"tokenizer_path", &c->tokenizer_path},
                               {"load_parameters_path", &c->load_parameters_path},
                               {"base_output_directory", &c->base_output_directory},
                               {"metrics_file", &c->metrics_file}}) {
    RETURN_IF_ERROR(Text(key, *v));
  }
  RETURN_IF_ERROR(InRange("base_emb_dim", m.emb_dim, 1 << 20));
  RETURN_IF_ERROR(InRange("base_num_query_heads", m.num_query_heads, 1 << 12));
  RETURN_IF_ERROR(InRange("base_num_kv_heads", m.num_kv_heads, 1 << 12));
  RETURN_IF_ERROR(InRange("base_mlp_dim", m.mlp_dim, 1 << 20));
  RETURN_IF_ERROR(InRange("base_num_decoder_layers", m.num_layers, 1 << 12));
  RETURN_IF_ERROR(InRange("head_dim", m.head_dim, 1 << 12));
  RETURN_IF_ERROR(InRange("vocab_size", m.vocab_size, 1 << 24));
  RETURN_IF_ERROR(Positive("normalization_layer_epsilon", m.norm_eps));
  RETURN_IF_ERROR(Positive("rope_max_timescale", m.rope_max_timescale));
  if (m.head_dim % 2 != 0) return KeyError("head_dim", "must be even for rotary embeddings");
  if (m.num_query_heads % m.num_kv_heads != 0) {
    return KeyError("base_num_kv_heads",
                    absl::StrCat("must divide base_num_query_heads (", m.num_query_heads, "), got ", m.num_kv_heads));
  }
  RETURN_IF_ERROR(InRange("per_device_batch_size", c->per_device_batch_size, 1 << 16));
  RETURN_IF_ERROR(InRange("max_target_length", c->max_target_length, 1 << 20));
  RETURN_IF_ERROR(InRange("steps", c->steps, int64_t{1} << 40));
  RETURN_IF_ERROR(Positive("learning_rate", c->learning_rate));
  if (c->warmup_steps_fraction < 0 || c->warmup_steps_fraction > 1) {
    return KeyError("warmup_steps_fraction", "must be in [0, 1]");
  }
  if (c->cosine_final_fraction < 0 || c->cosine_final_fraction > 1) {
    return KeyError("cosine_learning_rate_final_fraction", "must be in [0, 1]");
  }
  if (c->schedule_steps == -1) c->schedule_steps = c->steps;
  RETURN_IF_ERROR(Positive("learning_rate_schedule_steps", c->schedule_steps));
  if (c->adam_b1 < 0 || c->adam_b1 >= 1) return KeyError("adam_b1", "must be in [0, 1)");
  if (c->adam_b2 < 0 || c->adam_b2 >= 1) return KeyError("adam_b2", "must be in [0, 1)");
  RETURN_IF_ERROR(Positive("adam_eps", c->adam_eps));
  if (c->adam_weight_decay < 0) return KeyError("adam_weight_decay", "must not be negative");
  if (c->gradient_clipping_threshold < 0) {
    return KeyError("gradient_clipping_threshold", "must not be negative (0 disables clipping)");
  }
  const std::pair<const char*, int64_t> axes[] = {
      {"dcn_data_parallelism", c->parallelism.dcn_data},     {"dcn_fsdp_parallelism", c->parallelism.dcn_fsdp},
      {"dcn_tensor_parallelism", c->parallelism.dcn_tensor}, {"ici_data_parallelism", c->parallelism.ici_data},
      {"ici_fsdp_parallelism", c->parallelism.ici_fsdp},     {"ici_tensor_parallelism", c->parallelism.ici_tensor}};
  for (const auto& [key, v] : axes) {
    if (v == 0 || v < -1 || v > (1 << 16)) {
      return KeyError(key, absl::StrCat("must be -1 or from 1 to 65536, got ", v));
    }
  }
  if (c->dataset_type != "synthetic" && c->dataset_type != "text") {
    return KeyError("dataset_type", "must be 'synthetic' or 'text', got '" + c->dataset_type + "'");
  }
  if (c->dataset_type == "text") {
    if (c->dataset_path.empty()) return KeyError("dataset_path", "must be set when dataset_type is 'text'");
    if (c->model.vocab_size < 257) {
      return KeyError("vocab_size", absl::StrCat("must be at least 257 (256 bytes and end-of-text) when "
                                                 "dataset_type is 'text', got ",
                                                 c->model.vocab_size));
    }
  }
  RETURN_IF_ERROR(InRange("max_prefill_predict_length", c->max_prefill_predict_length, 1 << 20));
  if (c->prometheus_port < -1 || c->prometheus_port > 65535) {
    return KeyError("prometheus_port", absl::StrCat("must be a port or -1, got ", c->prometheus_port));
  }
  if (c->enable_checkpointing) {
    RETURN_IF_ERROR(Positive("checkpoint_period", c->checkpoint_period));
    if (c->run_name.empty()) return KeyError("run_name", "must be set when enable_checkpointing is true");
    if (c->base_output_directory.empty()) {
      return KeyError("base_output_directory", "must be set when enable_checkpointing is true");
    }
  }
  if (c->run_name.find('/') != std::string::npos || c->run_name == ".." || c->run_name == ".") {
    return KeyError("run_name", "must be a plain name, got '" + PrintableAscii(c->run_name, 80) + "'");
  }
  return absl::OkStatus();
}

}  // namespace

int64_t ModelShape::ParamCount() const {
  const int64_t attn = emb_dim * head_dim * (2 * num_query_heads + 2 * num_kv_heads);
  const int64_t mlp = 3 * emb_dim * mlp_dim;
  return 2 * vocab_size * emb_dim + num_layers * (attn + mlp + 2 * emb_dim) + emb_dim;
}

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> names;
  for (const auto& [name, preset] : Presets()) names.push_back(name);
  return names;
}

absl::StatusOr<std::map<std::string, std::string>> ParseFlatYaml(const std::string& text) {
  std::map<std::string, std::string> kv;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    // Strip a comment that is not inside quotes.
    char quote = 0;
    for (size_t i = 0; i < line.size(); ++i) {
      char ch = line[i];
      if (quote) {
        if (ch == quote) quote = 0;
      } else if (ch == '"' || ch == '\'') {
        quote = ch;
      } else if (ch == '#') {
        line.resize(i);
        break;
      }
    }
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    if (line[0] == ' ' || line[0] == '\t' || absl::StripAsciiWhitespace(line)[0] == '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("yaml line ", line_no, ": only flat 'key: value' pairs are supported"));
    }
    size_t colon = line.find(':');
    if (colon == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("yaml line ", line_no, ": expected 'key: value'"));
    }
    std::string key(absl::StripAsciiWhitespace(line.substr(0, colon)));
    std::string value(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    if (value.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("yaml line ", line_no, ": key '", key, "' has no value (nested maps are not supported)"));
    }
    if (kv.count(key)) {
      return absl::InvalidArgumentError(absl::StrCat("yaml line ", line_no, ": duplicate key '", key, "'"));
    }
    kv[key] = Unquote(value);
  }
  return kv;
}

absl::StatusOr<Config> ConfigFromYaml(const std::string& yaml_text, const std::vector<std::string>& overrides) {
  ASSIGN_OR_RETURN(auto kv, ParseFlatYaml(yaml_text));
  std::map<std::string, std::string> set_by_user;
  for (const std::string& arg : overrides) {
    size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError("override '" + arg + "' is not of the form key=value");
    }
    std::string key = arg.substr(0, eq);
    if (!kv.count(key)) return KeyError(key, "unknown key (not in the base config)");
    std::string value = Unquote(std::string(absl::StripAsciiWhitespace(arg.substr(eq + 1))));
    kv[key] = value;
    set_by_user[key] = value;
  }
  const std::string model_name = kv["model_name"];
  auto preset = Presets().find(model_name);
  if (preset == Presets().end()) {
    return KeyError("model_name",
                    "unknown model '" + model_name + "'; known: " + absl::StrJoin(ModelPresetNames(), ", "));
  }
  bool override_model = false;
  RETURN_IF_ERROR(Reader(kv).Bool("override_model_config", &override_model));
  for (const auto& [key, value] : preset->second) {
    if (set_by_user.count(key) && !override_model) {
      return KeyError(key, "is set by model_name=" + model_name + "; pass override_model_config=true to change it");
    }
    if (!set_by_user.count(key)) kv[key] = value;
  }
  Config config;
  RETURN_IF_ERROR(ReadAll(Reader(kv), &config));
  RETURN_IF_ERROR(Validate(&config));
  return config;
}

absl::StatusOr<Config> LoadConfig(const std::vector<std::string>& args) {
  if (args.empty()) return absl::InvalidArgumentError("missing the base config file");
  std::ifstream in(args[0]);
  if (!in) return absl::NotFoundError("cannot read config file '" + args[0] + "'");
  std::stringstream text;
  text << in.rdbuf();
  auto config = ConfigFromYaml(text.str(), {args.begin() + 1, args.end()});
  if (!config.ok()) {
    return absl::Status(config.status().code(), args[0] + ": " + std::string(config.status().message()));
  }
  return config;
}

int64_t MicroRows(const Config& config, int64_t rows) {
  const int64_t per_device = std::llround(config.per_device_batch_size);
  if (per_device >= 1 && std::fabs(config.per_device_batch_size - per_device) < 1e-9 && rows % per_device == 0) {
    return std::min(per_device, rows);
  }
  return rows;
}

absl::StatusOr<int64_t> GlobalBatch(const Config& config, int devices) {
  const double exact = config.per_device_batch_size * devices;
  const int64_t gb = std::llround(exact);
  if (std::fabs(exact - gb) > 1e-9) {
    return absl::InvalidArgumentError(
        absl::StrFormat("config key 'per_device_batch_size': %g x %d devices is not a whole number of sequences",
                        config.per_device_batch_size, devices));
  }
  return gb;
}

}  // namespace manta::train
