//! Batched late firings (SPEC §3, `late_firing`): once every batch is due, a pipeline whose
//! late rows wait for a batch publishes what the same pipeline publishes with a late version per
//! ingest statement. A metamorphic property, with no model.
//!
//! Three pipelines of one definition on one source table, so that every statement feeds the
//! three the same rows: keys `k` and `r`, both with NULLs; event id `id` (redeliveries, within a
//! statement and across statements, are duplicates); the windows and grace of a [`Shape`];
//! `count(*)`, `sum`, `min`, `max`, `avg` and `count` of a numeric, `sum` of an integer and `max`
//! of the event time; `max_ahead => NULL`, as event time does not follow the wall clock:
//! - `per_statement`: no `late_firing`, one late version per ingest statement that brings a
//!   fired window rows;
//! - `batched`: `late_firing => '2 milliseconds'`;
//! - `slow`: `late_firing => '1 day'`, which the few seconds of the run never reach: its late
//!   rows wait until an advance reaches their window's deadline, which writes them first.
//!
//! Random steps: ingest statements (single-row and multi-row `INSERT`, `COPY`,
//! `eventtime.ingest` naming any of the three) of rows open, late, past their deadline, on window
//! bounds, and redelivered; advances of the three to the same watermark (forward, onto a window
//! end or deadline or a microsecond before, a jump ahead, or not ahead: a no-op, which still
//! writes the batches due); and checkpoints: `pg_sleep(0.01)`, then `eventtime.tick()`, each in a
//! transaction of its own (`tick()` reads processing time at its transaction's start), make every
//! batch of `batched` due. The run ends with a checkpoint, the watermark `'infinity'`, which
//! reaches every deadline, and a last checkpoint. Checked:
//! 1. after every ingest statement, `batched` and `slow` wrote no version; every advance returns
//!    the same (windows fired, windows purged, watermark) in the three, the watermark being the
//!    greatest advanced to; after every advance and tick, `batched` and `slow` have at most one new
//!    version per window (one per window per batch), a tick writes one in `batched` for every
//!    window that statements brought late rows since the step before (and none in `slow`), and an
//!    advance in both for every such window whose deadline it reaches;
//! 2. at every checkpoint, `batched` publishes what `per_statement` does: `_latest` and
//!    `_current` (keys, bounds, kind, aggregates; not version, sealed, watermark or fired_at:
//!    it writes fewer versions, later), `_provisional` (all columns), and the lateness account
//!    (`eventtime.lateness` with `value => 'amount'`: on time, late and refused rows per window,
//!    refused shares and values, and the percentiles of arrival lateness, as a batch keeps the
//!    watermark each of its rows arrived under); per window, it has no more versions;
//! 3. at every checkpoint, in the three: versions 1..n per window; version 1 of kind `main` is
//!    the same row (all but fired_at), and the windows whose version 1 is `late` are the same
//!    (in `slow`, those past their deadline); `_refused` is the same (all but refused_at);
//!    `eventtime.pipelines` has the same refused, duplicates and open windows; no history row
//!    ever changes (all columns, fired_at included);
//! 4. `slow`: each window has a main version, a late one, or a main then a late one, the late one
//!    written under a watermark that reached its deadline; for windows past their deadline, its
//!    `_latest` and lateness account are `per_statement`'s;
//! 5. after `'infinity'`, 2 and 4 for every window, and no state rows left in the three.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::db::{self, Row};
use crate::runner::{rng, Driver};
use crate::values::{
    decimal, quote_literal, ts_key, ts_text, utc, Val, DAY, HOUR, INFINITY, MINUTE, SECOND,
};
use crate::windows::WindowSpec;

pub(crate) const COLUMNS: [&str; 6] = ["id", "k", "r", "amount", "qty", "at"];

