"""Packing a local working_dir the way `manta job submit --working-dir` does.

The archive is a gzip-compressed tar built exactly as the CLI builds it
(dashboard/tar_writer.cc): entries sorted by name, owners and times zero,
`.git/` left out, and what `.gitignore` and `.mantaignore` files in the tree
exclude left out too (git's pattern rules, dashboard/ignore_rules.h), except
the entrypoint's own file. The same tree gives the same bytes, so the same
package name ("_manta_pkg_<sha256>.tar.gz") as the CLI: a package the
dashboard already has is not uploaded again.
"""

import hashlib
import os
import posixpath
import shlex
import stat
import zlib

MAX_WORKING_DIR_BYTES = 100 << 20
_BLOCK = 512

# --- ignore rules -----------------------------------------------------------


def _match_class(p, i, c):
    """The bracket expression at p[i] == '[': (index past it, matched), or (None, False)."""
    j = i + 1
    negate = j < len(p) and p[j] in "!^"
    if negate:
        j += 1
    found = False
    first = True
    while j < len(p) and (first or p[j] != "]"):
        first = False
        lo = p[j]
        if lo == "\\" and j + 1 < len(p):
            j += 1
            lo = p[j]
        j += 1
        hi = lo
        if j + 1 < len(p) and p[j] == "-" and p[j + 1] != "]":
            hi = p[j + 1]
            j += 2
            if hi == "\\" and j < len(p):
                hi = p[j]
                j += 1
        if lo <= c <= hi:
            found = True
    if j >= len(p):
        return None, False
    return j + 1, found != negate


def wild_match(p, t):
    """git's wildcard match: `*`, `?`, `[...]` never match '/'; `**` spans directories."""
    pi = ti = 0
    while pi < len(p):
        c = p[pi]
        if c == "*":
            after = pi + 1
            while after < len(p) and p[after] == "*":
                after += 1
            whole = after - pi >= 2 and (pi == 0 or p[pi - 1] == "/") and (after == len(p) or p[after] == "/")
            if whole:
                if after == len(p):
                    return True
                rest = p[after + 1:]
                k = ti
                while True:
                    if wild_match(rest, t[k:]):
                        return True
                    slash = t.find("/", k)
                    if slash < 0:
                        return False
                    k = slash + 1
            rest = p[after:]
            k = ti
            while True:
                if wild_match(rest, t[k:]):
                    return True
                if k == len(t) or t[k] == "/":
                    return False
                k += 1
        if ti == len(t):
            return False
        if c == "?":
            if t[ti] == "/":
                return False
            pi += 1
            ti += 1
            continue
        if c == "[":
            end, matched = _match_class(p, pi, t[ti])
            if end is not None:
                if not matched or t[ti] == "/":
                    return False
                pi = end
                ti += 1
                continue
        if c == "\\" and pi + 1 < len(p):
            pi += 1
            c = p[pi]
        if t[ti] != c:
            return False
        pi += 1
        ti += 1
    return ti == len(t)


class IgnoreRules:
    """The rules of the ignore files met so far, by the directory they apply under."""

    def __init__(self):
        self._by_base = {}  # base dir ("" for the root) -> [(pattern, negated, dir_only, anchored, source)]

    @staticmethod
    def _parse(line):
        if line.endswith("\r"):
            line = line[:-1]
        while line.endswith(" "):
            backslashes = len(line[:-1]) - len(line[:-1].rstrip("\\"))
            if backslashes % 2 == 1:
                break
            line = line[:-1]
        if not line or line[0] == "#":
            return None
        negated = line[0] == "!"
        if negated:
            line = line[1:]
        dir_only = line.endswith("/")
        if dir_only:
            line = line[:-1]
        anchored = "/" in line
        if line.startswith("/"):
            line = line[1:]
        if not line:
            return None
        return line, negated, dir_only, anchored

    def add_file(self, file_path, text):
        base = file_path.rpartition("/")[0]
        rules = self._by_base.setdefault(base, [])
        for line in text.split("\n"):
            parsed = self._parse(line)
            if parsed:
                rules.append(parsed + (file_path,))
        if not rules:
            del self._by_base[base]

    def check(self, path, is_dir):
        """The ignore file whose rule ignores `path` itself, or None."""
        verdict = None
        parts = path.split("/")
        for depth in range(len(parts)):
            base = "/".join(parts[:depth])
            rules = self._by_base.get(base)
            if not rules:
                continue
            rel = "/".join(parts[depth:])
            name = parts[-1]
            for pattern, negated, dir_only, anchored, source in rules:
                if dir_only and not is_dir:
                    continue
                if wild_match(pattern, rel if anchored else name):
                    verdict = None if negated else source
        return verdict


# --- tar --------------------------------------------------------------------


def _octal(value, width):
    return ("%0*o" % (width - 1, value)).encode()[:width - 1] + b"\0"


