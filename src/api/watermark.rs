//! Watermarks. `eventtime.advance_watermark` moves one source's watermark forward,
//! `eventtime.mark_idle` takes a source out of the minimum, and an ingest statement of a pipeline
//! with a `watermark_lag` advances the pipeline's `watermark_lag` source. Each then recomputes the
//! pipeline watermark (the minimum over active sources, never going back; see `core::clock`),
//! fires every window that ends at or before it and purges every window whose deadline it has
//! reached.
//!
//! Locks, in the order taken:
//! 1. `EXCLUSIVE` on the pipeline's state table. Ingest statements hold `ROW EXCLUSIVE` on it from
//!    their start to their commit, so the advance waits for every running ingest transaction, and
//!    ingest statements that start later queue behind the advance. Readers of the views are not
//!    blocked. An ingest statement of a pipeline with a watermark lag takes this lock first thing
//!    (in its trigger function), so its own advance never upgrades a lock.
//! 2. The pipeline's catalog row, `FOR UPDATE`. Ingest reads the watermark with a snapshot taken
//!    after its `ROW EXCLUSIVE` lock (READ COMMITTED), or after locking this row `FOR SHARE`
//!    (REPEATABLE READ, where an advance committed after the snapshot is a serialization
//!    failure), so it classifies against the latest watermark. The row also serializes every
//!    change to the pipeline's sources.
//!
//! After the locks every statement takes a fresh snapshot (READ COMMITTED), so it sees every
//! ingest transaction that committed while the advance waited: no committed row can be missed by
//! the firing of its window.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;

use crate::core::clock::{self, SourceClock};
use crate::core::time;
use crate::pg::announce::{self, Versions};
use crate::pg::catalog::{self, Pipeline};
use crate::pg::error::{invalid, required, EtError};
use crate::pg::locks;
use crate::pg::security::{self, as_catalog_owner};

/// The source of the two-argument `advance_watermark`.
pub const DEFAULT_SOURCE: &str = crate::core::model::SINGLE_SOURCE;
/// The source that ingest statements advance when the pipeline has a watermark lag.
pub const LAG_SOURCE: &str = "watermark_lag";
/// The source that `eventtime.tick()` advances when the pipeline has a clock lag.
pub const CLOCK_SOURCE: &str = "clock";

type Outcome = (i64, i64, Option<TimestampWithTimeZone>);

enum Change<'a> {
    /// `source` says its event time has reached `to`. `quiet` leaves out the NOTICE for a
    /// watermark that is not ahead (the lag source, advanced by every ingest statement).
    Advance {
        source: &'a str,
        to: TimestampWithTimeZone,
        quiet: bool,
    },
    /// No source changes; the pipeline watermark is computed again, for the idle timeouts that
    /// processing time has passed since.
    Recompute,
    /// `source` stops counting until it advances again.
    MarkIdle { source: &'a str },
}

pub(crate) fn tstz(micros: i64) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from(micros).expect("saturated instants are valid timestamptz")
}

pub(crate) fn require_read_committed(pipeline: &str, function: &'static str) {
    // SAFETY: XactIsoLevel is a plain global of the backend, read on the backend's own thread.
    let iso = unsafe { pg_sys::XactIsoLevel };
    if iso != pg_sys::XACT_READ_COMMITTED as i32 {
        EtError::WrongIsolation {
            function,
            pipeline: pipeline.to_string(),
        }
        .raise()
    }
}

/// Takes `EXCLUSIVE` on the pipeline's state table, as its owner, without making writers queue
/// behind its wait (see `pg::locks`).
fn lock_state(p: &Pipeline) {
    let table = p.def.table("state");
    p.as_owner(|| {
        let rel = locks::relation_oid(&p.def.name, &table);
        locks::exclusive_without_queueing(rel, &table);
    })
}

/// The sources of a pipeline and the processing time to judge them at.
pub(crate) fn sources(client: &SpiClient<'_>, pipeline_id: i32) -> (Vec<SourceClock>, i64) {
    let now = client
        .select("SELECT now()", None, &[])
        .expect("now")
        .first()
        .get::<TimestampWithTimeZone>(1)
        .expect("now")
        .expect("now")
        .into_inner();
    let list = client
        .select(
            "SELECT name, watermark, advanced_at, marked_idle FROM _eventtime.source WHERE pipeline_id = $1 ORDER BY name",
            None,
            &[pipeline_id.into()],
        )
        .expect("sources read")
        .map(|r| SourceClock {
            name: r.get::<String>(1).expect("name").expect("name"),
            watermark: r.get::<TimestampWithTimeZone>(2).expect("watermark").expect("watermark").into_inner(),
            advanced_at: r.get::<TimestampWithTimeZone>(3).expect("advanced_at").expect("advanced_at").into_inner(),
            marked_idle: r.get::<bool>(4).expect("marked_idle").expect("marked_idle"),
        })
        .collect();
    (list, now)
}

