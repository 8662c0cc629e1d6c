//! Session windows (SPEC §7 and the session contract): the pipeline `visits` on `events` (key
//! `user_id`, event id `click_id`, `session_gap` 5 minutes, lateness 15 minutes), a model that
//! replays the committed statements and advances, the checks that compare the pipeline's views
//! with it, and the threads of the concurrent and crash runs of `tests/cases/sessions.rs`.
//!
//! **Order.** Whether rows merge depends on the order of the statements of one key and of the
//! advances, which no client can see. So every ingest transaction writes a row to `batches` right
//! after its statement, and every advance writes one to `advances` in its own statement, each
//! with a number drawn from the sequence `log_order` while the statement still holds its locks:
//! ingest statements of one key serialize (a transaction-level lock per key, held until commit),
//! and ingest and advances serialize. So ordering by that number orders the statements of one key
//! and the advances as the pipeline applied them, and `batches.wm` (the watermark read after the
//! statement, in its transaction) is the watermark its rows were classified against, which must
//! be that of the last advance before it.
//!
//! **Model.** `Model` is the contract written as code: per key, the live sessions (fired or
//! not) with their rows' aggregates and the version they last published; an ingest statement
//! classifies its rows against its watermark (dedup per key and event id, then open, late or
//! refused on the row's own window `[t, t + gap)`), groups the accepted rows of each key with its
//! live sessions into islands of strict overlap and forms, joins or merges sessions; an advance
//! fires (version 1, `main`) and purges. Replaying the log over committed data gives the exact
//! history, `_latest`, `_sealed`, refused rows, the number of duplicates, what each advance and
//! each `eventtime.ingest` call must have returned. This holds at any committed moment, so the
//! same comparison runs mid-run (one REPEATABLE READ snapshot), right after each crash recovery
//! and at the end.
//!
//! **Without the model.** `invariants` checks what must hold whatever the order: each version
//! written once, versions gapless per session, one `merged` version at most and the last, its
//! values those of the version before, its `merged_into` a `[)` range strictly containing the
//! session; at the end, every committed row accounted for once (`_latest` + refused + duplicates)
//! and every `merged_into` inside a session in history.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use postgres::{Client, GenericClient, IsolationLevel};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cluster::{Cluster, SUPERUSER};
use crate::db::{classify, Failure};
use crate::rows::{send, Counts, Method, SendError, TableSpec, Values};
use crate::workload::{connect, guarded, micros_sql, ts_text, Shared, INFINITY, MINUTE, OWNER};

pub const PIPELINE: &str = "visits";
pub const GAP: i64 = 5 * MINUTE;
pub const LATENESS: i64 = 15 * MINUTE;

/// The source table `events` (the name `workload::create_db` expects), the logs of statements
/// and advances, and the pipeline; created by `OWNER`.
pub const SETUP: &str = "
CREATE TABLE events (
    delivery_id bigint PRIMARY KEY,
    batch_id    bigint NOT NULL,
    click_id    bigint NOT NULL,
    user_id     text,
    amount      bigint NOT NULL,
    ts          timestamptz NOT NULL
);
-- Drawn while a statement or an advance holds its locks: the order the pipeline applied them in.
CREATE SEQUENCE log_order;
-- One row per committed ingest statement, in its transaction, right after it: its place in the
-- order and the watermark its rows were classified against.
CREATE TABLE batches (batch_id bigint PRIMARY KEY, seq bigint NOT NULL UNIQUE, wm timestamptz);
-- One row per committed advance, written by the statement that advances (with what it returned).
CREATE TABLE advances (seq bigint PRIMARY KEY, w timestamptz NOT NULL, fired bigint NOT NULL,
                       purged bigint NOT NULL);
SELECT eventtime.create_pipeline(
    name => 'visits', source => 'events', event_time => 'ts',
    key => ARRAY['user_id'], event_id => 'click_id',
    allowed_lateness => interval '15 minutes',
    aggregates => 'count(*) AS n, sum(amount) AS total, min(amount) AS lo, max(amount) AS hi',
    session_gap => interval '5 minutes');
";

/// Written by every ingest transaction right after its statement (see the module comment).
pub const LOG_BATCH: &str = "INSERT INTO batches (batch_id, seq, wm)
     SELECT $1, nextval('log_order'), watermark FROM _eventtime.pipeline WHERE name = 'visits'";

/// Advances to `$1` (text) and logs it, in one statement.
pub const ADVANCE: &str = "INSERT INTO advances (seq, w, fired, purged)
     SELECT nextval('log_order'), watermark, windows_fired, windows_purged
     FROM eventtime.advance_watermark('visits', $1::text::timestamptz)";

