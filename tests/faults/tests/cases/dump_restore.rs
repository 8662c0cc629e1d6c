//! SPEC §5, "pipelines, state and history survive pg_dump/restore": a seeded, deterministic
//! workload on two pipelines (one on `public.events`, one with names that need quoting on
//! `"Shop"."Order Lines"`) runs into database `a` up to the middle: some windows fired, late
//! versions, refused rows, duplicates, open windows. `pg_dump -Fc a`, `pg_restore
//! --exit-on-error -d b`, then the rest of the same workload runs on `b`; the whole workload also
//! runs uninterrupted on `c`. `b` must end equal to `c`: history (but `fired_at`), refused rows
//! (but `refused_at`), the views derived from them, the counters of `eventtime.pipelines`, and the
//! internal window state and event-id ledgers; before and after a final advance to `infinity`.
//!
//! Each source table and its pipeline belong to an ordinary role (`et_owner`, `Shop Owner`), which
//! creates them and runs the workload; a third role reads one view of each by a GRANT. After the
//! restore every object of each pipeline still belongs to its table's owner, the grants are there
//! and the analyst, logged in, reads what they allow and nothing else.

use std::collections::HashMap;

use postgres::Client;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use pg_eventtime_faults::cluster::{check_output, Cluster};
use pg_eventtime_faults::db::{describe, exec, text_rows};
use pg_eventtime_faults::roles::{
    assert_logged_in_as, create_login_role, expect_denied, grants, pipeline_ownership,
    visible_pipelines,
};
use pg_eventtime_faults::rows::{quote_ident, send, Method, TableSpec, Values};
use pg_eventtime_faults::workload::{ts_text, HOUR, MINUTE, T0};

/// The roles (global, so they exist for every database of the cluster and for the restore):
/// `et_owner` owns `public.events` and its pipeline, `Shop Owner` (a name that needs quoting)
/// owns `"Shop"` with its table and pipeline, `et_analyst` reads one view of each. None has any
/// attribute but LOGIN.
const OWNER: &str = "et_owner";
const SHOP_OWNER: &str = "Shop Owner";
const ANALYST: &str = "et_analyst";

/// Per database, as the superuser.
const SETUP_SUPERUSER: &str = r#"
CREATE EXTENSION pg_eventtime;
GRANT CREATE ON SCHEMA public TO et_owner;
CREATE SCHEMA "Shop" AUTHORIZATION "Shop Owner";
"#;

/// Per database, as `et_owner`.
const SETUP_OWNER: &str = r#"
CREATE TABLE events (
    delivery_id bigint PRIMARY KEY,
    event_id    bigint NOT NULL,
    store       text NOT NULL,
    region      text NOT NULL,
    amount      numeric NOT NULL,
    ts          timestamptz NOT NULL
);
SELECT eventtime.create_pipeline(
    name => 'hourly', source => 'events', event_time => 'ts', key => ARRAY['store', 'region'],
    event_id => 'event_id', window_size => interval '1 hour', allowed_lateness => interval '2 hours',
    aggregates => 'count(*) AS n, sum(amount) AS total, min(amount) AS lo, max(amount) AS hi, avg(amount) AS mean');
GRANT SELECT ON hourly_latest TO et_analyst;
"#;

/// Per database, as `Shop Owner`.
const SETUP_SHOP_OWNER: &str = r#"
CREATE TABLE "Shop"."Order Lines" (
    "Order ID"  bigint,
    "Store"     text,
    qty         integer NOT NULL,
    price       numeric(10,2) NOT NULL,
    "Placed At" timestamptz NOT NULL,
    note        text
);
SELECT eventtime.create_pipeline(
    name => 'Daily "Totals"', source => '"Shop"."Order Lines"', event_time => 'Placed At', key => ARRAY['Store'],
    event_id => 'Order ID', window_size => interval '1 day', allowed_lateness => interval '6 hours',
    window_origin => '2026-01-01 06:00+00',
    aggregates => 'count(*) AS orders, sum(qty) AS units, avg(price) AS "Avg Price", count(note) AS noted, max("Placed At") AS last_at');
GRANT USAGE ON SCHEMA "Shop" TO et_analyst;
GRANT SELECT ON "Shop"."Daily ""Totals""_sealed" TO et_analyst;
"#;

/// The views granted to `et_analyst`, and one view of each pipeline that is not.
const GRANTED: [&str; 2] = [
    "public.hourly_latest",
    "\"Shop\".\"Daily \"\"Totals\"\"_sealed\"",
];
const NOT_GRANTED: [&str; 2] = [
    "public.hourly_history",
    "\"Shop\".\"Daily \"\"Totals\"\"_refused\"",
];

