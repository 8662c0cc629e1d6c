//! The independent model of one pipeline, written from SPEC §2-3, §7 and §8 and nothing else:
//! the windows of a row (`windows`), the landing rule, event-id dedup (every id is remembered
//! for the pipeline's lifetime, as SPEC §3 says), firings and purging, restatements (which
//! refused rows a call folds, and the version it writes) and what the lateness account needs
//! (each pair's landing, the watermark it arrived under and its values; see `account`). A row in several windows is
//! judged, deduplicated, counted, fired and refused in each on its own (SPEC §7): every rule
//! below is per (row, window) pair. It knows which rows a window accepted only through the
//! landings it returns; the rows themselves go to the model's tables in the test database, where
//! PostgreSQL computes the expected aggregates.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use crate::values::Dec;
use crate::windows::WindowSpec;

/// Key values as text, `None` for NULL: NULL groups with NULL, as in `GROUP BY`.
pub type Keys = Vec<Option<String>>;

/// A window of one key: (key values, window start, window end). The end is part of it because
/// cumulate windows share their start (SPEC §7: a window is identified by its start and end).
pub type WindowKey = (Keys, i64, i64);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Main,
    Late,
    Restatement,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Main => "main",
            Kind::Late => "late",
            Kind::Restatement => "restatement",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Landing {
    Open {
        window_start: i64,
        window_end: i64,
    },
    Late {
        window_start: i64,
        window_end: i64,
    },
    Refused {
        window_start: i64,
        window_end: i64,
        deadline: i64,
        watermark: i64,
        /// The refused pair's index in `Model::refused_pairs`.
        no: usize,
    },
    Duplicate,
}

#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    pub accepted: i64,
    pub late: i64,
    pub refused: i64,
    pub duplicates: i64,
}

impl Counts {
    pub fn total(&self) -> i64 {
        self.accepted + self.late + self.refused + self.duplicates
    }
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, other: Counts) {
        self.accepted += other.accepted;
        self.late += other.late;
        self.refused += other.refused;
        self.duplicates += other.duplicates;
    }
}

/// One version of a window: version n is `firings[n - 1]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Firing {
    pub kind: Kind,
    /// The watermark in force when it was written.
    pub watermark: i64,
}

/// A window of one key that some (row, window) pair landed in, accepted or refused. A window
/// that only refused rows has no state and no version until a restatement writes one.
#[derive(Default, Debug)]
pub struct Window {
    /// The window has state: it accepted a row and its deadline has not passed.
    pub live: bool,
    pub firings: Vec<Firing>,
    /// Pairs that landed open: the rows of the main firing, or of the state before it.
    pub on_time: i64,
    /// The watermark each late pair arrived under.
    pub late: Vec<i64>,
    /// Indexes into `Model::refused_pairs`.
    pub refused: Vec<usize>,
    /// Per value column of the events, the sum of the accepted pairs' non-NULL values.
    pub accepted_totals: Vec<Dec>,
}

/// A refused (row, window) pair: what the account reports of it and which version folded it.
#[derive(Clone, Debug)]
pub struct RefusedPair {
    pub window: WindowKey,
    /// The watermark that refused it.
    pub watermark: i64,
    pub values: Vec<Option<Dec>>,
    pub restated_in: Option<usize>,
}

/// What the model needs of a row: its key values, event id and event time, and the values of
/// the columns the lateness account may be asked about (`None` for NULL).
pub struct Event {
    pub keys: Keys,
    pub event_id: Option<String>,
    pub event_time: i64,
    pub values: Vec<Option<Dec>>,
}

/// Which keys `eventtime.restate` takes, per key column: `None` matches any value (the column
/// is left out of the key object), `Some(None)` the NULL key (JSON null), `Some(Some(v))` v.
pub type KeyFilter = Vec<Option<Option<String>>>;

/// One version written by a restatement: what `eventtime.restate` returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restated {
    pub keys: Keys,
    pub window_start: i64,
    pub window_end: i64,
    pub version: usize,
    pub rows_folded: usize,
}

