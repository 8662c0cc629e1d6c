//! `eventtime.explain`: "why hasn't Tuesday closed?" in one query. For an event time and a key,
//! each window the row belongs to (one for tumbling windows), its bounds and deadline, where it
//! is in its life (open, fired, purged), the rows and latest version it has, the pipeline
//! watermark, the landing such a row would get now, and the sources the watermark waits for.
//!
//! It only reads. The SQL function `eventtime.explain(pipeline, event_time, VARIADIC key)` in
//! `src/sql/finalize.sql` passes the key values here as text; each is cast to its key column's
//! type, so `'42'` finds the key 42 of an integer column.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::JsonB;

use super::watermark::{sources, tstz};
use crate::core::clock;
use crate::core::landing::{self, Landing, WindowState};
use crate::core::model::PipelineDef;
use crate::core::sqlgen::{duration_literal, key_equals_param};
use crate::core::time;
use crate::core::window::Window;
use crate::pg::catalog;
use crate::pg::error::{invalid, required, EtError};
use crate::pg::security::as_catalog_owner;
use crate::pg::zone;

type Row = (
    TimestampWithTimeZone,
    TimestampWithTimeZone,
    TimestampWithTimeZone,
    String,
    Option<i64>,
    Option<i32>,
    Option<TimestampWithTimeZone>,
    String,
    Option<Vec<String>>,
    String,
    Option<JsonB>,
);

#[pg_schema]
mod _eventtime {
    use super::*;

    // pgrx reads the column names from the `name!` types of the signature, so they cannot go into
    // a type alias.
    #[allow(clippy::type_complexity)]
    #[pg_extern(stable, parallel_safe)]
    #[search_path(pg_catalog, pg_temp)]
    fn explain(
        pipeline: Option<&str>,
        event_time: Option<TimestampWithTimeZone>,
        key: Option<Vec<Option<String>>>,
    ) -> TableIterator<
        'static,
        (
            name!(window_start, TimestampWithTimeZone),
            name!(window_end, TimestampWithTimeZone),
            name!(deadline, TimestampWithTimeZone),
            name!(state, String),
            name!(rows_in_state, Option<i64>),
            name!(latest_version, Option<i32>),
            name!(watermark, Option<TimestampWithTimeZone>),
            name!(landing, String),
            name!(held_back_by, Option<Vec<String>>),
            name!(explanation, String),
            name!(provisional, Option<JsonB>),
        ),
    > {
        const F: &str = "eventtime.explain";
        let name = required(pipeline, F, "pipeline");
        let e = required(event_time, F, "event_time");
        let key = required(key, F, "key");
        let p = catalog::load(name);
        if !p.readable() {
            // Neither the owner nor the views of a pipeline the caller may not read are named.
            EtError::PermissionDenied {
                message: format!("permission denied for pipeline \"{name}\""),
                hint: "eventtime.explain reads the pipeline's views: its owner can GRANT SELECT on one of them.".into(),
            }
            .raise()
        }
        let def = &p.def;
        if key.len() != def.keys.len() {
            let cols: Vec<&str> = def.keys.iter().map(|k| k.name.as_str()).collect();
            invalid(
                format!(
                    "pipeline \"{name}\" has {} key column(s), but {} key value(s) were given",
                    def.keys.len(),
                    key.len()
                ),
                Some(&if cols.is_empty() {
                    format!("Call eventtime.explain('{name}', event_time) with no key values.")
                } else {
                    format!(
                        "Pass one value per key column, in this order: {}.",
                        cols.join(", ")
                    )
                }),
            )
            .raise()
        }
        let windows = zone::windows(&def.window, e.into_inner()).unwrap_or_else(|_| {
            invalid(
                format!("event time {e} has no window of pipeline \"{name}\""),
                Some("Event times must be finite and inside the timestamp range."),
            )
            .raise()
        });

        // The key as a condition on a table of the pipeline; values are parameters $2.., cast from
        // text to the key column's type.
        let key_match: String = def
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| key_equals_param("t", k, i + 2))
            .collect();
        // Cumulate windows share their start: the end, the parameter after the keys, tells them
        // apart.
        let end_identifies = def.window.end_identifies() && !def.window.is_session();
        let key_match = if end_identifies {
            format!("{key_match} AND t.window_end = ${}", def.keys.len() + 2)
        } else {
            key_match
        };
        let state_sql = format!(
            "SELECT sum(t._et_n)::bigint FROM {} t WHERE t.window_start = $1{key_match}",
            def.table("state")
        );
        // An open window's aggregates so far, as `_provisional` shows them.
        let provisional_sql = def.provisional_values(&format!("t.window_start = $1{key_match}"));
        // With batched late firings: when the window's oldest pending late row was written.
        let pending_sql = def.batches_late().then(|| {
            format!(
                "SELECT min(t._et_since) FROM {} t WHERE t._et_pending IS NOT NULL AND t.window_start = $1{key_match}",
                def.table("state")
            )
        });
        let history_sql = format!(
            "SELECT max(t.version) FROM {} t WHERE t.window_start = $1{key_match}",
            def.table("history")
        );