/// The extension and both pipelines in a new database `db`, each created by its owner.
fn setup(cluster: &Cluster, db: &str) {
    exec(&mut cluster.connect(db), SETUP_SUPERUSER);
    for (user, sql) in [(OWNER, SETUP_OWNER), (SHOP_OWNER, SETUP_SHOP_OWNER)] {
        let mut c = cluster.connect_as(db, user);
        assert_logged_in_as(&mut c, user);
        exec(&mut c, sql);
    }
}

/// One session per pipeline, each logged in as the owner of its source table.
fn owners(cluster: &Cluster, db: &str) -> Vec<Client> {
    vec![
        cluster.connect_as(db, OWNER),
        cluster.connect_as(db, SHOP_OWNER),
    ]
}

/// Read by the superuser: every object of both pipelines belongs to the owner of its source
/// table, and the analyst's grants are exactly those made at setup (SELECT, by the view's owner).
fn roles_hold(c: &mut Client, db: &str) {
    let (mut v, seen) =
        pipeline_ownership(c, &[("hourly", OWNER), ("Daily \"Totals\"", SHOP_OWNER)]);
    for (view, owner) in [(GRANTED[0], OWNER), (GRANTED[1], SHOP_OWNER)] {
        let g = grants(c, view, ANALYST);
        if g != vec![format!("SELECT by {owner}")] {
            v.push(format!(
                "grants to {ANALYST} on {view}: {g:?}, expected SELECT by {owner}"
            ));
        }
    }
    for view in NOT_GRANTED {
        let g = grants(c, view, ANALYST);
        if !g.is_empty() {
            v.push(format!(
                "grants to {ANALYST} on {view}: {g:?}, expected none"
            ));
        }
    }
    assert!(
        v.is_empty(),
        "ownership and grants in database {db}:\n{}",
        v.join("\n")
    );
    eprintln!(
        "  {db}: {}; {ANALYST} may read {GRANTED:?}",
        seen.join(", ")
    );
}

/// The analyst, logged in to `db`, reads the views granted to it (the same rows as the superuser
/// reads), sees both pipelines in `eventtime.pipelines`, and may not read the others.
fn analyst_reads(cluster: &Cluster, db: &str) {
    let mut su = cluster.connect(db);
    let mut an = cluster.connect_as(db, ANALYST);
    assert_logged_in_as(&mut an, ANALYST);
    let mut read = Vec::new();
    for view in GRANTED {
        let sql = format!("SELECT t::text AS r FROM {view} t ORDER BY r");
        let mine = text_rows(&mut an, &sql).unwrap_or_else(|e| {
            panic!(
                "{db}: {ANALYST} reading {view}, granted to it: {}",
                describe(&e)
            )
        });
        let all = text_rows(&mut su, &sql).unwrap();
        assert_eq!(
            mine, all,
            "{db}: {ANALYST} reads other rows of {view} than the superuser"
        );
        read.push(format!("{} rows of {view}", mine.len()));
    }
    assert!(
        read.iter().any(|r| !r.starts_with("0 ")),
        "{db}: the granted views are empty: {read:?}"
    );
    eprintln!("  {db}: {ANALYST} reads {}", read.join(", "));
    assert_eq!(
        visible_pipelines(&mut an),
        vec!["Daily \"Totals\"".to_string(), "hourly".to_string()],
        "{db}: eventtime.pipelines as {ANALYST}, who may read a view of each pipeline"
    );
    for view in NOT_GRANTED {
        expect_denied(&mut an, ANALYST, &format!("SELECT * FROM {view}"));
    }
}

const NOTES: &[&str] = &[
    "gift",
    "it's late",
    "back\\slash",
    "tab\there",
    "ünïcödé ✓",
    "comma, \"quoted\"",
    "line\nbreak",
    "",
];

struct Pipe {
    name: &'static str,
    /// The schema of the source table, where the views are.
    schema: &'static str,
    table: TableSpec,
    window: i64,
    lateness: i64,
    step: (i64, i64),
}