pub fn table() -> TableSpec {
    TableSpec {
        sql_name: "public.events".into(),
        columns: [
            "delivery_id",
            "batch_id",
            "click_id",
            "user_id",
            "amount",
            "ts",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        pipeline: PIPELINE.into(),
    }
}

pub type Key = Option<String>;

fn key_text(k: &Key) -> &str {
    k.as_deref().unwrap_or("NULL")
}

/// A time as `HH:MM:SS` after its date when that is 2026-01-01, else in full (short diffs).
pub fn t(us: i64) -> String {
    let s = ts_text(us);
    if us == INFINITY {
        return s;
    }
    let s = s
        .trim_end_matches("+00")
        .trim_end_matches(".000000")
        .to_string();
    s.strip_prefix("2026-01-01 ")
        .map(str::to_string)
        .unwrap_or(s)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Click {
    pub id: i64,
    pub key: Key,
    pub amount: i64,
    pub ts: i64,
}

impl Click {
    pub fn values(&self, delivery_id: i64, batch_id: i64) -> Values {
        vec![
            Some(delivery_id.to_string()),
            Some(batch_id.to_string()),
            Some(self.id.to_string()),
            self.key.clone(),
            Some(self.amount.to_string()),
            Some(ts_text(self.ts)),
        ]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Agg {
    pub n: i64,
    pub total: i64,
    pub lo: i64,
    pub hi: i64,
}

impl Agg {
    pub fn one(amount: i64) -> Agg {
        Agg {
            n: 1,
            total: amount,
            lo: amount,
            hi: amount,
        }
    }
    pub fn plus(self, o: Agg) -> Agg {
        Agg {
            n: self.n + o.n,
            total: self.total + o.total,
            lo: self.lo.min(o.lo),
            hi: self.hi.max(o.hi),
        }
    }
}

/// (key, window_start, window_end): what identifies a session.
pub type SessionId = (Key, i64, i64);

/// One version of a session, as in `<p>_history` (without `sealed` and `fired_at`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub key: Key,
    pub start: i64,
    pub end: i64,
    pub version: i32,
    pub kind: String,
    pub merged_into: Option<(i64, i64)>,
    pub agg: Agg,
    pub watermark: i64,
}

impl Version {
    pub fn session(&self) -> SessionId {
        (self.key.clone(), self.start, self.end)
    }
    pub fn render(&self) -> String {
        format!(
            "{} [{}, {}) v{} {}{} n={} total={} lo={} hi={} wm={}",
            key_text(&self.key),
            t(self.start),
            t(self.end),
            self.version,
            self.kind,
            self.merged_into
                .map(|(a, b)| format!(" into [{}, {})", t(a), t(b)))
                .unwrap_or_default(),
            self.agg.n,
            self.agg.total,
            self.agg.lo,
            self.agg.hi,
            t(self.watermark)
        )
    }
}

/// A row of `<p>_refused`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Refused {
    pub key: Key,
    pub id: i64,
    pub ts: i64,
    pub start: i64,
    pub end: i64,
    pub deadline: i64,
    pub watermark: i64,
}

impl Refused {
    fn render(&self) -> String {
        format!(
            "{} id {} at {}: window [{}, {}) deadline {} refused at watermark {}",
            key_text(&self.key),
            self.id,
            t(self.ts),
            t(self.start),
            t(self.end),
            t(self.deadline),
            t(self.watermark)
        )
    }
}

/// A committed ingest statement: its rows, its place in the log and its watermark.
#[derive(Debug, Clone)]
pub struct Statement {
    pub batch: i64,
    pub seq: i64,
    pub wm: Option<i64>,
    pub rows: Vec<Click>,
}

/// A committed advance and what it returned.
#[derive(Debug, Clone, Copy)]
pub struct AdvanceRec {
    pub seq: i64,
    pub w: i64,
    pub fired: i64,
    pub purged: i64,
}

#[derive(Debug, Clone)]
struct Live {
    start: i64,
    end: i64,
    agg: Agg,
    /// The version it last published; 0: never fired.
    version: i32,
    published: Agg,
}

/// What the replay saw happen, to tell whether a run exercised the interesting cases.
#[derive(Debug, Default, Clone)]
pub struct ReplayStats {
    pub open: i64,
    pub late: i64,
    pub refused: i64,
    pub duplicates: i64,
    pub sessions_formed: i64,
    /// A new session already due when formed: version 1 `late`.
    pub late_first: i64,
    pub main_fired: i64,
    /// Rows joining a fired session without changing its bounds: version v+1 `late`.
    pub late_joins: i64,
    /// Islands that formed a new session from live sessions (case 3 of the contract).
    pub merges: i64,
    /// Of those, islands with two or more live sessions.
    pub bridges: i64,
    /// Absorbed sessions that had published (a `merged` version each) or had not (no trace).
    pub absorbed_fired: i64,
    pub absorbed_unfired: i64,
    pub purged: i64,
    /// Accepted rows whose window overlaps a purged session of their key (they cannot join it).
    pub rows_over_purged: i64,
}

/// The contract as code (see the module comment).
pub struct Model {
    pub gap: i64,
    pub lateness: i64,
    pub watermark: Option<i64>,
    live: HashMap<Key, Vec<Live>>,
    purged: HashMap<Key, Vec<(i64, i64)>>,
    seen: HashSet<(Key, i64)>,
    pub history: Vec<Version>,
    pub refused: Vec<Refused>,
    pub stats: ReplayStats,
}

impl Model {
    pub fn new(gap: i64, lateness: i64) -> Model {
        Model {
            gap,
            lateness,
            watermark: None,
            live: HashMap::new(),
            purged: HashMap::new(),
            seen: HashSet::new(),
            history: Vec::new(),
            refused: Vec::new(),
            stats: ReplayStats::default(),
        }
    }

    /// `advance_watermark(p, w)`: fires every unfired live session with `end <= w`, then purges
    /// every live session with `end + lateness <= w`. Returns (fired, purged).
    pub fn advance(&mut self, w: i64) -> (i64, i64) {
        let (mut fired, mut purged) = (0, 0);
        for (key, sessions) in self.live.iter_mut() {
            for s in sessions.iter_mut() {
                if s.version == 0 && s.end <= w {
                    s.version = 1;
                    s.published = s.agg;
                    self.history.push(Version {
                        key: key.clone(),
                        start: s.start,
                        end: s.end,
                        version: 1,
                        kind: "main".into(),
                        merged_into: None,
                        agg: s.agg,
                        watermark: w,
                    });
                    fired += 1;
                }
            }
            let lateness = self.lateness;
            let gone = self.purged.entry(key.clone()).or_default();
            sessions.retain(|s| {
                if s.end.saturating_add(lateness) <= w {
                    gone.push((s.start, s.end));
                    purged += 1;
                    false
                } else {
                    true
                }
            });
        }
        self.stats.main_fired += fired;
        self.stats.purged += purged;
        self.watermark = Some(w);
        (fired, purged)
    }

    /// One ingest statement classified against `w`; returns what `eventtime.ingest` counts:
    /// accepted (open), late, refused, duplicates.
    pub fn ingest(&mut self, w: Option<i64>, rows: &[Click]) -> Counts {
        let mut counts = [0i64; 4];
        let mut accepted: BTreeMap<Key, Vec<(i64, Agg)>> = BTreeMap::new();
        for r in rows {
            if !self.seen.insert((r.key.clone(), r.id)) {
                counts[3] += 1;
                continue;
            }
            let end = r.ts + self.gap;
            let deadline = end + self.lateness;
            match w {
                Some(w) if w >= deadline => {
                    counts[2] += 1;
                    self.refused.push(Refused {
                        key: r.key.clone(),
                        id: r.id,
                        ts: r.ts,
                        start: r.ts,
                        end,
                        deadline,
                        watermark: w,
                    });
                }
                Some(w) if w >= end => {
                    counts[1] += 1;
                    accepted
                        .entry(r.key.clone())
                        .or_default()
                        .push((r.ts, Agg::one(r.amount)));
                }
                _ => {
                    counts[0] += 1;
                    accepted
                        .entry(r.key.clone())
                        .or_default()
                        .push((r.ts, Agg::one(r.amount)));
                }
            }
        }
        self.stats.open += counts[0];
        self.stats.late += counts[1];
        self.stats.refused += counts[2];
        self.stats.duplicates += counts[3];
        for (key, rows) in accepted {
            self.merge(key, rows, w);
        }
        counts
    }

    fn write(&mut self, v: Version) {
        self.history.push(v);
    }

    /// Groups the accepted rows of one key with its live sessions into islands of strict overlap
    /// and applies the three cases of the contract to each island with a new row.
    fn merge(&mut self, key: Key, rows: Vec<(i64, Agg)>, w: Option<i64>) {
        let gap = self.gap;
        if let Some(gone) = self.purged.get(&key) {
            for (ts, _) in &rows {
                if gone.iter().any(|&(s, e)| *ts < e && ts + gap > s) {
                    self.stats.rows_over_purged += 1;
                }
            }
        }
        let live = self.live.remove(&key).unwrap_or_default();
        // (start, end, Ok(live index) | Err(row index)), by start.
        let mut items: Vec<(i64, i64, Result<usize, usize>)> = live
            .iter()
            .enumerate()
            .map(|(i, s)| (s.start, s.end, Ok(i)))
            .chain(
                rows.iter()
                    .enumerate()
                    .map(|(j, (ts, _))| (*ts, ts + gap, Err(j))),
            )
            .collect();
        items.sort_by_key(|x| (x.0, x.1));
        // Connected components under strict overlap: sorted by start, an interval joins the
        // current component iff it starts before the component's end (touching stays apart).
        struct Island {
            start: i64,
            end: i64,
            members: Vec<usize>,
            rows: Vec<usize>,
        }
        let mut islands: Vec<Island> = Vec::new();
        for (s, e, it) in items {
            let join = islands.last().is_some_and(|c| s < c.end);
            if !join {
                islands.push(Island {
                    start: s,
                    end: e,
                    members: Vec::new(),
                    rows: Vec::new(),
                });
            }
            let c = islands.last_mut().unwrap();
            c.end = c.end.max(e);
            match it {
                Ok(i) => c.members.push(i),
                Err(j) => c.rows.push(j),
            }
        }
        let mut taken = vec![false; live.len()];
        let mut next: Vec<Live> = Vec::new();
        for island in islands {
            if island.rows.is_empty() {
                continue;
            }
            let row_agg = island
                .rows
                .iter()
                .map(|&j| rows[j].1)
                .reduce(Agg::plus)
                .unwrap();
            let (start, end) = (island.start, island.end);
            let due = w.is_some_and(|w| end <= w);
            let same = island.members.len() == 1 && {
                let m = &live[island.members[0]];
                m.start == start && m.end == end
            };
            if same {
                let i = island.members[0];
                taken[i] = true;
                let mut s = live[i].clone();
                s.agg = s.agg.plus(row_agg);
                if s.version >= 1 {
                    s.version += 1;
                    s.published = s.agg;
                    self.stats.late_joins += 1;
                    self.write(Version {
                        key: key.clone(),
                        start,
                        end,
                        version: s.version,
                        kind: "late".into(),
                        merged_into: None,
                        agg: s.agg,
                        watermark: w.expect("a fired session implies a watermark"),
                    });
                }
                next.push(s);
                continue;
            }
            let mut agg = row_agg;
            if !island.members.is_empty() {
                self.stats.merges += 1;
                if island.members.len() >= 2 {
                    self.stats.bridges += 1;
                }
            }
            for &i in &island.members {
                taken[i] = true;
                let m = &live[i];
                agg = agg.plus(m.agg);
                if m.version >= 1 {
                    self.stats.absorbed_fired += 1;
                    let v = Version {
                        key: key.clone(),
                        start: m.start,
                        end: m.end,
                        version: m.version + 1,
                        kind: "merged".into(),
                        merged_into: Some((start, end)),
                        agg: m.published,
                        watermark: w.expect("a fired session implies a watermark"),
                    };
                    self.write(v);
                } else {
                    self.stats.absorbed_unfired += 1;
                }
            }
            self.stats.sessions_formed += 1;
            let mut s = Live {
                start,
                end,
                agg,
                version: 0,
                published: agg,
            };
            if due {
                s.version = 1;
                self.stats.late_first += 1;
                self.write(Version {
                    key: key.clone(),
                    start,
                    end,
                    version: 1,
                    kind: "late".into(),
                    merged_into: None,
                    agg,
                    watermark: w.unwrap(),
                });
            }
            next.push(s);
        }
        for (i, s) in live.into_iter().enumerate() {
            if !taken[i] {
                next.push(s);
            }
        }
        next.sort_by_key(|s| s.start);
        debug_assert!(next.windows(2).all(|p| p[0].end <= p[1].start));
        self.live.insert(key, next);
    }

    /// `<p>_latest` as the contract defines it: the greatest version of each session, unless it
    /// is `merged`.
    pub fn latest(&self) -> Vec<Version> {
        latest_of(self.history.iter())
    }
}

pub fn latest_of<'a>(history: impl Iterator<Item = &'a Version>) -> Vec<Version> {
    let mut last: HashMap<SessionId, &Version> = HashMap::new();
    for v in history {
        let e = last.entry(v.session()).or_insert(v);
        if v.version > e.version {
            *e = v;
        }
    }
    let mut out: Vec<Version> = last
        .into_values()
        .filter(|v| v.kind != "merged")
        .cloned()
        .collect();
    out.sort();
    out
}

/// The replay of a snapshot's log: the model's end state, the violations of the order itself
/// (a statement classified against another watermark than the last advance before it, an
/// advance that returned other counts), and what each statement had to count.
pub struct Replay {
    pub model: Model,
    pub violations: Vec<String>,
    pub counts: HashMap<i64, Counts>,
}

pub fn replay(statements: &[Statement], advances: &[AdvanceRec]) -> Replay {
    enum Ev<'a> {
        S(&'a Statement),
        A(&'a AdvanceRec),
    }
    let mut evs: Vec<(i64, Ev)> = statements
        .iter()
        .map(|s| (s.seq, Ev::S(s)))
        .chain(advances.iter().map(|a| (a.seq, Ev::A(a))))
        .collect();
    evs.sort_by_key(|e| e.0);
    let mut m = Model::new(GAP, LATENESS);
    let mut violations = Vec::new();
    let mut counts = HashMap::new();
    for (_, e) in evs {
        match e {
            Ev::A(a) => {
                if m.watermark.is_some_and(|w| w >= a.w) {
                    violations.push(format!(
                        "advance {} (log {}) is not ahead of the watermark {} before it",
                        t(a.w),
                        a.seq,
                        t(m.watermark.unwrap())
                    ));
                }
                let (fired, purged) = m.advance(a.w);
                if (fired, purged) != (a.fired, a.purged) {
                    violations.push(format!(
                        "advance to {} (log {}) returned windows_fired {} and windows_purged {}; the sessions it had to fire and purge: {fired} and {purged}",
                        t(a.w), a.seq, a.fired, a.purged
                    ));
                }
            }
            Ev::S(s) => {
                if s.wm != m.watermark {
                    violations.push(format!(
                        "statement of batch {} (log {}) committed under watermark {} but the last advance committed before it set {} (ingest and advances must serialize)",
                        s.batch,
                        s.seq,
                        s.wm.map(t).unwrap_or("NULL".into()),
                        m.watermark.map(t).unwrap_or("NULL".into())
                    ));
                }
                let c = m.ingest(s.wm, &s.rows);
                counts.insert(s.batch, c);
            }
        }
    }
    Replay {
        model: m,
        violations,
        counts,
    }
}

// ---------------------------------------------------------------------------------------------
// Reading the pipeline
// ---------------------------------------------------------------------------------------------

/// A row of `<p>_history`, with what the model does not predict.
#[derive(Debug, Clone)]
pub struct HistRow {
    pub v: Version,
    pub sealed: bool,
    /// `merged_into` is NULL or has bounds `[)`.
    pub bounds_ok: bool,
    /// The whole row as text (`fired_at` included), for the append-only check.
    pub text: String,
}

/// Everything of the pipeline and its logs, read in one snapshot.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub statements: Vec<Statement>,
    pub advances: Vec<AdvanceRec>,
    /// Source rows whose batch has no `batches` row (cannot happen: same transaction).
    pub orphans: i64,
    pub source_rows: i64,
    pub history: Vec<HistRow>,
    pub latest: Vec<Version>,
    pub sealed: Vec<Version>,
    pub refused: Vec<Refused>,
    /// Refused rows as text (whole row), by (key, event id).
    pub refused_text: Vec<((Key, i64), String)>,
    pub duplicates: i64,
    pub watermark: Option<i64>,
    pub state_rows: i64,
}

fn version_sql(view: &str, with_merged: bool) -> String {
    let merged = if with_merged {
        format!(
            "{}, {}, coalesce(lower_inc(merged_into) AND NOT upper_inc(merged_into), true)",
            micros_sql("lower(merged_into)"),
            micros_sql("upper(merged_into)")
        )
    } else {
        "NULL::bigint, NULL::bigint, true".into()
    };
    format!(
        "SELECT user_id, {}, {}, version::int4, kind::text, {merged},
                n::int8, total::int8, lo::int8, hi::int8, sealed, {}, v::text
         FROM {view} v",
        micros_sql("window_start"),
        micros_sql("window_end"),
        micros_sql("watermark")
    )
}

fn read_versions<C: GenericClient>(
    c: &mut C,
    view: &str,
    with_merged: bool,
) -> Result<Vec<HistRow>, postgres::Error> {
    let rows = c.query(&version_sql(view, with_merged), &[])?;
    Ok(rows
        .iter()
        .map(|r| {
            let lo: Option<i64> = r.get(5);
            let hi: Option<i64> = r.get(6);
            HistRow {
                v: Version {
                    key: r.get(0),
                    start: r.get(1),
                    end: r.get(2),
                    version: r.get(3),
                    kind: r.get(4),
                    merged_into: lo.zip(hi),
                    agg: Agg {
                        n: r.get(8),
                        total: r.get(9),
                        lo: r.get(10),
                        hi: r.get(11),
                    },
                    watermark: r.get(13),
                },
                sealed: r.get(12),
                bounds_ok: r.get(7),
                text: r.get(14),
            }
        })
        .collect())
}

/// Reads the logs and the pipeline's views in one REPEATABLE READ snapshot.
pub fn read_snapshot(c: &mut Client) -> Result<Snapshot, postgres::Error> {
    let mut tx = c
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()?;
    let mut s = Snapshot::default();
    let mut by_batch: HashMap<i64, usize> = HashMap::new();
    for r in tx.query(
        &format!(
            "SELECT batch_id, seq, {} FROM batches ORDER BY seq",
            micros_sql("wm")
        ),
        &[],
    )? {
        by_batch.insert(r.get(0), s.statements.len());
        s.statements.push(Statement {
            batch: r.get(0),
            seq: r.get(1),
            wm: r.get(2),
            rows: Vec::new(),
        });
    }
    for r in tx.query(
        &format!(
            "SELECT batch_id, click_id, user_id, amount, {} FROM events ORDER BY delivery_id",
            micros_sql("ts")
        ),
        &[],
    )? {
        s.source_rows += 1;
        let b: i64 = r.get(0);
        match by_batch.get(&b) {
            Some(&i) => s.statements[i].rows.push(Click {
                id: r.get(1),
                key: r.get(2),
                amount: r.get(3),
                ts: r.get(4),
            }),
            None => s.orphans += 1,
        }
    }
    for r in tx.query(
        &format!(
            "SELECT seq, {}, fired, purged FROM advances ORDER BY seq",
            micros_sql("w")
        ),
        &[],
    )? {
        s.advances.push(AdvanceRec {
            seq: r.get(0),
            w: r.get(1),
            fired: r.get(2),
            purged: r.get(3),
        });
    }
    s.history = read_versions(&mut tx, "visits_history", true)?;
    s.latest = read_versions(&mut tx, "visits_latest", false)?
        .into_iter()
        .map(|h| h.v)
        .collect();
    s.sealed = read_versions(&mut tx, "visits_sealed", false)?
        .into_iter()
        .map(|h| h.v)
        .collect();
    for r in tx.query(
        &format!(
            "SELECT user_id, event_id::int8, {}, {}, {}, {}, {}, r::text FROM visits_refused r",
            micros_sql("event_time"),
            micros_sql("window_start"),
            micros_sql("window_end"),
            micros_sql("deadline"),
            micros_sql("watermark")
        ),
        &[],
    )? {
        let x = Refused {
            key: r.get(0),
            id: r.get(1),
            ts: r.get(2),
            start: r.get(3),
            end: r.get(4),
            deadline: r.get(5),
            watermark: r.get(6),
        };
        s.refused_text.push(((x.key.clone(), x.id), r.get(7)));
        s.refused.push(x);
    }
    let r = tx.query_one(
        &format!(
            "SELECT duplicates, state_rows, {} FROM eventtime.pipelines WHERE name = 'visits'",
            micros_sql("watermark")
        ),
        &[],
    )?;
    s.duplicates = r.get(0);
    s.state_rows = r.get(1);
    s.watermark = r.get(2);
    tx.commit()?;
    Ok(s)
}

// ---------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------

/// What holds whatever the order of the statements (see the module comment). `final_` adds the
/// checks that need every session fired (after `infinity`).
pub fn invariants(s: &Snapshot, final_: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut by_session: BTreeMap<SessionId, Vec<&HistRow>> = BTreeMap::new();
    for h in &s.history {
        by_session.entry(h.v.session()).or_default().push(h);
    }
    for (id, vs) in by_session.iter_mut() {
        vs.sort_by_key(|h| h.v.version);
        let versions: Vec<i32> = vs.iter().map(|h| h.v.version).collect();
        let lines = || {
            vs.iter()
                .map(|h| format!("\n    {}", h.v.render()))
                .collect::<String>()
        };
        if versions.windows(2).any(|p| p[0] == p[1]) {
            out.push(format!(
                "session {} [{}, {}): a version number written twice:{}",
                key_text(&id.0),
                t(id.1),
                t(id.2),
                lines()
            ));
        } else if versions != (1..=vs.len() as i32).collect::<Vec<_>>() {
            out.push(format!(
                "session {} [{}, {}): versions {versions:?} are not gapless from 1:{}",
                key_text(&id.0),
                t(id.1),
                t(id.2),
                lines()
            ));
        }
        let merged = vs.iter().filter(|h| h.v.kind == "merged").count();
        if merged > 1 || (merged == 1 && vs.last().unwrap().v.kind != "merged") {
            out.push(format!(
                "session {} [{}, {}): a `merged` version must be its last and only one:{}",
                key_text(&id.0),
                t(id.1),
                t(id.2),
                lines()
            ));
        }
        for (i, h) in vs.iter().enumerate() {
            let v = &h.v;
            let ok_kind = if v.version == 1 {
                v.kind == "main" || v.kind == "late"
            } else {
                v.kind == "late" || v.kind == "merged"
            };
            if !ok_kind {
                out.push(format!("version of kind {:?}: {}", v.kind, v.render()));
            }
            if h.sealed != (v.version == 1) {
                out.push(format!("sealed = {} on {}", h.sealed, v.render()));
            }
            if v.start >= v.end || v.end - v.start < GAP {
                out.push(format!("a session shorter than the gap: {}", v.render()));
            }
            match (v.kind == "merged", v.merged_into) {
                (true, None) => out.push(format!(
                    "merged version without merged_into: {}",
                    v.render()
                )),
                (false, Some(_)) => out.push(format!(
                    "merged_into on a version of kind {}: {}",
                    v.kind,
                    v.render()
                )),
                (true, Some((a, b))) => {
                    if !(a <= v.start && v.end <= b && (a, b) != (v.start, v.end)) {
                        out.push(format!(
                            "merged_into does not strictly contain the session: {}",
                            v.render()
                        ));
                    }
                    if !h.bounds_ok {
                        out.push(format!("merged_into has bounds other than [): {}", h.text));
                    }
                }
                (false, None) => {}
            }
            if i > 0 {
                let p = &vs[i - 1].v;
                if v.watermark < p.watermark {
                    out.push(format!(
                        "a version's watermark went back: {} after {}",
                        v.render(),
                        p.render()
                    ));
                }
                if v.kind == "merged" && v.agg != p.agg {
                    out.push(format!(
                        "a merged version's values differ from the version before it: {} after {}",
                        v.render(),
                        p.render()
                    ));
                }
                if v.kind == "late" && v.agg.n <= p.agg.n {
                    out.push(format!(
                        "a late version with no more rows than the one before: {} after {}",
                        v.render(),
                        p.render()
                    ));
                }
            }
        }
    }
    // _latest and _sealed, from history as the contract defines them.
    let hist: Vec<Version> = s.history.iter().map(|h| h.v.clone()).collect();
    diff(
        "_latest against the greatest non-merged version of each session in _history",
        &latest_of(hist.iter()),
        &s.latest,
        &mut out,
    );
    let mut ones: Vec<Version> = hist.iter().filter(|v| v.version == 1).cloned().collect();
    ones.sort();
    diff(
        "_sealed against the version-1 rows of _history",
        &ones,
        &s.sealed,
        &mut out,
    );
    if s.orphans > 0 {
        out.push(format!(
            "{} source rows whose transaction has no batches row",
            s.orphans
        ));
    }
    if final_ {
        let latest_n: i64 = s.latest.iter().map(|v| v.agg.n).sum();
        let refused = s.refused.len() as i64;
        if latest_n + refused + s.duplicates != s.source_rows {
            out.push(format!(
                "accounting: sum(n) over _latest {latest_n} + refused {refused} + duplicates {} = {} != {} committed source rows",
                s.duplicates,
                latest_n + refused + s.duplicates,
                s.source_rows
            ));
        }
        if s.state_rows != 0 {
            out.push(format!("{} state rows left after infinity", s.state_rows));
        }
        // Every merged_into names a session that fired, or one that was absorbed before it
        // fired into a bigger one, which fired by infinity at the latest.
        let sessions: HashMap<&Key, Vec<(i64, i64)>> =
            by_session.keys().fold(HashMap::new(), |mut m, (k, a, b)| {
                m.entry(k).or_insert_with(Vec::new).push((*a, *b));
                m
            });
        for h in &s.history {
            if let Some((a, b)) = h.v.merged_into {
                let inside = sessions
                    .get(&h.v.key)
                    .is_some_and(|v| v.iter().any(|&(x, y)| x <= a && b <= y));
                if !inside {
                    out.push(format!(
                        "merged_into names no session in history, nor one inside a session in history: {}",
                        h.v.render()
                    ));
                }
            }
        }
    }
    out
}

/// Compares two multisets of versions; pushes one violation listing what is missing from
/// `got` and what it has beyond `want`.
fn diff(what: &str, want: &[Version], got: &[Version], out: &mut Vec<String>) -> bool {
    let mut m: BTreeMap<String, i64> = BTreeMap::new();
    for v in want {
        *m.entry(v.render()).or_default() += 1;
    }
    for v in got {
        *m.entry(v.render()).or_default() -= 1;
    }
    let missing: Vec<&String> = m.iter().filter(|x| *x.1 > 0).map(|x| x.0).collect();
    let extra: Vec<&String> = m.iter().filter(|x| *x.1 < 0).map(|x| x.0).collect();
    if missing.is_empty() && extra.is_empty() {
        return true;
    }
    let mut s = format!(
        "{what}: {} missing, {} unexpected",
        missing.len(),
        extra.len()
    );
    for x in missing.iter().take(12) {
        s += &format!("\n    missing:    {x}");
    }
    for x in extra.iter().take(12) {
        s += &format!("\n    unexpected: {x}");
    }
    out.push(s);
    false
}

/// Everything of one key around `[lo, hi)`: the statements with rows there, the advances, and
/// the versions the model and the pipeline wrote. For a readable report of a mismatch.
fn context(s: &Snapshot, m: &Model, key: &Key, lo: i64, hi: i64) -> String {
    let margin = GAP + LATENESS;
    let (lo, hi) = (lo - margin, hi.saturating_add(margin));
    let mut out = format!(
        "context of key {} around [{}, {}):",
        key_text(key),
        t(lo),
        t(hi)
    );
    let mut evs: Vec<(i64, String)> = Vec::new();
    for st in &s.statements {
        let rows: Vec<String> = st
            .rows
            .iter()
            .filter(|r| &r.key == key && r.ts + GAP > lo && r.ts < hi)
            .map(|r| format!("id {} at {} amount {}", r.id, t(r.ts), r.amount))
            .collect();
        if !rows.is_empty() {
            evs.push((
                st.seq,
                format!(
                    "log {}: batch {} at watermark {}: {}",
                    st.seq,
                    st.batch,
                    st.wm.map(t).unwrap_or("NULL".into()),
                    rows.join(", ")
                ),
            ));
        }
    }
    for a in &s.advances {
        if a.w >= lo && a.w <= hi.saturating_add(margin) {
            evs.push((
                a.seq,
                format!(
                    "log {}: advance to {} (fired {}, purged {})",
                    a.seq,
                    t(a.w),
                    a.fired,
                    a.purged
                ),
            ));
        }
    }
    evs.sort();
    for (_, e) in evs {
        out += &format!("\n    {e}");
    }
    let near = |v: &Version| &v.key == key && v.start < hi && v.end > lo;
    let mut want: Vec<&Version> = m.history.iter().filter(|v| near(v)).collect();
    want.sort();
    let mut got: Vec<&Version> = s.history.iter().map(|h| &h.v).filter(|v| near(v)).collect();
    got.sort();
    out += "\n  model history:";
    for v in want {
        out += &format!("\n    {}", v.render());
    }
    out += "\n  pipeline history:";
    for v in got {
        out += &format!("\n    {}", v.render());
    }
    out
}

/// What the clients saw: the batches whose COMMIT returned, and what each `eventtime.ingest`
/// call of those returned. Taken before a snapshot is read, everything in it must be there.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    pub committed: HashSet<i64>,
    pub counts: HashMap<i64, Counts>,
}

