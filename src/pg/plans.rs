//! Plans kept for the backend's life, each run in an SPI connection of its own: the statements
//! of a pipeline's trigger (`api::front`, `engine::route`), prepared once per backend as the
//! pipeline's owner and run with the row's or the statement's values as parameters.

use pgrx::prelude::*;

/// Runs a kept plan that returns one `timestamptz` (or none): its microseconds, `None` for NULL
/// or no row.
pub(crate) fn run_plan_timestamp(plan: pg_sys::SPIPlanPtr) -> Option<i64> {
    run_plan_with(plan, &[], &[], |d| d.value() as i64).1
}

/// Runs a kept plan that returns one `text` (or none), with parameters `values` (none NULL).
pub(crate) fn run_plan_text(plan: pg_sys::SPIPlanPtr, values: &[pg_sys::Datum]) -> Option<String> {
    let nulls = vec![b' '; values.len()];
    // SAFETY: the first column is text; it is copied out before the connection closes.
    run_plan_with(plan, values, &nulls, |d| unsafe {
        String::from_datum(d, false)
    })
    .1
    .flatten()
}

/// A plan of `sql` with parameters of `types`, generic (the statements have no choice a
/// parameter's value could improve), kept for the backend's life.
pub(crate) fn keep_plan(sql: &str, types: &[pg_sys::Oid]) -> pg_sys::SPIPlanPtr {
    let sql = std::ffi::CString::new(sql).expect("no NUL in generated SQL");
    let mut types = types.to_vec();
    // SAFETY: prepares and keeps a plan inside an SPI connection of its own; errors are raised
    // as panics by the guarded calls and end the transaction, whose abort closes the connection.
    unsafe {
        pg_sys::SPI_connect();
        let plan = pg_sys::SPI_prepare_cursor(
            sql.as_ptr(),
            types.len() as i32,
            types.as_mut_ptr(),
            pg_sys::CURSOR_OPT_GENERIC_PLAN as i32,
        );
        if plan.is_null() || pg_sys::SPI_keepplan(plan) != 0 {
            pgrx::error!("_eventtime: could not prepare a pipeline statement");
        }
        pg_sys::SPI_finish();
        plan
    }
}

/// Runs a kept plan in an SPI connection of its own: the number of rows it processed (inserted,
/// for an `INSERT` without `RETURNING`), and the first row's first column as a boolean, when it
/// returns rows (`None` too when it is NULL).
pub(crate) fn run_plan(
    plan: pg_sys::SPIPlanPtr,
    values: &[pg_sys::Datum],
    nulls: &[u8],
) -> (u64, Option<bool>) {
    run_plan_with(plan, values, nulls, |d| d.value() != 0)
}

/// [`run_plan`], whose first row's first column, when it is not NULL, `read` makes a value of
/// before the connection closes.
pub(crate) fn run_plan_with<T>(
    plan: pg_sys::SPIPlanPtr,
    values: &[pg_sys::Datum],
    nulls: &[u8],
    read: impl FnOnce(pg_sys::Datum) -> T,
) -> (u64, Option<T>) {
    let mut values = values.to_vec();
    let mut nulls: Vec<std::ffi::c_char> = nulls.iter().map(|&b| b as std::ffi::c_char).collect();
    nulls.push(0);
    // SAFETY: the plan was kept by `keep_plan` with as many parameters as values; the result is
    // read before the connection closes.
    unsafe {
        pg_sys::SPI_connect();
        let rc = pg_sys::SPI_execute_plan(plan, values.as_mut_ptr(), nulls.as_ptr(), false, 0);
        if rc < 0 {
            pgrx::error!("_eventtime: a pipeline statement failed ({rc})");
        }
        let processed = pg_sys::SPI_processed;
        let mut first = None;
        let table = pg_sys::SPI_tuptable;
        if !table.is_null() && processed > 0 {
            let mut null = false;
            let a = pg_sys::SPI_getbinval(*(*table).vals, (*table).tupdesc, 1, &mut null);
            if !null {
                first = Some(read(a));
            }
        }
        pg_sys::SPI_finish();
        (processed, first)
    }
}
