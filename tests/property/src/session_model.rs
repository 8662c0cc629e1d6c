//! An independent model of session windows, written from SPEC §2, §3 and §7 and the session
//! contract alone (never from the extension's SQL).
//!
//! Per key (NULL = NULL), the *live* sessions: formed and not purged yet, fired or not. Each has
//! its bounds `[start, end)`, its accepted rows and the versions it published. An ingest
//! statement classifies each row on its own window `[t, t + gap)` under the watermark in force
//! when the statement starts (open, late, refused; a (key, event id) seen before, in any
//! statement, is a duplicate), then takes all its accepted rows at once and, per key, groups them
//! with the key's live sessions into islands of strict overlap (touching intervals stay apart).
//! An island with new rows either forms a new session, joins the one session it equals (a late
//! version if that one fired), or forms a new session absorbing every member: each absorbed
//! session that published gets a `merged` version with its last values and `merged_into` naming
//! the new bounds; the new session is written at once (version 1, `late`) when its end is
//! already behind the watermark. An advance fires every live session whose end it reaches
//! (`main`), then purges every live session whose end plus the lateness it reaches: a purged
//! session never merges again.
//!
//! Rows are numbered in the order they are accepted; a session keeps its rows in a list that only
//! grows while it is live (a new session starts with all its members' rows), so every version is
//! a prefix of its session's list: its length is all the model stores, and PostgreSQL computes
//! the aggregates of those rows (see `sessions`).

use std::collections::{BTreeMap, HashSet};

use crate::model::Keys;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Main,
    Late,
    Merged,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Main => "main",
            Kind::Late => "late",
            Kind::Merged => "merged",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    pub kind: Kind,
    /// The watermark in force when it was written.
    pub watermark: i64,
    /// The bounds of the absorbing session, for a `merged` version.
    pub merged_into: Option<(i64, i64)>,
    /// Its rows: the first `rows` of its session's list.
    pub rows: usize,
}

#[derive(Clone, Debug)]
pub struct Session {
    pub keys: Keys,
    pub start: i64,
    pub end: i64,
    /// Numbers of the accepted rows it holds.
    pub rows: Vec<usize>,
    /// Version n is `versions[n - 1]`; empty until it fires.
    pub versions: Vec<Version>,
    /// Not purged and not absorbed.
    pub live: bool,
    /// The session that absorbed it, if one did.
    pub absorbed_into: Option<usize>,
}

