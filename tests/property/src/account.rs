//! The lateness account of SPEC §8 (`eventtime.lateness`, `eventtime.suggest_lateness`),
//! computed from the model's landings alone: each (row, window) pair knows whether it landed
//! open, late or refused, the watermark in force when its statement ran, and its values.
//! Duplicates count nowhere: the model never records them.

use crate::model::{Keys, Model};
use crate::values::Dec;

/// One line of `eventtime.lateness`: a key and window.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub keys: Keys,
    pub window_start: i64,
    pub window_end: i64,
    pub on_time: i64,
    pub late: i64,
    pub refused: i64,
    pub refused_share: f64,
    pub refused_value: Option<Dec>,
    pub refused_value_share: Option<f64>,
    /// Arrival lateness (`watermark at arrival - window_end`) of the late and refused pairs, in
    /// microseconds: p50, p90, p99 and max.
    pub lateness: [Option<i64>; 4],
}

/// The value column `eventtime.lateness` is asked about: its index in the events' values, and
/// whether the pipeline has a `sum` or `avg` of it (without one, the accepted total is unknown
/// and the value share is NULL).
#[derive(Clone, Copy, Debug)]
pub struct ValueColumn {
    pub index: usize,
    pub has_total: bool,
}

/// `percentile_disc(p)` over ascending samples: the smallest sample whose cumulative share is
/// at least p, that is the ceil(p·n)-th (at least the first). The product p·n is taken in
/// double precision, as PostgreSQL's `percentile_disc` takes it.
pub fn percentile_disc(sorted: &[i64], p: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let k = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[k - 1])
}

/// `eventtime.lateness(pipeline, from, to, value)`: every key and window starting in
/// `[from, to)` that some pair landed in.
pub fn lateness(model: &Model, from: i64, to: i64, value: Option<ValueColumn>) -> Vec<Line> {
    let mut lines = Vec::new();
    for ((keys, start, end), w) in &model.windows {
        if *start < from || *start >= to {
            continue;
        }
        let refused: Vec<_> = w.refused.iter().map(|&i| &model.refused_pairs[i]).collect();
        let (late, n_refused) = (w.late.len() as i64, refused.len() as i64);
        let all = w.on_time + late + n_refused;
        if all == 0 {
            continue;
        }
        let mut samples: Vec<i64> = w
            .late
            .iter()
            .copied()
            .chain(refused.iter().map(|p| p.watermark))
            .map(|wm| wm - end)
            .collect();
        samples.sort_unstable();
        let (refused_value, refused_value_share) = match value {
            None => (None, None),
            Some(v) => {
                let r = refused
                    .iter()
                    .filter_map(|p| p.values[v.index])
                    .fold(Dec::default(), |a, b| a + b);
                let share = if v.has_total {
                    let accepted = w.accepted_totals.get(v.index).copied().unwrap_or_default();
                    let whole = accepted + r;
                    (!whole.is_zero()).then(|| r.ratio(whole))
                } else {
                    None
                };
                (Some(r), share)
            }
        };
        lines.push(Line {
            keys: keys.clone(),
            window_start: *start,
            window_end: *end,
            on_time: w.on_time,
            late,
            refused: n_refused,
            refused_share: n_refused as f64 / all as f64,
            refused_value,
            refused_value_share,
            lateness: [
                percentile_disc(&samples, 0.5),
                percentile_disc(&samples, 0.9),
                percentile_disc(&samples, 0.99),
                samples.last().copied(),
            ],
        });
    }
    lines
}