/// What `check` found, and the replay's statistics.
pub struct Checked {
    pub violations: Vec<String>,
    pub stats: ReplayStats,
}

/// The model-independent invariants, then the snapshot against the replay of its log: history,
/// `_latest`, `_sealed`, refused rows, duplicates, and the counts of the `eventtime.ingest`
/// calls whose results the clients received; and every transaction a client saw commit (`seen`,
/// taken before the snapshot) is in it.
pub fn check(s: &Snapshot, final_: bool, seen: &Seen) -> Checked {
    let mut out = invariants(s, final_);
    let r = replay(&s.statements, &s.advances);
    out.extend(r.violations.iter().take(10).cloned());
    let m = &r.model;
    let got: Vec<Version> = s.history.iter().map(|h| h.v.clone()).collect();
    let mut want = m.history.clone();
    want.sort();
    let n = out.len();
    if !diff(
        "_history against the model replaying the committed statements and advances",
        &want,
        &got,
        &mut out,
    ) {
        // The first differing version, with its surroundings.
        let mut w: HashSet<&Version> = want.iter().collect();
        let mut first: Option<&Version> = None;
        for v in &got {
            if !w.remove(v) && first.is_none_or(|f| v.start < f.start) {
                first = Some(v);
            }
        }
        for v in w {
            if first.is_none_or(|f| v.start < f.start) {
                first = Some(v);
            }
        }
        if let Some(f) = first {
            out[n] += &format!("\n  {}", context(s, m, &f.key, f.start, f.end));
        }
    }
    diff(
        "_latest against the model",
        &m.latest(),
        &s.latest,
        &mut out,
    );
    let mut want_refused: Vec<String> = m.refused.iter().map(Refused::render).collect();
    want_refused.sort();
    let mut got_refused: Vec<String> = s.refused.iter().map(Refused::render).collect();
    got_refused.sort();
    if want_refused != got_refused {
        let w: HashSet<&String> = want_refused.iter().collect();
        let g: HashSet<&String> = got_refused.iter().collect();
        let mut x = format!(
            "refused rows against the model: {} expected, {} there",
            want_refused.len(),
            got_refused.len()
        );
        for r in want_refused.iter().filter(|r| !g.contains(r)).take(8) {
            x += &format!("\n    missing:    {r}");
        }
        for r in got_refused.iter().filter(|r| !w.contains(r)).take(8) {
            x += &format!("\n    unexpected: {r}");
        }
        out.push(x);
    }
    if m.stats.duplicates != s.duplicates {
        out.push(format!(
            "eventtime.pipelines.duplicates is {}; the committed statements had {} duplicates",
            s.duplicates, m.stats.duplicates
        ));
    }
    let mut bad = Vec::new();
    for (b, c) in &seen.counts {
        if let Some(w) = r.counts.get(b) {
            if w != c {
                bad.push(format!(
                    "batch {b}: ingest() returned [accepted, late, refused, duplicates] = {c:?}, the model {w:?}"
                ));
            }
        }
    }
    bad.sort();
    if !bad.is_empty() {
        out.push(format!(
            "{} eventtime.ingest() results differ from the model:\n    {}",
            bad.len(),
            bad.iter()
                .take(10)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n    ")
        ));
    }
    let mut lost: Vec<i64> = seen
        .committed
        .iter()
        .filter(|b| !r.counts.contains_key(b))
        .copied()
        .collect();
    if !lost.is_empty() {
        lost.sort();
        out.push(format!(
            "{} transactions whose COMMIT returned are not there (batches {:?})",
            lost.len(),
            &lost[..lost.len().min(10)]
        ));
    }
    Checked {
        violations: out,
        stats: r.model.stats,
    }
}

