//! The benchmark of pg_eventtime (SPEC §6), run by `scripts/bench.sh` against a live server
//! (PGHOST, PGPORT, PGUSER).
//!
//! Every workload is measured with and without a pipeline in the same run, the sides taking turns
//! (without, with, without, with, ...), and reported as the median of each side and their ratio.
//! (a), (b) and (d) have a third side, the floor ([`Side::Floor`]): the writes the workload needs,
//! made by hand in plain SQL without a pipeline, checked to leave the same state as the pipeline.
//! Each measurement starts from fresh tables, then `CHECKPOINT` and `VACUUM ANALYZE` of the tables
//! and system catalogs involved, so that both sides start equal; only the measured statements are
//! timed, on the client. A missed target is reported, not failed: benchmarks are not tests. The
//! run fails on an error, on a workload that did not do what it should (wrong number of windows
//! fired, rows lost or counted twice, ...), on state rows left after the watermark passed every
//! deadline, on a writer that waited for another's open transaction ((h)) and on a read that
//! scans the whole history ((i)): the last three are SPEC §6's, but they are yes-or-no.
//!
//! (f) is not in SPEC §6, which sets no target for session windows: a session pipeline's load and
//! firing, beside a tumbling pipeline's on the same rows, and checked against sessions computed by
//! plain SQL (gaps and islands) over the same rows.
//!
//! (g) and (h), in `writers.rs`: writers of one window, as throughput against the table alone and
//! as a check that a writer never waits for another's open transaction. (i), in `reads.rs`: the
//! plans and times of reads of the views over a long history. (m), in `memory.rs`: the peak
//! memory of a backend that ingests a large `COPY` of many keys.
//!
//! Options: `--smoke` (sizes divided by ~1000, one run), `--runs N` (default 3),
//! `--only a,b,...` (workloads a to i, m), `--async-commit` (`synchronous_commit = off` in the
//! benchmark's session: commits no longer wait for the WAL flush, which on a shared or slow disk
//! dominates, and blurs, the per-statement times of (b) and (d) and the throughput of (g)).

mod memory;
mod reads;
mod writers;

use postgres::{Client, NoTls};
use std::io::Write as _;
use std::time::{Duration, Instant};

type Res<T> = Result<T, String>;

const DB: &str = "eventtime_bench";

/// The pipeline every workload uses: 1-day windows per key, an event id, two aggregates.
const CREATE_PIPELINE: &str = "SELECT eventtime.create_pipeline(name => 'bench', source => 'ev', \
     event_time => 'at', key => ARRAY['k'], event_id => 'id', window_size => interval '1 day', \
     allowed_lateness => interval '1 day', aggregates => 'count(*) AS n, sum(amount) AS total')";

/// System catalogs that creating and dropping tables, pipelines and views write to.
const CATALOGS: &str = "pg_catalog.pg_class, pg_catalog.pg_attribute, pg_catalog.pg_attrdef, \
     pg_catalog.pg_type, pg_catalog.pg_depend, pg_catalog.pg_constraint, pg_catalog.pg_index, \
     pg_catalog.pg_trigger, pg_catalog.pg_proc, pg_catalog.pg_rewrite, pg_catalog.pg_statistic";

// ---------------------------------------------------------------------------------------------
// Options and sizes

struct Opts {
    smoke: bool,
    async_commit: bool,
    runs: usize,
    only: Vec<char>,
}

impl Opts {
    fn wants(&self, w: char) -> bool {
        self.only.is_empty() || self.only.contains(&w)
    }
}

const USAGE: &str =
    "usage: eventtime-bench [--smoke] [--runs N] [--only a,b,c,d,e,f,g,h,i,m] [--async-commit]";

fn parse_args() -> Res<Opts> {
    let mut o = Opts {
        smoke: false,
        async_commit: false,
        runs: 3,
        only: Vec::new(),
    };
    let mut runs_given = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--smoke" => o.smoke = true,
            "--async-commit" => o.async_commit = true,
            "--runs" => {
                let v = args.next().ok_or("--runs needs a number")?;
                o.runs = v
                    .parse()
                    .map_err(|_| format!("--runs: not a number: {v}"))?;
                if o.runs == 0 {
                    return Err("--runs must be at least 1".into());
                }
                runs_given = true;
            }
            "--only" => {
                let v = args
                    .next()
                    .ok_or("--only needs a list of workloads (a,b,c,d,e,f,g,h,i,m)")?;
                for w in v.split(',').map(str::trim).filter(|w| !w.is_empty()) {
                    match w {
                        "a" | "b" | "c" | "d" | "e" | "f" | "g" | "h" | "i" | "m" => {
                            o.only.push(w.chars().next().unwrap())
                        }
                        _ => return Err(format!("--only: unknown workload {w:?} (a to i, m)")),
                    }
                }
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {a:?}\n{USAGE}")),
        }
    }
    if o.smoke && !runs_given {
        o.runs = 1;
    }
    Ok(o)
}

struct Sizes {
    a_events: usize,
    a_keys: u64,
    a_days: u32,
    b_inserts: usize,
    b_keys: u64,
    c_windows: usize,
    d_rows: usize,
    d_keys: u64,
    d_stmt: usize,
    e_batch: usize,
    e_keys: u64,
    e_days: u32,
    f_users: u64,
    f_stmt: usize,
    /// (g): writers and seconds per side.
    g_conns: usize,
    g_secs: f64,
    /// (i): keys × days of history, and executions of each read timed.
    i_keys: u64,
    i_days: u64,
    i_reps: usize,
    /// (m): rows of the `COPY` and distinct keys among them.
    m_rows: usize,
    m_keys: u64,
}

