//! Roles: login roles without any attribute, the owner of everything a pipeline created, and
//! statements that must be refused for lack of privilege (SQLSTATE 42501).
//!
//! The workloads run as an ordinary role: `OWNER` owns the source table, `batches` and the
//! pipeline, and their ingest, advancing and source clients log in as it. Checks that read the
//! internal tables of every pipeline connect as the superuser.

use postgres::Client;

use crate::db::{describe, exec, lit};
use crate::rows::quote_ident;

/// The owner of the source tables and pipelines of the workloads, and the role their clients log
/// in as.
pub const OWNER: &str = "et_owner";

/// SQLSTATE insufficient_privilege.
pub const DENIED: &str = "42501";

/// Creates a role that may log in and has no other attribute: not a superuser, no CREATEDB, no
/// CREATEROLE, no BYPASSRLS (trust authentication: it logs in without a password).
pub fn create_login_role(su: &mut Client, name: &str) {
    exec(
        su,
        &format!(
            "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS",
            quote_ident(name)
        ),
    );
}

/// Asserts that the session of `c` is logged in as `user` (not switched to it) and has no
/// superuser or row-security bypass of its own.
pub fn assert_logged_in_as(c: &mut Client, user: &str) {
    let r = c
        .query_one(
            "SELECT session_user::text, current_user::text, r.rolsuper, r.rolbypassrls
             FROM pg_roles r WHERE r.rolname = session_user",
            &[],
        )
        .unwrap_or_else(|e| panic!("role of the session: {}", describe(&e)));
    let (session, current, sup, bypass): (String, String, bool, bool) =
        (r.get(0), r.get(1), r.get(2), r.get(3));
    assert!(
        session == user && current == user && !sup && !bypass,
        "expected a session logged in as the ordinary role {user}; session_user {session}, current_user {current}, superuser {sup}, bypassrls {bypass}"
    );
}

/// The owner of a table (`regclass` text).
pub fn table_owner(c: &mut Client, table: &str) -> String {
    c.query_one(
        "SELECT pg_get_userbyid(relowner)::text FROM pg_class WHERE oid = $1::text::regclass",
        &[&table],
    )
    .unwrap_or_else(|e| panic!("owner of {table}: {}", describe(&e)))
    .get(0)
}

/// The first line of an error, its SQLSTATE and its HINT.
fn brief(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => {
            let mut s = format!("{} {}", d.code().code(), d.message());
            if let Some(h) = d.hint() {
                s += &format!(" (HINT: {h})");
            }
            s
        }
        None => format!("{e}"),
    }
}

fn check_denied(who: &str, what: &str, r: Result<(), postgres::Error>) -> String {
    match r {
        Ok(()) => panic!("{who}: {what} succeeded; it must fail with SQLSTATE {DENIED}"),
        Err(e) if e.code().is_some_and(|c| c.code() == DENIED) => {
            let s = brief(&e);
            eprintln!("    {who}: denied: {s}");
            s
        }
        Err(e) => panic!(
            "{who}: {what} must fail with SQLSTATE {DENIED}; it failed with {}",
            describe(&e)
        ),
    }
}

/// Runs `sql` (autocommit) as the role of `c`: it must fail with 42501. Returns the error.
pub fn expect_denied(c: &mut Client, who: &str, sql: &str) -> String {
    let r = c.batch_execute(sql);
    check_denied(who, &format!("`{sql}`"), r)
}

/// `COPY <table> FROM STDIN` of one line as the role of `c`: it must fail with 42501. Takes the
/// connection: after a COPY refused at its start, the client library leaves it out of step with
/// the server.
pub fn expect_copy_denied(mut c: Client, who: &str, table: &str, line: &str) -> String {
    use std::io::Write;
    let sql = format!("COPY {table} FROM STDIN");
    let r = c.copy_in(sql.as_str()).and_then(|mut w| {
        w.write_all(line.as_bytes()).expect("write COPY data");
        w.finish().map(|_| ())
    });
    check_denied(who, &format!("`{sql}`"), r)
}

/// The role of `c` sees no row of `_eventtime.pipeline` for `pipeline`: the read returns none,
/// or fails with 42501.
pub fn expect_catalog_row_hidden(c: &mut Client, who: &str, pipeline: &str) {
    match c.query(
        "SELECT name FROM _eventtime.pipeline WHERE name = $1",
        &[&pipeline],
    ) {
        Ok(rows) => assert!(
            rows.is_empty(),
            "{who} reads the row of pipeline {pipeline:?} in _eventtime.pipeline, which it does not own"
        ),
        Err(e) if e.code().is_some_and(|c| c.code() == DENIED) => {}
        Err(e) => panic!(
            "{who}: read of _eventtime.pipeline failed with {}",
            describe(&e)
        ),
    }
}

