//! Who runs what. A pipeline belongs to the owner of its source table, and nothing it runs has
//! more rights than that owner (SPEC §9). Three identities take turns:
//!
//! - **the caller**, whose rights are checked: ownership of the source table (create, drop,
//!   advance, `mark_idle`), `INSERT` on it (`eventtime.ingest`), `SELECT` on a view (`explain`,
//!   the catalog views);
//! - **the pipeline owner**, as whom every statement on the pipeline's own tables runs (firing,
//!   purging, the reads of `explain`, the views' DDL), inside a security-restricted operation, as
//!   `REFRESH MATERIALIZED VIEW` runs as a materialized view's owner: code reached through the
//!   data's types (casts, domain checks, operators) runs as that owner, cannot change the role,
//!   create temporary objects or leave settings behind;
//! - **the catalog owner** (the owner of schema `_eventtime`, the superuser who created the
//!   extension), as whom the extension reads and writes its catalog tables and creates a
//!   pipeline's internal tables before handing them to the pipeline owner. Those statements name
//!   only catalog tables and carry no user data but names and numbers.
//!
//! Every switch pins `search_path` to `pg_catalog, pg_temp` in a GUC nest level of its own, and
//! rolls back every setting changed inside it, so a hostile `search_path` of the caller never
//! reaches a statement run under another identity. An error inside a switch is cleaned up by the
//! (sub)transaction's abort, which restores the user id, the security context and the settings.

use pgrx::prelude::*;

use crate::core::ident::quote_ident;
use crate::pg::error::EtError;

const PINNED_SEARCH_PATH: &std::ffi::CStr = c"pg_catalog, pg_temp";

/// Restores the identity and settings of before a switch when it goes out of scope.
struct Switch {
    user: pg_sys::Oid,
    context: i32,
    nest_level: i32,
}

impl Drop for Switch {
    fn drop(&mut self) {
        // On an error the abort of the (sub)transaction rolls the settings back; calling into the
        // GUC machinery while unwinding could raise again.
        if !std::thread::panicking() {
            // SAFETY: the nest level was opened by this switch and every level above it was closed
            // by the code it ran (GUC levels nest with function calls).
            unsafe { pg_sys::AtEOXact_GUC(false, self.nest_level) };
        }
        // SAFETY: sets two backend globals back to the values read when the switch began.
        unsafe { pg_sys::SetUserIdAndSecContext(self.user, self.context) };
    }
}

fn switch_to(role: pg_sys::Oid, restricted: bool) -> Switch {
    let mut user = pg_sys::InvalidOid;
    let mut context = 0;
    // SAFETY: reads two backend globals into locals.
    unsafe { pg_sys::GetUserIdAndSecContext(&mut user, &mut context) };
    let mut new_context = context | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32;
    if restricted {
        new_context |= pg_sys::SECURITY_RESTRICTED_OPERATION as i32;
    }
    // SAFETY: `role` is a role oid read from the catalog; the previous identity is restored by
    // the returned guard, or by the transaction's abort on an error.
    let nest_level = unsafe {
        pg_sys::SetUserIdAndSecContext(role, new_context);
        set_in_nest_level(c"search_path", PINNED_SEARCH_PATH)
    };
    Switch {
        user,
        context,
        nest_level,
    }
}

/// Opens a GUC nest level and sets `name` to `value` in it; returns the level, which the caller
/// closes with `AtEOXact_GUC` (the abort of the (sub)transaction closes it on an error).
pub(crate) fn set_in_nest_level(name: &std::ffi::CStr, value: &std::ffi::CStr) -> i32 {
    // SAFETY: a new nest level, and a setting saved in it; both names are NUL-terminated.
    unsafe {
        let level = pg_sys::NewGUCNestLevel();
        pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        level
    }
}

/// Runs `f` as the pipeline owner `owner`, inside a security-restricted operation.
pub fn as_owner<R>(owner: pg_sys::Oid, f: impl FnOnce() -> R) -> R {
    let _switch = switch_to(owner, true);
    f()
}

/// Runs `f` as the owner of the extension's catalog. Only for statements on the catalog tables,
/// and for creating a pipeline's internal objects before they are handed to the pipeline owner.
pub fn as_catalog_owner<R>(f: impl FnOnce() -> R) -> R {
    let owner = catalog_owner();
    let _switch = switch_to(owner, false);
    f()
}

