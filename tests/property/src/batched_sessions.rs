//! Batched late firings of session windows (SPEC §3 and §7, `late_firing` with `session_gap`):
//! a session pipeline whose late rows wait for a batch publishes, once every batch is due, what
//! the same pipeline publishes with its late versions written by each ingest statement. A
//! metamorphic property, with no model, as `batched` is for the other kinds of windows.
//!
//! The three pipelines of `batched` ([`Feed`]) on one source table, sessions of a gap of 30
//! minutes with two hours of grace: keys `k` and `r`, both with NULLs; event id `id`
//! (redeliveries within a statement and across statements, sometimes at another event time or
//! under another key); counts, sums, extremes, a mean, a median, a variance, a `DISTINCT` count, a
//! `FILTER` and the first and last event time; `max_ahead => NULL`:
//! - `per_statement`: no `late_firing`: every ingest statement that touches sessions writes
//!   their versions at once;
//! - `batched`: `late_firing => '2 milliseconds'`;
//! - `slow`: `late_firing => '1 day'`, never due in the run: its late rows wait until an advance
//!   reaches their session's deadline.
//!
//! Random steps: ingest statements (single-row and multi-row `INSERT`, `COPY`, `eventtime.ingest`
//! naming any of the three) of rows on time, late and too late, and rows aimed at the sessions of
//! `per_statement`: touching one (they stay apart), extending one, inside one (joining it, a late
//! row when it fired), bridging two of a key, and overlapping a purged one; advances of the three
//! to the same watermark (forward, onto a session's end or deadline or a microsecond before, a jump,
//! or not ahead: a no-op that still writes the batches due); checkpoints: `pg_sleep(0.01)`, then
//! `eventtime.tick()`, each in a transaction of its own, which make every batch of `batched` due.
//! The run ends with a checkpoint, the watermark `'infinity'` and a last checkpoint.
//!
//! A session *waits* in `batched` or `slow` when rows joined it after it fired, or when it is
//! due (its end at or before the watermark) and was made by a statement of new rows and sessions
//! that never published a version: it is then in `_provisional` with its end at or before the
//! watermark. Checked after every step:
//! 1. the three have the same history rows of `main` version 1 (all but fired_at), the same
//!    `_refused` (all but refused_at) and the same refused, duplicates, open windows and state
//!    rows in `eventtime.pipelines`; every history keeps versions 1..n per session, `sealed` for
//!    version 1, `merged` only last, with `merged_into` around its session; no history row ever
//!    changes; `batched` and `slow` have no session `per_statement` has not published and no
//!    more versions of one, a `merged` version only where `per_statement` has the same one (its
//!    values, bounds of the absorbing session and watermark), and version 1 `late` only where
//!    `per_statement` has it; `slow` has at most a version 1 and then a `late` one (at the
//!    deadline) or a `merged` one;
//! 2. what `batched` and `slow` publish is `per_statement`'s but for the sessions that wait:
//!    `_latest` (keys, bounds, kind, aggregates) outside them; `_provisional` of sessions not due
//!    (all columns); each waiting session's `_provisional` row is its `per_statement` `_latest`,
//!    of kind `late`; nothing waits in `per_statement`;
//! 3. an ingest statement writes in `batched` and `slow` only what merges sessions that had
//!    published there: their `merged` versions, the same as `per_statement` writes for them, and
//!    version 1 of the absorbing session when it is due, the same as `per_statement`'s;
//! 4. an advance writes the same `main` versions in the three, and returns the same (sessions
//!    fired, purged, watermark); besides, in `batched` and `slow`, only `late` versions of
//!    sessions that waited, one each, with the values `_provisional` showed and the watermark in
//!    force: every one whose deadline it reached, and in `slow` no other; a tick writes nothing in
//!    `per_statement` and `slow` and every waiting session of `batched`, and returns one row, for
//!    `batched`, when it wrote; a session that waited and was not written still waits;
//! 5. each statement, advance and tick sends one notification per pipeline it wrote versions of,
//!    with their counts by kind, and none for the others;
//! 6. at every checkpoint, nothing waits in `batched`: its `_latest` and `_current` are
//!    `per_statement`'s (keys, bounds, kind, aggregates); after `'infinity'`, neither in `slow`,
//!    and no state left in the three.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use postgres::fallible_iterator::FallibleIterator;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::batched::{same, send, Feed, FEEDS};
use crate::db::{self, Row};
use crate::runner::{payload_count, rng, Driver};
use crate::values::{
    decimal, quote_literal, ts_key, ts_text, utc, Val, HOUR, INFINITY, MINUTE, SECOND,
};

const K_VALUES: [&str; 2] = ["a", "b"];
const AGGREGATES: &str = "count(*) AS n, sum(amount) AS total, min(amount) AS lo, \
     max(amount) AS hi, avg(amount) AS mean, count(amount) AS priced, sum(qty) AS q, \
     percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) AS p50, var_pop(amount) AS vp, \
     count(DISTINCT qty) AS qtys, max(amount) FILTER (WHERE qty > 50) AS hi50, \
     min(at) AS first_at, max(at) AS last_at";
/// The aggregates, as compared: text, timestamps as microseconds.
const AGGS: &str = "n::text, total::text, lo::text, hi::text, mean::text, priced::text, \
     q::text, p50::text, vp::text, qtys::text, hi50::text, us(first_at), us(last_at)";
/// A session, as every query below starts its rows: keys, start, end.
const WINDOW: &str = "k, r::text, us(window_start), us(window_end)";

/// The sessions and pace of a run.
pub struct Shape {
    /// Names the database and the messages.
    pub label: &'static str,
    pub stream: u64,
    pub gap: i64,
    pub gap_sql: &'static str,
    pub lateness: i64,
    pub lateness_sql: &'static str,
    /// The typical watermark step: an advance moves by up to 1.25 of it, a jump by 3 to 6.
    pub unit: i64,
    /// Where event time starts, before the first advance.
    pub start: i64,
    pub steps: usize,
}

