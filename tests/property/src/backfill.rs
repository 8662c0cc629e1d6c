//! Backfill equals live: replaying a stored event log in big statements, with the watermark
//! advances back to back, publishes what the live feed published, once the live feed's extra
//! late versions are collapsed.
//!
//! The log. From the seed, an ordered list of steps over three sources `p0`, `p1`, `p2`:
//! `Deliver(source, rows)` (1 to 8 rows with event times near that source's clock or the
//! pipeline watermark: open, late within the grace, beyond the grace, on window boundaries, and
//! redeliveries, exact copies of earlier rows with the same event id), `Advance(source, t)`
//! (mostly forward, sometimes a big jump that races ahead of the other sources, sometimes not
//! ahead: a no-op) and now and then `MarkIdle(source)` of a registered source. The log ends with
//! every source advancing to `'infinity'`, so every window fires and every state row is purged.
//!
//! An independent model of the clocks (each source's forward-only watermark; the pipeline
//! watermark is the minimum over the sources not marked idle, and never goes back) tells, for
//! each Advance and MarkIdle, the pipeline watermark it leaves, and whether it moves it.
//!
//! The same log feeds three pipelines with the same definition (the windows of a [`Shape`]: 1-hour
//! tumbling windows with 30 minutes of allowed lateness, hopping windows of 2 hours every 45
//! minutes, or calendar months, 2 every month, with 5 days; key `k`, event id `id`, `count(*)`,
//! `sum(amount)`, `max(amount)`, an `idle_timeout` of one hour that the few seconds of the test
//! never reach), each on its own table of the same columns:
//! - `live`: every step in log order; each row of a Deliver is a single-row `INSERT`; each
//!   Advance and MarkIdle is a call of its own; `pg_sleep` now and then, so processing time passes.
//! - `per_run`: each run of consecutive Deliver steps between two Advance/MarkIdle steps is one
//!   statement (a multi-row `INSERT` or a `COPY`); each Advance and MarkIdle a call of its own.
//! - `backfill`: every Deliver between two steps that move the pipeline watermark is one statement
//!   (`INSERT` or `COPY`); the Advance and MarkIdle steps in between are sent back to back, several
//!   in one round trip (one transaction). The steps that do not move the pipeline watermark
//!   (a source that is not the slowest, a no-op) do not split the statement: nothing a row's
//!   landing depends on changed, and a backfill job that replays a log has no reason to stop there.
//!   Split there, as `per_run` is, two statements under the same pipeline watermark would each
//!   write a late version with that watermark, which the (kind, watermark) collapse below cannot
//!   tell from two live rows: `per_run` is compared only after collapsing its history too.
//!
//! Why they must agree. A row's landing in each of its windows depends only on that window and
//! the pipeline watermark in force when its statement starts (SPEC §2-3; per (row, window) pair
//! for a row in several windows, §7), and the pipeline watermark is a function of the
//! sequence of Advance and MarkIdle steps alone (the idle timeout never fires here). Every row is
//! delivered under the same pipeline watermark in the three feeds, so it lands the same way:
//! the same rows are accepted, refused and found duplicate, and each advance finds the same
//! window state, so it fires and purges the same windows with the same values. What differs is
//! the statement grouping, and SPEC §3 writes one late version per statement that adds a row to
//! a fired window: where `live` writes one version per late row, `backfill` writes one version
//! per window for all the late rows of the same pipeline watermark. Those live versions are
//! consecutive, all of kind `late` and with that same watermark (the pipeline watermark never
//! goes back, so a watermark is never in force twice), and the last of them holds the state
//! after every one of those rows: exactly the backfill's single version. Hence, exactly:
//! 1. the refused rows are the same multiset (every column but `refused_at`; the tables have
//!    the same columns, so `row` is the same jsonb);
//! 2. history: for each window, take the live versions in order, group consecutive versions with
//!    the same (kind, watermark), keep the last of each group and renumber 1..n: the result is
//!    the backfill history (version, kind, aggregates, watermark; `fired_at` differs, and
//!    `sealed` is version = 1). The same holds for `per_run`, and the backfill history is
//!    already collapsed. So version 1 of every window that had rows at its main firing (kind
//!    `main`) is the same sealed row in all three;
//! 3. `_latest` has the same windows with the same kind, aggregates and watermark (not the same
//!    version number, so not the same `sealed` either). In `eventtime.pipelines`, `refused` and
//!    `duplicates` are equal (both are counted per (row, window) pair, and the same pairs are
//!    refused or found duplicate), and
//!    `firings` is each pipeline's count of history rows: live >= per_run >= backfill, equal to
//!    the collapsed count for the backfill;
//! 4. every Advance and MarkIdle returns the same (windows fired, windows purged, watermark) in
//!    the three feeds, the watermark being the model's; after `'infinity'`, no state rows remain.
//!
//! What legitimately differs, and is not compared: version numbers beyond 1 and `fired_at`;
//! `firings`; and version 1 of a window that had no rows at its main firing (kind `late`): it is
//! written by the first statement that brings the window a row, so it holds one live row but all
//! the rows of that watermark in the backfill. Its kind, watermark and latest values still agree.
//!
//! Sessions (`sessions()`; SPEC §7 and the session contract). A row's landing still depends only
//! on its own window `[t, t + gap)` and the pipeline watermark, so the same rows are accepted,
//! refused and found duplicate; and between two moves of the watermark (nothing is purged there)
//! the islands of strict overlap that a key's rows and live sessions form do not depend on how
//! the rows are grouped into statements. So every advance finds the same live sessions, with the
//! same bounds, rows and fired state, and fires and purges them alike: points 1, 3 and 4 hold as
//! stated, except that the `_sealed` of a feed of smaller statements also has version 1 of its
//! intermediate sessions (below). Point 2 cannot hold for sessions, by SPEC, because statement
//! boundaries change what merging writes:
//! - a statement that forms a session already due (end <= watermark) writes it at once (version
//!   1, `late`); a later statement under the same watermark that extends it absorbs it (`merged`).
//!   The backfill, with those rows in one statement, forms only the final session: such
//!   *intermediate* sessions exist in the live history only;
//! - `merged_into` names the session that absorbed it first: in live, that may be an
//!   intermediate, or a session that never published (its end ahead of the watermark) and was
//!   absorbed in turn before the next move;
//! - late rows that join a fired session, then rows that extend it, under one watermark: live
//!   writes a late version, then a merged one repeating it; the backfill absorbs the session with
//!   one statement, its merged version repeating the version before those rows.
//!
//! For sessions, point 2 is therefore checked as follows, exactly: every session of the backfill
//! history is in the live (and per_run) history; each session that the backfill lacks has all its
//! versions under one watermark, a late version 1 and a merged last version; in every feed a
//! merged version repeats the values of the version before it and `merged_into` is set exactly
//! on merged versions; for each session of the backfill, live's versions, with the late versions
//! written just before its merged version under the same watermark dropped (the merged version
//! then repeating the version now before it) and collapsed as above, equal the backfill's (all
//! but `merged_into`); and live's `merged_into`, followed through live's intermediate sessions,
//! reaches the backfill's, or a session that never published and lies inside the backfill's.