/// `eventtime.suggest_lateness(pipeline, coverage)`: a pair is accepted when its arrival
/// lateness is below the allowed lateness (the deadline itself refuses), so the smallest
/// lateness accepting the share `coverage` of the late and refused pairs is one microsecond
/// more than their `coverage` quantile; NULL when no pair arrived after its window closed.
pub fn suggest_lateness(model: &Model, coverage: f64) -> Option<i64> {
    let mut samples = Vec::new();
    for ((_, _, end), w) in &model.windows {
        samples.extend(w.late.iter().map(|wm| wm - end));
    }
    samples.extend(model.refused_pairs.iter().map(|p| p.watermark - p.window.2));
    samples.sort_unstable();
    percentile_disc(&samples, coverage).map(|l| l + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, Kind, Restated};
    use crate::values::{utc, DAY, HOUR};
    use crate::windows::WindowSpec;

    #[test]
    fn percentiles() {
        let s = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
        assert_eq!(percentile_disc(&s, 0.5), Some(5));
        assert_eq!(percentile_disc(&s, 0.51), Some(6));
        assert_eq!(percentile_disc(&s, 0.9), Some(9));
        assert_eq!(percentile_disc(&s, 0.99), Some(10));
        assert_eq!(percentile_disc(&s, 1.0), Some(10));
        assert_eq!(percentile_disc(&s, 1e-9), Some(1));
        assert_eq!(percentile_disc(&[], 0.5), None);
    }

    fn ev(store: Option<&str>, e: &str, id: &str, amount: Option<&str>) -> Event {
        Event {
            keys: vec![store.map(str::to_string)],
            event_id: Some(id.into()),
            event_time: utc(e),
            values: vec![amount.map(Dec::parse)],
        }
    }

    /// The README's corrections story: 3 + 1,402 on time, one late order, three refused;
    /// restatements per key, a second one writing nothing.
    #[test]
    fn corrections_story() {
        let mut m = Model::new(WindowSpec::tumbling(DAY, 0), DAY, true);
        let mut web: Vec<Event> = (1..=1402)
            .map(|i| ev(Some("web"), "2026-10-29 10:00", &i.to_string(), Some("10")))
            .collect();
        web.push(ev(Some("shop"), "2026-10-29 09:00", "5001", Some("100")));
        web.push(ev(Some("shop"), "2026-10-29 10:00", "5002", Some("200")));
        web.push(ev(Some("shop"), "2026-10-29 11:00", "5003", Some("300")));
        m.ingest(&web);
        m.advance(utc("2026-10-30 00:00"));
        m.advance(utc("2026-10-30 12:00"));
        m.ingest(&[ev(Some("web"), "2026-10-29 23:40", "9001", Some("25"))]);
        m.advance(utc("2026-11-01 00:00"));
        m.ingest(&[ev(Some("web"), "2026-10-29 18:02", "8841", Some("42"))]);
        let (_, c) = m.ingest(&[
            ev(Some("shop"), "2026-10-29 12:00", "5004", Some("40")),
            ev(Some("shop"), "2026-10-29 13:00", "5005", None),
            ev(Some("web"), "2026-10-29 18:02", "8841", Some("42")),
        ]);
        assert_eq!((c.refused, c.duplicates), (2, 1));
        let day = utc("2026-10-29 00:00");
        let value = Some(ValueColumn {
            index: 0,
            has_total: true,
        });
        let lines = lateness(&m, day, day + DAY, value);
        let shop = &lines[0];
        assert_eq!((shop.on_time, shop.late, shop.refused), (3, 0, 2));
        assert_eq!(shop.refused_value, Some(Dec::parse("40")));
        assert_eq!(shop.refused_value_share, Some(40.0 / 640.0));
        assert_eq!(shop.lateness, [Some(2 * DAY); 4]);
        let web = &lines[1];
        assert_eq!((web.on_time, web.late, web.refused), (1402, 1, 1));
        assert_eq!(
            web.lateness,
            [Some(12 * HOUR), Some(2 * DAY), Some(2 * DAY), Some(2 * DAY)]
        );
        assert_eq!(suggest_lateness(&m, 1.0), Some(2 * DAY + 1));
        assert_eq!(suggest_lateness(&m, 0.25), Some(12 * HOUR + 1));

        let web_only = vec![Some(Some("web".to_string()))];
        assert_eq!(
            m.restate(day, None, &web_only),
            [Restated {
                keys: vec![Some("web".into())],
                window_start: day,
                window_end: day + DAY,
                version: 3,
                rows_folded: 1
            }]
        );
        assert_eq!(m.restate(day, None, &web_only), []);
        // The whole month, every key: only shop has rows left; a range that starts after the
        // window takes nothing.
        assert_eq!(m.restate(day + 1, Some(day + 3 * DAY), &vec![None]), []);
        let all = m.restate(day - 28 * DAY, Some(day + 3 * DAY), &vec![None]);
        assert_eq!(
            all,
            [Restated {
                keys: vec![Some("shop".into())],
                window_start: day,
                window_end: day + DAY,
                version: 2,
                rows_folded: 2
            }]
        );
        let kinds = |k: &str| {
            m.windows[&(vec![Some(k.to_string())], day, day + DAY)]
                .firings
                .iter()
                .map(|f| f.kind)
                .collect::<Vec<_>>()
        };
        assert_eq!(kinds("web"), [Kind::Main, Kind::Late, Kind::Restatement]);
        assert_eq!(kinds("shop"), [Kind::Main, Kind::Restatement]);
        // Folded rows stay refused rows in the account.
        assert_eq!(lateness(&m, day, day + DAY, None)[0].refused, 2);
    }

    /// A window that only refused rows publishes its first version by restatement; the NULL key
    /// is a key of its own.
    #[test]
    fn restating_a_window_that_never_published() {
        let mut m = Model::new(WindowSpec::tumbling(HOUR, 0), 0, false);
        m.advance(utc("2026-01-01 05:00"));
        m.ingest(&[
            ev(None, "2026-01-01 01:10", "1", None),
            ev(Some("a"), "2026-01-01 01:20", "2", None),
        ]);
        let null_key = vec![Some(None)];
        let got = m.restate(utc("2026-01-01 01:00"), None, &null_key);
        assert_eq!(
            got,
            [Restated {
                keys: vec![None],
                window_start: utc("2026-01-01 01:00"),
                window_end: utc("2026-01-01 02:00"),
                version: 1,
                rows_folded: 1
            }]
        );
        let line = &lateness(&m, 0, utc("2026-01-02 00:00"), None)[0];
        assert_eq!((line.on_time, line.late, line.refused), (0, 0, 1));
        assert_eq!(line.refused_share, 1.0);
        assert_eq!(line.lateness[3], Some(3 * HOUR));
    }
}
