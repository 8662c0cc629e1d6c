//! What the randomized runs of `scenario` (tumbling, hopping and calendar windows) and
//! `sessions` (session windows) share, whatever their model: where a run is, for failure
//! messages (`Ctx`); its connection, whose statements and queries name that place when they
//! fail (`Driver`); random column values; the three ways a statement reaches the pipeline
//! (multi-row `INSERT`, `COPY`, `eventtime.ingest`); and the checks that need no model: history
//! rows never change, `_refused` is `m_refused`.

use std::collections::BTreeMap;
use std::fmt;

use postgres::fallible_iterator::FallibleIterator;
use postgres::Client;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::{Column, Config, Role};
use crate::db::{self, Row};
use crate::model::{Counts, Keys};
use crate::values::{decimal, quote_ident, quote_literal, ts_or_null, ts_text, Val, SECOND};

/// The RNG of a run's `stream`: each configuration and each purpose draws from its own, so that
/// adding one does not change the draws of the others.
pub fn rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

/// How a statement sends its rows.
#[derive(Clone, Copy, Debug)]
pub enum Method {
    Insert,
    Copy,
    Ingest,
}

/// Where a failure happened, and how to replay it.
pub struct Ctx<'b> {
    seed: u64,
    label: &'b str,
    step: usize,
    action: &'b str,
}

impl fmt::Display for Ctx<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {} (replay with PROPERTY_SEED={}), config {}, step {}: {}",
            self.seed, self.seed, self.label, self.step, self.action
        )
    }
}

/// A run's connection, and where the run is: its seed, configuration, step and what the step
/// is doing, which every failure names.
pub struct Driver {
    pub db: Client,
    pub seed: u64,
    pub label: &'static str,
    pub step: usize,
    pub action: String,
}

impl Driver {
    pub fn new(db: Client, seed: u64, label: &'static str) -> Driver {
        Driver {
            db,
            seed,
            label,
            step: 0,
            action: "setup".into(),
        }
    }

