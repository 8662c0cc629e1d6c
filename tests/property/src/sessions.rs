//! One randomized run of a session pipeline (SPEC §7, the session contract) against
//! `session_model`: random statements of several rows (multi-row `INSERT`, `COPY`,
//! `eventtime.ingest`) and watermark advances, each followed by a comparison of every view and
//! counter with the model; `'infinity'` at the end.
//!
//! Rows are aimed at the model's sessions as often as at the watermark: exactly at a session's
//! end or a gap before its start (touching: they stay apart), overlapping it by a microsecond to
//! half a gap (extending it), inside it (joining it), between two sessions of a key (bridging
//! them), and on sessions purged already (a session of their own); with redeliveries of event
//! ids within a statement and across statements, sometimes at another event time (still a
//! duplicate) or under another key (another event). After each advance, `eventtime.explain` is
//! asked about rows on and around the sessions: its window, deadline and landing, and that its
//! explanation names what the model says the row would do (refused, a new session, join which
//! session, merge which sessions into which, overlap which purged sessions).
//!
//! The model decides where each row goes and which rows each version holds; PostgreSQL computes
//! the expected aggregates from plain tables: `m_rows` (every accepted row, numbered),
//! `m_member` (each session's rows, in order) and `m_version` (each version: its session and how
//! many of those rows it holds), so that result types and scales are PostgreSQL's own.

use std::collections::{BTreeMap, HashMap};

use postgres::Client;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::config::{Role, SessionConfig};
use crate::db::{self, Row};
use crate::model::Keys;
use crate::runner::{self, key_args, on_or_before, random_keys, random_value, Driver, Method};
use crate::session_model::{Counts, Event, Kind, Landing, Outcome, SessionModel};
use crate::values::{quote_literal, ts_key, ts_or_null, ts_text, Val, INFINITY, SECOND};

/// The RNG stream of a config's explain probes is this plus its own stream.
const PROBE_STREAMS: u64 = 1000;

const NOTES: &[&str] = &[
    "",
    "ok",
    "tab\there",
    "two\nlines",
    "\\N",
    "quote ' \"",
    "ünï €",
];

pub fn run(cfg: &SessionConfig, seed: u64) {
    println!("seed {seed}");
    let dbname = format!("eventtime_property_{}", cfg.label);
    let mut s = Run::new(cfg, seed, db::fresh_database(&dbname));
    s.setup();
    for step in 1..=cfg.steps {
        s.driver.step = step;
        if s.rng.random_range(0..100) < 62 {
            s.ingest_step();
        } else {
            s.advance_step(None);
            for _ in 0..3 {
                s.check_explain();
            }
        }
        s.check();
    }
    s.driver.step += 1;
    s.advance_step(Some(INFINITY));
    s.check();
    s.check_no_state();
    println!("{}: {}", cfg.label, s.stats.summary(&s.model));
    drop(s);
    db::drop_database(&dbname);
}

/// What a run exercised, printed at its end so that a weak seed or generator shows.
#[derive(Default)]
struct Stats {
    counts: Counts,
    by_method: [usize; 3],
    advances: usize,
    /// Rows aimed at a session: (touching, extending, inside, bridging, on a purged one).
    aimed: [usize; 5],
    redelivered_elsewhere: usize,
    /// Redeliveries of an event id under another key.
    id_under_other_key: usize,
    /// `explain` probes that would be: (refused, a new session, one over purged sessions, a
    /// join, a merge).
    probes: [usize; 5],
}