def _header(name, type_flag, size, link, mode):
    h = bytearray(_BLOCK)
    n = name.encode("utf-8", "surrogateescape")[:100]
    h[0:len(n)] = n
    h[100:108] = _octal(mode, 8)
    h[108:116] = _octal(0, 8)
    h[116:124] = _octal(0, 8)
    h[124:136] = _octal(size, 12)
    h[136:148] = _octal(0, 12)
    h[156] = ord(type_flag)
    lk = link.encode("utf-8", "surrogateescape")[:100]
    h[157:157 + len(lk)] = lk
    h[257:263] = b"ustar\0"
    h[263:265] = b"00"
    h[148:156] = b" " * 8
    h[148:156] = _octal(sum(h), 7) + b" "
    return bytes(h)


def _data(data):
    return data + b"\0" * ((_BLOCK - len(data) % _BLOCK) % _BLOCK)


def tar_entry(path, type_flag, data=b"", link="", mode=0o644):
    out = []
    for long_value, flag in ((path, "L"), (link, "K")):
        raw = long_value.encode("utf-8", "surrogateescape")
        if len(raw) > 100:
            out.append(_header("././@LongLink", flag, len(raw) + 1, "", 0o644))
            out.append(_data(raw + b"\0"))
    out.append(_header(path, type_flag, len(data), link, mode))
    out.append(_data(data))
    return b"".join(out)


def gzip_bytes(data):
    """gzip as zlib's deflate with a gzip wrapper writes it (what the CLI sends)."""
    z = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 16 + zlib.MAX_WBITS, 8, zlib.Z_DEFAULT_STRATEGY)
    return z.compress(data) + z.flush()


def package_name(archive):
    gz = archive[:2] == b"\x1f\x8b"
    return "_manta_pkg_" + hashlib.sha256(archive).hexdigest() + (".tar.gz" if gz else ".tar")


# --- the walk ---------------------------------------------------------------


def entrypoint_file(working_dir, entrypoint):
    """The entrypoint's program when it is a file given by a relative path inside
    `working_dir` ("./run.sh", "bin/tool"), else None: it is packed even if ignored."""
    try:
        words = shlex.split(entrypoint)
    except ValueError:
        return None
    program = None
    for word in words:
        name, eq, _ = word.partition("=")
        if eq and name and not name[0].isdigit() and name.replace("_", "a").isalnum():
            continue  # NAME=value before the program
        program = word
        break
    if not program or program.startswith("/") or "/" not in program:
        return None
    parts = [p for p in program.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    rel = "/".join(parts)
    full = os.path.join(working_dir, rel)
    return rel if os.path.isfile(full) and not os.path.islink(full) else None


def pack_directory(directory, always_include=(), max_bytes=MAX_WORKING_DIR_BYTES):
    """The gzipped tar of `directory`; ValueError for a bad tree, a symlink that
    leaves it, or more than `max_bytes` of files."""
    if not os.path.exists(directory):
        raise ValueError(f"working directory {directory} does not exist")
    if not os.path.isdir(directory):
        raise ValueError(f"working directory {directory} is not a directory")
    include_files = set()
    include_dirs = set()
    for path in always_include:
        parts = [p for p in path.split("/") if p not in ("", ".")]
        for i in range(1, len(parts)):
            include_dirs.add("/".join(parts[:i]))
        include_files.add("/".join(parts))
    rules = IgnoreRules()
    out = []
    total = 0

    def walk(rel, ignored_by):
        nonlocal total
        here = os.path.join(directory, rel) if rel else directory
        names = sorted(os.listdir(here))
        if ignored_by is None:
            for ignore_file in (".gitignore", ".mantaignore"):
                full = os.path.join(here, ignore_file)
                if ignore_file in names and os.path.isfile(full):
                    with open(full, encoding="utf-8", errors="surrogateescape") as f:
                        rules.add_file(f"{rel}/{ignore_file}" if rel else ignore_file, f.read())
        for name in names:
            child = f"{rel}/{name}" if rel else name
            full = os.path.join(directory, child)
            try:
                st = os.lstat(full)
            except FileNotFoundError:
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            why = ignored_by
            if why is None and name == ".git":
                why = ".git"
            if why is None:
                why = rules.check(child, is_dir)
            if why is not None and child not in (include_dirs if is_dir else include_files):
                continue
            if is_dir:
                out.append(tar_entry(child + "/", "5", mode=0o755))
                walk(child, why)
            elif stat.S_ISLNK(st.st_mode):
                target = os.readlink(full)
                resolved = posixpath.normpath(posixpath.join(posixpath.dirname(child), target))
                if target.startswith("/") or resolved == ".." or resolved.startswith("../"):
                    raise ValueError(f"working directory {directory}: symlink {child} -> {target} "
                                     "points outside the directory")
                out.append(tar_entry(child, "2", link=target, mode=0o777))
            elif stat.S_ISREG(st.st_mode):
                total += st.st_size
                if total > max_bytes:
                    raise ValueError(f"working directory {directory} holds more than {max_bytes} bytes "
                                     "of files that are not ignored (list the rest in a .mantaignore file)")
                with open(full, "rb") as f:
                    out.append(tar_entry(child, "0", f.read(), mode=st.st_mode & 0o777))

    walk("", None)
    out.append(b"\0" * (2 * _BLOCK))
    return gzip_bytes(b"".join(out))
