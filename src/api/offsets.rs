//! Exactly-once by source offsets (SPEC §12): what an ingest statement of a pipeline with an
//! `offset_column` does before it counts anything.
//!
//! Its trigger function first scans the statement's rows once with the aggregate
//! `_eventtime.offset_scan(pipeline, source, offset)`, whose state, in Rust, keeps per source
//! the least and greatest offset and whether the offsets rose strictly in the statement's order;
//! then [`offsets_claim`] upserts each source's row of the pipeline's `offsets` table, in source
//! order, moving the committed offset to the greatest the statement brought and returning the
//! one before. When every source's offsets rose and start above the offset committed before,
//! no row is a duplicate and the ingest statements read the transition table as it is; otherwise
//! they read its rows above their source's committed offset, each (source, offset) once, the
//! first in the statement's order (`PipelineDef::rows_after_offsets`). No ledger, and no query
//! per row: one scan, and one upsert per statement.
//!
//! The upsert locks the rows of the statement's sources until the transaction ends: two writers
//! of one source take turns (the second reads the first's offset once it commits), writers of
//! different sources lock different rows and never wait for each other.

use std::collections::HashMap;

use pgrx::prelude::*;
use pgrx::PgMemoryContexts;
use serde::{Deserialize, Serialize};

use crate::pg::catalog;
use crate::pg::error::EtError;

/// What the scan of a statement's rows found for one source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceScan {
    pub source: String,
    pub lo: i64,
    pub hi: i64,
    /// Whether each row's offset was greater than the one before it of the same source.
    pub rising: bool,
}

/// One source of a statement's rows as the scan saw it.
struct Seen {
    name: Vec<u8>,
    lo: i64,
    hi: i64,
    last: i64,
    rising: bool,
}

/// The state of `_eventtime.offset_scan`: one entry per source, in order of first appearance,
/// found by name (the previous row's source is tried first: a log's rows come in runs).
#[derive(Default)]
pub struct Scan {
    sources: Vec<Seen>,
    index: HashMap<Vec<u8>, usize>,
    last: usize,
}

impl Scan {
    pub fn add(&mut self, source: &[u8], offset: i64) {
        let found = match self.sources.get(self.last) {
            Some(s) if s.name == source => Some(self.last),
            _ => self.index.get(source).copied(),
        };
        match found {
            Some(i) => {
                self.last = i;
                let s = &mut self.sources[i];
                s.rising &= offset > s.last;
                s.lo = s.lo.min(offset);
                s.hi = s.hi.max(offset);
                s.last = offset;
            }
            None => {
                self.sources.push(Seen {
                    name: source.to_vec(),
                    lo: offset,
                    hi: offset,
                    last: offset,
                    rising: true,
                });
                self.last = self.sources.len() - 1;
                self.index.insert(source.to_vec(), self.last);
            }
        }
    }

    pub fn result(&self) -> Vec<SourceScan> {
        let mut out: Vec<SourceScan> = self
            .sources
            .iter()
            .map(|s| SourceScan {
                source: String::from_utf8_lossy(&s.name).into_owned(),
                lo: s.lo,
                hi: s.hi,
                rising: s.rising,
            })
            .collect();
        // The order the upsert locks them in, the same for every writer.
        out.sort_by(|a, b| a.source.as_bytes().cmp(b.source.as_bytes()));
        out
    }
}

#[no_mangle]
#[doc(hidden)]
pub extern "C" fn pg_finfo_eventtime_offset_scan_step() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

#[no_mangle]
#[doc(hidden)]
pub extern "C" fn pg_finfo_eventtime_offset_scan_final() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// The NULL error of a row's offset or source (22004), naming the pipeline and the column.
fn null_error(pipeline_id: i32, source: bool) -> ! {
    let p = catalog::load_by_id(pipeline_id);
    let o = p.def.offsets.as_ref();
    let column = if source {
        o.and_then(|o| o.source_column.clone())
    } else {
        o.map(|o| o.column.clone())
    };
    EtError::NullOffset {
        pipeline: p.def.name.clone(),
        column: column.unwrap_or_default(),
        source,
    }
    .raise()
}

/// The transition function of `_eventtime.offset_scan(integer, text, bigint)`: adds a row's
/// source and offset to the state, kept in the aggregate's memory context.
///
/// # Safety
/// Called by PostgreSQL's function manager as an aggregate's transition function.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn eventtime_offset_scan_step(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: the function manager's call data, with the four arguments of the SQL signature;
    // the state is a `Scan` this function allocated in the aggregate's context.
    unsafe {
        let mut context: pg_sys::MemoryContext = std::ptr::null_mut();
        if pg_sys::AggCheckCallContext(fcinfo, &mut context) == 0 {
            EtError::WrongContext {
                message: "_eventtime.offset_scan_step can only be called by an aggregate".into(),
            }
            .raise()
        }
        let args = (*fcinfo).args.as_slice(4);
        let scan: *mut Scan = if args[0].isnull {
            PgMemoryContexts::For(context).leak_and_drop_on_delete(Scan::default())
        } else {
            args[0].value.cast_mut_ptr()
        };
        let pipeline_id = args[1].value.value() as i32;
        if args[2].isnull {
            null_error(pipeline_id, true)
        }
        if args[3].isnull {
            null_error(pipeline_id, false)
        }
        let text = pg_sys::pg_detoast_datum_packed(args[2].value.cast_mut_ptr());
        let len = pgrx::varlena::varsize_any_exhdr(text);
        let data = pgrx::varlena::vardata_any(text) as *const u8;
        let source = std::slice::from_raw_parts(data, len);
        (*scan).add(source, args[3].value.value() as i64);
        pg_sys::Datum::from(scan)
    }
}