impl Stats {
    fn summary(&self, m: &SessionModel) -> String {
        let kind = |k| {
            m.sessions
                .iter()
                .flat_map(|s| &s.versions)
                .filter(|v| v.kind == k)
                .count()
        };
        let absorbed = m.sessions.iter().filter(|s| s.absorbed_into.is_some());
        let traced = absorbed.clone().filter(|s| !s.versions.is_empty()).count();
        let late_v1 = m
            .sessions
            .iter()
            .filter(|s| s.versions.first().map(|v| v.kind) == Some(Kind::Late))
            .count();
        format!(
            "{} statements (INSERT {}, COPY {}, eventtime.ingest {}): accepted {}, late {}, refused {}, \
             duplicates {}; {} advances; rows aimed at sessions: {} touching, {} extending, {} inside, \
             {} bridging, {} on purged ones; {} redeliveries at another time, {} of an id under another key; \
             {} sessions, {} absorbed \
             ({} of them after publishing); versions: {} main, {} late ({} of them a version 1), {} merged; \
             explain probes: {} refused, {} new, {} new over purged sessions, {} join, {} merge",
            self.by_method.iter().sum::<usize>(),
            self.by_method[0],
            self.by_method[1],
            self.by_method[2],
            self.counts.accepted,
            self.counts.late,
            self.counts.refused,
            self.counts.duplicates,
            self.advances,
            self.aimed[0],
            self.aimed[1],
            self.aimed[2],
            self.aimed[3],
            self.aimed[4],
            self.redelivered_elsewhere,
            self.id_under_other_key,
            m.sessions.len(),
            absorbed.count(),
            traced,
            kind(Kind::Main),
            kind(Kind::Late),
            late_v1,
            kind(Kind::Merged),
            self.probes[0],
            self.probes[1],
            self.probes[2],
            self.probes[3],
            self.probes[4],
        )
    }
}

struct Run<'a> {
    cfg: &'a SessionConfig,
    driver: Driver,
    rng: ChaCha8Rng,
    probe_rng: ChaCha8Rng,
    model: SessionModel,
    key_cols: Vec<usize>,
    event_id_col: Option<usize>,
    event_time_col: usize,
    /// Every row sent that was not a duplicate, for redeliveries.
    sent: Vec<Vec<Val>>,
    next_id: i64,
    rows_sent: i64,
    /// Per session id: how many of its rows and versions `m_member` and `m_version` have.
    written: Vec<(usize, usize)>,
    /// The text of every history row the first time it was seen, by (keys, window start,
    /// window end, version): history is append-only.
    snapshots: BTreeMap<Row, String>,
    stats: Stats,
}