        // The catalog is read as its owner; the pipeline's tables, whose key values are cast to
        // the key types (domain checks and input functions of the owner's types), as the
        // pipeline's owner.
        let rows: Vec<Row> = p.as_owner(|| Spi::connect(|client| {
            let (watermark, (sources, now)) = as_catalog_owner(|| {
                let watermark = client
                    .select("SELECT watermark FROM _eventtime.pipeline WHERE id = $1", None, &[p.id.into()])
                    .expect("catalog read")
                    .first()
                    .get::<TimestampWithTimeZone>(1)
                    .expect("watermark");
                (watermark, sources(client, p.id))
            });
            let holding = clock::holding_back(&sources, now, p.def.idle_timeout);
            let held_back_by: Option<Vec<String>> =
                if holding.is_empty() { None } else { Some(holding.iter().map(|s| s.name.clone()).collect()) };
            let wait = if sources.is_empty() {
                "no watermark has been advanced yet".to_string()
            } else if holding.is_empty() {
                "every source is idle, so the pipeline watermark waits for one to advance".to_string()
            } else {
                let who: Vec<String> = holding
                    .iter()
                    .map(|s| format!("source \"{}\" (at {}, last advanced at {})", s.name, tstz(s.watermark), tstz(s.advanced_at)))
                    .collect();
                format!("the pipeline watermark waits for {}", who.join(" and "))
            };
            let w = watermark.map(|w| w.into_inner());
            windows
                .iter()
                .map(|win| {
                    let deadline = landing::deadline(win.end, def.lateness);
                    let mut args: Vec<pgrx::datum::DatumWithOid> = vec![tstz(win.start).into()];
                    args.extend(key.iter().map(|k| k.clone().into()));
                    if end_identifies {
                        args.push(tstz(win.end).into());
                    }
                    let state_rows = client.select(&state_sql, None, &args).expect("state read");
                    let state_rows = if state_rows.is_empty() { None } else { state_rows.first().get::<i64>(1).expect("rows") };
                    let latest = client.select(&history_sql, None, &args).expect("history read").first().get::<i32>(1).expect("version");
                    let state = landing::window_state(win.end, def.lateness, w);
                    let now_landing = landing::landing(e.into_inner(), win.end, w.unwrap_or(time::NEG_INFINITY), def.lateness);
                    let bounds = format!("window [{}, {})", tstz(win.start), tstz(win.end));
                    let at = match watermark {
                        Some(w) => format!("the pipeline watermark is {w}"),
                        None => "the pipeline has no watermark yet".to_string(),
                    };
                    let explanation = match state {
                        WindowState::Open => format!(
                            "{bounds} is open: it fires when the pipeline watermark reaches {}; {at}; {wait}",
                            tstz(win.end)
                        ),
                        WindowState::Fired => format!(
                            "{bounds} fired{}; {at}, so a row for it is late: {} until the watermark reaches the deadline {}",
                            match latest {
                                Some(v) => format!(" and its latest version is {v}"),
                                None => " with no rows for this key".to_string(),
                            },
                            match (&pending_sql, def.late_firing) {
                                (Some(sql), Some(every)) => {
                                    let since = client.select(sql, None, &args).expect("state read").first().get::<TimestampWithTimeZone>(1).expect("pending");
                                    let every = format!("{} s", every as f64 / 1e6);
                                    match since {
                                        Some(t) => format!(
                                            "it joins the window's pending late rows (late_firing {every}), the first written at {t}: the next version is written by the first eventtime.tick() or advance from {}, and by any advance that reaches the deadline",
                                            tstz(time::add(t.into_inner(), def.late_firing.unwrap_or(0)))
                                        ),
                                        None => format!(
                                            "it joins the window's pending late rows (late_firing {every}; none are pending now): the next version is written by the first eventtime.tick() or advance at least that long after the first of them, and by any advance that reaches the deadline"
                                        ),
                                    }
                                }
                                _ => "it joins the window and writes a new version".to_string(),
                            },
                            tstz(deadline)
                        ),
                        WindowState::Purged => format!(
                            "{bounds} is closed for good: {at}, at or past the deadline {}, so its state is purged and a row for it goes to refused rows{}",
                            tstz(deadline),
                            match latest {
                                Some(v) => format!("; its latest version is {v}"),
                                None => String::new(),
                            }
                        ),
                    };
                    let (state_rows, latest, explanation) = if def.window.is_session() {
                        session_story(client, def, (&args, &key_match), win, w, now_landing, &at)
                    } else {
                        (state_rows, latest, explanation)
                    };
                    // A session's row here is the row's own window, not a session: its values
                    // are those of the session in `_provisional`.
                    let provisional = if state == WindowState::Open && !def.window.is_session() {
                        let got = client.select(&provisional_sql, None, &args).expect("state read");
                        if got.is_empty() { None } else { got.first().get::<JsonB>(1).expect("values") }
                    } else {
                        None
                    };
                    (
                        tstz(win.start),
                        tstz(win.end),
                        tstz(deadline),
                        state.as_str().to_string(),
                        state_rows,
                        latest,
                        watermark,
                        now_landing.as_str().to_string(),
                        held_back_by.clone(),
                        explanation,
                        provisional,
                    )
                })
                .collect()
        }));
        TableIterator::new(rows)
    }
}

