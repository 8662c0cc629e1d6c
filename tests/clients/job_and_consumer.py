"""An ingestion job and a consumer of pg_eventtime, written as users write them with psycopg 3.

The job reads orders from an ordered log of two partitions (as a Kafka topic), each record with
its partition and offset, and sends them by COPY (every fifth batch by eventtime.ingest, as JSON)
in batches, each batch in one transaction with the watermark it allows (the greatest event time
so far less a lag). The pipeline dedups by those offsets (offset_column, source_column): no ledger.
The job starts, and restarts, from the offsets the pipeline committed (eventtime.sources), as
Kafka Connect's exactly-once sinks do. It crashes twice: once before a batch commits (the
connection is dropped; it restarts from the committed offsets, which send the batch again), once
after a commit but before the job learns of it (it retries the batch blindly: every row is at or
below its partition's committed offset, a duplicate).

The consumer runs beside it in a thread: LISTEN eventtime, and on each notification (or every
half second) reads the typed feed after the cursor it stored, writes what it consumed and the
new cursor in one transaction of its own, and is restarted halfway from the cursor it committed.

Checks, against the source rows and the history as the database holds them:
- every offset is counted once, in its window's latest version, whatever was redelivered, and
  the committed offsets are the log's last; the pipeline keeps no ledger of ids;
- the consumer saw every version of the history exactly once, and the versions of each window in
  order; numeric sums arrived as Decimal with every digit.

Run by `scripts/test.sh clients` with PGHOST, PGPORT, PGUSER and the database name as argument.
"""

import datetime as dt
import functools
import json
import random
import sys
import threading
import time
from decimal import Decimal

import psycopg
from psycopg.types.json import Jsonb

DB = sys.argv[1] if len(sys.argv) > 1 else "eventtime_clients"
UTC = dt.timezone.utc
START = dt.datetime(2026, 10, 1, tzinfo=UTC)
LAG = dt.timedelta(hours=2)
STORES = ["web", "app", "shop-1", "shop-2"]


def connect(**kw):
    return psycopg.connect(dbname=DB, **kw)


