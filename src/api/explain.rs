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

use super::watermark::{sources, tstz};
use crate::core::clock;
use crate::core::ident::quote_ident;
use crate::core::landing::{self, WindowState};
use crate::core::time;
use crate::pg::catalog;
use crate::pg::error::{invalid, required, EtError};
use crate::pg::security::{self, as_catalog_owner};
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
        ),
    > {
        const F: &str = "eventtime.explain";
        let name = required(pipeline, F, "pipeline");
        let e = required(event_time, F, "event_time");
        let key = required(key, F, "key");
        let p = catalog::load(name);
        if !p.readable() {
            EtError::PermissionDenied {
                message: format!("permission denied for pipeline \"{name}\""),
                hint: format!(
                    "eventtime.explain reads the pipeline's views: its owner, {}, can GRANT SELECT ON {} TO {}.",
                    security::role_name(p.owner),
                    p.def.view("_latest"),
                    security::role_name(security::caller())
                ),
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
            .map(|(i, k)| {
                format!(
                    " AND t.{} IS NOT DISTINCT FROM (${}::text)::{}",
                    quote_ident(&k.name),
                    i + 2,
                    k.type_name
                )
            })
            .collect();
        let state_sql = format!(
            "SELECT sum(t._et_n)::bigint FROM {} t WHERE t.window_start = $1{key_match}",
            def.table("state")
        );
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
                            "{bounds} fired{}; {at}, so a row for it is late: it joins the window and writes a new version until the watermark reaches the deadline {}",
                            match latest {
                                Some(v) => format!(" and its latest version is {v}"),
                                None => " with no rows for this key".to_string(),
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
                    )
                })
                .collect()
        }));
        TableIterator::new(rows)
    }
}