    pub fn ctx(&self) -> Ctx<'_> {
        Ctx {
            seed: self.seed,
            label: self.label,
            step: self.step,
            action: &self.action,
        }
    }

    pub fn exec(&mut self, sql: &str) {
        if let Err(e) = self.db.batch_execute(sql) {
            panic!(
                "{}: statement failed: {}\n{}",
                self.ctx(),
                db::describe(&e),
                truncate(sql)
            );
        }
    }

    pub fn rows(&mut self, sql: &str) -> Vec<Row> {
        db::try_text_rows(&mut self.db, sql).unwrap_or_else(|e| {
            panic!(
                "{}: query failed: {}\n{}",
                self.ctx(),
                db::describe(&e),
                truncate(sql)
            )
        })
    }

    /// Compares two multisets of rows and names the rows missing on either side.
    pub fn same(&self, what: &str, actual: Vec<Row>, expected: Vec<Row>) {
        assert_same_rows(&self.ctx(), what, actual, expected);
    }

    /// Sends `batch` to the pipeline's source table by `method`; for `eventtime.ingest`, returns
    /// the counts it returned. `rng` decides, per row, whether `eventtime.ingest` is given its
    /// NULLs as `null` or not at all.
    /// The notifications on channel `eventtime` that arrived since the last call, as the
    /// `versions` counts of their payloads: (main, late, merged, restatement).
    pub fn announced(&mut self) -> Vec<[i64; 4]> {
        let mut out = Vec::new();
        let mut pending = self.db.notifications();
        let mut it = pending.iter();
        while let Some(n) = it.next().unwrap_or_else(|e| panic!("notifications: {e}")) {
            if n.channel() != "eventtime" {
                continue;
            }
            let p = n.payload();
            out.push(["main", "late", "merged", "restatement"].map(|k| {
                payload_count(p, k).unwrap_or_else(|| panic!("payload without versions.{k}: {p}"))
            }));
        }
        out
    }

    pub fn send<W>(
        &mut self,
        method: Method,
        cfg: &Config<W>,
        batch: &[Vec<Val>],
        rng: &mut ChaCha8Rng,
    ) -> Option<Counts> {
        match method {
            Method::Insert => self.send_insert(cfg, batch),
            Method::Copy => self.send_copy(cfg, batch),
            Method::Ingest => return Some(self.send_ingest(cfg, batch, rng)),
        }
        None
    }

    fn send_insert<W>(&mut self, cfg: &Config<W>, batch: &[Vec<Val>]) {
        self.exec(&db::insert_sql(&cfg.source(), &cfg.column_list(), batch));
    }

    fn send_copy<W>(&mut self, cfg: &Config<W>, batch: &[Vec<Val>]) {
        if let Err(e) = db::copy_rows(&mut self.db, &cfg.source(), &cfg.column_list(), batch) {
            panic!("{}: COPY failed: {}", self.ctx(), db::describe(&e));
        }
    }

    fn send_ingest<W>(
        &mut self,
        cfg: &Config<W>,
        batch: &[Vec<Val>],
        rng: &mut ChaCha8Rng,
    ) -> Counts {
        let mut objects = Vec::with_capacity(batch.len());
        for r in batch {
            // A NULL may be written as null or left out; both must mean NULL.
            let omit_nulls = rng.random_bool(0.5);
            let fields: Vec<String> = cfg
                .columns
                .iter()
                .zip(r)
                .filter(|(_, v)| !(omit_nulls && **v == Val::Null))
                .map(|(c, v)| format!("{}: {}", Val::Text(c.name.into()).json(), v.json()))
                .collect();
            objects.push(format!("{{{}}}", fields.join(", ")));
        }
        let doc = format!("[{}]", objects.join(",\n"));
        let result = self.db.query_one(
            "SELECT accepted, late, refused, duplicates FROM eventtime.ingest($1, $2::text::jsonb)",
            &[&cfg.pipeline, &doc],
        );
        match result {
            Ok(r) => Counts {
                accepted: r.get(0),
                late: r.get(1),
                refused: r.get(2),
                duplicates: r.get(3),
            },
            Err(e) => panic!(
                "{}: eventtime.ingest failed: {}",
                self.ctx(),
                db::describe(&e)
            ),
        }
    }

    /// `eventtime.pipelines` counts as `expected` has it (source rows, refused, duplicates,
    /// firings, watermark), which `what` names.
    pub fn check_counters<W>(&mut self, cfg: &Config<W>, expected: Row, what: &str) {
        let got = self.rows(&format!(
            "SELECT (SELECT count(*) FROM {})::text, refused::text, duplicates::text, firings::text, us(watermark) \
             FROM eventtime.pipelines WHERE name = {}",
            cfg.source(),
            quote_literal(cfg.pipeline)
        ));
        assert_eq!(got, vec![expected], "{}: {what}", self.ctx());
    }

    /// History is append-only: every row in `snapshots` (its text when first seen, by its key)
    /// is in `current` with the same text. Then adds what `current` has to `snapshots`.
    pub fn check_history_unchanged<K: Ord + fmt::Debug>(
        &self,
        snapshots: &mut BTreeMap<K, String>,
        current: BTreeMap<K, String>,
    ) {
        for (key, before) in snapshots.iter() {
            match current.get(key) {
                Some(now) if now == before => {}
                Some(now) => panic!(
                    "{}: history row {key:?} changed\n  was: {before}\n  now: {now}",
                    self.ctx()
                ),
                None => panic!(
                    "{}: history row {key:?} disappeared; it was: {before}",
                    self.ctx()
                ),
            }
        }
        snapshots.extend(current);
    }

    /// `_refused` is `m_refused`, the refused rows the model wrote with their window, deadline
    /// and watermark; `restated_in` is the expression of `m_refused` that gives its
    /// `restated_in`, as text.
    pub fn check_refused<W>(&mut self, cfg: &Config<W>, restated_in: &str) {
        let kt = cfg.keys_text();
        let src = cfg.source();
        let actual = self.rows(&format!(
            "SELECT {kt}event_id::text, us(event_time), us(window_start), us(window_end), us(deadline), us(watermark), \
                    jsonb_populate_record(NULL::{src}, \"row\")::text, restated_in::text FROM {}",
            cfg.view("_refused")
        ));
        let event_id = match cfg.event_id() {
            Some(i) => quote_ident(cfg.columns[i].name),
            None => "NULL".into(),
        };
        let expected = self.rows(&format!(
            "SELECT {kt}{event_id}::text, us({}), us(_ws), us(_we), us(_deadline), us(_wm), ROW({})::text, \
                    {restated_in} FROM m_refused",
            quote_ident(cfg.columns[cfg.event_time()].name),
            cfg.column_list()
        ));
        self.same(
            "_refused (keys, event_id, event_time, window_start, window_end, deadline, watermark, row, restated_in)",
            actual,
            expected,
        );
    }

    /// Advances the pipeline's watermark from `from` to `to` and compares what
    /// `eventtime.advance_watermark` returns with `expected` (fired, purged, watermark), which
    /// `what` names.
    pub fn check_advance<W>(
        &mut self,
        cfg: &Config<W>,
        (from, to): (Option<i64>, i64),
        expected: Row,
        what: &str,
    ) {
        self.action = format!(
            "advance_watermark from {} to {}",
            ts_or_null(from),
            ts_text(to)
        );
        let got = self.rows(&format!(
            "SELECT windows_fired::text, windows_purged::text, us(watermark) \
             FROM eventtime.advance_watermark({}, {}::timestamptz)",
            quote_literal(cfg.pipeline),
            quote_literal(&ts_text(to))
        ));
        assert_eq!(
            got,
            vec![expected],
            "{}: advance_watermark returns {what}",
            self.ctx()
        );
    }
}