/// Applies a change to one source, then moves the pipeline watermark to what its sources allow,
/// firing and purging on the way. Returns windows fired, windows purged and the pipeline
/// watermark in force. The lock and the firing run as the pipeline's owner, the catalog's reads
/// and writes as the catalog's owner (see `pg::security`); the caller's right was checked before.
fn apply(p: &Pipeline, change: Change<'_>) -> Outcome {
    apply_announcing(p, change, Versions::default())
}

/// [`apply`], announcing what it fired together with the late and merged versions that the
/// statement calling it wrote, `written` (one notification for the statement).
fn apply_announcing(p: &Pipeline, change: Change<'_>, written: Versions) -> Outcome {
    let ((fired, purged, watermark), batched) = apply_quietly(p, change);
    announce::announce(
        &p.def.name,
        Versions {
            main: fired,
            late: written.late + batched,
            ..written
        },
        watermark.map(|w| w.into_inner()),
    );
    (fired, purged, watermark)
}

/// [`apply_locked`] under the state's lock.
fn apply_quietly(p: &Pipeline, change: Change<'_>) -> (Outcome, i64) {
    lock_state(p);
    apply_locked(p, change)
}

/// Writes the late versions of the batches due under watermark `w` (see
/// `core::sqlgen::batches`), as the pipeline's owner, the state's lock held; returns how many.
/// Nothing for a pipeline without batched late firings, or before its first advance.
fn fire_batches(p: &Pipeline, w: Option<TimestampWithTimeZone>) -> i64 {
    let Some(w) = w else { return 0 };
    p.as_owner(|| Spi::connect_mut(|client| write_batches(client, p, w)))
}

/// The statement of [`fire_batches`], run by `client` as the pipeline's owner.
fn write_batches(client: &mut SpiClient<'_>, p: &Pipeline, w: TimestampWithTimeZone) -> i64 {
    let Some(sql) = p.def.late_batch_statement() else {
        return 0;
    };
    client
        .update(&sql, None, &[w.into(), tstz(now()).into()])
        .expect("late batch")
        .first()
        .get::<i64>(1)
        .expect("versions")
        .unwrap_or(0)
}

/// Moves the watermark as `change` says, fires what it makes due, writes the late batches due
/// (before the purge, so that no window is purged with pending late rows), and purges. Returns
/// what it fired and purged, the watermark in force, and the late versions of its batches.
fn apply_locked(p: &Pipeline, change: Change<'_>) -> (Outcome, i64) {
    let (current, new) =
        as_catalog_owner(|| Spi::connect_mut(|client| move_watermark(client, p, change)));
    let Some(new) = new else {
        return ((0, 0, current), fire_batches(p, current));
    };
    let mut batched = 0;
    let outcome = p.as_owner(|| {
        Spi::connect_mut(|client| {
            // Fire first, from the state as it is; then the late batches; then purge what
            // reached its deadline.
            let fire = client
                .update(
                    p.def.fire_statement().as_str(),
                    None,
                    &[new.into(), current.into()],
                )
                .expect("fire")
                .first();
            let fired = fire.get::<i64>(1).expect("fired").unwrap_or(0);
            let purged_at_once = fire.get::<i64>(2).expect("purged").unwrap_or(0);
            batched = write_batches(client, p, new);
            let purged = purged_at_once
                + client
                    .update(
                        p.def.purge_statement().as_str(),
                        None,
                        &[new.into(), current.into()],
                    )
                    .expect("purge")
                    .first()
                    .get::<i64>(1)
                    .expect("purged")
                    .unwrap_or(0);
            (fired, purged, Some(new))
        })
    });
    (outcome, batched)
}