/// The history rows seen so far; each later snapshot must still have every one of them,
/// unchanged (history and refused rows are append-only).
#[derive(Default)]
pub struct AppendOnly {
    history: HashMap<(SessionId, i32), String>,
    refused: HashMap<(Key, i64), String>,
    pub snapshots: u64,
}

impl AppendOnly {
    pub fn check(&mut self, s: &Snapshot) -> Vec<String> {
        let mut out = Vec::new();
        self.snapshots += 1;
        let history = s
            .history
            .iter()
            .map(|h| ((h.v.session(), h.v.version), &h.text));
        unchanged("history", &mut self.history, history, &mut out);
        let refused = s.refused_text.iter().map(|(k, x)| (k.clone(), x));
        unchanged("refused", &mut self.refused, refused, &mut out);
        out
    }
}

/// Each row of `seen` (its text, by key) is in `now` with the same text, or a violation (`what`
/// names the rows) goes to `out`; then `seen` takes the rows of `now` it did not have.
fn unchanged<'a, K: Eq + Hash>(
    what: &str,
    seen: &mut HashMap<K, String>,
    now: impl Iterator<Item = (K, &'a String)>,
    out: &mut Vec<String>,
) {
    let now: HashMap<K, &String> = now.collect();
    for (k, text) in seen.iter() {
        match now.get(k) {
            None => out.push(format!("a {what} row disappeared: {text}")),
            Some(x) if *x != text => out.push(format!(
                "a {what} row changed:\n    before: {text}\n    now:    {x}"
            )),
            _ => {}
        }
    }
    for (k, text) in now {
        seen.entry(k).or_insert_with(|| text.clone());
    }
}

