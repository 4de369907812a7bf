#include "runtime/core_worker/log_printer.h"

#include <cctype>

#include "absl/strings/str_split.h"

namespace manta::core {
namespace {

// A digit run anywhere in the word (a 0x hex number always holds one).
bool HoldsNumber(absl::string_view word) {
  for (char c : word) {
    if (std::isdigit(static_cast<unsigned char>(c))) return true;
  }
  return false;
}

}  // namespace

std::string CanonicalLogLine(const std::string& line) {
  std::string out;
  for (absl::string_view word : absl::StrSplit(line, absl::ByAnyChar(" \t\r\n\v\f"), absl::SkipEmpty())) {
    if (HoldsNumber(word)) continue;
    if (!out.empty()) out.push_back(' ');
    out.append(word.data(), word.size());
  }
  return out;
}

void LogPrinter::Print(bool is_error, const std::string& text) {
  FILE* f = is_error ? err_ : out_;
  std::fwrite(text.data(), 1, text.size(), f);
  std::fflush(f);
}

void LogPrinter::Add(const std::string& prefix, const std::string& line, bool is_error, absl::Time now) {
  absl::MutexLock lock(&mu_);
  CloseWindows(now);
  std::string key = CanonicalLogLine(line);
  if (!key.empty()) {
    auto it = patterns_.find({is_error, key});
    if (it == patterns_.end()) {
      Pattern p;
      p.first = now;
      p.sources.insert(prefix);
      patterns_.emplace(std::make_pair(is_error, std::move(key)), std::move(p));
    } else {
      Pattern& p = it->second;
      p.sources.insert(prefix);
      if (p.sources.size() > 1) {
        ++p.repeats;
        p.latest_prefix = prefix;
        p.latest_line = line;
        return;
      }
    }
  }
  Print(is_error, prefix + " " + line + "\n");
}

void LogPrinter::CloseWindows(absl::Time now) {
  for (auto it = patterns_.begin(); it != patterns_.end();) {
    const Pattern& p = it->second;
    if (now != absl::InfiniteFuture() && now - p.first < window_) {
      ++it;
      continue;
    }
    if (p.repeats > 0) {
      Print(it->first.first,
            p.latest_prefix + " " + p.latest_line + " [repeated " + std::to_string(p.repeats) + "x across cluster]\n");
    }
    it = patterns_.erase(it);
  }
}

void LogPrinter::Tick(absl::Time now) {
  absl::MutexLock lock(&mu_);
  CloseWindows(now);
}

}  // namespace manta::core
