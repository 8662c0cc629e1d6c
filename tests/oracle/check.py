#!/usr/bin/env python3
"""The oracle tier: pg_eventtime against what Apache Beam and Apache Flink answered.

Each scenario of scenarios/ (tumbling, hopping and session windows with allowed lateness, batches
of events and watermark advances; format in README.md) is played through the SQL API: a source
table and a pipeline keyed by `key` with event id `id`, `count(*)` and `sum(v)`, one `INSERT` per
batch, one `eventtime.advance_watermark` per advance, `'infinity'` at the end. After every step
the pipeline's history is read, so that each version is known with the step that wrote it. Then
every window's versions (kind, count, sum, step) are compared with each engine's panes, and the
refused rows with the ids the engines dropped, allowing only the differences that README.md lists
(SPEC's design): panes of redelivered ids are compared deduplicated, and a pane that repeats its
window's previous content is no version; Flink's late panes of one step are one version (SPEC
fires once per statement); sessions' `merged` versions have no counterpart; Beam is left out where
it accepts a row at the deadline instant itself (b02, b09) and where its session merges are
defective (b12, b15), with Flink as the reference there.

Usage: check.py DBNAME (PGHOST, PGPORT, PGUSER, PSQL from the environment). Exit status 1 and a
report per scenario that differs.
"""

import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PSQL = os.environ.get("PSQL", "psql")
# Where an engine differs from SPEC by design or by a defect of its own (README.md and the
# scenarios' descriptions), the other engine is the reference.
LEFT_OUT = {
    "beam": {
        # Beam accepts a row when the watermark is exactly window_end + allowed_lateness; SPEC §2
        # refuses it, as Flink and Beam Java do.
        "b02": "deadline instant",
        "b09": "deadline instant",
        "b11": "deadline instant",
        # Beam Python's DirectRunner keeps expired sessions' state and stalls after an early pane.
        "b12": "DirectRunner defect",
        "b13": "DirectRunner keeps expired state",
        "b15": "DirectRunner defect",
    },
    "flink": {
        # SPEC §7 merges sessions that overlap strictly and judges a row's landing on its own
        # window, as Beam does; Flink merges touching sessions and judges the merged window.
        "b06": "merges touching sessions",
        "b14": "judges the merged session",
    },
}
# Flink fires a window when the watermark reaches its end - 1 ms and drops a row when the
# watermark reaches window_end - 1 ms + allowed_lateness: its answers are SPEC's for the same
# scenario with every watermark 1 ms later, which is how it is played against them.
SHIFT_S = {"beam": 0.0, "flink": 0.001}
EPS = 1e-6


def psql(db, sql):
    out = subprocess.run(
        [PSQL, "-X", "-q", "-At", "-F", "|", "-v", "ON_ERROR_STOP=1", "-d", db],
        input=sql,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"psql failed: {out.stderr.strip()}")
    return out.stdout


def lit(s):
    return "'" + str(s).replace("'", "''") + "'"


def ts(seconds):
    return f"to_timestamp({float(seconds)!r})"


def script(n, sc, shift):
    """The SQL that plays scenario `sc` as pipeline o<n>, every watermark `shift` seconds later,
    printing the history after each step
    (lines H|step|key|start|end|version|kind|count|sum) and the refused rows at the end
    (R|id|start|end)."""
    name = f"o{n}"
    w = sc["window"]
    if w["kind"] == "tumbling":
        windows = f"window_size => make_interval(secs => {w['size_s']})"
    elif w["kind"] == "hopping":
        windows = (
            f"window_size => make_interval(secs => {w['size_s']}), "
            f"window_slide => make_interval(secs => {w['slide_s']})"
        )
    elif w["kind"] == "cumulate" and "time_zone" in w:
        # A period of local days in the zone: its days have 23 or 25 hours at clock changes.
        windows = (
            f"window_size => make_interval(days => {w['size_s'] // 86400}), "
            f"cumulate_step => make_interval(secs => {w['step_s']}), time_zone => {lit(w['time_zone'])}"
        )
    elif w["kind"] == "cumulate":
        windows = (
            f"window_size => make_interval(secs => {w['size_s']}), "
            f"cumulate_step => make_interval(secs => {w['step_s']})"
        )
    elif w["kind"] == "session":
        windows = f"session_gap => make_interval(secs => {w['gap_s']})"
    else:
        raise ValueError(f"unknown window kind {w['kind']}")
    sql = [
        "SET client_min_messages = warning;",
        "SET TimeZone = 'UTC';",
        f"DROP TABLE IF EXISTS {name}_src;",
        f"CREATE TABLE {name}_src (id text, key text, t timestamptz, v numeric);",
        f"SELECT * FROM eventtime.create_pipeline(name => {lit(name)}, source => '{name}_src', "
        f"event_time => 't', key => ARRAY['key'], event_id => 'id', {windows}, "
        f"allowed_lateness => make_interval(secs => {sc['allowed_lateness_s']}), max_ahead => NULL, "
        "aggregates => 'count(*) AS n, sum(v) AS total');",
    ]
    history = (
        "SELECT 'H', {step}, key, extract(epoch FROM window_start), extract(epoch FROM window_end), "
        f"version, kind, n, total FROM {name}_history;"
    )
    steps = sc["steps"]
    for i, st in enumerate(steps):
        if "events" in st:
            if st["events"]:
                rows = ", ".join(
                    f"({lit(e['id'])}, {lit(e['key'])}, {ts(e['t'])}, {e['v']!r})"
                    for e in st["events"]
                )
                sql.append(f"INSERT INTO {name}_src VALUES {rows};")
        else:
            sql.append(
                f"SELECT * FROM eventtime.advance_watermark({lit(name)}, {ts(st['watermark'] + shift)});"
            )
        sql.append(history.format(step=i))
    sql.append(f"SELECT * FROM eventtime.advance_watermark({lit(name)}, 'infinity');")
    sql.append(history.format(step=len(steps)))
    sql.append(
        f"SELECT 'R', event_id, extract(epoch FROM window_start), extract(epoch FROM window_end) FROM {name}_refused;"
    )
    sql.append(f"SELECT * FROM eventtime.drop_pipeline({lit(name)});")
    sql.append(f"DROP TABLE {name}_src;")
    return "\n".join(sql) + "\n"