// ---------------------------------------------------------------------------------------------
// Sending
// ---------------------------------------------------------------------------------------------

/// One ingest transaction: the statement, its `batches` row, a pause of `hold` with everything
/// still held, then COMMIT or ROLLBACK. Returns what `eventtime.ingest` returned.
pub fn ingest_tx(
    c: &mut Client,
    batch: i64,
    method: Method,
    rows: &[Values],
    commit: bool,
    hold: Duration,
) -> Result<Option<Counts>, SendError> {
    Ok(ingest_txn(c, &[(batch, method, rows)], commit, hold)?[0])
}

/// `ingest_tx` with several statements, each followed by its `batches` row.
pub fn ingest_txn(
    c: &mut Client,
    statements: &[(i64, Method, &[Values])],
    commit: bool,
    hold: Duration,
) -> Result<Vec<Option<Counts>>, SendError> {
    let mut tx = c.transaction()?;
    let mut out = Vec::with_capacity(statements.len());
    for (batch, method, rows) in statements {
        out.push(send(&mut tx, &table(), *method, rows)?);
        tx.execute(LOG_BATCH, &[batch])?;
    }
    if !hold.is_zero() {
        thread::sleep(hold);
    }
    if commit {
        tx.commit()?;
    } else {
        tx.rollback()?;
    }
    Ok(out)
}

