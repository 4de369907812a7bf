#!/usr/bin/python3
"""Checks that the docs (README.md and docs/*.md) name only what exists.

    docs/check_docs.py [--root DIR] [--bin-dir DIR] [--no-self-test]

What a doc quotes is checked against the tree and the built programs:

* commands (```sh blocks, and `spans` that start with a program): the
  program is a binary in --bin-dir, `manta` with subcommands `manta --help`
  lists, a script of the tree, or a well-known tool; every flag given to a
  binary is one its --help (--helpfull for abseil's flags) lists, every flag
  given to a script appears in the script;
* commands that ask for help (`manta job submit --help`, `gcs_server
  --helpfull`) are run and must print their usage;
* a flag quoted alone (`--drain-grace-s=N`) is one some program takes;
  `-DNAME=...` is a CMake option the build declares;
* `build/bin/X` is a binary that was built; a path under a top-level folder
  of the tree exists (a glob matches something); a link to another file
  resolves, and its #anchor is a heading there;
* `path/file.cc:Name` (also Class::Method, module.function): the file exists
  and every part of the name appears in it;
* an identifier (`TrainController::WorkerReport`, `ray_train_loss`,
  `TPU_VISIBLE_CHIPS`) appears somewhere in the tree outside the docs;
* a code block whose first line is a comment naming a file (`// examples/
  counter.cc`) is an excerpt: its lines appear in that file, in order
  (`...` elides).

Then, unless --no-self-test, it plants one error of each kind in a copy of
the docs and fails unless each is reported. Exit status 1 on any error.
"""

import argparse
import concurrent.futures
import glob
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile

# Programs the docs run that are not Manta's (their flags are not checked).
EXTERNAL = {
    "apt-get",
    "bash",
    "buildah",
    "cat",
    "cd",
    "cmake",
    "cp",
    "ctest",
    "curl",
    "do",
    "done",
    "echo",
    "env",
    "export",
    "for",
    "git",
    "kill",
    "kubectl",
    "ls",
    "mkdir",
    "ninja",
    "node",
    "npm",
    "openssl",
    "pip",
    "podman",
    "promtool",
    "python3",
    "/usr/bin/python3",
    "rm",
    "sh",
    "skopeo",
    "sudo",
    "time",
    "yamllint",
}
# Where the identifiers of the docs must appear: anything tracked but these.
NOT_TREE = ("README.md", "docs/")
# Programs not asked for --help: they run a driver at once.
NO_HELP = ("example_",)
ENV_DROP = ("MANTA_ADDRESS", "MANTA_TOKEN", "MANTA_DASHBOARD_ADDRESS", "RAY_ADDRESS", "MANTA_TOKEN_FILE")
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*((::|\.)[A-Za-z_~][A-Za-z0-9_]*)*(\(\))?$")
FILE_FUNC = re.compile(r"^([\w./-]+\.(?:cc|h|py|proto|sh|mjs|cmake)):([A-Za-z_~][\w:.~]*)(?:\(\))?$")
PATHLIKE = re.compile(r"^[\w.@+-]+(/[\w.@*+{},<>-]*)+$")
LOOSE_FLAG = re.compile(r"^(--[A-Za-z][\w-]*)(=\S*)?( [A-Z0-9_.,<>=-]+)?$")
CMAKE_OPT = re.compile(r"^-D([A-Za-z_]\w*)(=\S*)?$")
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Doc:
    """A Markdown file: its fenced blocks and the text outside them."""

    def __init__(self, path, text):
        self.path = path
        self.blocks = []  # (first line number, language, [lines])
        self.prose = []  # (line number, line)
        fence = None
        for n, line in enumerate(text.split("\n"), 1):
            if fence is None and line.lstrip().startswith("```"):
                fence = (n, line.strip()[3:].strip().lower(), [])
            elif fence is not None and line.strip() == "```":
                self.blocks.append(fence)
                fence = None
            elif fence is not None:
                fence[2].append(line)
            else:
                self.prose.append((n, line))
        if fence is not None:
            self.blocks.append(fence)