def setup():
    with connect(autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS consumed, consumer_cursor")
        c.execute("SELECT eventtime.drop_pipeline(name) FROM eventtime.pipelines WHERE name = 'orders_hourly'")
        c.execute("DROP TABLE IF EXISTS orders")
        c.execute(
            "CREATE TABLE orders (part int, off bigint, order_id bigint, store text, amount numeric, ordered_at timestamptz)"
        )
        c.execute(
            """SELECT eventtime.create_pipeline(
                   name => 'orders_hourly', source => 'orders', event_time => 'ordered_at',
                   key => ARRAY['store'], offset_column => 'off', source_column => 'part', window_size => '1 hour',
                   allowed_lateness => %s, aggregates => 'count(*) AS orders, sum(amount) AS revenue')""",
            (dt.timedelta(hours=3),),  # psycopg sends a timedelta as '03:00:00'
        )
        # The consumer's own tables: what it consumed, and its cursor, committed together.
        c.execute(
            """CREATE TABLE consumed (seq bigserial, store text, window_start timestamptz,
                   version int, kind text, orders bigint, revenue numeric,
                   PRIMARY KEY (store, window_start, version))"""
        )
        c.execute("CREATE TABLE consumer_cursor (id int PRIMARY KEY, cursor text)")
        c.execute("INSERT INTO consumer_cursor VALUES (1, NULL)")


PARTITIONS = 2
COLUMNS = ("part", "off", "order_id", "store", "amount", "ordered_at")


def orders(n, seed=7):
    """The log: n orders in roughly increasing time, some 3 hours out of order (late) and some 6
    hours (past the grace), with amounts of many digits; order i is in partition i % 2, at the
    next offset of that partition (from 1)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        t = START + dt.timedelta(seconds=30 * i) - dt.timedelta(seconds=rng.choice([0, 0, 0, 0, 600, 10800, 21600]))
        amount = Decimal(rng.randrange(1, 10**12)) / Decimal(10**4)
        out.append((i % PARTITIONS, i // PARTITIONS + 1, i + 1, rng.choice(STORES), amount, t))
    return out


def committed_offsets(conn):
    """Where the job resumes: each partition's offset committed with the rows it counted."""
    with conn.transaction():
        rows = conn.execute(
            """SELECT source, "offset" FROM eventtime.sources
               WHERE pipeline = 'orders_hourly' AND "offset" IS NOT NULL"""
        ).fetchall()
    return {int(source): offset for source, offset in rows}


def resume_position(log, committed):
    """The first record of the log not yet counted: after every partition's committed offset
    (the log interleaves the partitions, so it is the first record above its partition's)."""
    for i, r in enumerate(log):
        if r[1] > committed.get(r[0], 0):
            return i
    return len(log)


def as_json(batch):
    """Rows for eventtime.ingest: objects keyed by column, numeric and timestamptz as strings
    (exact, and parsed by PostgreSQL), which json.dumps(default=str) gives for Decimal and
    datetime."""
    return Jsonb([dict(zip(COLUMNS, row)) for row in batch], dumps=functools.partial(json.dumps, default=str))


def send(conn, batch, max_seen, by_ingest=False):
    """One batch in one transaction: COPY (or eventtime.ingest), then the watermark the job may
    announce."""
    with conn.transaction():
        if by_ingest:
            conn.execute("SELECT * FROM eventtime.ingest('orders_hourly', %s)", (as_json(batch),))
        else:
            with conn.cursor().copy(f"COPY orders ({', '.join(COLUMNS)}) FROM STDIN") as cp:
                for row in batch:
                    cp.write_row(row)
        conn.execute("SELECT eventtime.advance_watermark('orders_hourly', %s)", (max_seen - LAG,))


def job(rows, consumer, batch_size=100):
    conn = connect()
    # The job starts from the offsets the pipeline committed (none yet: the log's start).
    done = resume_position(rows, committed_offsets(conn))
    crashed_before = crashed_after = False
    max_seen = START
    while done < len(rows):
        batch = rows[done : done + batch_size]
        bmax = max(max_seen, max(r[5] for r in batch))
        if not crashed_before and done >= len(rows) // 3:
            # The process dies mid-batch: the rows went, the commit did not. It restarts from the
            # committed offsets, which are before this batch.
            crashed_before = True
            with conn.cursor().copy(f"COPY orders ({', '.join(COLUMNS)}) FROM STDIN") as cp:
                for row in batch:
                    cp.write_row(row)
            conn.close()
            conn = connect()
            done = resume_position(rows, committed_offsets(conn))
            continue
        send(conn, batch, bmax, by_ingest=(done // batch_size) % 5 == 4)
        max_seen = bmax
        if done >= len(rows) // 2 and not consumer.restarted.is_set():
            # Halfway, the job waits until the consumer has read something and restarted, so the
            # restart falls mid-run however the threads are scheduled.
            assert consumer.restarted.wait(60), "the consumer did not restart within 60 s"
        if not crashed_after and done >= 2 * len(rows) // 3:
            # The connection breaks after the commit, before the job learns of it: it retries the
            # batch as it was (at or below the committed offsets: all duplicates).
            crashed_after = True
            conn.close()
            conn = connect()
            continue
        done += len(batch)
    with conn.transaction():
        conn.execute("SELECT eventtime.advance_watermark('orders_hourly', 'infinity')")
    assert committed_offsets(conn) == {p: max(r[1] for r in rows if r[0] == p) for p in range(PARTITIONS)}, (
        "the committed offsets are not the log's last"
    )
    conn.close()


class Consumer:
    def __init__(self):
        self.stop = threading.Event()
        self.restarted = threading.Event()
        self.batches = 0
        self.error = None

    def drain(self, conn):
        """Reads the feed after the stored cursor and commits what it consumed with the cursor."""
        with conn.transaction():
            (cursor,) = conn.execute("SELECT cursor FROM consumer_cursor WHERE id = 1").fetchone()
            rows = conn.execute(
                "SELECT store, window_start, version, kind, orders, revenue, cursor FROM orders_hourly_changes(%s)",
                (cursor,),
            ).fetchall()
            if not rows:
                return 0
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO consumed (store, window_start, version, kind, orders, revenue) VALUES (%s, %s, %s, %s, %s, %s)",
                    [r[:6] for r in rows],
                )
            conn.execute("UPDATE consumer_cursor SET cursor = %s WHERE id = 1", (rows[-1][6],))
            for r in rows:
                if not isinstance(r[5], Decimal):
                    raise AssertionError(f"revenue arrived as {type(r[5]).__name__}, not Decimal")
        self.batches += 1
        return len(rows)

    def run(self):
        try:
            self.loop()
        except BaseException as e:  # reported by the main thread
            self.error = e

    def loop(self):
        listener = connect(autocommit=True)
        listener.execute("LISTEN eventtime")
        conn = connect()
        consumed = 0
        while True:
            final = self.stop.is_set()
            consumed += self.drain(conn)
            if final:
                break
            if not self.restarted.is_set() and consumed > 0:
                # The consumer restarts: it resumes from the cursor it committed.
                conn.close()
                conn = connect()
                self.restarted.set()
            for _ in listener.notifies(timeout=0.5, stop_after=1):
                pass
        conn.close()
        listener.close()


def check():
    with connect() as c:
        distinct = {}
        for part, off, oid, store, amount, t in orders(N):
            distinct[(part, off)] = (store, amount, t)
        # What the pipeline counted: accepted and late rows in windows, refused rows apart.
        refused = {
            (int(r[0]), int(r[1]))
            for r in c.execute("""SELECT "row"->>'part', "row"->>'off' FROM orders_hourly_refused""")
        }
        expected = {}
        for offset, (store, amount, t) in distinct.items():
            if offset in refused:
                continue
            w = t.replace(minute=0, second=0, microsecond=0)
            n, s = expected.get((store, w), (0, Decimal(0)))
            expected[(store, w)] = (n + 1, s + amount)
        latest = {
            (r[0], r[1]): (r[2], r[3])
            for r in c.execute("SELECT store, window_start, orders, revenue FROM orders_hourly_latest")
        }
        assert latest == expected, f"latest differs from the distinct orders: {len(latest)} vs {len(expected)} windows"
        (refused_total,) = c.execute("SELECT count(*) FROM orders_hourly_refused").fetchone()
        assert refused_total == len(refused), "an order refused twice"
        assert 0 < len(refused) < N // 10, f"{len(refused)} refused orders: the run should refuse a few"
        (sent,) = c.execute("SELECT count(*) FROM orders").fetchone()
        assert sent > N, "the redeliveries should be in the source table"
        (ledgers,) = c.execute(
            """SELECT count(*) FROM pg_tables WHERE schemaname = '_eventtime'
                   AND tablename = (SELECT format('p%s_ids', id) FROM _eventtime.pipeline WHERE name = 'orders_hourly')"""
        ).fetchone()
        assert ledgers == 0, "a pipeline with offsets keeps no ledger of ids"

        history = c.execute(
            "SELECT store, window_start, version, kind, orders, revenue FROM orders_hourly_history ORDER BY 1, 2, 3"
        ).fetchall()
        consumed = c.execute(
            "SELECT store, window_start, version, kind, orders, revenue FROM consumed ORDER BY 1, 2, 3"
        ).fetchall()
        assert consumed == history, f"consumed {len(consumed)} versions, the history has {len(history)}"
        (late,) = c.execute("SELECT count(*) FROM orders_hourly_history WHERE version > 1").fetchone()
        assert late > 0, "the run should make late versions"
        (out_of_order,) = c.execute(
            """SELECT count(*) FROM (SELECT version, lag(version) OVER (PARTITION BY store, window_start ORDER BY seq) AS prev
                   FROM consumed) v WHERE prev IS NOT NULL AND version <> prev + 1"""
        ).fetchone()
        assert out_of_order == 0, f"{out_of_order} versions consumed out of order"
        return len(history), late, len(refused), sent


N = 6000

if __name__ == "__main__":
    setup()
    consumer = Consumer()
    thread = threading.Thread(target=consumer.run)
    thread.start()
    t0 = time.monotonic()
    try:
        job(orders(N), consumer)
    finally:
        consumer.stop.set()
        thread.join()
        if consumer.error:  # the consumer's failure first: the job's would follow from it
            raise consumer.error
    versions, late, refused, sent = check()
    print(
        f"job and consumer (psycopg {psycopg.__version__}): {sent} rows sent for {N} orders, {refused} refused, "
        f"{versions} versions ({late} late) consumed once each in {consumer.batches} reads, "
        f"{time.monotonic() - t0:.1f} s"
    )