pub fn random_method(rng: &mut ChaCha8Rng) -> Method {
    match rng.random_range(0..3) {
        0 => Method::Insert,
        1 => Method::Copy,
        _ => Method::Ingest,
    }
}

// ---------------------------------------------------------------------------------------------
// The concurrent run: writers, an advancer, a monitor, and (crash run) a killer
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct RunConfig {
    pub writers: usize,
    /// How long the writers run (at least until `kills` kills happened).
    pub secs: u64,
    pub keys: usize,
    pub crash: bool,
    pub kills: usize,
    /// Pause of a writer between transactions: uniform in 0..n ms.
    pub pause_ms: u64,
    /// Share of transactions with two ingest statements (the second sees the sessions the first
    /// formed, uncommitted; two such transactions can deadlock, and one then rolls back).
    pub two_statements: f64,
}

/// What the threads of a run share beyond `workload::Shared` (whose watermark, ids, abort flag,
/// kill counter and running-writer count they use).
pub struct Run {
    pub shared: Shared,
    pub pool: Mutex<Vec<Click>>,
    /// What the writers saw commit.
    pub seen: Mutex<Seen>,
    /// Set once the writers and the advancer are done: the monitor stops.
    pub done: AtomicBool,
    /// Writers inside an ingest transaction (the killer aims at them).
    pub in_ingest: AtomicUsize,
}

impl Run {
    pub fn new(writers: usize) -> Run {
        Run {
            shared: Shared::new(writers),
            pool: Mutex::new(Vec::new()),
            seen: Mutex::new(Seen::default()),
            done: AtomicBool::new(false),
            in_ingest: AtomicUsize::new(0),
        }
    }
}

#[derive(Debug, Default, Clone)]
pub struct WriterStats {
    pub committed: u64,
    pub rolled_back: u64,
    pub two_statement_transactions: u64,
    pub rows_committed: u64,
    pub statements: BTreeMap<&'static str, u64>,
    pub retries: BTreeMap<String, u64>,
    pub lost: u64,
}

impl WriterStats {
    pub fn merge(&mut self, o: &WriterStats) {
        self.committed += o.committed;
        self.rolled_back += o.rolled_back;
        self.two_statement_transactions += o.two_statement_transactions;
        self.rows_committed += o.rows_committed;
        self.lost += o.lost;
        for (k, v) in &o.statements {
            *self.statements.entry(k).or_default() += v;
        }
        for (k, v) in &o.retries {
            *self.retries.entry(k.clone()).or_default() += v;
        }
    }
}

fn minute_floor(us: i64) -> i64 {
    us.div_euclid(MINUTE) * MINUTE
}

/// One row around the watermark the advancer last committed: near it (open, forming and
/// extending sessions, often extending fired ones), late (bridging and extending fired sessions),
/// past the deadline, on the landing edges, or a redelivery (an exact copy, or the same key and
/// id at another time). Times are mostly whole minutes, so that windows often touch.
fn gen_click(rng: &mut ChaCha8Rng, run: &Run, keys: usize) -> Click {
    let w = run.shared.watermark.load(Ordering::SeqCst);
    if rng.random_bool(0.08) {
        let pool = run.pool.lock().unwrap();
        if !pool.is_empty() {
            let from = pool.len().saturating_sub(300);
            let mut c = pool[rng.random_range(from..pool.len())].clone();
            if rng.random_bool(0.3) {
                c.ts += rng.random_range(-3..=3) * MINUTE;
                c.amount = rng.random_range(1..=1000);
            }
            return c;
        }
    }
    let u: f64 = rng.random();
    let mut ts = if u < 0.45 {
        w + rng.random_range(-GAP..2 * GAP)
    } else if u < 0.72 {
        w - GAP - rng.random_range(0..LATENESS)
    } else if u < 0.80 {
        w - GAP - LATENESS - rng.random_range(0..60 * MINUTE)
    } else {
        // The edges of the landing rule, against the watermark the client knows.
        match rng.random_range(0..4) {
            0 => w - GAP,
            1 => w - GAP - LATENESS,
            2 => w - GAP - LATENESS + MINUTE,
            _ => w,
        }
    };
    if rng.random_bool(0.7) {
        ts = minute_floor(ts);
    }
    let key = if rng.random_bool(0.05) {
        None
    } else {
        Some(format!("u{}", rng.random_range(0..keys)))
    };
    Click {
        id: run.shared.next_event.fetch_add(1, Ordering::SeqCst),
        key,
        amount: rng.random_range(1..=1000),
        ts,
    }
}

/// 1 to 6 rows, and now and then an exact copy of one of them (a duplicate inside the
/// statement). Two rows of one statement with the same key and id are always exact copies: which
/// of two different ones a statement keeps is not defined.
fn gen_statement(rng: &mut ChaCha8Rng, run: &Run, keys: usize) -> Vec<Click> {
    let n = rng.random_range(1..=6);
    let mut out: Vec<Click> = Vec::with_capacity(n + 1);
    let mut ids: HashMap<(Key, i64), usize> = HashMap::new();
    for _ in 0..n {
        let c = gen_click(rng, run, keys);
        match ids.get(&(c.key.clone(), c.id)) {
            Some(&i) => {
                let copy = out[i].clone();
                out.push(copy);
            }
            None => {
                ids.insert((c.key.clone(), c.id), out.len());
                out.push(c);
            }
        }
    }
    if rng.random_bool(0.05) {
        let c = out[rng.random_range(0..out.len())].clone();
        out.push(c);
    }
    let mut pool = run.pool.lock().unwrap();
    pool.extend(out.iter().cloned());
    if pool.len() > 5000 {
        pool.drain(0..2500);
    }
    out
}

/// One writer: transactions of one statement (INSERT, COPY or `eventtime.ingest`), held open 0
/// to 25 ms after it, 20% rolled back. A deadlock or serialization failure is counted and the
/// statement dropped; in a crash run a lost connection too (the checks read what committed).
pub fn run_writer(
    cluster: &Cluster,
    run: &Run,
    idx: usize,
    seed: u64,
    cfg: &RunConfig,
) -> Result<WriterStats, String> {
    let r = guarded(&run.shared, &format!("writer {idx}"), || {
        writer_loop(cluster, run, idx, seed, cfg)
    });
    run.shared.workers_left.fetch_sub(1, Ordering::SeqCst);
    r
}