impl Sizes {
    fn new(smoke: bool) -> Sizes {
        if smoke {
            Sizes {
                a_events: 1_000,
                a_keys: 10,
                a_days: 30,
                b_inserts: 20,
                b_keys: 10,
                c_windows: 100,
                d_rows: 100,
                d_keys: 10,
                d_stmt: 10,
                e_batch: 50,
                e_keys: 10,
                e_days: 29,
                f_users: 20,
                f_stmt: 20,
                g_conns: 8,
                g_secs: 1.0,
                i_keys: 100,
                i_days: 100,
                i_reps: 5,
                m_rows: 2_000,
                m_keys: 1_000,
            }
        } else {
            Sizes {
                a_events: 1_000_000,
                a_keys: 1_000,
                a_days: 30,
                b_inserts: 20_000,
                b_keys: 1_000,
                c_windows: 100_000,
                d_rows: 100_000,
                d_keys: 1_000,
                d_stmt: 100,
                e_batch: 50_000,
                e_keys: 1_000,
                e_days: 29,
                f_users: 10_000,
                f_stmt: 1_000,
                g_conns: 8,
                g_secs: 10.0,
                i_keys: 1_000,
                i_days: 1_000,
                i_reps: 21,
                m_rows: 2_000_000,
                m_keys: 1_000_000,
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Events

/// Deterministic generator (splitmix64): every run benchmarks the same rows.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

/// One row of `ev (id bigint, k int, amount numeric, at timestamptz)`; `day` is a day of
/// January 2026 (UTC), `secs` the second in that day.
#[derive(Clone, Copy)]
struct Ev {
    id: i64,
    k: i32,
    cents: u64,
    day: u32,
    secs: u32,
}

impl Ev {
    fn amount(&self) -> String {
        format!("{}.{:02}", self.cents / 100, self.cents % 100)
    }
    fn at(&self) -> String {
        let s = self.secs;
        format!(
            "2026-01-{:02} {:02}:{:02}:{:02}+00",
            self.day,
            s / 3600,
            s / 60 % 60,
            s % 60
        )
    }
}

/// `n` events with ids from `first_id`, random keys below `keys`, random days in `days`.
fn events(rng: &mut Rng, n: usize, first_id: i64, keys: u64, days: (u32, u32)) -> Vec<Ev> {
    (0..n)
        .map(|i| Ev {
            id: first_id + i as i64,
            k: rng.below(keys) as i32,
            cents: rng.below(100_000),
            day: days.0 + rng.below((days.1 - days.0 + 1) as u64) as u32,
            secs: rng.below(86_400) as u32,
        })
        .collect()
}

/// COPY text format.
fn copy_text(evs: &[Ev]) -> Vec<u8> {
    let mut out = Vec::with_capacity(evs.len() * 48);
    for e in evs {
        writeln!(out, "{}\t{}\t{}\t{}", e.id, e.k, e.amount(), e.at()).unwrap();
    }
    out
}

/// One multi-row INSERT.
fn insert_sql(evs: &[Ev]) -> String {
    let rows: Vec<String> = evs
        .iter()
        .map(|e| format!("({}, {}, {}, '{}')", e.id, e.k, e.amount(), e.at()))
        .collect();
    format!(
        "INSERT INTO ev (id, k, amount, at) VALUES {}",
        rows.join(", ")
    )
}

// ---------------------------------------------------------------------------------------------
// Database helpers

fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => {
            let mut s = format!(
                "{}: {} (SQLSTATE {})",
                d.severity(),
                d.message(),
                d.code().code()
            );
            if let Some(x) = d.detail() {
                s += &format!("\nDETAIL: {x}");
            }
            if let Some(x) = d.hint() {
                s += &format!("\nHINT: {x}");
            }
            if let Some(x) = d.where_() {
                s += &format!("\nCONTEXT: {x}");
            }
            s
        }
        None => e.to_string(),
    }
}

fn short(sql: &str) -> String {
    if sql.len() > 200 {
        let mut end = 200;
        while !sql.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &sql[..end])
    } else {
        sql.to_string()
    }
}

fn connect(dbname: &str) -> Res<Client> {
    let host = std::env::var("PGHOST").unwrap_or_else(|_| "127.0.0.1".into());
    let port: u16 = std::env::var("PGPORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(5432);
    let user = std::env::var("PGUSER").unwrap_or_else(|_| "postgres".into());
    let mut c = postgres::Config::new()
        .host(&host)
        .port(port)
        .user(&user)
        .dbname(dbname)
        .connect(NoTls)
        .map_err(|e| {
            format!(
                "cannot connect to {host}:{port} as {user}, database {dbname}: {}",
                describe(&e)
            )
        })?;
    exec(
        &mut c,
        "SET TimeZone = 'UTC'; SET client_min_messages = warning",
    )?;
    Ok(c)
}

fn exec(c: &mut Client, sql: &str) -> Res<()> {
    c.batch_execute(sql)
        .map_err(|e| format!("{}\nin: {}", describe(&e), short(sql)))
}

/// The first column of the only row, as bigint.
fn scalar(c: &mut Client, sql: &str) -> Res<i64> {
    let row = c
        .query_one(sql, &[])
        .map_err(|e| format!("{}\nin: {}", describe(&e), short(sql)))?;
    row.try_get::<_, Option<i64>>(0)
        .map_err(|e| format!("{e}\nin: {}", short(sql)))?
        .ok_or_else(|| format!("NULL from: {}", short(sql)))
}

fn text(c: &mut Client, sql: &str) -> Res<String> {
    let row = c
        .query_one(sql, &[])
        .map_err(|e| format!("{}\nin: {}", describe(&e), short(sql)))?;
    row.try_get::<_, String>(0)
        .map_err(|e| format!("{e}\nin: {}", short(sql)))
}

fn copy_in(c: &mut Client, data: &[u8]) -> Res<()> {
    let mut w = c
        .copy_in("COPY ev (id, k, amount, at) FROM STDIN")
        .map_err(|e| format!("COPY: {}", describe(&e)))?;
    for chunk in data.chunks(64 * 1024) {
        w.write_all(chunk).map_err(|e| format!("COPY: {e}"))?;
    }
    w.finish().map_err(|e| format!("COPY: {}", describe(&e)))?;
    Ok(())
}

/// (a) without event ids: [`CREATE_PIPELINE`] without its `event_id`.
const CREATE_PIPELINE_NO_IDS: &str =
    "SELECT eventtime.create_pipeline(name => 'bench', source => 'ev', \
     event_time => 'at', key => ARRAY['k'], window_size => interval '1 day', \
     allowed_lateness => interval '1 day', aggregates => 'count(*) AS n, sum(amount) AS total')";

/// (a) with offsets: [`CREATE_PIPELINE_NO_IDS`] with the events' ids as their offsets in one log
/// (they rise through the `COPY`), and no `event_id`.
const CREATE_PIPELINE_OFFSETS: &str =
    "SELECT eventtime.create_pipeline(name => 'bench', source => 'ev', \
     event_time => 'at', key => ARRAY['k'], window_size => interval '1 day', \
     allowed_lateness => interval '1 day', aggregates => 'count(*) AS n, sum(amount) AS total', \
     offset_column => 'id')";

/// The unique index on the event id that a source of events with ids carries anyway (SPEC §6).
const SOURCE_ID_INDEX: &str = "CREATE UNIQUE INDEX ev_id ON ev (id)";

/// Fresh tables: drops every pipeline and the benchmark's tables, creates the source table and,
/// on the pipeline side, the pipeline.
fn reset(c: &mut Client, pipeline: bool) -> Res<()> {
    reset_with(
        c,
        if pipeline {
            Some(CREATE_PIPELINE)
        } else {
            None
        },
    )
}

/// [`reset`], with the pipeline `create` makes, if any.
fn reset_with(c: &mut Client, create: Option<&str>) -> Res<()> {
    let names: Vec<String> = c
        .query("SELECT name FROM eventtime.pipelines", &[])
        .map_err(|e| describe(&e))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    for n in names {
        c.execute("SELECT eventtime.drop_pipeline($1)", &[&n])
            .map_err(|e| describe(&e))?;
    }
    exec(
        c,
        "DROP TABLE IF EXISTS ev, plain, f_offsets, f_ids, f_id_arrays, f_state, f_history, g_ids, g_state, s_sessions, s_windows; \
         CREATE TABLE ev (id bigint, k int, amount numeric, at timestamptz)",
    )?;
    if let Some(create) = create {
        exec(c, create)?;
    }
    Ok(())
}

/// Both sides start equal: dirty buffers written, tables and catalogs vacuumed and analyzed.
fn settle(c: &mut Client) -> Res<()> {
    exec(c, "CHECKPOINT")?;
    let tables: Vec<String> = c
        .query(
            "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables \
             WHERE schemaname IN ('public', '_eventtime') ORDER BY 1",
            &[],
        )
        .map_err(|e| describe(&e))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut list = CATALOGS.to_string();
    for t in tables {
        list += ", ";
        list += &t;
    }
    exec(c, &format!("VACUUM ANALYZE {list}"))
}

/// The table of the pipeline's event-id ledger (only one pipeline exists at a time).
fn ledger_table(c: &mut Client) -> Res<String> {
    ledger_table_if_any(c)?.ok_or_else(|| "the pipeline has no event-id ledger".to_string())
}

/// [`ledger_table`], or `None` for a pipeline without event ids.
fn ledger_table_if_any(c: &mut Client) -> Res<Option<String>> {
    Ok(c.query_opt(
        "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables \
             WHERE schemaname = '_eventtime' AND tablename ~ '^p[0-9]+_ids$'",
        &[],
    )
    .map_err(|e| describe(&e))?
    .map(|r| r.get(0)))
}

/// The table of the pipeline's window state.
fn state_table(c: &mut Client) -> Res<String> {
    text(
        c,
        "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables \
         WHERE schemaname = '_eventtime' AND tablename ~ '^p[0-9]+_state$'",
    )
}

/// The floor's tables: the pipeline's event-id ledger, window state and history as
/// `create_pipeline` makes them for this pipeline (same columns, indexes and fill factor), and,
/// for [`Side::FloorArrays`], the ids of a key and window in one array.
const FLOOR_TABLES: &str = "\
    CREATE TABLE f_ids (window_start timestamptz NOT NULL, k int, event_id bigint NOT NULL); \
    CREATE UNIQUE INDEX ON f_ids (window_start, k, event_id) NULLS NOT DISTINCT; \
    CREATE TABLE f_id_arrays (window_start timestamptz NOT NULL, k int, ids bigint[] NOT NULL); \
    CREATE INDEX ON f_id_arrays (window_start, k); \
    CREATE TABLE f_state (k int, window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, \
        version integer NOT NULL DEFAULT 0, n bigint NOT NULL, a0 bigint, a1 numeric) WITH (fillfactor = 70); \
    CREATE UNIQUE INDEX ON f_state (k, window_start) NULLS NOT DISTINCT; \
    CREATE INDEX ON f_state (window_end); \
    CREATE TABLE f_history (k int, window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, \
        version integer NOT NULL, kind text NOT NULL, n bigint, total numeric, \
        sealed boolean GENERATED ALWAYS AS (version = 1) STORED, watermark timestamptz NOT NULL, \
        fired_at timestamptz NOT NULL DEFAULT now()); \
    CREATE UNIQUE INDEX ON f_history (k, window_start, version) NULLS NOT DISTINCT";

/// (a)'s [`Side::FloorTrigger`]: a statement trigger that does the least a ledger of id arrays
/// needs for a load of new windows. It classifies the rows against a watermark, groups them,
/// checks that no id repeats inside a group and that no window of the load has ids yet (it raises
/// otherwise: this floor only handles new windows), and writes one array per key and window and the
/// state. It has no lock, no counts and no serialization of concurrent loads of the same ids.
const FLOOR_TRIGGER: &str = "\
    CREATE OR REPLACE FUNCTION f_ingest() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $f$ \
    DECLARE v_bad boolean; \
    BEGIN \
      WITH wm AS MATERIALIZED (SELECT timestamptz '-infinity' AS t_open, timestamptz '-infinity' AS t_late), \
      g AS MATERIALIZED ( \
        SELECT k, ws, max(CASE WHEN ws > wm.t_open THEN 1 WHEN ws > wm.t_late THEN 2 ELSE 3 END) AS landing, \
               count(*) AS n, count(DISTINCT id) AS nd, sum(amount) AS total, array_agg(id) AS ids \
        FROM (SELECT k, amount, id, date_bin(interval '1 day', at, timestamptz '1970-01-01 00:00+00') AS ws \
              FROM new_rows) r CROSS JOIN wm \
        GROUP BY k, ws), \
      a AS (INSERT INTO f_id_arrays (window_start, k, ids) SELECT ws, k, ids FROM g), \
      s AS (INSERT INTO f_state AS s (k, window_start, window_end, n, a0, a1) \
            SELECT k, ws, ws + interval '1 day', n, n, total FROM g ORDER BY ws, k \
            ON CONFLICT (k, window_start) DO UPDATE SET n = s.n + excluded.n, a0 = s.a0 + excluded.a0, a1 = s.a1 + excluded.a1) \
      SELECT bool_or(n <> nd) OR bool_or(landing <> 1) OR EXISTS (SELECT FROM f_id_arrays i \
               WHERE i.window_start BETWEEN (SELECT min(ws) FROM g) AND (SELECT max(ws) FROM g)) \
      INTO v_bad FROM g; \
      IF v_bad THEN RAISE EXCEPTION 'the floor handles loads of new windows without duplicates only'; END IF; \
      RETURN NULL; \
    END $f$; \
    CREATE TRIGGER f_ingest AFTER INSERT ON ev REFERENCING NEW TABLE AS new_rows \
      FOR EACH STATEMENT EXECUTE FUNCTION f_ingest()";

/// (a) without event ids: the floor's grouping of the rows into the state, from `rows`.
fn group_into_state(rows: &str) -> String {
    format!(
        "INSERT INTO f_state (k, window_start, window_end, n, a0, a1) \
         SELECT k, ws, ws + interval '1 day', count(*), count(*), sum(amount) \
         FROM (SELECT k, amount, {FLOOR_WINDOW} AS ws FROM {rows}) c GROUP BY k, ws"
    )
}

/// (a) without event ids, [`Side::GroupTrigger`] and [`Side::ReadTrigger`]: a statement trigger
/// on the source table whose PL/pgSQL function runs `body` over the transition table `new_rows`.
fn statement_trigger(body: &str) -> String {
    format!(
        "CREATE OR REPLACE FUNCTION f_statement() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $f$ \
         BEGIN {body}; RETURN NULL; END $f$; \
         CREATE TRIGGER f_statement AFTER INSERT ON ev REFERENCING NEW TABLE AS new_rows \
           FOR EACH STATEMENT EXECUTE FUNCTION f_statement()"
    )
}

/// The floor's window of an event time: the pipeline's 1-day windows from the epoch.
const FLOOR_WINDOW: &str = "date_bin(interval '1 day', at, timestamptz '1970-01-01 00:00+00')";

/// Fresh tables for a side: the pipeline on the pipeline side, the floor's tables on a floor side.
fn reset_side(c: &mut Client, side: Side) -> Res<()> {
    reset(c, side == Side::Pipeline)?;
    if side == Side::PlainIndexed {
        exec(c, SOURCE_ID_INDEX)?;
    }
    if matches!(side, Side::Floor | Side::FloorArrays | Side::FloorTrigger) {
        exec(c, FLOOR_TABLES)?;
    }
    if side == Side::FloorTrigger {
        exec(c, FLOOR_TRIGGER)?;
    }
    Ok(())
}

fn state_rows(c: &mut Client) -> Res<i64> {
    scalar(
        c,
        "SELECT state_rows::bigint FROM eventtime.pipelines WHERE name = 'bench'",
    )
}

fn advance(c: &mut Client, to: &str) -> Res<i64> {
    scalar(
        c,
        &format!("SELECT windows_fired::bigint FROM eventtime.advance_watermark('bench', '{to}')"),
    )
}

fn timed(f: impl FnOnce() -> Res<()>) -> Res<Duration> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed())
}

// ---------------------------------------------------------------------------------------------
// Measurement

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Milliseconds to the microsecond, for reads well under a millisecond.
fn ms3(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// Runs `once` for each side in turn, `runs` times, printing each round's times under the sides'
/// names; returns the median of each side, in the order of `sides`.
fn turns<S: Copy>(
    label: &str,
    sides: &[(S, &str)],
    runs: usize,
    mut once: impl FnMut(S) -> Res<Duration>,
) -> Res<Vec<Duration>> {
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); sides.len()];
    for r in 1..=runs {
        let mut line = format!("  {label} run {r}:");
        for (i, (side, name)) in sides.iter().enumerate() {
            let d = once(*side).map_err(|e| format!("{label}, {name}: {e}"))?;
            line += &format!("{} {name} {}", if i == 0 { "" } else { "," }, ms(d));
            times[i].push(d);
        }
        println!("{line}");
    }
    Ok(times.into_iter().map(median).collect())
}

/// Runs `once(false)` (baseline) and `once(true)` (subject) alternately, `runs` times; returns
/// the medians (subject, baseline).
fn alternate(
    label: &str,
    names: (&str, &str),
    runs: usize,
    once: impl FnMut(bool) -> Res<Duration>,
) -> Res<(Duration, Duration)> {
    let t = turns(label, &[(false, names.1), (true, names.0)], runs, once)?;
    Ok((t[1], t[0]))
}

/// The sides of a workload measured against a floor.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Side {
    /// The source table alone.
    Plain,
    /// (a) with event ids only: the source table alone with a unique index on the event id, the
    /// least a hand-made dedup pays (SPEC §6).
    PlainIndexed,
    /// The writes the workload needs (event ids, window state, late versions), done by hand in
    /// plain SQL in the same statement or transaction as the insert: no trigger, no pipeline.
    Floor,
    /// (a) only: as `Floor`, but the event ids of a key and window in one array, so one index
    /// entry per key and window instead of one per event.
    FloorArrays,
    /// (a) only: the same as `FloorArrays`, made by a statement trigger on the source table that
    /// also checks what such a ledger must check ([`FLOOR_TRIGGER`]).
    FloorTrigger,
    /// (a) without event ids only: the floor's grouping into the state, made by a statement
    /// trigger from its transition table: what any trigger that aggregates with SQL pays.
    GroupTrigger,
    /// (a) without event ids only: a statement trigger that reads its transition table once, every
    /// column the grouping needs, with the window of each row and the sum of the values, and
    /// writes nothing: the least a trigger that aggregates its rows in its own code would pay
    /// before it writes its groups.
    ReadTrigger,
    /// The source table with the pipeline attached.
    Pipeline,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Plain => "without",
            Side::PlainIndexed => "without, with a unique index on the id",
            Side::Floor => "floor",
            Side::FloorArrays => "floor (ids in arrays)",
            Side::FloorTrigger => "floor (ids in arrays, in a trigger)",
            Side::GroupTrigger => "floor (in a trigger)",
            Side::ReadTrigger => "reading the rows in a trigger",
            Side::Pipeline => "with",
        }
    }
}

/// [`turns`] over the sides of a workload with a floor. The pipeline side goes last in a round, so
/// that its data is still there after the last round.
fn rounds(
    label: &str,
    sides: &[Side],
    runs: usize,
    once: impl FnMut(Side) -> Res<Duration>,
) -> Res<Vec<Duration>> {
    let named: Vec<(Side, &str)> = sides.iter().map(|s| (*s, s.name())).collect();
    turns(label, &named, runs, once)
}

/// What a side's load left: the state, the late versions and the event ids, each as a count and
/// a digest of its rows in order. A floor must have written what the pipeline wrote, or it is not
/// the floor of the same work.
struct Fingerprints {
    pipeline: Option<String>,
    floor: Vec<(Side, String)>,
}

impl Fingerprints {
    fn new() -> Fingerprints {
        Fingerprints {
            pipeline: None,
            floor: Vec::new(),
        }
    }

    fn note(&mut self, c: &mut Client, side: Side) -> Res<()> {
        let (state, acc, history, ids) = match side {
            Side::Plain | Side::PlainIndexed | Side::ReadTrigger => return Ok(()),
            Side::Pipeline => (
                state_table(c)?,
                "_et_n, _et_a0, _et_a1",
                "bench_history",
                // A pipeline without event ids has no ledger: no ids, as its floor's empty one.
                ledger_table_if_any(c)?.unwrap_or_else(|| {
                    "(SELECT NULL::timestamptz AS window_start, NULL::int AS k, NULL::bigint AS event_id WHERE false)"
                        .into()
                }),
            ),
            Side::Floor | Side::GroupTrigger => {
                ("f_state".into(), "n, a0, a1", "f_history", "f_ids".into())
            }
            Side::FloorArrays | Side::FloorTrigger => (
                "f_state".into(),
                "n, a0, a1",
                "f_history",
                "(SELECT window_start, k, unnest(ids) AS event_id FROM f_id_arrays)".into(),
            ),
        };
        // Each window's state, whatever the number of rows it is kept in (the pipeline keeps a
        // window's partials in a row per statement, and a fired window's late rows in one more;
        // the floors upsert one row): its row count and accumulators summed (count and sum).
        // Versions are compared in history.
        let sums = acc
            .split(", ")
            .map(|c| format!("sum({c})"))
            .collect::<Vec<_>>()
            .join(", ");
        let fp = text(
            c,
            &format!(
                "SELECT format('state: %s windows, digest %s; late versions: %s, digest %s; event ids: %s, digest %s', \
                   s.n, s.d, h.n, h.d, i.n, i.d) \
                 FROM (SELECT count(*) AS n, md5(string_agg(concat_ws('|', k, window_start, window_end, sums), ',' \
                         ORDER BY k, window_start)) AS d \
                       FROM (SELECT k, window_start, window_end, concat_ws('|', {sums}) AS sums \
                             FROM {state} GROUP BY k, window_start, window_end) w) s, \
                      (SELECT count(*) AS n, md5(string_agg(concat_ws('|', k, window_start, version, n, total), ',' \
                         ORDER BY k, window_start, version)) AS d FROM {history} WHERE kind = 'late') h, \
                      (SELECT count(*) AS n, md5(string_agg(concat_ws('|', window_start, k, event_id), ',' \
                         ORDER BY window_start, k, event_id)) AS d FROM {ids} x) i"
            ),
        )?;
        match side {
            Side::Pipeline => self.pipeline = Some(fp),
            _ => self.floor.push((side, fp)),
        }
        Ok(())
    }

