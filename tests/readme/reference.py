#!/usr/bin/env python3
"""Checks docs/reference.md against the extension's own catalog, so that the two cannot drift.

Usage: PGHOST=... PGPORT=... PGUSER=... tests/readme/reference.py DBNAME

DBNAME is a database with the extension and pipelines in it (the README tier runs this after
check.py, in the database the documents' examples made, which has pipelines of every window
kind). Nothing is changed there: what the check creates is in pg_temp, in a transaction it rolls
back. Every finding names the line of docs/reference.md it concerns.

- Functions. Each `sql signature` block that starts with `eventtime.` documents one function:
  its arguments, defaults and result are declared again, as written, as a function in pg_temp,
  and PostgreSQL's own rendering of them (pg_get_function_arguments, pg_get_function_result)
  must equal the real function's. The documented functions must be exactly the functions of
  schema eventtime. The `<view schema>.<name>_changes` block is checked against every
  pipeline's own function, its placeholders expanded with that pipeline's keys and aggregates.
- Views of schema eventtime. Each has a section headed `eventtime.<view>` whose first table
  (`| column | type | ...`) lists its columns in order, with their types.
- A pipeline's views. The table headed `| column | type | views | meaning |` lists their columns
  in order; for each pipeline of the database and each of its six views, the columns whose
  `views` cell names the view (or `all`, or `versions`) must be the view's columns, in order,
  with their types: *keys* are the pipeline's key columns with the source's types, *aggregates*
  are the names of its aggregate list with the types PostgreSQL gives the same aggregates over
  the source table, `event_id` has the event-id column's type (text without one), and a row
  marked `sessions only` is in the views of session pipelines only.
- Errors. The codes of the table under `## Errors` must be exactly the SQLSTATEs the extension
  raises: the ERRCODE_ names src/pg/error.rs maps its errors to, turned into codes by the server
  (PL/pgSQL's condition names), so that a code raised and not documented, or documented and
  never raised, fails.

Exits 0 when everything matches, 1 otherwise, 2 on bad usage.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference.md"
ERRORS_RS = ROOT / "src" / "pg" / "error.rs"
SEP = "\x1f"
VIEW_SUFFIXES = ["_history", "_latest", "_sealed", "_provisional", "_current", "_refused"]
VERSION_VIEWS = {"_history", "_latest", "_sealed", "_current"}


class Db:
    def __init__(self, name):
        self.name = name

    def run(self, sql, what):
        """Runs sql in one transaction that is rolled back; returns the rows of its last query."""
        env = dict(os.environ)
        env["PGCLIENTENCODING"] = "UTF8"
        cmd = [os.environ.get("PSQL", "psql"), "-X", "-q", "-A", "-t", "-F", SEP, "-v", "ON_ERROR_STOP=1",
               "-d", self.name, "-f", "-"]
        script = "SET client_min_messages = warning;\nSET check_function_bodies = off;\nBEGIN;\n" + sql + "\nROLLBACK;\n"
        r = subprocess.run(cmd, env=env, input=script, capture_output=True, text=True, encoding="utf-8")
        if r.returncode != 0:
            raise RuntimeError(f"{what}: psql exited with {r.returncode}: {r.stderr.strip()}")
        return [line.split(SEP) for line in r.stdout.splitlines() if line != ""]


def lit(s):
    return "'" + s.replace("'", "''") + "'"


def ident(s):
    return '"' + s.replace('"', '""') + '"'


def fenced_blocks(lines, info):
    """(line number of the opening fence, text) of each block fenced with exactly `info`."""
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^ {0,3}(`{3,})(.*)$", lines[i])
        if m:
            fence, tag, start, body = m.group(1), m.group(2).strip(), i + 1, []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(fence):
                body.append(lines[i])
                i += 1
            if tag == info:
                out.append((start, "\n".join(body)))
        i += 1
    return out


def tables(lines):
    """(line of the header, header cells, [(line, cells)]) of each Markdown table."""
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|[-:| ]+\|$", lines[i + 1]):
            header = cells(lines[i])
            rows, j = [], i + 2
            while j < len(lines) and lines[j].startswith("|"):
                rows.append((j + 1, cells(lines[j])))
                j += 1
            out.append((i + 1, header, rows))
            i = j
        else:
            i += 1
    return out


def cells(line):
    # No cell of these tables has a `|` inside code, so splitting on bars is exact.
    return [c.strip() for c in line.strip().strip("|").split("|")]


def code(cell):
    """The text of the first code span of a cell, or None."""
    m = re.search(r"`([^`]+)`", cell)
    return m.group(1) if m else None


def top_level_split(s, sep=","):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def parse_signature(text):
    """(schema-qualified name, argument text, result text) of a documented signature."""
    if "(" not in text:
        return None
    name = text[:text.index("(")].strip()
    # The arguments end at the parenthesis that closes the first one: find it by depth.
    depth = 0
    open_at = text.index("(")
    for k in range(open_at, len(text)):
        if text[k] == "(":
            depth += 1
        elif text[k] == ")":
            depth -= 1
            if depth == 0:
                break
    args = text[open_at + 1:k]
    rest = text[k + 1:].strip()
    if not rest.startswith("RETURNS"):
        return None
    return name, " ".join(args.split()), " ".join(rest[len("RETURNS"):].split())


class Checker:
    def __init__(self, db):
        self.db = db
        self.lines = REFERENCE.read_text(encoding="utf-8").split("\n")
        self.failures = []
        self.checked = {"functions": 0, "view columns": 0, "pipeline views": 0, "sqlstates": 0}

    def fail(self, line, msg):
        self.failures.append(f"docs/reference.md:{line}: {msg}")

    def canonical_types(self, names):
        """PostgreSQL's own name of each documented type (timestamptz -> timestamp with time zone)."""
        names = sorted(set(names))
        if not names:
            return {}
        sql = "SELECT t, t::regtype::text FROM unnest(ARRAY[" + ", ".join(lit(n) for n in names) + "]) t;"
        return {a: b for a, b in self.db.run(sql, "documented types")}

    # ---- functions -------------------------------------------------------------------------

    def check_functions(self):
        documented = []
        changes = None
        for line, text in fenced_blocks(self.lines, "sql signature"):
            sig = parse_signature(text)
            if sig is None:
                self.fail(line, "a `sql signature` block that is not `name(arguments) RETURNS result`")
                continue
            name, args, result = sig
            if name.startswith("eventtime."):
                documented.append((line, name[len("eventtime."):], args, result))
            elif name == "<view schema>.<name>_changes":
                changes = (line, args, result)
            else:
                self.fail(line, f"a signature of {name}, which is neither in schema eventtime nor a pipeline's")
        real = self.db.run(
            "SELECT p.proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid) FROM pg_proc p "
            "WHERE p.pronamespace = 'eventtime'::regnamespace ORDER BY 1, 2;", "functions of schema eventtime")
        if documented:
            sql = []
            for i, (line, name, args, result) in enumerate(documented):
                sql.append(f"CREATE FUNCTION pg_temp.et_doc_{i}({args}) RETURNS {result} "
                           f"LANGUAGE plpgsql AS $et$BEGIN END$et$;")
            sql.append("SELECT substr(p.proname, 8)::int, pg_get_function_arguments(p.oid), "
                       "pg_get_function_result(p.oid) FROM pg_proc p "
                       "WHERE p.pronamespace = pg_my_temp_schema() AND p.proname LIKE 'et\\_doc\\_%' ORDER BY 1;")
            try:
                rendered = {int(i): (a, r) for i, a, r in self.db.run("\n".join(sql), "documented signatures")}
            except RuntimeError as e:
                self.fail(documented[0][0], f"the documented signatures do not declare as written: {e}")
                return changes
            real_by_name = {}
            for name, args, result in real:
                real_by_name.setdefault(name, []).append((args, result))
            documented_set = set()
            for i, (line, name, _, _) in enumerate(documented):
                self.checked["functions"] += 1
                args, result = rendered[i]
                documented_set.add((name, args, result))
                if name not in real_by_name:
                    self.fail(line, f"eventtime.{name} is documented but the extension has no such function")
                elif (args, result) not in real_by_name[name]:
                    have = "; ".join(f"({a}) RETURNS {r}" for a, r in real_by_name[name])
                    self.fail(line, f"eventtime.{name} is documented as ({args}) RETURNS {result}, "
                                    f"but the extension has {have}")
            for name, args, result in real:
                if (name, args, result) not in documented_set and name not in {d[1] for d in documented}:
                    self.fail(1, f"eventtime.{name}({args}) is a function of the extension with no "
                                 f"`sql signature` block")
        else:
            self.fail(1, "no `sql signature` block documents a function of schema eventtime")
        return changes

    # ---- views of schema eventtime ---------------------------------------------------------

    def section_table(self, heading_code, header_prefix):
        """The first table after the `## ...<heading_code>...` heading whose header starts so."""
        for i, line in enumerate(self.lines):
            if line.startswith("## ") and f"`{heading_code}`" in line:
                for hline, header, rows in tables(self.lines[i:]):
                    if header[:len(header_prefix)] == header_prefix:
                        return hline + i, rows
                    break
                return i + 1, None
        return None, None

    def check_catalog_views(self):
        views = self.db.run(
            "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_class c "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
            "WHERE c.relnamespace = 'eventtime'::regnamespace AND c.relkind IN ('v', 'r', 'm') "
            "ORDER BY c.relname, a.attnum;", "views of schema eventtime")
        by_view = {}
        for rel, col, typ in views:
            by_view.setdefault(rel, []).append((col, typ))
        for rel, real_cols in by_view.items():
            line, rows = self.section_table(f"eventtime.{rel}", ["column", "type"])
            if line is None:
                self.fail(1, f"eventtime.{rel} has no section headed `eventtime.{rel}`")
                continue
            if rows is None:
                self.fail(line, f"the section of eventtime.{rel} has no `| column | type | ... |` table "
                                f"right after its heading")
                continue
            doc = [(l, code(c[0]), code(c[1])) for l, c in rows]
            types = self.canonical_types([t for _, _, t in doc if t])
            doc_cols = [(n, types.get(t, t)) for _, n, t in doc]
            self.checked["view columns"] += len(doc_cols)
            if doc_cols != real_cols:
                self.fail(line, f"eventtime.{rel}'s columns are documented as {fmt(doc_cols)}, "
                                f"but the view has {fmt(real_cols)}")

    # ---- a pipeline's views and its _changes function ---------------------------------------

    def check_pipeline_views(self, changes):
        line, rows = None, None
        for hline, header, trows in tables(self.lines):
            if header[:3] == ["column", "type", "views"]:
                line, rows = hline, trows
                break
        if rows is None:
            self.fail(1, "no `| column | type | views | meaning |` table of a pipeline's views")
            return
        doc = []
        for l, c in rows:
            name = code(c[0]) or c[0].strip("*")
            doc.append((l, name, c[1], c[2]))
        types = self.canonical_types([code(t) for _, _, t, _ in doc if code(t) and not t.startswith("as ")
                                      and "`text` without" not in t])
        pipelines = self.db.run(
            "SELECT p.name, n.nspname, c.relname, p.window_kind, coalesce(p.event_id::text, ''), p.aggregates, "
            "coalesce((SELECT string_agg(a.attname || ':' || format_type(a.atttypid, a.atttypmod), ',' ORDER BY k.o) "
            "FROM unnest(p.key_columns) WITH ORDINALITY k(col, o) "
            "JOIN pg_attribute a ON a.attrelid = p.source AND a.attname = k.col), ''), "
            "coalesce((SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            "WHERE a.attrelid = p.source AND a.attname = p.event_id), 'text') "
            "FROM eventtime.pipelines p JOIN pg_class c ON c.oid = p.source "
            "JOIN pg_namespace n ON n.oid = c.relnamespace ORDER BY p.name;", "pipelines")
        if not pipelines:
            self.fail(line, f"the database {self.db.name} has no pipeline to check the views against")
            return
        for name, schema, table, kind, _event_id, aggregates, keys, event_id_type in pipelines:
            self.checked["pipeline views"] += 1
            key_cols = [tuple(k.split(":", 1)) for k in keys.split(",")] if keys else []
            agg_cols = self.db.run(
                f"CREATE TEMP VIEW et_doc_aggs AS SELECT {aggregates} FROM {ident(schema)}.{ident(table)};\n"
                "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
                "WHERE a.attrelid = 'et_doc_aggs'::regclass AND a.attnum > 0 ORDER BY a.attnum;",
                f"the aggregates of pipeline {name}")
            agg_cols = [tuple(a) for a in agg_cols]
            for suffix in VIEW_SUFFIXES:
                expected = []
                for _, col, typ, views in doc:
                    names = {v.strip() for v in re.sub(r"[`,]", " ", views).split()}
                    if not ("all" in names or suffix in names or ("versions" in names and suffix in VERSION_VIEWS)):
                        continue
                    if "sessions only" in views and kind != "session":
                        continue
                    if col == "keys":
                        expected += key_cols
                    elif col == "aggregates":
                        expected += agg_cols
                    elif col == "event_id":
                        expected.append((col, event_id_type))
                    else:
                        expected.append((col, types.get(code(typ), code(typ))))
                view = name + suffix
                real = self.db.run(
                    "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
                    f"WHERE a.attrelid = {lit(ident(schema) + '.' + ident(view))}::regclass "
                    "AND a.attnum > 0 ORDER BY a.attnum;", f"view {view}")
                real = [tuple(r) for r in real]
                if real != expected:
                    self.fail(line, f"{schema}.{view} ({kind}) has the columns {fmt(real)}, but the table "
                                    f"gives {fmt(expected)}")
            if changes is not None:
                self.check_changes(changes, name, schema, kind, key_cols, agg_cols)

    def check_changes(self, changes, name, schema, kind, key_cols, agg_cols):
        line, args, result = changes
        m = re.match(r"^TABLE\s*\((.*)\)$", result)
        if not m:
            self.fail(line, "the `_changes` signature does not return TABLE (...)")
            return
        expected = []
        pieces = []
        for part in top_level_split(m.group(1)):
            if part.startswith("["):
                inside, _, after = part[1:].partition("]")
                pieces += [(True, x) for x in top_level_split(inside)]
                if after.strip():
                    pieces.append((False, after.strip()))
            else:
                pieces.append((False, part))
        for sessions_only, p in pieces:
            if p == "(sessions)":
                continue
            if p.startswith("<"):
                if p.startswith("<key"):
                    expected += key_cols
                elif p.startswith("<aggregate"):
                    expected += agg_cols
                else:
                    self.fail(line, f"unknown placeholder {p} in the `_changes` signature")
                continue
            if sessions_only and kind != "session":
                continue
            col, typ = p.split(None, 1)
            expected.append((col, self.canonical_types([typ])[typ]))
        fn = f"{ident(schema)}.{ident(name + '_changes')}"
        rows = self.db.run(
            f"CREATE FUNCTION pg_temp.et_doc_changes({args}) RETURNS int LANGUAGE sql AS 'SELECT 1';\n"
            "SELECT pg_get_function_arguments(p.oid), "
            "(SELECT pg_get_function_arguments(d.oid) FROM pg_proc d WHERE d.pronamespace = pg_my_temp_schema() "
            "AND d.proname = 'et_doc_changes'), "
            "(SELECT string_agg(n || ':' || format_type(t, NULL), ',' ORDER BY o) FROM unnest(p.proargnames, "
            "p.proallargtypes::oid[], p.proargmodes::text[]) WITH ORDINALITY u(n, t, m, o) WHERE m = 't') "
            f"FROM pg_proc p WHERE p.oid = to_regproc({lit(fn)});", f"function {name}_changes")
        if not rows:
            self.fail(line, f"pipeline {name} has no function {schema}.{name}_changes")
            return
        real_args, doc_args, real_cols = rows[0]
        real_cols = [tuple(c.split(":", 1)) for c in real_cols.split(",")]
        if real_args != doc_args:
            self.fail(line, f"{name}_changes takes ({real_args}), documented as ({doc_args})")
        if real_cols != expected:
            self.fail(line, f"{name}_changes ({kind}) returns {fmt(real_cols)}, documented as {fmt(expected)}")

    # ---- SQLSTATEs -------------------------------------------------------------------------

    def check_errors(self):
        line, rows = None, None
        for i, l in enumerate(self.lines):
            if l.strip() == "## Errors":
                line = i + 1
                for hline, header, trows in tables(self.lines[i:]):
                    if header and header[0] == "SQLSTATE":
                        line, rows = hline + i, trows
                    break
        if rows is None:
            self.fail(line or 1, "no `| SQLSTATE | when |` table under `## Errors`")
            return
        doc = {}
        for l, c in rows:
            doc.setdefault(c[0].strip("`"), l)
        source = ERRORS_RS.read_text(encoding="utf-8")
        m = re.search(r"fn sqlstate\(&self\).*?\n    }\n", source, re.DOTALL)
        if not m:
            self.fail(1, "src/pg/error.rs has no `fn sqlstate(&self)` to read the raised codes from")
            return
        names = sorted(set(re.findall(r"ERRCODE_([A-Z0-9_]+)", m.group(0))))
        sql = []
        for n in names:
            sql.append(f"DO $et$ BEGIN RAISE {n.lower()}; EXCEPTION WHEN OTHERS THEN "
                       f"PERFORM set_config('et_doc.{n.lower()}', SQLSTATE, true); END $et$;")
        sql.append("SELECT " + ", ".join(f"current_setting('et_doc.{n.lower()}')" for n in names) + ";")
        codes = dict(zip(names, self.db.run("\n".join(sql), "the SQLSTATEs of src/pg/error.rs")[0]))
        raised = {}
        for n, c in codes.items():
            raised.setdefault(c, []).append(n)
        self.checked["sqlstates"] = len(raised)
        for c, ns in sorted(raised.items()):
            if c not in doc:
                self.fail(line, f"SQLSTATE {c} ({', '.join('ERRCODE_' + n for n in ns)}) is raised by the extension "
                                f"(src/pg/error.rs) but not in the Errors table")
        for c, l in sorted(doc.items()):
            if c not in raised:
                self.fail(l, f"SQLSTATE {c} is in the Errors table but src/pg/error.rs never raises it")


def fmt(cols):
    return "(" + ", ".join(f"{n} {t}" for n, t in cols) + ")"


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    c = Checker(Db(sys.argv[1]))
    try:
        changes = c.check_functions()
        c.check_catalog_views()
        c.check_pipeline_views(changes)
        c.check_errors()
    except RuntimeError as e:
        print(f"reference check could not run: {e}", file=sys.stderr)
        return 1
    for f in c.failures:
        print(f, file=sys.stderr)
    k = c.checked
    print(f"reference: {k['functions']} functions, {k['view columns']} columns of eventtime's views, "
          f"{k['pipeline views']} pipelines' views and _changes, {k['sqlstates']} SQLSTATEs checked; "
          f"{len(c.failures)} difference(s)")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
