//! The independent model of one pipeline, written from SPEC §2-3 and nothing else: tumbling
//! windows, the landing rule, event-id dedup (every id is remembered for the pipeline's
//! lifetime, as SPEC §3 says), firings and purging. It knows which rows a
//! window accepted only through the landings it returns; the rows themselves go to the model's
//! tables in the test database, where PostgreSQL computes the expected aggregates.

use std::collections::{BTreeMap, BTreeSet, HashSet};

/// Key values as text, `None` for NULL: NULL groups with NULL, as in `GROUP BY`.
pub type Keys = Vec<Option<String>>;

/// A window of one key: (key values, window start).
pub type WindowKey = (Keys, i64);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Main,
    Late,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Main => "main",
            Kind::Late => "late",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Landing {
    Open {
        window_start: i64,
    },
    Late {
        window_start: i64,
    },
    Refused {
        window_start: i64,
        window_end: i64,
        deadline: i64,
        watermark: i64,
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

/// One version of a window: version n is `firings[n - 1]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Firing {
    pub kind: Kind,
    /// The watermark in force when it was written.
    pub watermark: i64,
}

#[derive(Default, Debug)]
pub struct Window {
    /// The window has state: it accepted a row and its deadline has not passed.
    pub live: bool,
    pub firings: Vec<Firing>,
}

/// What the model needs of a row: its key values, event id and event time.
pub struct Event {
    pub keys: Keys,
    pub event_id: Option<String>,
    pub event_time: i64,
}

pub struct Model {
    size: i64,
    origin: i64,
    lateness: i64,
    dedup: bool,
    pub watermark: Option<i64>,
    /// Every (keys, window start, event id) ever seen, refused rows included; never forgotten.
    ledger: HashSet<(Keys, i64, String)>,
    pub windows: BTreeMap<WindowKey, Window>,
    pub refused: i64,
    pub duplicates: i64,
}

impl Model {
    pub fn new(size: i64, origin: i64, lateness: i64, dedup: bool) -> Model {
        assert!(size > 0 && lateness >= 0);
        Model {
            size,
            origin,
            lateness,
            dedup,
            watermark: None,
            ledger: HashSet::new(),
            windows: BTreeMap::new(),
            refused: 0,
            duplicates: 0,
        }
    }

    pub fn size(&self) -> i64 {
        self.size
    }

    pub fn lateness(&self) -> i64 {
        self.lateness
    }

    pub fn window_start(&self, event_time: i64) -> i64 {
        self.origin + (event_time - self.origin).div_euclid(self.size) * self.size
    }

    /// One ingest statement. Every row is classified against the watermark in force when the
    /// statement starts; each window that took a late row gets one new version.
    pub fn ingest(&mut self, events: &[Event]) -> (Vec<Landing>, Counts) {
        let w = self.watermark;
        let mut counts = Counts::default();
        let mut landings = Vec::with_capacity(events.len());
        let mut late_windows = BTreeSet::new();
        for ev in events {
            let window_start = self.window_start(ev.event_time);
            let window_end = window_start + self.size;
            let deadline = window_end + self.lateness;
            if self.dedup {
                if let Some(id) = &ev.event_id {
                    if !self
                        .ledger
                        .insert((ev.keys.clone(), window_start, id.clone()))
                    {
                        counts.duplicates += 1;
                        landings.push(Landing::Duplicate);
                        continue;
                    }
                }
            }
            let key = (ev.keys.clone(), window_start);
            let landing = match w {
                Some(w) if w >= deadline => {
                    counts.refused += 1;
                    Landing::Refused {
                        window_start,
                        window_end,
                        deadline,
                        watermark: w,
                    }
                }
                Some(w) if w >= window_end => {
                    counts.late += 1;
                    self.windows.entry(key.clone()).or_default().live = true;
                    late_windows.insert(key);
                    Landing::Late { window_start }
                }
                _ => {
                    counts.accepted += 1;
                    self.windows.entry(key).or_default().live = true;
                    Landing::Open { window_start }
                }
            };
            landings.push(landing);
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

    /// `advance_watermark`: returns (windows fired, windows purged). A watermark that is not
    /// ahead changes nothing.
    pub fn advance(&mut self, to: i64) -> (i64, i64) {
        if matches!(self.watermark, Some(cur) if to <= cur) {
            return (0, 0);
        }
        self.watermark = Some(to);
        let (mut fired, mut purged) = (0, 0);
        for ((_, start), win) in self.windows.iter_mut() {
            let end = *start + self.size;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::{utc, DAY};

    fn ev(e: i64, id: &str) -> Event {
        Event {
            keys: vec![Some("web".into())],
            event_id: Some(id.into()),
            event_time: e,
        }
    }

    /// SPEC §2's worked example, through the model.
    #[test]
    fn worked_example() {
        let e = utc("2026-10-29 18:02");
        let landing = |w: &str| {
            let mut m = Model::new(DAY, 0, DAY, true);
            m.advance(utc(w));
            m.ingest(&[ev(e, "8841")]).0[0]
        };
        assert_eq!(
            landing("2026-10-29 20:00"),
            Landing::Open {
                window_start: utc("2026-10-29 00:00")
            }
        );
        assert_eq!(
            landing("2026-10-30 12:00"),
            Landing::Late {
                window_start: utc("2026-10-29 00:00")
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
            }
        );
    }

    #[test]
    fn versions_and_ledger() {
        let mut m = Model::new(DAY, 0, DAY, true);
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
        let w = &m.windows[&(vec![Some("web".into())], utc("2026-10-29 00:00"))];
        assert_eq!(
            w.firings.iter().map(|f| f.kind).collect::<Vec<_>>(),
            [Kind::Main, Kind::Late]
        );
        assert_eq!(m.advance(utc("2026-10-30 00:00")), (0, 0));
    }

    #[test]
    fn windows_before_the_origin() {
        let m = Model::new(DAY, utc("2026-01-01 06:00"), 0, false);
        assert_eq!(
            m.window_start(utc("2026-01-01 05:59")),
            utc("2025-12-31 06:00")
        );
        assert_eq!(
            m.window_start(utc("2026-01-01 06:00")),
            utc("2026-01-01 06:00")
        );
    }
}