/// Sends `rows` (of [`COLUMNS`]) in one statement, drawn by `rng`: a multi-row `INSERT` below
/// `insert_below` of 100, a `COPY` below `copy_below`, otherwise `eventtime.ingest` naming any
/// of the [`FEEDS`] (each object leaving out its NULLs or not), whose one row is checked.
pub(crate) fn send(
    d: &mut Driver,
    rng: &mut ChaCha8Rng,
    rows: &[Vec<Val>],
    (insert_below, copy_below): (u32, u32),
) {
    let n = rows.len();
    let columns = COLUMNS.join(", ");
    let draw = rng.random_range(0..100);
    if draw < insert_below {
        d.action = format!("INSERT of {n} rows");
        d.exec(&db::insert_sql("ev", &columns, rows));
    } else if draw < copy_below {
        d.action = format!("COPY of {n} rows");
        if let Err(e) = db::copy_rows(&mut d.db, "ev", &columns, rows) {
            panic!("{}: COPY failed: {}", d.ctx(), db::describe(&e));
        }
    } else {
        let feed = FEEDS[rng.random_range(0..FEEDS.len())];
        d.action = format!("eventtime.ingest of {n} rows naming {}", feed.name());
        let objects: Vec<String> = rows
            .iter()
            .map(|r| {
                let omit_nulls = rng.random_bool(0.5);
                let fields: Vec<String> = COLUMNS
                    .iter()
                    .zip(r)
                    .filter(|(_, v)| !(omit_nulls && **v == Val::Null))
                    .map(|(c, v)| format!("\"{c}\": {}", v.json()))
                    .collect();
                format!("{{{}}}", fields.join(", "))
            })
            .collect();
        let got = d.rows(&format!(
            "SELECT count(*)::text FROM eventtime.ingest({}, {}::jsonb)",
            quote_literal(feed.name()),
            quote_literal(&format!("[{}]", objects.join(", ")))
        ));
        assert_eq!(
            got,
            vec![vec![Some("1".to_string())]],
            "{}: eventtime.ingest returns one row",
            d.ctx()
        );
    }
}
const K_VALUES: [&str; 2] = ["a", "b"];
const AGGREGATES: &str = "count(*) AS n, sum(amount) AS total, min(amount) AS lo, \
     max(amount) AS hi, avg(amount) AS mean, count(amount) AS priced, sum(qty) AS q, \
     max(at) AS last_at";
/// The aggregates, as compared: text, timestamps as microseconds.
const AGGS: &str =
    "n::text, total::text, lo::text, hi::text, mean::text, priced::text, q::text, us(last_at)";
const NAGGS: usize = 8;
/// A window, as every query below starts its rows: keys, start, end.
const WINDOW: &str = "k, r::text, us(window_start), us(window_end)";

/// The windows and pace of one run.
pub struct Shape {
    /// Names the database and the messages.
    pub label: &'static str,
    pub stream: u64,
    pub spec: WindowSpec,
    /// The window arguments of `create_pipeline`.
    pub window_sql: &'static str,
    pub lateness: i64,
    pub lateness_sql: &'static str,
    /// The typical watermark step: an advance moves by up to 1.25 of it, a jump by 3 to 6.
    pub unit: i64,
    /// Where event time starts, before the first advance.
    pub start: i64,
    pub steps: usize,
}

/// Tumbling hours with two hours of grace.
pub fn tumbling() -> Shape {
    Shape {
        label: "batched_tumbling",
        stream: 21,
        spec: WindowSpec::tumbling(HOUR, 0),
        window_sql: "window_size => interval '1 hour'",
        lateness: 2 * HOUR,
        lateness_sql: "2 hours",
        unit: 40 * MINUTE,
        start: utc("2026-05-01 00:00"),
        steps: 180,
    }
}

