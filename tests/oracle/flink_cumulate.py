"""Flink's answer to a cumulate scenario of tests/oracle/scenarios (its window TVF CUMULATE has no
allowed lateness: the scenario's rows come in order of event time and it has no advance): the
rows go through a CSV file into a table whose watermark is its event time, and one query of
CUMULATE grouped by key and window gives every window. Usage: flink_cumulate.py SCENARIO ANSWER
(PyFlink from PyPI: pip install apache-flink; Java 17)."""
import csv
import json
import os
import sys
import tempfile
from zoneinfo import ZoneInfo

import pyflink
from pyflink.table import EnvironmentSettings, TableEnvironment

sc = json.load(open(sys.argv[1]))
w = sc["window"]
assert w["kind"] == "cumulate" and sc["allowed_lateness_s"] == 0
events = [e for st in sc["steps"] for e in st.get("events", [])]
assert all("events" in st for st in sc["steps"]), "CUMULATE has no advances to play"
assert [e["t"] for e in events] == sorted(e["t"] for e in events), "rows must be in order"
tmp = tempfile.mkdtemp()
with open(os.path.join(tmp, "ev.csv"), "w", newline="") as f:
    out = csv.writer(f)
    for e in events:
        out.writerow([e["id"], e["key"], repr(e["v"]), round(e["t"] * 1000)])
env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
env.get_config().set("table.local-time-zone", w.get("time_zone", "UTC"))
env.get_config().set("parallelism.default", "1")
env.execute_sql(f"""
    CREATE TABLE ev (id STRING, k STRING, v DECIMAL(12, 3), ms BIGINT,
                     ts AS TO_TIMESTAMP_LTZ(ms, 3), WATERMARK FOR ts AS ts)
    WITH ('connector' = 'filesystem', 'path' = '{tmp}/ev.csv', 'format' = 'csv')""")
rows = env.execute_sql(f"""
    SELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS total, LISTAGG(id) AS ids
    FROM TABLE(CUMULATE(TABLE ev, DESCRIPTOR(ts), INTERVAL '{w['step_s']}' SECOND(9),
                        INTERVAL '{w['size_s']}' SECOND(9)))
    GROUP BY k, window_start, window_end""").collect()
# Flink gives window bounds as wall-clock times of the zone: as instants (a wall-clock time
# that does not exist, such as 02:00 on the day clocks go forward, is the instant of the hour
# after it, and its window the same as that one's: it is kept once).
zone = ZoneInfo(w.get("time_zone", "UTC"))


def instant(t):
    return t.replace(tzinfo=zone).timestamp()


firings = []
seen = {}
with rows:
    for r in rows:
        k, ws, we, n, total, ids = r
        s = instant(ws)
        e = instant(we)
        if (k, s, e) in seen:
            assert seen[(k, s, e)] == (n, total), "two windows of one instant differ"
            continue
        seen[(k, s, e)] = (n, total)
        firings.append({"key": k, "window_start": s, "window_end": e, "timing": "ON_TIME",
                        "pane_index": 0, "count": n, "sum": float(total), "ids": sorted(ids.split(",")),
                        "step": len(sc["steps"]), "dedup_count": n, "dedup_sum": float(total)})
firings.sort(key=lambda p: (p["key"], p["window_start"], p["window_end"]))
json.dump({"engine": f"pyflink {pyflink.__version__ if hasattr(pyflink, '__version__') else ''} (Table API, CUMULATE window TVF)",
           "watermark_shift_ms": 0, "firings": firings, "dropped": []},
          open(sys.argv[2], "w"), indent=1)
print(len(firings), "windows")
