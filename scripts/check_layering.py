#!/usr/bin/env python3
"""Checks that docs/architecture.md is true to the code, in two ways; exits 1 if not.

1. Layering. The "## Layout" block of docs/architecture.md lists the parts of the code in order (one entry a
   line; "a, b" on one line is one layer); that list is the one statement of the order. Every #include "..."
   in src/, include/ and tools/ must go to its own layer or one above it, except the cycles in EXCEPTIONS.
2. Names. Every file path the document names must exist, and every identifier inside `backticks` in the
   sections that trace an iteration or describe the seams (level-2 headings matching TRACED_SECTIONS) must
   occur in the code (src/, include/, tools/, proto/), and a `Class::member` must be a member of that class,
   so a renamed function or file cannot leave the document behind.

    python3 scripts/check_layering.py            # prints each violation, one a line
    python3 scripts/check_layering.py --self-test   # the checks must catch a planted fault of each kind
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = "docs/architecture.md"
SCANNED = ("src", "include", "tools")
SOURCE_EXT = (".hpp", ".cpp", ".cu", ".cuh", ".h")
TRACED_SECTIONS = re.compile(r"iteration|seam", re.I)

# Includes that go up the order, each a real cycle that is not resolved yet: (including file, included
# header) -> why. Keep this the only place such an exception lives.
# (None now: issue 37 split the loop from the optimizer, so solver.hpp's include of the engine goes down.)
EXCEPTIONS = {}


def part_of(path):
    """The part a repository path belongs to: a folder under strata/, a top-level file's stem, or a module."""
    path = path.replace("\\", "/")
    if path.startswith("tools/"):
        return "tools"
    for prefix in ("include/strata/", "src/strata/"):
        if path.startswith(prefix):
            rest = path[len(prefix):].split("/")
            return rest[0] if len(rest) > 1 else os.path.splitext(rest[0])[0]
    if path.startswith("src/"):  # a module of its own beside libstrata (src/image_codecs/)
        return path.split("/")[1]
    return None


def entry_names(column):
    """Part names in a Layout entry's first column: "syncedmem, blob" -> [syncedmem, blob]."""
    names = []
    for token in column.split(","):
        token = token.strip().rstrip("/")
        if not token:
            continue
        first = token.split("/")[0]
        if first in ("src", "include"):
            last = token.split("/")[-1]
            if last == "strata":  # the include/strata/, src/strata/ heading: a container, not a part
                continue
            names.append(last)
        else:
            names.append(first)  # proto/strata.proto -> proto, tools/ -> tools
    return names


def read_layers(doc_lines):
    """{part: rank} from the first code block under '## Layout'; parts on one line share a rank."""
    ranks, in_section, in_block = {}, False, False
    for line in doc_lines:
        if line.startswith("## "):
            in_section = line.strip() == "## Layout"
            continue
        if not in_section:
            continue
        if line.startswith("```"):
            if in_block:
                break
            in_block = True
            continue
        if not in_block or not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent > 2:  # a continuation of the description above
            continue
        column = re.split(r" {2,}", line.strip(), maxsplit=1)[0]
        rank = len(set(ranks.values()))
        for name in entry_names(column):
            ranks.setdefault(name, rank)
    return ranks