/// Hopping windows of two hours every 45 minutes, so that a row is in two or three windows, each
/// with its own landing, pending rows and batches; an hour of grace.
pub fn hopping() -> Shape {
    Shape {
        label: "batched_hopping",
        stream: 22,
        spec: WindowSpec::hopping(2 * HOUR, 45 * MINUTE, 0),
        window_sql: "window_size => interval '2 hours', window_slide => interval '45 minutes'",
        lateness: HOUR,
        lateness_sql: "1 hour",
        unit: 40 * MINUTE,
        start: utc("2026-06-01 00:00"),
        steps: 160,
    }
}

/// Cumulate windows: a day in UTC by six hours, windows that share their start and end at their
/// own steps, late in the short ones while the long ones are open; three hours of grace.
pub fn cumulate() -> Shape {
    Shape {
        label: "batched_cumulate",
        stream: 23,
        spec: WindowSpec::cumulate(DAY, 6 * HOUR, 0),
        window_sql: "window_size => interval '1 day', cumulate_step => interval '6 hours'",
        lateness: 3 * HOUR,
        lateness_sql: "3 hours",
        unit: 4 * HOUR,
        start: utc("2026-07-01 00:00"),
        steps: 160,
    }
}

/// The three pipelines of a run (`batched_sessions` runs the same three over sessions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Feed {
    PerStatement,
    Batched,
    Slow,
}

pub(crate) const FEEDS: [Feed; 3] = [Feed::PerStatement, Feed::Batched, Feed::Slow];

impl Feed {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Feed::PerStatement => "per_statement",
            Feed::Batched => "batched",
            Feed::Slow => "slow",
        }
    }

    pub(crate) fn late_firing(self) -> Option<&'static str> {
        match self {
            Feed::PerStatement => None,
            Feed::Batched => Some("2 milliseconds"),
            Feed::Slow => Some("1 day"),
        }
    }
}

/// A window: its keys, start and end, as `WINDOW` reads them.
type Win = Row;
/// The greatest version of each window.
type Versions = BTreeMap<Win, i64>;

