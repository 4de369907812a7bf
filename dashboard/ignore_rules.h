// The ignore files of a working directory (`.gitignore`, `.mantaignore`), as
// `manta job submit --working-dir` honours them when packing, like Ray's
// working_dir upload honours `.gitignore` and `.rayignore`.
//
// Each file applies to its own directory and below, with git's pattern
// syntax: blank lines and `#` comments are skipped, `\#` and `\!` escape a
// leading `#` or `!`, trailing unescaped spaces are dropped; `!` negates; a
// trailing `/` matches directories only; a `/` at the start or in the middle
// anchors the pattern to the file's directory, otherwise it matches the last
// component at any depth below; `*` and `?` never match `/`, `[...]` is a
// character class (`!` or `^` negates it); `**` as a whole component matches
// any number of directories (leading `**/`, middle `/**/`, trailing `/**`).
// The last rule that matches decides, and rules of a deeper file come after
// those of a shallower one; of two files in one directory, the one added later
// comes after. As in git, nothing under an ignored directory can be
// re-included.
//
//   IgnoreRules rules;
//   rules.AddFile(".gitignore", "build/\n*.o\n");
//   rules.AddFile("src/.gitignore", "!keep.o\n");
//   rules.IsIgnored("build", /*is_dir=*/true);      // true
//   rules.IsIgnored("src/a.o", false);              // true
//   rules.IsIgnored("src/keep.o", false);           // false
//
// A value type with no I/O: the caller reads the files. Not synchronized;
// const methods are safe to call concurrently.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace manta::dashboard {

class IgnoreRules {
 public:
  // The rule that decided a path, if any.
  struct Verdict {
    bool ignored = false;
    std::string source;  // the ignore file holding the deciding rule; empty when none matched
  };

  // Adds the rules of the ignore file at `file_path` (relative to the root,
  // '/'-separated, e.g. "src/.gitignore"), which apply under its directory.
  // Lines that are not valid patterns are skipped, as git does.
  void AddFile(std::string_view file_path, std::string_view text);

  // Whether `path` (relative to the root, '/'-separated, no "." or ".."
  // components) is ignored, by its own rules or because a directory above it
  // is.
  bool IsIgnored(std::string_view path, bool is_dir) const;

  // The verdict of the rules on `path` itself, not looking at the directories
  // above it: what a walk that does not enter ignored directories needs.
  Verdict Check(std::string_view path, bool is_dir) const;

  bool empty() const { return rules_by_base_.empty(); }

 private:
  struct Rule {
    std::string pattern;  // without '!', the anchoring '/' and the trailing '/'
    bool negated = false;
    bool dir_only = false;
    bool anchored = false;  // matched against the path below the base, else against the last component
    std::string source;
  };

  static bool ParseLine(std::string_view line, Rule* rule);

  // Rules by the directory of their file ("" for the root), in the order added.
  std::map<std::string, std::vector<Rule>, std::less<>> rules_by_base_;
};

// Whether `text` matches the git wildcard `pattern`, with `*`, `?` and
// `[...]` not matching '/' and `**` as described above. Exposed for tests.
bool WildMatch(std::string_view pattern, std::string_view text);

}  // namespace manta::dashboard