/// The catalog part of [`apply`]: locks the pipeline's catalog row, changes the source and, when
/// the pipeline watermark moves, writes it. Returns the watermark before and, when it moved, the
/// new one.
fn move_watermark(
    client: &mut SpiClient<'_>,
    p: &Pipeline,
    change: Change<'_>,
) -> (Option<TimestampWithTimeZone>, Option<TimestampWithTimeZone>) {
    let name = p.def.name.as_str();
    let current = client
        .update(
            "SELECT watermark FROM _eventtime.pipeline WHERE id = $1 FOR UPDATE",
            None,
            &[p.id.into()],
        )
        .expect("catalog lock")
        .first()
        .get::<TimestampWithTimeZone>(1)
        .expect("watermark");
    // The sources as they are, then the change written and applied to this list, which is
    // what the pipeline watermark is computed from.
    let (mut list, now) = sources(client, p.id);
    match change {
        Change::Advance { source, to, quiet } => {
            let at = list.iter().position(|s| s.name == source);
            match at.map(|i| list[i].watermark) {
                Some(m) if to.into_inner() <= m => {
                    if !quiet {
                        pgrx::notice!(
                            "watermark {to} is not ahead of the watermark {} of source \"{source}\" of pipeline \"{name}\": nothing changed",
                            tstz(m)
                        );
                    }
                }
                _ => {
                    client
                        .update(
                            "INSERT INTO _eventtime.source AS s (pipeline_id, name, watermark, advanced_at) \
                             VALUES ($1, $2, $3, $4) ON CONFLICT (pipeline_id, name) DO UPDATE \
                             SET watermark = excluded.watermark, advanced_at = excluded.advanced_at, marked_idle = false",
                            None,
                            &[p.id.into(), source.into(), to.into(), tstz(now).into()],
                        )
                        .expect("source advance");
                    let advanced = SourceClock {
                        name: source.to_string(),
                        watermark: to.into_inner(),
                        advanced_at: now,
                        marked_idle: false,
                    };
                    match at {
                        Some(i) => list[i] = advanced,
                        None => list.push(advanced),
                    }
                    if let Some(c) = current {
                        if to < c && !quiet {
                            pgrx::notice!(
                                "source \"{source}\" of pipeline \"{name}\" is at {to}, behind the pipeline watermark {c}: the pipeline watermark stays until the source passes it"
                            );
                        }
                    }
                }
            }
        }
        Change::Recompute => {}
        Change::MarkIdle { source } => {
            let Some(i) = list.iter().position(|s| s.name == source) else {
                EtError::UnknownSource {
                    pipeline: name.to_string(),
                    source: source.to_string(),
                }
                .raise()
            };
            client
                .update(
                    "UPDATE _eventtime.source SET marked_idle = true WHERE pipeline_id = $1 AND name = $2",
                    None,
                    &[p.id.into(), source.into()],
                )
                .expect("mark idle");
            list[i].marked_idle = true;
        }
    }
    let cur = current.map(|c| c.into_inner());
    let Some(new) = clock::pipeline_watermark(cur, &list, now, p.def.idle_timeout) else {
        return (current, None);
    };
    if cur.is_some_and(|c| new <= c) {
        return (current, None);
    }
    let new = tstz(new);
    client
        .update(
            "UPDATE _eventtime.pipeline SET watermark = $2 WHERE id = $1",
            None,
            &[p.id.into(), new.into()],
        )
        .expect("watermark update");
    (current, Some(new))
}

/// The transaction's `now()`, the processing time every check of one call uses.
fn now() -> i64 {
    // SAFETY: reads the start time of the current transaction, a backend global.
    unsafe { pg_sys::GetCurrentTransactionStartTimestamp() }
}

/// Raises 22023 when `to` is later than `now()` plus the pipeline's `max_ahead`: a watermark says
/// no earlier event time is to come, so one in the future refuses every row until the clock
/// catches up. A typo (`'20260-01-01'`) would close the pipeline for good.
fn require_not_too_far_ahead(p: &Pipeline, to: TimestampWithTimeZone) {
    let Some(ahead) = p.def.max_ahead else { return };
    if clock::too_far_ahead(to.into_inner(), now(), Some(ahead)) {
        invalid(
            format!(
                "watermark {to} of pipeline \"{}\" is more than max_ahead ({}) ahead of the current time",
                p.def.name,
                time::describe_duration(ahead),
            ),
            Some(
                "A watermark this far ahead would refuse every later row. Check the value; 'infinity' ends the input. \
                 For event times that really run ahead of the clock, create the pipeline with a larger max_ahead, or NULL for no bound.",
            ),
        )
        .raise()
    }
}