/// Sessions of a gap of 30 minutes with two hours of grace: a session stays live four times its
/// gap after it fires, for late rows to join, extend and bridge it.
pub fn half_hour_gap() -> Shape {
    Shape {
        label: "batched_sessions",
        stream: 24,
        gap: 30 * MINUTE,
        gap_sql: "30 minutes",
        lateness: 2 * HOUR,
        lateness_sql: "2 hours",
        unit: 40 * MINUTE,
        start: utc("2026-08-01 00:00"),
        steps: 240,
    }
}

/// A session: its keys, start and end, as `WINDOW` reads them.
type Win = Row;

/// One history row.
#[derive(Clone, Debug, PartialEq)]
struct Version {
    win: Win,
    version: i64,
    kind: String,
    merged_into: Option<(i64, i64)>,
    aggs: Row,
    watermark: String,
    sealed: bool,
    fired_at: String,
}

impl Version {
    fn parse(mut r: Row) -> Version {
        let text = |v: &Option<String>| v.clone().unwrap_or_else(|| panic!("NULL in {r:?}"));
        let fired_at = text(&r[r.len() - 1]);
        let sealed = text(&r[r.len() - 2]) == "true";
        let watermark = text(&r[r.len() - 3]);
        let merged_into = match (&r[6], &r[7]) {
            (Some(lo), Some(hi)) => Some((us(lo), us(hi))),
            (None, None) => None,
            _ => panic!("merged_into with one bound: {r:?}"),
        };
        let version = text(&r[4]).parse().unwrap();
        let kind = text(&r[5]);
        let aggs = r[8..r.len() - 3].to_vec();
        r.truncate(4);
        Version {
            win: r,
            version,
            kind,
            merged_into,
            aggs,
            watermark,
            sealed,
            fired_at,
        }
    }

    /// All but `fired_at`, as a row to compare.
    fn published(&self) -> Row {
        let mut row = self.win.clone();
        row.extend([Some(self.version.to_string()), Some(self.kind.clone())]);
        row.extend(
            [self.merged_into.map(|m| m.0), self.merged_into.map(|m| m.1)]
                .map(|b| b.map(|b| b.to_string())),
        );
        row.extend(self.aggs.iter().cloned());
        row.extend([Some(self.watermark.clone()), Some(self.sealed.to_string())]);
        row
    }

    /// [`Self::published`] but the version number, which `batched` and `slow` count their own
    /// way: they skip the late versions of rows that waited.
    fn unnumbered(&self) -> Row {
        let mut row = self.published();
        row.remove(4);
        row
    }

    /// The session that absorbed this one, as a [`Win`].
    fn target(&self) -> Option<Win> {
        let (lo, hi) = self.merged_into?;
        let mut w = self.win[..2].to_vec();
        w.extend([Some(lo.to_string()), Some(hi.to_string())]);
        Some(w)
    }
}

/// Microseconds from the text of the `us()` SQL function.
fn us(s: &str) -> i64 {
    match s {
        "infinity" => INFINITY,
        "-infinity" => i64::MIN,
        _ => s
            .parse()
            .unwrap_or_else(|_| panic!("not microseconds: {s:?}")),
    }
}

fn end_of(w: &Win) -> i64 {
    us(w[3].as_deref().unwrap())
}

/// A live or purged session of `per_statement`, for rows aimed at it.
#[derive(Clone, Debug)]
struct Session {
    k: Val,
    r: Val,
    start: i64,
    end: i64,
}

impl Session {
    fn of(w: &Win) -> Session {
        Session {
            k: w[0].clone().map_or(Val::Null, Val::Text),
            r: w[1]
                .as_deref()
                .map_or(Val::Null, |r| Val::Int(r.parse().unwrap())),
            start: us(w[2].as_deref().unwrap()),
            end: us(w[3].as_deref().unwrap()),
        }
    }
}

/// What a step is, for the checks of what it wrote.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Statement,
    Advance,
    Tick,
}

#[derive(Default)]
struct Stats {
    statements: usize,
    rows: usize,
    advances: usize,
    checkpoints: usize,
    /// Rows aimed at a session: touching, extending, joining one that fired, inside one not
    /// fired yet, bridging two, on a purged one.
    aimed: [usize; 6],
    redelivered_elsewhere: usize,
    /// Statements after which `per_statement` had written versions and `batched` none.
    deferred: usize,
    /// Statements that wrote versions in `batched` (merges of sessions that had published).
    merges_at_once: usize,
    /// Late versions `batched` wrote at ticks; at advances, before the deadline and at it; `slow`
    /// at deadlines.
    batched_at_ticks: usize,
    batched_at_advances: usize,
    batched_at_deadlines: usize,
    slow_at_deadlines: usize,
    /// Of the late versions of batches of `batched` and `slow`: version 1 of a due session of
    /// new rows.
    first_in_batches: usize,
    /// The most sessions waiting at once in `batched` and in `slow`.
    most_waiting: [usize; 2],
}

struct Run<'a> {
    shape: &'a Shape,
    d: Driver,
    rng: ChaCha8Rng,
    /// The watermark the three were advanced to (one source, so the pipeline watermark).
    watermark: Option<i64>,
    next_id: i64,
    /// Every row sent, for redeliveries.
    sent: Vec<Vec<Val>>,
    /// Every history row of every pipeline, by window and version.
    seen: BTreeMap<Feed, BTreeMap<(Win, i64), Version>>,
    /// The text of every history row the first time it was seen, fired_at included.
    snapshots: BTreeMap<(Feed, Win, i64), String>,
    /// The sessions waiting in `batched` and `slow` after the last step, with their
    /// `_provisional` aggregates.
    waiting: BTreeMap<Feed, BTreeMap<Win, Row>>,
    stats: Stats,
}