    fn check(&self, label: &str) -> Res<()> {
        let Some(p) = &self.pipeline else {
            return Ok(());
        };
        for (side, f) in &self.floor {
            if f != p {
                return Err(format!(
                    "{label}: the {} side wrote other state, late versions or event ids than the pipeline:\n  {f}\nagainst\n  {p}",
                    side.name()
                ));
            }
        }
        Ok(())
    }
}

/// What a row of the table measures: the time of a load (lower is better) or a throughput in
/// rows per second (higher is better). Either way its ratio is the pipeline's value ÷ the plain
/// side's.
#[derive(Clone, Copy)]
enum Measure {
    Time(Duration),
    Rate(f64),
}

impl Measure {
    fn value(self) -> f64 {
        match self {
            Measure::Time(d) => d.as_secs_f64(),
            Measure::Rate(r) => r,
        }
    }
    fn show(self) -> String {
        match self {
            Measure::Time(d) => ms(d),
            Measure::Rate(r) => format!("{} rows/s", num(r.round() as usize)),
        }
    }
}

/// SPEC §6's target for a ratio: at most (times) or at least (throughputs).
#[derive(Clone, Copy)]
enum Target {
    AtMost(f64),
    AtLeast(f64),
}

impl Target {
    fn met(self, ratio: f64) -> bool {
        match self {
            Target::AtMost(t) => ratio <= t,
            Target::AtLeast(t) => ratio >= t,
        }
    }
    /// A target as SPEC §6 writes it: one decimal, or two where it has them (1.35).
    fn number(t: f64) -> String {
        let two = format!("{t:.2}");
        if two.ends_with('0') {
            format!("{t:.1}")
        } else {
            two
        }
    }

    fn show(self) -> String {
        match self {
            Target::AtMost(t) => format!("≤ {}×", Self::number(t)),
            Target::AtLeast(t) => format!("≥ {}× (throughput: higher is better)", Self::number(t)),
        }
    }
}

struct Row {
    workload: String,
    with: Measure,
    without: Measure,
    /// SPEC §6's target, for the workloads that have one.
    target: Option<Target>,
    /// The same writes by hand ([`Side::Floor`]), for the workloads that have one.
    floor: Option<Measure>,
}

impl Row {
    /// A row of two times without a target or a floor: a comparison of two sides.
    fn times(workload: String, with: Duration, without: Duration) -> Row {
        Row {
            workload,
            with: Measure::Time(with),
            without: Measure::Time(without),
            target: None,
            floor: None,
        }
    }

    /// Times: with ÷ without, lower is better. Throughputs: with ÷ without, higher is better.
    fn ratio(&self) -> f64 {
        self.with.value() / self.without.value().max(1e-9)
    }
    fn floor_ratio(&self) -> Option<f64> {
        self.floor
            .map(|f| f.value() / self.without.value().max(1e-9))
    }
}