/// A source name as given by the user: any text but empty (names are values, never SQL).
fn source_name<'a>(function: &'static str, source: Option<&'a str>) -> &'a str {
    let source = required(source, function, "source");
    if source.is_empty() {
        invalid(
            "source name must not be empty",
            Some(&format!("Name the source of the watermark, such as a partition; the two-argument form uses \"{DEFAULT_SOURCE}\".")),
        )
        .raise()
    }
    source
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn advance_watermark(
    pipeline: Option<&str>,
    watermark: Option<TimestampWithTimeZone>,
    source: default!(Option<&str>, "'default'"),
) -> TableIterator<
    'static,
    (
        name!(windows_fired, i64),
        name!(windows_purged, i64),
        name!(watermark, Option<TimestampWithTimeZone>),
    ),
> {
    const F: &str = "eventtime.advance_watermark";
    let name = required(pipeline, F, "pipeline");
    let to = required(watermark, F, "watermark");
    let source = source_name(F, source);
    let p = catalog::load(name);
    p.require_owner("advance its watermark");
    require_read_committed(name, F);
    require_not_too_far_ahead(&p, to);
    TableIterator::once(apply(
        &p,
        Change::Advance {
            source,
            to,
            quiet: false,
        },
    ))
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn mark_idle(
    pipeline: Option<&str>,
    source: Option<&str>,
) -> TableIterator<
    'static,
    (
        name!(windows_fired, i64),
        name!(windows_purged, i64),
        name!(watermark, Option<TimestampWithTimeZone>),
    ),
> {
    const F: &str = "eventtime.mark_idle";
    let name = required(pipeline, F, "pipeline");
    let source = source_name(F, source);
    let p = catalog::load(name);
    p.require_owner("mark its sources idle");
    require_read_committed(name, F);
    TableIterator::once(apply(&p, Change::MarkIdle { source }))
}

/// The pipelines `eventtime.tick()` looks at: those with a clock or an idle timeout whose
/// owner's privileges the caller has.
fn tick_candidates() -> Vec<String> {
    let caller = security::caller();
    as_catalog_owner(|| {
        Spi::connect(|client| {
            client
                .select(
                    "SELECT name FROM _eventtime.pipeline p \
                     WHERE (clock_lag IS NOT NULL OR idle_timeout IS NOT NULL OR p.definition ? 'late_firing_us') \
                       AND pg_has_role($1, _eventtime.owner_of(p.source, p.owner), 'USAGE') \
                     ORDER BY name",
                    None,
                    &[caller.into()],
                )
                .expect("catalog read")
                .map(|r| r.get::<String>(1).expect("name").expect("name"))
                .collect()
        })
    })
}

/// What `eventtime.tick()` does for one pipeline. A pipeline with a `clock_lag` has its source
/// `clock` advanced to `now() - clock_lag`; one with an `idle_timeout` has its watermark computed
/// again, since sources may have timed out since the last change. It then fires and purges what
/// its new watermark makes due. A pipeline with nothing due is only read, without a lock, so a
/// tick that has nothing to do is cheap. The writers that hold its state are waited for at most
/// [`locks::TICK_WAIT`]: `tick()` runs every pipeline of the database, and one tenant's open
/// transaction must not stop the others.
fn tick_one(name: &str) -> Option<Outcome> {
    let p = catalog::load(name);
    require_read_committed(name, "eventtime.tick");
    let now = now();
    let change = match p.def.clock_lag {
        Some(lag) => Change::Advance {
            source: CLOCK_SOURCE,
            to: tstz(time::add(now, -lag)),
            quiet: true,
        },
        None => Change::Recompute,
    };
    // Without a lock: is anything due? The clock source is written whenever it moves, so that it
    // never looks idle; otherwise only a pipeline watermark that moves is worth the lock.
    let (before, due) = as_catalog_owner(|| {
        Spi::connect(|client| {
            let current = client
                .select(
                    "SELECT watermark FROM _eventtime.pipeline WHERE id = $1",
                    None,
                    &[p.id.into()],
                )
                .expect("catalog read")
                .first()
                .get::<TimestampWithTimeZone>(1)
                .expect("watermark");
            let (list, now) = sources(client, p.id);
            let due = match &change {
                Change::Advance { source, to, .. } => list
                    .iter()
                    .find(|s| s.name == *source)
                    .is_none_or(|s| to.into_inner() > s.watermark),
                _ => {
                    let cur = current.map(|c| c.into_inner());
                    clock::pipeline_watermark(cur, &list, now, p.def.idle_timeout)
                        .is_some_and(|new| cur.is_none_or(|c| new > c))
                }
            };
            (current, due)
        })
    });
    // A late batch that is due needs the lock too (see `core::sqlgen::batches`).
    let batch_due = || {
        let Some(sql) = p.def.late_batch_due_statement() else {
            return false;
        };
        before.is_some()
            && p.as_owner(|| {
                Spi::get_one_with_args::<bool>(&sql, &[tstz(now).into()])
                    .expect("late batch read")
                    .unwrap_or(false)
            })
    };
    if !due && !batch_due() {
        return None;
    }
    // The writers it must wait for are waited for at most TICK_WAIT: one idle in its transaction
    // makes the lock wait fail with 55P03, which `eventtime.tick()` reports as busy.
    let ((fired, purged, after), batched) =
        locks::with_lock_timeout(locks::TICK_WAIT, || apply_with_batches(&p, change));
    if after == before && batched == 0 {
        return None;
    }
    Some((fired, purged, after))
}

/// [`apply`], returning the late versions of the batches it wrote too.
fn apply_with_batches(p: &Pipeline, change: Change<'_>) -> (Outcome, i64) {
    let (outcome, batched) = apply_quietly(p, change);
    announce::announce(
        &p.def.name,
        Versions {
            main: outcome.0,
            late: batched,
            ..Versions::default()
        },
        outcome.2.map(|w| w.into_inner()),
    );
    (outcome, batched)
}

#[pg_schema]
mod _eventtime {
    use super::*;

    /// The pipelines `eventtime.tick()` runs, one row each, in name order.
    #[pg_extern(stable, parallel_safe)]
    #[search_path(pg_catalog, pg_temp)]
    fn tick_candidates() -> SetOfIterator<'static, String> {
        SetOfIterator::new(super::tick_candidates())
    }

    /// `eventtime.tick()` for one pipeline: what it fired and purged and the watermark, when the
    /// watermark moved (NULLs otherwise). Fails with 55P03 when writers held its state for longer
    /// than `pg::locks::TICK_WAIT`.
    // pgrx reads the column names from the `name!` types of the signature.
    #[allow(clippy::type_complexity)]
    #[pg_extern(volatile, parallel_unsafe)]
    #[search_path(pg_catalog, pg_temp)]
    fn tick_pipeline(
        pipeline: &str,
    ) -> TableIterator<
        'static,
        (
            name!(windows_fired, Option<i64>),
            name!(windows_purged, Option<i64>),
            name!(watermark, Option<TimestampWithTimeZone>),
        ),
    > {
        let row = match tick_one(pipeline) {
            Some((fired, purged, after)) => (Some(fired), Some(purged), after),
            None => (None, None, None),
        };
        TableIterator::once(row)
    }

    /// Raises the isolation error for an ingest statement of a pipeline with a watermark lag or
    /// session windows; its trigger function calls this only outside READ COMMITTED, before it
    /// takes its locks (see the module comment, and `core::sqlgen::sessions`). The name is the
    /// one the caller may learn (`#<id>` otherwise).
    #[pg_extern(volatile, parallel_unsafe)]
    #[search_path(pg_catalog, pg_temp)]
    fn refuse_lag_isolation(pipeline_id: i32) {
        let (name, _) = catalog::name_and_event_time(pipeline_id);
        let function = if catalog::load_by_id(pipeline_id).def.window.is_session() {
            crate::pg::error::SESSION_INGEST
        } else {
            "an ingest statement"
        };
        require_read_committed(&name, function);
    }

    /// Last thing an ingest statement of a pipeline with a watermark lag does: advance the
    /// `watermark_lag` source to the greatest event time of the statement minus the lag.
    #[pg_extern(volatile, parallel_unsafe)]
    #[search_path(pg_catalog, pg_temp)]
    fn advance_by_watermark_lag(
        pipeline_id: i32,
        max_event_time: Option<TimestampWithTimeZone>,
        late_versions: i64,
        merged_versions: default!(i64, 0),
    ) {
        let p = catalog::load_by_id(pipeline_id);
        // The trigger function runs as the pipeline's owner; nobody else may advance it.
        p.require_owner("advance its watermark");
        let written = Versions {
            late: late_versions,
            merged: merged_versions,
            ..Versions::default()
        };
        let Some(max) = max_event_time else {
            let w = catalog::watermark(p.id);
            announce::announce(&p.def.name, written, w);
            return;
        };
        let Some(lag) = p.def.watermark_lag else {
            return;
        };
        let to = tstz(time::add(max.into_inner(), -lag));
        apply_announcing(
            &p,
            Change::Advance {
                source: LAG_SOURCE,
                to,
                quiet: true,
            },
            written,
        );
    }

    /// Every source of every pipeline as `eventtime.sources` shows it: idle or not (and why),
    /// whether the pipeline watermark waits for it, and, with offsets, its committed offset. A
    /// source whose rows brought offsets but which never advanced has no watermark (NULL).
    // pgrx reads the column names from the `name!` types of the signature, so they cannot go into
    // a type alias.
    #[allow(clippy::type_complexity)]
    #[pg_extern(stable, parallel_safe)]
    #[search_path(pg_catalog, pg_temp)]
    fn source_status() -> TableIterator<
        'static,
        (
            name!(pipeline, String),
            name!(source, String),
            name!(watermark, Option<TimestampWithTimeZone>),
            name!(advanced_at, Option<TimestampWithTimeZone>),
            name!(idle, bool),
            name!(idle_reason, Option<String>),
            name!(holding_back, bool),
            name!(offset, Option<i64>),
        ),
    > {
        // Only the pipelines the caller may read.
        let caller = security::caller();
        let ids: Vec<(i32, String)> = as_catalog_owner(|| {
            Spi::connect(|client| {
                client
                    .select(
                        "SELECT id, name FROM _eventtime.pipeline p \
                         WHERE _eventtime.may_read($1, _eventtime.owner_of(p.source, p.owner), p.view_schema, p.name) ORDER BY name",
                        None,
                        &[caller.into()],
                    )
                    .expect("catalog read")
                    .map(|r| (r.get::<i32>(1).unwrap().unwrap(), r.get::<String>(2).unwrap().unwrap()))
                    .collect()
            })
        });
        let mut rows = Vec::new();
        for (id, name) in ids {
            let p = catalog::load(&name);
            let (list, now) = as_catalog_owner(|| Spi::connect(|client| sources(client, id)));
            // The committed offsets are the owner's data: read as the owner.
            let offsets: Vec<(String, i64)> = if p.def.offsets.is_some() {
                p.as_owner(|| {
                    Spi::connect(|client| {
                        client
                            .select(
                                &format!(
                                    "SELECT source, \"offset\" FROM {} ORDER BY source",
                                    p.def.table("offsets")
                                ),
                                None,
                                &[],
                            )
                            .expect("offsets read")
                            .map(|r| {
                                (
                                    r.get::<String>(1).unwrap().unwrap(),
                                    r.get::<i64>(2).unwrap().unwrap(),
                                )
                            })
                            .collect()
                    })
                })
            } else {
                Vec::new()
            };
            let offset_of =
                |source: &str| offsets.iter().find(|(s, _)| s == source).map(|(_, o)| *o);
            let holding: Vec<String> = clock::holding_back(&list, now, p.def.idle_timeout)
                .iter()
                .map(|s| s.name.clone())
                .collect();
            // The sources that advanced, then those that only brought offsets.
            let mut named: Vec<(String, Option<usize>)> = list
                .iter()
                .enumerate()
                .map(|(i, s)| (s.name.clone(), Some(i)))
                .collect();
            for (s, _) in &offsets {
                if !named.iter().any(|(n, _)| n == s) {
                    named.push((s.clone(), None));
                }
            }
            for (source, clock) in named {
                let row = match clock.map(|i| &list[i]) {
                    Some(s) => {
                        let idle = s.idle(now, p.def.idle_timeout);
                        (
                            name.clone(),
                            s.name.clone(),
                            Some(tstz(s.watermark)),
                            Some(tstz(s.advanced_at)),
                            idle != clock::Idle::Active,
                            idle.as_str().map(String::from),
                            holding.contains(&s.name),
                            offset_of(&s.name),
                        )
                    }
                    None => (
                        name.clone(),
                        source.clone(),
                        None,
                        None,
                        false,
                        None,
                        false,
                        offset_of(&source),
                    ),
                };
                rows.push(row);
            }
        }
        TableIterator::new(rows)
    }
}
