// Runs a fuzz target without libFuzzer, so the ordinary build and CI exercise
// every target: each seed file as it is, then a fixed number of mutants of
// the seeds (bytes flipped, inserted, deleted, repeated, seeds spliced and
// cut), drawn from a seeded generator so a failure replays exactly. A broken
// invariant aborts and the test fails; in scripts/sanitize.sh's builds, so
// does any misuse of memory.
//
//   config_fuzz_replay -runs=20000 -seed=1 fuzz/corpus/config_fuzz
//
// Coverage-guided runs are scripts/fuzz.sh's job; this is their short,
// always-on companion.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Optional, as with libFuzzer: called once, first.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

using Bytes = std::string;

std::vector<Bytes> ReadSeeds(const std::vector<std::string>& dirs) {
  std::vector<Bytes> seeds;
  for (const std::string& dir : dirs) {
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());  // the same order, so the same mutants
    for (const auto& file : files) {
      std::ifstream in(file, std::ios::binary);
      seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  return seeds;
}

// One random edit of `b`, the kinds libFuzzer's default mutators make.
void Mutate(Bytes& b, const std::vector<Bytes>& seeds, std::mt19937_64& rng) {
  auto pick = [&rng](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  static const char* const kInteresting[] = {"\xff", "\x00", "-1", "1e309", "NaN", "\"", "../", "%00", "\xc3\x28"};
  switch (rng() % 8) {
    case 0:  // flip a bit
      if (!b.empty()) b[pick(b.size())] ^= static_cast<char>(1u << (rng() % 8));
      break;
    case 1:  // set a random byte
      if (!b.empty()) b[pick(b.size())] = static_cast<char>(rng());
      break;
    case 2: {  // insert random bytes
      Bytes extra(1 + pick(8), '\0');
      for (char& c : extra) c = static_cast<char>(rng());
      b.insert(pick(b.size() + 1), extra);
      break;
    }
    case 3:  // delete a range
      if (!b.empty()) {
        size_t at = pick(b.size());
        b.erase(at, 1 + pick(std::min<size_t>(b.size() - at, 64)));
      }
      break;
    case 4:  // repeat a range
      if (!b.empty() && b.size() < (1u << 16)) {
        size_t at = pick(b.size()), n = 1 + pick(std::min<size_t>(b.size() - at, 256));
        b.insert(pick(b.size() + 1), b.substr(at, n));
      }
      break;
    case 5:  // splice in part of another seed
      if (!seeds.empty()) {
        const Bytes& other = seeds[pick(seeds.size())];
        if (!other.empty()) {
          size_t at = pick(other.size());
          b.insert(pick(b.size() + 1), other.substr(at, 1 + pick(other.size() - at)));
        }
      }
      break;
    case 6:  // cut short
      b.resize(pick(b.size() + 1));
      break;
    default:  // insert a value parsers get wrong
      b.insert(pick(b.size() + 1), kInteresting[pick(std::size(kInteresting))]);
      break;
  }
}

void Run(const Bytes& b) {
  // A copy in its own allocation, so reading past its end is caught.
  std::vector<uint8_t> copy(b.begin(), b.end());
  LLVMFuzzerTestOneInput(copy.data(), copy.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  long runs = 20000;
  unsigned long seed = 1;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("-runs=", 0) == 0) {
      runs = std::strtol(arg.c_str() + 6, nullptr, 10);
    } else if (arg.rfind("-seed=", 0) == 0) {
      seed = std::strtoul(arg.c_str() + 6, nullptr, 10);
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "unknown flag %s (use -runs=N -seed=N CORPUS_DIR...)\n", arg.c_str());
      return 2;
    } else {
      dirs.push_back(arg);
    }
  }
  std::vector<Bytes> seeds;
  try {
    seeds = ReadSeeds(dirs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cannot read the corpus: %s\n", e.what());
    return 2;
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "no seeds in the corpus folders given\n");
    return 2;
  }
  std::mt19937_64 rng(seed);
  long executed = 0;
  for (const Bytes& s : seeds) Run(s), ++executed;
  Run(Bytes()), ++executed;
  for (long i = 0; i < runs; ++i) {
    Bytes b = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits; ++e) Mutate(b, seeds, rng);
    Run(b);
    ++executed;
  }
  std::printf("%s: %ld inputs (%zu seeds, %ld mutants, seed %lu), no crash\n",
              std::filesystem::path(argv[0]).filename().c_str(), executed, seeds.size(), runs, seed);
  return 0;
}