fn pipes() -> Vec<Pipe> {
    vec![
        Pipe {
            name: "hourly",
            schema: "public",
            table: TableSpec {
                sql_name: "public.events".into(),
                columns: ["delivery_id", "event_id", "store", "region", "amount", "ts"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                pipeline: "hourly".into(),
            },
            window: HOUR,
            lateness: 2 * HOUR,
            step: (10 * MINUTE, 90 * MINUTE),
        },
        Pipe {
            name: "Daily \"Totals\"",
            schema: "Shop",
            table: TableSpec {
                sql_name: "\"Shop\".\"Order Lines\"".into(),
                columns: ["Order ID", "Store", "qty", "price", "Placed At", "note"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                pipeline: "Daily \"Totals\"".into(),
            },
            window: 24 * HOUR,
            lateness: 6 * HOUR,
            step: (2 * HOUR, 10 * HOUR),
        },
    ]
}

enum Step {
    Ingest {
        pipe: usize,
        method: Method,
        rows: Vec<Values>,
    },
    Advance {
        pipe: usize,
        to: i64,
    },
}

/// The whole workload, from the seed alone.
fn workload(seed: u64, steps: usize) -> Vec<Step> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xD0_3D);
    let ps = pipes();
    let mut wm = [T0, T0];
    let mut pools: Vec<Vec<Values>> = vec![Vec::new(), Vec::new()];
    let mut next_id = 1i64;
    let mut next_delivery = 1i64;
    let mut out = Vec::new();
    for i in 0..steps {
        let pipe = if rng.random_bool(0.6) { 0 } else { 1 };
        let p = &ps[pipe];
        if i > 0 && rng.random_bool(0.22) {
            wm[pipe] += rng.random_range(p.step.0..=p.step.1);
            out.push(Step::Advance { pipe, to: wm[pipe] });
            continue;
        }
        let size = if rng.random_bool(0.6) {
            rng.random_range(1..=10)
        } else {
            rng.random_range(11..=150)
        };
        let mut rows: Vec<Values> = Vec::new();
        for _ in 0..size {
            if !pools[pipe].is_empty() && rng.random_bool(0.1) {
                let mut r = pools[pipe].choose(&mut rng).unwrap().clone();
                if pipe == 0 {
                    r[0] = Some(next_delivery.to_string());
                    next_delivery += 1;
                }
                rows.push(r);
                continue;
            }
            let w = wm[pipe];
            let u: f64 = rng.random();
            let ts = if u < 0.6 {
                w + rng.random_range(0..2 * p.window)
            } else if u < 0.85 {
                w - rng.random_range(0..p.window + p.lateness)
            } else {
                w - rng.random_range(p.window + p.lateness..3 * (p.window + p.lateness))
            };
            let id = next_id;
            next_id += 1;
            let r: Values = if pipe == 0 {
                let d = next_delivery;
                next_delivery += 1;
                vec![
                    Some(d.to_string()),
                    Some(id.to_string()),
                    Some(format!("s{}", rng.random_range(0..4))),
                    Some(format!("r{}", rng.random_range(0..2))),
                    Some(format!(
                        "{}.{:02}",
                        rng.random_range(0..1000),
                        rng.random_range(0..100)
                    )),
                    Some(ts_text(ts)),
                ]
            } else {
                vec![
                    if rng.random_bool(0.05) {
                        None
                    } else {
                        Some(id.to_string())
                    },
                    if rng.random_bool(0.1) {
                        None
                    } else {
                        Some(
                            ["Nord", "Süd", "O'Brien"]
                                .choose(&mut rng)
                                .unwrap()
                                .to_string(),
                        )
                    },
                    Some(rng.random_range(1..20).to_string()),
                    Some(format!(
                        "{}.{:02}",
                        rng.random_range(1..500),
                        rng.random_range(0..100)
                    )),
                    Some(ts_text(ts)),
                    if rng.random_bool(0.5) {
                        None
                    } else {
                        Some(NOTES.choose(&mut rng).unwrap().to_string())
                    },
                ]
            };
            pools[pipe].push(r.clone());
            rows.push(r);
        }
        let n = rows.len();
        for _ in 0..n {
            if rng.random_bool(0.03) {
                let mut r = rows[rng.random_range(0..n)].clone();
                if pipe == 0 {
                    r[0] = Some(next_delivery.to_string());
                    next_delivery += 1;
                }
                rows.push(r);
            }
        }
        let method = *[Method::Insert, Method::Copy, Method::Ingest]
            .choose(&mut rng)
            .unwrap();
        out.push(Step::Ingest { pipe, method, rows });
    }
    out
}