/// The final function of `_eventtime.offset_scan`: the sources as JSON (a list of
/// [`SourceScan`] in byte order of their names), NULL for a statement without rows.
///
/// # Safety
/// Called by PostgreSQL's function manager as an aggregate's final function.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn eventtime_offset_scan_final(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: as for the transition function.
    unsafe {
        let args = (*fcinfo).args.as_slice(1);
        if args[0].isnull {
            (*fcinfo).isnull = true;
            return pg_sys::Datum::from(0);
        }
        let scan: *const Scan = args[0].value.cast_mut_ptr();
        let json = serde_json::to_string(&(*scan).result()).expect("scan serializes");
        json.into_datum().expect("text datum")
    }
}

/// The sources whose rows the ingest statements must filter, with the offset committed before
/// the statement, or None when no row of the statement is a duplicate.
pub fn duplicates_possible(
    scan: &[SourceScan],
    previous: &HashMap<String, i64>,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    let filter = scan
        .iter()
        .any(|s| !s.rising || previous.get(&s.source).is_some_and(|&c| s.lo <= c));
    filter.then(|| {
        previous
            .iter()
            .map(|(s, c)| (s.clone(), serde_json::Value::from(*c)))
            .collect()
    })
}

#[pg_schema]
mod _eventtime {
    use std::collections::HashMap;

    use pgrx::prelude::*;
    use pgrx::JsonB;

    use super::{duplicates_possible, SourceScan};
    use crate::core::sqlgen::internal_table;

    /// Moves the committed offset of each source of the statement's rows (`scan`, from
    /// `_eventtime.offset_scan`) to the greatest it brought, as the trigger function's role (the
    /// pipeline's owner), and returns the offsets committed before it of the sources whose rows
    /// must be filtered (`{"source": offset}`), or NULL when no row is a duplicate.
    #[pg_extern(volatile, parallel_unsafe)]
    #[search_path(pg_catalog, pg_temp)]
    fn offsets_claim(pipeline_id: i32, scan: Option<&str>) -> Option<JsonB> {
        let scan: Vec<SourceScan> = serde_json::from_str(scan?).unwrap_or_else(|e| {
            crate::pg::error::invalid(
                format!("_eventtime.offsets_claim: not an offset scan: {e}"),
                Some("The trigger function of a pipeline with offsets passes it the result of _eventtime.offset_scan."),
            )
            .raise()
        });
        let names: Vec<String> = scan.iter().map(|s| s.source.clone()).collect();
        let his: Vec<i64> = scan.iter().map(|s| s.hi).collect();
        // In the scan's order (names in byte order), so two writers of the same sources lock
        // them in the same order.
        let sql = format!(
            "INSERT INTO {t} AS o (source, \"offset\") \
             SELECT u.s, u.h FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY u(s, h, i) ORDER BY u.i \
             ON CONFLICT (source) DO UPDATE SET previous = o.\"offset\", \
               \"offset\" = GREATEST(o.\"offset\", excluded.\"offset\"), committed_at = now() \
             RETURNING o.source, o.previous",
            t = internal_table(pipeline_id, "offsets"),
        );
        let previous: HashMap<String, i64> = Spi::connect_mut(|client| {
            client
                .update(&sql, None, &[names.into(), his.into()])
                .expect("offsets upsert")
                // A source's first row has no previous offset.
                .filter_map(|r| {
                    let source = r.get::<String>(1).ok().flatten()?;
                    let previous = r.get::<i64>(2).ok().flatten()?;
                    Some((source, previous))
                })
                .collect()
        });
        duplicates_possible(&scan, &previous).map(|m| JsonB(serde_json::Value::Object(m)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(rows: &[(&str, i64)]) -> Vec<SourceScan> {
        let mut s = Scan::default();
        for (src, off) in rows {
            s.add(src.as_bytes(), *off);
        }
        s.result()
    }

    #[test]
    fn the_scan_keeps_each_source_s_range_and_whether_it_rose() {
        let r = scan(&[("b", 5), ("a", 1), ("b", 6), ("a", 3), ("b", 9)]);
        assert_eq!(
            r,
            vec![
                SourceScan {
                    source: "a".into(),
                    lo: 1,
                    hi: 3,
                    rising: true
                },
                SourceScan {
                    source: "b".into(),
                    lo: 5,
                    hi: 9,
                    rising: true
                },
            ]
        );
        // A repeated offset, or one lower than the one before it, is not rising.
        assert!(!scan(&[("a", 1), ("a", 1)])[0].rising);
        assert!(!scan(&[("a", 4), ("a", 2), ("a", 7)])[0].rising);
        // The least offset there is counts as any other.
        assert!(scan(&[("a", i64::MIN), ("a", 0)])[0].rising);
        assert!(!scan(&[("a", i64::MIN), ("a", i64::MIN)])[0].rising);
    }

    #[test]
    fn rows_are_filtered_only_when_one_may_be_a_duplicate() {
        let prev: HashMap<String, i64> = [("a".to_string(), 10)].into();
        // Above the committed offset, and rising: nothing to filter.
        assert!(duplicates_possible(&scan(&[("a", 11), ("a", 12)]), &prev).is_none());
        // A new source has nothing committed.
        assert!(duplicates_possible(&scan(&[("c", 1), ("c", 2)]), &prev).is_none());
        // At the committed offset: a redelivery.
        let f = duplicates_possible(&scan(&[("a", 10), ("a", 12)]), &prev).unwrap();
        assert_eq!(f.get("a"), Some(&serde_json::Value::from(10)));
        // A repeat inside the statement of a new source.
        assert!(duplicates_possible(&scan(&[("c", 1), ("c", 1)]), &prev).is_some());
    }
}