use std::collections::BTreeMap;

use postgres::Client;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::db::{self, Row};
use crate::values::{
    decimal, quote_literal, ts_key, ts_text, utc, Val, DAY, HOUR, INFINITY, MINUTE, SECOND,
};
use crate::windows::WindowSpec;

const SOURCES: [&str; 3] = ["p0", "p1", "p2"];
const KEYS: [&str; 3] = ["a", "b", "c"];
const COLUMNS: &str = "id, src, k, amount, at";

/// The window definition the three pipelines share, and the pace of the log around it.
pub struct Shape {
    /// Names the database and the messages.
    pub label: &'static str,
    /// The RNG streams of the log, and of the backfill's choice of INSERT or COPY.
    pub streams: (u64, u64),
    /// The windows; for sessions, only the pace of event times around the watermark (windows
    /// of the gap's size).
    pub spec: WindowSpec,
    /// Session windows with this gap (SPEC §7) instead of `spec`'s.
    pub session_gap: Option<i64>,
    pub lateness: i64,
    /// The window arguments of `create_pipeline`, as SQL.
    pub window_sql: &'static str,
    /// The typical watermark step: a source moves by up to 1.25 of it, races ahead by 3 to 8.
    pub unit: i64,
    pub start: i64,
    /// Steps before the final advances to infinity.
    pub steps: usize,
}

impl Shape {
    fn database(&self) -> String {
        format!("eventtime_property_{}", self.label)
    }
}

/// Tumbling hours with 30 minutes of grace, a log that moves by about an hour a step.
pub fn hourly() -> Shape {
    Shape {
        label: "backfill",
        session_gap: None,
        streams: (4, 5),
        spec: WindowSpec::tumbling(HOUR, 0),
        lateness: 30 * MINUTE,
        window_sql: "window_size => interval '1 hour', allowed_lateness => interval '30 minutes'",
        unit: HOUR,
        start: utc("2026-05-01 00:00"),
        steps: 220,
    }
}

/// Hopping windows of two hours every 45 minutes (SPEC §7): the slide does not divide the size,
/// so a row is in two or three windows, each with its own landing, dedup and late versions.
pub fn hopping() -> Shape {
    Shape {
        label: "backfill_hopping",
        session_gap: None,
        streams: (9, 10),
        spec: WindowSpec::hopping(2 * HOUR, 45 * MINUTE, 0),
        lateness: 30 * MINUTE,
        window_sql: "window_size => interval '2 hours', window_slide => interval '45 minutes', \
                     allowed_lateness => interval '30 minutes'",
        unit: 45 * MINUTE,
        start: utc("2026-06-01 00:00"),
        steps: 160,
    }
}

/// Hopping calendar months in UTC: two months every month, five days of grace, a log that
/// moves by about a week a step; `max_ahead => NULL`, as a year of event time passes.
pub fn calendar_hopping() -> Shape {
    Shape {
        label: "backfill_calendar",
        session_gap: None,
        streams: (11, 12),
        spec: WindowSpec::months(2, 1, 0),
        lateness: 5 * DAY,
        window_sql: "window_size => interval '2 months', window_slide => interval '1 month', \
                     allowed_lateness => interval '5 days', max_ahead => NULL",
        unit: 7 * DAY,
        start: utc("2024-01-01 00:00"),
        steps: 160,
    }
}

/// Session windows (SPEC §7) with a gap of 40 minutes and 30 minutes of grace, a log that moves
/// by about half an hour a step; half of the fresh rows are aimed at a recent row of their key,
/// touching, extending or overlapping its window. What of the definition holds for sessions is
/// in the module documentation.
pub fn sessions() -> Shape {
    Shape {
        label: "backfill_sessions",
        session_gap: Some(40 * MINUTE),
        streams: (15, 16),
        spec: WindowSpec::tumbling(40 * MINUTE, 0),
        lateness: 30 * MINUTE,
        window_sql:
            "session_gap => interval '40 minutes', allowed_lateness => interval '30 minutes'",
        unit: 30 * MINUTE,
        start: utc("2026-07-01 00:00"),
        steps: 240,
    }
}

#[derive(Clone, Debug)]
pub enum Step {
    Deliver { source: usize, rows: Vec<Vec<Val>> },
    Advance { source: usize, to: i64 },
    MarkIdle { source: usize },
}

impl Step {
    fn describe(&self) -> String {
        match self {
            Step::Deliver { source, rows } => {
                format!("Deliver({}, {} rows)", SOURCES[*source], rows.len())
            }
            Step::Advance { source, to } => {
                format!("Advance({}, {})", SOURCES[*source], ts_text(*to))
            }
            Step::MarkIdle { source } => format!("MarkIdle({})", SOURCES[*source]),
        }
    }
}

/// The clocks as SPEC and `core::clock` describe them: a forward-only watermark per source,
/// registered by its first advance; the pipeline watermark is the minimum over the sources not
/// marked idle, never going back, and stays when every source is idle.
#[derive(Default, Clone)]
struct Clocks {
    /// (watermark, marked idle) of each registered source.
    sources: [Option<(i64, bool)>; 3],
    pipeline: Option<i64>,
}

impl Clocks {
    /// Applies an Advance or MarkIdle; returns whether the pipeline watermark moved.
    fn apply(&mut self, step: &Step) -> bool {
        match *step {
            Step::Advance { source, to } => match self.sources[source] {
                // Not ahead of the source's own watermark: nothing changes, idleness included.
                Some((w, _)) if to <= w => {}
                _ => self.sources[source] = Some((to, false)),
            },
            Step::MarkIdle { source } => {
                let s = self.sources[source]
                    .as_mut()
                    .expect("only registered sources are marked idle");
                s.1 = true;
            }
            Step::Deliver { .. } => return false,
        }
        let min = self
            .sources
            .iter()
            .flatten()
            .filter(|s| !s.1)
            .map(|s| s.0)
            .min();
        let new = match (self.pipeline, min) {
            (Some(c), Some(m)) => Some(c.max(m)),
            (c, m) => c.or(m),
        };
        let moved = new != self.pipeline;
        self.pipeline = new;
        moved
    }
}

/// The stored event log, with what the model says of each step.
struct Log {
    steps: Vec<Step>,
    /// The pipeline watermark after each step.
    watermarks: Vec<Option<i64>>,
    /// Whether each step moved the pipeline watermark (never a Deliver).
    moves: Vec<bool>,
}

