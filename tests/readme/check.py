#!/usr/bin/env python3
"""Runs the SQL examples of README.md and docs/ and compares the outputs they show.

Usage: PGHOST=... PGPORT=... PGUSER=... tests/readme/check.py DBNAME [FILE.md...]

The documents are README.md and every page of docs/, in the order of DOCS (a page under docs/
missing from DOCS fails the run). Every fenced block whose info string is exactly `sql` is
runnable; blocks fenced as `sql signature` are function signatures and are skipped, and so are
blocks fenced as `sql pg_cron`, which need pg_cron preloaded: the faults tier's pg_cron test runs
those. The database DBNAME is dropped (if it exists) and created; then all runnable blocks run,
in document order, in one psql session, one statement at a time with an \\echo marker before
each, so that the output can be split per statement. Lines `--  ...` right after a statement are
the output it shows: psql's aligned header and rows (psql starts each with a space), without the
`---+---` line and the `(N rows)` footer. They must equal what psql prints, trailing whitespace
aside. Lines `-- text` are prose. Every image a document shows from the repository must exist,
and an SVG must be well-formed XML with an <svg> root; every relative link must point to an
existing file and its anchor to a heading of it. Exits 0 when every statement runs and every
shown output matches, 1 otherwise, 2 on bad usage.
"""

import difflib
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Settings the shown outputs depend on, sent before the first block (not part of the README).
PROLOGUE = """SET TimeZone = 'UTC';
SET DateStyle = 'ISO, MDY';
SET IntervalStyle = 'postgres';
SET client_min_messages = warning;
"""

FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
SEPARATOR = re.compile(r"^-+(\+-+)*$")
FOOTER = re.compile(r"^\(\d+ rows?\)$")
COPY_STDIN = re.compile(r"\s*COPY\b.*\bFROM\s+STDIN\b", re.IGNORECASE | re.DOTALL)
DOLLAR_TAG = re.compile(r"\$([A-Za-z_\u0080-\U0010ffff][A-Za-z_0-9\u0080-\U0010ffff]*)?\$")


class ReadmeError(Exception):
    """The README itself cannot be checked (not a failing example): names its line."""


class Block:
    def __init__(self, name, line, lines):
        self.name = name  # the file, relative to the repository
        self.line = line  # line of the opening fence
        self.lines = lines  # (line, text) of each line inside the fences


class Statement:
    def __init__(self, block, line):
        self.block = block
        self.line = line  # README line where the statement starts
        self.parts = []  # (README line, text) pieces of the statement
        self.shown = []  # shown output lines, without the leading "-- "
        self.shown_line = None

    def text(self):
        return "".join(t for _, t in self.parts)


