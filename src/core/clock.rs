//! The pipeline watermark from the watermarks of its sources.
//!
//! Each source (a Kafka partition, a shard, an ingestion job) has its own forward-only watermark.
//! The pipeline watermark is the minimum over the sources that are not idle: one slow source holds
//! every key back, as an operator's event time is the minimum over its inputs. A source is idle
//! when it was marked so, or when it has not advanced for longer than the pipeline's
//! `idle_timeout` of processing time; it counts again once it advances. The pipeline watermark
//! never goes back: when a source returns behind it, or registers behind it, the pipeline waits
//! for that source to catch up before it moves again.

use super::time::{add, is_finite, Micros};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceClock {
    pub name: String,
    pub watermark: Micros,
    /// Processing time of the source's last advance.
    pub advanced_at: Micros,
    pub marked_idle: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Counts in the minimum.
    Active,
    /// Taken out by `eventtime.mark_idle`.
    Marked,
    /// Has not advanced for longer than the idle timeout.
    TimedOut,
}

impl Idle {
    pub fn as_str(self) -> Option<&'static str> {
        match self {
            Idle::Active => None,
            Idle::Marked => Some("marked"),
            Idle::TimedOut => Some("timeout"),
        }
    }
}

impl SourceClock {
    /// Whether the source counts at processing time `now`. A source that advanced exactly
    /// `idle_timeout` ago still counts.
    pub fn idle(&self, now: Micros, idle_timeout: Option<i64>) -> Idle {
        if self.marked_idle {
            return Idle::Marked;
        }
        match idle_timeout {
            Some(t) if (now as i128 - self.advanced_at as i128) > t as i128 => Idle::TimedOut,
            _ => Idle::Active,
        }
    }
}

/// The least watermark among the active sources, or `None` when no source is active.
pub fn active_minimum(
    sources: &[SourceClock],
    now: Micros,
    idle_timeout: Option<i64>,
) -> Option<Micros> {
    sources
        .iter()
        .filter(|s| s.idle(now, idle_timeout) == Idle::Active)
        .map(|s| s.watermark)
        .min()
}

/// The pipeline watermark after a change of its sources: the active minimum when it is ahead of
/// the current one, else the current one.
pub fn pipeline_watermark(
    current: Option<Micros>,
    sources: &[SourceClock],
    now: Micros,
    idle_timeout: Option<i64>,
) -> Option<Micros> {
    match (current, active_minimum(sources, now, idle_timeout)) {
        (Some(c), Some(m)) => Some(c.max(m)),
        (c, m) => c.or(m),
    }
}

/// Whether a watermark `to` is refused as too far ahead of processing time `now`: later than
/// `now + max_ahead`. The infinities are never refused (`'infinity'` is the end of the input), and
/// without a bound nothing is.
pub fn too_far_ahead(to: Micros, now: Micros, max_ahead: Option<i64>) -> bool {
    match max_ahead {
        Some(ahead) if is_finite(to) => to > add(now, ahead),
        _ => false,
    }
}