class Tree:
    """The repository: its files, their words, the built programs and what
    their --help says (each program run once)."""

    def __init__(self, root, bin_dir):
        self.root = root
        self.bin_dir = bin_dir
        self.top = set(os.listdir(root))
        self.files = self._tracked()
        self.words = set()
        self.cmake_words = set()
        self._file_words = {}
        for f in self.files:
            if f.startswith(NOT_TREE) or f.startswith("fuzz/corpus/"):
                continue
            text = self.read(f)
            if text is None:
                continue
            found = set(WORD.findall(text))
            self.words |= found
            if f.endswith(("CMakeLists.txt", ".cmake")):
                self.cmake_words |= found
        self.binaries = set(os.listdir(bin_dir)) if os.path.isdir(bin_dir) else set()
        self._help = {}
        # Where the programs run (removed with this object).
        self._tmp_dir = tempfile.TemporaryDirectory(prefix="check_docs_")
        self._tmp = self._tmp_dir.name

    def _tracked(self):
        try:
            out = subprocess.run(["git", "-C", self.root, "ls-files"], capture_output=True, text=True, check=True)
            return [f for f in out.stdout.split("\n") if f]
        except (OSError, subprocess.CalledProcessError):
            found = []
            for d, subdirs, names in os.walk(self.root):
                subdirs[:] = [s for s in subdirs if not s.startswith((".git", "build"))]
                found += [os.path.relpath(os.path.join(d, n), self.root) for n in names]
            return found

    def read(self, rel):
        try:
            with open(os.path.join(self.root, rel), encoding="utf-8") as f:
                return f.read(2_000_000)
        except (OSError, UnicodeDecodeError):
            return None

    def words_of(self, rel):
        if rel not in self._file_words:
            self._file_words[rel] = set(WORD.findall(self.read(rel) or ""))
        return self._file_words[rel]

    def exists(self, rel):
        return os.path.exists(os.path.join(self.root, rel))

    def run(self, argv):
        """(exit status, output) of a program of --bin-dir, with no cluster
        in sight; (None, why) when it could not run or took too long."""
        if argv not in self._help:
            env = {k: v for k, v in os.environ.items() if k not in ENV_DROP}
            cmd = [os.path.join(self.bin_dir, argv[0])] + list(argv[1:])
            try:
                p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                     cwd=self._tmp, start_new_session=True)
            except OSError as e:
                self._help[argv] = (None, str(e))
                return self._help[argv]
            try:
                out, _ = p.communicate(timeout=15)
                self._help[argv] = (p.returncode, out)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate()
                self._help[argv] = (None, "no answer within 15 s")
        return self._help[argv]

    def prefetch(self, argvs):
        """Runs help_text for each of `argvs` at once (a loaded machine
        starts programs slowly, not expensively)."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(self.help_text, argvs))

    def help_text(self, argv):
        """What `argv --help` prints, with abseil's --helpfull when --help
        points there."""
        status, out = self.run(tuple(argv) + ("--help",))
        if status is not None and "--helpfull" in out and "Flags from" not in out:
            status, out = self.run(tuple(argv) + ("--helpfull",))
        return out if status is not None else ""


def flags_in(text):
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text))


class Cli:
    """The manta command's tree: subcommands and options per level, from its
    own --help."""

    def __init__(self, tree):
        self.tree = tree
        self.levels = {}

    def level(self, path):
        if path not in self.levels:
            text = self.tree.help_text(("manta",) + path)
            subs, options, section = set(), set(), None
            for line in text.split("\n"):
                if re.match(r"^\w[\w ]*:$", line):
                    section = line[:-1]
                elif section == "Subcommands" and re.match(r"^  [\w-]+ ", line):
                    subs.add(line.split()[0])
                elif section == "Options":
                    m = re.match(r"^\s+(-[\w-]+(?:,\s*-[\w-]+)*)", line)
                    if m:
                        options |= set(re.findall(r"-[\w-]+", m.group(1)))
            self.levels[path] = (subs, options | {"-h", "--help"}, bool(text))
        return self.levels[path]

    def prefetch(self):
        """Reads every level of the tree, a level's subcommands at once."""
        todo = [()]
        while todo:
            self.tree.prefetch([("manta",) + p for p in todo if p not in self.levels])
            todo = [p + (s,) for p in todo for s in self.level(p)[0]]

    def all_options(self):
        out, todo = set(), [()]
        while todo:
            path = todo.pop()
            subs, options, _ = self.level(path)
            out |= options
            todo += [path + (s,) for s in subs]
        return out