def sql_blocks(path, name):
    """Fenced blocks of the file: (runnable blocks, number of signature blocks)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    runnable, signatures = [], 0
    i = 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m or (m.group(1)[0] == "`" and "`" in m.group(2)):
            i += 1
            continue
        fence, info, start = m.group(1), m.group(2).strip(), i + 1
        close = re.compile(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$")
        body = []
        i += 1
        while i < len(lines) and not close.match(lines[i]):
            body.append((i + 1, lines[i]))
            i += 1
        if i == len(lines):
            raise ReadmeError(f"{name}:{start}: code block is never closed")
        i += 1
        words = info.split()
        if info == "sql":
            runnable.append(Block(name, start, body))
        elif info == "sql signature":
            signatures += 1
        elif info == "sql pg_cron":
            # Needs pg_cron preloaded: run by the faults tier's pg_cron test, which reads it from
            # the README.
            signatures += 1
        elif words and words[0].lower() == "sql":
            # A near miss (```SQL, ```sql foo) would silently escape the check.
            raise ReadmeError(f"{name}:{start}: unknown info string {info!r} "
                              "(runnable blocks are ```sql, signatures ```sql signature, "
                              "blocks for pg_cron ```sql pg_cron)")
    return runnable, signatures


def split_statements(block, name):
    """The statements of a block, each with the output shown right after it."""
    stmts = []
    cur = None  # statement being read
    last = None  # statement that just ended: shown output may follow
    state = None  # None, "'", "E'", '"', ("$", tag) or ("/*", depth)
    parens = 0
    for lineno, line in block.lines:
        if state is None and cur is None:
            if line.startswith("--  "):
                if last is None:
                    raise ReadmeError(f"{name}:{lineno}: shown output that does not follow a statement")
                if last.shown_line is None:
                    last.shown_line = lineno
                last.shown.append(line[3:])
                continue
            stripped = line.strip()
            if not stripped or stripped.startswith("--"):
                last = None
                continue
            if stripped.startswith("\\"):
                raise ReadmeError(f"{name}:{lineno}: psql meta-commands are not supported in README examples")
        elif state is None and line.startswith("--  "):
            raise ReadmeError(f"{name}:{cur.line}: statement has no ';' before the shown output "
                              f"at line {lineno}")
        last = None
        seg = 0  # start of the text of the current statement in this line
        i = 0
        n = len(line)
        while i < n:
            c = line[i]
            if state is None:
                if cur is None:
                    if c.isspace():
                        i += 1
                        seg = i
                        continue
                    if line.startswith("--", i):
                        break  # a comment after the end of a statement
                    cur = Statement(block, lineno)
                    seg = i
                if line.startswith("--", i):
                    break
                if line.startswith("/*", i):
                    state = ("/*", 1)
                    i += 2
                    continue
                if c == "'":
                    prev = line[i - 1] if i > 0 else ""
                    before = line[i - 2] if i > 1 else ""
                    e_string = prev in "eE" and prev != "" and not (before.isalnum() or before in "_$")
                    state = "E'" if e_string else "'"
                elif c == '"':
                    state = '"'
                elif c == "$":
                    prev = line[i - 1] if i > 0 else ""
                    m = DOLLAR_TAG.match(line, i)
                    if m and not (prev.isalnum() or prev in "_$"):
                        state = ("$", m.group(0))
                        i = m.end()
                        continue
                elif c == "\\":
                    raise ReadmeError(f"{name}:{lineno}: psql meta-commands are not supported in README examples")
                elif c == "(":
                    parens += 1
                elif c == ")":
                    parens = max(0, parens - 1)
                elif c == ";" and parens == 0:
                    cur.parts.append((lineno, line[seg:i + 1] + "\n"))
                    if COPY_STDIN.match(cur.text()):
                        raise ReadmeError(f"{name}:{cur.line}: COPY ... FROM STDIN is not supported in README examples")
                    stmts.append(cur)
                    last, cur = cur, None
                    i += 1
                    seg = i
                    continue
                i += 1
            elif state in ("'", "E'"):
                if state == "E'" and c == "\\":
                    i += 2
                elif c == "'":
                    if line.startswith("''", i):
                        i += 2
                    else:
                        state = None
                        i += 1
                else:
                    i += 1
            elif state == '"':
                if line.startswith('""', i):
                    i += 2
                elif c == '"':
                    state = None
                    i += 1
                else:
                    i += 1
            elif state[0] == "$":
                j = line.find(state[1], i)
                if j < 0:
                    i = n
                else:
                    i = j + len(state[1])
                    state = None
            else:  # block comment
                if line.startswith("/*", i):
                    state = ("/*", state[1] + 1)
                    i += 2
                elif line.startswith("*/", i):
                    state = None if state[1] == 1 else ("/*", state[1] - 1)
                    i += 2
                else:
                    i += 1
        if cur is not None:
            cur.parts.append((lineno, line[seg:] + "\n"))
    if cur is not None:
        raise ReadmeError(f"{name}:{cur.line}: statement has no ';' before the end of its block")
    if state is not None:
        raise ReadmeError(f"{name}:{block.line}: block ends inside a string, identifier or comment")
    return stmts


def psql_env():
    env = dict(os.environ)
    env["PGCLIENTENCODING"] = "UTF8"
    env.pop("PGDATABASE", None)
    return env


def psql(args, **kw):
    cmd = [os.environ.get("PSQL", "psql"), "-X", "-v", "ON_ERROR_STOP=1", "-P", "pager=off"] + args
    return subprocess.run(cmd, env=psql_env(), capture_output=True, text=True, encoding="utf-8", **kw)


def table_lines(out):
    """psql's output of one statement as shown in the README: no separator, no footer."""
    lines = out.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if len(lines) >= 2 and SEPARATOR.match(lines[1]):
        del lines[1]
    if lines and FOOTER.match(lines[-1]):
        lines.pop()
    return [l.rstrip() for l in lines]


IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
# Inline links and images: [text](target) and ![alt](target), outside code spans.
LINK = re.compile(r"!?\[(?:[^\]`]|`[^`]*`)*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")

# The documents whose examples run, in this order, in one session: the README's example is the
# start of the story the guides and the reference continue. Every Markdown file under docs/ must
# be listed (a new page cannot escape the check).
DOCS = [
    "README.md",
    "docs/corrections.md",
    "docs/roles.md",
    "docs/operations.md",
    "docs/window-kinds.md",
    "docs/ingestion.md",
    "docs/reference.md",
    "docs/install.md",
    "docs/upgrading.md",
    "docs/testing.md",
    "docs/benchmark.md",
]


def outside_code(path):
    """(line number, text) of the lines of a Markdown file outside fenced blocks, code spans
    blanked."""
    out = []
    fence = None
    for no, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        m = FENCE_OPEN.match(line)
        if fence is None and m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence = m.group(1)
            continue
        if fence is not None:
            if re.match(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$", line):
                fence = None
            continue
        out.append((no, line))
    return out


def slug(title):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    title = re.sub(r"`([^`]*)`", r"\1", title)
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)
    title = title.strip().lower()
    title = "".join(c for c in title if c.isalnum() or c in " _-")
    return title.replace(" ", "-")


def anchors(path):
    seen = {}
    result = set()
    for _, line in outside_code(path):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else f"{base}-{n}")
    return result