/// One of `boundaries` (where a window's landing changes), or one time in five a microsecond
/// before it.
pub fn on_or_before(rng: &mut ChaCha8Rng, boundaries: &[i64]) -> i64 {
    let b = boundaries[rng.random_range(0..boundaries.len())];
    if rng.random_bool(0.2) {
        b - 1
    } else {
        b
    }
}

/// Values of the key columns for `eventtime.explain`: one of a column's values, or one time in
/// five NULL.
pub fn random_keys<W>(rng: &mut ChaCha8Rng, cfg: &Config<W>) -> Keys {
    cfg.key_indexes()
        .into_iter()
        .map(|k| match cfg.columns[k].role {
            Role::Key(values) if rng.random_range(0..5) > 0 => {
                Some(values[rng.random_range(0..values.len())].to_string())
            }
            _ => None,
        })
        .collect()
}

/// `keys` as the trailing text arguments of `eventtime.explain`: `, 'a'::text, NULL::text`.
pub fn key_args(keys: &Keys) -> String {
    keys.iter()
        .map(|k| {
            let v = k
                .as_deref()
                .map(quote_literal)
                .unwrap_or_else(|| "NULL".into());
            format!(", {v}::text")
        })
        .collect()
}

/// Where the values of a [`Role::Stamp`] column start (2026-01-01 UTC): ten days of them.
const STAMPS_FROM: i64 = 1_767_225_600 * SECOND;

/// A random value of column `c`, NULL at its rate; event ids count up from `next_id`, so that a
/// fresh row never reuses one (a repeated id is always a redelivery). `None` for the event time,
/// which each run draws its own way.
pub fn random_value(
    rng: &mut ChaCha8Rng,
    c: &Column,
    next_id: &mut i64,
    notes: &[&str],
) -> Option<Val> {
    if rng.random_range(0..100) < c.null_pct {
        return Some(Val::Null);
    }
    Some(match c.role {
        Role::Key(values) => Val::Text(values[rng.random_range(0..values.len())].to_string()),
        Role::EventId { text_prefix } => {
            *next_id += 1;
            match text_prefix {
                None => Val::Int(*next_id),
                Some(p) => Val::Text(format!("{p}{next_id}")),
            }
        }
        Role::EventTime => return None,
        Role::Amount => Val::Num(decimal(
            rng.random_range(-2_000..200_000),
            rng.random_range(0..=3),
        )),
        Role::Qty => Val::Int(rng.random_range(-5..=100)),
        Role::Note => Val::Text(notes[rng.random_range(0..notes.len())].to_string()),
        Role::Float => Val::Num(decimal(rng.random_range(-8_000..8_000) * 125, 3)),
        Role::Span => Val::Text(format!(
            "{} mons {} days {} seconds",
            rng.random_range(0..2),
            rng.random_range(-1..3),
            rng.random_range(-100..100_000)
        )),
        Role::Stamp => Val::Ts(STAMPS_FROM + rng.random_range(0..10 * 86_400) * SECOND),
        Role::Flag => Val::Bool(rng.random_bool(0.7)),
    })
}

/// Compares two multisets of rows and panics naming the rows missing on either side, after
/// `ctx` (where the failure happened, and how to replay it).
pub fn assert_same_rows(
    ctx: &dyn fmt::Display,
    what: &str,
    mut actual: Vec<Row>,
    mut expected: Vec<Row>,
) {
    actual.sort();
    expected.sort();
    if actual == expected {
        return;
    }
    let (mut missing, mut unexpected) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < actual.len() || j < expected.len() {
        match (actual.get(i), expected.get(j)) {
            (Some(a), Some(e)) if a == e => {
                i += 1;
                j += 1;
            }
            (Some(a), Some(e)) if a < e => {
                unexpected.push(a);
                i += 1;
            }
            (Some(a), None) => {
                unexpected.push(a);
                i += 1;
            }
            (_, Some(e)) => {
                missing.push(e);
                j += 1;
            }
            (None, None) => unreachable!(),
        }
    }
    let show = |rows: &[&Row]| {
        rows.iter()
            .take(8)
            .map(|r| format!("\n    {r:?}"))
            .collect::<String>()
            + &if rows.len() > 8 {
                format!("\n    ... {} more", rows.len() - 8)
            } else {
                String::new()
            }
    };
    panic!(
        "{ctx}: {what} differs from the model ({} rows, expected {})\n  expected but missing:{}\n  present but not expected:{}",
        actual.len(),
        expected.len(),
        show(&missing),
        show(&unexpected)
    );
}

pub fn truncate(sql: &str) -> String {
    if sql.len() <= 2000 {
        return sql.to_string();
    }
    let mut end = 2000;
    while !sql.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &sql[..end])
}

/// The integer after `"key":` in a notification payload (the counts of `versions` are the only
/// integer fields with these names).
pub(crate) fn payload_count(payload: &str, key: &str) -> Option<i64> {
    let at = payload.find(&format!("\"{key}\":"))? + key.len() + 3;
    let digits: String = payload[at..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}