impl Run<'_> {
    fn setup(&mut self) {
        self.d.action = "setup".into();
        let mut sql = "CREATE TABLE ev (id bigint, k text, r integer, amount numeric, qty integer, at timestamptz);\n"
            .to_string();
        for feed in FEEDS {
            let late_firing = feed
                .late_firing()
                .map(|i| format!(", late_firing => interval {}", quote_literal(i)))
                .unwrap_or_default();
            sql += &format!(
                "SELECT eventtime.create_pipeline(name => {}, source => 'ev', event_time => 'at', \
                 key => ARRAY['k', 'r'], event_id => 'id', session_gap => interval {}, \
                 allowed_lateness => interval {}, aggregates => {}, max_ahead => NULL{late_firing});\n",
                quote_literal(feed.name()),
                quote_literal(self.shape.gap_sql),
                quote_literal(self.shape.lateness_sql),
                quote_literal(AGGREGATES),
            );
        }
        self.d.exec(&sql);
        self.d.exec("LISTEN eventtime");
        for feed in FEEDS {
            let expected = feed
                .late_firing()
                .map(|i| format!("interval {}", quote_literal(i)))
                .unwrap_or_else(|| "NULL::interval".into());
            let shown = self.d.rows(&format!(
                "SELECT window_kind, (late_firing IS NOT DISTINCT FROM {expected})::text \
                 FROM eventtime.pipelines WHERE name = {}",
                quote_literal(feed.name())
            ));
            assert_eq!(
                shown,
                vec![vec![Some("session".to_string()), Some("true".to_string())]],
                "{}: {}: eventtime.pipelines (window_kind, late_firing is {expected})",
                self.d.ctx(),
                feed.name()
            );
            self.seen.insert(feed, BTreeMap::new());
        }
        for feed in [Feed::Batched, Feed::Slow] {
            self.waiting.insert(feed, BTreeMap::new());
        }
    }

    fn watermark_text(&self) -> String {
        self.watermark.map(ts_text).unwrap_or_else(|| "NULL".into())
    }

    /// The pipeline watermark, or where event time starts before the first advance.
    fn reference(&self) -> i64 {
        self.watermark
            .filter(|&w| w != INFINITY)
            .unwrap_or(self.shape.start)
    }

    fn due(&self, end: i64) -> bool {
        self.watermark.is_some_and(|w| end <= w)
    }

    fn past_deadline(&self, w: &Win) -> bool {
        self.watermark
            .is_some_and(|wm| end_of(w).saturating_add(self.shape.lateness) <= wm)
    }

    /// The sessions of `per_statement`: those not purged (in `_current`, their deadline ahead),
    /// and the purged ones (in `_latest`, their deadline reached).
    fn sessions(&mut self) -> (Vec<Session>, Vec<Session>) {
        let rows = self.d.rows(&format!(
            "SELECT {WINDOW} FROM per_statement_current ORDER BY 1, 2, 3"
        ));
        let (purged, live): (Vec<Win>, Vec<Win>) =
            rows.into_iter().partition(|w| self.past_deadline(w));
        (
            live.iter().map(Session::of).collect(),
            purged.iter().map(Session::of).collect(),
        )
    }

    /// On time, late within the grace, or too late.
    fn near(&mut self) -> i64 {
        let now = self.reference();
        let (g, l) = (self.shape.gap, self.shape.lateness);
        let t = match self.rng.random_range(0..100) {
            0..40 => now + self.rng.random_range(-g..3 * g),
            40..82 => now - g - self.rng.random_range(0..=l),
            _ => now - (g + l) - self.rng.random_range(0..3 * g),
        };
        if self.rng.random_bool(0.7) {
            t.div_euclid(SECOND) * SECOND
        } else {
            t
        }
    }

    /// Gives `row` the keys of a session of `per_statement` and an event time that touches it,
    /// extends it, falls inside it, bridges it with the next session of its keys, or (a purged
    /// one) overlaps it. Returns whether it did.
    fn aim(&mut self, row: &mut [Val], live: &[Session], purged: &[Session]) -> bool {
        let g = self.shape.gap;
        if (live.is_empty() && purged.is_empty()) || self.rng.random_bool(0.45) {
            return false;
        }
        let on_purged = live.is_empty() || (!purged.is_empty() && self.rng.random_bool(0.15));
        let pool = if on_purged { purged } else { live };
        let s = pool[self.rng.random_range(0..pool.len())].clone();
        let t = if on_purged {
            self.stats.aimed[5] += 1;
            self.rng.random_range(s.start - g + 1..s.end)
        } else {
            match self.rng.random_range(0..100) {
                0..15 => {
                    self.stats.aimed[0] += 1;
                    if self.rng.random_bool(0.5) {
                        s.end
                    } else {
                        s.start - g
                    }
                }
                15..40 => {
                    self.stats.aimed[1] += 1;
                    let by = self.rng.random_range(1..=g / 2);
                    if self.rng.random_bool(0.5) {
                        s.end - g + by
                    } else {
                        s.start - g + by
                    }
                }
                40..75 => {
                    self.stats.aimed[if self.due(s.end) { 2 } else { 3 }] += 1;
                    self.rng.random_range(s.start..=s.end - g)
                }
                _ => {
                    let next = live
                        .iter()
                        .filter(|n| n.k == s.k && n.r == s.r && n.start >= s.end)
                        .filter(|n| n.start - g < s.end - 1)
                        .map(|n| n.start)
                        .min();
                    match next {
                        Some(n) => {
                            self.stats.aimed[4] += 1;
                            self.rng.random_range(n - g + 1..s.end)
                        }
                        None => {
                            self.stats.aimed[1] += 1;
                            s.end - 1
                        }
                    }
                }
            }
        };
        row[1] = s.k;
        row[2] = s.r;
        row[5] = Val::Ts(t);
        true
    }

    fn fresh_row(&mut self, live: &[Session], purged: &[Session]) -> Vec<Val> {
        let id = if self.rng.random_range(0..100) < 3 {
            // Rows without an id are never duplicates.
            Val::Null
        } else {
            self.next_id += 1;
            Val::Int(self.next_id)
        };
        let k = if self.rng.random_range(0..100) < 15 {
            Val::Null
        } else {
            Val::Text(K_VALUES[self.rng.random_range(0..K_VALUES.len())].into())
        };
        let r = if self.rng.random_range(0..100) < 15 {
            Val::Null
        } else {
            Val::Int(self.rng.random_range(1..=2))
        };
        let amount = if self.rng.random_range(0..100) < 10 {
            Val::Null
        } else {
            Val::Num(decimal(
                self.rng.random_range(-500..50_000),
                self.rng.random_range(0..=2),
            ))
        };
        let qty = if self.rng.random_range(0..100) < 5 {
            Val::Null
        } else {
            Val::Int(self.rng.random_range(-5..=100))
        };
        let mut row = vec![id, k, r, amount, qty, Val::Ts(0)];
        if !self.aim(&mut row, live, purged) {
            row[5] = Val::Ts(self.near());
        }
        row
    }

    /// One ingest statement of 1 to 25 rows: fresh ones, exact copies of rows of the same
    /// statement, and redeliveries of rows sent before (sometimes at another event time, still
    /// a duplicate, or under another key, another event).
    fn statement(&mut self) {
        let (live, purged) = self.sessions();
        let n = match self.rng.random_range(0..100) {
            0..50 => 1,
            50..85 => self.rng.random_range(2..=8),
            _ => self.rng.random_range(8..=25),
        };
        let mut rows: Vec<Vec<Val>> = Vec::with_capacity(n);
        for _ in 0..n {
            let p = self.rng.random_range(0..100);
            let row = if p < 6 && !rows.is_empty() {
                rows[self.rng.random_range(0..rows.len())].clone()
            } else if p < 20 && !self.sent.is_empty() {
                let from = if self.rng.random_bool(0.7) {
                    self.sent.len().saturating_sub(40)
                } else {
                    0
                };
                let mut row = self.sent[self.rng.random_range(from..self.sent.len())].clone();
                if self.rng.random_bool(0.3) {
                    self.stats.redelivered_elsewhere += 1;
                    row[5] = Val::Ts(self.near());
                }
                if self.rng.random_bool(0.1) {
                    row[1] = match &row[1] {
                        Val::Text(k) if k == "a" => Val::Text("b".into()),
                        Val::Text(_) => Val::Null,
                        _ => Val::Text("a".into()),
                    };
                }
                row
            } else {
                self.fresh_row(&live, &purged)
            };
            rows.push(row);
        }
        self.sent.extend(rows.iter().cloned());
        send(&mut self.d, &mut self.rng, &rows, (45, 70));
        self.d.action += &format!(" under watermark {}", self.watermark_text());
        self.stats.statements += 1;
        self.stats.rows += n;
        let before = self.lengths();
        let new = self.sync();
        self.check_statement(&new, &before);
        self.after(Step::Statement, &new, &before);
    }

    fn target(&mut self) -> i64 {
        let unit = self.shape.unit;
        let lateness = self.shape.lateness;
        let Some(c) = self.watermark else {
            return (self.shape.start + self.rng.random_range(-unit / 2..2 * unit))
                .div_euclid(MINUTE)
                * MINUTE;
        };
        match self.rng.random_range(0..100) {
            0..40 => (c + self.rng.random_range(SECOND..unit * 5 / 4)).div_euclid(SECOND) * SECOND,
            // Onto a session's end or deadline, or a microsecond before.
            40..72 => {
                let (live, _) = self.sessions();
                let bounds: Vec<i64> = live
                    .iter()
                    .flat_map(|s| [s.end, s.end + lateness])
                    .filter(|&b| b > c)
                    .collect();
                let b = if bounds.is_empty() {
                    c + unit
                } else {
                    bounds[self.rng.random_range(0..bounds.len())]
                };
                if self.rng.random_bool(0.25) {
                    b - 1
                } else {
                    b
                }
            }
            72..82 => c + self.rng.random_range(3 * unit..6 * unit),
            // Not ahead: a no-op, but for the batches due.
            _ => c - self.rng.random_range(0..unit).div_euclid(MINUTE) * MINUTE,
        }
    }

    fn advance(&mut self, to: i64) {
        self.d.action = format!(
            "advance_watermark from {} to {}",
            self.watermark_text(),
            ts_text(to)
        );
        let results: Vec<Row> = FEEDS
            .iter()
            .map(|f| {
                let mut got = self.d.rows(&format!(
                    "SELECT windows_fired::text, windows_purged::text, us(watermark) \
                     FROM eventtime.advance_watermark({}, {}::timestamptz)",
                    quote_literal(f.name()),
                    quote_literal(&ts_text(to))
                ));
                assert_eq!(got.len(), 1, "{}: one row", self.d.ctx());
                got.pop().unwrap()
            })
            .collect();
        self.watermark = Some(self.watermark.map_or(to, |w| w.max(to)));
        let wm = self.watermark.map(ts_key);
        for (feed, got) in FEEDS.iter().zip(&results) {
            assert_eq!(
                got[2],
                wm,
                "{}: {}: the watermark advance_watermark returns",
                self.d.ctx(),
                feed.name()
            );
            assert_eq!(
                got,
                &results[0],
                "{}: {}: (sessions fired, sessions purged, watermark) as per_statement's",
                self.d.ctx(),
                feed.name()
            );
        }
        self.stats.advances += 1;
        let before = self.lengths();
        let new = self.sync();
        let fired: usize = results[0][0].as_deref().unwrap().parse().unwrap();
        let mains = new[&Feed::PerStatement]
            .iter()
            .filter(|v| v.kind == "main")
            .count();
        assert_eq!(
            mains,
            fired,
            "{}: per_statement: the main versions of the sessions advance_watermark fired",
            self.d.ctx()
        );
        self.after(Step::Advance, &new, &before);
    }

    /// `pg_sleep`, then `eventtime.tick()`, then everything compared.
    fn checkpoint(&mut self) {
        self.d.action = format!("checkpoint under watermark {}", self.watermark_text());
        self.d.exec("SELECT pg_sleep(0.01)");
        let ticked = self.d.rows(
            "SELECT pipeline, windows_fired::text, windows_purged::text, us(watermark), skipped \
             FROM eventtime.tick()",
        );
        self.stats.checkpoints += 1;
        let before = self.lengths();
        let new = self.sync();
        let expected = if new[&Feed::Batched].is_empty() {
            Vec::new()
        } else {
            vec![vec![
                Some("batched".to_string()),
                Some("0".into()),
                Some("0".into()),
                self.watermark.map(ts_key),
                None,
            ]]
        };
        assert_eq!(
            ticked,
            expected,
            "{}: tick() returns a row for batched when it wrote a batch (firing and purging nothing), none else",
            self.d.ctx()
        );
        self.after(Step::Tick, &new, &before);
        let waiting = &self.waiting[&Feed::Batched];
        assert!(
            waiting.is_empty(),
            "{}: batched: sessions still wait after a tick: {:?}",
            self.d.ctx(),
            waiting.keys().collect::<Vec<_>>()
        );
        let current = |run: &mut Self, f: Feed| {
            run.d.rows(&format!(
                "SELECT {WINDOW}, kind, {AGGS}, provisional::text FROM {}_current",
                f.name()
            ))
        };
        let per = current(self, Feed::PerStatement);
        let got = current(self, Feed::Batched);
        same(
            &self.d,
            "_current (keys, bounds, kind, aggregates, provisional)",
            Feed::Batched,
            got,
            per,
        );
    }

    /// The greatest version of each session of each pipeline, as last read.
    fn lengths(&self) -> BTreeMap<Feed, BTreeMap<Win, i64>> {
        self.seen
            .iter()
            .map(|(&f, rows)| {
                let mut out: BTreeMap<Win, i64> = BTreeMap::new();
                for (w, v) in rows.keys() {
                    let n = out.entry(w.clone()).or_default();
                    *n = (*n).max(*v);
                }
                (f, out)
            })
            .collect()
    }

    /// Reads the three histories; checks that no row changed and what each keeps (check 1);
    /// returns the rows written since the last call.
    fn sync(&mut self) -> BTreeMap<Feed, Vec<Version>> {
        let mut new = BTreeMap::new();
        let mut current = BTreeMap::new();
        for feed in FEEDS {
            let rows = self.d.rows(&format!(
                "SELECT {WINDOW}, version::text, kind, us(lower(merged_into)), us(upper(merged_into)), \
                        {AGGS}, us(watermark), sealed::text, fired_at::text \
                 FROM {}_history",
                feed.name()
            ));
            let mut all = BTreeMap::new();
            let mut added = Vec::new();
            for r in rows {
                let v = Version::parse(r);
                let key = (v.win.clone(), v.version);
                current.insert((feed, key.0.clone(), key.1), format!("{v:?}"));
                if !self.seen[&feed].contains_key(&key) {
                    added.push(v.clone());
                }
                if all.insert(key, v).is_some() {
                    panic!(
                        "{}: {}: two history rows of one version",
                        self.d.ctx(),
                        feed.name()
                    );
                }
            }
            self.seen.insert(feed, all);
            new.insert(feed, added);
        }
        self.d.check_history_unchanged(&mut self.snapshots, current);
        self.check_histories();
        new
    }

    /// Check 1 on the histories.
    fn check_histories(&self) {
        let ctx = self.d.ctx();
        let mut sessions: BTreeMap<Feed, BTreeMap<&Win, Vec<&Version>>> = BTreeMap::new();
        for feed in FEEDS {
            let by = sessions.entry(feed).or_default();
            for ((w, _), v) in &self.seen[&feed] {
                by.entry(w).or_default().push(v);
            }
            for (w, vs) in by.iter() {
                let numbers: Vec<i64> = vs.iter().map(|v| v.version).collect();
                let gapless: Vec<i64> = (1..=vs.len() as i64).collect();
                let kinds: Vec<&str> = vs.iter().map(|v| v.kind.as_str()).collect();
                let start = us(w[2].as_deref().unwrap());
                let shape_ok = vs.iter().enumerate().all(|(i, v)| {
                    let kind_ok = match (i, v.kind.as_str()) {
                        (0, "main" | "late") => true,
                        (i, "late") => i > 0,
                        (i, "merged") => i > 0 && i + 1 == vs.len(),
                        _ => false,
                    };
                    let merged_ok = match v.merged_into {
                        None => v.kind != "merged",
                        Some((lo, hi)) => {
                            v.kind == "merged"
                                && lo <= start
                                && end_of(w) <= hi
                                && (lo, hi) != (start, end_of(w))
                        }
                    };
                    let ordered = i == 0 || us(&vs[i - 1].watermark) <= us(&v.watermark);
                    kind_ok && merged_ok && ordered && v.sealed == (i == 0)
                });
                assert!(
                    numbers == gapless && shape_ok,
                    "{ctx}: {}: session {w:?} has versions 1..n, sealed only the first, merged only \
                     the last (merged_into around it), watermarks in order; it has {kinds:?}: {vs:?}",
                    feed.name()
                );
                if feed == Feed::Slow {
                    let deadline = end_of(w).saturating_add(self.shape.lateness);
                    let at_deadline = |v: &Version| us(&v.watermark) >= deadline;
                    let merged_into_it = |v: &Version| {
                        self.seen[&Feed::Slow]
                            .values()
                            .any(|m| m.target().as_ref() == Some(w) && m.watermark == v.watermark)
                    };
                    let ok = match kinds[..] {
                        ["main"] | ["main", "merged"] => true,
                        ["late"] | ["late", "merged"] => {
                            at_deadline(vs[0]) || merged_into_it(vs[0])
                        }
                        ["main", "late"] => at_deadline(vs[1]),
                        ["late", "late"] => merged_into_it(vs[0]) && at_deadline(vs[1]),
                        _ => false,
                    };
                    assert!(
                        ok,
                        "{ctx}: slow: session {w:?} (deadline {}) has {kinds:?}: a version 1 (late \
                         only at the deadline or when a merge made it), then a late version at the \
                         deadline or a merged one\n  {vs:?}",
                        ts_text(deadline)
                    );
                }
            }
        }
        let per = &sessions[&Feed::PerStatement];
        for feed in [Feed::Batched, Feed::Slow] {
            for (w, vs) in &sessions[&feed] {
                let Some(theirs) = per.get(w) else {
                    panic!(
                        "{ctx}: {}: session {w:?} has versions {vs:?}, per_statement none",
                        feed.name()
                    );
                };
                assert!(
                    vs.len() <= theirs.len(),
                    "{ctx}: {}: session {w:?} has {} versions, per_statement {}",
                    feed.name(),
                    vs.len(),
                    theirs.len()
                );
                let first_ok = match vs[0].kind.as_str() {
                    "main" => vs[0].published() == theirs[0].published(),
                    _ => theirs[0].kind == "late",
                };
                assert!(
                    first_ok,
                    "{ctx}: {}: session {w:?}: version 1 {:?}; per_statement's {:?}: a main one \
                     the same (all but fired_at), a late one where per_statement's is late",
                    feed.name(),
                    vs[0],
                    theirs[0]
                );
                let last = vs[vs.len() - 1];
                let their_last = theirs[theirs.len() - 1];
                assert!(
                    last.kind != "merged" || last.unnumbered() == their_last.unnumbered(),
                    "{ctx}: {}: session {w:?} merged as {last:?}; per_statement's last version {their_last:?}",
                    feed.name()
                );
            }
            let mains = |h: &BTreeMap<&Win, Vec<&Version>>| -> Vec<Row> {
                h.values()
                    .filter(|vs| vs[0].kind == "main")
                    .map(|vs| vs[0].published())
                    .collect()
            };
            same(
                &self.d,
                "main versions (all but fired_at)",
                feed,
                mains(&sessions[&feed]),
                mains(per),
            );
        }
    }

    /// Check 3: what an ingest statement wrote in `batched` and `slow`.
    fn check_statement(
        &mut self,
        new: &BTreeMap<Feed, Vec<Version>>,
        before: &BTreeMap<Feed, BTreeMap<Win, i64>>,
    ) {
        let per = &new[&Feed::PerStatement];
        assert!(
            per.iter().all(|v| v.kind != "main"),
            "{}: per_statement: an ingest statement fired {per:?}",
            self.d.ctx()
        );
        if !per.is_empty() && new[&Feed::Batched].is_empty() {
            self.stats.deferred += 1;
        }
        if !new[&Feed::Batched].is_empty() {
            self.stats.merges_at_once += 1;
        }
        for feed in [Feed::Batched, Feed::Slow] {
            let mine = &new[&feed];
            let merged: Vec<&Version> = mine.iter().filter(|v| v.kind == "merged").collect();
            let expected: Vec<Row> = per
                .iter()
                .filter(|v| v.kind == "merged" && before[&feed].contains_key(&v.win))
                .map(Version::unnumbered)
                .collect();
            same(
                &self.d,
                "merged versions an ingest statement wrote (all but version and fired_at), those of \
                 sessions that had published",
                feed,
                merged.iter().map(|v| v.unnumbered()).collect(),
                expected,
            );
            let targets: BTreeSet<Win> = merged.iter().filter_map(|v| v.target()).collect();
            let others: Vec<Row> = mine
                .iter()
                .filter(|v| v.kind != "merged")
                .map(Version::published)
                .collect();
            let expected: Vec<Row> = per
                .iter()
                .filter(|v| v.kind != "merged" && targets.contains(&v.win))
                .map(Version::published)
                .collect();
            same(
                &self.d,
                "other versions an ingest statement wrote: version 1 of the sessions that absorbed \
                 sessions that had published, when due",
                feed,
                others,
                expected,
            );
        }
    }

    /// After every step: checks 4 (for advances and ticks), 5, 2 and the rest of 1.
    fn after(
        &mut self,
        step: Step,
        new: &BTreeMap<Feed, Vec<Version>>,
        before: &BTreeMap<Feed, BTreeMap<Win, i64>>,
    ) {
        self.check_announced(new);
        let waiting_before = std::mem::take(&mut self.waiting);
        let waiting = self.check_published();
        if step != Step::Statement {
            self.check_batches(step, new, before, &waiting_before, &waiting);
        }
        self.stats.most_waiting[0] = self.stats.most_waiting[0].max(waiting[&Feed::Batched].len());
        self.stats.most_waiting[1] = self.stats.most_waiting[1].max(waiting[&Feed::Slow].len());
        self.waiting = waiting;
        self.check_refused_and_counters(step == Step::Statement);
    }

    /// Check 4: what an advance or a tick wrote, given the sessions that waited before it.
    fn check_batches(
        &mut self,
        step: Step,
        new: &BTreeMap<Feed, Vec<Version>>,
        before: &BTreeMap<Feed, BTreeMap<Win, i64>>,
        waiting_before: &BTreeMap<Feed, BTreeMap<Win, Row>>,
        waiting_after: &BTreeMap<Feed, BTreeMap<Win, Row>>,
    ) {
        let ctx = self.d.ctx().to_string();
        let per = &new[&Feed::PerStatement];
        assert!(
            per.iter()
                .all(|v| v.kind == "main" && step == Step::Advance),
            "{ctx}: per_statement: an advance writes main versions only, a tick nothing: {per:?}"
        );
        let wm = self.watermark.map(ts_key).unwrap_or_default();
        for feed in [Feed::Batched, Feed::Slow] {
            let waited = &waiting_before[&feed];
            let mine = &new[&feed];
            let mut written = BTreeSet::new();
            for v in mine.iter().filter(|v| v.kind != "main") {
                let prior = before[&feed].get(&v.win).copied().unwrap_or(0);
                let expected = waited.get(&v.win).map(|aggs| Version {
                    win: v.win.clone(),
                    version: prior + 1,
                    kind: "late".into(),
                    merged_into: None,
                    aggs: aggs.clone(),
                    watermark: wm.clone(),
                    sealed: prior == 0,
                    fired_at: v.fired_at.clone(),
                });
                assert!(
                    expected.as_ref() == Some(v) && written.insert(v.win.clone()),
                    "{ctx}: {}: wrote {v:?}; the late version of a waiting session, once, with the \
                     values _provisional showed and the watermark in force, is {expected:?}",
                    feed.name()
                );
                let deadline = self.past_deadline(&v.win);
                let counter = match (feed, step, deadline) {
                    (Feed::Batched, Step::Tick, _) => &mut self.stats.batched_at_ticks,
                    (Feed::Batched, _, false) => &mut self.stats.batched_at_advances,
                    (Feed::Batched, _, true) => &mut self.stats.batched_at_deadlines,
                    (Feed::Slow, _, _) => &mut self.stats.slow_at_deadlines,
                    _ => unreachable!(),
                };
                *counter += 1;
                if prior == 0 {
                    self.stats.first_in_batches += 1;
                }
            }
            let required: Vec<&Win> = waited
                .keys()
                .filter(|w| match (feed, step) {
                    (Feed::Batched, Step::Tick) => true,
                    (_, Step::Tick) => false,
                    _ => self.past_deadline(w),
                })
                .filter(|w| !written.contains(*w))
                .collect();
            assert!(
                required.is_empty(),
                "{ctx}: {}: these sessions waited and are due (by time or deadline), and it wrote no version of them: {required:?}",
                feed.name()
            );
            if feed == Feed::Slow {
                let early: Vec<&Win> = written.iter().filter(|w| !self.past_deadline(w)).collect();
                assert!(
                    early.is_empty(),
                    "{ctx}: slow: wrote the batch of these sessions a day before it is due: {early:?}"
                );
            }
            let still: BTreeMap<Win, Row> = waited
                .iter()
                .filter(|(w, _)| !written.contains(*w))
                .map(|(w, a)| (w.clone(), a.clone()))
                .collect();
            assert_eq!(
                &waiting_after[&feed],
                &still,
                "{ctx}: {}: the sessions waiting after it: those that waited before and were not written",
                feed.name()
            );
        }
    }

    /// Check 5: one notification per pipeline that the step wrote versions of, with their counts
    /// by kind.
    fn check_announced(&mut self, new: &BTreeMap<Feed, Vec<Version>>) {
        let mut got: BTreeMap<String, Vec<[i64; 3]>> = BTreeMap::new();
        {
            let mut pending = self.d.db.notifications();
            let mut it = pending.iter();
            while let Some(n) = it.next().unwrap_or_else(|e| panic!("notifications: {e}")) {
                if n.channel() != "eventtime" {
                    continue;
                }
                let p = n.payload();
                let name = p
                    .split_once("\"pipeline\":\"")
                    .and_then(|(_, rest)| rest.split_once('"'))
                    .map(|(name, _)| name.to_string())
                    .unwrap_or_else(|| panic!("payload without a pipeline: {p}"));
                let counts = ["main", "late", "merged"].map(|k| {
                    payload_count(p, k)
                        .unwrap_or_else(|| panic!("payload without versions.{k}: {p}"))
                });
                got.entry(name).or_default().push(counts);
            }
        }
        let mut expected: BTreeMap<String, Vec<[i64; 3]>> = BTreeMap::new();
        for (feed, vs) in new {
            if vs.is_empty() {
                continue;
            }
            let count = |k: &str| vs.iter().filter(|v| v.kind == k).count() as i64;
            expected.insert(
                feed.name().to_string(),
                vec![["main", "late", "merged"].map(count)],
            );
        }
        assert_eq!(
            got,
            expected,
            "{}: notifications on channel eventtime by pipeline, as (main, late, merged)",
            self.d.ctx()
        );
    }

    /// Check 2. Returns the sessions waiting in `batched` and `slow`, with their aggregates.
    fn check_published(&mut self) -> BTreeMap<Feed, BTreeMap<Win, Row>> {
        let ctx = self.d.ctx().to_string();
        let latest = |run: &mut Self, f: Feed| -> BTreeMap<Win, Row> {
            let mut out = BTreeMap::new();
            for mut r in run.d.rows(&format!(
                "SELECT {WINDOW}, kind, {AGGS} FROM {}_latest",
                f.name()
            )) {
                let rest = r.split_off(4);
                assert!(
                    out.insert(r.clone(), rest).is_none(),
                    "{}: {}: two rows of session {r:?} in _latest",
                    run.d.ctx(),
                    f.name()
                );
            }
            out
        };
        // (sessions not due: all columns; waiting sessions: their aggregates)
        let provisional = |run: &mut Self, f: Feed| -> (Vec<Row>, BTreeMap<Win, Row>) {
            let (mut open, mut waiting) = (Vec::new(), BTreeMap::new());
            for mut r in run.d.rows(&format!(
                "SELECT {WINDOW}, {AGGS}, us(watermark) FROM {}_provisional",
                f.name()
            )) {
                if run.due(end_of(&r)) {
                    r.pop();
                    let aggs = r.split_off(4);
                    assert!(
                        waiting.insert(r.clone(), aggs).is_none(),
                        "{}: {}: two rows of session {r:?} in _provisional",
                        run.d.ctx(),
                        f.name()
                    );
                } else {
                    open.push(r);
                }
            }
            (open, waiting)
        };
        let per_latest = latest(self, Feed::PerStatement);
        let (per_open, per_waiting) = provisional(self, Feed::PerStatement);
        assert!(
            per_waiting.is_empty(),
            "{ctx}: per_statement: fired or due sessions in _provisional: {:?}",
            per_waiting.keys().collect::<Vec<_>>()
        );
        let both: Vec<&Row> = per_open
            .iter()
            .filter(|r| per_latest.contains_key(&r[..4]))
            .collect();
        assert!(
            both.is_empty(),
            "{ctx}: per_statement: sessions both published and not fired: {both:?}"
        );
        let mut out = BTreeMap::new();
        for feed in [Feed::Batched, Feed::Slow] {
            let mine = latest(self, feed);
            let (open, waiting) = provisional(self, feed);
            same(
                &self.d,
                "_provisional of the sessions not due (keys, bounds, aggregates, watermark)",
                feed,
                open,
                per_open.clone(),
            );
            let row = |w: &Win, rest: &Row| -> Row { w.iter().chain(rest).cloned().collect() };
            let got: Vec<Row> = waiting
                .iter()
                .map(|(w, aggs)| {
                    let mut r = w.clone();
                    r.push(Some("late".into()));
                    r.extend(aggs.iter().cloned());
                    r
                })
                .collect();
            let expected: Vec<Row> = waiting
                .keys()
                .filter_map(|w| per_latest.get(w).map(|rest| row(w, rest)))
                .collect();
            same(
                &self.d,
                "waiting sessions: their _provisional row (keys, bounds, aggregates) as kind late; \
                 per_statement's _latest (keys, bounds, kind, aggregates)",
                feed,
                got,
                expected,
            );
            let outside = |l: &BTreeMap<Win, Row>| -> Vec<Row> {
                l.iter()
                    .filter(|(w, _)| !waiting.contains_key(*w))
                    .map(|(w, rest)| row(w, rest))
                    .collect()
            };
            same(
                &self.d,
                "_latest (keys, bounds, kind, aggregates) of the sessions that do not wait",
                feed,
                outside(&mine),
                outside(&per_latest),
            );
            out.insert(feed, waiting);
        }
        out
    }

    /// The rest of check 1: `_refused` (after an ingest statement) and the counters of
    /// `eventtime.pipelines`.
    fn check_refused_and_counters(&mut self, refused: bool) {
        if refused {
            let rows = |run: &mut Self, f: Feed| {
                run.d.rows(&format!(
                    "SELECT {WINDOW}, event_id::text, us(event_time), \"row\"::text, us(deadline), \
                            us(watermark), restated_in::text FROM {}_refused",
                    f.name()
                ))
            };
            let per = rows(self, Feed::PerStatement);
            for feed in [Feed::Batched, Feed::Slow] {
                let got = rows(self, feed);
                same(
                    &self.d,
                    "_refused (all but refused_at)",
                    feed,
                    got,
                    per.clone(),
                );
            }
        }
        let counters = |run: &mut Self, f: Feed| {
            run.d.rows(&format!(
                "SELECT refused::text, duplicates::text, open_windows::text, state_rows::text, \
                        us(watermark) FROM eventtime.pipelines WHERE name = {}",
                quote_literal(f.name())
            ))
        };
        let per = counters(self, Feed::PerStatement);
        for feed in [Feed::Batched, Feed::Slow] {
            let got = counters(self, feed);
            assert_eq!(
                got,
                per,
                "{}: {}: eventtime.pipelines (refused, duplicates, open_windows, state_rows, watermark) \
                 as per_statement's",
                self.d.ctx(),
                feed.name()
            );
        }
    }
}