/// Runs the steps, each on the session of its pipeline's owner (`owners`).
fn run(cs: &mut [Client], steps: &[Step]) {
    let ps = pipes();
    for (i, s) in steps.iter().enumerate() {
        match s {
            Step::Ingest { pipe, method, rows } => {
                let mut tx = cs[*pipe].transaction().unwrap();
                if let Err(e) = send(&mut tx, &ps[*pipe].table, *method, rows) {
                    panic!(
                        "step {i}: {} of {} rows into {} failed: {e:?}",
                        method.name(),
                        rows.len(),
                        ps[*pipe].table.sql_name
                    );
                }
                tx.commit().unwrap();
            }
            Step::Advance { pipe, to } => {
                cs[*pipe]
                    .query(
                        "SELECT * FROM eventtime.advance_watermark($1, $2::text::timestamptz)",
                        &[&ps[*pipe].name, &ts_text(*to)],
                    )
                    .unwrap_or_else(|e| panic!("step {i}: advance: {}", describe(&e)));
            }
        }
    }
}

/// Everything that must be equal, as named lists of sorted text rows.
fn state(c: &mut Client) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut q = |c: &mut Client, name: String, sql: String| {
        let rows: Vec<String> = c
            .query(&sql, &[])
            .unwrap_or_else(|e| panic!("{sql}: {}", describe(&e)))
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect();
        out.push((name, rows));
    };
    for p in pipes() {
        for (suffix, skip) in [
            ("_history", "fired_at"),
            ("_latest", "fired_at"),
            ("_sealed", "fired_at"),
            ("_refused", "refused_at"),
        ] {
            let name = format!("{}{suffix}", p.name);
            let schema = p.schema.to_string();
            let view = format!("{}.{}", quote_ident(p.schema), quote_ident(&name));
            let cols: Vec<String> = c
                .query(
                    "SELECT column_name::text FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position",
                    &[&schema, &name],
                )
                .unwrap()
                .iter()
                .map(|r| r.get::<_, String>(0))
                .filter(|n| n != skip)
                .collect();
            assert!(cols.len() > 4, "view {view} has columns {cols:?}");
            let list = cols
                .iter()
                .map(|c| quote_ident(c))
                .collect::<Vec<_>>()
                .join(", ");
            q(
                c,
                view.clone(),
                format!("SELECT ROW({list})::text AS r FROM {view} ORDER BY r"),
            );
        }
    }
    q(
        c,
        "eventtime.pipelines".into(),
        "SELECT ROW(name, source, event_time, key_columns, event_id, window_size, window_origin, allowed_lateness, aggregates,
                    watermark, open_windows, state_rows, firings, refused, duplicates)::text AS r
         FROM eventtime.pipelines ORDER BY r"
            .into(),
    );
    q(
        c,
        "source events".into(),
        "SELECT count(*)::text FROM public.events".into(),
    );
    q(
        c,
        "source order lines".into(),
        "SELECT count(*)::text FROM \"Shop\".\"Order Lines\"".into(),
    );
    let ids: Vec<i32> = c
        .query("SELECT id FROM _eventtime.pipeline ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    for id in ids {
        for t in ["state", "ids"] {
            let name = format!("_eventtime.p{id}_{t}");
            let exists: bool = c
                .query_one("SELECT to_regclass($1) IS NOT NULL", &[&name])
                .unwrap()
                .get(0);
            if exists {
                // A state row's `_et_slot` names the server process that wrote it, which a
                // restore and a later connection renumber: everything else must agree.
                q(
                    c,
                    name.clone(),
                    format!(
                        "SELECT (to_jsonb(x) - '_et_slot')::text AS r FROM {name} x ORDER BY r"
                    ),
                );
            }
        }
    }
    out
}

fn diff(
    what: &str,
    left: &str,
    l: &[(String, Vec<String>)],
    right: &str,
    r: &[(String, Vec<String>)],
) -> Vec<String> {
    let rm: HashMap<&String, &Vec<String>> = r.iter().map(|(k, v)| (k, v)).collect();
    let mut out = Vec::new();
    for (k, lv) in l {
        let Some(rv) = rm.get(k) else {
            out.push(format!("{what}: {k} missing in {right}"));
            continue;
        };
        if lv != *rv {
            let only_l: Vec<_> = lv.iter().filter(|x| !rv.contains(x)).take(5).collect();
            let only_r: Vec<_> = rv.iter().filter(|x| !lv.contains(x)).take(5).collect();
            out.push(format!(
                "{what}: {k} differs ({} rows in {left}, {} in {right})\n    only in {left}: {only_l:?}\n    only in {right}: {only_r:?}",
                lv.len(),
                rv.len()
            ));
        }
    }
    if l.len() != r.len() {
        out.push(format!(
            "{what}: {} objects in {left}, {} in {right}",
            l.len(),
            r.len()
        ));
    }
    out
}