fn num(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        let left = s.len() - i;
        if i > 0 && left / 3 * 3 == left {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Workloads

/// (a) COPY of the events into the source table.
///
/// The floors run the COPY and one statement in a transaction: the windows of the rows, then the
/// ids into the ledger (a plain insert in index order: every id is new) or, for
/// [`Side::FloorArrays`], one array per key and window, and the groups into the state.
/// [`Side::FloorTrigger`] makes the arrays and the state in a trigger on the source table.
fn workload_a(
    c: &mut Client,
    opts: &Opts,
    data: &[u8],
    s: &Sizes,
) -> Res<(Row, Duration, Duration, Duration)> {
    println!(
        "(a) COPY of {} events ({} keys, {} daily windows)",
        num(s.a_events),
        num(s.a_keys as usize),
        s.a_days
    );
    let floor_ids = format!(
        "WITH c AS MATERIALIZED (SELECT id, k, amount, {FLOOR_WINDOW} AS ws FROM ev), \
         i AS (INSERT INTO f_ids (window_start, k, event_id) SELECT ws, k, id FROM c ORDER BY 1, 2, 3) \
         INSERT INTO f_state (k, window_start, window_end, n, a0, a1) \
         SELECT k, ws, ws + interval '1 day', count(*), count(*), sum(amount) FROM c GROUP BY k, ws"
    );
    let floor_arrays = format!(
        "WITH g AS MATERIALIZED (SELECT k, {FLOOR_WINDOW} AS ws, count(*) AS n, sum(amount) AS total, array_agg(id) AS ids \
           FROM ev GROUP BY 1, 2), \
         i AS (INSERT INTO f_id_arrays (window_start, k, ids) SELECT ws, k, ids FROM g) \
         INSERT INTO f_state (k, window_start, window_end, n, a0, a1) SELECT k, ws, ws + interval '1 day', n, n, total FROM g"
    );
    let mut fps = Fingerprints::new();
    let sides = [
        Side::Plain,
        Side::PlainIndexed,
        Side::Floor,
        Side::FloorArrays,
        Side::FloorTrigger,
        Side::Pipeline,
    ];
    let t = rounds("(a)", &sides, opts.runs, |side| {
        reset_side(c, side)?;
        settle(c)?;
        let d = timed(|| match side {
            Side::Floor => copy_then(c, data, &floor_ids),
            Side::FloorArrays => copy_then(c, data, &floor_arrays),
            _ => copy_in(c, data),
        })?;
        fps.note(c, side)?;
        Ok(d)
    })?;
    fps.check("(a)")?;
    let row = Row {
        workload: format!(
            "(a) `COPY` of {} events with event ids (the plain side with a unique index on them)",
            num(s.a_events)
        ),
        with: Measure::Time(t[5]),
        without: Measure::Time(t[1]),
        target: Some(Target::AtMost(1.5)),
        floor: Some(Measure::Time(t[2])),
    };
    Ok((row, t[0], t[3], t[4]))
}

/// (b) with statements of [`STATEMENT_ROWS`] rows: the same events as (b), with event ids and the
/// pipeline's own ledger, each statement its own transaction. Three sides: the table with a
/// unique index on the id (SPEC §6's plain side with ids), the pipeline (whose ingest engine
/// dedups and groups the statements), and the same pipeline with every statement under
/// REPEATABLE READ (`default_transaction_isolation`), which the engine leaves to the SQL path.
/// Both pipeline sides must leave the same state and ids. Two rows: the pipeline against the
/// plain side, and the engine against the SQL path.
fn workload_b_statements(c: &mut Client, opts: &Opts, s: &Sizes) -> Res<Vec<Row>> {
    println!(
        "(b) {} events with event ids in INSERTs of {STATEMENT_ROWS} rows",
        num(s.b_inserts)
    );
    let mut rng = Rng(0xB);
    let evs = events(&mut rng, s.b_inserts, 1, s.b_keys, (1, 30));
    let statements: Vec<Columns> = evs
        .chunks(STATEMENT_ROWS)
        .map(|part| {
            (
                part.iter().map(|e| e.id).collect(),
                part.iter().map(|e| e.k).collect(),
                part.iter().map(|e| e.amount()).collect(),
                part.iter().map(|e| e.at()).collect(),
            )
        })
        .collect();
    let mut engine = Fingerprints::new();
    let mut sql = Fingerprints::new();
    let sides = [
        (0, "without, with a unique index on the id"),
        (1, "with"),
        (2, "with, through SQL"),
    ];
    let t = turns("(b) in statements", &sides, opts.runs, |side| {
        reset(c, side > 0)?;
        if side == 0 {
            exec(c, SOURCE_ID_INDEX)?;
        }
        settle(c)?;
        if side == 2 {
            exec(c, "SET default_transaction_isolation = 'repeatable read'")?;
        }
        let st = c
            .prepare(
                "INSERT INTO ev (id, k, amount, at) SELECT * FROM \
                 unnest($1::bigint[], $2::int[], $3::text[]::numeric[], $4::text[]::timestamptz[])",
            )
            .map_err(|e| describe(&e))?;
        let d = timed(|| {
            for (ids, ks, amounts, ats) in &statements {
                c.execute(&st, &[ids, ks, amounts, ats])
                    .map_err(|e| describe(&e))?;
            }
            Ok(())
        })?;
        exec(c, "RESET default_transaction_isolation")?;
        match side {
            1 => engine.note(c, Side::Pipeline)?,
            2 => sql.note(c, Side::Pipeline)?,
            _ => {}
        }
        Ok(d)
    })?;
    if engine.pipeline != sql.pipeline {
        return Err(format!(
            "(b) in statements: the engine and the SQL path left different state or ids:\n  {:?}\nagainst\n  {:?}",
            engine.pipeline, sql.pipeline
        ));
    }
    Ok(vec![
        Row::times(
            format!(
                "(b) {} events with event ids in `INSERT`s of {STATEMENT_ROWS} rows (the plain side with a unique index on them)",
                num(s.b_inserts)
            ),
            t[1],
            t[0],
        ),
        Row::times(
            "(b) the same, the ingest engine against the SQL path (the statements under REPEATABLE READ)"
                .to_string(),
            t[1],
            t[2],
        ),
    ])
}

/// Rows per statement of [`workload_b_statements`].
const STATEMENT_ROWS: usize = 100;

/// A statement's events as the arrays of its parameters: ids, keys, amounts, event times.
type Columns = (Vec<i64>, Vec<i32>, Vec<String>, Vec<String>);

/// (a) with event ids where the source has a unique index on them, on both sides: the pipeline
/// dedups by that index and keeps no ledger. Its floor groups the rows into the state by hand, in
/// the `COPY`'s transaction, as the floor without event ids does.
fn workload_a_indexed(c: &mut Client, opts: &Opts, data: &[u8], s: &Sizes) -> Res<Row> {
    println!(
        "(a) with event ids and the source's unique index on them: COPY of {} events",
        num(s.a_events)
    );
    let floor = group_into_state("ev");
    let mut fps = Fingerprints::new();
    let sides = [Side::Plain, Side::Floor, Side::Pipeline];
    let t = rounds("(a) with the source's index", &sides, opts.runs, |side| {
        reset_with(c, None)?;
        exec(c, SOURCE_ID_INDEX)?;
        match side {
            Side::Pipeline => exec(c, CREATE_PIPELINE)?,
            Side::Floor => exec(c, FLOOR_TABLES)?,
            _ => {}
        }
        settle(c)?;
        let d = timed(|| match side {
            Side::Floor => copy_then(c, data, &floor),
            _ => copy_in(c, data),
        })?;
        fps.note(c, side)?;
        Ok(d)
    })?;
    fps.check("(a) with the source's index")?;
    if ledger_table_if_any(c)?.is_some() {
        return Err("(a) with the source's index: the pipeline keeps a ledger table".into());
    }
    Ok(Row {
        workload: format!(
            "(a) `COPY` of {} events with event ids, the source with a unique index on them (both sides)",
            num(s.a_events)
        ),
        with: Measure::Time(t[2]),
        without: Measure::Time(t[0]),
        target: Some(Target::AtMost(1.3)),
        floor: Some(Measure::Time(t[1])),
    })
}

/// A floor's load: the `COPY` of `data` and the floor's `sql`, in one transaction.
fn copy_then(c: &mut Client, data: &[u8], sql: &str) -> Res<()> {
    exec(c, "BEGIN")?;
    copy_in(c, data)?;
    exec(c, sql)?;
    exec(c, "COMMIT")
}

/// (a) without event ids: the same `COPY` into a pipeline without `event_id`, against the table
/// alone and the floor, which groups the rows into the state by hand in the `COPY`'s transaction;
/// and two more sides, the floor's grouping in a statement trigger ([`Side::GroupTrigger`]) and a
/// statement trigger that only reads its rows ([`Side::ReadTrigger`]). Returns the row and those two
/// sides' times. Run before (a) with ids, whose last pipeline side (e) reads.
fn workload_a_no_ids(
    c: &mut Client,
    opts: &Opts,
    data: &[u8],
    s: &Sizes,
) -> Res<(Row, Duration, Duration)> {
    println!(
        "(a) without event ids: COPY of {} events into a pipeline without event_id",
        num(s.a_events)
    );
    let floor = group_into_state("ev");
    let group_trigger = statement_trigger(&group_into_state("new_rows"));
    let read_trigger = statement_trigger(&format!(
        "PERFORM count(k), max({FLOOR_WINDOW}), sum(amount) FROM new_rows"
    ));
    let mut fps = Fingerprints::new();
    let sides = [
        Side::Plain,
        Side::Floor,
        Side::GroupTrigger,
        Side::ReadTrigger,
        Side::Pipeline,
    ];
    let t = rounds("(a) without event ids", &sides, opts.runs, |side| {
        reset_with(
            c,
            (side == Side::Pipeline).then_some(CREATE_PIPELINE_NO_IDS),
        )?;
        match side {
            Side::Floor => exec(c, FLOOR_TABLES)?,
            Side::GroupTrigger => {
                exec(c, FLOOR_TABLES)?;
                exec(c, &group_trigger)?;
            }
            Side::ReadTrigger => exec(c, &read_trigger)?,
            _ => {}
        }
        settle(c)?;
        let d = timed(|| match side {
            Side::Floor => copy_then(c, data, &floor),
            _ => copy_in(c, data),
        })?;
        fps.note(c, side)?;
        Ok(d)
    })?;
    fps.check("(a) without event ids")?;
    let row = Row {
        workload: format!("(a) `COPY` of {} events without event ids", num(s.a_events)),
        with: Measure::Time(t[4]),
        without: Measure::Time(t[0]),
        target: Some(Target::AtMost(1.3)),
        floor: Some(Measure::Time(t[1])),
    };
    Ok((row, t[2], t[3]))
}

/// (a) with cumulate windows (SPEC §7): the same `COPY` without event ids into a pipeline of
/// days cut into 24 hourly steps, against a tumbling daily pipeline on the same rows, in turns; then the
/// firing of each by `advance_watermark('infinity')`. A row of hour h belongs to the 24 − h steps
/// whose end is after it, so the cumulate pipeline keeps and fires up to 24 windows per key and
/// day. Its full-day steps must equal the tumbling pipeline's windows, and its number of windows
/// the steps that `GROUP BY` finds from each key and day's first hour.
fn workload_a_cumulate(c: &mut Client, opts: &Opts, data: &[u8], s: &Sizes) -> Res<Vec<Row>> {
    println!(
        "(a) cumulate: COPY of {} events without event ids into 1 day by 1 hour, against tumbling 1 day",
        num(s.a_events)
    );
    let cumulate = CREATE_PIPELINE_NO_IDS.replace(
        "window_size => interval '1 day',",
        "window_size => interval '1 day', cumulate_step => interval '1 hour',",
    );
    if cumulate == CREATE_PIPELINE_NO_IDS {
        return Err("the cumulate pipeline's definition did not take its step".into());
    }
    let mut fire: [Vec<Duration>; 2] = Default::default();
    let mut windows = [0i64; 2];
    let mut tumbling_fp = String::new();
    let sides = [(0, "tumbling"), (1, "cumulate")];
    let t = turns("(a) cumulate", &sides, opts.runs, |side| {
        reset_with(
            c,
            Some(if side == 0 {
                CREATE_PIPELINE_NO_IDS
            } else {
                &cumulate
            }),
        )?;
        settle(c)?;
        let d = timed(|| copy_in(c, data))?;
        fire[side].push(timed(|| advance(c, "infinity").map(drop))?);
        let left = state_rows(c)?;
        if left != 0 {
            return Err(format!(
                "{left} state rows left after advance_watermark('infinity')"
            ));
        }
        windows[side] = scalar(c, "SELECT count(*) FROM bench_latest")?;
        let days = window_fingerprint(
            c,
            "(SELECT * FROM bench_latest WHERE window_end = window_start + interval '1 day') d",
        )?;
        if side == 0 {
            tumbling_fp = days;
            return Ok(d);
        }
        if days != tumbling_fp {
            return Err(format!(
                "the cumulate pipeline's full days differ from the tumbling pipeline's windows:\n  {days}\nagainst\n  {tumbling_fp}"
            ));
        }
        let steps = scalar(
            c,
            "SELECT sum(24 - first_hour)::bigint FROM (SELECT min(extract(hour FROM at AT TIME ZONE 'UTC'))::int AS first_hour \
             FROM ev GROUP BY k, date_bin(interval '1 day', at, timestamptz '1970-01-01 00:00+00')) g",
        )?;
        if windows[1] != steps {
            return Err(format!(
                "the cumulate pipeline published {} windows, GROUP BY finds {steps} steps",
                windows[1]
            ));
        }
        Ok(d)
    })?;
    let [tumbling_fire, cumulate_fire] = fire.map(median);
    Ok(vec![
        Row::times(
            "(a) the same `COPY` without ids, cumulate 1 day by 1 hour (24 steps) vs tumbling 1 day"
                .to_string(),
            t[1],
            t[0],
        ),
        Row::times(
            format!(
                "(a) cumulate: firing {} steps vs tumbling firing {} days",
                num(windows[1] as usize),
                num(windows[0] as usize)
            ),
            cumulate_fire,
            tumbling_fire,
        ),
    ])
}

/// (a) with expressions (SPEC §3 *Aggregates*): the same `COPY` without event ids into a
/// pipeline whose aggregates are expressions with `FILTER`, against a pipeline with as many
/// aggregates over plain columns and against the table alone, in turns. After the firing, every
/// window must equal PostgreSQL's `GROUP BY` of the same expressions over the table.
fn workload_a_expressions(c: &mut Client, opts: &Opts, data: &[u8], s: &Sizes) -> Res<Vec<Row>> {
    println!(
        "(a) expressions: COPY of {} events without event ids, aggregates over expressions and FILTER",
        num(s.a_events)
    );
    const COLUMNS: &str =
        "count(*) AS n, sum(amount) AS total, sum(amount) AS big, count(amount) AS small";
    const EXPRESSIONS: &str = "count(*) AS n, sum(amount) AS total, \
        sum(amount * 2 + 1) FILTER (WHERE amount > 50) AS big, count(*) FILTER (WHERE amount < 10) AS small";
    let with = |aggregates: &str| {
        CREATE_PIPELINE_NO_IDS.replace(
            "'count(*) AS n, sum(amount) AS total'",
            &format!("'{aggregates}'"),
        )
    };
    let (columns, expressions) = (with(COLUMNS), with(EXPRESSIONS));
    if columns == CREATE_PIPELINE_NO_IDS {
        return Err("the pipelines' definitions did not take their aggregates".into());
    }
    let sides = [(0, "plain"), (1, "columns"), (2, "expressions")];
    let t = turns("(a) expressions", &sides, opts.runs, |side| {
        reset_with(
            c,
            [None, Some(columns.as_str()), Some(expressions.as_str())][side],
        )?;
        settle(c)?;
        let d = timed(|| copy_in(c, data))?;
        if side == 2 {
            advance(c, "infinity")?;
            let differences = scalar(
                c,
                &format!(
                    "SELECT count(*) FROM ((SELECT k, window_start, n, total, big, small FROM bench_latest \
                       EXCEPT SELECT k, {FLOOR_WINDOW}, {EXPRESSIONS} FROM ev GROUP BY 1, 2) \
                     UNION ALL (SELECT k, {FLOOR_WINDOW}, {EXPRESSIONS} FROM ev GROUP BY 1, 2 \
                       EXCEPT SELECT k, window_start, n, total, big, small FROM bench_latest)) d"
                ),
            )?;
            if differences != 0 {
                return Err(format!(
                    "{differences} windows differ from GROUP BY of the same expressions"
                ));
            }
        }
        Ok(d)
    })?;
    Ok(vec![
        Row::times(
            "(a) the same `COPY` without ids, 2 of 4 aggregates over expressions with `FILTER` vs 4 over columns"
                .to_string(),
            t[2],
            t[1],
        ),
        Row::times(
            "(a) the same `COPY` without ids, 2 of 4 aggregates over expressions with `FILTER` vs plain `COPY`"
                .to_string(),
            t[2],
            t[0],
        ),
    ])
}

/// (a) with any aggregate (SPEC §11): the same `COPY` without event ids into a pipeline with
/// `stddev` of a numeric (an `internal` state, kept serialized), a `FILTER` and a
/// `count(DISTINCT)` (its values kept), against the table alone, in turns; and what the pipeline
/// adds to the `COPY` next to PostgreSQL's own `GROUP BY` of the same aggregates over the loaded
/// rows, timed on the table-alone side. After the firing, every window must equal that
/// `GROUP BY`.
fn workload_a_any_aggregate(c: &mut Client, opts: &Opts, data: &[u8], s: &Sizes) -> Res<Vec<Row>> {
    println!(
        "(a) any aggregate: COPY of {} events without event ids, stddev, FILTER and count(DISTINCT)",
        num(s.a_events)
    );
    const AGGREGATES: &str = "count(*) AS n, stddev(amount) AS sd, \
        sum(amount) FILTER (WHERE amount > 50) AS big, count(DISTINCT amount) AS kinds";
    const SAME: &str =
        "count(*), stddev(amount), sum(amount) FILTER (WHERE amount > 50), count(DISTINCT amount)";
    let create = CREATE_PIPELINE_NO_IDS.replace(
        "'count(*) AS n, sum(amount) AS total'",
        &format!("'{AGGREGATES}'"),
    );
    if create == CREATE_PIPELINE_NO_IDS {
        return Err("the pipeline's definition did not take its aggregates".into());
    }
    let group_by =
        format!("SELECT count(*) FROM (SELECT k, {FLOOR_WINDOW}, {SAME} FROM ev GROUP BY 1, 2) g");
    let mut grouped = Vec::new();
    let sides = [(0, "plain"), (1, "any aggregate")];
    let t = turns("(a) any aggregate", &sides, opts.runs, |side| {
        reset_with(c, [None, Some(create.as_str())][side])?;
        settle(c)?;
        let d = timed(|| copy_in(c, data))?;
        if side == 0 {
            grouped.push(timed(|| scalar(c, &group_by).map(drop))?);
        } else {
            advance(c, "infinity")?;
            let differences = scalar(
                c,
                &format!(
                    "SELECT count(*) FROM ((SELECT k, window_start, n, sd, big, kinds FROM bench_latest \
                       EXCEPT SELECT k, {FLOOR_WINDOW}, {SAME} FROM ev GROUP BY 1, 2) \
                     UNION ALL (SELECT k, {FLOOR_WINDOW}, {SAME} FROM ev GROUP BY 1, 2 \
                       EXCEPT SELECT k, window_start, n, sd, big, kinds FROM bench_latest)) d"
                ),
            )?;
            if differences != 0 {
                return Err(format!(
                    "{differences} windows differ from GROUP BY of the same aggregates"
                ));
            }
        }
        Ok(d)
    })?;
    Ok(vec![
        Row::times(
            "(a) the same `COPY` without ids, `stddev(numeric)`, a `FILTER` and a `count(DISTINCT)` vs plain `COPY`"
                .to_string(),
            t[1],
            t[0],
        ),
        Row::times(
            "(a) what those aggregates add to the `COPY` vs PostgreSQL's `GROUP BY` of them over the loaded rows"
                .to_string(),
            t[1].saturating_sub(t[0]),
            median(grouped),
        ),
    ])
}

/// (a) with offsets: the same `COPY` into a pipeline whose rows carry offsets (SPEC §12), against
/// the table alone and the floor, which groups the rows into the state by hand and moves one
/// committed offset to the greatest of the load, in the `COPY`'s transaction.
fn workload_a_offsets(c: &mut Client, opts: &Opts, data: &[u8], s: &Sizes) -> Res<Row> {
    println!(
        "(a) with offsets: COPY of {} events into a pipeline with offset_column",
        num(s.a_events)
    );
    let floor = format!(
        "WITH o AS (INSERT INTO f_offsets AS o (source, \"offset\") SELECT 'default', max(id) FROM ev \
           ON CONFLICT (source) DO UPDATE SET previous = o.\"offset\", \"offset\" = GREATEST(o.\"offset\", excluded.\"offset\")) \
         {}",
        group_into_state("ev")
    );
    let mut fps = Fingerprints::new();
    let sides = [Side::Plain, Side::Floor, Side::Pipeline];
    let t = rounds("(a) with offsets", &sides, opts.runs, |side| {
        reset_with(
            c,
            (side == Side::Pipeline).then_some(CREATE_PIPELINE_OFFSETS),
        )?;
        if side == Side::Floor {
            exec(c, FLOOR_TABLES)?;
            exec(
                c,
                "CREATE TABLE f_offsets (source text PRIMARY KEY, \"offset\" bigint NOT NULL, previous bigint, \
                 committed_at timestamptz NOT NULL DEFAULT now())",
            )?;
        }
        settle(c)?;
        let d = timed(|| match side {
            Side::Floor => copy_then(c, data, &floor),
            _ => copy_in(c, data),
        })?;
        fps.note(c, side)?;
        Ok(d)
    })?;
    fps.check("(a) with offsets")?;
    // Every offset counted once: the committed offset is the last event's id.
    let committed = scalar(
        c,
        "SELECT \"offset\" FROM eventtime.sources WHERE pipeline = 'bench' AND source = 'default'",
    )?;
    if committed != s.a_events as i64 {
        return Err(format!(
            "(a) with offsets: committed offset {committed}, expected {}",
            s.a_events
        ));
    }
    Ok(Row {
        workload: format!(
            "(a) `COPY` of {} events with source offsets",
            num(s.a_events)
        ),
        with: Measure::Time(t[2]),
        without: Measure::Time(t[0]),
        target: Some(Target::AtMost(1.35)),
        floor: Some(Measure::Time(t[1])),
    })
}

struct StateReport {
    open_state: i64,
    open_ledger: i64,
    after_state: i64,
    after_ledger: i64,
    fired: i64,
    advance: Duration,
}

/// (e) state size after (a)'s load and after the watermark passed every deadline.
fn state_check(c: &mut Client, data: &[u8], loaded: bool) -> Res<StateReport> {
    if !loaded {
        reset(c, true)?;
        copy_in(c, data)?;
    }
    let ledger = ledger_table(c)?;
    let open_state = state_rows(c)?;
    let open_ledger = scalar(c, &format!("SELECT count(*) FROM {ledger}"))?;
    let t = Instant::now();
    let fired = advance(c, "infinity")?;
    let advance_time = t.elapsed();
    let after_state = state_rows(c)?;
    let after_ledger = scalar(c, &format!("SELECT count(*) FROM {ledger}"))?;
    Ok(StateReport {
        open_state,
        open_ledger,
        after_state,
        after_ledger,
        fired,
        advance: advance_time,
    })
}

/// (b) single-row INSERT statements, autocommit, one prepared statement.
///
/// The floor's prepared statement inserts the row, its id into the ledger (`ON CONFLICT DO
/// NOTHING`) and, when the id is new, upserts its window's state.
fn workload_b(c: &mut Client, opts: &Opts, s: &Sizes) -> Res<Row> {
    println!("(b) {} single-row INSERT statements", num(s.b_inserts));
    let mut rng = Rng(0xB);
    let rows: Vec<(i64, i32, String, String)> = events(&mut rng, s.b_inserts, 1, s.b_keys, (1, 30))
        .iter()
        .map(|e| (e.id, e.k, e.amount(), e.at()))
        .collect();
    let floor = format!(
        "WITH v AS (SELECT $1::bigint AS id, $2::int AS k, $3::text::numeric AS amount, $4::text::timestamptz AS at), \
         c AS (SELECT v.*, {FLOOR_WINDOW} AS ws FROM v), \
         f AS (INSERT INTO f_ids (window_start, k, event_id) SELECT ws, k, id FROM c ON CONFLICT DO NOTHING RETURNING 1), \
         u AS (INSERT INTO f_state AS s (k, window_start, window_end, n, a0, a1) \
           SELECT k, ws, ws + interval '1 day', 1, 1, amount FROM c WHERE EXISTS (SELECT FROM f) \
           ON CONFLICT (k, window_start) DO UPDATE SET n = s.n + 1, a0 = s.a0 + 1, a1 = s.a1 + excluded.a1) \
         INSERT INTO ev (id, k, amount, at) SELECT id, k, amount, at FROM v"
    );
    let mut fps = Fingerprints::new();
    let t = rounds(
        "(b)",
        &[Side::Plain, Side::Floor, Side::Pipeline],
        opts.runs,
        |side| {
            reset_side(c, side)?;
            settle(c)?;
            let st = c
            .prepare(if side == Side::Floor {
                &floor
            } else {
                "INSERT INTO ev (id, k, amount, at) VALUES ($1, $2, $3::text::numeric, $4::text::timestamptz)"
            })
            .map_err(|e| describe(&e))?;
            let d = timed(|| {
                for (id, k, amount, at) in &rows {
                    c.execute(&st, &[id, k, amount, at])
                        .map_err(|e| describe(&e))?;
                }
                Ok(())
            })?;
            fps.note(c, side)?;
            Ok(d)
        },
    )?;
    fps.check("(b)")?;
    Ok(Row {
        workload: format!("(b) {} single-row `INSERT`s", num(s.b_inserts)),
        with: Measure::Time(t[2]),
        without: Measure::Time(t[0]),
        target: Some(Target::AtMost(1.3)),
        floor: Some(Measure::Time(t[1])),
    })
}

/// (c) advance_watermark firing N due windows (N keys × 1 window, one row each, loaded
/// beforehand) against one INSERT ... SELECT computing the same N windows into a table with the
/// history's columns and indexes (SPEC §6).
fn workload_c(c: &mut Client, opts: &Opts, s: &Sizes) -> Res<Row> {
    let n = s.c_windows;
    println!(
        "(c) advance_watermark firing {} windows vs INSERT ... SELECT of {} rows",
        num(n),
        num(n)
    );
    let mut rng = Rng(0xC);
    let evs: Vec<Ev> = (0..n)
        .map(|i| Ev {
            id: i as i64 + 1,
            k: i as i32,
            cents: rng.below(100_000),
            day: 1,
            secs: rng.below(86_400) as u32,
        })
        .collect();
    let data = copy_text(&evs);
    let (with, without) = alternate("(c)", ("with", "without"), opts.runs, |pipeline| {
        reset(c, pipeline)?;
        if !pipeline {
            // SPEC §6: a table with the history's columns and indexes. Copied from the history
            // of a pipeline made for the purpose and dropped at once, so the two cannot drift.
            exec(c, CREATE_PIPELINE)?;
            let history = text(
                c,
                "SELECT history_table::text FROM eventtime.pipelines WHERE name = 'bench'",
            )?;
            exec(
                c,
                &format!(
                    "CREATE TABLE plain (LIKE {history} INCLUDING ALL); SELECT eventtime.drop_pipeline('bench')"
                ),
            )?;
        }
        copy_in(c, &data)?;
        settle(c)?;
        let mut got = 0i64;
        let d = if pipeline {
            timed(|| {
                got = advance(c, "2026-01-02 00:00+00")?;
                Ok(())
            })?
        } else {
            timed(|| {
                got = c
                    .execute(
                        "INSERT INTO plain (k, window_start, window_end, version, kind, n, total, watermark, _et_n, _et_a0, _et_a1) \
                         SELECT k, w, w + interval '1 day', 1, 'main', count(*), sum(amount), timestamptz '2026-01-02 00:00+00', \
                                count(*), count(*), sum(amount) \
                         FROM (SELECT k, amount, date_bin(interval '1 day', at, timestamptz '2026-01-01 00:00+00') AS w FROM ev) e \
                         GROUP BY k, w",
                        &[],
                    )
                    .map_err(|e| describe(&e))? as i64;
                Ok(())
            })?
        };
        if got != n as i64 {
            return Err(format!("expected {n} windows, got {got}"));
        }
        Ok(d)
    })?;
    Ok(Row {
        workload: format!(
            "(c) `advance_watermark` firing {} windows vs one `INSERT ... SELECT`",
            num(n)
        ),
        with: Measure::Time(with),
        without: Measure::Time(without),
        target: Some(Target::AtMost(1.5)),
        floor: None,
    })
}

struct LateInfo {
    late_versions: i64,
    duplicates: i64,
    refused: i64,
    expected_duplicates: usize,
}

/// (d) late-heavy load: half the rows late within the grace, a third of those redelivered, in
/// multi-row INSERT statements.
fn workload_d(c: &mut Client, opts: &Opts, s: &Sizes) -> Res<(Vec<Row>, LateInfo)> {
    let keys = s.d_keys;
    let late_total = s.d_rows / 2;
    let redelivered = late_total / 3;
    let late_unique = late_total - redelivered;
    let on_time = s.d_rows - late_total;
    println!(
        "(d) {} rows in INSERTs of {}: {} on time, {} late within the grace ({} of them redeliveries)",
        num(s.d_rows),
        s.d_stmt,
        num(on_time),
        num(late_total),
        num(redelivered)
    );
    let mut rng = Rng(0xD);
    // Before the timed load: one row per key on 1 January; the pipeline side then advances the
    // watermark to 2 January 12:00, so 1 January has fired (version 1) and is within its grace.
    let pre: Vec<Ev> = (0..keys)
        .map(|k| Ev {
            id: k as i64 + 1,
            k: k as i32,
            cents: rng.below(100_000),
            day: 1,
            secs: rng.below(86_400) as u32,
        })
        .collect();
    let pre = copy_text(&pre);
    let mut uniq = events(&mut rng, on_time, keys as i64 + 1, keys, (2, 3));
    uniq.extend(events(
        &mut rng,
        late_unique,
        (keys + on_time as u64) as i64 + 1,
        keys,
        (1, 1),
    ));
    rng.shuffle(&mut uniq);
    // Redeliveries: exact copies of late rows, sent 1 to 3,000 rows after the original.
    let mut late_pos: Vec<usize> = (0..uniq.len()).filter(|&i| uniq[i].day == 1).collect();
    rng.shuffle(&mut late_pos);
    let mut seq: Vec<(usize, Ev)> = uniq.iter().enumerate().map(|(i, e)| (i * 2, *e)).collect();
    for &p in &late_pos[..redelivered] {
        let at = (p + 1 + rng.below(3_000) as usize).min(uniq.len() - 1);
        seq.push((at * 2 + 1, uniq[p]));
    }
    seq.sort_by_key(|x| x.0);
    let rows: Vec<Ev> = seq.into_iter().map(|x| x.1).collect();
    let stmts: Vec<String> = rows.chunks(s.d_stmt).map(insert_sql).collect();
    // The floor sends each statement's rows as four arrays to one prepared statement.
    let arrays: Vec<DCols> = rows
        .chunks(s.d_stmt)
        .map(|ch| {
            (
                ch.iter().map(|e| e.id).collect(),
                ch.iter().map(|e| e.k).collect(),
                ch.iter().map(Ev::amount).collect(),
                ch.iter().map(Ev::at).collect(),
            )
        })
        .collect();
    let w = "timestamptz '2026-01-02 12:00+00'";
    // The state and the main firing of 1 January, as the pipeline side has them after its advance.
    let floor_setup = format!(
        "INSERT INTO f_ids (window_start, k, event_id) SELECT {FLOOR_WINDOW}, k, id FROM ev; \
         INSERT INTO f_state (k, window_start, window_end, n, a0, a1) \
           SELECT k, ws, ws + interval '1 day', count(*), count(*), sum(amount) \
           FROM (SELECT k, amount, {FLOOR_WINDOW} AS ws FROM ev) e GROUP BY k, ws; \
         INSERT INTO f_history (k, window_start, window_end, version, kind, n, total, watermark) \
           SELECT k, window_start, window_end, 1, 'main', a0, a1, {w} FROM f_state"
    );
    // Per statement: the ids into the ledger, the first row of each new id kept, its groups
    // upserted into the state (a late group moves to the next version), a late version of each
    // late group, and the rows into the source table.
    let floor = format!(
        "WITH v AS (SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[]::numeric[], $4::text[]::timestamptz[]) \
           AS v(id, k, amount, at)), \
         c AS MATERIALIZED (SELECT v.*, {FLOOR_WINDOW} AS ws FROM v), \
         f AS (INSERT INTO f_ids (window_start, k, event_id) SELECT ws, k, id FROM c ORDER BY 1, 2, 3 \
           ON CONFLICT DO NOTHING RETURNING window_start, k, event_id), \
         kept AS (SELECT DISTINCT ON (c.ws, c.k, c.id) c.* FROM c \
           JOIN f ON f.window_start = c.ws AND f.k = c.k AND f.event_id = c.id), \
         b AS (SELECT k, ws, count(*) AS n, sum(amount) AS total FROM kept GROUP BY k, ws), \
         u AS (INSERT INTO f_state AS s (k, window_start, window_end, version, n, a0, a1) \
           SELECT k, ws, ws + interval '1 day', CASE WHEN ws + interval '1 day' <= {w} THEN 1 ELSE 0 END, n, n, total \
           FROM b ORDER BY ws, k \
           ON CONFLICT (k, window_start) DO UPDATE SET \
           version = CASE WHEN excluded.version > 0 THEN greatest(s.version, 1) + 1 ELSE s.version END, \
           n = s.n + excluded.n, a0 = s.a0 + excluded.a0, a1 = s.a1 + excluded.a1 RETURNING s.*), \
         h AS (INSERT INTO f_history (k, window_start, window_end, version, kind, n, total, watermark) \
           SELECT k, window_start, window_end, version, 'late', a0, a1, {w} FROM u WHERE window_end <= {w}) \
         INSERT INTO ev (id, k, amount, at) SELECT id, k, amount, at FROM v"
    );
    let mut info = LateInfo {
        late_versions: 0,
        duplicates: 0,
        refused: 0,
        expected_duplicates: redelivered,
    };
    let mut fps = Fingerprints::new();
    let mut latest = None;
    let t = rounds(
        "(d)",
        &[Side::Plain, Side::Floor, Side::Pipeline],
        opts.runs,
        |side| {
            reset_side(c, side)?;
            copy_in(c, &pre)?;
            match side {
                Side::Pipeline => {
                    advance(c, "2026-01-02 12:00+00")?;
                }
                Side::Floor => exec(c, &floor_setup)?,
                _ => {}
            }
            settle(c)?;
            let d = if side == Side::Floor {
                let st = c.prepare(&floor).map_err(|e| describe(&e))?;
                timed(|| {
                    for (ids, ks, amounts, ats) in &arrays {
                        c.execute(&st, &[ids, ks, amounts, ats])
                            .map_err(|e| describe(&e))?;
                    }
                    Ok(())
                })?
            } else {
                timed(|| {
                    for st in &stmts {
                        exec(c, st)?;
                    }
                    Ok(())
                })?
            };
            if side == Side::Pipeline {
                latest = Some(latest_fingerprint(c)?);
                info.late_versions =
                    scalar(c, "SELECT count(*) FROM bench_history WHERE kind = 'late'")?;
                info.duplicates = scalar(
                    c,
                    "SELECT duplicates::bigint FROM eventtime.pipelines WHERE name = 'bench'",
                )?;
                info.refused = scalar(
                    c,
                    "SELECT refused::bigint FROM eventtime.pipelines WHERE name = 'bench'",
                )?;
            }
            fps.note(c, side)?;
            Ok(d)
        },
    )?;
    fps.check("(d)")?;
    let mut out = vec![Row {
        workload: format!(
            "(d) late-heavy: {} rows, {} per `INSERT`",
            num(s.d_rows),
            s.d_stmt
        ),
        with: Measure::Time(t[2]),
        without: Measure::Time(t[0]),
        target: Some(Target::AtMost(3.0)),
        floor: Some(Measure::Time(t[1])),
    }];
    let latest = latest.ok_or("(d): no pipeline side ran")?;
    // The batched floor: the same writes per statement but the versions, then one late
    // version per window with late rows.
    let floor_batched = floor
        .replace(
            "version = CASE WHEN excluded.version > 0 THEN greatest(s.version, 1) + 1 ELSE s.version END",
            "version = greatest(s.version, excluded.version)",
        )
        .replacen(
            &floor[floor.find(" h AS (").ok_or("(d): the floor has no versions")?
                ..floor.find(" INSERT INTO ev").ok_or("(d): the floor has no insert")?],
            "",
            1,
        )
        .replace(" RETURNING s.*),", " RETURNING s.*)");
    let floor_batch = format!(
        "INSERT INTO f_history (k, window_start, window_end, version, kind, n, total, watermark) \
         SELECT k, window_start, window_end, 2, 'late', a0, a1, {w} FROM f_state WHERE version > 0 AND window_end <= {w}"
    );
    out.extend(workload_d_batched(
        c,
        opts,
        s,
        DStatements {
            pre: &pre,
            stmts: &stmts,
            arrays: &arrays,
            floor_setup: &floor_setup,
            floor: &floor_batched,
            floor_batch: &floor_batch,
        },
        &latest,
    )?);
    Ok((out, info))
}

/// The pipeline of (d) with batched late firings (SPEC §3): late rows wait in pending rows, and
/// one batch per window is written after the load.
const CREATE_PIPELINE_BATCHED: &str =
    "SELECT eventtime.create_pipeline(name => 'bench', source => 'ev', \
     event_time => 'at', key => ARRAY['k'], event_id => 'id', window_size => interval '1 day', \
     allowed_lateness => interval '1 day', aggregates => 'count(*) AS n, sum(amount) AS total', \
     late_firing => interval '1 millisecond')";

/// The windows of `bench_latest`, as one text: what two pipelines fed the same rows must agree on.
fn latest_fingerprint(c: &mut Client) -> Res<String> {
    text(
        c,
        "SELECT coalesce(md5(string_agg(format('%s|%s|%s|%s', k, window_start, n, total), ',' ORDER BY k, window_start)), '') \
         FROM bench_latest",
    )
}

/// (d) with batched late firings, with synchronous and with asynchronous commit: the same
/// statements as (d) into the table alone and into a pipeline with `late_firing`, whose time
/// includes the batch that `tick()` writes after the load (one late version per window). The
/// pipeline must then publish what (d)'s pipeline published (`latest`), with no pending row left.
/// One statement of (d) as the floor sends it: ids, keys, amounts and times, as arrays.
type DCols = (Vec<i64>, Vec<i32>, Vec<String>, Vec<String>);

/// What (d) sends, for [`workload_d_batched`]: the rows before the load, the statements, their
/// rows as arrays for the floor, and the floor's statements.
struct DStatements<'a> {
    pre: &'a [u8],
    stmts: &'a [String],
    arrays: &'a [DCols],
    floor_setup: &'a str,
    floor: &'a str,
    floor_batch: &'a str,
}

fn workload_d_batched(
    c: &mut Client,
    opts: &Opts,
    s: &Sizes,
    d: DStatements<'_>,
    latest: &str,
) -> Res<Vec<Row>> {
    let mut rows = Vec::new();
    for (mode, commit) in [("synchronous", "on"), ("asynchronous", "off")] {
        // 0: the table alone; 1: the pipeline; 2: the floor (the ledger, the state, the rows,
        // and one late version per window after the load).
        let sides = [(0u8, "without"), (1, "with, batched"), (2, "floor")];
        let label = format!("(d) batched, {mode} commit");
        let t = turns(&label, &sides, opts.runs, |side| {
            let batched = side == 1;
            reset_with(c, batched.then_some(CREATE_PIPELINE_BATCHED))?;
            copy_in(c, d.pre)?;
            if batched {
                advance(c, "2026-01-02 12:00+00")?;
            }
            if side == 2 {
                exec(c, FLOOR_TABLES)?;
                exec(c, d.floor_setup)?;
            }
            settle(c)?;
            exec(c, &format!("SET synchronous_commit = {commit}"))?;
            let elapsed = if side == 2 {
                let st = c.prepare(d.floor).map_err(|e| describe(&e))?;
                timed(|| {
                    for (ids, ks, amounts, ats) in d.arrays {
                        c.execute(&st, &[ids, ks, amounts, ats])
                            .map_err(|e| describe(&e))?;
                    }
                    exec(c, d.floor_batch)
                })?
            } else {
                timed(|| {
                    for st in d.stmts {
                        exec(c, st)?;
                    }
                    if batched {
                        // Two statements, two transactions: the tick's processing time is its
                        // transaction's start, which must come `late_firing` after the last
                        // pending row (one string would run both in one transaction).
                        exec(c, "SELECT pg_sleep(0.002)")?;
                        exec(c, "SELECT * FROM eventtime.tick()")?;
                    }
                    Ok(())
                })?
            };
            exec(c, "RESET synchronous_commit")?;
            if batched {
                let state = state_table(c)?;
                let pending = scalar(
                    c,
                    &format!("SELECT count(*) FROM {state} WHERE _et_pending IS NOT NULL"),
                )?;
                if pending != 0 {
                    return Err(format!(
                        "{label}: {pending} pending rows left after the tick"
                    ));
                }
                if latest_fingerprint(c)? != latest {
                    return Err(format!(
                        "{label}: the batched pipeline's latest versions differ from (d)'s"
                    ));
                }
            }
            Ok(elapsed)
        })?;
        rows.push(Row {
            workload: format!(
                "(d) batched late firings, {mode} commit: {} rows, {} per `INSERT`",
                num(s.d_rows),
                s.d_stmt
            ),
            with: Measure::Time(t[1]),
            without: Measure::Time(t[0]),
            target: Some(Target::AtMost(2.0)),
            floor: Some(Measure::Time(t[2])),
        });
    }
    Ok(rows)
}

/// (f)'s session gap (30 minutes), in seconds.
const SESSION_GAP: u32 = 1_800;

/// (f)'s session pipeline: the pipeline of the other workloads with sessions of a 30-minute gap.
const SESSION_PIPELINE: &str = "SELECT eventtime.create_pipeline(name => 'bench', source => 'ev', \
     event_time => 'at', key => ARRAY['k'], event_id => 'id', session_gap => interval '30 minutes', \
     allowed_lateness => interval '1 day', aggregates => 'count(*) AS n, sum(amount) AS total')";

/// (f)'s tumbling pipeline on the same rows: 1-hour windows, about as many as there are sessions.
const HOURLY_PIPELINE: &str = "SELECT eventtime.create_pipeline(name => 'bench', source => 'ev', \
     event_time => 'at', key => ARRAY['k'], event_id => 'id', window_size => interval '1 hour', \
     allowed_lateness => interval '1 day', aggregates => 'count(*) AS n, sum(amount) AS total')";

/// The plain side's sessions: gaps and islands over the source table. A row starts a new session
/// when it is the key's first or lies a gap or more after the key's previous row (windows
/// `[t, t + gap)` that only touch stay apart); a session is `[first row, last row + gap)`.
const PLAIN_SESSIONS: &str = "\
    INSERT INTO s_sessions (k, window_start, window_end, n, total) \
    SELECT k, min(at), max(at) + interval '30 minutes', count(*), sum(amount) \
    FROM (SELECT k, at, amount, sum(new_session) OVER (PARTITION BY k ORDER BY at ROWS UNBOUNDED PRECEDING) AS session \
          FROM (SELECT k, at, amount, \
                       CASE WHEN at - lag(at) OVER (PARTITION BY k ORDER BY at) < interval '30 minutes' THEN 0 ELSE 1 END \
                         AS new_session \
                FROM ev) r) s \
    GROUP BY k, session";

/// The plain side's 1-hour windows over the same rows.
const PLAIN_WINDOWS: &str = "\
    INSERT INTO s_windows (k, window_start, window_end, n, total) \
    SELECT k, w, w + interval '1 hour', count(*), sum(amount) \
    FROM (SELECT k, amount, date_bin(interval '1 hour', at, timestamptz '1970-01-01 00:00+00') AS w FROM ev) e \
    GROUP BY k, w";

/// The sides of (f).
#[derive(Clone, Copy, PartialEq)]
enum SessSide {
    Plain,
    Hourly,
    Session,
}

struct SessionInfo {
    mid: &'static str,
    first_rows: usize,
    sessions: i64,
    windows: i64,
    fingerprint: String,
    main: i64,
    late: i64,
    merged: i64,
    refused: i64,
}

/// What a relation of windows (`k, window_start, window_end, n, total`) holds: per key its number
/// of windows, rows and amount, and every window's bounds, each as a digest in order.
fn window_fingerprint(c: &mut Client, rel: &str) -> Res<String> {
    text(
        c,
        &format!(
            "SELECT format('%s windows of %s keys, %s rows, amount %s; per key (windows, rows, amount) digest %s; \
               bounds digest %s', w.n, u.n, w.rows, w.amount, u.d, w.d) \
             FROM (SELECT count(*) AS n, sum(n) AS rows, sum(total) AS amount, \
                     md5(string_agg(concat_ws('|', k, window_start, window_end), ',' ORDER BY k, window_start, window_end)) AS d \
                   FROM {rel}) w, \
                  (SELECT count(*) AS n, md5(string_agg(concat_ws('|', k, windows, rows, amount), ',' ORDER BY k)) AS d \
                   FROM (SELECT k, count(*) AS windows, sum(n) AS rows, sum(total) AS amount FROM {rel} GROUP BY k) x) u"
        ),
    )
}

/// On a mismatch of (f)'s session pipeline: the sessions that the gaps and islands over the same
/// source rows and `bench_latest` do not share (at most 20), and the history of the first key.
fn session_diff(c: &mut Client) -> Res<String> {
    let select = PLAIN_SESSIONS
        .split_once("SELECT ")
        .map(|(_, q)| format!("SELECT {q}"))
        .ok_or("no SELECT in PLAIN_SESSIONS")?;
    let rows = c
        .query(
            &format!(
                "WITH g AS ({select}), l AS (SELECT k, window_start, window_end, n, total FROM bench_latest) \
                 SELECT side, k, row FROM ( \
                   SELECT 'gaps and islands only' AS side, k, g::text AS row FROM (TABLE g EXCEPT TABLE l) g \
                   UNION ALL SELECT 'bench_latest only', k, l::text FROM (TABLE l EXCEPT TABLE g) l) x \
                 ORDER BY k, row LIMIT 20"
            ),
            &[],
        )
        .map_err(|e| describe(&e))?;
    let mut out = String::new();
    for r in &rows {
        out += &format!("\n  {}: {}", r.get::<_, &str>(0), r.get::<_, &str>(2));
    }
    if let Some(r) = rows.first() {
        let k: i32 = r.get(1);
        let h = text(
            c,
            &format!(
                "SELECT string_agg(format('%s [%s, %s) v%s %s merged_into %s n %s total %s watermark %s', \
                   k, window_start, window_end, version, kind, merged_into, n, total, watermark), E'\\n  ' \
                   ORDER BY window_start, window_end, version) FROM bench_history WHERE k = {k}"
            ),
        )
        .unwrap_or_else(|e| format!("(history unreadable: {e})"));
        out += &format!(
            "\nhistory of key {k}:\n  {h}\n(database {DB} keeps this side's tables; the rows of key {k}: \
             SELECT * FROM ev WHERE k = {k} ORDER BY at)"
        );
    }
    Ok(out)
}

/// (f) sessions: clicks of many users, each with a few sessions, loaded in random order in
/// multi-row INSERT statements, then the watermark advanced to fire them. Most rows come before a
/// first advance of the watermark, the rest (a tenth, at random) after it: those whose own window
/// `[t, t + gap)` ends by then are late (within the grace of a day, so none is refused) and join,
/// extend or bridge sessions that have fired. The same statements run without a pipeline, with a
/// tumbling pipeline of 1-hour windows and with the session pipeline. The load is timed apart
/// from the firing: the plain side's firing is one `INSERT ... SELECT` computing the sessions (gaps
/// and islands) and one computing the 1-hour windows, the pipelines' the two advances of the
/// watermark. After 'infinity' the pipelines' `bench_latest` must equal what the plain side
/// computed, and no state row may be left.
fn workload_f(c: &mut Client, opts: &Opts, s: &Sizes) -> Res<(Vec<Row>, SessionInfo)> {
    // The first advance, in seconds from 2026-01-01 00:00 UTC: about half of the rows are before
    // it, and a session of most users spans it.
    const MID: u32 = 5 * 3_600;
    let mid = "2026-01-01 05:00+00";
    let mut rng = Rng(0xF);
    // Per user 2 to 4 sessions of 3 to 7 clicks, the first from 00:00 to 02:00 on 1 January;
    // clicks 1 to 29 minutes apart, sessions 1 to 3½ hours apart or, one in ten, exactly a gap
    // apart (their windows touch and stay apart): all within about a day.
    let mut evs = Vec::new();
    let mut sessions = 0usize;
    for k in 0..s.f_users {
        let mut t = rng.below(2 * 3_600) as u32;
        for n in 0..2 + rng.below(3) {
            if n > 0 {
                t += SESSION_GAP;
                if rng.below(10) != 0 {
                    t += 60 * (30 + rng.below(150) as u32);
                }
            }
            sessions += 1;
            for i in 0..3 + rng.below(5) {
                if i > 0 {
                    t += 60 + rng.below(SESSION_GAP as u64 - 60) as u32;
                }
                evs.push(Ev {
                    id: evs.len() as i64 + 1,
                    k: k as i32,
                    cents: rng.below(100_000),
                    day: 1 + t / 86_400,
                    secs: t % 86_400,
                });
            }
        }
    }
    let secs = |e: &Ev| (e.day - 1) * 86_400 + e.secs;
    let (mut after, mut before): (Vec<Ev>, Vec<Ev>) = evs.iter().partition(|_| rng.below(10) == 0);
    rng.shuffle(&mut before);
    rng.shuffle(&mut after);
    let late = after
        .iter()
        .filter(|e| secs(e) + SESSION_GAP <= MID)
        .count();
    println!(
        "(f) {} clicks of {} users in {} sessions (gap 30 minutes), in random order in INSERTs of {}: {} before \
         the watermark moves to {mid}, {} after ({} of them late)",
        num(evs.len()),
        num(s.f_users as usize),
        num(sessions),
        num(s.f_stmt),
        num(before.len()),
        num(after.len()),
        num(late)
    );
    let first: Vec<String> = before.chunks(s.f_stmt).map(insert_sql).collect();
    let second: Vec<String> = after.chunks(s.f_stmt).map(insert_sql).collect();
    let load = |c: &mut Client, stmts: &[String]| -> Res<Duration> {
        timed(|| {
            for st in stmts {
                exec(c, st)?;
            }
            Ok(())
        })
    };

    let mut firing: [Vec<Duration>; 3] = Default::default();
    let mut windows_query: Vec<Duration> = Vec::new();
    let mut plain_fp = (String::new(), String::new());
    let mut info = SessionInfo {
        mid,
        first_rows: before.len(),
        sessions: 0,
        windows: 0,
        fingerprint: String::new(),
        main: 0,
        late: 0,
        merged: 0,
        refused: 0,
    };
    let sides = [
        (SessSide::Plain, "without"),
        (SessSide::Hourly, "tumbling"),
        (SessSide::Session, "session"),
    ];
    let t = turns("(f)", &sides, opts.runs, |side| {
        reset(c, false)?;
        match side {
            SessSide::Plain => exec(
                c,
                "CREATE TABLE s_sessions (k int, window_start timestamptz, window_end timestamptz, n bigint, total numeric); \
                 CREATE TABLE s_windows (k int, window_start timestamptz, window_end timestamptz, n bigint, total numeric)",
            )?,
            SessSide::Hourly => exec(c, HOURLY_PIPELINE)?,
            SessSide::Session => exec(c, SESSION_PIPELINE)?,
        }
        settle(c)?;
        let mut d = load(c, &first)?;
        let mut fire = Duration::ZERO;
        if side != SessSide::Plain {
            fire += timed(|| advance(c, mid).map(drop))?;
        }
        d += load(c, &second)?;
        if side == SessSide::Plain {
            fire += timed(|| exec(c, PLAIN_SESSIONS))?;
            windows_query.push(timed(|| exec(c, PLAIN_WINDOWS))?);
            firing[0].push(fire);
            let got = scalar(c, "SELECT count(*) FROM s_sessions")?;
            if got != sessions as i64 {
                return Err(format!(
                    "the gaps and islands found {got} sessions, the load has {sessions}"
                ));
            }
            plain_fp = (
                window_fingerprint(c, "s_sessions")?,
                window_fingerprint(c, "s_windows")?,
            );
            return Ok(d);
        }
        fire += timed(|| advance(c, "infinity").map(drop))?;
        firing[if side == SessSide::Hourly { 1 } else { 2 }].push(fire);
        let left = state_rows(c)?;
        if left != 0 {
            return Err(format!(
                "{left} state rows left after advance_watermark('infinity')"
            ));
        }
        let refused = scalar(
            c,
            "SELECT refused::bigint FROM eventtime.pipelines WHERE name = 'bench'",
        )?;
        if refused != 0 {
            return Err(format!(
                "{refused} rows refused: the load is made to have none"
            ));
        }
        let fp = window_fingerprint(c, "bench_latest")?;
        let count = scalar(c, "SELECT count(*) FROM bench_latest")?;
        if side == SessSide::Hourly {
            if fp != plain_fp.1 {
                return Err(format!(
                    "the tumbling pipeline's bench_latest differs from the plain side's GROUP BY:\n  {fp}\nagainst\n  {}",
                    plain_fp.1
                ));
            }
            info.windows = count;
            return Ok(d);
        }
        if fp != plain_fp.0 {
            return Err(format!(
                "the session pipeline's bench_latest differs from the plain side's gaps and islands:\n  {fp}\nagainst\n  {}\n\
                 sessions that differ (gaps and islands over this side's source rows against bench_latest):{}",
                plain_fp.0,
                session_diff(c).unwrap_or_else(|e| format!(" (unavailable: {e})"))
            ));
        }
        info.sessions = count;
        info.fingerprint = fp;
        info.main = scalar(c, "SELECT count(*) FROM bench_history WHERE kind = 'main'")?;
        info.late = scalar(c, "SELECT count(*) FROM bench_history WHERE kind = 'late'")?;
        info.merged = scalar(
            c,
            "SELECT count(*) FROM bench_history WHERE kind = 'merged'",
        )?;
        info.refused = refused;
        Ok(d)
    })?;
    let [plain_fire, hourly_fire, session_fire] = firing.map(median);
    let windows_query = median(windows_query);
    Ok((
        vec![
            Row::times(
                format!(
                    "(f) sessions: {} clicks of {} users, random order, {} per `INSERT`, {} late",
                    num(evs.len()),
                    num(s.f_users as usize),
                    num(s.f_stmt),
                    num(late)
                ),
                t[2],
                t[0],
            ),
            Row::times(
                "(f) the same load, tumbling 1-hour windows".to_string(),
                t[1],
                t[0],
            ),
            Row::times(
                format!(
                    "(f) sessions: `advance_watermark` firing {} sessions vs one gaps-and-islands `INSERT ... SELECT`",
                    num(info.sessions as usize)
                ),
                session_fire,
                plain_fire,
            ),
            Row::times(
                format!(
                    "(f) tumbling: `advance_watermark` firing {} windows vs one `INSERT ... SELECT`",
                    num(info.windows as usize)
                ),
                hourly_fire,
                windows_query,
            ),
        ],
        info,
    ))
}

struct Growth {
    fresh: Duration,
    old: Duration,
    batch_day: u32,
}

/// (e) history growth: a COPY batch into day 1 of a fresh pipeline against the same batch into a
/// pipeline whose previous days have all fired and been purged.
fn history_growth(c: &mut Client, opts: &Opts, s: &Sizes) -> Res<Growth> {
    let days = s.e_days;
    // With 1 day of lateness, day d is purged once the watermark reaches d + 2 00:00: the batch
    // goes to day `days + 2`, the first day open once all `days` days are purged.
    let batch_day = days + 2;
    println!(
        "(e) COPY of {} rows into day 1 of a fresh pipeline vs into day {} after {} days of {} rows fired and purged",
        num(s.e_batch),
        batch_day,
        days,
        num(s.e_batch)
    );
    let mut rng = Rng(0xE);
    let base = events(&mut rng, s.e_batch, 0, s.e_keys, (1, 1));
    let batch = |day: u32| -> Vec<u8> {
        let evs: Vec<Ev> = base
            .iter()
            .map(|e| Ev {
                id: e.id + day as i64 * 100_000_000,
                day,
                ..*e
            })
            .collect();
        copy_text(&evs)
    };
    let history: Vec<Vec<u8>> = (1..=days).map(batch).collect();
    let first = batch(1);
    let last = batch(batch_day);
    let (old, fresh) = alternate("(e)", ("after history", "fresh"), opts.runs, |old| {
        reset(c, true)?;
        if old {
            for (i, h) in history.iter().enumerate() {
                copy_in(c, h)?;
                advance(c, &format!("2026-01-{:02} 00:00+00", i + 2))?;
            }
            advance(c, &format!("2026-01-{batch_day:02} 00:00+00"))?;
            let left = state_rows(c)?;
            if left != 0 {
                return Err(format!(
                    "{left} state rows left after {days} days fired and purged"
                ));
            }
        }
        settle(c)?;
        timed(|| copy_in(c, if old { &last } else { &first }))
    })?;
    Ok(Growth {
        fresh,
        old,
        batch_day,
    })
}

// ---------------------------------------------------------------------------------------------

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The 1-minute load average: the machine may be shared, and other work skews the times.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// Runs the workloads and prints the report; returns what failed (the run then exits with 1).
fn run() -> Res<Vec<String>> {
    let opts = parse_args()?;
    let s = Sizes::new(opts.smoke);

    let mut admin = connect("postgres")?;
    // Two calls: DROP DATABASE cannot run in the implicit transaction of a multi-statement query.
    exec(
        &mut admin,
        &format!("DROP DATABASE IF EXISTS {DB} WITH (FORCE)"),
    )?;
    exec(&mut admin, &format!("CREATE DATABASE {DB}"))?;
    drop(admin);
    let mut c = connect(DB)?;
    exec(&mut c, "CREATE EXTENSION pg_eventtime")?;
    if opts.async_commit {
        exec(&mut c, "SET synchronous_commit = off")?;
    }

    let date = text(
        &mut c,
        "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC'",
    )?;
    let version = text(&mut c, "SELECT version()")?;
    let ext = text(
        &mut c,
        "SELECT extversion FROM pg_extension WHERE extname = 'pg_eventtime'",
    )?;
    let settings = text(
        &mut c,
        "SELECT string_agg(name || '=' || setting || coalesce(unit, ''), ', ' ORDER BY name) FROM pg_settings \
         WHERE name IN ('shared_buffers', 'synchronous_commit', 'fsync', 'max_wal_size', 'work_mem', 'autovacuum')",
    )?;
    let nproc = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let load_start = load_average();

    let started = Instant::now();
    let mut rows = Vec::new();
    let mut state = None;
    let mut late = None;
    let mut growth = None;
    let mut a_arrays = None;
    let mut a_plain = None;
    let mut a_triggers = None;
    let mut sessions = None;

    let a_data = if opts.wants('a') || opts.wants('e') {
        let mut rng = Rng(0xA);
        copy_text(&events(&mut rng, s.a_events, 1, s.a_keys, (1, s.a_days)))
    } else {
        Vec::new()
    };
    if opts.wants('a') {
        let (no_ids, group, read) = workload_a_no_ids(&mut c, &opts, &a_data, &s)?;
        a_triggers = Some((group, read, no_ids.without.value()));
        let offsets = workload_a_offsets(&mut c, &opts, &a_data, &s)?;
        let cumulate = workload_a_cumulate(&mut c, &opts, &a_data, &s)?;
        let expressions = workload_a_expressions(&mut c, &opts, &a_data, &s)?;
        let any_aggregate = workload_a_any_aggregate(&mut c, &opts, &a_data, &s)?;
        let indexed = workload_a_indexed(&mut c, &opts, &a_data, &s)?;
        let (row, plain, arrays, trigger) = workload_a(&mut c, &opts, &a_data, &s)?;
        a_arrays = Some((arrays, trigger, row.without.value()));
        a_plain = Some((plain, row.with.value(), row.without.value()));
        rows.push(row);
        rows.push(indexed);
        rows.push(no_ids);
        rows.push(offsets);
        rows.extend(cumulate);
        rows.extend(expressions);
        rows.extend(any_aggregate);
    }
    if opts.wants('e') {
        // The last measurement of (a) is a pipeline side: its load is still there.
        println!("(e) state rows after (a)'s load, then after advance_watermark('infinity')");
        state = Some(state_check(&mut c, &a_data, opts.wants('a'))?);
    }
    if opts.wants('b') {
        rows.push(workload_b(&mut c, &opts, &s)?);
        rows.extend(workload_b_statements(&mut c, &opts, &s)?);
    }
    if opts.wants('c') {
        rows.push(workload_c(&mut c, &opts, &s)?);
    }
    if opts.wants('d') {
        let (r, i) = workload_d(&mut c, &opts, &s)?;
        rows.extend(r);
        late = Some(i);
    }
    if opts.wants('f') {
        let (r, i) = workload_f(&mut c, &opts, &s)?;
        rows.extend(r);
        sessions = Some(i);
    }
    if opts.wants('e') {
        growth = Some(history_growth(&mut c, &opts, &s)?);
    }
    let mut hot_waits = None;
    if opts.wants('g') {
        let (row, in_trigger, waits) = writers::workload_g(&mut c, &opts, &s)?;
        hot_waits = Some((waits, in_trigger, row.without.value()));
        rows.push(row);
    }
    let holds = if opts.wants('h') {
        Some(writers::workload_h(&mut c, &opts)?)
    } else {
        None
    };
    let reads = if opts.wants('i') {
        Some(reads::workload_i(&mut c, &s)?)
    } else {
        None
    };
    let peaks = if opts.wants('m') {
        Some(memory::workload_m(&s)?)
    } else {
        None
    };

    println!();
    println!(
        "## pg_eventtime benchmark{}",
        if opts.smoke {
            " (smoke: tiny sizes, times mean nothing)"
        } else {
            ""
        }
    );
    println!();
    println!("- date: {date}");
    println!(
        "- machine: {nproc} CPUs (nproc), {}; load average {load_start} at the start, {} at the end",
        cpu_model(),
        load_average()
    );
    println!("- server: {version}; pg_eventtime {ext}");
    println!("- settings: {settings}");
    println!(
        "- method: median of {} run(s) per side, the sides taking turns in one run; fresh tables, CHECKPOINT and \
         VACUUM ANALYZE before each measurement; client-side wall time of the measured statements only \
         (total {:.0} s)",
        opts.runs,
        started.elapsed().as_secs_f64()
    );
    println!();
    if !rows.is_empty() {
        println!(
            "| workload | with pipeline | without | ratio (with ÷ without) | target | floor | floor ratio |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|");
        for r in &rows {
            let (floor, floor_ratio) = match (r.floor, r.floor_ratio()) {
                (Some(f), Some(x)) => (f.show(), format!("{x:.2}×")),
                _ => ("—".to_string(), "—".to_string()),
            };
            let target = match r.target {
                Some(t) => t.show(),
                None => "—".to_string(),
            };
            println!(
                "| {} | {} | {} | {:.2}× | {target} | {floor} | {floor_ratio} |",
                r.workload,
                r.with.show(),
                r.without.show(),
                r.ratio()
            );
        }
        println!();
        if rows.iter().any(|r| r.floor.is_some()) {
            println!(
            "floor: the writes the workload needs (each event id into a unique ledger, the window state, the \
             late versions), made by hand in plain SQL in the statement of the insert ((a): in its transaction) \
             with the pipeline's tables, and checked to leave the same state rows, late versions and event ids \
             as the pipeline. It has none of the pipeline's own work (trigger, transition table, watermark, \
             classification, counts)."
            );
        }
        if let Some((plain, with, indexed)) = a_plain {
            let p = plain.as_secs_f64().max(1e-9);
            println!(
                "(a) with event ids against the table without any index: {}, so the pipeline {:.2}× and the \
                 table with the unique index {:.2}× of it.",
                ms(plain),
                with / p,
                indexed / p
            );
        }
        if let Some((arrays, trigger, without)) = a_arrays {
            let r = |d: Duration| d.as_secs_f64() / without.max(1e-9);
            println!(
                "(a) floor with the ids of a key and window in one array (one index entry per key and window, \
                 not per event): {}, {:.2}×; the same made by a statement trigger that also classifies the rows \
                 and checks for repeated ids: {}, {:.2}×.",
                ms(arrays),
                r(arrays),
                ms(trigger),
                r(trigger)
            );
        }
        if let Some((group, read, without)) = a_triggers {
            let r = |d: Duration| d.as_secs_f64() / without.max(1e-9);
            println!(
                "(a) without event ids, the floor's grouping made by a statement trigger from its transition \
                 table: {}, {:.2}×; a statement trigger that only reads its transition table once (every \
                 column the grouping needs, each row's window, the sum of the values; no grouping, no \
                 writes): {}, {:.2}×.",
                ms(group),
                r(group),
                ms(read),
                r(read)
            );
        }
        println!();
        if let Err(e) = write_ratios(&rows, &date, opts.smoke) {
            println!("(the ratios were not written for the chart: {e})");
        }
        let mut missed: Vec<&str> = rows
            .iter()
            .filter(|r| r.target.is_some_and(|t| !t.met(r.ratio())))
            .map(|r| &r.workload[..3])
            .collect();
        // (a) has three rows: with event ids, without, and with offsets.
        missed.dedup();
        // A workload without a target ((f)) neither meets nor misses one.
        if !missed.is_empty() {
            println!(
                "Targets missed (reported, not failed): {}.",
                missed.join(", ")
            );
        } else if rows.iter().any(|r| r.target.is_some()) {
            println!("All targets met.");
        }
        let mut below: Vec<&str> = rows
            .iter()
            .filter(|r| {
                r.target
                    .is_some_and(|t| r.floor_ratio().is_some_and(|f| !t.met(f)))
            })
            .map(|r| &r.workload[..3])
            .collect();
        below.dedup();
        if !below.is_empty() {
            println!("Targets below their floor: {}.", below.join(", "));
        }
    }
    if rows.iter().any(|r| r.workload.starts_with("(g)")) {
        println!(
            "(g) is a throughput: rows committed per second by all connections together (median of the runs), so \
             its ratio, the pipeline's throughput ÷ the table alone's, is better the higher it is; every other \
             ratio is of times, better the lower. Each connection is a thread with its own connection and one \
             prepared statement, every statement commits on its own, all rows go to one window of an unkeyed \
             pipeline with an event id. After each pipeline run the window's state summed to the rows committed, \
             and after advance_watermark('infinity') so did its `bench_latest` row."
        );
    }
    if let Some(([with, without, floor, in_trigger], trigger_rate, without_rate)) = &hot_waits {
        println!(
            "(g) floor in a trigger (the floor's writes made by an `AFTER INSERT ... FOR EACH STATEMENT` trigger in \
             PL/pgSQL from its transition table, in one statement: what a trigger that writes with SQL costs at \
             least, without the pipeline's watermark, window, owner switch or counts): {} rows/s, {:.2}×.",
            num(trigger_rate.round() as usize),
            trigger_rate / without_rate.max(1e-9)
        );
        println!(
            "(g) where the writers' backends were (`pg_stat_activity` every {} ms, all runs; `running`: on the CPU or \
             ready to run; `Client:ClientRead`: waiting for the client; `LWLock:WALWrite`, `IO:WALSync`: the commits' \
             flush; `Lock:extend`: a table or index growing by a page): with the pipeline {with}; without {without}; \
             floor (the row, its id into a ledger and its partials appended to a state, by hand in one statement) {floor}; \
             floor in a trigger {in_trigger}.",
            writers::SAMPLE_EVERY.as_millis()
        );
    }
    if rows.iter().any(|r| r.workload.starts_with("(b)")) {
        println!(
            "(b) every statement commits on its own: the WAL flush of each commit (synchronous_commit, fsync above) \
             is part of both sides."
        );
    }
    if let Some(i) = &late {
        println!(
            "(d) with the pipeline: {} late versions written, {} duplicates ({} redelivered), {} refused.",
            num(i.late_versions as usize),
            num(i.duplicates as usize),
            num(i.expected_duplicates),
            i.refused
        );
    }
    if let Some(i) = &sessions {
        println!(
            "(f) session gap 30 minutes, allowed lateness 1 day; the watermark advanced to {} after the first {} rows \
             (untimed on both sides, its firing counted in the pipelines' firing), then to 'infinity'. Session \
             pipeline: {} sessions in `bench_latest`, equal to the plain side's gaps and islands ({}); history: {} \
             `main`, {} `late`, {} `merged` versions; {} refused. Tumbling pipeline: {} windows in `bench_latest`, \
             equal to the plain side's `GROUP BY`. No state rows left on either after 'infinity'.",
            i.mid,
            num(i.first_rows),
            num(i.sessions as usize),
            i.fingerprint,
            num(i.main as usize),
            num(i.late as usize),
            num(i.merged as usize),
            i.refused,
            num(i.windows as usize)
        );
    }
    let mut failures: Vec<String> = Vec::new();
    if let Some(st) = &state {
        println!(
            "(e) state size after (a)'s load, windows open: {} state rows (at most {} keys × {} windows), {} event ids in the ledger.",
            num(st.open_state as usize),
            num(s.a_keys as usize),
            s.a_days,
            num(st.open_ledger as usize)
        );
        let verdict = if st.after_state == 0 {
            "OK"
        } else {
            "FAILED: must be 0"
        };
        println!(
            "(e) state size after advance_watermark('infinity') ({} windows fired in {}): {} state rows, {} ledger rows — {verdict}.",
            num(st.fired as usize),
            ms(st.advance),
            st.after_state,
            st.after_ledger
        );
        if st.after_state != 0 {
            failures.push(
                "(e) state rows remain after the watermark passed every deadline (SPEC §6)".into(),
            );
        }
    }
    if let Some(g) = &growth {
        println!(
            "(e) history growth: COPY of {} rows into day 1 of a fresh pipeline {}; into day {} after {} days fired and purged {}; ratio {:.2}×.",
            num(s.e_batch),
            ms(g.fresh),
            g.batch_day,
            s.e_days,
            ms(g.old),
            g.old.as_secs_f64() / g.fresh.as_secs_f64().max(1e-9)
        );
    }
    if let Some(holds) = &holds {
        println!();
        println!(
            "(h) connection A inserts a row of a window in a transaction it keeps open; connection B then inserts \
             another row of the same window (autocommit, statement_timeout {}); B must finish within {} s while A \
             is open ({} run(s) per case; the window already had a committed row, B's):",
            writers::HOLD_TIMEOUT,
            writers::HOLD_LIMIT.as_secs_f64(),
            opts.runs
        );
        println!();
        println!("| (h) B's single-row `INSERT` while A holds a row of the window | B's time (median) | slowest | verdict |");
        println!("|---|---:|---:|---|");
        for h in holds {
            let verdict = if h.timeouts > 0 {
                format!(
                    "FAILED: waited for A, cancelled after {} in {} of {} runs",
                    writers::HOLD_TIMEOUT,
                    h.timeouts,
                    opts.runs
                )
            } else if h.worst().is_some_and(|w| w > writers::HOLD_LIMIT) {
                format!(
                    "FAILED: took more than {} s",
                    writers::HOLD_LIMIT.as_secs_f64()
                )
            } else {
                "OK: did not wait".to_string()
            };
            if verdict.starts_with("FAILED") {
                failures.push(format!("(h) {}: {verdict}", h.case.name()));
            }
            let show = |d: Option<Duration>| d.map(ms).unwrap_or_else(|| "—".into());
            println!(
                "| {} | {} | {} | {verdict} |",
                h.case.name(),
                show(writers::hold_median(h)),
                show(h.worst())
            );
        }
    }
    if let Some(r) = &reads {
        println!();
        println!(
            "(i) reads over a history of {} rows ({} keys × {} days, loaded with one `INSERT ... SELECT` and fired \
             in {}, with {} late versions on {}): one window of key {} on that day, and that day; checked plan \
             of `EXPLAIN (ANALYZE, BUFFERS)`, then the median of {} executions: the server's execution time \
             (`EXPLAIN (ANALYZE, TIMING OFF)`) and the client's round trip of the query (parse, plan, execute, rows):",
            num(r.history_rows as usize),
            num(s.i_keys as usize),
            num(s.i_days as usize),
            ms(r.load),
            r.late_versions,
            r.day,
            r.key,
            s.i_reps
        );
        println!();
        println!("| (i) read | rows | execution | round trip | buffers | plan | index read |");
        println!("|---|---:|---:|---:|---:|---|---|");
        for x in &r.reads {
            let verdict = match &x.fault {
                None => "yes".to_string(),
                Some(f) => {
                    failures.push(format!("(i) {} of bench_{}: {f}", x.what, x.view));
                    format!("FAILED: {f}")
                }
            };
            println!(
                "| {} of `bench_{}` | {} | {} | {} | {} | {} | {verdict} |",
                x.what,
                x.view,
                num(x.rows as usize),
                ms3(x.execution),
                ms3(x.round_trip),
                x.buffers,
                x.plan
            );
        }
        let slowest = r
            .reads
            .iter()
            .filter(|x| x.what == "one window of one key")
            .map(|x| x.execution)
            .max()
            .unwrap_or_default();
        println!();
        println!(
            "(i) target (SPEC §6): one window of one key well under a millisecond; the slowest of the views \
             took {} to execute — {}.",
            ms3(slowest),
            if slowest < Duration::from_millis(1) {
                "met"
            } else {
                "missed (reported, not failed)"
            }
        );
    }
    if let Some(peaks) = &peaks {
        println!();
        println!(
            "(m) peak resident memory of the backend (`VmHWM`: private memory and the shared buffers it touched) \
             for one `COPY` of {} events with {} distinct keys, each side in a fresh backend (work_mem {}); \
             SPEC §6: a pipeline's below 512 MB:",
            num(s.m_rows),
            num(s.m_keys as usize),
            text(&mut c, "SHOW work_mem")?
        );
        println!();
        println!("| (m) side | peak | time | below 512 MB |");
        println!("|---|---:|---:|---|");
        for p in peaks {
            let verdict = if p.side == "the table alone" {
                "—".to_string()
            } else if p.kb < memory::BOUND_KB {
                "yes".to_string()
            } else {
                failures.push(format!("(m) {}: peak {} MB", p.side, p.kb / 1024));
                "FAILED".to_string()
            };
            println!(
                "| {} | {} MB | {} | {verdict} |",
                p.side,
                p.kb / 1024,
                ms(p.time)
            );
        }
    }
    Ok(failures)
}

/// Writes the ratios of `rows` (with their targets and floors) to `BENCH_RATIOS` (default
/// `target/bench/ratios.json` at the repository's top), for the chart `scripts/bench.sh` draws
/// from them (`tests/bench/chart.py`).
fn write_ratios(rows: &[Row], date: &str, smoke: bool) -> Res<()> {
    let path = std::env::var("BENCH_RATIOS").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../target/bench/ratios.json"
        )
        .to_string()
    });
    let items: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let (kind, target) = match r.target {
                Some(Target::AtMost(t)) => ("at_most", Some(t)),
                Some(Target::AtLeast(t)) => ("at_least", Some(t)),
                None => ("none", None),
            };
            serde_json::json!({
                "workload": r.workload,
                "ratio": r.ratio(),
                "target": target,
                "target_kind": kind,
                "floor_ratio": r.floor_ratio(),
            })
        })
        .collect();
    let doc = serde_json::json!({ "date": date, "smoke": smoke, "rows": items });
    if let Some(dir) = std::path::Path::new(&path).parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(&path, serde_json::to_string_pretty(&doc).expect("json"))
        .map_err(|e| format!("{path}: {e}"))
}

fn main() {
    match run() {
        Ok(failures) if failures.is_empty() => {}
        Ok(failures) => {
            for f in failures {
                eprintln!("benchmark: {f}");
            }
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("benchmark failed: {e}");
            std::process::exit(2);
        }
    }
}