pub struct Model {
    spec: WindowSpec,
    lateness: i64,
    dedup: bool,
    pub watermark: Option<i64>,
    /// Every (keys, window start, window end, event id) ever seen, refused rows included; never
    /// forgotten.
    ledger: HashSet<(Keys, i64, i64, String)>,
    pub windows: BTreeMap<WindowKey, Window>,
    /// Every refused pair, in the order they were refused.
    pub refused_pairs: Vec<RefusedPair>,
    pub refused: i64,
    pub duplicates: i64,
}

impl Model {
    pub fn new(spec: WindowSpec, lateness: i64, dedup: bool) -> Model {
        assert!(lateness >= 0);
        Model {
            spec,
            lateness,
            dedup,
            watermark: None,
            ledger: HashSet::new(),
            windows: BTreeMap::new(),
            refused_pairs: Vec::new(),
            refused: 0,
            duplicates: 0,
        }
    }

    pub fn spec(&self) -> WindowSpec {
        self.spec
    }

    pub fn lateness(&self) -> i64 {
        self.lateness
    }

    /// One ingest statement: for each row, the landing in each of its windows, oldest first.
    /// Every pair is classified against the watermark in force when the statement starts; each
    /// window that took a late row gets one new version.
    pub fn ingest(&mut self, events: &[Event]) -> (Vec<Vec<Landing>>, Counts) {
        let w = self.watermark;
        let mut counts = Counts::default();
        let mut landings = Vec::with_capacity(events.len());
        let mut late_windows = BTreeSet::new();
        for ev in events {
            let mut row = Vec::new();
            for (window_start, window_end) in self.spec.windows_of(ev.event_time) {
                let landing = self.land(ev, window_start, window_end, w, &mut late_windows);
                match landing {
                    Landing::Open { .. } => counts.accepted += 1,
                    Landing::Late { .. } => counts.late += 1,
                    Landing::Refused { .. } => counts.refused += 1,
                    Landing::Duplicate => counts.duplicates += 1,
                }
                row.push(landing);
            }
            landings.push(row);
        }
        for key in late_windows {
            let watermark = w.expect("a late row needs a watermark");
            self.windows.get_mut(&key).unwrap().firings.push(Firing {
                kind: Kind::Late,
                watermark,
            });
        }
        self.refused += counts.refused;
        self.duplicates += counts.duplicates;
        (landings, counts)
    }

    /// The landing of one row in one of its windows under watermark `w`.
    fn land(
        &mut self,
        ev: &Event,
        window_start: i64,
        window_end: i64,
        w: Option<i64>,
        late_windows: &mut BTreeSet<WindowKey>,
    ) -> Landing {
        let deadline = window_end + self.lateness;
        if self.dedup {
            if let Some(id) = &ev.event_id {
                if !self
                    .ledger
                    .insert((ev.keys.clone(), window_start, window_end, id.clone()))
                {
                    return Landing::Duplicate;
                }
            }
        }
        let key = (ev.keys.clone(), window_start, window_end);
        let window = self.windows.entry(key.clone()).or_default();
        match w {
            Some(w) if w >= deadline => {
                let no = self.refused_pairs.len();
                window.refused.push(no);
                self.refused_pairs.push(RefusedPair {
                    window: key,
                    watermark: w,
                    values: ev.values.clone(),
                    restated_in: None,
                });
                Landing::Refused {
                    window_start,
                    window_end,
                    deadline,
                    watermark: w,
                    no,
                }
            }
            Some(w) if w >= window_end => {
                window.accept(ev);
                window.late.push(w);
                late_windows.insert(key);
                Landing::Late {
                    window_start,
                    window_end,
                }
            }
            _ => {
                window.accept(ev);
                window.on_time += 1;
                Landing::Open {
                    window_start,
                    window_end,
                }
            }
        }
    }

