//! State bounded by windows (SPEC §6): writers that each send many small statements, at once,
//! into a few windows, leave a number of state rows that depends on the windows and the writers,
//! never on the statements. After every round of concurrent single-row (and a few small
//! multi-row) statements, each (key, window) has at most one state row per writer, plus one for
//! a fired window's late rows; `eventtime.pipelines.state_rows` is that number of rows; and after
//! `'infinity'` none is left. The versions are checked against a model of SPEC §2-3 written here:
//! within a round the watermark does not move, so each row lands by the rule alone, whatever
//! the order in which the writers' statements commit, and a redelivered id is a duplicate.
//! A reader reads `_provisional` while they write (SPEC §3 provisional reads: never waiting, each
//! open window between what it had before the round and after it), and after every round
//! `_provisional` is exactly the model's open windows.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use rand::Rng;

use crate::db::{self, describe, Row};
use crate::runner::rng;

const DB: &str = "eventtime_state_bound";
const HOUR: i64 = 3_600_000_000;
const LATENESS: i64 = 2 * HOUR;
const WRITERS: usize = 4;
const ROUNDS: usize = 10;
const STATEMENTS: usize = 50;
/// 2026-01-01 00:00 UTC, in microseconds since the Unix epoch.
const START: i64 = 1_767_225_600_000_000;
const KEYS: [Option<&str>; 3] = [Some("a"), Some("b"), None];

/// One event: id, key, value, event time (µs).
#[derive(Clone)]
struct Event {
    id: i64,
    key: Option<&'static str>,
    v: i64,
    at: i64,
}

fn ts(us: i64) -> String {
    format!("to_timestamp({us}::numeric / 1000000)")
}

fn key_sql(k: Option<&str>) -> String {
    k.map_or("NULL".into(), |k| format!("'{k}'"))
}