struct Generator<'a> {
    shape: &'a Shape,
    rng: ChaCha8Rng,
    clocks: Clocks,
    start: i64,
    next_id: i64,
    /// Every row delivered so far, for redeliveries.
    sent: Vec<Vec<Val>>,
}

impl Generator<'_> {
    /// The pipeline watermark, or where event time starts before the first advance.
    fn reference(&self) -> i64 {
        self.clocks
            .pipeline
            .filter(|&w| w != INFINITY)
            .unwrap_or(self.start)
    }

    /// Where `source` is: its own watermark, or the pipeline's before it registers.
    fn clock(&self, source: usize) -> i64 {
        self.sources_watermark(source)
            .filter(|&w| w != INFINITY)
            .unwrap_or_else(|| self.reference())
    }

    fn sources_watermark(&self, source: usize) -> Option<i64> {
        self.clocks.sources[source].map(|s| s.0)
    }

    fn event_time(&mut self, source: usize) -> i64 {
        let (base, w) = (self.clock(source), self.reference());
        let spec = self.shape.spec;
        let (size, lateness) = (spec.span(), self.shape.lateness);
        let e = match self.rng.random_range(0..100) {
            // Ahead of the source: open, unless the source is behind the pipeline.
            0..35 => base + self.rng.random_range(0..2 * size),
            // Around the pipeline watermark: open, late within the grace, or just refused.
            35..62 => w - self.rng.random_range(0..=size + lateness),
            // Beyond the grace: the window's deadline has passed.
            62..75 => w - (size + lateness) - self.rng.random_range(0..4 * size),
            // The first or last microsecond of a window near the watermark.
            _ => {
                let k = self.rng.random_range(-(1 + spec.overlap())..=1);
                let s = spec.nth_start(w, k);
                return if self.rng.random_bool(0.5) {
                    s
                } else {
                    spec.end(s) - 1
                };
            }
        };
        if self.rng.random_bool(0.8) {
            e.div_euclid(SECOND) * SECOND
        } else {
            e
        }
    }

    fn fresh_row(&mut self, source: usize) -> Vec<Val> {
        let id = if self.rng.random_range(0..100) < 3 {
            // Rows without an id are never duplicates, not even of an exact copy.
            Val::Null
        } else {
            self.next_id += 1;
            Val::Int(self.next_id)
        };
        let k = if self.rng.random_range(0..100) < 5 {
            Val::Null
        } else {
            Val::Text(KEYS[self.rng.random_range(0..KEYS.len())].into())
        };
        let amount = if self.rng.random_range(0..100) < 8 {
            Val::Null
        } else {
            Val::Num(decimal(
                self.rng.random_range(-500..50_000),
                self.rng.random_range(0..=2),
            ))
        };
        let mut row = vec![
            id,
            Val::Text(SOURCES[source].into()),
            k,
            amount,
            Val::Ts(self.event_time(source)),
        ];
        if let Some(gap) = self.shape.session_gap {
            self.aim(gap, &mut row);
        }
        row
    }

    /// Sessions: half the time, the key of a recent row and an event time whose window touches
    /// that row's window at either end, extends it by up to half the gap, or overlaps it.
    fn aim(&mut self, gap: i64, row: &mut [Val]) {
        if self.sent.is_empty() || self.rng.random_bool(0.5) {
            return;
        }
        let from = self.sent.len().saturating_sub(15);
        let old = &self.sent[self.rng.random_range(from..self.sent.len())];
        let (k, t0) = match old[4] {
            Val::Ts(t) => (old[2].clone(), t),
            ref v => unreachable!("event time {v:?}"),
        };
        let by = self.rng.random_range(1..=gap / 2);
        let t = match self.rng.random_range(0..5) {
            0 => t0 + gap,
            1 => t0 - gap,
            2 => t0 + gap - by,
            3 => t0 - gap + by,
            _ => t0 + self.rng.random_range(1 - gap..gap),
        };
        row[2] = k;
        row[4] = Val::Ts(t);
    }

    /// Sessions: the end of a recent row's window after `c`, where a session may end.
    fn session_end(&mut self, c: i64, gap: i64) -> i64 {
        let ends: Vec<i64> = self
            .sent
            .iter()
            .rev()
            .take(30)
            .filter_map(|r| match r[4] {
                Val::Ts(t) if t + gap > c => Some(t + gap),
                _ => None,
            })
            .collect();
        if ends.is_empty() {
            c + gap
        } else {
            ends[self.rng.random_range(0..ends.len())]
        }
    }

    fn deliver(&mut self) -> Step {
        let source = self.rng.random_range(0..SOURCES.len());
        let n = self.rng.random_range(1..=8);
        let mut rows: Vec<Vec<Val>> = Vec::with_capacity(n);
        for _ in 0..n {
            let r = self.rng.random_range(0..100);
            let row = if r < 5 && !rows.is_empty() {
                rows[self.rng.random_range(0..rows.len())].clone()
            } else if r < 16 && !self.sent.is_empty() {
                // Mostly a recent row; sometimes one from long ago, refused by now.
                let from = if self.rng.random_bool(0.7) {
                    self.sent.len().saturating_sub(40)
                } else {
                    0
                };
                self.sent[self.rng.random_range(from..self.sent.len())].clone()
            } else {
                self.fresh_row(source)
            };
            rows.push(row);
        }
        self.sent.extend(rows.iter().cloned());
        Step::Deliver { source, rows }
    }

    fn advance(&mut self) -> Step {
        let source = self.rng.random_range(0..SOURCES.len());
        let unit = self.shape.unit;
        let to = match self.sources_watermark(source) {
            None => match self.clocks.pipeline {
                None => {
                    (self.start + self.rng.random_range(-unit / 2..2 * unit)).div_euclid(MINUTE)
                        * MINUTE
                }
                // Registers behind the pipeline watermark (which then waits for it), or ahead.
                Some(w) => (w + self.rng.random_range(-2 * unit..unit)).div_euclid(MINUTE) * MINUTE,
            },
            Some(c) => match self.rng.random_range(0..100) {
                0..55 => {
                    (c + self.rng.random_range(SECOND..unit * 5 / 4)).div_euclid(SECOND) * SECOND
                }
                // Onto the next window end or deadline (both after c), or a microsecond before.
                55..70 => {
                    let end = match self.shape.session_gap {
                        Some(gap) => self.session_end(c, gap),
                        None => self.shape.spec.next_end(c),
                    };
                    let b = if self.rng.random_bool(0.5) {
                        end
                    } else {
                        end + self.shape.lateness
                    };
                    if self.rng.random_bool(0.25) {
                        b - 1
                    } else {
                        b
                    }
                }
                // Racing ahead of the other sources.
                70..80 => c + self.rng.random_range(3 * unit..8 * unit),
                // Not ahead: a no-op.
                _ => c - self.rng.random_range(0..unit).div_euclid(MINUTE) * MINUTE,
            },
        };
        Step::Advance { source, to }
    }

    fn mark_idle(&mut self) -> Option<Step> {
        let registered: Vec<usize> = (0..SOURCES.len())
            .filter(|&s| self.clocks.sources[s].is_some())
            .collect();
        if registered.is_empty() {
            return None;
        }
        Some(Step::MarkIdle {
            source: registered[self.rng.random_range(0..registered.len())],
        })
    }
}

