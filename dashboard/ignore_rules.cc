#include "dashboard/ignore_rules.h"

namespace manta::dashboard {
namespace {

constexpr size_t npos = std::string_view::npos;

// The bracket expression at p[i] == '['. Returns the index past its closing
// ']' and sets *matched to whether `c` belongs to it, or npos when the
// bracket is not closed (then '[' is an ordinary character).
size_t MatchClass(std::string_view p, size_t i, char c, bool* matched) {
  size_t j = i + 1;
  bool negate = j < p.size() && (p[j] == '!' || p[j] == '^');
  if (negate) ++j;
  bool found = false;
  bool first = true;  // a ']' right after '[' or '[!' is a member
  while (j < p.size() && (first || p[j] != ']')) {
    first = false;
    char lo = p[j];
    if (lo == '\\' && j + 1 < p.size()) lo = p[++j];
    ++j;
    char hi = lo;
    if (j + 1 < p.size() && p[j] == '-' && p[j + 1] != ']') {
      hi = p[j + 1];
      j += 2;
      if (hi == '\\' && j < p.size()) hi = p[j++];
    }
    if (lo <= c && c <= hi) found = true;
  }
  if (j >= p.size()) return npos;
  *matched = found != negate;
  return j + 1;
}

}  // namespace

bool WildMatch(std::string_view p, std::string_view t) {
  size_t pi = 0;
  size_t ti = 0;
  while (pi < p.size()) {
    char c = p[pi];
    if (c == '*') {
      size_t after = pi + 1;
      while (after < p.size() && p[after] == '*') ++after;
      bool whole_component = after - pi >= 2 && (pi == 0 || p[pi - 1] == '/') && (after == p.size() || p[after] == '/');
      if (whole_component) {
        if (after == p.size()) return true;  // trailing "**": everything left
        // "**/": zero or more whole directories, then the rest.
        std::string_view rest = p.substr(after + 1);
        for (size_t k = ti;;) {
          if (WildMatch(rest, t.substr(k))) return true;
          size_t slash = t.find('/', k);
          if (slash == npos) return false;
          k = slash + 1;
        }
      }
      // Any run of characters other than '/'.
      std::string_view rest = p.substr(after);
      for (size_t k = ti;; ++k) {
        if (WildMatch(rest, t.substr(k))) return true;
        if (k == t.size() || t[k] == '/') return false;
      }
    }
    if (ti == t.size()) return false;
    if (c == '?') {
      if (t[ti] == '/') return false;
      ++pi;
      ++ti;
      continue;
    }
    if (c == '[') {
      bool matched = false;
      size_t end = MatchClass(p, pi, t[ti], &matched);
      if (end != npos) {
        if (!matched || t[ti] == '/') return false;
        pi = end;
        ++ti;
        continue;
      }
    }
    if (c == '\\' && pi + 1 < p.size()) c = p[++pi];
    if (t[ti] != c) return false;
    ++pi;
    ++ti;
  }
  return ti == t.size();
}

bool IgnoreRules::ParseLine(std::string_view line, Rule* rule) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  while (!line.empty() && line.back() == ' ') {
    size_t backslashes = 0;
    for (size_t i = line.size() - 1; i > 0 && line[i - 1] == '\\'; --i) ++backslashes;
    if (backslashes % 2 == 1) break;  // "\ " keeps its space
    line.remove_suffix(1);
  }
  if (line.empty() || line[0] == '#') return false;
  if (line[0] == '!') {
    rule->negated = true;
    line.remove_prefix(1);
  }
  if (!line.empty() && line.back() == '/') {
    rule->dir_only = true;
    line.remove_suffix(1);
  }
  rule->anchored = line.find('/') != npos;
  if (!line.empty() && line[0] == '/') line.remove_prefix(1);
  if (line.empty()) return false;
  rule->pattern = std::string(line);
  return true;
}

void IgnoreRules::AddFile(std::string_view file_path, std::string_view text) {
  size_t slash = file_path.rfind('/');
  std::string base(slash == npos ? std::string_view() : file_path.substr(0, slash));
  std::vector<Rule>& rules = rules_by_base_[base];
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == npos) end = text.size();
    Rule rule;
    if (ParseLine(text.substr(start, end - start), &rule)) {
      rule.source = std::string(file_path);
      rules.push_back(std::move(rule));
    }
    start = end + 1;
  }
  if (rules.empty()) rules_by_base_.erase(base);
}

IgnoreRules::Verdict IgnoreRules::Check(std::string_view path, bool is_dir) const {
  Verdict verdict;
  std::string_view base;
  size_t next = 0;
  while (true) {  // the root, then each directory above `path`, shallow to deep
    auto it = rules_by_base_.find(base);
    if (it != rules_by_base_.end()) {
      std::string_view rel = base.empty() ? path : path.substr(base.size() + 1);
      size_t last_slash = rel.rfind('/');
      std::string_view name = last_slash == npos ? rel : rel.substr(last_slash + 1);
      for (const Rule& rule : it->second) {
        if (rule.dir_only && !is_dir) continue;
        if (WildMatch(rule.pattern, rule.anchored ? rel : name)) {
          verdict.ignored = !rule.negated;
          verdict.source = rule.source;
        }
      }
    }
    size_t slash = path.find('/', next);
    if (slash == npos) break;
    base = path.substr(0, slash);
    next = slash + 1;
  }
  return verdict;
}

bool IgnoreRules::IsIgnored(std::string_view path, bool is_dir) const {
  for (size_t slash = path.find('/'); slash != npos; slash = path.find('/', slash + 1)) {
    if (Check(path.substr(0, slash), /*is_dir=*/true).ignored) return true;
  }
  return Check(path, is_dir).ignored;
}

}  // namespace manta::dashboard