    /// `eventtime.restate` (SPEC §8): every window starting at `from` (or in `[from, to)`: all the
    /// cumulate windows of a period when it takes their start) of
    /// the keys the filter takes that has refused pairs not folded yet gets one new version,
    /// kind `restatement`, the next after its latest (1 if it never published), written under
    /// the watermark in force; those pairs are folded in it. Their event ids are distinct
    /// already: dedup (the ledger) refuses a window one row per id at most.
    pub fn restate(&mut self, from: i64, to: Option<i64>, filter: &KeyFilter) -> Vec<Restated> {
        let mut folds: BTreeMap<WindowKey, Vec<usize>> = BTreeMap::new();
        for (no, pair) in self.refused_pairs.iter().enumerate() {
            let (keys, start, _) = &pair.window;
            let in_range = match to {
                None => *start == from,
                Some(to) => from <= *start && *start < to,
            };
            let key_matches = keys
                .iter()
                .zip(filter)
                .all(|(k, f)| f.as_ref().is_none_or(|f| f == k));
            if pair.restated_in.is_none() && in_range && key_matches {
                folds.entry(pair.window.clone()).or_default().push(no);
            }
        }
        let mut written = Vec::new();
        for (key, pairs) in folds {
            let watermark = self.watermark.expect("a refused row needs a watermark");
            let window = self.windows.get_mut(&key).expect("a refused pair's window");
            window.firings.push(Firing {
                kind: Kind::Restatement,
                watermark,
            });
            let version = window.firings.len();
            for &no in &pairs {
                self.refused_pairs[no].restated_in = Some(version);
            }
            written.push(Restated {
                keys: key.0,
                window_start: key.1,
                window_end: key.2,
                version,
                rows_folded: pairs.len(),
            });
        }
        written
    }

    /// `advance_watermark`: returns (windows fired, windows purged). A watermark that is not
    /// ahead changes nothing.
    pub fn advance(&mut self, to: i64) -> (i64, i64) {
        if matches!(self.watermark, Some(cur) if to <= cur) {
            return (0, 0);
        }
        self.watermark = Some(to);
        let (mut fired, mut purged) = (0, 0);
        for (&(_, _, end), win) in self.windows.iter_mut() {
            if win.live && win.firings.is_empty() && end <= to {
                win.firings.push(Firing {
                    kind: Kind::Main,
                    watermark: to,
                });
                fired += 1;
            }
            if win.live && end + self.lateness <= to {
                win.live = false;
                purged += 1;
            }
        }
        (fired, purged)
    }

    pub fn firings(&self) -> usize {
        self.windows.values().map(|w| w.firings.len()).sum()
    }
}