def split_commands(line):
    """The simple commands of one logical shell line: lists of words."""
    line = re.sub(r"\$\([^()]*\)", "SUBST", line)
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        tokens = list(lex)
    except ValueError:
        return []
    commands, current = [], []
    for t in tokens:
        if t and set(t) <= set(";&|"):
            commands.append(current)
            current = []
        else:
            current.append(t)
    commands.append(current)
    return [c for c in commands if c]


def paragraphs(prose):
    """Runs of non-blank lines joined by spaces (a span may cross lines):
    ([(offset in the text, line number)], text) each."""
    out, starts, parts, offset = [], [], [], 0
    for n, line in prose + [(0, "")]:
        if line.strip():
            starts.append((offset, n))
            parts.append(line.strip())
            offset += len(line.strip()) + 1
        elif parts:
            out.append((starts, " ".join(parts)))
            starts, parts, offset = [], [], 0
    return out


def logical_lines(lines):
    out, pending, first = [], "", None
    for n, line in lines:
        if first is None:
            first = n
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((first, pending + line))
        pending, first = "", None
    if pending:
        out.append((first, pending))
    return out


class Checker:

    def __init__(self, tree):
        self.tree = tree
        self.cli = Cli(tree)
        self.errors = []
        self._reported = set()
        self._all_flags = None
        self.docs = {}

    def error(self, where, message):
        # One report per name and place (a missing binary is both a command
        # and a path).
        key = (where, message.split("`")[1] if message.count("`") >= 2 else message)
        if key not in self._reported:
            self._reported.add(key)
            self.errors.append("%s: %s" % (where, message))

    # ---- programs and flags

    def program_of(self, word):
        """('bin', name), ('manta', None), ('script', path), ('external', None) or None."""
        if word == "manta" or word == "build/bin/manta":
            return ("manta", None)
        if word.startswith("build/bin/") and len(word) > len("build/bin/"):
            return ("bin", word[len("build/bin/"):])
        if word in self.tree.binaries:
            return ("bin", word)
        if word in EXTERNAL or word.startswith(("-", "./")):
            return ("external", None)
        if "/" in word and word.split("/")[0] in self.tree.top and self.tree.exists(word):
            return ("script", word) if os.access(os.path.join(self.tree.root, word), os.X_OK) else ("external", None)
        return None

    def all_flags(self):
        if self._all_flags is None:
            flags = self.cli.all_options()
            for b in self.used_binaries:
                flags |= flags_in(self.tree.help_text((b,)))
            for f in self.tree.files:
                if f.startswith(("scripts/", "deploy/", "bench/")) and f.endswith((".sh", ".py")):
                    flags |= flags_in(self.tree.read(f) or "")
            self._all_flags = flags
        return self._all_flags

    def check_command(self, where, words, strict):
        """`words` is one simple command; `strict`: an unknown program is an
        error (a ```sh block), else the words are skipped (a prose span)."""
        while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
            words = words[1:]  # VAR=value prefixes
        if not words:
            return
        kind = self.program_of(words[0])
        if kind is None:
            if strict:
                self.error(where, "`%s`: no such binary in %s, script or known tool" % (words[0], self.tree.bin_dir))
            return
        if kind[0] == "bin" and kind[1] not in self.tree.binaries:
            self.error(where, "`%s`: no such binary in %s" % (words[0], self.tree.bin_dir))
            return
        if kind[0] == "bin" and kind[1].startswith(NO_HELP):
            # Examples start a driver at once: their arguments are theirs.
            if any(w.startswith("-") for w in words[1:]):
                self.error(where, "`%s`: flags of %s cannot be checked" % (" ".join(words), kind[1]))
            return
        if kind[0] == "external":
            return
        if any(w in ("--help", "--helpfull") for w in words):
            self.run_help_command(where, kind, words)
        rest = words[1:]
        if kind[0] == "manta":
            self.check_manta(where, rest)
        elif kind[0] == "bin":
            self.check_flags(where, kind[1], rest, flags_in(self.tree.help_text((kind[1],))))
        else:
            text = self.tree.read(kind[1]) or ""
            for w in rest:
                if w == "--":
                    break
                name = w.split("=")[0]
                if w.startswith("-") and name not in flags_in(text):
                    self.error(where, "`%s`: %s takes no such flag" % (name, kind[1]))

    def check_flags(self, where, program, args, known):
        for i, w in enumerate(args):
            if w == "--":
                return self.check_entrypoint(where, args[i + 1:])
            if w.startswith("-") and len(w) > 1 and not re.match(r"^-\d", w):
                name = w.split("=")[0]
                if not known:
                    self.error(where, "`%s`: %s --help lists no flags" % (name, program))
                elif name not in known:
                    self.error(where, "`%s`: %s has no such flag" % (name, program))

    def check_entrypoint(self, where, words):
        # After `--`: a job's entrypoint (another command) or a config's
        # key=value arguments.
        if words and self.program_of(words[0]) not in (None, ("external", None)):
            self.check_command(where, words, strict=False)

    def check_manta(self, where, args):
        path, i = (), 0
        while i < len(args):
            subs, options, ok = self.cli.level(path)
            if not ok:
                return self.error(where, "`manta %s --help` printed nothing" % " ".join(path))
            w = args[i]
            if w == "--":
                return self.check_entrypoint(where, args[i + 1:])
            if w.startswith("-"):
                if w.split("=")[0] not in options:
                    self.error(where, "`%s`: %s has no such option" % (w.split("=")[0], " ".join(("manta",) + path)))
            elif subs:
                if w not in subs:
                    return self.error(where, "`%s`: %s has no such subcommand" % (w, " ".join(("manta",) + path)))
                path += (w,)
            i += 1

    def run_help_command(self, where, kind, words):
        argv = ["manta" if kind[0] == "manta" else kind[1]] + [w for w in words[1:]]
        status, out = self.tree.run(tuple(argv))
        # abseil's --help exits 1 after printing the flags.
        printed = status is not None and out.strip() and ("sage" in out or "Flags from" in out or "Options" in out)
        if not printed or status not in (0, 1) or "not expected" in out or "Unknown command line flag" in out:
            last = " / ".join(l.strip() for l in out.strip().split("\n")[-2:])
            self.error(where, "`%s` did not print its usage (status %s): %s" % (" ".join(argv), status, last[:200]))

    # ---- names

    def check_path(self, where, token, doc_dir):
        token = token.rstrip(".,;:)")
        if token.startswith("build/"):
            m = re.match(r"^build/bin/([\w-]+)$", token)
            if m and m.group(1) not in self.tree.binaries:
                self.error(where, "`%s`: no such binary was built" % token)
            return
        if not PATHLIKE.match(token) or token.split("/")[0] not in self.tree.top or "<" in token:
            return
        candidates = [token]
        brace = re.search(r"\{([^{}]*)\}", token)
        if brace:
            candidates = [token[:brace.start()] + part + token[brace.end():] for part in brace.group(1).split(",")]
        for c in candidates:
            if not glob.glob(os.path.join(self.tree.root, c)):
                self.error(where, "`%s`: no such file or folder" % c)

    def check_file_function(self, where, span):
        m = FILE_FUNC.match(span)
        if not m:
            return False
        path, name = m.group(1), m.group(2)
        if not self.tree.exists(path):
            self.error(where, "`%s`: no such file" % path)
            return True
        words = self.tree.words_of(path)
        for part in re.split(r"::|\.", name):
            if part.lstrip("~") not in words:
                self.error(where, "`%s`: %s does not mention %s" % (span, path, part))
        return True

    def check_identifier(self, where, span):
        brace = re.search(r"\{([\w,]*)\}", span)
        if brace and "," in brace.group(1) and not span.endswith("}"):
            # ray_grpc_server_req_{new,finished}_total: each name
            for part in brace.group(1).split(","):
                self.check_identifier(where, span[:brace.start()] + part + span[brace.end():])
            return
        span = re.sub(r"\{.*\}$", "", span)  # a metric's labels
        if span.endswith("_*") and IDENT.match(span[:-1]):
            if not any(w.startswith(span[:-1]) for w in self.tree.words):
                self.error(where, "`%s`: no name in the tree starts with %s" % (span, span[:-1]))
            return
        if not IDENT.match(span) or span[0].isdigit():
            return
        for part in re.split(r"::|\.", span.rstrip("()")):
            if part.lstrip("~") not in self.tree.words:
                self.error(where, "`%s`: `%s` appears nowhere in the tree" % (span, part))
                return

    def check_loose_flag(self, where, span):
        m = CMAKE_OPT.match(span)
        if m:
            if m.group(1) not in self.tree.cmake_words and not m.group(1).startswith("CMAKE_"):
                self.error(where, "`%s`: no CMake file declares %s" % (span, m.group(1)))
            return True
        m = LOOSE_FLAG.match(span)
        if not m:
            return False
        if m.group(1) not in self.all_flags():
            self.error(where, "`%s`: no program or script takes %s" % (span, m.group(1)))
        return True

    def check_span(self, where, span, doc_dir):
        span = span.strip()
        if self.check_file_function(where, span) or self.check_loose_flag(where, span):
            return
        try:
            words = shlex.split(span)
        except ValueError:
            words = span.split()
        first = next((w for w in words if not re.match(r"^[A-Za-z_]\w*=", w)), "")
        if self.program_of(first) not in (None, ("external", None)):
            self.check_command(where, words, strict=False)
        for w in words:
            self.check_path(where, w, doc_dir)
        if len(words) == 1 or re.match(r"^[A-Za-z_]\w*\{", span):
            self.check_identifier(where, span)

    def check_link(self, where, target, doc):
        if re.match(r"^[a-z]+:", target):
            return
        path, _, anchor = target.partition("#")
        rel = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
        if not self.tree.exists(rel):
            return self.error(where, "link `%s`: no such file %s" % (target, rel))
        if anchor and rel.endswith(".md"):
            text = self.docs.get(rel) or self.tree.read(rel) or ""
            slugs = {slug(h) for h in re.findall(r"^#+ (.*)$", text, re.M)}
            if anchor not in slugs:
                self.error(where, "link `%s`: %s has no heading #%s" % (target, rel, anchor))

    def check_excerpt(self, where, lines):
        m = re.match(r"^\s*(?://|#)\s*([\w./-]+\.\w+)\s*$", lines[0]) if lines else None
        if not m or "/" not in m.group(1) or not self.tree.exists(m.group(1)):
            return
        source = [l.rstrip() for l in (self.tree.read(m.group(1)) or "").split("\n")]
        at = 0
        for line in lines[1:]:
            if not line.strip() or line.strip() in ("...", "// ...", "# ..."):
                continue
            try:
                at = source.index(line.rstrip(), at) + 1
            except ValueError:
                return self.error(where, "excerpt of %s: line not found there (in order): %s" %
                                  (m.group(1), line.strip()))

    # ---- a doc

    def check_doc(self, rel, text):
        doc = Doc(rel, text)
        doc_dir = os.path.dirname(rel)
        for starts, text in paragraphs(doc.prose):

            def where(m):
                return "%s:%d" % (rel, max(n for off, n in starts if off <= m.start()))

            if text.count("`") % 2:
                self.error("%s:%d" % (rel, starts[0][1]), "a `span` is not closed in its paragraph")
            for m in SPAN.finditer(text):
                self.check_span(where(m), m.group(1), doc_dir)
            for m in LINK.finditer(text):
                self.check_link(where(m), m.group(1), rel)
        for first, lang, lines in doc.blocks:
            where = "%s:%d" % (rel, first)
            self.check_excerpt(where, lines)
            if lang in ("", "text"):
                # Layouts and output: the tree's paths they name exist.
                for i, line in enumerate(lines):
                    for token in re.findall(r"[\w.@+/-]+", line):
                        self.check_path("%s:%d" % (rel, first + 1 + i), token.strip("./"), doc_dir)
            if lang not in ("sh", "bash", "shell"):
                continue
            numbered = [(first + 1 + i, l) for i, l in enumerate(lines)]
            for n, line in logical_lines(numbered):
                for words in split_commands(line):
                    self.check_command("%s:%d" % (rel, n), words, strict=True)
                    for w in words:
                        self.check_path("%s:%d" % (rel, n), w, doc_dir)

    def check_docs(self, docs):
        """docs: {relative path: text}. Returns the errors."""
        self.docs = docs
        self.errors = []
        self._reported = set()
        self.used_binaries = set()
        for text in docs.values():
            for word in re.findall(r"(?:build/bin/|^|\s|`)([a-z][a-z0-9_]*)\b", text, re.M):
                if word in self.tree.binaries and not word.startswith(NO_HELP):
                    self.used_binaries.add(word)
        self._all_flags = None
        self.tree.prefetch([(b,) for b in sorted(self.used_binaries)])
        self.cli.prefetch()
        for rel in sorted(docs):
            self.check_doc(rel, docs[rel])
        return list(self.errors)