fn generate(shape: &Shape, seed: u64) -> Log {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(shape.streams.0);
    let mut g = Generator {
        shape,
        rng,
        clocks: Clocks::default(),
        start: shape.start,
        next_id: 0,
        sent: Vec::new(),
    };
    let mut log = Log {
        steps: Vec::new(),
        watermarks: Vec::new(),
        moves: Vec::new(),
    };
    let mut push = |g: &mut Generator, step: Step| {
        let moved = g.clocks.apply(&step);
        log.steps.push(step);
        log.watermarks.push(g.clocks.pipeline);
        log.moves.push(moved);
    };
    for _ in 0..shape.steps {
        let step = match g.rng.random_range(0..100) {
            0..60 => g.deliver(),
            60..94 => g.advance(),
            _ => match g.mark_idle() {
                Some(s) => s,
                None => g.advance(),
            },
        };
        push(&mut g, step);
    }
    let mut order: Vec<usize> = (0..SOURCES.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, g.rng.random_range(0..=i));
    }
    for source in order {
        push(
            &mut g,
            Step::Advance {
                source,
                to: INFINITY,
            },
        );
    }
    assert_eq!(
        g.clocks.pipeline,
        Some(INFINITY),
        "the log ends at watermark infinity"
    );
    log
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Mode {
    Live,
    PerRun,
    Backfill,
}

const MODES: [Mode; 3] = [Mode::Live, Mode::PerRun, Mode::Backfill];

impl Mode {
    fn pipeline(self) -> &'static str {
        match self {
            Mode::Live => "live",
            Mode::PerRun => "per_run",
            Mode::Backfill => "backfill",
        }
    }

    fn table(self) -> String {
        format!("ev_{}", self.pipeline())
    }
}

/// One version of a window, as compared: everything but `fired_at` and `sealed`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Version {
    version: i64,
    kind: String,
    aggregates: Vec<Option<String>>,
    watermark: String,
    /// Sessions: the bounds of `merged_into`, in microseconds.
    merged_into: Option<(String, String)>,
}

/// (k, window start, window end in microseconds): two sessions of a key may share a start.
type Win = (Option<String>, String, String);
type History = BTreeMap<Win, Vec<Version>>;

/// Groups consecutive versions with the same (kind, watermark), keeps the last of each group and
/// renumbers them 1..n.
fn collapse(versions: &[Version]) -> Vec<Version> {
    let mut out: Vec<Version> = Vec::new();
    for v in versions {
        match out.last_mut() {
            Some(last) if last.kind == v.kind && last.watermark == v.watermark => *last = v.clone(),
            _ => out.push(v.clone()),
        }
    }
    for (i, v) in out.iter_mut().enumerate() {
        v.version = i as i64 + 1;
    }
    out
}

struct Run<'a> {
    shape: &'a Shape,
    seed: u64,
    db: Client,
    /// The backfill's choice of INSERT or COPY per statement.
    rng: ChaCha8Rng,
    /// What a statement was doing, for failure messages.
    at: String,
}