impl<'a> Run<'a> {
    fn new(cfg: &'a SessionConfig, seed: u64, db: Client) -> Run<'a> {
        Run {
            cfg,
            driver: Driver::new(db, seed, cfg.label),
            rng: runner::rng(seed, cfg.stream),
            probe_rng: runner::rng(seed, PROBE_STREAMS + cfg.stream),
            model: SessionModel::new(cfg.windows.gap, cfg.lateness, cfg.event_id().is_some()),
            key_cols: cfg.key_indexes(),
            event_id_col: cfg.event_id(),
            event_time_col: cfg.event_time(),
            sent: Vec::new(),
            next_id: 0,
            rows_sent: 0,
            written: Vec::new(),
            snapshots: BTreeMap::new(),
            stats: Stats::default(),
        }
    }

    fn setup(&mut self) {
        let cfg = self.cfg;
        let mut sql = cfg.create_source_sql();
        sql += &format!(
            "CREATE TABLE m_rows (LIKE {src}, _n bigint PRIMARY KEY);\n\
             CREATE TABLE m_member (_sid integer, _pos integer, _n bigint, PRIMARY KEY (_sid, _pos));\n\
             CREATE TABLE m_version (_sid integer, _v integer, _len integer, PRIMARY KEY (_sid, _v));\n\
             CREATE TABLE m_refused (LIKE {src}, _ws timestamptz NOT NULL, _we timestamptz NOT NULL, \
                                     _deadline timestamptz NOT NULL, _wm timestamptz NOT NULL);\n",
            src = cfg.source()
        );
        sql += &cfg.create_pipeline_sql(
            &format!(
                "session_gap => interval {}",
                quote_literal(cfg.windows.gap_sql)
            ),
            ", max_ahead => NULL",
        );
        self.driver.exec(&sql);
        self.driver.exec("LISTEN eventtime");
        let got = self.driver.rows(&format!(
            "SELECT window_kind, (window_size IS NULL)::text, (session_gap = interval {})::text, \
                    extract(epoch FROM session_gap)::bigint::text \
             FROM eventtime.pipelines WHERE name = {}",
            quote_literal(cfg.windows.gap_sql),
            quote_literal(cfg.pipeline)
        ));
        let expected = vec![vec![
            Some("session".to_string()),
            Some("true".to_string()),
            Some("true".to_string()),
            Some((cfg.windows.gap / SECOND).to_string()),
        ]];
        assert_eq!(
            got,
            expected,
            "{}: eventtime.pipelines (window_kind, window_size IS NULL, session_gap as given, its seconds)",
            self.driver.ctx()
        );
    }

    /// Event time moves with the watermark; before the first one, it starts at `cfg.start`.
    fn now(&self) -> i64 {
        self.cfg.now(self.model.watermark)
    }

    fn fresh_row(&mut self, now: i64) -> Vec<Val> {
        let mut row = Vec::with_capacity(self.cfg.columns.len());
        for c in &self.cfg.columns {
            // The event time is drawn below, after the other columns.
            let value = random_value(&mut self.rng, c, &mut self.next_id, NOTES);
            row.push(value.unwrap_or(Val::Ts(0)));
        }
        if !self.aim(&mut row) {
            let t = self.near(now);
            row[self.event_time_col] = Val::Ts(t);
        }
        row
    }

    /// Ahead of the watermark, behind it within the grace, or beyond it.
    fn near(&mut self, now: i64) -> i64 {
        let (g, l) = (self.cfg.windows.gap, self.cfg.lateness);
        let t = match self.rng.random_range(0..100) {
            0..45 => now + self.rng.random_range(0..3 * g),
            45..80 => now - self.rng.random_range(0..=g + l),
            _ => now - (g + l) - self.rng.random_range(0..3 * g),
        };
        if self.rng.random_bool(0.7) {
            t.div_euclid(SECOND) * SECOND
        } else {
            t
        }
    }

    /// Half the time, gives the row the key of one of the model's sessions (mostly a live one)
    /// and an event time that touches it, extends it, falls inside it, bridges it with the next
    /// session of its key, or (a purged session) overlaps it. Returns whether it did.
    fn aim(&mut self, row: &mut [Val]) -> bool {
        let g = self.cfg.windows.gap;
        let live: Vec<usize> = (0..self.model.sessions.len())
            .filter(|&i| self.model.sessions[i].live)
            .collect();
        let purged: Vec<usize> = (0..self.model.sessions.len())
            .filter(|&i| {
                let s = &self.model.sessions[i];
                !s.live && s.absorbed_into.is_none()
            })
            .collect();
        if self.rng.random_bool(0.5) || (live.is_empty() && purged.is_empty()) {
            return false;
        }
        let on_purged = live.is_empty() || (!purged.is_empty() && self.rng.random_bool(0.2));
        let pool = if on_purged { &purged } else { &live };
        // Mostly one of the most recent: those are near the watermark.
        let from = if self.rng.random_bool(0.7) {
            pool.len().saturating_sub(6)
        } else {
            0
        };
        let id = pool[self.rng.random_range(from..pool.len())];
        let s = self.model.sessions[id].clone();
        let t = if on_purged {
            self.stats.aimed[4] += 1;
            self.rng.random_range(s.start - g + 1..s.end)
        } else {
            match self.rng.random_range(0..100) {
                0..20 => {
                    self.stats.aimed[0] += 1;
                    if self.rng.random_bool(0.5) {
                        s.end
                    } else {
                        s.start - g
                    }
                }
                20..45 => {
                    self.stats.aimed[1] += 1;
                    let by = self.rng.random_range(1..=g / 2);
                    if self.rng.random_bool(0.5) {
                        s.end - by
                    } else {
                        s.start - g + by
                    }
                }
                45..70 => {
                    self.stats.aimed[2] += 1;
                    self.rng.random_range(s.start..=s.end - g)
                }
                _ => {
                    // The next live session of the key, if a row can overlap both.
                    let next = self
                        .model
                        .live()
                        .filter(|n| n.keys == s.keys && n.start >= s.end && n.start - g < s.end - 1)
                        .map(|n| n.start)
                        .min();
                    match next {
                        Some(n) => {
                            self.stats.aimed[3] += 1;
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
        for (&col, key) in self.key_cols.iter().zip(&s.keys) {
            row[col] = match key {
                Some(k) => Val::Text(k.clone()),
                None => Val::Null,
            };
        }
        row[self.event_time_col] = Val::Ts(t);
        true
    }

    /// 1 to 40 rows: fresh ones, copies of rows earlier in the statement, and redeliveries of
    /// earlier rows (sometimes at another event time: still a duplicate of its event id).
    fn batch(&mut self) -> Vec<Vec<Val>> {
        let n = match self.rng.random_range(0..100) {
            0..55 => self.rng.random_range(1..=4),
            55..90 => self.rng.random_range(2..=12),
            _ => self.rng.random_range(10..=40),
        };
        let now = self.now();
        let mut batch: Vec<Vec<Val>> = Vec::with_capacity(n);
        for _ in 0..n {
            let r = self.rng.random_range(0..100);
            let row = if r < 6 && !batch.is_empty() {
                batch[self.rng.random_range(0..batch.len())].clone()
            } else if r < 18 && !self.sent.is_empty() {
                let mut row = self.sent[self.rng.random_range(0..self.sent.len())].clone();
                if self.rng.random_bool(0.3) {
                    self.stats.redelivered_elsewhere += 1;
                    let t = self.near(now);
                    row[self.event_time_col] = Val::Ts(t);
                }
                // The same id under another key is another event: dedup is per key and id.
                if !self.key_cols.is_empty() && self.rng.random_bool(0.15) {
                    self.stats.id_under_other_key += 1;
                    let col = self.key_cols[self.rng.random_range(0..self.key_cols.len())];
                    row[col] = match (self.cfg.columns[col].role, &row[col]) {
                        (_, Val::Text(_)) if self.rng.random_bool(0.3) => Val::Null,
                        (Role::Key(values), old) => {
                            let others: Vec<&str> = values
                                .iter()
                                .copied()
                                .filter(|v| *old != Val::Text(v.to_string()))
                                .collect();
                            Val::Text(others[self.rng.random_range(0..others.len())].to_string())
                        }
                        (role, _) => unreachable!("a key column is a key, not {role:?}"),
                    };
                }
                row
            } else {
                self.fresh_row(now)
            };
            batch.push(row);
        }
        batch
    }

    fn model_event(&self, row: &[Val]) -> Event {
        Event {
            keys: self.key_cols.iter().map(|&i| row[i].text()).collect(),
            event_id: self.event_id_col.and_then(|i| row[i].text()),
            event_time: match row[self.event_time_col] {
                Val::Ts(t) => t,
                ref v => panic!("event time {v:?}"),
            },
        }
    }

    fn ingest_step(&mut self) {
        let batch = self.batch();
        let method = match self.rng.random_range(0..100) {
            0..40 => Method::Insert,
            40..60 => Method::Copy,
            _ => Method::Ingest,
        };
        self.driver.action = format!(
            "{method:?} of {} rows under watermark {}",
            batch.len(),
            ts_or_null(self.model.watermark)
        );
        let events: Vec<Event> = batch.iter().map(|r| self.model_event(r)).collect();
        let before = self.versions_by_kind();
        let (landings, expected) = self.model.ingest(&events);
        self.stats.by_method[method as usize] += 1;
        self.stats.counts += expected;
        if let Some(got) = self.driver.send(method, self.cfg, &batch, &mut self.rng) {
            if got != expected {
                panic!(
                    "{}: counts returned by eventtime.ingest: {got:?}, expected {expected:?}\n{}",
                    self.driver.ctx(),
                    self.describe_batch(&batch, &landings)
                );
            }
        }
        self.rows_sent += batch.len() as i64;
        self.check_announced(before);
        self.record(&batch, &landings);
    }

    /// The versions of the model's sessions by kind: (main, late, merged).
    fn versions_by_kind(&self) -> [i64; 3] {
        let mut out = [0; 3];
        for v in self.model.sessions.iter().flat_map(|s| &s.versions) {
            out[v.kind as usize] += 1;
        }
        out
    }

    /// SPEC §8: a statement that wrote versions sends one notification with their counts by kind;
    /// one that wrote none sends none. `before` is [`Self::versions_by_kind`] before it.
    fn check_announced(&mut self, before: [i64; 3]) {
        let now = self.versions_by_kind();
        let written = [0, 1, 2].map(|i| now[i] - before[i]);
        let expected: Vec<[i64; 4]> = if written.iter().sum::<i64>() > 0 {
            vec![[written[0], written[1], written[2], 0]]
        } else {
            Vec::new()
        };
        let got = self.driver.announced();
        assert_eq!(
            got,
            expected,
            "{}: notifications on channel eventtime, as (main, late, merged, restatement)",
            self.driver.ctx()
        );
    }

    /// The statement's rows with the model's landings, for failure messages.
    fn describe_batch(&self, batch: &[Vec<Val>], landings: &[Landing]) -> String {
        let mut out = String::from("  the statement, as the model classified it:");
        for (row, l) in batch.iter().zip(landings) {
            let cells: Vec<String> = row.iter().map(Val::sql).collect();
            out += &format!("\n    ({}) -> {l:?}", cells.join(", "));
        }
        out
    }

    /// Writes the accepted and refused rows to the model's tables, then what changed in the
    /// model's sessions: their new rows and versions.
    fn record(&mut self, batch: &[Vec<Val>], landings: &[Landing]) {
        let (mut accepted, mut refused) = (Vec::new(), Vec::new());
        for (row, landing) in batch.iter().zip(landings) {
            let vals: Vec<String> = row.iter().map(Val::sql).collect();
            let vals = vals.join(", ");
            match *landing {
                Landing::Duplicate => continue,
                Landing::Open(no) | Landing::Late(no) => accepted.push(format!("({vals}, {no})")),
                Landing::Refused {
                    window_end,
                    deadline,
                    watermark,
                } => {
                    let t = row[self.event_time_col].sql();
                    let meta = [window_end, deadline, watermark].map(|t| Val::Ts(t).sql());
                    refused.push(format!("({vals}, {t}, {})", meta.join(", ")));
                }
            }
            self.sent.push(row.to_vec());
        }
        let mut sql = String::new();
        if !accepted.is_empty() {
            sql += &format!("INSERT INTO m_rows VALUES {};\n", accepted.join(",\n"));
        }
        if !refused.is_empty() {
            sql += &format!("INSERT INTO m_refused VALUES {};\n", refused.join(",\n"));
        }
        sql += &self.sync_sessions();
        if !sql.is_empty() {
            self.driver.exec(&sql);
        }
    }

    /// The INSERTs of `m_member` and `m_version` rows the model added since the last call.
    fn sync_sessions(&mut self) -> String {
        let (mut members, mut versions) = (Vec::new(), Vec::new());
        self.written.resize(self.model.sessions.len(), (0, 0));
        for (sid, s) in self.model.sessions.iter().enumerate() {
            let (rows, vs) = &mut self.written[sid];
            for (pos, no) in s.rows.iter().enumerate().skip(*rows) {
                members.push(format!("({sid}, {pos}, {no})"));
            }
            for (i, v) in s.versions.iter().enumerate().skip(*vs) {
                versions.push(format!("({sid}, {}, {})", i + 1, v.rows));
            }
            (*rows, *vs) = (s.rows.len(), s.versions.len());
        }
        let mut sql = String::new();
        if !members.is_empty() {
            sql += &format!("INSERT INTO m_member VALUES {};\n", members.join(", "));
        }
        if !versions.is_empty() {
            sql += &format!("INSERT INTO m_version VALUES {};\n", versions.join(", "));
        }
        sql
    }

    /// Mostly forward by up to one and a half times the config's `advance`; often exactly onto
    /// a live session's end or end plus lateness (or a microsecond before), where firing and
    /// purging happen; sometimes not forward.
    fn pick_watermark(&mut self) -> i64 {
        let (a, l) = (self.cfg.advance, self.cfg.lateness);
        let Some(cur) = self.model.watermark else {
            return (self.cfg.start + self.rng.random_range(-a..2 * a)).div_euclid(SECOND) * SECOND;
        };
        match self.rng.random_range(0..100) {
            0..8 => cur - self.rng.random_range(0..=a),
            8..45 => {
                let mut boundaries: Vec<i64> = self
                    .model
                    .live()
                    .flat_map(|s| [s.end, s.end + l])
                    .filter(|&b| b > cur)
                    .collect();
                if boundaries.is_empty() {
                    boundaries.push(cur + a);
                }
                on_or_before(&mut self.rng, &boundaries)
            }
            _ => (cur + self.rng.random_range(1..=a * 3 / 2)).div_euclid(SECOND) * SECOND,
        }
    }

    fn advance_step(&mut self, to: Option<i64>) {
        let to = to.unwrap_or_else(|| self.pick_watermark());
        let from = self.model.watermark;
        self.stats.advances += 1;
        let before = self.versions_by_kind();
        let done = self.model.advance(to);
        let expected = vec![
            Some(done.fired.to_string()),
            Some(done.purged.to_string()),
            self.model.watermark.map(ts_key),
        ];
        self.driver.check_advance(
            self.cfg,
            (from, to),
            expected,
            "(sessions fired, sessions purged, watermark)",
        );
        self.check_announced(before);
        let sql = self.sync_sessions();
        if !sql.is_empty() {
            self.driver.exec(&sql);
        }
    }

    fn check(&mut self) {
        let aggregates = self.expected_aggregates();
        self.check_counters();
        self.check_history(&aggregates);
        self.check_latest(&aggregates);
        self.check_sealed(&aggregates);
        self.check_refused();
        self.check_provisional();
    }

    /// SPEC §3 provisional reads: `_provisional` holds every session that is live and has not
    /// fired (not absorbed, no version), with its bounds so far and PostgreSQL's own aggregates
    /// over all its accepted rows; nothing else, and nothing at all after infinity.
    fn check_provisional(&mut self) {
        let open: Vec<usize> = (self.model.sessions.iter().enumerate())
            .filter(|(_, s)| s.live && s.versions.is_empty())
            .map(|(sid, _)| sid)
            .collect();
        if self.model.watermark == Some(INFINITY) {
            assert!(
                open.is_empty(),
                "{}: open sessions at infinity",
                self.driver.ctx()
            );
        }
        let actual = self.driver.rows(&format!(
            "SELECT {}us(window_start), us(window_end), {} FROM {}",
            self.cfg.keys_text(),
            self.cfg.aliases_text(),
            self.cfg.view("_provisional")
        ));
        let mut values: HashMap<usize, Row> = HashMap::new();
        if !open.is_empty() {
            let ids = open
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            for mut r in self.driver.rows(&format!(
                "SELECT _sid::text, {} FROM (SELECT m._sid, {} FROM m_member m JOIN m_rows r ON r._n = m._n \
                   WHERE m._sid IN ({ids}) GROUP BY m._sid) q",
                self.cfg.aliases_text(),
                self.cfg.aggregates
            )) {
                let rest = r.split_off(1);
                values.insert(r[0].as_deref().unwrap().parse().unwrap(), rest);
            }
        }
        let mut expected = Vec::new();
        for sid in open {
            let s = &self.model.sessions[sid];
            let mut row = s.keys.clone();
            row.extend([Some(ts_key(s.start)), Some(ts_key(s.end))]);
            row.extend(values[&sid].iter().cloned());
            expected.push(row);
        }
        self.driver.same(
            "_provisional (keys, window_start, window_end, aggregates)",
            actual,
            expected,
        );
    }

    /// The aggregates of each (session id, version), computed by PostgreSQL over the rows the
    /// model says it holds.
    fn expected_aggregates(&mut self) -> HashMap<(usize, usize), Row> {
        let rows = self.driver.rows(&format!(
            "SELECT _sid::text, _v::text, {} FROM (SELECT v._sid, v._v, {} FROM m_version v \
               JOIN m_member m ON m._sid = v._sid AND m._pos < v._len JOIN m_rows r ON r._n = m._n \
             GROUP BY v._sid, v._v) q",
            self.cfg.aliases_text(),
            self.cfg.aggregates
        ));
        let mut out = HashMap::new();
        for mut r in rows {
            let values = r.split_off(2);
            let sid = r[0].as_deref().unwrap().parse().unwrap();
            let v = r[1].as_deref().unwrap().parse().unwrap();
            out.insert((sid, v), values);
        }
        let versions = self.model.versions();
        assert_eq!(
            out.len(),
            versions,
            "{}: the model's tables hold every version's rows",
            self.driver.ctx()
        );
        out
    }

    fn check_counters(&mut self) {
        let expected = vec![
            Some(self.rows_sent.to_string()),
            Some(self.model.refused.to_string()),
            Some(self.model.duplicates.to_string()),
            Some(self.model.versions().to_string()),
            self.model.watermark.map(ts_key),
        ];
        self.driver.check_counters(
            self.cfg,
            expected,
            "(source rows, pipelines.refused, .duplicates, .firings = history rows, .watermark)",
        );
    }

    /// Every version of every session, with its kind, `merged_into` (as `[)` bounds), values,
    /// `sealed` exactly for version 1, and watermark; no history row ever changes.
    fn check_history(&mut self, aggregates: &HashMap<(usize, usize), Row>) {
        let nk = self.cfg.keys.len();
        let mut actual = self.driver.rows(&format!(
            "SELECT {}us(window_start), us(window_end), version::text, kind, us(lower(merged_into)), \
                    us(upper(merged_into)), (lower_inc(merged_into) AND NOT upper_inc(merged_into))::text, \
                    {}, sealed::text, us(watermark), h::text FROM {} h",
            self.cfg.keys_text(),
            self.cfg.aliases_text(),
            self.cfg.view("_history")
        ));
        let mut current = BTreeMap::new();
        for row in &mut actual {
            let text = row.pop().unwrap().unwrap_or_default();
            current.insert(row[..nk + 3].to_vec(), text);
        }
        let mut expected = Vec::new();
        for (sid, s) in self.model.sessions.iter().enumerate() {
            for (i, v) in s.versions.iter().enumerate() {
                let mut row = s.keys.clone();
                row.extend([
                    Some(ts_key(s.start)),
                    Some(ts_key(s.end)),
                    Some((i + 1).to_string()),
                    Some(v.kind.as_str().to_string()),
                    v.merged_into.map(|r| ts_key(r.0)),
                    v.merged_into.map(|r| ts_key(r.1)),
                    v.merged_into.map(|_| "true".to_string()),
                ]);
                row.extend(aggregates[&(sid, i + 1)].iter().cloned());
                row.extend([Some((i == 0).to_string()), Some(ts_key(v.watermark))]);
                expected.push(row);
            }
        }
        self.driver.same(
            "_history (keys, window_start, window_end, version, kind, lower and upper of merged_into, \
             merged_into is [), aggregates, sealed, watermark)",
            actual,
            expected,
        );
        self.driver
            .check_history_unchanged(&mut self.snapshots, current);
    }

    /// The greatest version of every session that was not absorbed.
    fn check_latest(&mut self, aggregates: &HashMap<(usize, usize), Row>) {
        let actual = self.driver.rows(&format!(
            "SELECT {}us(window_start), us(window_end), version::text, kind, {}, us(watermark) FROM {}",
            self.cfg.keys_text(),
            self.cfg.aliases_text(),
            self.cfg.view("_latest")
        ));
        let mut expected = Vec::new();
        for (sid, s) in self.model.sessions.iter().enumerate() {
            if let Some((n, v)) = s.latest() {
                let mut row = s.keys.clone();
                row.extend([
                    Some(ts_key(s.start)),
                    Some(ts_key(s.end)),
                    Some(n.to_string()),
                    Some(v.kind.as_str().to_string()),
                ]);
                row.extend(aggregates[&(sid, n)].iter().cloned());
                row.push(Some(ts_key(v.watermark)));
                expected.push(row);
            }
        }
        self.driver.same(
            "_latest (keys, window_start, window_end, version, kind, aggregates, watermark)",
            actual,
            expected,
        );
    }

    /// Version 1 of every session that fired, absorbed ones included.
    fn check_sealed(&mut self, aggregates: &HashMap<(usize, usize), Row>) {
        let actual = self.driver.rows(&format!(
            "SELECT {}us(window_start), us(window_end), version::text, kind, {}, sealed::text, us(watermark) \
             FROM {}",
            self.cfg.keys_text(),
            self.cfg.aliases_text(),
            self.cfg.view("_sealed")
        ));
        let mut expected = Vec::new();
        for (sid, s) in self.model.sessions.iter().enumerate() {
            if let Some(v) = s.versions.first() {
                let mut row = s.keys.clone();
                row.extend([
                    Some(ts_key(s.start)),
                    Some(ts_key(s.end)),
                    Some("1".to_string()),
                    Some(v.kind.as_str().to_string()),
                ]);
                row.extend(aggregates[&(sid, 1)].iter().cloned());
                row.extend([Some("true".to_string()), Some(ts_key(v.watermark))]);
                expected.push(row);
            }
        }
        self.driver.same(
            "_sealed (keys, window_start, window_end, version, kind, aggregates, sealed, watermark)",
            actual,
            expected,
        );
    }

    /// Each refused row with its own window `[t, t + gap)`, deadline and the watermark that
    /// refused it; nothing restated.
    fn check_refused(&mut self) {
        self.driver.check_refused(self.cfg, "NULL");
    }

    /// `eventtime.explain` of a session pipeline: one row, the row's own window `[t, t + gap)`,
    /// its deadline and landing under the watermark now.
    fn check_explain(&mut self) {
        let g = self.cfg.windows.gap;
        let mut keys = random_keys(&mut self.probe_rng, self.cfg);
        // Near the watermark, on a live session of its key, or on the last part of a purged
        // one, where a row can still be accepted.
        let purged = self.probe_rng.random_bool(0.5);
        let candidates: Vec<(Keys, i64, i64)> = self
            .model
            .sessions
            .iter()
            .filter(|s| s.absorbed_into.is_none() && s.live != purged)
            .map(|s| (s.keys.clone(), s.start, s.end))
            .collect();
        let t = if candidates.is_empty() || self.probe_rng.random_bool(0.3) {
            self.now() + self.probe_rng.random_range(-3 * g..g)
        } else {
            let from = candidates.len().saturating_sub(8);
            let (k, start, end) =
                candidates[self.probe_rng.random_range(from..candidates.len())].clone();
            keys = k;
            if purged {
                self.probe_rng.random_range(end - g + 1..end)
            } else {
                self.probe_rng.random_range(start - g..=end)
            }
        };
        let key_args = key_args(&keys);
        let action = std::mem::replace(
            &mut self.driver.action,
            format!("eventtime.explain at {} for key {keys:?}", ts_text(t)),
        );
        let mut got = self.driver.rows(&format!(
            "SELECT us(window_start), us(window_end), us(deadline), landing, explanation \
             FROM eventtime.explain({}, {}::timestamptz{key_args})",
            quote_literal(self.cfg.pipeline),
            quote_literal(&ts_text(t))
        ));
        let explanation = got
            .first_mut()
            .and_then(|r| r.pop())
            .flatten()
            .unwrap_or_default();
        let expected = vec![vec![
            Some(ts_key(t)),
            Some(ts_key(t + g)),
            Some(ts_key(t + g + self.cfg.lateness)),
            Some(self.model.landing(t, self.model.watermark).to_string()),
        ]];
        self.driver.same(
            "eventtime.explain (window_start, window_end, deadline, landing)",
            got,
            expected,
        );
        // The contract fixes what the explanation says, not its sentences: the words and bounds
        // below must be in it.
        let outcome = self.model.outcome(&keys, t);
        self.stats.probes[match &outcome {
            Outcome::Refused => 0,
            Outcome::New { purged } if purged.is_empty() => 1,
            Outcome::New { .. } => 2,
            Outcome::Join(_) => 3,
            Outcome::Merge { .. } => 4,
        }] += 1;
        let mut needles = Vec::new();
        match &outcome {
            Outcome::Refused => needles.push("refused".to_string()),
            Outcome::New { purged } => {
                needles.push(format!("new session {}", range_text((t, t + g))));
                if !purged.is_empty() {
                    needles.push("purged".into());
                }
                needles.extend(purged.iter().map(|&r| range_text(r)));
            }
            Outcome::Join(r) => needles.push(format!("join session {}", range_text(*r))),
            Outcome::Merge { members, into } => {
                needles.push("merge".into());
                needles.extend(members.iter().map(|&r| range_text(r)));
                needles.push(format!("into the new session {}", range_text(*into)));
            }
        }
        let absent: Vec<&String> = needles
            .iter()
            .filter(|n| !explanation.contains(n.as_str()))
            .collect();
        assert!(
            absent.is_empty(),
            "{}: eventtime.explain's explanation does not say what the row would do ({outcome:?}): \
             it lacks {absent:?}\n  explanation: {explanation}",
            self.driver.ctx()
        );
        self.driver.action = action;
    }

    fn check_no_state(&mut self) {
        assert_eq!(
            self.model.live().count(),
            0,
            "{}: the model still has live sessions",
            self.driver.ctx()
        );
        let got = self.driver.rows(&format!(
            "SELECT state_rows::text, open_windows::text FROM eventtime.pipelines WHERE name = {}",
            quote_literal(self.cfg.pipeline)
        ));
        assert_eq!(
            got,
            vec![vec![Some("0".to_string()), Some("0".to_string())]],
            "{}: (state_rows, open_windows) after watermark 'infinity'",
            self.driver.ctx()
        );
    }
}

/// `[start, end)` with both bounds as PostgreSQL prints a timestamptz in UTC.
fn range_text((start, end): (i64, i64)) -> String {
    format!("[{}, {})", pg_timestamp(start), pg_timestamp(end))
}

/// A timestamptz as PostgreSQL prints it in UTC: microseconds only when not zero, without
/// trailing zeros.
fn pg_timestamp(t: i64) -> String {
    let dt = chrono::DateTime::from_timestamp_micros(t).expect("timestamp within chrono's range");
    let mut out = dt.format("%Y-%m-%d %H:%M:%S").to_string();
    let micros = t.rem_euclid(SECOND);
    if micros != 0 {
        let frac = format!(".{micros:06}");
        out += frac.trim_end_matches('0');
    }
    out + "+00"
}