#[derive(Default)]
struct Stats {
    statements: usize,
    rows: usize,
    advances: usize,
    checkpoints: usize,
    /// Late versions `batched` wrote at ticks, and at advances.
    tick_versions: i64,
    advance_versions: i64,
    /// Late versions `slow` wrote, all at advances that reached the window's deadline.
    slow_late: i64,
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
    /// Every history row seen, by (pipeline, window, version).
    history: BTreeMap<(Feed, Win, i64), String>,
    /// The greatest version of each window of each pipeline after the last advance or tick.
    versions: BTreeMap<Feed, Versions>,
    /// `firings` of `batched` and `slow` after the last advance or tick.
    firings: Vec<Row>,
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
                 key => ARRAY['k', 'r'], event_id => 'id', {}, allowed_lateness => interval {}, \
                 aggregates => {}, max_ahead => NULL{late_firing});\n",
                quote_literal(feed.name()),
                self.shape.window_sql,
                quote_literal(self.shape.lateness_sql),
                quote_literal(AGGREGATES),
            );
        }
        self.d.exec(&sql);
        for feed in FEEDS {
            let expected = feed
                .late_firing()
                .map(|i| format!("interval {}", quote_literal(i)))
                .unwrap_or_else(|| "NULL::interval".into());
            let shown = self.d.rows(&format!(
                "SELECT (late_firing IS NOT DISTINCT FROM {expected})::text FROM eventtime.pipelines WHERE name = {}",
                quote_literal(feed.name())
            ));
            assert_eq!(
                shown,
                vec![vec![Some("true".to_string())]],
                "{}: {}: eventtime.pipelines.late_firing is {expected}",
                self.d.ctx(),
                feed.name()
            );
        }
        self.firings = self.quiet_firings();
        for feed in FEEDS {
            self.versions.insert(feed, BTreeMap::new());
        }
    }

    /// The pipeline watermark, or where event time starts before the first advance.
    fn reference(&self) -> i64 {
        self.watermark
            .filter(|&w| w != INFINITY)
            .unwrap_or(self.shape.start)
    }

    fn event_time(&mut self) -> i64 {
        let w = self.reference();
        let spec = self.shape.spec;
        let (size, lateness) = (spec.span(), self.shape.lateness);
        let e = match self.rng.random_range(0..100) {
            // Ahead: open.
            0..30 => w + self.rng.random_range(0..2 * size),
            // Behind the watermark: mostly late within the grace, some just refused.
            30..68 => w - self.rng.random_range(1..=size + lateness),
            // Beyond the grace: the deadline has passed.
            68..78 => w - (size + lateness) - self.rng.random_range(0..3 * size),
            // The first or last microsecond of a window near the watermark.
            _ => {
                let k = self.rng.random_range(-(2 + spec.overlap())..=1);
                let s = spec.nth_start(w, k);
                let ends = spec.ends(s);
                return if self.rng.random_bool(0.5) {
                    s
                } else {
                    ends[self.rng.random_range(0..ends.len())] - 1
                };
            }
        };
        if self.rng.random_bool(0.8) {
            e.div_euclid(SECOND) * SECOND
        } else {
            e
        }
    }

    fn fresh_row(&mut self) -> Vec<Val> {
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
        vec![id, k, r, amount, qty, Val::Ts(self.event_time())]
    }

    /// One ingest statement of 1 to 8 rows: fresh ones, exact copies of rows of the same
    /// statement, and redeliveries of rows sent before (mostly recent, some long refused).
    fn statement(&mut self) {
        let n = if self.rng.random_bool(0.5) {
            1
        } else {
            self.rng.random_range(2..=8)
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
                self.sent[self.rng.random_range(from..self.sent.len())].clone()
            } else {
                self.fresh_row()
            };
            rows.push(row);
        }
        self.sent.extend(rows.iter().cloned());
        send(&mut self.d, &mut self.rng, &rows, (50, 80));
        self.d.action += &format!(" under watermark {}", self.watermark_text());
        self.stats.statements += 1;
        self.stats.rows += n;
        let firings = self.quiet_firings();
        assert_eq!(
            firings,
            self.firings,
            "{}: (batched, slow) firings: an ingest statement writes no version with late_firing",
            self.d.ctx()
        );
    }

    fn watermark_text(&self) -> String {
        self.watermark.map(ts_text).unwrap_or_else(|| "NULL".into())
    }

    /// `firings` of `batched` and `slow`.
    fn quiet_firings(&mut self) -> Vec<Row> {
        self.d.rows(
            "SELECT name, firings::text FROM eventtime.pipelines \
             WHERE name IN ('batched', 'slow') ORDER BY name",
        )
    }

    fn versions_of(&mut self, feed: Feed) -> Versions {
        self.d
            .rows(&format!(
                "SELECT {WINDOW}, max(version)::text FROM {}_history GROUP BY 1, 2, 3, 4",
                feed.name()
            ))
            .into_iter()
            .map(|mut r| {
                let v = r.pop().unwrap().unwrap().parse().unwrap();
                (r, v)
            })
            .collect()
    }

    fn deadline(&self, w: &Win) -> i64 {
        let end: i64 = w[3].as_deref().unwrap().parse().unwrap();
        end.saturating_add(self.shape.lateness)
    }

    /// Whether the watermark has reached the deadline of window `w`.
    fn past_deadline(&self, w: &Win) -> bool {
        self.watermark.is_some_and(|wm| self.deadline(w) <= wm)
    }

    /// Runs one advance or tick, `control`, and checks what it wrote in `batched` and `slow`:
    /// at most one version per window; for `tick`, one in `batched` for each window that
    /// statements brought late rows since the step before, none in `slow`; for an advance, one
    /// in both for each such window whose deadline it reached.
    fn control<T>(&mut self, tick: bool, control: impl FnOnce(&mut Self) -> T) -> T {
        let before = self.versions_of(Feed::PerStatement);
        let touched: BTreeSet<Win> = before
            .iter()
            .filter(|(w, v)| self.versions[&Feed::PerStatement].get(*w) < Some(*v))
            .map(|(w, _)| w.clone())
            .collect();
        let out = control(self);
        for feed in FEEDS {
            let now = self.versions_of(feed);
            if feed != Feed::PerStatement {
                let old = &self.versions[&feed];
                let grew: BTreeSet<&Win> = now
                    .iter()
                    .filter(|(w, v)| old.get(*w) < Some(*v))
                    .map(|(w, _)| w)
                    .collect();
                for (w, v) in &now {
                    let was = old.get(w).copied().unwrap_or(0);
                    assert!(
                        *v <= was + 1,
                        "{}: {}: window {w:?} went from version {was} to {v}: more than one version per batch",
                        self.d.ctx(),
                        feed.name()
                    );
                }
                let due: Vec<&Win> = touched
                    .iter()
                    .filter(|w| match feed {
                        Feed::Batched if tick => true,
                        _ => !tick && self.past_deadline(w),
                    })
                    .filter(|w| !grew.contains(w))
                    .collect();
                assert!(
                    due.is_empty(),
                    "{}: {}: late rows came to these windows since the step before, and it wrote no version of them: {due:?}",
                    self.d.ctx(),
                    feed.name()
                );
                let written: i64 = now
                    .iter()
                    .map(|(w, v)| v - old.get(w).copied().unwrap_or(0))
                    .sum();
                match (feed, tick) {
                    (Feed::Slow, true) => assert_eq!(
                        written,
                        0,
                        "{}: slow: a tick writes no batch a day before it is due",
                        self.d.ctx()
                    ),
                    (Feed::Batched, true) => self.stats.tick_versions += written,
                    (Feed::Batched, false) => self.stats.advance_versions += written,
                    _ => {}
                }
            }
            self.versions.insert(feed, now);
        }
        self.firings = self.quiet_firings();
        out
    }

    fn target(&mut self) -> i64 {
        let unit = self.shape.unit;
        let spec = self.shape.spec;
        let lateness = self.shape.lateness;
        match self.watermark {
            None => {
                (self.shape.start + self.rng.random_range(-unit / 2..2 * unit)).div_euclid(MINUTE)
                    * MINUTE
            }
            Some(c) => match self.rng.random_range(0..100) {
                0..55 => {
                    (c + self.rng.random_range(SECOND..unit * 5 / 4)).div_euclid(SECOND) * SECOND
                }
                // Onto the next window end or deadline, or a microsecond before.
                55..75 => {
                    let b = if self.rng.random_bool(0.5) {
                        spec.next_end(c)
                    } else {
                        spec.next_end(c - lateness) + lateness
                    };
                    if self.rng.random_bool(0.25) {
                        b - 1
                    } else {
                        b
                    }
                }
                75..85 => c + self.rng.random_range(3 * unit..6 * unit),
                // Not ahead: a no-op, but for the batches due.
                _ => c - self.rng.random_range(0..unit).div_euclid(MINUTE) * MINUTE,
            },
        }
    }

    fn advance(&mut self, to: i64) {
        self.d.action = format!(
            "advance_watermark from {} to {}",
            self.watermark_text(),
            ts_text(to)
        );
        let late_before = self.stats.advance_versions;
        let results = self.control(false, |run| {
            let results: Vec<Row> = FEEDS
                .iter()
                .map(|f| {
                    let mut got = run.d.rows(&format!(
                        "SELECT windows_fired::text, windows_purged::text, us(watermark) \
                         FROM eventtime.advance_watermark({}, {}::timestamptz)",
                        quote_literal(f.name()),
                        quote_literal(&ts_text(to))
                    ));
                    assert_eq!(got.len(), 1, "{}: one row", run.d.ctx());
                    got.pop().unwrap()
                })
                .collect();
            run.watermark = Some(run.watermark.map_or(to, |w| w.max(to)));
            results
        });
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
                "{}: {}: (windows fired, windows purged, watermark) as per_statement's",
                self.d.ctx(),
                feed.name()
            );
        }
        // What it wrote in batched beyond the main versions it fired: late versions.
        let fired: i64 = results[1][0].as_deref().unwrap().parse().unwrap();
        assert!(
            self.stats.advance_versions - late_before >= fired,
            "{}: batched wrote fewer versions than the windows it fired",
            self.d.ctx()
        );
        self.stats.advance_versions -= fired;
        self.stats.advances += 1;
    }

    /// `pg_sleep`, then `eventtime.tick()`, then everything compared.
    fn checkpoint(&mut self) {
        self.d.action = format!("checkpoint under watermark {}", self.watermark_text());
        self.d.exec("SELECT pg_sleep(0.01)");
        let ticked = self.control(true, |run| {
            run.d.rows(
                "SELECT pipeline, windows_fired::text, windows_purged::text, us(watermark), skipped \
                 FROM eventtime.tick()",
            )
        });
        let wm = self.watermark.map(ts_key);
        for row in &ticked {
            assert_eq!(
                row,
                &vec![
                    Some("batched".to_string()),
                    Some("0".into()),
                    Some("0".into()),
                    wm.clone(),
                    None
                ],
                "{}: tick() returns a row only for batched, which fired and purged nothing",
                self.d.ctx()
            );
        }
        self.stats.checkpoints += 1;
        self.compare();
    }

    fn sorted(&mut self, sql: &str) -> Vec<Row> {
        let mut rows = self.d.rows(sql);
        rows.sort();
        rows
    }

    /// Checks 2 to 4 of the module documentation.
    fn compare(&mut self) {
        let mut histories: BTreeMap<Feed, BTreeMap<Win, Vec<Row>>> = BTreeMap::new();
        let mut current = BTreeMap::new();
        for feed in FEEDS {
            // keys, start, end, version, kind, aggregates, watermark, sealed, fired_at
            let rows = self.d.rows(&format!(
                "SELECT {WINDOW}, version::text, kind, {AGGS}, us(watermark), sealed::text, fired_at::text \
                 FROM {}_history",
                feed.name()
            ));
            let mut by_window: BTreeMap<Win, Vec<Row>> = BTreeMap::new();
            for r in rows {
                let win = r[..4].to_vec();
                let version: i64 = r[4].as_deref().unwrap().parse().unwrap();
                current.insert((feed, win.clone(), version), format!("{:?}", &r[5..]));
                by_window.entry(win).or_default().push(r);
            }
            for (w, vs) in by_window.iter_mut() {
                vs.sort_by_key(|r| r[4].as_deref().unwrap().parse::<i64>().unwrap());
                let numbers: Vec<String> = vs.iter().map(|r| r[4].clone().unwrap()).collect();
                let gapless: Vec<String> = (1..=vs.len()).map(|v| v.to_string()).collect();
                assert_eq!(
                    numbers,
                    gapless,
                    "{}: {}: window {w:?} has versions 1..n",
                    self.d.ctx(),
                    feed.name()
                );
            }
            histories.insert(feed, by_window);
        }
        self.d.check_history_unchanged(&mut self.history, current);
        let per = &histories[&Feed::PerStatement];
        // The column of `sealed`, the last compared: fired_at differs.
        let sealed = 5 + NAGGS + 2;
        let main_v1 = |h: &BTreeMap<Win, Vec<Row>>| -> Vec<Row> {
            h.values()
                .filter(|vs| vs[0][5].as_deref() == Some("main"))
                .map(|vs| vs[0][..=sealed].to_vec())
                .collect()
        };
        let late_v1 = |h: &BTreeMap<Win, Vec<Row>>| -> Vec<Win> {
            h.iter()
                .filter(|(_, vs)| vs[0][5].as_deref() == Some("late"))
                .map(|(w, _)| w.clone())
                .collect()
        };
        let (per_main, per_late) = (main_v1(per), late_v1(per));
        for feed in [Feed::Batched, Feed::Slow] {
            let h = &histories[&feed];
            same(
                &self.d,
                "version 1 of kind main (all but fired_at)",
                feed,
                main_v1(h),
                per_main.clone(),
            );
            let expected: Vec<Win> = per_late
                .iter()
                .filter(|w| feed == Feed::Batched || self.past_deadline(w))
                .cloned()
                .collect();
            same(
                &self.d,
                "windows whose version 1 is late",
                feed,
                late_v1(h),
                expected,
            );
        }
        // Per window, batched has no more versions than per_statement.
        for (w, vs) in &histories[&Feed::Batched] {
            let n = per.get(w).map_or(0, Vec::len);
            assert!(
                vs.len() <= n,
                "{}: batched: window {w:?} has {} versions, per_statement {n}",
                self.d.ctx(),
                vs.len()
            );
        }
        // slow: main, late, or main then late, the late one under a watermark at its deadline.
        for (w, vs) in &histories[&Feed::Slow] {
            let kinds: Vec<&str> = vs.iter().map(|r| r[5].as_deref().unwrap()).collect();
            let late_ok = vs
                .iter()
                .filter(|r| r[5].as_deref() == Some("late"))
                .all(|r| {
                    let at = r[5 + NAGGS + 1].as_deref().unwrap();
                    at == "infinity" || at.parse::<i64>().unwrap() >= self.deadline(w)
                });
            assert!(
                matches!(kinds[..], ["main"] | ["late"] | ["main", "late"]) && late_ok,
                "{}: slow: window {w:?} (deadline {}) has versions {:?}: a main version, a late one or both, \
                 the late one written under a watermark at its deadline",
                self.d.ctx(),
                ts_text(self.deadline(w)),
                vs
            );
        }
        self.stats.slow_late = histories[&Feed::Slow]
            .values()
            .flatten()
            .filter(|r| r[5].as_deref() == Some("late"))
            .count() as i64;

        // What each publishes.
        let latest = |run: &mut Self, f: Feed| {
            run.sorted(&format!(
                "SELECT {WINDOW}, kind, {AGGS} FROM {}_latest",
                f.name()
            ))
        };
        let account = |run: &mut Self, f: Feed| {
            run.sorted(&format!(
                "SELECT k::text, r::text, us(window_start), us(window_end), on_time::text, late::text, refused::text, \
                        refused_share::text, refused_value::text, refused_value_share::text, lateness_p50::text, \
                        lateness_p90::text, lateness_p99::text, lateness_max::text \
                 FROM (SELECT key -> 'k' AS k, key -> 'r' AS r, * \
                       FROM eventtime.lateness({}, '-infinity', 'infinity', 'amount')) l",
                quote_literal(f.name())
            ))
        };
        let per_latest = latest(self, Feed::PerStatement);
        let per_account = account(self, Feed::PerStatement);
        let batched_latest = latest(self, Feed::Batched);
        same(
            &self.d,
            "_latest (keys, bounds, kind, aggregates)",
            Feed::Batched,
            batched_latest,
            per_latest.clone(),
        );
        let batched_account = account(self, Feed::Batched);
        same(
            &self.d,
            "eventtime.lateness",
            Feed::Batched,
            batched_account,
            per_account.clone(),
        );
        let slow_latest: Vec<Row> = latest(self, Feed::Slow)
            .into_iter()
            .filter(|r| self.past_deadline(r))
            .collect();
        let expected: Vec<Row> = per_latest
            .iter()
            .filter(|r| self.past_deadline(r))
            .cloned()
            .collect();
        same(
            &self.d,
            "_latest of windows past their deadline",
            Feed::Slow,
            slow_latest,
            expected,
        );
        let slow_account: Vec<Row> = account(self, Feed::Slow)
            .into_iter()
            .filter(|r| self.past_deadline(r))
            .collect();
        let expected: Vec<Row> = per_account
            .iter()
            .filter(|r| self.past_deadline(r))
            .cloned()
            .collect();
        same(
            &self.d,
            "eventtime.lateness of windows past their deadline",
            Feed::Slow,
            slow_account,
            expected,
        );
        for (view, cols) in [
            (
                "_current",
                format!("{WINDOW}, kind, {AGGS}, provisional::text"),
            ),
            ("_provisional", format!("{WINDOW}, {AGGS}, us(watermark)")),
        ] {
            let sql = |f: Feed| format!("SELECT {cols} FROM {}{view}", f.name());
            let per = self.sorted(&sql(Feed::PerStatement));
            let got = self.sorted(&sql(Feed::Batched));
            same(&self.d, view, Feed::Batched, got, per);
        }
        let refused = |run: &mut Self, f: Feed| {
            run.sorted(&format!(
                "SELECT {WINDOW}, event_id::text, us(event_time), \"row\"::text, us(deadline), us(watermark), \
                        restated_in::text FROM {}_refused",
                f.name()
            ))
        };
        let counters = |run: &mut Self, f: Feed| {
            run.d.rows(&format!(
                "SELECT refused::text, duplicates::text, open_windows::text FROM eventtime.pipelines WHERE name = {}",
                quote_literal(f.name())
            ))
        };
        let per_refused = refused(self, Feed::PerStatement);
        let per_counters = counters(self, Feed::PerStatement);
        for feed in [Feed::Batched, Feed::Slow] {
            let got = refused(self, feed);
            same(
                &self.d,
                "_refused (all but refused_at)",
                feed,
                got,
                per_refused.clone(),
            );
            let got = counters(self, feed);
            assert_eq!(
                got,
                per_counters,
                "{}: {}: eventtime.pipelines (refused, duplicates, open_windows) as per_statement's",
                self.d.ctx(),
                feed.name()
            );
        }
    }
}