def ours(output):
    """The pipeline's versions per window, each with the first step after which it was there, and
    its refused (id, window) pairs."""
    first_seen = {}
    refused = set()
    for line in output.splitlines():
        f = line.split("|")
        if f[0] == "H":
            step, key, start, end, version, kind, n, total = f[1:]
            k = (key, float(start), float(end), int(version))
            if k not in first_seen:
                first_seen[k] = (int(step), kind, int(n), float(total) if total else 0.0)
        elif f[0] == "R":
            refused.add((f[1], float(f[2]), float(f[3])))
    windows = {}
    for (key, start, end, version), (step, kind, n, total) in sorted(first_seen.items()):
        if kind == "merged":
            continue
        windows.setdefault((key, start, end), []).append((kind, n, total, step))
    return windows, refused


def engine(answer, flink):
    """An engine's panes per window as versions: deduplicated content, repeats left out, and for
    Flink the late panes of one step collapsed into the last."""
    panes = {}
    for p in answer["firings"]:
        w = (p["key"], float(p["window_start"]), float(p["window_end"]))
        panes.setdefault(w, []).append(p)
    windows = {}
    for w, ps in panes.items():
        ps.sort(key=lambda p: p["pane_index"])
        if flink:
            collapsed = []
            for p in ps:
                if (
                    collapsed
                    and p["timing"] == "LATE"
                    and collapsed[-1]["timing"] == "LATE"
                    and collapsed[-1]["step"] == p["step"]
                ):
                    collapsed[-1] = p
                else:
                    collapsed.append(p)
            ps = collapsed
        versions = []
        for p in ps:
            content = (p["dedup_count"], float(p["dedup_sum"]))
            if versions and (versions[-1][1], versions[-1][2]) == content:
                continue
            kind = {"ON_TIME": "main", "LATE": "late"}[p["timing"]]
            versions.append((kind, content[0], content[1], p["step"]))
        windows[w] = versions
    accepted = {}
    for p in answer["firings"]:
        w = (p["key"], float(p["window_start"]), float(p["window_end"]))
        accepted.setdefault(w, set()).update(p["ids"])
    return windows, set(answer.get("dropped", [])), accepted


def same_versions(a, b):
    return len(a) == len(b) and all(
        x[0] == y[0] and x[1] == y[1] and abs(x[2] - y[2]) < EPS and x[3] == y[3]
        for x, y in zip(a, b)
    )


def compare(label, got, refused, answer, flink):
    want, dropped, accepted = engine(answer, flink)
    problems = []
    for w in sorted(set(got) | set(want)):
        g, e = got.get(w, []), want.get(w, [])
        if not same_versions(g, e):
            problems.append(f"  window {w}: pg_eventtime {g}, {label} {e}")
    refused_ids = {r[0] for r in refused}
    for i in sorted(dropped - refused_ids):
        problems.append(f"  {label} dropped {i}; pg_eventtime did not refuse it")
    for i, start, end in sorted(refused):
        for w, ids in accepted.items():
            if w[1] == start and w[2] == end and i in ids and i not in dropped:
                problems.append(
                    f"  pg_eventtime refused {i} for [{start}, {end}) of key {w[0]}; {label} counted it there"
                )
    return problems


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check.py DBNAME")
    db = sys.argv[1]
    psql("postgres", f"DROP DATABASE IF EXISTS {db};\nCREATE DATABASE {db};\n")
    psql(db, "CREATE EXTENSION pg_eventtime;\n")
    files = sorted(glob.glob(os.path.join(HERE, "scenarios", "*.json")))
    failed = 0
    compared = {"beam": 0, "flink": 0}
    for n, path in enumerate(files):
        base = os.path.basename(path)
        sc = json.load(open(path))
        problems = []
        engines = 0
        for eng in ("beam", "flink"):
            if base[:3] in LEFT_OUT[eng]:
                continue
            if not os.path.exists(os.path.join(HERE, "expected", eng, base)):
                continue
            got, refused = ours(psql(db, script(n, sc, SHIFT_S[eng])))
            answer = json.load(open(os.path.join(HERE, "expected", eng, base)))
            compared[eng] += 1
            problems += compare(eng, got, refused, answer, eng == "flink")
            engines += 1
        if engines == 0:
            problems.append("  no engine's answer to compare with")
        if problems:
            failed += 1
            print(f"{base}: differs")
            print("\n".join(problems))
    print(
        f"oracle: {len(files)} scenarios, {len(files) - failed} agree "
        f"(against Beam {compared['beam']}, Flink {compared['flink']})"
    )
    psql("postgres", f"DROP DATABASE {db};\n")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