impl Session {
    /// Its greatest version is not `merged`: what `_latest` shows of it.
    pub fn latest(&self) -> Option<(usize, &Version)> {
        match self.versions.last() {
            Some(v) if v.kind != Kind::Merged => Some((self.versions.len(), v)),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Landing {
    /// Accepted, with the number the model gives the row.
    Open(usize),
    Late(usize),
    Refused {
        window_end: i64,
        deadline: i64,
        watermark: i64,
    },
    Duplicate,
}

pub use crate::model::Counts;

/// What the model needs of a row.
#[derive(Clone, Debug)]
pub struct Event {
    pub keys: Keys,
    pub event_id: Option<String>,
    pub event_time: i64,
}

/// What one row of a key at an event time would do now, as `eventtime.explain` tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Refused,
    /// A session of its own, overlapping these purged sessions (it never merges with them).
    New {
        purged: Vec<(i64, i64)>,
    },
    /// Its window lies inside this live session.
    Join((i64, i64)),
    /// These live sessions and the row form a new session.
    Merge {
        members: Vec<(i64, i64)>,
        into: (i64, i64),
    },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Advanced {
    pub fired: i64,
    pub purged: i64,
}

pub struct SessionModel {
    gap: i64,
    lateness: i64,
    dedup: bool,
    pub watermark: Option<i64>,
    /// Every (key, event id) the pipeline has seen, refused rows included; never forgotten.
    ledger: HashSet<(Keys, String)>,
    /// Every session ever formed, in the order formed: its index is its id.
    pub sessions: Vec<Session>,
    /// Accepted rows so far.
    pub accepted: usize,
    /// The event time of each accepted row, by number.
    pub times: Vec<i64>,
    pub refused: i64,
    pub duplicates: i64,
}

impl SessionModel {
    pub fn new(gap: i64, lateness: i64, dedup: bool) -> SessionModel {
        assert!(gap > 0 && lateness >= 0);
        SessionModel {
            gap,
            lateness,
            dedup,
            watermark: None,
            ledger: HashSet::new(),
            sessions: Vec::new(),
            accepted: 0,
            times: Vec::new(),
            refused: 0,
            duplicates: 0,
        }
    }

    pub fn gap(&self) -> i64 {
        self.gap
    }

    pub fn lateness(&self) -> i64 {
        self.lateness
    }

    /// The landing of a row's own window `[t, t + gap)` under watermark `w` (SPEC §2), without
    /// dedup: "open", "late-firing" or "side-output".
    pub fn landing(&self, t: i64, w: Option<i64>) -> &'static str {
        let end = t + self.gap;
        match w {
            Some(w) if w >= end + self.lateness => "side-output",
            Some(w) if w >= end => "late-firing",
            _ => "open",
        }
    }

    /// What a single row (without an event id) at `t` would do under the watermark now.
    pub fn outcome(&self, keys: &Keys, t: i64) -> Outcome {
        if self.landing(t, self.watermark) == "side-output" {
            return Outcome::Refused;
        }
        let (a, b) = (t, t + self.gap);
        let overlapping = |s: &&Session| &s.keys == keys && s.start < b && a < s.end;
        let mut members: Vec<(i64, i64)> = self
            .live()
            .filter(overlapping)
            .map(|s| (s.start, s.end))
            .collect();
        members.sort();
        match members[..] {
            [] => Outcome::New {
                purged: self
                    .sessions
                    .iter()
                    .filter(|s| !s.live && s.absorbed_into.is_none())
                    .filter(overlapping)
                    .map(|s| (s.start, s.end))
                    .collect(),
            },
            [(s, e)] if s <= a && b <= e => Outcome::Join((s, e)),
            _ => {
                let start = members.iter().map(|m| m.0).min().unwrap().min(a);
                let end = members.iter().map(|m| m.1).max().unwrap().max(b);
                Outcome::Merge {
                    members,
                    into: (start, end),
                }
            }
        }
    }

    /// One ingest statement: the landing of each row and the counts `eventtime.ingest` returns.
    pub fn ingest(&mut self, events: &[Event]) -> (Vec<Landing>, Counts) {
        let w = self.watermark;
        let mut counts = Counts::default();
        let mut landings = Vec::with_capacity(events.len());
        // Per key, the accepted rows' (event time, number), in statement order.
        let mut new_rows: BTreeMap<Keys, Vec<(i64, usize)>> = BTreeMap::new();
        for ev in events {
            if self.dedup {
                if let Some(id) = &ev.event_id {
                    if !self.ledger.insert((ev.keys.clone(), id.clone())) {
                        counts.duplicates += 1;
                        landings.push(Landing::Duplicate);
                        continue;
                    }
                }
            }
            let landing = match self.landing(ev.event_time, w) {
                "side-output" => {
                    counts.refused += 1;
                    let window_end = ev.event_time + self.gap;
                    Landing::Refused {
                        window_end,
                        deadline: window_end + self.lateness,
                        watermark: w.expect("a refused row needs a watermark"),
                    }
                }
                landing => {
                    let no = self.accepted;
                    self.accepted += 1;
                    self.times.push(ev.event_time);
                    new_rows
                        .entry(ev.keys.clone())
                        .or_default()
                        .push((ev.event_time, no));
                    if landing == "open" {
                        counts.accepted += 1;
                        Landing::Open(no)
                    } else {
                        counts.late += 1;
                        Landing::Late(no)
                    }
                }
            };
            landings.push(landing);
        }
        for (keys, rows) in new_rows {
            self.merge(&keys, &rows, w);
        }
        self.refused += counts.refused;
        self.duplicates += counts.duplicates;
        (landings, counts)
    }

    /// The islands of one key: its live sessions and the statement's new rows, connected by
    /// strict overlap.
    fn merge(&mut self, keys: &Keys, rows: &[(i64, usize)], w: Option<i64>) {
        enum Item {
            Session(usize),
            Row(usize),
        }
        let mut items: Vec<(i64, i64, Item)> = self
            .sessions
            .iter()
            .enumerate()
            .filter(|(_, s)| s.live && &s.keys == keys)
            .map(|(id, s)| (s.start, s.end, Item::Session(id)))
            .collect();
        items.extend(rows.iter().map(|&(t, no)| (t, t + self.gap, Item::Row(no))));
        items.sort_by_key(|&(start, end, _)| (start, end));
        // Sorted by start, an interval belongs to the island before it exactly when it starts
        // strictly before the island's end: the island is one interval (the union of its members,
        // connected), so overlapping it is overlapping one of them.
        let mut islands: Vec<(i64, i64, Vec<usize>, Vec<usize>)> = Vec::new();
        for (start, end, item) in items {
            match islands.last_mut() {
                Some(island) if start < island.1 => island.1 = island.1.max(end),
                _ => islands.push((start, end, Vec::new(), Vec::new())),
            }
            let island = islands.last_mut().unwrap();
            match item {
                Item::Session(id) => island.2.push(id),
                Item::Row(no) => island.3.push(no),
            }
        }
        let due = |end: i64| matches!(w, Some(w) if end <= w);
        for (start, end, members, new) in islands {
            if new.is_empty() {
                continue;
            }
            if let [only] = members[..] {
                let s = &mut self.sessions[only];
                if (s.start, s.end) == (start, end) {
                    s.rows.extend(&new);
                    if !s.versions.is_empty() {
                        let rows = s.rows.len();
                        s.versions.push(Version {
                            kind: Kind::Late,
                            watermark: w.expect("a fired session has a watermark"),
                            merged_into: None,
                            rows,
                        });
                    }
                    continue;
                }
            }
            let id = self.sessions.len();
            let mut all = Vec::new();
            for &m in &members {
                let s = &mut self.sessions[m];
                all.extend(&s.rows);
                if let Some(last) = s.versions.last().copied() {
                    s.versions.push(Version {
                        kind: Kind::Merged,
                        watermark: w.expect("a fired session has a watermark"),
                        merged_into: Some((start, end)),
                        rows: last.rows,
                    });
                }
                s.live = false;
                s.absorbed_into = Some(id);
            }
            all.extend(&new);
            let mut versions = Vec::new();
            if due(end) {
                versions.push(Version {
                    kind: Kind::Late,
                    watermark: w.unwrap(),
                    merged_into: None,
                    rows: all.len(),
                });
            }
            self.sessions.push(Session {
                keys: keys.clone(),
                start,
                end,
                rows: all,
                versions,
                live: true,
                absorbed_into: None,
            });
        }
    }

    /// `advance_watermark`: fires every live session that has not fired and whose end the new
    /// watermark reaches, then purges every live session whose end plus lateness it reaches. A
    /// watermark that is not ahead changes nothing.
    pub fn advance(&mut self, to: i64) -> Advanced {
        let mut done = Advanced::default();
        if matches!(self.watermark, Some(cur) if to <= cur) {
            return done;
        }
        self.watermark = Some(to);
        for s in self.sessions.iter_mut().filter(|s| s.live) {
            if s.versions.is_empty() && s.end <= to {
                s.versions.push(Version {
                    kind: Kind::Main,
                    watermark: to,
                    merged_into: None,
                    rows: s.rows.len(),
                });
                done.fired += 1;
            }
            if s.end.saturating_add(self.lateness) <= to {
                s.live = false;
                done.purged += 1;
            }
        }
        done
    }

    pub fn versions(&self) -> usize {
        self.sessions.iter().map(|s| s.versions.len()).sum()
    }

    pub fn live(&self) -> impl Iterator<Item = &Session> {
        self.sessions.iter().filter(|s| s.live)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::{utc, MINUTE};

    fn ev(t: i64, id: &str) -> Event {
        Event {
            keys: vec![Some("u".into())],
            event_id: Some(id.into()),
            event_time: t,
        }
    }

    fn at(hm: &str) -> i64 {
        utc(&format!("2026-03-01 {hm}"))
    }

    /// (start, end, live, versions as (kind, merged_into, rows)) of every session.
    type Shape = Vec<(i64, i64, bool, Vec<(Kind, Option<(i64, i64)>, usize)>)>;

    fn shape(m: &SessionModel) -> Shape {
        m.sessions
            .iter()
            .map(|s| {
                (
                    s.start,
                    s.end,
                    s.live,
                    s.versions
                        .iter()
                        .map(|v| (v.kind, v.merged_into, v.rows))
                        .collect(),
                )
            })
            .collect()
    }

    /// What must hold after any sequence of statements and advances, whatever SPEC's details.
    fn check_invariants(m: &SessionModel) {
        let g = m.gap();
        let mut owner = vec![0usize; m.accepted];
        for (id, s) in m.sessions.iter().enumerate() {
            // Its bounds are its rows' windows, connected by strict overlap.
            let mut times: Vec<i64> = s.rows.iter().map(|&r| m.times[r]).collect();
            times.sort();
            assert_eq!((times[0], times[times.len() - 1] + g), (s.start, s.end));
            let mut reach = times[0] + g;
            for &t in &times {
                assert!(t < reach, "a session's rows are connected");
                reach = reach.max(t + g);
            }
            if s.absorbed_into.is_none() {
                for &r in &s.rows {
                    owner[r] += 1;
                }
            }
            for (i, v) in s.versions.iter().enumerate() {
                assert!(v.rows <= s.rows.len());
                match v.kind {
                    Kind::Merged => {
                        assert_eq!(i + 1, s.versions.len(), "merged is the last version");
                        assert_eq!(v.rows, s.versions[i - 1].rows);
                        assert!(s.absorbed_into.is_some());
                    }
                    Kind::Main => assert_eq!(i, 0),
                    Kind::Late => {}
                }
            }
            let others = m.sessions[id + 1..].iter().filter(|o| o.live && s.live);
            for o in others.filter(|o| o.keys == s.keys) {
                assert!(
                    o.start >= s.end || s.start >= o.end,
                    "live sessions overlap"
                );
            }
        }
        assert!(
            owner.iter().all(|&n| n == 1),
            "each row in one session not absorbed"
        );
    }

    #[test]
    fn invariants_on_random_statements() {
        use rand::{Rng, SeedableRng};
        let g = 10 * MINUTE;
        for seed in 0..40 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut m = SessionModel::new(g, rng.random_range(0..3) * g, true);
            let mut now = at("10:00");
            let mut id = 0;
            for _ in 0..60 {
                if rng.random_bool(0.3) {
                    now += rng.random_range(0..2 * g);
                    m.advance(now);
                    continue;
                }
                let rows: Vec<Event> = (0..rng.random_range(1..6))
                    .map(|_| {
                        id += 1;
                        Event {
                            keys: vec![["a", "b"]
                                .get(rng.random_range(0..3))
                                .map(|k| k.to_string())],
                            event_id: Some((id - rng.random_range(0..2)).to_string()),
                            event_time: now + rng.random_range(-3 * g..2 * g),
                        }
                    })
                    .collect();
                m.ingest(&rows);
                check_invariants(&m);
            }
            m.advance(crate::values::INFINITY);
            check_invariants(&m);
            assert_eq!(m.live().count(), 0);
        }
    }

    #[test]
    fn touching_rows_stay_apart_and_overlapping_ones_merge() {
        let mut m = SessionModel::new(30 * MINUTE, 0, true);
        m.ingest(&[ev(at("10:00"), "1"), ev(at("10:30"), "2")]);
        assert_eq!(
            m.live().count(),
            2,
            "[10:00, 10:30) and [10:30, 11:00) touch"
        );
        m.ingest(&[ev(at("10:29"), "3")]);
        let live: Vec<_> = m.live().map(|s| (s.start, s.end, s.rows.len())).collect();
        assert_eq!(live, [(at("10:00"), at("11:00"), 3)]);
        // Never fired: the absorbed sessions vanish without a version.
        assert!(m.sessions.iter().all(|s| s.versions.is_empty()));
        assert_eq!(
            m.advance(at("11:00")),
            Advanced {
                fired: 1,
                purged: 1
            }
        );
    }

    #[test]
    fn late_rows_join_extend_and_bridge_fired_sessions() {
        let gap = 30 * MINUTE;
        let mut m = SessionModel::new(gap, 90 * MINUTE, true);
        m.ingest(&[ev(at("10:00"), "1"), ev(at("11:00"), "2")]);
        assert_eq!(
            m.advance(at("11:30")),
            Advanced {
                fired: 2,
                purged: 0
            }
        );
        // Inside [10:00, 10:30): joins it, a late version.
        let (l, c) = m.ingest(&[ev(at("10:00"), "3"), ev(at("10:00"), "1")]);
        assert_eq!(l, [Landing::Late(2), Landing::Duplicate]);
        assert_eq!((c.late, c.duplicates), (1, 1));
        // Bridges both: a new session [10:00, 11:30), already due, written at once as late.
        let (_, c) = m.ingest(&[ev(at("10:20"), "4"), ev(at("10:40"), "5")]);
        assert_eq!(c.late, 2);
        let into = Some((at("10:00"), at("11:30")));
        assert_eq!(
            shape(&m),
            [
                (
                    at("10:00"),
                    at("10:30"),
                    false,
                    vec![
                        (Kind::Main, None, 1),
                        (Kind::Late, None, 2),
                        (Kind::Merged, into, 2)
                    ]
                ),
                (
                    at("11:00"),
                    at("11:30"),
                    false,
                    vec![(Kind::Main, None, 1), (Kind::Merged, into, 1)]
                ),
                (at("10:00"), at("11:30"), true, vec![(Kind::Late, None, 5)]),
            ]
        );
        // Extends it past the watermark: a new open session; the old one gets `merged`.
        m.ingest(&[ev(at("11:20"), "6")]);
        assert_eq!(m.sessions[3].versions, []);
        assert_eq!(
            m.sessions[2].versions[1].merged_into,
            Some((at("10:00"), at("11:50")))
        );
        assert_eq!(
            m.advance(at("11:50")),
            Advanced {
                fired: 1,
                purged: 0
            }
        );
        assert_eq!(m.sessions[3].versions[0].rows, 6);
        assert_eq!(m.advance(at("13:19")), Advanced::default());
        assert_eq!(
            m.advance(at("13:20")),
            Advanced {
                fired: 0,
                purged: 1
            }
        );
    }

    #[test]
    fn purged_sessions_never_merge_again() {
        let gap = 30 * MINUTE;
        let mut m = SessionModel::new(gap, 10 * MINUTE, true);
        m.ingest(&[ev(at("10:00"), "1")]);
        assert_eq!(
            m.advance(at("10:40")),
            Advanced {
                fired: 1,
                purged: 1
            }
        );
        // Overlaps the purged [10:00, 10:30), lands late on its own window: a session of its own.
        let (l, _) = m.ingest(&[ev(at("10:05"), "2"), ev(at("09:00"), "3")]);
        assert_eq!(l[0], Landing::Late(1));
        assert_eq!(
            l[1],
            Landing::Refused {
                window_end: at("09:30"),
                deadline: at("09:40"),
                watermark: at("10:40")
            }
        );
        let live: Vec<_> = m
            .live()
            .map(|s| (s.start, s.end, s.versions.len()))
            .collect();
        assert_eq!(live, [(at("10:05"), at("10:35"), 1)]);
        // Redeliveries of a refused row, even at another time, are duplicates.
        let (_, c) = m.ingest(&[ev(at("10:30"), "3")]);
        assert_eq!(c.duplicates, 1);
        assert_eq!((m.refused, m.duplicates), (1, 1));
    }

    #[test]
    fn an_island_grows_transitively_from_one_statement() {
        let gap = 10 * MINUTE;
        let mut m = SessionModel::new(gap, 0, false);
        let none = |t| Event {
            keys: vec![None],
            event_id: None,
            event_time: t,
        };
        m.ingest(&[none(at("10:00")), none(at("10:20")), none(at("10:40"))]);
        assert_eq!(m.live().count(), 3);
        // No row overlaps two of them, but each pair of rows bridges two, through each other.
        m.ingest(&[
            none(at("10:33")),
            none(at("10:12")),
            none(at("10:05")),
            none(at("10:28")),
        ]);
        let live: Vec<_> = m.live().map(|s| (s.start, s.end, s.rows.len())).collect();
        assert_eq!(live, [(at("10:00"), at("10:50"), 7)]);
    }
}