def includes(rel):
    """(line number, repository path of the header) for each quoted #include of a file."""
    here = os.path.dirname(rel)
    with open(os.path.join(ROOT, rel), encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m:
                continue
            name = m.group(1)
            if name.startswith("strata/"):  # a public header, or a private one under src/ (on the include path)
                private = "src/" + name
                yield number, private if os.path.exists(os.path.join(ROOT, private)) else "include/" + name
            else:
                yield number, os.path.normpath(os.path.join(here, name))


def source_files(folders, extensions):
    for folder in folders:
        for base, dirs, files in os.walk(os.path.join(ROOT, folder)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(extensions):
                    yield os.path.relpath(os.path.join(base, name), ROOT)


def check_layering(doc_lines):
    ranks = read_layers(doc_lines)
    problems = []
    if not ranks:
        return [f"{DOC}: no parts found in the code block under '## Layout'"]
    unlisted = {}
    for rel in source_files(SCANNED, SOURCE_EXT):
        src = part_of(rel)
        if src not in ranks:
            unlisted.setdefault(src, rel)
            continue
        for number, header in includes(rel):
            dst = part_of(header)
            if dst is None or dst == src:
                continue
            if dst not in ranks:
                unlisted.setdefault(dst, f"{rel}:{number}")
                continue
            if ranks[dst] <= ranks[src] or (rel, header) in EXCEPTIONS:
                continue
            problems.append(f"{rel}:{number}: {src} -> {dst} ({header} is below {src} in {DOC}'s Layout)")
    for name, where in sorted(unlisted.items()):
        problems.append(f"{where}: part '{name}' is not in {DOC}'s Layout list")
    for (rel, header), why in EXCEPTIONS.items():
        still = os.path.exists(os.path.join(ROOT, rel)) and any(h == header for _, h in includes(rel))
        if not still:
            problems.append(f"{rel}: the exception for {header} ({why}) no longer applies: remove it")
    return problems


def expand_braces(text):
    """a_{b,c}_d -> [a_b_d, a_c_d] (as the shell does), for every {x,y} group."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", text)
    if not m:
        return [text]
    out = []
    for choice in m.group(1).split(","):
        out.extend(expand_braces(text[:m.start()] + choice + text[m.end():]))
    return out


FILE_RE = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+\.(?:\{[\w,]+\}|cpp|hpp|cu|cuh|h|proto|sh|py|md|txt))\b")


def check_names(doc_lines):
    files = set()
    for base, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
        for name in names:
            files.add(os.path.relpath(os.path.join(base, name), ROOT).replace("\\", "/"))
    words, texts = set(), []
    for rel in source_files(SCANNED + ("proto",), SOURCE_EXT + (".proto",)):
        with open(os.path.join(ROOT, rel), encoding="utf-8", errors="replace") as f:
            texts.append(f.read())
            words.update(re.findall(r"[A-Za-z_]\w*", texts[-1]))
    code = "\n".join(texts)

    def has_member(cls, member):
        """Class::member is defined out of line (Class<T>::member too) or named inside class Class's body."""
        if re.search(r"\b%s(<[^<>;{}]*>)?::%s\b" % (cls, member), code):
            return True
        for m in re.finditer(r"\b(?:class|struct)\s+(?:\w+\s+)?%s\b[^;{]*\{" % cls, code):
            depth, i = 1, m.end()
            while depth and i < len(code):
                depth += (code[i] == "{") - (code[i] == "}")
                i += 1
            if re.search(r"\b%s\b" % member, code[m.end():i]):
                return True
        return False

    def file_exists(name):
        return any(f == name or f.endswith("/" + name) for f in files)

    problems, traced, any_traced = [], False, False
    for number, line in enumerate(doc_lines, 1):
        if line.startswith("## "):
            traced = bool(TRACED_SECTIONS.search(line))
            any_traced = any_traced or traced
        for m in FILE_RE.finditer(line):
            for name in expand_braces(m.group(1)):
                if not file_exists(name):
                    problems.append(f"{DOC}:{number}: names {name}, which no file of the repository is")
        if not traced:
            continue
        for span in re.findall(r"`([^`]+)`", line):
            if FILE_RE.fullmatch(span.strip()):
                continue
            for text in expand_braces(span):
                for word in re.findall(r"[A-Za-z_]\w*", text):
                    if word not in words:
                        problems.append(f"{DOC}:{number}: `{span}` names {word}, which the code does not")
                for cls, member in re.findall(r"\b([A-Z]\w*)::(\w+)", text):
                    if cls in words and member in words and not has_member(cls, member):
                        problems.append(f"{DOC}:{number}: `{span}`: {cls} has no member {member}")
    if not any_traced:
        problems.append(f"{DOC}: no level-2 heading matches {TRACED_SECTIONS.pattern!r}: nothing traced to check")
    return problems


def check(root):
    global ROOT
    ROOT = root
    with open(os.path.join(ROOT, DOC), encoding="utf-8") as f:
        doc_lines = f.read().splitlines()
    return check_layering(doc_lines) + check_names(doc_lines)


def self_test():
    """The checks on a small tree with one fault of each kind: each must be reported, and nothing else."""
    import tempfile
    files = {
        DOC: "## Layout\n\n```\ninclude/strata/, src/strata/ the tree\n  low                 first\n"
             "  high, other         second\n```\n\n## One iteration\n\n`Present::Call` in high.cpp, "
             "`Absent` in gone.cpp, `Present::Call2`\n",
        "include/strata/low.hpp": '#include "strata/high.hpp"\n',   # goes up the order
        "src/strata/high.cpp": '#include "strata/low.hpp"\nvoid Present::Call();\nint Call2;\n',
        "src/strata/stray/x.cpp": "\n",                            # a part the list does not name
    }
    expected = ["include/strata/low.hpp:1: low -> high", "part 'stray'", "the exception for", "names gone.cpp",
                "names Absent", "Present has no member Call2"]
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        # A stale exception is planted too (the real list may be empty).
        global EXCEPTIONS
        saved = EXCEPTIONS
        EXCEPTIONS = dict(saved)
        EXCEPTIONS[("include/strata/low.hpp", "include/strata/gone.hpp")] = "a planted stale exception"
        try:
            problems = check(root)
        finally:
            EXCEPTIONS = saved
    missed = [e for e in expected if not any(e in p for p in problems)]
    extra = [p for p in problems if not any(e in p for e in expected)]
    for m in missed:
        print(f"self-test: not reported: {m}")
    for x in extra:
        print(f"self-test: reported wrongly: {x}")
    return 1 if missed or extra else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    problems = check(ROOT)
    for p in problems:
        print(p)
    if problems:
        print(f"check_layering: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("check_layering: every include follows docs/architecture.md's order; every name it traces exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