#[test]
fn dump_and_restore_mid_stream_continues_exactly() {
    let seed = pg_eventtime_faults::seed("dump_restore");
    let cluster = Cluster::start("dump_restore", &[]);
    let mut admin = cluster.connect("postgres");
    for role in [OWNER, SHOP_OWNER, ANALYST] {
        create_login_role(&mut admin, role);
    }
    for db in ["a", "c"] {
        exec(&mut admin, &format!("CREATE DATABASE {db}"));
        setup(&cluster, db);
    }
    let steps = workload(seed, 420);
    let split = steps.len() / 2;

    // The workload runs as the owners; the comparisons read as the superuser.
    let mut a = cluster.connect("a");
    run(&mut owners(&cluster, "a"), &steps[..split]);
    roles_hold(&mut a, "a");
    // The middle must be a real middle: fired windows, late versions, refused rows, duplicates,
    // open state.
    let r = a
        .query_one(
            "SELECT sum(firings)::bigint, sum(refused)::bigint, sum(duplicates)::bigint, sum(state_rows)::bigint, sum(open_windows)::bigint,
                    (SELECT count(*) FROM hourly_history WHERE version > 1) + (SELECT count(*) FROM \"Shop\".\"Daily \"\"Totals\"\"_history\" WHERE version > 1)
             FROM eventtime.pipelines",
            &[],
        )
        .unwrap();
    let mid: Vec<i64> = (0..6).map(|i| r.get(i)).collect();
    eprintln!("  in the middle: firings {}, refused {}, duplicates {}, state rows {}, open windows {}, late versions {}", mid[0], mid[1], mid[2], mid[3], mid[4], mid[5]);
    assert!(
        mid.iter().all(|&x| x > 0),
        "the workload's middle lacks a kind of object: {mid:?}"
    );

    let dump = cluster.path("a.dump");
    let port = cluster.port.to_string();
    let out = cluster.run(
        "pg_dump",
        &[
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "-U",
            "postgres",
            "-Fc",
            "-f",
            &dump,
            "a",
        ],
    );
    check_output("pg_dump -Fc a", &out);
    assert!(
        out.stderr.is_empty(),
        "pg_dump printed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exec(&mut admin, "CREATE DATABASE b");
    let out = cluster.run(
        "pg_restore",
        &[
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "-U",
            "postgres",
            "--exit-on-error",
            "-d",
            "b",
            &dump,
        ],
    );
    check_output("pg_restore --exit-on-error -d b", &out);
    assert!(
        out.stderr.is_empty(),
        "pg_restore printed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut b = cluster.connect("b");
    // Ownership and grants came back with the objects.
    roles_hold(&mut b, "b");
    analyst_reads(&cluster, "b");
    let v = diff(
        "right after the restore",
        "a",
        &state(&mut a),
        "b",
        &state(&mut b),
    );
    assert!(
        v.is_empty(),
        "restore of a mid-stream dump differs from its source (seed {seed}):\n{}",
        v.join("\n")
    );

    // History stays append-only in the restored database.
    b.batch_execute("BEGIN").unwrap();
    let del = b.batch_execute("DELETE FROM hourly_history");
    b.batch_execute("ROLLBACK").unwrap();
    assert!(
        del.is_err(),
        "DELETE of history succeeded in the restored database"
    );

    run(&mut owners(&cluster, "b"), &steps[split..]);
    let mut c = cluster.connect("c");
    run(&mut owners(&cluster, "c"), &steps);
    let v = diff(
        "end of the workload",
        "b",
        &state(&mut b),
        "c",
        &state(&mut c),
    );
    assert!(
        v.is_empty(),
        "restored-and-continued differs from uninterrupted (seed {seed}):\n{}",
        v.join("\n")
    );

    for db in ["b", "c"] {
        let mut cs = owners(&cluster, db);
        for (i, p) in pipes().iter().enumerate() {
            cs[i]
                .query(
                    "SELECT * FROM eventtime.advance_watermark($1, 'infinity')",
                    &[&p.name],
                )
                .unwrap_or_else(|e| panic!("{db}: advance to infinity: {}", describe(&e)));
        }
    }
    roles_hold(&mut b, "b");
    roles_hold(&mut c, "c");
    let (sb, sc) = (state(&mut b), state(&mut c));
    let v = diff("after 'infinity'", "b", &sb, "c", &sc);
    assert!(
        v.is_empty(),
        "restored-and-continued differs from uninterrupted (seed {seed}):\n{}",
        v.join("\n")
    );
    eprintln!(
        "  b = c after {} steps ({} before the dump): {}",
        steps.len(),
        split,
        sb.iter()
            .map(|(k, v)| format!("{k} {}", v.len()))
            .collect::<Vec<_>>()
            .join(", ")
    );
}
