//! One randomized run of one pipeline configuration: random ingest statements and watermark
//! advances, each followed by a comparison of everything the pipeline publishes with the model;
//! between them, restatements (SPEC §8) with random ranges and keys, and checks of the lateness
//! account against `account`.
//!
//! The model decides where every row lands; the rows it accepted and refused are written to two
//! plain tables of the source table's shape (`m_accepted`, `m_refused`), so that PostgreSQL
//! itself computes the expected aggregates, with its own result types and scales. `m_refused`
//! also records which version the model says folded each refused pair (`_restated_in`): the
//! latest version of a window is PostgreSQL's `GROUP BY` over its accepted and folded rows.

use std::collections::BTreeMap;

use postgres::Client;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::account::{self, ValueColumn};
use crate::config::{Config, Role};
use crate::db::{self, Row};
use crate::model::{Counts, Event, KeyFilter, Keys, Kind, Landing, Model, WindowKey};
use crate::runner::{self, key_args, on_or_before, random_keys, random_value, Driver, Method};
use crate::values::{
    quote_ident, quote_literal, ts_key, ts_or_null, ts_text, Dec, Val, INFINITY, MINUTE, SECOND,
};

/// Text payloads that each ingest path must carry unchanged: COPY's escapes and its NULL
/// marker, JSON escapes, quotes, non-ASCII, and the empty string (which is not NULL).
const NOTES: &[&str] = &[
    "",
    "ok",
    "late again",
    "tab\there",
    "two\nlines",
    "cr\rhere",
    "back\\slash",
    "\\N",
    "quote ' and \" both",
    "ünïcødé €",
    "  padded  ",
];

/// The RNG stream of a config's explain probes is this plus its own stream.
const PROBE_STREAMS: u64 = 1000;

/// The RNG stream of a config's restatements and lateness checks is this plus its own stream:
/// they come between the steps of the main stream and leave its draws as they were.
const CORRECTION_STREAMS: u64 = 2000;

/// Percentages of steps followed by a restatement, and by a check of the lateness account.
const RESTATE_PCT: u32 = 12;
const ACCOUNT_PCT: u32 = 12;

/// An interval as whole microseconds, as `us()` writes timestamps.
fn iv(expr: &str) -> String {
    format!("(extract(epoch FROM {expr}) * 1000000)::bigint::text")
}

pub fn run(cfg: &Config, seed: u64) {
    println!("seed {seed}");
    let dbname = format!("eventtime_property_{}", cfg.label);
    let mut s = Scenario::new(cfg, seed, db::fresh_database(&dbname));
    s.setup();
    for step in 1..=cfg.steps {
        s.driver.step = step;
        if s.rng.random_range(0..100) < 65 {
            s.ingest_step();
        } else {
            s.advance_step(None);
            s.check_explain();
        }
        s.check();
        if s.corrections_rng.random_range(0..100) < RESTATE_PCT {
            s.restate_step(None);
            s.check();
        }
        if s.corrections_rng.random_range(0..100) < ACCOUNT_PCT {
            s.check_account(None);
        }
    }
    s.driver.step += 1;
    s.advance_step(Some(INFINITY));
    s.check();
    s.check_no_state();
    s.final_corrections();
    println!("{}: {}", cfg.label, s.stats.summary(&s.model));
    drop(s);
    db::drop_database(&dbname);
}

struct Scenario<'a> {
    cfg: &'a Config,
    driver: Driver,
    rng: ChaCha8Rng,
    /// The event times and keys `eventtime.explain` is asked about: a stream of its own, so
    /// that the probes do not change the run.
    probe_rng: ChaCha8Rng,
    /// Restatements and lateness checks: a stream of its own, so that they do not change the
    /// main stream's draws (what is ingested and advanced is as it was without them).
    corrections_rng: ChaCha8Rng,
    model: Model,
    key_cols: Vec<usize>,
    event_id_col: Option<usize>,
    event_time_col: usize,
    /// The columns of `cfg.values`, in its order: the values the model keeps per pair.
    value_cols: Vec<usize>,
    /// Every row sent that was not a duplicate, for redeliveries.
    sent: Vec<Vec<Val>>,
    /// Indexes into `sent` of the rows that were refused, to redeliver them on purpose.
    refused_sent: Vec<usize>,
    next_id: i64,
    rows_sent: i64,
    /// (row, window) pairs sent: what the counts of `eventtime.ingest` add up to.
    pairs_sent: i64,
    /// The greatest event time sent so far, so that a bulk load can target windows after it.
    max_event_time: i64,
    /// The text of every history row the first time it was seen, by (keys, window start,
    /// window end, version): history is append-only, so it must never change.
    snapshots: BTreeMap<(Keys, String, String, String), String>,
    stats: Stats,
}

/// What a run exercised, printed at its end so that a weak seed or generator shows.
#[derive(Default)]
struct Stats {
    counts: Counts,
    by_method: [usize; 3],
    advances: usize,
    advances_not_forward: usize,
    restate_calls: usize,
    /// Restate calls that wrote at least one version.
    restate_writing: usize,
    rows_folded: usize,
    account_checks: usize,
}