fn writer_loop(
    cluster: &Cluster,
    run: &Run,
    idx: usize,
    seed: u64,
    cfg: &RunConfig,
) -> Result<WriterStats, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (0x5E55_1011u64.wrapping_mul(idx as u64 + 1)));
    let mut st = WriterStats::default();
    let mut client = Some(connect(cluster, OWNER, &run.shared, cfg.crash)?);
    let started = Instant::now();
    loop {
        if run.shared.aborted() {
            return Err("aborted".into());
        }
        if started.elapsed() >= Duration::from_secs(cfg.secs)
            && run.shared.kills.load(Ordering::SeqCst) >= cfg.kills
        {
            return Ok(st);
        }
        let n = if rng.random_bool(cfg.two_statements) {
            2
        } else {
            1
        };
        let stmts: Vec<(i64, Method, Vec<Values>)> = (0..n)
            .map(|_| {
                let clicks = gen_statement(&mut rng, run, cfg.keys);
                let batch = run.shared.next_batch.fetch_add(1, Ordering::SeqCst);
                let rows = clicks
                    .iter()
                    .map(|c| {
                        c.values(
                            run.shared.next_delivery.fetch_add(1, Ordering::SeqCst),
                            batch,
                        )
                    })
                    .collect();
                (batch, random_method(&mut rng), rows)
            })
            .collect();
        let refs: Vec<(i64, Method, &[Values])> = stmts
            .iter()
            .map(|(b, m, r)| (*b, *m, r.as_slice()))
            .collect();
        let batch = stmts[0].0;
        let rows: usize = stmts.iter().map(|s| s.2.len()).sum();
        let commit = rng.random_bool(0.8);
        let hold = Duration::from_millis(rng.random_range(0..25));
        if client.is_none() {
            client = Some(connect(cluster, OWNER, &run.shared, cfg.crash)?);
        }
        run.in_ingest.fetch_add(1, Ordering::SeqCst);
        let r = ingest_txn(client.as_mut().unwrap(), &refs, commit, hold);
        run.in_ingest.fetch_sub(1, Ordering::SeqCst);
        match r {
            Ok(cs) => {
                if commit {
                    st.committed += 1;
                    st.rows_committed += rows as u64;
                    if n == 2 {
                        st.two_statement_transactions += 1;
                    }
                    let mut seen = run.seen.lock().unwrap();
                    for ((b, m, _), c) in refs.iter().zip(cs) {
                        *st.statements.entry(m.name()).or_default() += 1;
                        seen.committed.insert(*b);
                        if let Some(c) = c {
                            seen.counts.insert(*b, c);
                        }
                    }
                } else {
                    st.rolled_back += 1;
                }
            }
            Err(e) => match e.failure() {
                Failure::Retry(code) => *st.retries.entry(code).or_default() += 1,
                Failure::ConnectionLost(_) if cfg.crash => {
                    st.lost += 1;
                    client = None;
                    thread::sleep(Duration::from_millis(100));
                }
                f => {
                    return Err(format!(
                        "transaction of batch {batch} ({n} statements, {rows} rows): {f:?}"
                    ))
                }
            },
        }
        if cfg.pause_ms > 0 {
            thread::sleep(Duration::from_millis(rng.random_range(0..cfg.pause_ms)));
        }
    }
}

#[derive(Debug, Default, Clone)]
pub struct AdvancerStats {
    pub advances: u64,
    pub retries: BTreeMap<String, u64>,
    pub lost: u64,
}

fn read_watermark(c: &mut Client) -> Result<Option<i64>, postgres::Error> {
    Ok(c.query_one(
        &format!(
            "SELECT {} FROM _eventtime.pipeline WHERE name = 'visits'",
            micros_sql("watermark")
        ),
        &[],
    )?
    .get(0))
}

/// Advances the pipeline to `w` by `ADVANCE`, retrying 40P01/40001 and, in a crash run,
/// reconnecting (and looking whether the lost advance committed).
pub fn advance_to(
    client: &mut Option<Client>,
    cluster: &Cluster,
    run: &Run,
    crash: bool,
    w: i64,
    st: &mut AdvancerStats,
) -> Result<(), String> {
    for _ in 0..200 {
        if client.is_none() {
            let mut c = connect(cluster, OWNER, &run.shared, crash)?;
            match read_watermark(&mut c) {
                Ok(cur) => {
                    *client = Some(c);
                    if cur.is_some_and(|cur| cur >= w) {
                        st.advances += 1;
                        return Ok(());
                    }
                }
                Err(e) => match classify(&e) {
                    Failure::ConnectionLost(_) => continue,
                    f => return Err(format!("watermark read: {f:?}")),
                },
            }
        }
        run.shared.in_advance.store(true, Ordering::SeqCst);
        let r = client.as_mut().unwrap().execute(ADVANCE, &[&ts_text(w)]);
        run.shared.in_advance.store(false, Ordering::SeqCst);
        match r {
            Ok(_) => {
                st.advances += 1;
                return Ok(());
            }
            Err(e) => match classify(&e) {
                Failure::Retry(code) => *st.retries.entry(code).or_default() += 1,
                Failure::ConnectionLost(_) if crash => {
                    st.lost += 1;
                    *client = None;
                    thread::sleep(Duration::from_millis(100));
                }
                f => return Err(format!("advance to {}: {f:?}", ts_text(w))),
            },
        }
    }
    Err(format!(
        "advance to {} not done after 200 attempts",
        ts_text(w)
    ))
}

/// Advances by 1 to 8 minutes every 40 to 120 ms (the first after 150 ms: the first statements
/// see no watermark), until the writers are done; then to `infinity`.
pub fn run_advancer(
    cluster: &Cluster,
    run: &Run,
    seed: u64,
    cfg: &RunConfig,
) -> Result<AdvancerStats, String> {
    guarded(&run.shared, "advancer", || {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xAD7A);
        let mut st = AdvancerStats::default();
        let mut client = Some(connect(cluster, OWNER, &run.shared, cfg.crash)?);
        let mut w = run.shared.watermark.load(Ordering::SeqCst);
        thread::sleep(Duration::from_millis(150));
        loop {
            if run.shared.aborted() {
                return Err("aborted".into());
            }
            let finishing = run.shared.workers_left.load(Ordering::SeqCst) == 0;
            let to = if finishing {
                INFINITY
            } else {
                w + rng.random_range(1..=8) * MINUTE
            };
            advance_to(&mut client, cluster, run, cfg.crash, to, &mut st)?;
            if finishing {
                return Ok(st);
            }
            w = to;
            run.shared.watermark.store(w, Ordering::SeqCst);
            thread::sleep(Duration::from_millis(rng.random_range(40..=120)));
        }
    })
}

#[derive(Debug, Default, Clone)]
pub struct MonitorStats {
    pub snapshots: u64,
    pub model_checks: u64,
    pub reconnects: u64,
}

/// Reads a snapshot every 250 ms until the run is done, and once more then: history and
/// refused rows append-only (`AppendOnly`), and every fourth snapshot checked against the model.
pub fn run_monitor(cluster: &Cluster, run: &Run, cfg: &RunConfig) -> Result<MonitorStats, String> {
    guarded(&run.shared, "monitor", || {
        let mut st = MonitorStats::default();
        let mut ao = AppendOnly::default();
        let mut c = connect(cluster, SUPERUSER, &run.shared, cfg.crash)?;
        loop {
            let last = run.done.load(Ordering::SeqCst);
            if run.shared.aborted() {
                return Err("aborted".into());
            }
            if !last {
                thread::sleep(Duration::from_millis(250));
            }
            let seen = run.seen.lock().unwrap().clone();
            let s = match read_snapshot(&mut c) {
                Ok(s) => s,
                Err(e) => match classify(&e) {
                    Failure::ConnectionLost(_) if cfg.crash => {
                        st.reconnects += 1;
                        c = connect(cluster, SUPERUSER, &run.shared, true)?;
                        continue;
                    }
                    f => return Err(format!("snapshot: {f:?}")),
                },
            };
            st.snapshots += 1;
            for v in ao.check(&s) {
                run.shared
                    .violation(format!("monitor, snapshot {}: {v}", st.snapshots));
            }
            if st.snapshots % 4 == 1 || last {
                let ck = check(&s, false, &seen);
                st.model_checks += 1;
                for v in ck.violations {
                    run.shared.violation(format!("mid-run check: {v}"));
                }
            }
            if last {
                return Ok(st);
            }
        }
    })
}

