// manta_export_gguf: a trainer's checkpoint as a GGUF file (F32, BF16 or
// Q8_0 projections) that llama.cpp loads.
//
//   build/bin/manta_export_gguf --checkpoint=/tmp/ft/fortunes/checkpoints/400 --out=fortunes.gguf
//   build/bin/manta_export_gguf --checkpoint=... --out=fortunes-q8_0.gguf --type=Q8_0
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "serve/export/gguf.h"

ABSL_FLAG(std::string, checkpoint, "", "A checkpoint step folder (<run>/checkpoints/<step>).");
ABSL_FLAG(std::string, out, "", "The GGUF file to write.");
ABSL_FLAG(std::string, name, "manta", "general.name in the file.");
ABSL_FLAG(int64_t, context_length, 2048, "llama.context_length to declare.");
ABSL_FLAG(std::string, type, "F32", "How the projections and output head are stored: F32, BF16 or Q8_0.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Exports a Manta checkpoint to GGUF: --checkpoint=DIR --out=FILE");
  absl::ParseCommandLine(argc, argv);
  const std::string checkpoint = absl::GetFlag(FLAGS_checkpoint), out = absl::GetFlag(FLAGS_out);
  if (checkpoint.empty() || out.empty()) {
    std::fprintf(stderr, "manta_export_gguf: error: --checkpoint and --out are required\n");
    return 2;
  }
  const int64_t context = absl::GetFlag(FLAGS_context_length);
  if (context < 1 || context > (int64_t{1} << 24)) {
    std::fprintf(stderr, "manta_export_gguf: error: --context_length must be 1 to 16777216\n");
    return 2;
  }
  manta::serve::GgufType type;
  if (!manta::serve::ParseGgufType(absl::GetFlag(FLAGS_type), &type)) {
    std::fprintf(stderr, "manta_export_gguf: error: --type must be F32, BF16 or Q8_0, got '%s'\n",
                 absl::GetFlag(FLAGS_type).c_str());
    return 2;
  }
  absl::StatusOr<manta::serve::ServingWeights> w = manta::serve::ServingWeights::Load(checkpoint, 1, 0);
  absl::Status s = w.ok() ? manta::serve::WriteGguf(*w, out, absl::GetFlag(FLAGS_name), context, type) : w.status();
  if (!s.ok()) {
    std::fprintf(stderr, "manta_export_gguf: error: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::printf("wrote %s: %lld parameters (%s), %lld ids, step %lld\n", out.c_str(),
              static_cast<long long>(w->shape().ParamCount()), manta::serve::GgufTypeName(type),
              static_cast<long long>(w->shape().vocab_size), static_cast<long long>(w->step()));
  return 0;
}