impl Run<'_> {
    fn ctx(&self) -> String {
        format!(
            "seed {} (replay with PROPERTY_SEED={}), backfill equals live ({}): {}",
            self.seed, self.seed, self.shape.label, self.at
        )
    }

    fn exec(&mut self, sql: &str) {
        if let Err(e) = self.db.batch_execute(sql) {
            panic!(
                "{}: statement failed: {}\n{}",
                self.ctx(),
                db::describe(&e),
                sql
            );
        }
    }

    fn rows(&mut self, sql: &str) -> Vec<Row> {
        db::try_text_rows(&mut self.db, sql)
            .unwrap_or_else(|e| panic!("{}: query failed: {}\n{sql}", self.ctx(), db::describe(&e)))
    }

    fn setup(&mut self) {
        let mut sql = String::new();
        for mode in MODES {
            sql += &format!(
                "CREATE TABLE {t} (id bigint, src text, k text, amount numeric, at timestamptz);
                 SELECT eventtime.create_pipeline(name => {p}, source => {tl}, event_time => 'at',
                     {w}, key => ARRAY['k'], event_id => 'id',
                     aggregates => 'count(*) AS n, sum(amount) AS total, max(amount) AS hi',
                     idle_timeout => interval '1 hour');\n",
                w = self.shape.window_sql,
                t = mode.table(),
                p = quote_literal(mode.pipeline()),
                tl = quote_literal(&mode.table()),
            );
        }
        self.at = "setup".into();
        self.exec(&sql);
    }

    fn control_sql(mode: Mode, step: &Step) -> String {
        let p = quote_literal(mode.pipeline());
        let call = match *step {
            Step::Advance { source, to } => format!(
                "eventtime.advance_watermark({p}, {}::timestamptz, {})",
                quote_literal(&ts_text(to)),
                quote_literal(SOURCES[source])
            ),
            Step::MarkIdle { source } => format!(
                "eventtime.mark_idle({p}, {})",
                quote_literal(SOURCES[source])
            ),
            Step::Deliver { .. } => unreachable!("a delivery is not a control step"),
        };
        format!("SELECT windows_fired::text, windows_purged::text, us(watermark) FROM {call};\n")
    }

    fn insert(&mut self, mode: Mode, rows: &[Vec<Val>]) {
        self.exec(&db::insert_sql(&mode.table(), COLUMNS, rows));
    }

    fn copy(&mut self, mode: Mode, rows: &[Vec<Val>]) {
        if let Err(e) = db::copy_rows(&mut self.db, &mode.table(), COLUMNS, rows) {
            panic!("{}: COPY failed: {}", self.ctx(), db::describe(&e));
        }
    }

    /// One statement with every buffered row, a multi-row INSERT or a COPY.
    fn flush(&mut self, mode: Mode, buffer: &mut Vec<Vec<Val>>) {
        if buffer.is_empty() {
            return;
        }
        if self.rng.random_bool(0.5) {
            self.insert(mode, buffer);
        } else {
            self.copy(mode, buffer);
        }
        buffer.clear();
    }

    /// Feeds the log to one pipeline; returns what each Advance and MarkIdle returned, in log order.
    fn replay(&mut self, mode: Mode, log: &Log) -> Vec<Row> {
        let mut results = Vec::new();
        let mut buffer: Vec<Vec<Val>> = Vec::new();
        // Backfill: control steps not sent yet, and how many.
        let (mut pending, mut pending_n) = (String::new(), 0usize);
        let mut statements = 0usize;
        for (i, step) in log.steps.iter().enumerate() {
            self.at = format!(
                "{} pipeline, step {} of {}: {}",
                mode.pipeline(),
                i + 1,
                log.steps.len(),
                step.describe()
            );
            match (mode, step) {
                (Mode::Live, Step::Deliver { rows, .. }) => {
                    for r in rows {
                        self.insert(mode, std::slice::from_ref(r));
                        statements += 1;
                        if statements.is_multiple_of(7) {
                            self.exec("SELECT pg_sleep(0.002)");
                        }
                    }
                }
                (Mode::Live, _) => {
                    results.extend(self.rows(&Self::control_sql(mode, step)));
                    if i % 5 == 0 {
                        self.exec("SELECT pg_sleep(0.002)");
                    }
                }
                (_, Step::Deliver { rows, .. }) => buffer.extend(rows.iter().cloned()),
                (Mode::PerRun, _) => {
                    self.flush(mode, &mut buffer);
                    results.extend(self.rows(&Self::control_sql(mode, step)));
                }
                (Mode::Backfill, _) => {
                    // Only a step that moves the pipeline watermark ends the statement: the rows
                    // before it go in first, under the watermark they were delivered under.
                    if log.moves[i] && !buffer.is_empty() {
                        if pending_n > 0 {
                            let got = self.rows(&pending);
                            assert_eq!(
                                got.len(),
                                pending_n,
                                "{}: one row per control step",
                                self.ctx()
                            );
                            results.extend(got);
                            (pending, pending_n) = (String::new(), 0);
                        }
                        self.flush(mode, &mut buffer);
                    }
                    pending += &Self::control_sql(mode, step);
                    pending_n += 1;
                }
            }
        }
        self.at = format!("{} pipeline, end of the log", mode.pipeline());
        if pending_n > 0 {
            let got = self.rows(&pending);
            assert_eq!(
                got.len(),
                pending_n,
                "{}: one row per control step",
                self.ctx()
            );
            results.extend(got);
        }
        self.flush(mode, &mut buffer);
        results
    }

    fn history(&mut self, mode: Mode) -> History {
        // Only session pipelines have `merged_into`.
        let merged_into = if self.shape.session_gap.is_some() {
            "us(lower(merged_into)), us(upper(merged_into))"
        } else {
            "NULL, NULL"
        };
        let rows = self.rows(&format!(
            "SELECT k, us(window_start), version::text, kind, n::text, total::text, hi::text, us(watermark), \
                    us(window_end), {merged_into} FROM {}_history",
            mode.pipeline()
        ));
        let mut out: History = BTreeMap::new();
        for r in rows {
            let v = Version {
                version: r[2].as_deref().unwrap().parse().unwrap(),
                kind: r[3].clone().unwrap(),
                aggregates: r[4..7].to_vec(),
                watermark: r[7].clone().unwrap(),
                merged_into: r[9].clone().zip(r[10].clone()),
            };
            out.entry((r[0].clone(), r[1].clone().unwrap(), r[8].clone().unwrap()))
                .or_default()
                .push(v);
        }
        for (win, versions) in out.iter_mut() {
            versions.sort();
            let numbers: Vec<i64> = versions.iter().map(|v| v.version).collect();
            let gapless: Vec<i64> = (1..=versions.len() as i64).collect();
            assert_eq!(
                numbers,
                gapless,
                "{}: {} history of window {win:?} has versions 1..n",
                self.ctx(),
                mode.pipeline()
            );
        }
        out
    }

    fn sorted(&mut self, sql: &str) -> Vec<Row> {
        let mut rows = self.rows(sql);
        rows.sort();
        rows
    }

    /// `_refused`, every column but `refused_at`.
    fn refused(&mut self, mode: Mode) -> Vec<Row> {
        self.sorted(&format!(
            "SELECT k, event_id::text, us(event_time), \"row\"::text, us(window_start), us(window_end), us(deadline), \
                    us(watermark) FROM {}_refused",
            mode.pipeline()
        ))
    }

    /// `_latest` without its version number, `sealed` (version = 1) and `fired_at`.
    fn latest(&mut self, mode: Mode) -> Vec<Row> {
        self.sorted(&format!(
            "SELECT k, us(window_start), us(window_end), kind, n::text, total::text, hi::text, us(watermark) \
             FROM {}_latest",
            mode.pipeline()
        ))
    }

    /// `_sealed` without `fired_at`.
    fn sealed(&mut self, mode: Mode) -> Vec<Row> {
        self.sorted(&format!(
            "SELECT k, us(window_start), us(window_end), version::text, kind, n::text, total::text, hi::text, \
                    us(watermark), sealed::text FROM {}_sealed",
            mode.pipeline()
        ))
    }

    /// (rows in the source table, refused, duplicates, firings, state rows, open windows, watermark).
    fn counters(&mut self, mode: Mode) -> Row {
        self.rows(&format!(
            "SELECT (SELECT count(*) FROM {})::text, refused::text, duplicates::text, firings::text, state_rows::text, \
                    open_windows::text, us(watermark) FROM eventtime.pipelines WHERE name = {}",
            mode.table(),
            quote_literal(mode.pipeline())
        ))
        .pop()
        .unwrap_or_else(|| panic!("{}: no row in eventtime.pipelines for {}", self.ctx(), mode.pipeline()))
    }
}

/// Names the first windows whose collapsed history differs from the backfill's.
fn compare_histories(ctx: &str, name: &str, raw: &History, backfill: &History) {
    let collapsed: History = raw.iter().map(|(w, v)| (w.clone(), collapse(v))).collect();
    if &collapsed == backfill {
        return;
    }
    let mut report = String::new();
    let mut shown = 0;
    let wins: std::collections::BTreeSet<&Win> = collapsed.keys().chain(backfill.keys()).collect();
    for w in wins {
        let (c, b) = (collapsed.get(w), backfill.get(w));
        if c == b {
            continue;
        }
        shown += 1;
        if shown > 5 {
            report += "\n  ...";
            break;
        }
        let show = |vs: Option<&Vec<Version>>| match vs {
            None => "\n      (no history)".to_string(),
            Some(vs) => vs
                .iter()
                .map(|v| {
                    format!(
                        "\n      v{} {} {:?} watermark {}",
                        v.version, v.kind, v.aggregates, v.watermark
                    )
                })
                .collect(),
        };
        report += &format!(
            "\n  window {w:?}\n    {name}:{}\n    {name} collapsed:{}\n    backfill:{}",
            show(raw.get(w)),
            show(c),
            show(b)
        );
    }
    panic!("{ctx}: the {name} history, collapsed, differs from the backfill history{report}");
}