/// The active sources at the minimum: those the pipeline watermark waits for. Several when they
/// share the least watermark; none when every source is idle.
pub fn holding_back(
    sources: &[SourceClock],
    now: Micros,
    idle_timeout: Option<i64>,
) -> Vec<&SourceClock> {
    let Some(min) = active_minimum(sources, now, idle_timeout) else {
        return Vec::new();
    };
    sources
        .iter()
        .filter(|s| s.idle(now, idle_timeout) == Idle::Active && s.watermark == min)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::time::INFINITY;

    const H: i64 = 3_600_000_000;

    fn src(name: &str, watermark: Micros, advanced_at: Micros, marked_idle: bool) -> SourceClock {
        SourceClock {
            name: name.into(),
            watermark,
            advanced_at,
            marked_idle,
        }
    }

    #[test]
    fn the_slowest_active_source_holds_the_pipeline() {
        let s = vec![
            src("a", 10 * H, 0, false),
            src("b", 4 * H, 0, false),
            src("c", 7 * H, 0, false),
        ];
        assert_eq!(pipeline_watermark(None, &s, 0, None), Some(4 * H));
        assert_eq!(
            holding_back(&s, 0, None)
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>(),
            ["b"]
        );
    }

    #[test]
    fn idle_sources_are_left_out_until_they_advance() {
        let s = vec![src("a", 10 * H, 5 * H, false), src("b", 4 * H, 0, false)];
        // b last advanced at 0; with a 1 h timeout it is idle at 2 h, not at exactly 1 h.
        assert_eq!(s[1].idle(H, Some(H)), Idle::Active);
        assert_eq!(s[1].idle(2 * H, Some(H)), Idle::TimedOut);
        assert_eq!(
            pipeline_watermark(Some(4 * H), &s, 6 * H, Some(H)),
            Some(10 * H)
        );
        let marked = vec![src("a", 10 * H, 0, false), src("b", 4 * H, 0, true)];
        assert_eq!(marked[1].idle(0, None).as_str(), Some("marked"));
        assert_eq!(pipeline_watermark(None, &marked, 0, None), Some(10 * H));
    }

    #[test]
    fn the_pipeline_watermark_never_goes_back() {
        // b returns from idleness behind the pipeline watermark: the pipeline stays, and waits for b.
        let s = vec![
            src("a", 12 * H, 9 * H, false),
            src("b", 5 * H, 9 * H, false),
        ];
        assert_eq!(
            pipeline_watermark(Some(10 * H), &s, 9 * H, Some(H)),
            Some(10 * H)
        );
        assert_eq!(holding_back(&s, 9 * H, Some(H))[0].name, "b");
        // Every source idle: nothing moves.
        let idle = vec![src("a", 12 * H, 0, true)];
        assert_eq!(
            pipeline_watermark(Some(10 * H), &idle, 0, None),
            Some(10 * H)
        );
        assert_eq!(pipeline_watermark(None, &idle, 0, None), None);
        assert!(holding_back(&idle, 0, None).is_empty());
    }

    #[test]
    fn a_source_at_infinity_leaves_the_others_in_charge() {
        let s = vec![src("done", INFINITY, 0, false), src("b", 3 * H, 0, false)];
        assert_eq!(pipeline_watermark(None, &s, 0, None), Some(3 * H));
        let s = vec![
            src("done", INFINITY, 0, false),
            src("b", INFINITY, 0, false),
        ];
        assert_eq!(pipeline_watermark(Some(3 * H), &s, 0, None), Some(INFINITY));
        assert_eq!(holding_back(&s, 0, None).len(), 2);
    }

    #[test]
    fn timeouts_do_not_overflow_at_the_ends_of_time() {
        let s = src("a", 0, i64::MIN + 1, false);
        assert_eq!(s.idle(i64::MAX - 1, Some(i64::MAX)), Idle::TimedOut);
        assert_eq!(s.idle(i64::MIN + 1, Some(1)), Idle::Active);
    }

    #[test]
    fn a_watermark_more_than_max_ahead_ahead_of_the_clock_is_refused() {
        let now = 1000 * H;
        let day = Some(24 * H);
        assert!(!too_far_ahead(now, now, day));
        assert!(
            !too_far_ahead(now + 24 * H, now, day),
            "exactly max_ahead ahead is allowed"
        );
        assert!(too_far_ahead(now + 24 * H + 1, now, day));
        assert!(
            !too_far_ahead(INFINITY, now, day),
            "'infinity' ends the input"
        );
        assert!(!too_far_ahead(now + 1000 * H, now, None), "NULL: no bound");
        assert!(too_far_ahead(now + 1, now, Some(0)));
        // A bound past the end of the timestamp range saturates rather than wrapping.
        assert!(!too_far_ahead(now + 1000 * H, now, Some(i64::MAX)));
    }
}