/// What a row of a session pipeline at `win.start` would do to the sessions of its key: form a
/// session, join one, or merge several; and which purged sessions it overlaps without merging.
/// `args` are the window start and the key values of the explain statements, and `key_match`
/// their condition on the key of a table aliased `t`; `at` says where the watermark is. Returns the rows and version of the session it would join, and the text.
fn session_story(
    client: &pgrx::spi::SpiClient<'_>,
    def: &PipelineDef,
    (args, key_match): (&[pgrx::datum::DatumWithOid], &str),
    win: &Window,
    w: Option<time::Micros>,
    landing: Landing,
    at: &str,
) -> (Option<i64>, Option<i32>, String) {
    let overlapping = format!(
        "t.window_start < $1 + {gap} AND t.window_end > $1{key_match}",
        gap = duration_literal(win.end - win.start)
    );
    let live: Vec<(i64, i64, i32, i64)> = client
        .select(
            &format!(
                "SELECT t.window_start, t.window_end, t.version, t._et_n FROM {} t WHERE {overlapping} ORDER BY t.window_start",
                def.table("state")
            ),
            None,
            args,
        )
        .expect("state read")
        .map(|r| {
            (
                r.get::<TimestampWithTimeZone>(1).unwrap().unwrap().into_inner(),
                r.get::<TimestampWithTimeZone>(2).unwrap().unwrap().into_inner(),
                r.get::<i32>(3).unwrap().unwrap(),
                r.get::<i64>(4).unwrap().unwrap(),
            )
        })
        .collect();
    // Sessions in history that no later session absorbed and whose deadline has passed.
    let purged: Vec<(i64, i64)> = client
        .select(
            &format!(
                "SELECT l.window_start, l.window_end FROM (SELECT DISTINCT ON (t.window_start, t.window_end) t.window_start, t.window_end, t.kind \
                 FROM {} t WHERE {overlapping} ORDER BY t.window_start, t.window_end, t.version DESC) l \
                 WHERE l.kind <> 'merged' ORDER BY l.window_start",
                def.table("history")
            ),
            None,
            args,
        )
        .expect("history read")
        .map(|r| {
            (
                r.get::<TimestampWithTimeZone>(1).unwrap().unwrap().into_inner(),
                r.get::<TimestampWithTimeZone>(2).unwrap().unwrap().into_inner(),
            )
        })
        .filter(|(_, e)| w.is_some_and(|w| w >= landing::deadline(*e, def.lateness)))
        .collect();
    let span = |s: i64, e: i64| format!("[{}, {})", tstz(s), tstz(e));
    let own = span(win.start, win.end);
    let list = |v: &[(i64, i64)]| {
        v.iter()
            .map(|(s, e)| span(*s, *e))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let ghosts = if purged.is_empty() {
        String::new()
    } else {
        format!(
            "; it overlaps session{} {} of this key, purged (its state is gone), with which it does not merge",
            if purged.len() > 1 { "s" } else { "" },
            list(&purged)
        )
    };
    if landing == Landing::SideOutput {
        return (
            None,
            None,
            format!(
                "the row's own window {own} reached its deadline {}, so a row at this time goes to refused rows and changes no session{ghosts}; {at}",
                tstz(landing::deadline(win.end, def.lateness))
            ),
        );
    }
    let how = if landing == Landing::LateFiring {
        "late (its own window has ended, within the allowed lateness)"
    } else {
        "on time"
    };
    match live.as_slice() {
        [] => (
            None,
            None,
            format!("a row at this time is {how} and would form a new session {own}{ghosts}; {at}"),
        ),
        [(s, e, v, n)] if *s <= win.start && win.end <= *e => (
            Some(*n),
            (*v > 0).then_some(*v),
            format!(
                "a row at this time is {how} and would join session {} of this key, which {}{ghosts}; {at}",
                span(*s, *e),
                if *v > 0 {
                    match def.late_firing {
                        Some(every) => format!(
                            "fired: it waits with the session's late rows for their batch, which writes version {} (late_firing {} s: the first eventtime.tick() or advance that long after the first of them, or one that reaches the deadline)",
                            v + 1,
                            every as f64 / 1e6
                        ),
                        None => format!("fired: it writes version {}", v + 1),
                    }
                } else {
                    format!("fires when the pipeline watermark reaches {}", tstz(*e))
                }
            ),
        ),
        many => {
            let lo = many.iter().map(|m| m.0).min().unwrap().min(win.start);
            let hi = many.iter().map(|m| m.1).max().unwrap().max(win.end);
            let fired: Vec<(i64, i64)> = many
                .iter()
                .filter(|m| m.2 > 0)
                .map(|m| (m.0, m.1))
                .collect();
            let spans: Vec<(i64, i64)> = many.iter().map(|m| (m.0, m.1)).collect();
            (
                None,
                None,
                format!(
                    "a row at this time is {how} and would merge session{} {} of this key into the new session {}{}{ghosts}; {at}",
                    if many.len() > 1 { "s" } else { "" },
                    list(&spans),
                    span(lo, hi),
                    if fired.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; {} fired, so each gets a version of kind merged naming the new session",
                            list(&fired)
                        )
                    }
                ),
            )
        }
    }
}