/// A watermark as `us()` writes it, as a number: `'infinity'` after every other.
fn micros(text: &str) -> i64 {
    if text == "infinity" {
        INFINITY
    } else {
        text.parse().expect("microseconds")
    }
}

/// Sessions: the versions of a session that the backfill also has, in a feed of smaller
/// statements, brought to what the backfill writes (see the module documentation). If the
/// session was absorbed, the late versions its key's statements wrote under the watermark of
/// its `merged` version, just before it, are dropped, and the `merged` version takes the values
/// of the version now before it; then `merged_into` is left out (it is compared apart) and the
/// versions are collapsed as for other windows.
fn normalize_session(versions: &[Version]) -> Vec<Version> {
    let mut v = versions.to_vec();
    if let Some(last) = v.last().cloned() {
        if last.kind == "merged" {
            let n = v.len() - 1;
            let mut i = n;
            while i > 0 && v[i - 1].kind == "late" && v[i - 1].watermark == last.watermark {
                i -= 1;
            }
            v.drain(i..n);
            if i > 0 {
                v[i].aggregates = v[i - 1].aggregates.clone();
            }
        }
    }
    for x in &mut v {
        x.merged_into = None;
    }
    collapse(&v)
}

/// What `compare_session_histories` found in a feed of smaller statements.
#[derive(Default)]
struct SessionFeed {
    /// Its sessions absent from the backfill history.
    intermediates: std::collections::BTreeSet<Win>,
    /// Merged versions whose `merged_into` is not the backfill's: reached through intermediate
    /// sessions, or a session inside it that never published.
    through_intermediates: usize,
    unpublished: usize,
}

/// Backfill equals live for sessions, as far as SPEC lets it hold (module documentation).
fn compare_session_histories(
    ctx: &str,
    name: &str,
    raw: &History,
    backfill: &History,
) -> SessionFeed {
    let show = |vs: &[Version]| -> String {
        vs.iter()
            .map(|v| {
                format!(
                    "\n      v{} {} {:?} watermark {}{}",
                    v.version,
                    v.kind,
                    v.aggregates,
                    v.watermark,
                    v.merged_into
                        .as_ref()
                        .map(|r| format!(" merged_into [{}, {})", r.0, r.1))
                        .unwrap_or_default()
                )
            })
            .collect()
    };
    // A merged version repeats the values of the version before it, in every feed.
    for (feed, h) in [(name, raw), ("backfill", backfill)] {
        for (w, vs) in h {
            for (i, v) in vs.iter().enumerate() {
                if v.kind == "merged" {
                    assert!(
                        i > 0 && vs[i - 1].aggregates == v.aggregates && v.merged_into.is_some(),
                        "{ctx}: {feed}: session {w:?}: a merged version has merged_into and the values \
                         of the version before it{}",
                        show(vs)
                    );
                }
                assert_eq!(
                    v.merged_into.is_some(),
                    v.kind == "merged",
                    "{ctx}: {feed}: session {w:?}: merged_into is set exactly on merged versions{}",
                    show(vs)
                );
            }
        }
    }
    let missing: Vec<&Win> = backfill.keys().filter(|w| !raw.contains_key(w)).collect();
    assert!(
        missing.is_empty(),
        "{ctx}: sessions of the backfill history missing from the {name} history: {missing:?}"
    );
    // Formed already due (a late version 1) and absorbed under the same watermark.
    let intermediates: std::collections::BTreeSet<Win> = raw
        .keys()
        .filter(|w| !backfill.contains_key(w))
        .cloned()
        .collect();
    for w in &intermediates {
        let vs = &raw[w];
        let one_watermark = vs.iter().all(|v| v.watermark == vs[0].watermark);
        assert!(
            vs[0].kind == "late" && vs.last().unwrap().kind == "merged" && one_watermark,
            "{ctx}: {name}: session {w:?} is not in the backfill history, so it must have been formed \
             and absorbed under one watermark: a late version 1, a merged last version{}",
            show(vs)
        );
    }
    let mut report = String::new();
    let mut shown = 0;
    let (mut through_intermediates, mut unpublished_seen) = (0, 0);
    for (w, b) in backfill {
        let r = &raw[w];
        let (nr, nb) = (normalize_session(r), normalize_session(b));
        let mut problem = None;
        if nr != nb {
            problem = Some("normalized versions differ".to_string());
        } else if let (Some(last_r), Some(last_b)) = (r.last(), b.last()) {
            if let (Some(into_r), Some(into_b)) = (&last_r.merged_into, &last_b.merged_into) {
                // Follow the absorbing sessions the raw feed formed and absorbed under the same
                // watermark, as far as its history shows them.
                let mut at = (w.0.clone(), into_r.0.clone(), into_r.1.clone());
                while intermediates.contains(&at) {
                    let next = raw[&at].last().unwrap().merged_into.clone().unwrap();
                    at = (w.0.clone(), next.0, next.1);
                }
                let reached = (at.1.clone(), at.2.clone());
                let inside = micros(&into_b.0) <= micros(&reached.0)
                    && micros(&reached.1) <= micros(&into_b.1);
                // One that never published (its end still ahead of the watermark), absorbed
                // in turn before the next move: the backfill names the session it ended in.
                let unpublished = !raw.contains_key(&at)
                    && micros(&reached.1) > micros(&last_r.watermark)
                    && inside;
                if into_r != into_b && &reached == into_b {
                    through_intermediates += 1;
                } else if &reached != into_b && unpublished {
                    unpublished_seen += 1;
                }
                if &reached != into_b && !unpublished {
                    problem = Some(format!(
                        "merged_into: {name} reaches [{}, {}) through its intermediate sessions, the backfill \
                         names [{}, {})",
                        reached.0, reached.1, into_b.0, into_b.1
                    ));
                }
            }
        }
        if let Some(p) = problem {
            shown += 1;
            if shown > 5 {
                report += "\n  ...";
                break;
            }
            report += &format!(
                "\n  session {w:?}: {p}\n    {name}:{}\n    {name} normalized:{}\n    backfill:{}",
                show(r),
                show(&nr),
                show(b)
            );
        }
    }
    if !report.is_empty() {
        panic!("{ctx}: the {name} history of sessions, normalized, differs from the backfill history{report}");
    }
    SessionFeed {
        intermediates,
        through_intermediates,
        unpublished: unpublished_seen,
    }
}