def check_links(paths):
    """Every relative link of the documents resolves: the file exists, and an anchor names a
    heading of the file it points into."""
    problems = []
    cache = {}
    for path in paths:
        name = path.relative_to(ROOT)
        for no, line in outside_code(path):
            for target in LINK.findall(re.sub(r"`[^`]*`", "``", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # https:, mailto: ...
                file, _, anchor = target.partition("#")
                dest = (path.parent / file).resolve() if file else path
                if not dest.exists():
                    problems.append(f"{name}:{no}: link {target} points to nothing")
                    continue
                if anchor:
                    if dest.suffix != ".md" or not dest.is_file():
                        problems.append(f"{name}:{no}: link {target} has an anchor into a file that is not Markdown")
                        continue
                    if dest not in cache:
                        cache[dest] = anchors(dest)
                    if anchor not in cache[dest]:
                        problems.append(f"{name}:{no}: link {target}: no heading with anchor #{anchor} in "
                                        f"{dest.relative_to(ROOT)}")
    return problems


def check_images(path):
    """Every image a document shows from the repository exists, and an SVG is well-formed XML
    whose root is an <svg> element: a picture that would not render fails the tier."""
    import xml.etree.ElementTree as ET

    name = path.relative_to(ROOT)
    problems = []
    for no, line in outside_code(path):
        for target in IMAGE.findall(line):
            if "://" in target:
                continue
            img = (path.parent / target).resolve()
            if not img.is_file():
                problems.append(f"{name}:{no}: image {target} does not exist")
            elif img.suffix == ".svg":
                try:
                    root = ET.parse(img).getroot()
                except ET.ParseError as e:
                    problems.append(f"{name}:{no}: {target} is not well-formed XML: {e}")
                    continue
                if root.tag not in ("svg", "{http://www.w3.org/2000/svg}svg"):
                    problems.append(f"{name}:{no}: {target} has root <{root.tag}>, not <svg>")
    return problems


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    db = sys.argv[1]
    if db in ("postgres", "template0", "template1"):
        print(f"refusing to drop database {db}", file=sys.stderr)
        return 2
    if len(sys.argv) > 2:
        paths = [Path(a).resolve() for a in sys.argv[2:]]
    else:
        paths = [ROOT / d for d in DOCS]
        listed = set(paths)
        unlisted = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md") if p not in listed)
        missing = [str(p.relative_to(ROOT)) for p in paths if not p.is_file()]
        if unlisted or missing:
            for u in unlisted:
                print(f"{u} is not in the run order of tests/readme/check.py (DOCS)", file=sys.stderr)
            for m in missing:
                print(f"{m} is in the run order of tests/readme/check.py but does not exist", file=sys.stderr)
            return 1
    problems = []
    for path in paths:
        problems += check_images(path)
    problems += check_links(paths)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1

    try:
        blocks, signatures = [], 0
        for path in paths:
            b, n = sql_blocks(path, str(path.relative_to(ROOT)))
            blocks += b
            signatures += n
        stmts = [s for b in blocks for s in split_statements(b, b.name)]
        for b in blocks:
            if not any(s.block is b for s in stmts):
                raise ReadmeError(f"{b.name}:{b.line}: sql block without a statement")
    except ReadmeError as e:
        print(f"documents cannot be checked: {e}", file=sys.stderr)
        return 1
    if not stmts:
        print("documents cannot be checked: no runnable sql block", file=sys.stderr)
        return 1

    quoted = '"' + db.replace('"', '""') + '"'
    r = psql(["-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {quoted}", "-c", f"CREATE DATABASE {quoted}"])
    if r.returncode != 0:
        print(f"cannot create database {db}:\n{r.stderr}", file=sys.stderr)
        return 1

    # One script: prologue, then a marker before each statement. Script line -> document line, to
    # translate psql's error positions.
    marker = f"@@readme-check-{secrets.token_hex(8)}"
    script = [PROLOGUE]
    where = {}
    lineno = PROLOGUE.count("\n")
    for k, s in enumerate(stmts):
        script.append(f"\\echo {marker} {k}\n")
        lineno += 1
        for doc_line, text in s.parts:
            lineno += 1
            where[lineno] = f"{s.block.name}:{doc_line}"
            script.append(text)
    script.append(f"\\echo {marker} end\n")
    r = psql(["-d", db, "-P", "format=aligned", "-f", "-"], input="".join(script))

    sections = {}
    current = None
    for line in r.stdout.split("\n"):
        if line.startswith(marker + " "):
            current = line[len(marker) + 1:]
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    stderr = re.sub(r"psql:<stdin>:(\d+):", lambda m: f"{where.get(int(m.group(1)), '?')}:", r.stderr)

    # Statements that ran to the end; after a failure, the one that failed is the last marker.
    finished = len(stmts) if "end" in sections else max((int(k) for k in sections), default=0)
    failed = r.returncode != 0 or "end" not in sections

    failures = 0
    shown = 0
    for k, s in enumerate(stmts[:finished]):
        if not s.shown:
            continue
        shown += 1
        name = s.block.name
        expected = [l.rstrip() for l in s.shown]
        actual = table_lines("\n".join(sections[str(k)]))
        if expected != actual:
            failures += 1
            diff = difflib.unified_diff(expected, actual, f"{name}:{s.shown_line} (shown)", "psql", lineterm="")
            print(f"{name}:{s.shown_line}: shown output differs from what psql prints for the statement at "
                  f"line {s.line}:\n{s.text().rstrip()}\n" + "\n".join(diff) + "\n", file=sys.stderr)

    if failed:
        if sections and "end" not in sections:
            s = stmts[finished]
            print(f"{s.block.name}:{s.line}: statement of the block at line {s.block.line} failed:\n"
                  f"{s.text().rstrip()}\n", file=sys.stderr)
        print(f"psql exited with {r.returncode}:\n{stderr.rstrip()}", file=sys.stderr)
        print(f"stopped after {finished} of {len(stmts)} statements; "
              f"{failures} of {shown} shown outputs before it differ", file=sys.stderr)
        return 1
    if stderr.strip():
        print(stderr.rstrip(), file=sys.stderr)
    print(f"checked {len(paths)} documents: {len(blocks)} blocks, {len(stmts)} statements, {shown} shown "
          f"outputs ({signatures} signature and pg_cron blocks skipped)")
    if failures:
        print(f"{failures} of {shown} shown outputs differ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