impl Window {
    fn accept(&mut self, ev: &Event) {
        self.live = true;
        self.accepted_totals.resize(ev.values.len(), Dec::default());
        for (total, v) in self.accepted_totals.iter_mut().zip(&ev.values) {
            if let Some(v) = v {
                *total = *total + *v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::{utc, DAY, HOUR};

    fn ev(e: i64, id: &str) -> Event {
        Event {
            keys: vec![Some("web".into())],
            event_id: Some(id.into()),
            event_time: e,
            values: vec![],
        }
    }

    /// SPEC §2's worked example, through the model.
    #[test]
    fn worked_example() {
        let e = utc("2026-10-29 18:02");
        let landing = |w: &str| {
            let mut m = Model::new(WindowSpec::tumbling(DAY, 0), DAY, true);
            m.advance(utc(w));
            m.ingest(&[ev(e, "8841")]).0[0][0]
        };
        assert_eq!(
            landing("2026-10-29 20:00"),
            Landing::Open {
                window_start: utc("2026-10-29 00:00"),
                window_end: utc("2026-10-30 00:00")
            }
        );
        assert_eq!(
            landing("2026-10-30 12:00"),
            Landing::Late {
                window_start: utc("2026-10-29 00:00"),
                window_end: utc("2026-10-30 00:00")
            }
        );
        assert!(
            matches!(landing("2026-10-31 00:00"), Landing::Refused { .. }),
            "the deadline itself refuses"
        );
        assert_eq!(
            landing("2026-11-01 00:00"),
            Landing::Refused {
                window_start: utc("2026-10-29 00:00"),
                window_end: utc("2026-10-30 00:00"),
                deadline: utc("2026-10-31 00:00"),
                watermark: utc("2026-11-01 00:00"),
                no: 0,
            }
        );
    }

    #[test]
    fn versions_and_ledger() {
        let mut m = Model::new(WindowSpec::tumbling(DAY, 0), DAY, true);
        let e = utc("2026-10-29 18:02");
        m.ingest(&[ev(e, "1")]);
        assert_eq!(m.advance(utc("2026-10-30 00:00")), (1, 0));
        let (_, c) = m.ingest(&[ev(e, "2"), ev(e, "3"), ev(e, "2"), ev(e, "1")]);
        assert_eq!(
            c,
            Counts {
                accepted: 0,
                late: 2,
                refused: 0,
                duplicates: 2
            }
        );
        assert_eq!(m.advance(utc("2026-10-31 00:00")), (0, 1));
        // Ids are remembered after the window's state is gone: "3" is still a duplicate.
        let (_, c) = m.ingest(&[ev(e, "4"), ev(e, "4"), ev(e, "3")]);
        assert_eq!(
            c,
            Counts {
                accepted: 0,
                late: 0,
                refused: 1,
                duplicates: 2
            }
        );
        let (_, c) = m.ingest(&[ev(e, "3"), ev(e, "4")]);
        assert_eq!(
            c,
            Counts {
                accepted: 0,
                late: 0,
                refused: 0,
                duplicates: 2
            }
        );
        let w = &m.windows[&(
            vec![Some("web".into())],
            utc("2026-10-29 00:00"),
            utc("2026-10-30 00:00"),
        )];
        assert_eq!(
            w.firings.iter().map(|f| f.kind).collect::<Vec<_>>(),
            [Kind::Main, Kind::Late]
        );
        assert_eq!(m.advance(utc("2026-10-30 00:00")), (0, 0));
    }

    /// SPEC §7: one row late for its oldest window, refused for an older one and open for the
    /// newest, each pair counted, a late version for the late window only; dedup per window.
    #[test]
    fn hopping_pairs() {
        let mut m = Model::new(WindowSpec::hopping(3 * HOUR, HOUR, 0), HOUR, true);
        let e = utc("2026-03-01 10:30");
        m.ingest(&[ev(utc("2026-03-01 09:10"), "0")]);
        m.advance(utc("2026-03-01 12:20"));
        let (landings, c) = m.ingest(&[ev(e, "1")]);
        assert_eq!(
            landings[0],
            [
                Landing::Refused {
                    window_start: utc("2026-03-01 08:00"),
                    window_end: utc("2026-03-01 11:00"),
                    deadline: utc("2026-03-01 12:00"),
                    watermark: utc("2026-03-01 12:20"),
                    no: 0,
                },
                Landing::Late {
                    window_start: utc("2026-03-01 09:00"),
                    window_end: utc("2026-03-01 12:00")
                },
                Landing::Open {
                    window_start: utc("2026-03-01 10:00"),
                    window_end: utc("2026-03-01 13:00")
                },
            ]
        );
        assert_eq!(
            c,
            Counts {
                accepted: 1,
                late: 1,
                refused: 1,
                duplicates: 0
            }
        );
        let late = &m.windows[&(
            vec![Some("web".into())],
            utc("2026-03-01 09:00"),
            utc("2026-03-01 12:00"),
        )];
        assert_eq!(
            late.firings.iter().map(|f| f.kind).collect::<Vec<_>>(),
            [Kind::Main, Kind::Late]
        );
        // A redelivery is a duplicate in each of its windows, the refused one included.
        let (_, c) = m.ingest(&[ev(e, "1")]);
        assert_eq!(c.duplicates, 3);
        assert_eq!((m.refused, m.duplicates), (1, 3));
    }

    #[test]
    fn calendar_months_fire_at_the_first_of_the_month() {
        let mut m = Model::new(WindowSpec::months(1, 1, 0), 2 * DAY, false);
        m.ingest(&[ev(utc("2026-02-28 23:59"), "1")]);
        assert_eq!(m.advance(utc("2026-02-28 23:59")), (0, 0));
        assert_eq!(m.advance(utc("2026-03-01 00:00")), (1, 0));
        let (landings, _) = m.ingest(&[ev(utc("2026-02-01 00:00"), "2")]);
        assert_eq!(
            landings[0],
            [Landing::Late {
                window_start: utc("2026-02-01 00:00"),
                window_end: utc("2026-03-01 00:00")
            }]
        );
        assert_eq!(m.advance(utc("2026-03-03 00:00")), (0, 1));
    }
}