pub fn run(shape: &Shape, seed: u64) {
    println!("seed {seed}");
    let started = Instant::now();
    let dbname = format!("eventtime_property_{}", shape.label);
    let mut run = Run {
        shape,
        d: Driver::new(db::fresh_database(&dbname), seed, shape.label),
        rng: rng(seed, shape.stream),
        watermark: None,
        next_id: 0,
        sent: Vec::new(),
        seen: BTreeMap::new(),
        snapshots: BTreeMap::new(),
        waiting: BTreeMap::new(),
        stats: Stats::default(),
    };
    run.setup();
    for step in 1..=shape.steps {
        run.d.step = step;
        match run.rng.random_range(0..100) {
            // Mostly one statement, sometimes several before the next advance or tick, so that
            // batches of several statements and merges of waiting sessions are common.
            0..60 => {
                let burst = if run.rng.random_bool(0.6) {
                    1
                } else {
                    run.rng.random_range(2..=5)
                };
                for _ in 0..burst {
                    run.statement();
                }
            }
            60..88 => {
                let to = run.target();
                run.advance(to);
            }
            _ => run.checkpoint(),
        }
    }
    run.d.step = shape.steps + 1;
    run.checkpoint();
    run.advance(INFINITY);
    run.checkpoint();
    assert!(
        run.waiting.values().all(BTreeMap::is_empty),
        "{}: sessions wait after 'infinity'",
        run.d.ctx()
    );
    let left = run.d.rows(
        "SELECT name, state_rows::text, open_windows::text FROM eventtime.pipelines ORDER BY name",
    );
    let none: Vec<Row> = ["batched", "per_statement", "slow"]
        .iter()
        .map(|n| vec![Some(n.to_string()), Some("0".into()), Some("0".into())])
        .collect();
    assert_eq!(
        left,
        none,
        "{}: (state rows, open windows) after 'infinity'",
        run.d.ctx()
    );
    let kinds = |run: &mut Run, f: Feed| {
        run.d.rows(&format!(
            "SELECT string_agg(format('%s %s', kind, n), ', ' ORDER BY kind) \
             FROM (SELECT kind, count(*) AS n FROM {}_history GROUP BY kind) k",
            f.name()
        ))[0][0]
            .clone()
            .unwrap_or_default()
    };
    let (per_kinds, batched_kinds) = (
        kinds(&mut run, Feed::PerStatement),
        kinds(&mut run, Feed::Batched),
    );
    let counters = run.d.rows(
        "SELECT refused::text, duplicates::text FROM eventtime.pipelines WHERE name = 'per_statement'",
    );
    let s = &run.stats;
    println!(
        "{}: {} statements of {} rows, {} advances, {} checkpoints in {:?}; refused {}, duplicates {}; \
         rows aimed at sessions: {} touching, {} extending, {} joining a fired one, {} inside one not \
         fired, {} bridging, {} on purged ones; {} redeliveries at another time; versions: per_statement \
         {}, batched {}; {} statements wrote versions in per_statement and none in batched, {} wrote \
         merges in batched at once; batched wrote {} late versions at ticks, {} at advances before the \
         deadline, {} at deadlines; slow {} at deadlines; {} of those batches a version 1; most sessions waiting: {} in batched, {} in slow",
        shape.label,
        s.statements,
        s.rows,
        s.advances,
        s.checkpoints,
        started.elapsed(),
        counters[0][0].as_deref().unwrap_or("?"),
        counters[0][1].as_deref().unwrap_or("?"),
        s.aimed[0],
        s.aimed[1],
        s.aimed[2],
        s.aimed[3],
        s.aimed[4],
        s.aimed[5],
        s.redelivered_elsewhere,
        per_kinds,
        batched_kinds,
        s.deferred,
        s.merges_at_once,
        s.batched_at_ticks,
        s.batched_at_advances,
        s.batched_at_deadlines,
        s.slow_at_deadlines,
        s.first_in_batches,
        s.most_waiting[0],
        s.most_waiting[1],
    );
    drop(run);
    db::drop_database(&dbname);
}