def slug(heading):
    s = re.sub(r"[`*_]", "", heading.strip().lower())
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def load_docs(root):
    docs = {}
    for rel in ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md")):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            docs[rel] = f.read()
    return docs


# One planted error per kind, each with what its report must say.
PLANTED = [
    ("```sh\nmanta start --head --no-such-flag\n```", "--no-such-flag`: manta start has no such option"),
    ("```sh\nmanta lisst nodes\n```", "`lisst`: manta has no such subcommand"),
    ("```sh\nbuild/bin/gcs_server --storage_nspace=x\n```", "`--storage_nspace`: gcs_server has no such flag"),
    ("```sh\nbuild/bin/no_such_program --port=1\n```", "no such binary"),
    ("```sh\nmanta job submit -- build/bin/maxtext_trainer --max_failure=3 base.yml\n```",
     "`--max_failure`: maxtext_trainer has no such flag"),
    ("```sh\nmanta_serve --helpfull --bogus\n```", "did not print its usage"),
    ("Drain with `--drain-grace-secs=N`.", "no program or script takes --drain-grace-secs"),
    ("Build with `-DMANTA_NO_SUCH_OPTION=ON`.", "no CMake file declares MANTA_NO_SUCH_OPTION"),
    ("See `gcs/no_such_manager.cc`.", "`gcs/no_such_manager.cc`: no such file"),
    ("```\nraylet/     the node daemon (raylet/no_such_link.h)\n```", "`raylet/no_such_link.h`: no such file"),
    ("See `gcs/node_manager.cc:NodeManager::HandleNoSuchCall`.", "does not mention HandleNoSuchCall"),
    ("Set `MANTA_NO_SUCH_VARIABLE`.", "`MANTA_NO_SUCH_VARIABLE` appears nowhere"),
    ("Watch `ray_no_such_metric{Name}`.", "`ray_no_such_metric` appears nowhere"),
    ("```sh\nscripts/build.sh --no-such-option\n```", "`--no-such-option`: scripts/build.sh takes no such flag"),
    ("See [the guide](no-such-guide.md).", "no such file docs/no-such-guide.md"),
    ("See [the layout](architecture.md#no-such-heading).", "has no heading #no-such-heading"),
    ("```cpp\n// examples/counter.cc\nint Add(int a, int b) { return a - b; }\n```", "excerpt of examples/counter.cc"),
]


