#!/usr/bin/env bash
# Formats the tree's C++ with clang-format 14 (.clang-format) and its Python
# with yapf (the [yapf] section of setup.cfg), both from Debian 12
# (scripts/install_deps.sh --test installs them); or checks that it is.
#
#   scripts/format.sh                    # formats every .cc, .h and .py file
#   scripts/format.sh FILE...            # formats these
#   scripts/format.sh --check [FILE...]  # lists the files whose format differs; exit 1 if any
#
# The files are those git tracks or would track (ignored ones are not), or,
# outside a git checkout, those under the tree's folders. The format_check
# test runs --check, so the test suite (and CI) fails on an unformatted file.
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT="${CLANG_FORMAT:-clang-format-14}"
YAPF="${YAPF:-yapf3}"
JOBS="${MANTA_BUILD_JOBS:-2}"

check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi
if [ $# -gt 0 ]; then
  files=("$@")
else
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.cc' '*.h' '*.py' | sort -u)
  else
    mapfile -t files < <(find . -path './build*' -prune -o -type f \( -name '*.cc' -o -name '*.h' -o -name '*.py' \) \
                           -print | sed 's|^\./||' | sort)
  fi
  kept=()
  for f in "${files[@]}"; do
    if [ -f "$f" ]; then kept+=("$f"); fi
  done
  files=("${kept[@]}")
fi
cxx=()
py=()
for f in "${files[@]}"; do
  case "$f" in
    *.cc | *.h) cxx+=("$f") ;;
    *.py) py+=("$f") ;;
    *) echo "$f: neither C++ (.cc, .h) nor Python (.py)" >&2; exit 2 ;;
  esac
done
for tool in "$CLANG_FORMAT" "$YAPF"; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: scripts/install_deps.sh --test installs it" >&2; exit 2; }
done

# clang-format loads slowly: one process for each of JOBS equal shares.
batch=$(( (${#cxx[@]} + JOBS - 1) / JOBS ))
[ $batch -gt 0 ] || batch=1
if [ $check -eq 0 ]; then
  [ ${#cxx[@]} -eq 0 ] || printf '%s\0' "${cxx[@]}" | xargs -0 -P"$JOBS" -n"$batch" "$CLANG_FORMAT" -i
  [ ${#py[@]} -eq 0 ] || "$YAPF" -i --style setup.cfg "${py[@]}"
  exit 0
fi

# --check: clang-format's --dry-run warns of each file that would change
# (each batch into a file of its own, so that batches run side by side do
# not interleave their lines), and yapf's --diff names each one, beside it.
out=$(mktemp -d)
export OUT="$out"
trap 'rm -rf "$out"' EXIT
py_rc=0
if [ ${#py[@]} -gt 0 ]; then
  "$YAPF" --diff --style setup.cfg "${py[@]}" >"$out/yapf.diff" 2>"$out/yapf.err" &
  py_pid=$!
fi
if [ ${#cxx[@]} -gt 0 ]; then
  printf '%s\0' "${cxx[@]}" |
    xargs -0 -P"$JOBS" -n"$batch" sh -c 'exec "$0" --dry-run --ferror-limit=1 "$@" 2>"$(mktemp -p "$OUT" cf.XXXXXX)"' \
      "$CLANG_FORMAT" || { cat "$out"/cf.* >&2; exit 2; }
fi
if [ ${#py[@]} -gt 0 ]; then
  wait "$py_pid" || py_rc=$?
  # yapf --diff exits 1 when a file would change, other codes on errors.
  [ $py_rc -le 1 ] || { cat "$out/yapf.err" >&2; exit 2; }
fi
{
  cat "$out"/cf.* 2>/dev/null | sed -n 's/^\(.*\):[0-9]*:[0-9]*: warning: code should be clang-formatted.*/\1/p'
  sed -n 's/^--- \(.*\)\t(original)$/\1/p' "$out/yapf.diff" 2>/dev/null
} | sort -u >"$out/differ"
if [ -s "$out/differ" ]; then
  echo "Not formatted (scripts/format.sh FILE... formats them):"
  sed 's/^/  /' "$out/differ"
  exit 1
fi