/// The names `eventtime.pipelines` shows the role of `c`, sorted.
pub fn visible_pipelines(c: &mut Client) -> Vec<String> {
    c.query("SELECT name FROM eventtime.pipelines ORDER BY name", &[])
        .unwrap_or_else(|e| panic!("eventtime.pipelines: {}", describe(&e)))
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// The pipelines `eventtime.sources` shows the role of `c` any source of, sorted.
pub fn visible_source_pipelines(c: &mut Client) -> Vec<String> {
    c.query(
        "SELECT DISTINCT pipeline::text FROM eventtime.sources ORDER BY 1",
        &[],
    )
    .unwrap_or_else(|e| panic!("eventtime.sources: {}", describe(&e)))
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// Asserts that `eventtime.pipelines` shows `role` (logged in on `c`) exactly the pipelines
/// `pipelines`, and `eventtime.sources` the sources of exactly `with_sources`.
pub fn expect_visible(c: &mut Client, role: &str, pipelines: &[&str], with_sources: &[&str]) {
    assert_eq!(
        visible_pipelines(c),
        pipelines,
        "eventtime.pipelines as {role}"
    );
    assert_eq!(
        visible_source_pipelines(c),
        with_sources,
        "eventtime.sources as {role}"
    );
}

/// Read as a superuser: every pipeline of the database is one of `expect` (name, owner of its
/// source table), and each has what it creates — its views `<name>_history`, `_latest`,
/// `_sealed` and `_refused` in the source table's schema, its tables `_eventtime.p<id>_state`,
/// `_history`, `_refused` (and `_ids` with an event id), its trigger function
/// `_eventtime.p<id>_ingest()` — and every one of these, and any other relation or function
/// `_eventtime.p<id>_*`, belongs to the source table's owner. Returns the violations, and one
/// line per pipeline saying what it checked.
pub fn pipeline_ownership(c: &mut Client, expect: &[(&str, &str)]) -> (Vec<String>, Vec<String>) {
    let mut v = Vec::new();
    let mut seen = Vec::new();
    let pipes = c
        .query(
            "SELECT p.name, p.id, pg_get_userbyid(t.relowner)::text, t.relnamespace::regnamespace::text, p.event_id IS NOT NULL
             FROM _eventtime.pipeline p JOIN pg_class t ON t.oid = p.source ORDER BY p.id",
            &[],
        )
        .unwrap_or_else(|e| panic!("pipelines: {}", describe(&e)));
    let mut names = Vec::new();
    for p in &pipes {
        let (name, id, owner, schema, has_ids): (String, i32, String, String, bool) =
            (p.get(0), p.get(1), p.get(2), p.get(3), p.get(4));
        names.push(name.clone());
        match expect.iter().find(|(n, _)| *n == name) {
            None => v.push(format!("unexpected pipeline {name:?}")),
            Some((_, want)) if *want != owner => v.push(format!(
                "the source table of pipeline {name:?} belongs to {owner}, expected {want}"
            )),
            Some(_) => {}
        }
        let views: Vec<String> = ["_history", "_latest", "_sealed", "_refused"]
            .iter()
            .map(|s| format!("{name}{s}"))
            .collect();
        let like = format!("p{id}\\_%");
        let objs = c
            .query(
                "SELECT 'view', $1::text || '.' || c.relname, pg_get_userbyid(c.relowner)::text
                 FROM pg_class c WHERE c.relnamespace = $1::text::regnamespace AND c.relname = ANY($2::text[])
                 UNION ALL
                 SELECT CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'S' THEN 'sequence' ELSE c.relkind::text END,
                        '_eventtime.' || c.relname, pg_get_userbyid(c.relowner)::text
                 FROM pg_class c WHERE c.relnamespace = '_eventtime'::regnamespace AND c.relname LIKE $3 AND c.relkind <> 'i'
                 UNION ALL
                 SELECT 'function', '_eventtime.' || f.proname || '()', pg_get_userbyid(f.proowner)::text
                 FROM pg_proc f WHERE f.pronamespace = '_eventtime'::regnamespace AND f.proname LIKE $3
                 ORDER BY 1, 2",
                &[&schema, &views, &like],
            )
            .unwrap_or_else(|e| panic!("objects of pipeline {name:?}: {}", describe(&e)));
        let objs: Vec<(String, String, String)> = objs
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        let mut want: Vec<(String, String)> = views
            .iter()
            .map(|n| ("view".to_string(), format!("{schema}.{n}")))
            .collect();
        let mut tables = vec!["state", "history", "refused"];
        if has_ids {
            tables.push("ids");
        }
        for t in tables {
            want.push(("table".into(), format!("_eventtime.p{id}_{t}")));
        }
        want.push(("function".into(), format!("_eventtime.p{id}_ingest()")));
        for (kind, n) in &want {
            if !objs.iter().any(|(k, o, _)| k == kind && o == n) {
                v.push(format!("pipeline {name:?}: {kind} {n} is missing"));
            }
        }
        for (kind, n, o) in &objs {
            if *o != owner {
                v.push(format!(
                    "pipeline {name:?}: {kind} {n} belongs to {o}, not to {owner}, the owner of the source table"
                ));
            }
        }
        seen.push(format!("{name:?}: {} objects owned by {owner}", objs.len()));
    }
    for (n, _) in expect {
        if !names.iter().any(|x| x == n) {
            v.push(format!("pipeline {n:?} is missing"));
        }
    }
    (v, seen)
}

/// The privileges granted on `relation` (regclass text) to `grantee`, as `privilege by grantor`
/// lines, from the relation's ACL.
pub fn grants(c: &mut Client, relation: &str, grantee: &str) -> Vec<String> {
    c.query(
        &format!(
            "SELECT a.privilege_type || ' by ' || pg_get_userbyid(a.grantor)
             FROM pg_class c, aclexplode(c.relacl) a
             WHERE c.oid = {}::regclass AND a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $1)
             ORDER BY 1",
            lit(relation)
        ),
        &[&grantee],
    )
    .unwrap_or_else(|e| panic!("grants on {relation}: {}", describe(&e)))
    .iter()
    .map(|r| r.get(0))
    .collect()
}