def self_test(checker, docs, baseline):
    """Plants each error in docs/cli.md and expects it reported; returns
    the failures."""
    failures = []
    for planted, expected in PLANTED:
        copy = dict(docs)
        copy["docs/cli.md"] = copy.get("docs/cli.md", "") + "\n\n" + planted + "\n"
        found = [e for e in checker.check_docs(copy) if e not in baseline]
        if not any(expected in e for e in found):
            failures.append("self-test: planted %r, expected a report with %r, got %r" % (planted, expected, found))
    return failures


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.dirname(here))
    parser.add_argument("--bin-dir", default=None, help="the built programs (default: ROOT/build/bin)")
    parser.add_argument("--no-self-test", action="store_true")
    args = parser.parse_args()
    tree = Tree(args.root, args.bin_dir or os.path.join(args.root, "build", "bin"))
    if not tree.binaries:
        print("check_docs: no programs in %s: build first" % tree.bin_dir)
        return 1
    checker = Checker(tree)
    docs = load_docs(args.root)
    errors = checker.check_docs(docs)
    for e in errors:
        print(e)
    failures = [] if args.no_self_test else self_test(checker, docs, set(errors))
    for f in failures:
        print(f)
    print("check_docs: %d docs, %d errors%s" %
          (len(docs), len(errors), "" if args.no_self_test else ", %d of %d planted errors missed" %
           (len(failures), len(PLANTED))))
    return 1 if errors or failures else 0


if __name__ == "__main__":
    sys.exit(main())