impl Stats {
    fn summary(&self, model: &Model) -> String {
        let versions = |kind| {
            model
                .windows
                .values()
                .flat_map(|w| &w.firings)
                .filter(|f| f.kind == kind)
                .count()
        };
        format!(
            "{} ingest statements (INSERT {}, COPY {}, eventtime.ingest {}): accepted {}, late {}, refused {}, duplicates {}; \
             {} advances ({} not forward); {} windows, {} versions of which {} late and {} restatements \
             ({} of them a version 1); {} restate calls ({} writing) folding {} refused pairs; \
             {} checks of the lateness account",
            self.by_method.iter().sum::<usize>(),
            self.by_method[0],
            self.by_method[1],
            self.by_method[2],
            self.counts.accepted,
            self.counts.late,
            self.counts.refused,
            self.counts.duplicates,
            self.advances,
            self.advances_not_forward,
            model.windows.len(),
            model.firings(),
            versions(Kind::Late),
            versions(Kind::Restatement),
            model
                .windows
                .values()
                .filter(|w| w.firings.first().map(|f| f.kind) == Some(Kind::Restatement))
                .count(),
            self.restate_calls,
            self.restate_writing,
            self.rows_folded,
            self.account_checks
        )
    }
}

impl<'a> Scenario<'a> {
    fn new(cfg: &'a Config, seed: u64, db: Client) -> Scenario<'a> {
        Scenario {
            cfg,
            driver: Driver::new(db, seed, cfg.label),
            rng: runner::rng(seed, cfg.stream),
            probe_rng: runner::rng(seed, PROBE_STREAMS + cfg.stream),
            corrections_rng: runner::rng(seed, CORRECTION_STREAMS + cfg.stream),
            model: Model::new(cfg.windows.spec, cfg.lateness, cfg.event_id().is_some()),
            key_cols: cfg.key_indexes(),
            event_id_col: cfg.event_id(),
            event_time_col: cfg.event_time(),
            value_cols: cfg
                .windows
                .values
                .iter()
                .map(|(c, _)| cfg.column_index(c))
                .collect(),
            sent: Vec::new(),
            refused_sent: Vec::new(),
            next_id: 0,
            rows_sent: 0,
            pairs_sent: 0,
            max_event_time: cfg.start,
            snapshots: BTreeMap::new(),
            stats: Stats::default(),
        }
    }

    fn setup(&mut self) {
        let cfg = self.cfg;
        let w = &cfg.windows;
        let mut sql = cfg.create_source_sql();
        sql += &format!(
            "CREATE TABLE m_accepted (LIKE {src}, _ws timestamptz NOT NULL, _we timestamptz NOT NULL);\n\
             CREATE TABLE m_refused (LIKE {src}, _ws timestamptz NOT NULL, _we timestamptz NOT NULL, \
                                     _deadline timestamptz NOT NULL, _wm timestamptz NOT NULL, \
                                     _n bigint PRIMARY KEY, _restated_in integer);\n",
            src = cfg.source()
        );
        let mut options = String::new();
        if let Some(slide) = w.slide_sql {
            options += &format!(", window_slide => interval {}", quote_literal(slide));
        }
        if let Some(step) = w.step_sql {
            options += &format!(", cumulate_step => interval {}", quote_literal(step));
        }
        if let Some(o) = w.origin {
            options += &format!(", window_origin => {}", quote_literal(o));
        }
        if w.unbounded_ahead {
            options += ", max_ahead => NULL";
        }
        sql += &cfg.create_pipeline_sql(
            &format!("window_size => interval {}", quote_literal(w.size_sql)),
            &options,
        );
        self.driver.exec(&sql);
        self.check_definition();
    }

    /// `eventtime.pipelines` describes the windows as created (SPEC §7).
    fn check_definition(&mut self) {
        let cfg = self.cfg;
        let w = &cfg.windows;
        let interval = |v: Option<&str>| {
            v.map(|s| format!("interval {}", quote_literal(s)))
                .unwrap_or_else(|| "NULL".into())
        };
        let (slide, step) = (interval(w.slide_sql), interval(w.step_sql));
        let got = self.driver.rows(&format!(
            "SELECT window_kind, (window_size = interval {})::text, (window_slide IS NOT DISTINCT FROM {slide})::text, \
                    (cumulate_step IS NOT DISTINCT FROM {step})::text, time_zone \
             FROM eventtime.pipelines WHERE name = {}",
            quote_literal(w.size_sql),
            quote_literal(cfg.pipeline)
        ));
        let expected = vec![vec![
            Some(w.spec.kind().to_string()),
            Some("true".to_string()),
            Some("true".to_string()),
            Some("true".to_string()),
            w.time_zone.map(str::to_string),
        ]];
        assert_eq!(
            got,
            expected,
            "{}: eventtime.pipelines (window_kind, window_size as given, window_slide as given, \
             cumulate_step as given, time_zone)",
            self.driver.ctx()
        );
    }

    /// Event time advances with the watermark; before the first one, it starts at `cfg.start`.
    fn now(&self) -> i64 {
        self.cfg.now(self.model.watermark)
    }

    /// Ahead of the watermark, behind it within the grace, far too late, or on the first or
    /// last microsecond of a window near it.
    fn event_time(&mut self, now: i64) -> i64 {
        let spec = self.model.spec();
        let (s, l) = (spec.span(), self.model.lateness());
        let e = match self.rng.random_range(0..100) {
            0..35 => now + self.rng.random_range(0..2 * s),
            35..60 => now - self.rng.random_range(0..=s + l),
            60..75 => now - (s + l) - self.rng.random_range(0..3 * s),
            _ => {
                // A window that holds `now`, or one of the two before or after those.
                let k = self.rng.random_range(-(2 + spec.overlap())..=2);
                let start = spec.nth_start(now, k);
                return if self.rng.random_bool(0.5) {
                    start
                } else {
                    // The last microsecond of one of the windows starting there.
                    let ends = spec.ends(start);
                    let i = if ends.len() == 1 {
                        0
                    } else {
                        self.rng.random_range(0..ends.len())
                    };
                    ends[i] - 1
                };
            }
        };
        if self.rng.random_bool(0.8) {
            e.div_euclid(SECOND) * SECOND
        } else {
            e
        }
    }

    fn fresh_row(&mut self, now: i64) -> Vec<Val> {
        let cfg = self.cfg;
        let mut row = Vec::with_capacity(cfg.columns.len());
        for c in &cfg.columns {
            let value = random_value(&mut self.rng, c, &mut self.next_id, NOTES);
            row.push(value.unwrap_or_else(|| Val::Ts(self.event_time(now))));
        }
        row
    }

    fn model_event(&self, row: &[Val]) -> Event {
        Event {
            keys: self.key_cols.iter().map(|&i| row[i].text()).collect(),
            event_id: self.event_id_col.and_then(|i| row[i].text()),
            event_time: match row[self.event_time_col] {
                Val::Ts(t) => t,
                ref v => panic!("event time {v:?}"),
            },
            values: self.value_cols.iter().map(|&i| Dec::of(&row[i])).collect(),
        }
    }

    fn ingest_step(&mut self) {
        let batch = if self.rng.random_range(0..100) < 4 {
            self.bulk_batch()
        } else {
            self.small_batch()
        };
        let n = batch.len();
        let method = match self.rng.random_range(0..3) {
            0 => Method::Insert,
            1 => Method::Copy,
            _ => Method::Ingest,
        };
        self.driver.action = format!(
            "{method:?} of {n} rows under watermark {}",
            ts_or_null(self.model.watermark)
        );
        let events: Vec<Event> = batch.iter().map(|r| self.model_event(r)).collect();
        let (landings, expected) = self.model.ingest(&events);
        let pairs: usize = landings.iter().map(Vec::len).sum();
        assert_eq!(
            expected.total(),
            pairs as i64,
            "{}: the model accounts for every (row, window) pair once",
            self.driver.ctx()
        );
        self.stats.by_method[method as usize] += 1;
        self.stats.counts += expected;
        if let Some(got) = self.driver.send(method, self.cfg, &batch, &mut self.rng) {
            assert_eq!(
                got,
                expected,
                "{}: counts returned by eventtime.ingest",
                self.driver.ctx()
            );
        }
        self.rows_sent += n as i64;
        self.pairs_sent += pairs as i64;
        let times = batch.iter().filter_map(|r| match r[self.event_time_col] {
            Val::Ts(t) => Some(t),
            _ => None,
        });
        self.max_event_time = times.fold(self.max_event_time, i64::max);
        self.record(&batch, &landings);
    }

    /// 1 to 200 rows near the watermark: fresh rows, duplicates within the statement and
    /// redeliveries of earlier rows (refused ones on purpose).
    fn small_batch(&mut self) -> Vec<Vec<Val>> {
        let n = match self.rng.random_range(0..100) {
            0..50 => self.rng.random_range(1..=10),
            50..85 => self.rng.random_range(1..=60),
            _ => self.rng.random_range(1..=200),
        };
        let now = self.now();
        let mut batch: Vec<Vec<Val>> = Vec::with_capacity(n);
        for _ in 0..n {
            let r = self.rng.random_range(0..100);
            let row = if r < 6 && !batch.is_empty() {
                batch[self.rng.random_range(0..batch.len())].clone()
            } else if r < 20 && !self.sent.is_empty() {
                let i = if !self.refused_sent.is_empty() && self.rng.random_bool(0.35) {
                    self.refused_sent[self.rng.random_range(0..self.refused_sent.len())]
                } else {
                    self.rng.random_range(0..self.sent.len())
                };
                self.sent[i].clone()
            } else {
                self.fresh_row(now)
            };
            batch.push(row);
        }
        batch
    }

    /// A bulk load of new periods: 1,000 to 1,300 fresh rows in the windows after the
    /// greatest event time sent so far, which the trigger function first tries to write without
    /// dedup. One time in four a duplicate inside the statement (that try fails and the statement
    /// that dedups runs), one in four a redelivery of an earlier row (its window is not new, so
    /// the statement dedups from the start).
    fn bulk_batch(&mut self) -> Vec<Vec<Val>> {
        let spec = self.model.spec();
        let s = spec.span();
        // Far enough that no window of the new rows holds an earlier row: `overlap` slides after
        // the last window start before them.
        let from = spec.nth_start(self.max_event_time.max(self.now()), spec.overlap());
        let n = self.rng.random_range(1000..=1300);
        let mut batch = Vec::with_capacity(n + 1);
        for _ in 0..n {
            let mut row = self.fresh_row(from);
            row[self.event_time_col] = Val::Ts(from + self.rng.random_range(0..2 * s));
            batch.push(row);
        }
        match self.rng.random_range(0..4) {
            0 => {
                let twin = batch[self.rng.random_range(0..n)].clone();
                batch.insert(self.rng.random_range(0..=n), twin);
            }
            1 if !self.sent.is_empty() => {
                let old = self.sent[self.rng.random_range(0..self.sent.len())].clone();
                batch.insert(self.rng.random_range(0..=n), old);
            }
            _ => {}
        }
        batch
    }

    /// Writes what the model accepted and refused to its tables, and remembers the rows sent.
    /// One model row per (row, window) pair: a row in three windows is three rows of
    /// `m_accepted` or `m_refused`, each with its window.
    fn record(&mut self, batch: &[Vec<Val>], landings: &[Vec<Landing>]) {
        let (mut accepted, mut refused) = (Vec::new(), Vec::new());
        for (row, pairs) in batch.iter().zip(landings) {
            let vals = row.iter().map(Val::sql).collect::<Vec<_>>().join(", ");
            let mut was_refused = false;
            for landing in pairs {
                match *landing {
                    Landing::Duplicate => {}
                    Landing::Open {
                        window_start,
                        window_end,
                    }
                    | Landing::Late {
                        window_start,
                        window_end,
                    } => {
                        accepted.push(format!(
                            "({vals}, {}, {})",
                            Val::Ts(window_start).sql(),
                            Val::Ts(window_end).sql()
                        ));
                    }
                    Landing::Refused {
                        window_start,
                        window_end,
                        deadline,
                        watermark,
                        no,
                    } => {
                        let meta = [window_start, window_end, deadline, watermark]
                            .map(|t| Val::Ts(t).sql())
                            .join(", ");
                        refused.push(format!("({vals}, {meta}, {no})"));
                        was_refused = true;
                    }
                }
            }
            if pairs.iter().all(|l| *l == Landing::Duplicate) {
                continue;
            }
            if was_refused {
                self.refused_sent.push(self.sent.len());
            }
            self.sent.push(row.clone());
        }
        if !accepted.is_empty() {
            self.driver.exec(&format!(
                "INSERT INTO m_accepted VALUES {}",
                accepted.join(",\n")
            ));
        }
        if !refused.is_empty() {
            self.driver.exec(&format!(
                "INSERT INTO m_refused VALUES {}",
                refused.join(",\n")
            ));
        }
    }

    /// Mostly forward by up to one and a half times the config's `advance`; often exactly onto
    /// a window end or a deadline (or a microsecond before), where the landing changes;
    /// sometimes not forward.
    fn pick_watermark(&mut self) -> i64 {
        let (s, l) = (self.cfg.advance, self.model.lateness());
        let spec = self.model.spec();
        let Some(cur) = self.model.watermark else {
            return (self.cfg.start + self.rng.random_range(-s..2 * s)).div_euclid(MINUTE) * MINUTE;
        };
        match self.rng.random_range(0..100) {
            0..10 => cur - self.rng.random_range(0..=s),
            10..45 => {
                let next_end = spec.next_end(cur);
                let mut boundaries = vec![next_end, next_end + l];
                for (&(_, _, end), w) in &self.model.windows {
                    if w.live {
                        boundaries.extend([end, end + l].into_iter().filter(|&b| b > cur));
                    }
                }
                on_or_before(&mut self.rng, &boundaries)
            }
            _ => (cur + self.rng.random_range(1..=s * 3 / 2)).div_euclid(SECOND) * SECOND,
        }
    }

    fn advance_step(&mut self, to: Option<i64>) {
        let to = to.unwrap_or_else(|| self.pick_watermark());
        let from = self.model.watermark;
        self.stats.advances += 1;
        if matches!(self.model.watermark, Some(cur) if to <= cur) {
            self.stats.advances_not_forward += 1;
        }
        let (fired, purged) = self.model.advance(to);
        let expected = vec![
            Some(fired.to_string()),
            Some(purged.to_string()),
            self.model.watermark.map(ts_key),
        ];
        self.driver.check_advance(
            self.cfg,
            (from, to),
            expected,
            "(windows fired, windows purged, watermark)",
        );
    }

    /// `key ->> 'k', ` for each key column `k`, then the number of members of the key object:
    /// the JSON key of `restate` and `lateness` compared column by column, whatever its spacing.
    fn keys_of_json(&self) -> String {
        let mut out: String = self
            .cfg
            .keys
            .iter()
            .map(|k| format!("key ->> {}, ", quote_literal(k)))
            .collect();
        out += "(SELECT count(*) FROM jsonb_object_keys(key))::text, ";
        out
    }

    /// A JSON object of key column values, as `eventtime.restate` takes it; NULL (every key)
    /// or `{}` (no column given: every key as well) when the filter takes any value.
    fn key_json(&mut self, filter: &KeyFilter) -> String {
        if filter.iter().all(Option::is_none) && self.corrections_rng.random_bool(0.5) {
            return "NULL".into();
        }
        let members: Vec<String> = self
            .cfg
            .keys
            .iter()
            .zip(filter)
            .filter_map(|(name, f)| {
                let value = match f.as_ref()? {
                    None => "null".to_string(),
                    Some(v) => Val::Text(v.clone()).json(),
                };
                Some(format!("{}: {value}", Val::Text(name.to_string()).json()))
            })
            .collect();
        format!(
            "{}::jsonb",
            quote_literal(&format!("{{{}}}", members.join(", ")))
        )
    }

    /// A restatement (SPEC §8) of a random range and key: mostly aimed at a window with refused
    /// rows not folded yet (the window alone, or a range around it, of its key or of a part of
    /// it), otherwise windows near the watermark, of random keys, or a `window_from` that is no
    /// window's start. `target` fixes the call instead: (from, to, filter).
    fn restate_step(&mut self, target: Option<(i64, Option<i64>, KeyFilter)>) {
        let spec = self.model.spec();
        let s = spec.span();
        let now = self.now();
        let (from, to, filter) = target.unwrap_or_else(|| {
            let r = &mut self.corrections_rng;
            let unfolded: Vec<usize> = (0..self.model.refused_pairs.len())
                .filter(|&i| self.model.refused_pairs[i].restated_in.is_none())
                .collect();
            if !unfolded.is_empty() && r.random_bool(0.7) {
                let pair = &self.model.refused_pairs[unfolded[r.random_range(0..unfolded.len())]];
                let (keys, start, _) = pair.window.clone();
                let filter = keys
                    .into_iter()
                    .map(|k| r.random_bool(0.6).then_some(k))
                    .collect();
                if r.random_bool(0.5) {
                    (start, None, filter)
                } else {
                    let from = start - r.random_range(0..=3 * s);
                    (from, Some(start + r.random_range(1..=2 * s)), filter)
                }
            } else {
                let mut from = spec.nth_start(now, r.random_range(-4..=1));
                if r.random_bool(0.2) {
                    from += r.random_range(1..s);
                }
                let to = r.random_bool(0.5).then(|| from + r.random_range(1..=4 * s));
                let mut filter = KeyFilter::new();
                for &k in &self.key_cols {
                    filter.push(match (self.cfg.columns[k].role, r.random_range(0..100)) {
                        (_, 0..50) => None,
                        (_, 50..65) => Some(None),
                        (Role::Key(values), _) => {
                            Some(Some(values[r.random_range(0..values.len())].to_string()))
                        }
                        _ => unreachable!("key columns draw from their values"),
                    });
                }
                (from, to, filter)
            }
        });
        let key = self.key_json(&filter);
        let to_sql = to
            .map(|t| format!("{}::timestamptz", quote_literal(&ts_text(t))))
            .unwrap_or_else(|| "NULL".into());
        let call = format!(
            "eventtime.restate({}, {}::timestamptz, {to_sql}, {key})",
            quote_literal(self.cfg.pipeline),
            quote_literal(&ts_text(from))
        );
        self.driver.action = format!(
            "{call} under watermark {}",
            ts_or_null(self.model.watermark)
        );
        self.stats.restate_calls += 1;
        let before: Vec<Option<usize>> = self
            .model
            .refused_pairs
            .iter()
            .map(|p| p.restated_in)
            .collect();
        let written = self.model.restate(from, to, &filter);
        self.stats.restate_writing += usize::from(!written.is_empty());
        let sql = format!(
            "SELECT {}us(window_start), us(window_end), version::text, rows_folded::text FROM {call}",
            self.keys_of_json()
        );
        let got = self.driver.rows(&sql);
        let expected = written
            .iter()
            .map(|w| {
                let mut row = w.keys.clone();
                row.extend([
                    Some(self.cfg.keys.len().to_string()),
                    Some(ts_key(w.window_start)),
                    Some(ts_key(w.window_end)),
                    Some(w.version.to_string()),
                    Some(w.rows_folded.to_string()),
                ]);
                row
            })
            .collect();
        self.driver.same(
            "eventtime.restate (keys, key members, window_start, window_end, version, rows_folded)",
            got,
            expected,
        );
        let folded: Vec<String> = self
            .model
            .refused_pairs
            .iter()
            .enumerate()
            .filter_map(|(no, p)| match (before[no], p.restated_in) {
                (None, Some(v)) => Some(format!("({no}, {v})")),
                _ => None,
            })
            .collect();
        self.stats.rows_folded += folded.len();
        if !folded.is_empty() {
            self.driver.exec(&format!(
                "UPDATE m_refused m SET _restated_in = f.v FROM (VALUES {}) f(n, v) WHERE m._n = f.n",
                folded.join(", ")
            ));
        }
        // The same call again has nothing new to fold: it writes nothing.
        let action = std::mem::take(&mut self.driver.action);
        self.driver.action = format!("{action} (again)");
        let again = self.driver.rows(&sql);
        self.driver
            .same("a second eventtime.restate", again, Vec::new());
        self.driver.action = action;
    }

    /// `eventtime.lateness` over a random range (around the watermark, everything, or bounds
    /// that are no window's start) with a random value column or none, and
    /// `eventtime.suggest_lateness` at a random coverage or its default, against `account`.
    /// `range` fixes the range instead.
    fn check_account(&mut self, range: Option<(i64, i64)>) {
        self.stats.account_checks += 1;
        let spec = self.model.spec();
        let s = spec.span();
        let now = self.now();
        let r = &mut self.corrections_rng;
        let (from, to) = range.unwrap_or_else(|| match r.random_range(0..100) {
            0..40 => (
                spec.nth_start(now, -r.random_range(2..=6)),
                spec.nth_start(now, r.random_range(1..=2)),
            ),
            40..70 => (self.cfg.start - 10 * s, self.max_event_time + 10 * s),
            _ => {
                let from = now - r.random_range(0..5 * s);
                (from, from + r.random_range(1..5 * s))
            }
        });
        let value = match r.random_range(0..=self.cfg.windows.values.len()) {
            0 => None,
            i => Some(i - 1),
        };
        let value_sql = value
            .map(|i| quote_literal(self.cfg.windows.values[i].0))
            .unwrap_or_else(|| "NULL".into());
        let call = format!(
            "eventtime.lateness({}, {}::timestamptz, {}::timestamptz, {value_sql})",
            quote_literal(self.cfg.pipeline),
            quote_literal(&ts_text(from)),
            quote_literal(&ts_text(to))
        );
        self.driver.action = format!("{call} after step {}", self.driver.step);
        let got = self.driver.rows(&format!(
            "SELECT {}us(window_start), us(window_end), on_time::text, late::text, refused::text, \
                    refused_value::text, {}, {}, {}, {}, refused_share::text, refused_value_share::text \
             FROM {call}",
            self.keys_of_json(),
            iv("lateness_p50"),
            iv("lateness_p90"),
            iv("lateness_p99"),
            iv("lateness_max")
        ));
        let column = value.map(|index| ValueColumn {
            index,
            has_total: self.cfg.windows.values[index].1,
        });
        let lines = account::lateness(&self.model, from, to, column);
        // Shares are doubles: compared apart, within a few units in the last place, as the
        // contract does not say in which arithmetic they are divided.
        let split = |mut row: Row| {
            let value_share = row.pop().unwrap();
            let share = row.pop().unwrap();
            (row, [share, value_share])
        };
        let mut actual: Vec<(Row, [Option<String>; 2])> = got
            .into_iter()
            .map(|mut row| {
                let i = self.cfg.keys.len() + 6;
                row[i] = row[i].as_deref().map(|v| Dec::parse(v).normalized());
                split(row)
            })
            .collect();
        let mut expected: Vec<(Row, [Option<f64>; 2])> = lines
            .iter()
            .map(|l| {
                let mut row = l.keys.clone();
                row.extend([
                    Some(self.cfg.keys.len().to_string()),
                    Some(ts_key(l.window_start)),
                    Some(ts_key(l.window_end)),
                    Some(l.on_time.to_string()),
                    Some(l.late.to_string()),
                    Some(l.refused.to_string()),
                    l.refused_value.map(Dec::normalized),
                ]);
                row.extend(l.lateness.iter().map(|x| x.map(|x| x.to_string())));
                (row, [Some(l.refused_share), l.refused_value_share])
            })
            .collect();
        actual.sort_by(|a, b| a.0.cmp(&b.0));
        expected.sort_by(|a, b| a.0.cmp(&b.0));
        self.driver.same(
            "eventtime.lateness (keys, key members, window_start, window_end, on_time, late, refused, \
             refused_value, lateness p50, p90, p99, max)",
            actual.iter().map(|a| a.0.clone()).collect(),
            expected.iter().map(|e| e.0.clone()).collect(),
        );
        for (a, e) in actual.iter().zip(&expected) {
            for (i, what) in ["refused_share", "refused_value_share"].iter().enumerate() {
                let got = a.1[i].as_deref().map(|v| {
                    v.parse::<f64>()
                        .unwrap_or_else(|_| panic!("{what} {v:?} is not a double"))
                });
                let close = match (got, e.1[i]) {
                    (Some(g), Some(x)) => (g - x).abs() <= 1e-12 * x.abs().max(1.0),
                    (g, x) => g == x,
                };
                assert!(
                    close,
                    "{}: eventtime.lateness {what} of {:?}: {got:?}, expected {:?}",
                    self.driver.ctx(),
                    a.0,
                    e.1[i]
                );
            }
        }
        self.check_suggest();
    }

    fn check_suggest(&mut self) {
        let (coverage, arg) = match self.corrections_rng.random_range(0..5) {
            0 => (0.999, String::new()),
            1 => (1.0, ", 1.0".to_string()),
            _ => {
                let c = self.corrections_rng.random_range(1..=1000) as f64 / 1000.0;
                (c, format!(", {c:?}::float8"))
            }
        };
        let call = format!(
            "eventtime.suggest_lateness({}{arg})",
            quote_literal(self.cfg.pipeline)
        );
        self.driver.action = format!("{call} after step {}", self.driver.step);
        let got = self.driver.rows(&format!("SELECT {}", iv(&call)));
        let expected = vec![vec![
            account::suggest_lateness(&self.model, coverage).map(|l| l.to_string())
        ]];
        assert_eq!(
            got,
            expected,
            "{}: suggest_lateness as microseconds: the coverage quantile of the arrival lateness \
             of late and refused pairs, plus one",
            self.driver.ctx()
        );
    }

    /// At the end of the input: a few random restatements, then one of every window and key,
    /// after which nothing is left to fold; and the account of the whole run, with each value
    /// column.
    fn final_corrections(&mut self) {
        for _ in 0..3 {
            self.driver.step += 1;
            self.restate_step(None);
            self.check();
        }
        let everything = (
            self.cfg.start - 10 * self.model.spec().span(),
            self.max_event_time + 10 * self.model.spec().span(),
        );
        self.driver.step += 1;
        let any_key = vec![None; self.cfg.keys.len()];
        self.restate_step(Some((everything.0, Some(everything.1), any_key)));
        self.check();
        assert!(
            self.model
                .refused_pairs
                .iter()
                .all(|p| p.restated_in.is_some()),
            "{}: a restatement of everything folds every refused pair",
            self.driver.ctx()
        );
        for _ in 0..3 {
            self.check_account(Some(everything));
        }
    }

    fn check(&mut self) {
        self.check_counters();
        self.check_latest();
        self.check_provisional();
        self.check_within();
        self.check_refused();
        self.check_history();
        self.check_sealed();
    }

    /// Every published value of a percentile of `within` (a t-digest's), in `_latest` and
    /// `_provisional`, is at its fraction's rank among its window's values within the stated
    /// error and one value's share: the share of values below it is at most the fraction, the
    /// share at or below it at least, give or take that; the values are those of the rows the model
    /// accepted for the window and of the refused rows restatements folded in.
    fn check_within(&mut self) {
        let (kp, cols) = (self.cfg.keys_plain(), self.cfg.column_list());
        let on: String = self
            .cfg
            .keys
            .iter()
            .map(|k| format!("v.{k} IS NOT DISTINCT FROM r.{k} AND ", k = quote_ident(k)))
            .collect();
        let vk: String = self
            .cfg
            .keys
            .iter()
            .map(|k| format!("v.{}, ", quote_ident(k)))
            .collect();
        for (alias, column, fraction, error) in self.cfg.within {
            let (a, c) = (quote_ident(alias), quote_ident(column));
            let row = self.driver.rows(&format!(
                "SELECT (SELECT count(*) FROM {latest}) + (SELECT count(*) FROM {prov}), count(*), \
                        count(*) FILTER (WHERE NOT CASE WHEN n = 0 THEN p IS NULL \
                                      ELSE coalesce({fraction} BETWEEN below - {error} - 1.0 / n \
                                                    AND at_or_below + {error} + 1.0 / n, false) END) \
                 FROM (SELECT v.{a} AS p, count(r.{c}) AS n, \
                              avg(CASE WHEN r.{c} IS NOT NULL THEN (r.{c} < v.{a})::int END) AS below, \
                              avg(CASE WHEN r.{c} IS NOT NULL THEN (r.{c} <= v.{a})::int END) AS at_or_below \
                       FROM (SELECT {kp}window_start, window_end, {a} FROM {latest} \
                             UNION ALL SELECT {kp}window_start, window_end, {a} FROM {prov}) v \
                       JOIN (SELECT {cols}, _ws, _we FROM m_accepted \
                             UNION ALL SELECT {cols}, _ws, _we FROM m_refused WHERE _restated_in IS NOT NULL) r \
                         ON {on}v.window_start = r._ws AND v.window_end = r._we \
                       GROUP BY {vk}v.window_start, v.window_end, v.{a}) w",
                latest = self.cfg.view("_latest"),
                prov = self.cfg.view("_provisional"),
            ));
            let n = |i: usize| row[0][i].clone().unwrap_or_default();
            assert_eq!(
                (n(1), n(2)),
                (n(0), "0".to_string()),
                "{}: {alias}: (windows compared with their rows, of them with a share of values at or \
                 below it farther than {error} from {fraction}) should be (every published window, none)",
                self.driver.ctx()
            );
        }
    }

    /// Every row is accounted for once, and the pipeline's counters agree with the model.
    fn check_counters(&mut self) {
        let accepted = self.driver.rows("SELECT count(*)::text FROM m_accepted")[0][0]
            .clone()
            .unwrap();
        let accepted: i64 = accepted.parse().unwrap();
        assert_eq!(
            accepted + self.model.refused + self.model.duplicates,
            self.pairs_sent,
            "{}: accepted + late + refused + duplicates = (row, window) pairs sent",
            self.driver.ctx()
        );
        let expected = vec![
            Some(self.rows_sent.to_string()),
            Some(self.model.refused.to_string()),
            Some(self.model.duplicates.to_string()),
            Some(self.model.firings().to_string()),
            self.model.watermark.map(ts_key),
        ];
        self.driver.check_counters(
            self.cfg,
            expected,
            "(source rows, pipelines.refused, .duplicates, .firings, .watermark)",
        );
    }

    /// The latest version of every fired window is the GROUP BY of the rows the model accepted
    /// for it and the refused rows restatements folded in (SPEC §8: each of its aggregates is
    /// PostgreSQL's own over those rows, `avg`, `min` and `max` included), and its version is
    /// the number of firings.
    fn check_latest(&mut self) {
        let (kt, kp, at) = (
            self.cfg.keys_text(),
            self.cfg.keys_plain(),
            self.cfg.aliases_text(),
        );
        let nk = self.cfg.keys.len();
        let actual = self.driver.rows(&format!(
            "SELECT {kt}us(window_start), us(window_end), version::text, {at} FROM {}",
            self.cfg.view("_latest")
        ));
        let cols = self.cfg.column_list();
        let grouped = self.driver.rows(&format!(
            "SELECT {kt}us(_ws), us(_we), {at} FROM (SELECT {kp}_ws, _we, {} FROM \
               (SELECT {cols}, _ws, _we FROM m_accepted \
                UNION ALL SELECT {cols}, _ws, _we FROM m_refused WHERE _restated_in IS NOT NULL) r \
             GROUP BY {kp}_ws, _we) q",
            self.cfg.aggregates
        ));
        let mut expected = Vec::new();
        for mut row in grouped {
            let window = self
                .model
                .windows
                .get(&window_of(&row, nk))
                .expect("accepted and folded rows have a model window");
            if !window.firings.is_empty() {
                row.insert(nk + 2, Some(window.firings.len().to_string()));
                expected.push(row);
            }
        }
        self.driver.same(
            "_latest (keys, window_start, window_end, version, aggregates)",
            actual,
            expected,
        );
    }

    /// SPEC §3 provisional reads: `_provisional` holds every window that accepted rows and has
    /// not fired, with PostgreSQL's own aggregates over its accepted rows (duplicates and refused
    /// rows never counted), and nothing else; `_current` is `_latest` beside it. After the
    /// watermark reaches infinity it is empty.
    fn check_provisional(&mut self) {
        let (kt, kp, at) = (
            self.cfg.keys_text(),
            self.cfg.keys_plain(),
            self.cfg.aliases_text(),
        );
        let nk = self.cfg.keys.len();
        let actual = self.driver.rows(&format!(
            "SELECT {kt}us(window_start), us(window_end), {at} FROM {}",
            self.cfg.view("_provisional")
        ));
        let cols = self.cfg.column_list();
        let grouped = self.driver.rows(&format!(
            "SELECT {kt}us(_ws), us(_we), {at} FROM (SELECT {kp}_ws, _we, {} FROM \
               (SELECT {cols}, _ws, _we FROM m_accepted) r GROUP BY {kp}_ws, _we) q",
            self.cfg.aggregates
        ));
        let mut expected = Vec::new();
        for row in grouped {
            let key = window_of(&row, nk);
            let window = self
                .model
                .windows
                .get(&key)
                .expect("accepted rows have a model window");
            if window.firings.is_empty() {
                let end = key.2;
                assert!(
                    self.model.watermark.is_none_or(|w| end > w),
                    "{}: the model has a window past the watermark that never fired",
                    self.driver.ctx()
                );
                expected.push(row);
            }
        }
        if self.model.watermark == Some(INFINITY) {
            assert!(
                expected.is_empty(),
                "{}: open windows at infinity",
                self.driver.ctx()
            );
        }
        self.driver.same(
            "_provisional (keys, window_start, window_end, aggregates)",
            actual,
            expected,
        );
        // _current: _latest's rows not provisional, _provisional's rows provisional.
        let split = self.driver.rows(&format!(
            "SELECT (SELECT count(*) FROM {c} WHERE NOT provisional)::text, (SELECT count(*) FROM {l})::text, \
                    (SELECT count(*) FROM {c} WHERE provisional AND version IS NULL AND NOT sealed)::text, \
                    (SELECT count(*) FROM {p})::text",
            c = self.cfg.view("_current"),
            l = self.cfg.view("_latest"),
            p = self.cfg.view("_provisional"),
        ));
        assert_eq!(
            split[0][0],
            split[0][1],
            "{}: _current's fired rows are _latest's",
            self.driver.ctx()
        );
        assert_eq!(
            split[0][2],
            split[0][3],
            "{}: _current's provisional rows are _provisional's",
            self.driver.ctx()
        );
    }

    fn check_refused(&mut self) {
        self.driver.check_refused(self.cfg, "_restated_in::text");
    }

    /// Versions 1..n per window with the model's kinds and watermarks, sealed exactly for
    /// version 1; and no history row ever changes or disappears.
    fn check_history(&mut self) {
        let kt = self.cfg.keys_text();
        let nk = self.cfg.keys.len();
        let mut actual = self.driver.rows(&format!(
            "SELECT {kt}us(window_start), version::text, kind, sealed::text, us(window_end), us(watermark), h::text \
             FROM {} h",
            self.cfg.view("_history")
        ));
        let mut current = BTreeMap::new();
        for row in &mut actual {
            let text = row.pop().unwrap().unwrap_or_default();
            current.insert(
                (
                    row[..nk].to_vec(),
                    row[nk].clone().unwrap(),
                    row[nk + 4].clone().unwrap(),
                    row[nk + 1].clone().unwrap(),
                ),
                text,
            );
        }
        let mut expected = Vec::new();
        for ((keys, start, end), w) in &self.model.windows {
            for (i, f) in w.firings.iter().enumerate() {
                let mut row = keys.clone();
                row.extend([
                    Some(ts_key(*start)),
                    Some((i + 1).to_string()),
                    Some(f.kind.as_str().to_string()),
                    Some((i == 0).to_string()),
                    Some(ts_key(*end)),
                    Some(ts_key(f.watermark)),
                ]);
                expected.push(row);
            }
        }
        self.driver.same(
            "_history (keys, window_start, version, kind, sealed, window_end, watermark)",
            actual,
            expected,
        );
        self.driver
            .check_history_unchanged(&mut self.snapshots, current);
    }

    /// `_sealed` is version 1 of each window, as history has it.
    fn check_sealed(&mut self) {
        let cols = format!(
            "{}us(window_start), us(window_end), version::text, kind, {}, sealed::text, us(watermark), fired_at::text",
            self.cfg.keys_text(),
            self.cfg.aliases_text()
        );
        let actual = self
            .driver
            .rows(&format!("SELECT {cols} FROM {}", self.cfg.view("_sealed")));
        let expected = self.driver.rows(&format!(
            "SELECT {cols} FROM {} WHERE version = 1",
            self.cfg.view("_history")
        ));
        self.driver
            .same("_sealed against version 1 of _history", actual, expected);
    }

    /// `eventtime.explain` gives one row per window of the event time, with the model's bounds,
    /// deadline and the landing a row would get under the watermark now (SPEC §2, §7). Asked
    /// about two event times around the watermark, one of them on a window boundary.
    fn check_explain(&mut self) {
        let spec = self.model.spec();
        let now = self.now();
        for probe in 0..2 {
            let s = spec.span();
            let t = if probe == 0 {
                now + self.probe_rng.random_range(-2 * s..s)
            } else {
                spec.nth_start(now, self.probe_rng.random_range(-2 - spec.overlap()..=1))
            };
            let keys = key_args(&random_keys(&mut self.probe_rng, self.cfg));
            let got = self.driver.rows(&format!(
                "SELECT us(window_start), us(window_end), us(deadline), landing \
                 FROM eventtime.explain({}, {}::timestamptz{keys})",
                quote_literal(self.cfg.pipeline),
                quote_literal(&ts_text(t))
            ));
            let expected = spec
                .windows_of(t)
                .into_iter()
                .map(|(start, end)| {
                    let deadline = end + self.model.lateness();
                    let landing = match self.model.watermark {
                        Some(w) if w >= deadline => "side-output",
                        Some(w) if w >= end => "late-firing",
                        _ => "open",
                    };
                    vec![
                        Some(ts_key(start)),
                        Some(ts_key(end)),
                        Some(ts_key(deadline)),
                        Some(landing.to_string()),
                    ]
                })
                .collect();
            self.driver.same(
                &format!(
                    "eventtime.explain at {} (window_start, window_end, deadline, landing)",
                    ts_text(t)
                ),
                got,
                expected,
            );
        }
    }

    fn check_no_state(&mut self) {
        assert!(
            self.model.windows.values().all(|w| !w.live),
            "{}: the model still has live windows",
            self.driver.ctx()
        );
        let got = self.driver.rows(&format!(
            "SELECT state_rows::text FROM eventtime.pipelines WHERE name = {}",
            quote_literal(self.cfg.pipeline)
        ));
        assert_eq!(
            got,
            vec![vec![Some("0".to_string())]],
            "{}: no state rows after watermark 'infinity'",
            self.driver.ctx()
        );
    }
}

/// The model's window of a row that starts with `nk` key values, then the window's start and
/// end in microseconds.
fn window_of(row: &Row, nk: usize) -> WindowKey {
    let us = |i: usize| -> i64 { row[i].as_deref().unwrap().parse().unwrap() };
    (row[..nk].to_vec(), us(nk), us(nk + 1))
}