/// `got`, what `feed` publishes, is `expected`, what `per_statement` does, as multisets; names
/// the rows only one of them has.
pub(crate) fn same(d: &Driver, what: &str, feed: Feed, mut got: Vec<Row>, mut expected: Vec<Row>) {
    got.sort();
    expected.sort();
    if got == expected {
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
        "{}: {what} of {} ({} rows) differs from per_statement's ({} rows)\n  only in {}:{}\n  only in per_statement:{}",
        d.ctx(),
        feed.name(),
        got.len(),
        expected.len(),
        feed.name(),
        only(&got, &expected),
        only(&expected, &got)
    );
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
        history: BTreeMap::new(),
        versions: BTreeMap::new(),
        firings: Vec::new(),
        stats: Stats::default(),
    };
    run.setup();
    for step in 1..=shape.steps {
        run.d.step = step;
        match run.rng.random_range(0..100) {
            // Mostly one statement, sometimes several before the next advance or tick, so that
            // batches of several statements are common.
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
            60..90 => {
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
    let firings = run.d.rows(
        "SELECT string_agg(name || ' ' || firings, ', ' ORDER BY name), max(refused)::text, max(duplicates)::text \
         FROM eventtime.pipelines",
    );
    let s = &run.stats;
    println!(
        "{}: {} statements of {} rows, {} advances, {} checkpoints in {:?}; firings {}; refused {}, duplicates {}; \
         batched wrote {} late versions at ticks and {} at advances; slow wrote {} at deadlines",
        shape.label,
        s.statements,
        s.rows,
        s.advances,
        s.checkpoints,
        started.elapsed(),
        firings[0][0].as_deref().unwrap_or("?"),
        firings[0][1].as_deref().unwrap_or("?"),
        firings[0][2].as_deref().unwrap_or("?"),
        s.tick_versions,
        s.advance_versions,
        s.slow_late,
    );
    drop(run);
    db::drop_database(&dbname);
}