#[derive(Debug, Default, Clone)]
pub struct KillerStats {
    pub kills: usize,
    pub with_backends: usize,
    pub aimed_at_ingest: usize,
    pub aimed_at_advance: usize,
    pub recovery_secs: Vec<f64>,
}

/// Kills the postmaster (half the time every backend too) every `gap_ms`, aimed at an ingest
/// transaction or an advance in flight when there is one; restarts the server and checks the
/// recovered data against the model. Stops once the writers are done and `min_kills` happened.
pub fn run_killer(
    cluster: &Cluster,
    run: &Run,
    seed: u64,
    min_kills: usize,
    gap_ms: (u64, u64),
) -> Result<KillerStats, String> {
    guarded(&run.shared, "killer", || {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xDEAD);
        let mut st = KillerStats::default();
        loop {
            if run.shared.kills.load(Ordering::SeqCst) >= min_kills {
                return Ok(st);
            }
            let until =
                Instant::now() + Duration::from_millis(rng.random_range(gap_ms.0..=gap_ms.1));
            while Instant::now() < until {
                if run.shared.aborted() {
                    return Err("aborted".into());
                }
                thread::sleep(Duration::from_millis(20));
            }
            let aim_advance = rng.random_bool(0.3);
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(2) {
                let busy = if aim_advance {
                    run.shared.in_advance.load(Ordering::SeqCst)
                } else {
                    run.in_ingest.load(Ordering::SeqCst) > 0
                };
                if busy {
                    if aim_advance {
                        st.aimed_at_advance += 1;
                    } else {
                        st.aimed_at_ingest += 1;
                    }
                    thread::sleep(Duration::from_micros(rng.random_range(0..8_000)));
                    break;
                }
                thread::sleep(Duration::from_micros(200));
            }
            let with_backends = rng.random_bool(0.5);
            let pm = cluster.kill9(with_backends)?;
            if with_backends {
                st.with_backends += 1;
            }
            let n = run.shared.kills.fetch_add(1, Ordering::SeqCst) + 1;
            let secs = cluster.restart_after_kill(Duration::from_millis(rng.random_range(0..500)));
            st.recovery_secs.push(secs);
            st.kills = n;
            eprintln!("  kill {n}: postmaster {pm}; back after {secs:.1} s");
            let mut c = connect(cluster, SUPERUSER, &run.shared, true)?;
            let seen = run.seen.lock().unwrap().clone();
            let s = loop {
                match read_snapshot(&mut c) {
                    Ok(s) => break s,
                    Err(e) => match classify(&e) {
                        Failure::ConnectionLost(_) => {
                            c = connect(cluster, SUPERUSER, &run.shared, true)?
                        }
                        f => return Err(format!("snapshot after kill {n}: {f:?}")),
                    },
                }
            };
            for v in check(&s, false, &seen).violations {
                run.shared.violation(format!("after kill {n}: {v}"));
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = crate::workload::T0 + 10 * crate::workload::HOUR;

    fn c(id: i64, key: &str, min: i64) -> Click {
        Click {
            id,
            key: Some(key.into()),
            amount: id,
            ts: T + min * MINUTE,
        }
    }

    /// A statement of one row under the watermark `wm` minutes after `T`.
    fn one_row(m: &mut Model, wm: i64, row: Click) -> Counts {
        m.ingest(Some(T + wm * MINUTE), &[row])
    }

    fn lines(m: &Model) -> Vec<String> {
        let mut h = m.history.clone();
        h.sort_by_key(|v| (v.start, v.end, v.version));
        h.iter().map(Version::render).collect()
    }

    #[test]
    fn two_fired_sessions_bridged_then_joined() {
        let mut m = Model::new(GAP, LATENESS);
        assert_eq!(m.ingest(None, &[c(1, "a", 0), c(2, "a", 7)]), [2, 0, 0, 0]);
        assert_eq!(m.advance(T + 15 * MINUTE), (2, 0));
        assert_eq!(one_row(&mut m, 15, c(3, "a", 4)), [0, 1, 0, 0]);
        assert_eq!(one_row(&mut m, 15, c(4, "a", 5)), [0, 1, 0, 0]);
        assert_eq!(
            lines(&m),
            vec![
                "a [10:00:00, 10:05:00) v1 main n=1 total=1 lo=1 hi=1 wm=10:15:00",
                "a [10:00:00, 10:05:00) v2 merged into [10:00:00, 10:12:00) n=1 total=1 lo=1 hi=1 wm=10:15:00",
                "a [10:00:00, 10:12:00) v1 late n=3 total=6 lo=1 hi=3 wm=10:15:00",
                "a [10:00:00, 10:12:00) v2 late n=4 total=10 lo=1 hi=4 wm=10:15:00",
                "a [10:07:00, 10:12:00) v1 main n=1 total=2 lo=2 hi=2 wm=10:15:00",
                "a [10:07:00, 10:12:00) v2 merged into [10:00:00, 10:12:00) n=1 total=2 lo=2 hi=2 wm=10:15:00",
            ]
        );
        assert_eq!(m.latest().len(), 1);
    }

    #[test]
    fn touching_windows_stay_apart_and_an_unfired_absorbed_session_vanishes() {
        let mut m = Model::new(GAP, LATENESS);
        m.ingest(None, &[c(1, "a", 0), c(2, "a", 5)]);
        m.advance(T + 6 * MINUTE);
        // [10:00, 10:05) fired; [10:05, 10:10) open. A row at 10:04 extends the first one into
        // [10:00, 10:09), which overlaps the second: one island, a new open session.
        one_row(&mut m, 6, c(3, "a", 4));
        // Then a row at 10:08 extends it once more: [10:00, 10:13); the session [10:00, 10:10)
        // never fired and leaves no trace.
        one_row(&mut m, 6, c(4, "a", 8));
        m.advance(INFINITY);
        assert_eq!(
            lines(&m),
            vec![
                "a [10:00:00, 10:05:00) v1 main n=1 total=1 lo=1 hi=1 wm=10:06:00",
                "a [10:00:00, 10:05:00) v2 merged into [10:00:00, 10:10:00) n=1 total=1 lo=1 hi=1 wm=10:06:00",
                "a [10:00:00, 10:13:00) v1 main n=4 total=10 lo=1 hi=4 wm=infinity",
            ]
        );
        assert_eq!(m.stats.absorbed_unfired, 2);
    }

    #[test]
    fn a_purged_session_never_merges_and_refused_rows_are_duplicates_on_redelivery() {
        let mut m = Model::new(GAP, LATENESS);
        m.ingest(None, &[c(1, "a", 0)]);
        assert_eq!(m.advance(T + 20 * MINUTE), (1, 1));
        // 10:03 + 5 + 15 = 10:23 > 10:20: late; the session [10:00, 10:05) is gone.
        assert_eq!(one_row(&mut m, 20, c(2, "a", 3)), [0, 1, 0, 0]);
        // 10:00 + 20 <= 10:20: refused; its redelivery (another time) is a duplicate.
        assert_eq!(one_row(&mut m, 20, c(3, "a", 0)), [0, 0, 1, 0]);
        assert_eq!(one_row(&mut m, 20, c(3, "a", 9)), [0, 0, 0, 1]);
        assert_eq!(
            lines(&m),
            vec![
                "a [10:00:00, 10:05:00) v1 main n=1 total=1 lo=1 hi=1 wm=10:20:00",
                "a [10:03:00, 10:08:00) v1 late n=1 total=2 lo=2 hi=2 wm=10:20:00",
            ]
        );
        assert_eq!(m.stats.rows_over_purged, 1);
    }
}