/// The owner of schema `_eventtime`.
pub fn catalog_owner() -> pg_sys::Oid {
    // Qualified throughout: this runs with the caller's search_path.
    crate::pg::spi::read_one::<pg_sys::Oid>(
        "SELECT nspowner FROM pg_catalog.pg_namespace WHERE nspname OPERATOR(pg_catalog.=) '_eventtime'::pg_catalog.name",
        &[],
    )
        .expect("namespace read")
        .expect("schema _eventtime exists while the extension does")
}

/// The role running the current statement, whose rights are checked.
pub fn caller() -> pg_sys::Oid {
    // SAFETY: reads a backend global.
    unsafe { pg_sys::GetUserId() }
}

/// Whether `role` has the privileges of `owner` (is it, or an inheriting member of it), as
/// PostgreSQL's own ownership checks ask.
pub fn has_privileges_of(role: pg_sys::Oid, owner: pg_sys::Oid) -> bool {
    // SAFETY: a catalog lookup of two role oids.
    unsafe { pg_sys::has_privs_of_role(role, owner) }
}

/// A role's name, quoted as an identifier where it needs to be.
pub fn role_name(role: pg_sys::Oid) -> String {
    // SAFETY: a catalog lookup; with noerr it returns NULL for a role that does not exist, and
    // otherwise a palloc'd NUL-terminated string.
    let name = unsafe { pg_sys::GetUserNameFromId(role, true) };
    if name.is_null() {
        return format!("#{}", role.to_u32());
    }
    // SAFETY: checked non-NULL above; a NUL-terminated string in the current memory context.
    quote_ident(&unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy())
}

/// Raises 42501 unless the caller has the privileges of `owner`, the owner of pipeline `pipeline`.
/// The hint names the owner only to a caller that may read the pipeline (`readable`): the others
/// are not shown who owns what `eventtime.pipelines` hides from them.
pub fn require_pipeline_owner(
    pipeline: &str,
    owner: pg_sys::Oid,
    action: &'static str,
    readable: impl FnOnce() -> bool,
) {
    if !has_privileges_of(caller(), owner) {
        EtError::NotPipelineOwner {
            pipeline: pipeline.to_string(),
            owner: readable().then(|| role_name(owner)),
            action,
        }
        .raise()
    }
}

/// Whether `role` may read pipeline `name` (owned by `owner`, views in `view_schema`): it has the
/// privileges of the owner, or `SELECT` on at least one of the pipeline's views.
pub fn may_read(role: pg_sys::Oid, owner: pg_sys::Oid, view_schema: &str, name: &str) -> bool {
    as_catalog_owner(|| {
        crate::pg::spi::read_one::<bool>(
            "SELECT _eventtime.may_read($1, $2, $3, $4)",
            &[role.into(), owner.into(), view_schema.into(), name.into()],
        )
        .expect("privilege check")
        .unwrap_or(false)
    })
}

#[pg_schema]
mod _eventtime {
    use super::*;

    /// First thing a pipeline's trigger function does: the rest of it runs inside a
    /// security-restricted operation. The trigger function is `SECURITY DEFINER`, owned by the
    /// source table's owner; PostgreSQL restores the caller's identity and security context when
    /// it returns. Refused anywhere but inside such a function, where it would outlive the call.
    #[pg_extern(volatile, parallel_unsafe)]
    fn restrict() -> bool {
        let mut user = pg_sys::InvalidOid;
        let mut context = 0;
        // SAFETY: reads two backend globals into locals.
        unsafe { pg_sys::GetUserIdAndSecContext(&mut user, &mut context) };
        if context & pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32 == 0 {
            EtError::WrongContext {
                message:
                    "_eventtime.restrict() can only be called by a pipeline's trigger function"
                        .into(),
            }
            .raise()
        }
        // SAFETY: adds a flag to the security context; the SECURITY DEFINER call around it (or
        // the abort of its transaction) restores the context it saved.
        unsafe {
            pg_sys::SetUserIdAndSecContext(
                user,
                context | pg_sys::SECURITY_RESTRICTED_OPERATION as i32,
            )
        };
        true
    }
}