fn assert_same(ctx: &str, what: &str, name: &str, got: &[Row], backfill: &[Row]) {
    if got == backfill {
        return;
    }
    let only = |a: &[Row], b: &[Row]| -> String {
        let mut b = b.to_vec();
        let mut out = Vec::new();
        for r in a {
            match b.iter().position(|x| x == r) {
                Some(i) => {
                    b.remove(i);
                }
                None => out.push(format!("\n    {r:?}")),
            }
        }
        let n = out.len();
        out.truncate(8);
        out.concat()
            + &if n > 8 {
                format!("\n    ... {} more", n - 8)
            } else {
                String::new()
            }
    };
    panic!(
        "{ctx}: {what} of {name} ({} rows) differs from backfill ({} rows)\n  only in {name}:{}\n  only in backfill:{}",
        got.len(),
        backfill.len(),
        only(got, backfill),
        only(backfill, got)
    );
}

pub fn run(shape: &Shape, seed: u64) {
    println!("seed {seed}");
    let log = generate(shape, seed);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(shape.streams.1);
    let dbname = shape.database();
    let mut run = Run {
        shape,
        seed,
        db: db::fresh_database(&dbname),
        rng,
        at: String::new(),
    };
    run.setup();

    let mut results = BTreeMap::new();
    for mode in MODES {
        let started = std::time::Instant::now();
        results.insert(mode, run.replay(mode, &log));
        println!(
            "backfill equals live ({}): {} fed in {:?}",
            shape.label,
            mode.pipeline(),
            started.elapsed()
        );
    }
    run.at = "after the whole log".into();
    let ctx = run.ctx();

    // 4. Every control step returns the same in the three feeds, with the model's watermark.
    let controls: Vec<usize> = (0..log.steps.len())
        .filter(|&i| !matches!(log.steps[i], Step::Deliver { .. }))
        .collect();
    for mode in MODES {
        let got = &results[&mode];
        assert_eq!(
            got.len(),
            controls.len(),
            "{ctx}: {} returned one row per control step",
            mode.pipeline()
        );
        for (n, &i) in controls.iter().enumerate() {
            let step_ctx = format!(
                "{ctx}, {} pipeline, step {}: {}",
                mode.pipeline(),
                i + 1,
                log.steps[i].describe()
            );
            assert_eq!(
                got[n][2],
                log.watermarks[i].map(ts_key),
                "{step_ctx}: the pipeline watermark, against the model"
            );
            let live = &results[&Mode::Live][n];
            assert_eq!(
                &got[n], live,
                "{step_ctx}: (windows fired, windows purged, watermark) as in the live feed"
            );
        }
    }

    // 1. Refused rows.
    let refused_backfill = run.refused(Mode::Backfill);
    for mode in [Mode::Live, Mode::PerRun] {
        let got = run.refused(mode);
        assert_same(
            &ctx,
            "_refused (all columns but refused_at)",
            mode.pipeline(),
            &got,
            &refused_backfill,
        );
    }

    // 2. History, collapsed.
    let backfill = run.history(Mode::Backfill);
    let already: History = backfill
        .iter()
        .map(|(w, v)| (w.clone(), collapse(v)))
        .collect();
    assert!(
        already == backfill,
        "{ctx}: the backfill history has two consecutive versions with the same kind and watermark"
    );
    let mut histories = BTreeMap::new();
    // Sessions formed and absorbed between two moves of the pipeline watermark, in the feeds of
    // smaller statements: they have no counterpart in the backfill.
    let mut feeds: BTreeMap<Mode, SessionFeed> = BTreeMap::new();
    for mode in [Mode::Live, Mode::PerRun] {
        let h = run.history(mode);
        if shape.session_gap.is_some() {
            let found = compare_session_histories(&ctx, mode.pipeline(), &h, &backfill);
            feeds.insert(mode, found);
        } else {
            compare_histories(&ctx, mode.pipeline(), &h, &backfill);
            feeds.insert(mode, SessionFeed::default());
        }
        histories.insert(mode, h);
    }
    histories.insert(Mode::Backfill, backfill);

    // 3. _latest, _sealed and the counters.
    let latest = run.latest(Mode::Backfill);
    let sealed = run.sealed(Mode::Backfill);
    let main = |rows: &[Row]| {
        rows.iter()
            .filter(|r| r[4].as_deref() == Some("main"))
            .cloned()
            .collect::<Vec<_>>()
    };
    let late_windows = |rows: &[Row], leave_out: &std::collections::BTreeSet<Win>| {
        rows.iter()
            .filter(|r| r[4].as_deref() != Some("main"))
            .filter(|r| {
                let win = (r[0].clone(), r[1].clone().unwrap(), r[2].clone().unwrap());
                !leave_out.contains(&win)
            })
            .map(|r| (r[0].clone(), r[1].clone(), r[2].clone(), r[4].clone()))
            .collect::<Vec<_>>()
    };
    let mut late_v1_differ = 0;
    for mode in [Mode::Live, Mode::PerRun] {
        let got = run.latest(mode);
        assert_same(
            &ctx,
            "_latest (all columns but version, sealed and fired_at)",
            mode.pipeline(),
            &got,
            &latest,
        );
        let got = run.sealed(mode);
        assert_same(
            &ctx,
            "_sealed rows of kind main (all columns but fired_at)",
            mode.pipeline(),
            &main(&got),
            &main(&sealed),
        );
        assert_eq!(
            late_windows(&got, &feeds[&mode].intermediates),
            late_windows(&sealed, &Default::default()),
            "{ctx}: {}: windows whose version 1 is late (sessions formed and absorbed between two \
             moves of the watermark left out)",
            mode.pipeline()
        );
        if mode == Mode::Live {
            late_v1_differ = got.iter().filter(|r| !sealed.contains(r)).count();
        }
    }
    let counters: BTreeMap<Mode, Row> = MODES.iter().map(|&m| (m, run.counters(m))).collect();
    let rows_sent: usize = log
        .steps
        .iter()
        .map(|s| {
            if let Step::Deliver { rows, .. } = s {
                rows.len()
            } else {
                0
            }
        })
        .sum();
    for mode in MODES {
        let c = &counters[&mode];
        let b = &counters[&Mode::Backfill];
        let name = mode.pipeline();
        assert_eq!(
            c[0],
            Some(rows_sent.to_string()),
            "{ctx}: {name}: every row sent is in its source table"
        );
        assert_eq!(
            (&c[1], &c[2]),
            (&b[1], &b[2]),
            "{ctx}: {name}: pipelines.(refused, duplicates) as the backfill's"
        );
        let versions: usize = histories[&mode].values().map(Vec::len).sum();
        assert_eq!(
            c[3],
            Some(versions.to_string()),
            "{ctx}: {name}: pipelines.firings counts its history"
        );
        assert_eq!(
            (&c[4], &c[5], &c[6]),
            (
                &Some("0".to_string()),
                &Some("0".to_string()),
                &Some("infinity".to_string())
            ),
            "{ctx}: {name}: (state_rows, open_windows, watermark) after 'infinity'"
        );
    }
    let firings = |m: Mode| counters[&m][3].as_deref().unwrap().parse::<i64>().unwrap();
    assert!(
        firings(Mode::Live) >= firings(Mode::PerRun)
            && firings(Mode::PerRun) >= firings(Mode::Backfill),
        "{ctx}: firings: live >= per_run >= backfill"
    );

    let advances = log
        .steps
        .iter()
        .filter(|s| matches!(s, Step::Advance { .. }))
        .count();
    let idles = log
        .steps
        .iter()
        .filter(|s| matches!(s, Step::MarkIdle { .. }))
        .count();
    let moves = log.moves.iter().filter(|&&m| m).count();
    let b = &counters[&Mode::Backfill];
    println!(
        "backfill equals live ({}): {} steps ({} deliveries of {rows_sent} rows, {advances} advances, {idles} mark_idle, \
         {moves} moved the pipeline watermark); refused {}, duplicates {}; firings live {}, per_run {}, backfill {}; \
         {} windows, {} of them with a late version 1 that differs{}",
        shape.label,
        log.steps.len(),
        log.steps.len() - advances - idles,
        b[1].as_deref().unwrap_or("?"),
        b[2].as_deref().unwrap_or("?"),
        firings(Mode::Live),
        firings(Mode::PerRun),
        firings(Mode::Backfill),
        histories[&Mode::Backfill].len(),
        late_v1_differ,
        if shape.session_gap.is_some() {
            let merged = |m: Mode| {
                histories[&m]
                    .values()
                    .flatten()
                    .filter(|v| v.kind == "merged")
                    .count()
            };
            format!(
                "; merged versions live {}, per_run {}, backfill {}; intermediate sessions live {}, per_run {}; \
                 merged_into reached through intermediates live {}, per_run {}, inside the backfill's \
                 (never published) live {}, per_run {}",
                merged(Mode::Live),
                merged(Mode::PerRun),
                merged(Mode::Backfill),
                feeds[&Mode::Live].intermediates.len(),
                feeds[&Mode::PerRun].intermediates.len(),
                feeds[&Mode::Live].through_intermediates,
                feeds[&Mode::PerRun].through_intermediates,
                feeds[&Mode::Live].unpublished,
                feeds[&Mode::PerRun].unpublished,
            )
        } else {
            String::new()
        }
    );
    drop(run);
    db::drop_database(&dbname);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(version: i64, kind: &str, n: &str, watermark: &str) -> Version {
        Version {
            version,
            kind: kind.into(),
            aggregates: vec![Some(n.into())],
            watermark: watermark.into(),
            merged_into: None,
        }
    }

    #[test]
    fn collapse_keeps_the_last_version_of_each_kind_and_watermark() {
        let live = [
            v(1, "main", "2", "10"),
            v(2, "late", "3", "10"),
            v(3, "late", "4", "10"),
            v(4, "late", "5", "20"),
        ];
        assert_eq!(
            collapse(&live),
            [
                v(1, "main", "2", "10"),
                v(2, "late", "4", "10"),
                v(3, "late", "5", "20")
            ]
        );
        let late_first = [v(1, "late", "1", "10"), v(2, "late", "2", "10")];
        assert_eq!(collapse(&late_first), [v(1, "late", "2", "10")]);
    }

    #[test]
    fn a_session_absorbed_after_late_versions_under_the_same_watermark() {
        let mut merged = v(5, "merged", "4", "30");
        merged.merged_into = Some(("0".into(), "99".into()));
        let live = [
            v(1, "main", "1", "10"),
            v(2, "late", "2", "20"),
            v(3, "late", "3", "30"),
            v(4, "late", "4", "30"),
            merged,
        ];
        // The backfill absorbed it with the statement that held those late rows: its merged
        // version repeats version 2.
        assert_eq!(
            normalize_session(&live),
            [
                v(1, "main", "1", "10"),
                v(2, "late", "2", "20"),
                v(3, "merged", "2", "30")
            ]
        );
        // A main version under that watermark stays: it was written by the advance.
        let main_then_merged = [
            v(1, "main", "1", "30"),
            v(2, "late", "2", "30"),
            v(3, "merged", "2", "30"),
        ];
        assert_eq!(
            normalize_session(&main_then_merged),
            [v(1, "main", "1", "30"), v(2, "merged", "1", "30")]
        );
        let never_absorbed = [v(1, "late", "1", "30"), v(2, "late", "2", "30")];
        assert_eq!(
            normalize_session(&never_absorbed),
            [v(1, "late", "2", "30")]
        );
    }

    #[test]
    fn clocks_take_the_least_active_source_and_never_go_back() {
        let mut c = Clocks::default();
        assert!(c.apply(&Step::Advance { source: 0, to: 100 }));
        assert_eq!(c.pipeline, Some(100));
        // Registers behind: the pipeline stays and waits for it.
        assert!(!c.apply(&Step::Advance { source: 1, to: 50 }));
        assert!(!c.apply(&Step::Advance { source: 1, to: 80 }));
        assert!(!c.apply(&Step::Advance { source: 1, to: 120 }));
        assert_eq!(c.pipeline, Some(100));
        assert!(c.apply(&Step::Advance { source: 0, to: 130 }));
        assert_eq!(c.pipeline, Some(120));
        // Not ahead of p0's own watermark: a no-op. p1 is the slowest; marked idle, it leaves
        // p0 in charge.
        assert!(!c.apply(&Step::Advance { source: 0, to: 125 }));
        assert_eq!(c.pipeline, Some(120));
        assert!(c.apply(&Step::MarkIdle { source: 1 }));
        assert_eq!(c.pipeline, Some(130));
        let mut c = Clocks::default();
        c.apply(&Step::Advance { source: 0, to: 100 });
        c.apply(&Step::Advance { source: 1, to: 200 });
        assert!(c.apply(&Step::MarkIdle { source: 0 }));
        assert_eq!(c.pipeline, Some(200));
        // A not-ahead advance leaves p0 idle; every source idle leaves the pipeline where it is.
        assert!(!c.apply(&Step::Advance { source: 0, to: 90 }));
        assert!(!c.apply(&Step::MarkIdle { source: 1 }));
        assert_eq!(c.pipeline, Some(200));
        // p0 back, behind: the pipeline stays.
        assert!(!c.apply(&Step::Advance { source: 0, to: 150 }));
        assert_eq!(c.pipeline, Some(200));
    }
}