/// The model: what each (key, window start) has accepted, refused rows, duplicates.
#[derive(Default, Clone)]
struct Model {
    seen: BTreeSet<(Option<&'static str>, i64, i64)>,
    windows: BTreeMap<(Option<&'static str>, i64), (i64, i64)>,
    refused: i64,
    duplicates: i64,
}

impl Model {
    /// The landing of SPEC §2 under `watermark`: open while the window's end is after it, late
    /// while its end plus the lateness is, refused after.
    fn land(&mut self, e: &Event, watermark: i64) {
        let start = e.at.div_euclid(HOUR) * HOUR;
        if !self.seen.insert((e.key, start, e.id)) {
            self.duplicates += 1;
            return;
        }
        if start + HOUR + LATENESS > watermark {
            let w = self.windows.entry((e.key, start)).or_default();
            w.0 += 1;
            w.1 += e.v;
        } else {
            self.refused += 1;
        }
    }
}

fn one(db: &mut postgres::Client, sql: &str) -> Row {
    db::text_rows(db, sql)
        .pop()
        .unwrap_or_else(|| panic!("no row: {sql}"))
}

pub fn run(seed: u64) {
    let ctx = |round: usize, what: &str| {
        format!(
            "seed {seed} (replay with PROPERTY_SEED={seed}), state bound, round {round}: {what}"
        )
    };
    let mut db = db::fresh_database(DB);
    db.batch_execute(&format!(
        "CREATE TABLE sb (id bigint, k text, v int, at timestamptz);
         SELECT eventtime.create_pipeline(name => 'sb', source => 'sb', event_time => 'at', key => ARRAY['k'],
             window_size => '1 hour', allowed_lateness => '2 hours', event_id => 'id',
             aggregates => 'count(*) AS n, sum(v) AS total');
         SELECT eventtime.advance_watermark('sb', {});",
        ts(START)
    ))
    .unwrap_or_else(|e| panic!("{}", ctx(0, &describe(&e))));
    let state = one(
        &mut db,
        "SELECT format('_eventtime.p%s_state', id) FROM _eventtime.pipeline WHERE name = 'sb'",
    )[0]
    .clone()
    .unwrap();
    let mut writers: Vec<postgres::Client> = (0..WRITERS).map(|_| db::connect(DB)).collect();
    let mut reader = db::connect(DB);
    let total_reads = AtomicUsize::new(0);
    let mut model = Model::default();
    let mut watermark = START;
    let mut sent: Vec<Vec<Event>> = vec![Vec::new(); WRITERS];
    let mut statements = 0;
    let mut advances = rng(seed, 699);
    for round in 0..ROUNDS {
        // Each writer's statements for the round: new events around the watermark (open, late
        // and refused windows), and now and then a redelivery of one it sent before.
        let mut plans: Vec<Vec<Vec<Event>>> = Vec::new();
        for (w, past) in sent.iter_mut().enumerate() {
            let mut r = rng(seed, 700 + (round * WRITERS + w) as u64);
            let mut plan = Vec::new();
            for s in 0..STATEMENTS {
                let rows = if r.random_bool(0.1) {
                    r.random_range(2..6)
                } else {
                    1
                };
                let mut stmt = Vec::new();
                for i in 0..rows {
                    let e = if !past.is_empty() && r.random_bool(0.1) {
                        past[r.random_range(0..past.len())].clone()
                    } else {
                        Event {
                            id: ((w * 1_000_000 + round * 10_000 + s * 10 + i) as i64),
                            key: KEYS[r.random_range(0..KEYS.len())],
                            v: r.random_range(-5..100),
                            at: watermark + r.random_range(-4 * HOUR..3 * HOUR),
                        }
                    };
                    past.push(e.clone());
                    stmt.push(e);
                }
                plan.push(stmt);
            }
            plans.push(plan);
        }
        let before = model.windows.clone();
        for plan in &plans {
            for stmt in plan {
                for e in stmt {
                    model.land(e, watermark);
                }
            }
        }
        let after = &model.windows;
        let open = |start: i64| start + HOUR > watermark;
        // The writers send their statements at once, a commit each, while a reader reads
        // _provisional over and over: each read completes while they write, and shows each open
        // window with a count between the one before the round and the one after it, never
        // less than the reader saw before.
        let writing = AtomicUsize::new(WRITERS);
        thread::scope(|scope| {
            let (writing, ctx_r, before, total_reads) = (&writing, &ctx, &before, &total_reads);
            let reader = &mut reader;
            scope.spawn(move || {
                let mut seen: BTreeMap<(Option<String>, i64), i64> = BTreeMap::new();
                let mut reads = 0;
                while writing.load(Ordering::Acquire) > 0 || reads == 0 {
                    reads += 1;
                    total_reads.fetch_add(1, Ordering::Relaxed);
                    for r in db::text_rows(
                        reader,
                        "SELECT k, ((extract(epoch FROM window_start) * 1000000)::bigint)::text, n::text FROM sb_provisional",
                    ) {
                        let start: i64 = r[1].as_deref().unwrap().parse().unwrap();
                        let n: i64 = r[2].as_deref().unwrap().parse().unwrap();
                        let k = KEYS.iter().copied().find(|k| k.map(str::to_string) == r[0]).unwrap();
                        let low = before.get(&(k, start)).map_or(0, |w| w.0);
                        let high = after.get(&(k, start)).map_or(0, |w| w.0);
                        let last = seen.insert((r[0].clone(), start), n).unwrap_or(0);
                        assert!(
                            open(start) && low.max(last) <= n && n <= high,
                            "{}",
                            ctx_r(round, &format!(
                                "read {reads} of _provisional during the writes: window {start} key {:?} has n = {n}, \
                                 outside [{}, {high}] (open: {})", r[0], low.max(last), open(start)
                            ))
                        );
                    }
                }
            });
            for (w, (conn, plan)) in writers.iter_mut().zip(&plans).enumerate() {
                let ctx = &ctx;
                scope.spawn(move || {
                    for stmt in plan {
                        let values: Vec<String> = stmt
                            .iter()
                            .map(|e| {
                                format!("({}, {}, {}, {})", e.id, key_sql(e.key), e.v, ts(e.at))
                            })
                            .collect();
                        let sql = format!("INSERT INTO sb VALUES {}", values.join(", "));
                        conn.batch_execute(&sql).unwrap_or_else(|e| {
                            panic!(
                                "{}",
                                ctx(round, &format!("writer {w}: {}\n{sql}", describe(&e)))
                            )
                        });
                    }
                    writing.fetch_sub(1, Ordering::Release);
                });
            }
        });
        statements += WRITERS * STATEMENTS;
        // After the round, _provisional is exactly the open windows of the model.
        let got = db::text_rows(
            &mut db,
            "SELECT k, ((extract(epoch FROM window_start) * 1000000)::bigint)::text, n::text, total::text \
             FROM sb_provisional ORDER BY 2, 1 NULLS LAST",
        );
        let mut want: Vec<(i64, Option<&str>, i64, i64)> = after
            .iter()
            .filter(|((_, s), _)| open(*s))
            .map(|((k, s), (n, t))| (*s, *k, *n, *t))
            .collect();
        want.sort_by(|a, b| (a.0, a.1.is_none(), a.1).cmp(&(b.0, b.1.is_none(), b.1)));
        let want: Vec<Row> = want
            .into_iter()
            .map(|(s, k, n, t)| {
                vec![
                    k.map(str::to_string),
                    Some(s.to_string()),
                    Some(n.to_string()),
                    Some(t.to_string()),
                ]
            })
            .collect();
        assert_eq!(
            got,
            want,
            "{}",
            ctx(round, "_provisional against the model's open windows")
        );
        // The bound: per (key, window), a row per writer and one of late rows.
        let most = one(
            &mut db,
            &format!("SELECT coalesce(max(c), 0)::text FROM (SELECT count(*) c FROM {state} GROUP BY k, window_start) x"),
        )[0]
        .clone()
        .unwrap()
        .parse::<usize>()
        .unwrap();
        assert!(
            most <= WRITERS + 1,
            "{}",
            ctx(round, &format!("a window has {most} state rows, more than {WRITERS} writers and one of late rows"))
        );
        let counted = one(
            &mut db,
            &format!(
                "SELECT p.state_rows::text, (SELECT count(*) FROM {state})::text FROM eventtime.pipelines p WHERE p.name = 'sb'"
            ),
        );
        assert_eq!(
            counted[0],
            counted[1],
            "{}",
            ctx(round, "state_rows is the number of state rows")
        );
        // Then the watermark moves on, by up to an hour and a half.
        watermark += advances.random_range(0..=90) * 60_000_000;
        db.batch_execute(&format!(
            "SELECT eventtime.advance_watermark('sb', {})",
            ts(watermark)
        ))
        .unwrap_or_else(|e| panic!("{}", ctx(round, &describe(&e))));
    }
    db.batch_execute("SELECT eventtime.advance_watermark('sb', 'infinity')")
        .unwrap_or_else(|e| panic!("{}", ctx(ROUNDS, &describe(&e))));
    let left = one(
        &mut db,
        &format!("SELECT (SELECT count(*) FROM {state})::text, state_rows::text, refused::text, duplicates::text FROM eventtime.pipelines WHERE name = 'sb'"),
    );
    assert_eq!(
        left,
        vec![
            Some("0".into()),
            Some("0".into()),
            Some(model.refused.to_string()),
            Some(model.duplicates.to_string())
        ],
        "{}",
        ctx(ROUNDS, &format!("(state rows, state_rows, refused, duplicates) after 'infinity', after {statements} statements"))
    );
    let latest = db::text_rows(
        &mut db,
        "SELECT k, ((extract(epoch FROM window_start) * 1000000)::bigint)::text, n::text, total::text FROM sb_latest ORDER BY 2, 1 NULLS LAST",
    );
    let mut expected: Vec<(i64, Option<&str>, i64, i64)> = model
        .windows
        .iter()
        .map(|((k, s), (n, t))| (*s, *k, *n, *t))
        .collect();
    expected.sort_by(|a, b| (a.0, a.1.is_none(), a.1).cmp(&(b.0, b.1.is_none(), b.1)));
    let expected: Vec<Row> = expected
        .into_iter()
        .map(|(s, k, n, t)| {
            vec![
                k.map(str::to_string),
                Some(s.to_string()),
                Some(n.to_string()),
                Some(t.to_string()),
            ]
        })
        .collect();
    assert_eq!(
        latest,
        expected,
        "{}",
        ctx(ROUNDS, "_latest against the model")
    );
    println!(
        "state bound: {statements} statements from {WRITERS} writers, {} reads of _provisional while they wrote",
        total_reads.load(Ordering::Relaxed)
    );
    drop(writers);
    db::drop_database(DB);
}
