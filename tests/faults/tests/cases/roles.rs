//! Roles: ordinary application roles use the extension, each logged in on its own connection
//! (none has any attribute but LOGIN):
//!
//! - `et_owner` owns `orders` and creates, advances, marks idle and drops pipelines on it;
//! - `et_writer` has only INSERT on `orders`: it ingests by INSERT, COPY and `eventtime.ingest`;
//! - `et_analyst` has only SELECT on `orders_latest`: it reads that view and sees the pipeline in
//!   `eventtime.pipelines` and `eventtime.sources`;
//! - `et_stranger` has nothing;
//! - `et_tenant` owns `tickets` and its pipeline (and one a superuser created on its table).
//!
//! Every allowed path works and every other fails with SQLSTATE 42501 and changes nothing; every
//! object of every pipeline belongs to its source table's owner. Then 4 writer connections ingest
//! concurrently while the owner advances, and every committed row is accounted for (checked as
//! the superuser).

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use postgres::{Client, SimpleQueryMessage};
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use pg_eventtime_faults::cluster::Cluster;
use pg_eventtime_faults::db::{classify, describe, exec, one_i64, Failure};
use pg_eventtime_faults::roles::{
    assert_logged_in_as, create_login_role, expect_catalog_row_hidden, expect_copy_denied,
    expect_denied, expect_visible, pipeline_ownership, visible_pipelines, OWNER,
};
use pg_eventtime_faults::rows::{send, Method, SendError, TableSpec, Values};
use pg_eventtime_faults::workload::{ts_text, HOUR, INFINITY, MINUTE, T0};
use pg_eventtime_faults::{env_num, seed};

const DB: &str = "shop";
const WRITER: &str = "et_writer";
const ANALYST: &str = "et_analyst";
const STRANGER: &str = "et_stranger";
const TENANT: &str = "et_tenant";

const ORDERS: &str = "
CREATE TABLE orders (id bigint NOT NULL, store text NOT NULL, amount numeric NOT NULL, ts timestamptz NOT NULL);
SELECT eventtime.create_pipeline(
    name => 'orders', source => 'orders', event_time => 'ts', key => ARRAY['store'], event_id => 'id',
    window_size => interval '1 hour', allowed_lateness => interval '2 hours',
    aggregates => 'count(*) AS n, sum(amount) AS total');
SELECT eventtime.create_pipeline(
    name => 'orders_daily', source => 'orders', event_time => 'ts', key => ARRAY['store'],
    window_size => interval '1 day', allowed_lateness => interval '1 hour', aggregates => 'count(*) AS n');
GRANT INSERT ON orders TO et_writer;
GRANT SELECT ON orders_latest TO et_analyst;
";

const TICKETS: &str = "
CREATE TABLE tickets (id bigint NOT NULL, queue text NOT NULL, ts timestamptz NOT NULL);
SELECT eventtime.create_pipeline(
    name => 'tickets', source => 'tickets', event_time => 'ts', key => ARRAY['queue'], event_id => 'id',
    window_size => interval '1 day', allowed_lateness => interval '1 hour', aggregates => 'count(*) AS n');
";

/// What a role may not do to the pipeline `orders` (or `tickets`) beside reading its views.
fn manage(p: &str) -> Vec<String> {
    vec![
        format!("SELECT * FROM eventtime.advance_watermark('{p}', '2026-03-09 00:00+00')"),
        format!("SELECT * FROM eventtime.mark_idle('{p}', 'default')"),
        format!("SELECT eventtime.drop_pipeline('{p}')"),
    ]
}

/// A valid pipeline on `table` (`orders` or `tickets`), for a role that does not own it.
fn create_on(table: &str) -> String {
    let key = if table == "orders" { "store" } else { "queue" };
    format!(
        "SELECT eventtime.create_pipeline(name => 'stolen', source => '{table}', event_time => 'ts', key => ARRAY['{key}'], \
         window_size => interval '1 hour', allowed_lateness => interval '1 hour', aggregates => 'count(*) AS n')"
    )
}

fn views(p: &str) -> Vec<String> {
    ["_history", "_latest", "_sealed", "_refused"]
        .iter()
        .map(|s| format!("SELECT * FROM {p}{s}"))
        .collect()
}

const ORDER_JSON: &str = r#"{"id": 900, "store": "s9", "amount": 1, "ts": "2026-03-01 10:00+00"}"#;
const ORDER_LINE: &str = "900\ts9\t1\t2026-03-01 10:00+00\n";

fn ingest_orders() -> String {
    format!("SELECT * FROM eventtime.ingest('orders', '{ORDER_JSON}')")
}

fn counts(c: &mut Client, sql: &str) -> (i64, i64, i64, i64) {
    let r = c
        .query_one(sql, &[])
        .unwrap_or_else(|e| panic!("{sql}: {}", describe(&e)));
    (r.get(0), r.get(1), r.get(2), r.get(3))
}

/// The rows of `sql` in the text format of the server (NULL as the empty string).
fn rows(c: &mut Client, sql: &str) -> Vec<Vec<String>> {
    c.simple_query(sql)
        .unwrap_or_else(|e| panic!("{sql}: {}", describe(&e)))
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(
                (0..r.len())
                    .map(|i| r.get(i).unwrap_or_default().to_string())
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn each_role_logs_in() {
    let seed = seed("roles");
    let started = Instant::now();
    let cluster = Cluster::start("roles", &["deadlock_timeout = 100ms"]);
    let mut su = cluster.connect("postgres");
    for r in [OWNER, WRITER, ANALYST, STRANGER, TENANT] {
        create_login_role(&mut su, r);
    }
    exec(&mut su, &format!("CREATE DATABASE {DB}"));
    let mut su = cluster.connect(DB);
    exec(
        &mut su,
        &format!(
            "CREATE EXTENSION pg_eventtime; GRANT CREATE ON SCHEMA public TO {OWNER}, {TENANT}"
        ),
    );
    let login = |user: &str| {
        let mut c = cluster.connect_as(DB, user);
        assert_logged_in_as(&mut c, user);
        c
    };
    let mut owner = login(OWNER);
    let mut writer = login(WRITER);
    let mut analyst = login(ANALYST);
    let mut stranger = login(STRANGER);
    let mut tenant = login(TENANT);

    // The owners create their tables and pipelines; a superuser creates one more on the tenant's
    // table: everything belongs to the table's owner.
    exec(&mut owner, ORDERS);
    exec(&mut tenant, TICKETS);
    exec(
        &mut su,
        "SELECT eventtime.create_pipeline(name => 'tickets_hourly', source => 'tickets', event_time => 'ts',
             key => ARRAY['queue'], window_size => interval '1 hour', allowed_lateness => interval '1 hour',
             aggregates => 'count(*) AS n')",
    );
    let (v, seen) = pipeline_ownership(
        &mut su,
        &[
            ("orders", OWNER),
            ("orders_daily", OWNER),
            ("tickets", TENANT),
            ("tickets_hourly", TENANT),
        ],
    );
    assert!(
        v.is_empty(),
        "ownership of the pipelines' objects:\n{}",
        v.join("\n")
    );
    eprintln!("  {}", seen.join(", "));

    // The writer: INSERT, COPY and eventtime.ingest work; nothing else.
    eprintln!("  {WRITER}:");
    exec(
        &mut writer,
        "INSERT INTO orders VALUES (1, 's1', 10, '2026-03-01 10:05+00')",
    );
    {
        use std::io::Write;
        let mut w = writer
            .copy_in("COPY orders (id, store, amount, ts) FROM STDIN")
            .unwrap_or_else(|e| panic!("{WRITER}: COPY: {}", describe(&e)));
        w.write_all(b"2\ts1\t20\t2026-03-01 10:10+00\n3\ts2\t5\t2026-03-01 10:20+00\n")
            .unwrap();
        w.finish()
            .unwrap_or_else(|e| panic!("{WRITER}: COPY: {}", describe(&e)));
    }
    assert_eq!(
        counts(
            &mut writer,
            r#"SELECT accepted, late, refused, duplicates FROM eventtime.ingest('orders', '[
                {"id": 4, "store": "s1", "amount": 1, "ts": "2026-03-01 10:30+00"},
                {"id": 1, "store": "s1", "amount": 10, "ts": "2026-03-01 10:05+00"}]')"#
        ),
        (1, 0, 0, 1),
        "{WRITER}: eventtime.ingest of a new row and a redelivery (accepted, late, refused, duplicates)"
    );
    for sql in manage("orders")
        .into_iter()
        .chain(manage("orders_daily"))
        .chain([create_on("orders")])
        .chain(views("orders"))
        .chain([
            "SELECT * FROM eventtime.explain('orders', '2026-03-01 10:00+00', 's1')".to_string(),
            "INSERT INTO tickets VALUES (900, 'q9', '2026-03-01 10:00+00')".to_string(),
            r#"SELECT * FROM eventtime.ingest('tickets', '{"id": 900, "queue": "q9", "ts": "2026-03-01 10:00+00"}')"#
                .to_string(),
        ])
    {
        expect_denied(&mut writer, WRITER, &sql);
    }
    expect_visible(&mut writer, WRITER, &[], &[]);
    expect_catalog_row_hidden(&mut writer, WRITER, "orders");

    // The owner advances, marks idle and reads its views; it may not touch the tenant's pipeline.
    eprintln!("  {OWNER}:");
    assert_eq!(
        rows(&mut owner, "SELECT windows_fired FROM eventtime.advance_watermark('orders', '2026-03-01 11:30+00')"),
        vec![vec!["2".to_string()]],
        "{OWNER}: advance of orders fires the windows of s1 and s2"
    );
    let latest = vec![strs(&["s1", "3", "31"]), strs(&["s2", "1", "5"])];
    assert_eq!(
        rows(
            &mut owner,
            "SELECT store, n, total FROM orders_latest ORDER BY store"
        ),
        latest
    );
    assert_eq!(
        rows(
            &mut owner,
            "SELECT count(*) FROM orders_history WHERE version = 1"
        )
        .concat()
        .concat(),
        "2"
    );
    exec(
        &mut owner,
        "SELECT * FROM eventtime.mark_idle('orders', 'default')",
    );
    exec(
        &mut owner,
        "SELECT * FROM eventtime.advance_watermark('orders', '2026-03-01 12:00+00')",
    );
    expect_visible(&mut owner, OWNER, &["orders", "orders_daily"], &["orders"]);
    assert_eq!(
        rows(
            &mut owner,
            "SELECT name FROM _eventtime.pipeline ORDER BY name"
        ),
        vec![strs(&["orders"]), strs(&["orders_daily"])],
        "{OWNER} reads the catalog rows of its own pipelines, and only those"
    );
    for sql in manage("tickets")
        .into_iter()
        .chain(views("tickets"))
        .chain([
            r#"SELECT * FROM eventtime.ingest('tickets', '{"id": 900, "queue": "q9", "ts": "2026-03-01 10:00+00"}')"#
                .to_string(),
            create_on("tickets"),
        ])
    {
        expect_denied(&mut owner, OWNER, &sql);
    }

    // The analyst reads orders_latest, and nothing else.
    eprintln!("  {ANALYST}:");
    assert_eq!(
        rows(
            &mut analyst,
            "SELECT store, n, total FROM orders_latest ORDER BY store"
        ),
        latest
    );
    expect_visible(&mut analyst, ANALYST, &["orders"], &["orders"]);
    expect_copy_denied(login(ANALYST), ANALYST, "orders", ORDER_LINE);
    for sql in [
        "INSERT INTO orders VALUES (900, 's9', 1, '2026-03-01 10:00+00')".to_string(),
        ingest_orders(),
        create_on("orders"),
        "SELECT * FROM orders_history".to_string(),
        "SELECT * FROM orders_sealed".to_string(),
        "SELECT * FROM orders_refused".to_string(),
        "SELECT * FROM tickets_latest".to_string(),
    ]
    .into_iter()
    .chain(manage("orders"))
    {
        expect_denied(&mut analyst, ANALYST, &sql);
    }

    // The stranger: nothing at all.
    eprintln!("  {STRANGER}:");
    expect_copy_denied(login(STRANGER), STRANGER, "orders", ORDER_LINE);
    for sql in [
        "INSERT INTO orders VALUES (900, 's9', 1, '2026-03-01 10:00+00')".to_string(),
        ingest_orders(),
        create_on("orders"),
        "SELECT * FROM eventtime.explain('orders', '2026-03-01 10:00+00', 's1')".to_string(),
    ]
    .into_iter()
    .chain(manage("orders"))
    .chain(views("orders"))
    .chain(manage("tickets"))
    .chain(views("tickets"))
    {
        expect_denied(&mut stranger, STRANGER, &sql);
    }
    expect_visible(&mut stranger, STRANGER, &[], &[]);
    expect_catalog_row_hidden(&mut stranger, STRANGER, "orders");
    expect_catalog_row_hidden(&mut stranger, STRANGER, "tickets");

    // The tenant: its own pipelines work, the other tenant's are out of reach.
    eprintln!("  {TENANT}:");
    assert_eq!(
        visible_pipelines(&mut tenant),
        strs(&["tickets", "tickets_hourly"]),
        "eventtime.pipelines as {TENANT}"
    );
    exec(
        &mut tenant,
        "INSERT INTO tickets VALUES (1, 'q1', '2026-03-01 08:00+00')",
    );
    assert_eq!(
        counts(
            &mut tenant,
            r#"SELECT accepted, late, refused, duplicates FROM eventtime.ingest('tickets', '{"id": 2, "queue": "q1", "ts": "2026-03-01 09:00+00"}')"#
        ),
        (1, 0, 0, 0)
    );
    exec(
        &mut tenant,
        "SELECT * FROM eventtime.advance_watermark('tickets', '2026-03-02 12:00+00')",
    );
    assert_eq!(
        rows(&mut tenant, "SELECT queue, n FROM tickets_latest"),
        vec![strs(&["q1", "2"])]
    );
    exec(
        &mut tenant,
        "SELECT eventtime.drop_pipeline('tickets_hourly')",
    );
    expect_visible(&mut tenant, TENANT, &["tickets"], &["tickets"]);
    expect_catalog_row_hidden(&mut tenant, TENANT, "orders");
    for sql in [
        "INSERT INTO orders VALUES (900, 's9', 1, '2026-03-01 10:00+00')".to_string(),
        ingest_orders(),
        create_on("orders"),
        "SELECT * FROM eventtime.explain('orders', '2026-03-01 10:00+00', 's1')".to_string(),
    ]
    .into_iter()
    .chain(manage("orders"))
    .chain(views("orders"))
    {
        expect_denied(&mut tenant, TENANT, &sql);
    }

    // The owner drops a pipeline of its table.
    exec(&mut owner, "SELECT eventtime.drop_pipeline('orders_daily')");
    assert_eq!(visible_pipelines(&mut owner), strs(&["orders"]));

    // Nothing a denied statement tried happened.
    assert_eq!(
        rows(
            &mut su,
            "SELECT name, watermark::text, (SELECT count(*) FROM eventtime.sources s WHERE s.pipeline = p.name)::text
             FROM eventtime.pipelines p ORDER BY name"
        ),
        vec![
            strs(&["orders", "2026-03-01 12:00:00+00", "1"]),
            strs(&["tickets", "2026-03-02 12:00:00+00", "1"]),
        ],
        "pipelines, watermarks and sources after the denied statements"
    );
    assert_eq!(
        rows(
            &mut su,
            "SELECT to_regclass('orders_daily_latest') IS NULL, to_regclass('tickets_hourly_latest') IS NULL,
                    (SELECT count(*) FROM orders), (SELECT count(*) FROM tickets)"
        ),
        vec![strs(&["t", "t", "5", "2"])],
        "dropped pipelines' views are gone; only the allowed rows are in the tables"
    );
    let (v, _) = pipeline_ownership(&mut su, &[("orders", OWNER), ("tickets", TENANT)]);
    assert!(v.is_empty(), "ownership after the drops:\n{}", v.join("\n"));
    drop((writer, analyst, stranger, tenant));

    // 4 writers ingest concurrently while the owner advances.
    let conc = concurrent(&cluster, seed);
    let mut su = cluster.connect(DB);
    let src = one_i64(&mut su, "SELECT count(*) FROM orders");
    let r = su
        .query_one(
            "SELECT (SELECT coalesce(sum(n), 0)::bigint FROM orders_latest), (SELECT count(*) FROM orders_refused),
                    duplicates, refused, state_rows, open_windows, watermark::text,
                    (SELECT count(*) FROM orders_history WHERE version > 1)
             FROM eventtime.pipelines WHERE name = 'orders'",
            &[],
        )
        .unwrap();
    let (latest_n, refused, dups, p_refused, state_rows, open): (i64, i64, i64, i64, i64, i64) =
        (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5));
    let (wm, late_versions): (Option<String>, i64) = (r.get(6), r.get(7));
    eprintln!(
        "  concurrent run: {} rows in {} statements {:?} by 4 writers, {} retries; {} advances by {OWNER}; \
         accounting: {src} source rows = {latest_n} in latest versions + {refused} refused + {dups} duplicates; {late_versions} late versions",
        conc.rows, conc.statements, conc.methods, conc.retries, conc.advances
    );
    assert_eq!(
        src,
        5 + conc.rows,
        "the source has other rows than the writers committed"
    );
    assert_eq!(
        latest_n + refused + dups,
        src,
        "accounting: latest n {latest_n} + refused {refused} + duplicates {dups} must be the source's {src} rows"
    );
    assert_eq!(
        p_refused, refused,
        "eventtime.pipelines.refused against orders_refused"
    );
    assert_eq!((state_rows, open, wm.as_deref()), (0, 0, Some("infinity")));
    assert!(
        refused > 0 && dups > 1 && late_versions > 0 && conc.methods.len() == 3,
        "the concurrent run did not exercise refused rows, duplicates, late versions and the three ways to ingest"
    );
    eprintln!("[roles] passed in {:.1} s", started.elapsed().as_secs_f64());
}

/// Decrements the count of running writers when dropped.
struct Done<'a>(&'a AtomicUsize);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One statement in a transaction of its own.
fn send_one(
    c: &mut Client,
    t: &TableSpec,
    method: Method,
    rows: &[Values],
) -> Result<(), SendError> {
    let mut tx = c.transaction()?;
    send(&mut tx, t, method, rows)?;
    tx.commit()?;
    Ok(())
}

struct Conc {
    rows: i64,
    statements: u64,
    methods: std::collections::BTreeMap<&'static str, u64>,
    retries: u64,
    advances: u64,
}

/// 4 connections of the writer send statements of 1 to 300 rows (multi-row INSERT, COPY or
/// `eventtime.ingest`, each its own transaction; on-time, late and too-late rows, redeliveries)
/// while a connection of the owner advances the watermark every 30 to 120 ms, and at the end to
/// `infinity`. Returns what committed.
fn concurrent(cluster: &Cluster, seed: u64) -> Conc {
    let writers = 4usize;
    let quota = env_num("FAULTS_ROLES_EVENTS", 24_000) as i64 / writers as i64;
    let wm = AtomicI64::new(T0 + 59 * 24 * HOUR + 12 * HOUR);
    let next_id = AtomicI64::new(1_000);
    let left = AtomicUsize::new(writers);
    let pool: Mutex<Vec<Values>> = Mutex::new(Vec::new());
    let table = TableSpec {
        sql_name: "public.orders".into(),
        columns: strs(&["id", "store", "amount", "ts"]),
        pipeline: "orders".into(),
    };
    thread::scope(|s| {
        let hs: Vec<_> = (0..writers)
            .map(|i| {
                let (wm, next_id, left, pool, table) = (&wm, &next_id, &left, &pool, &table);
                s.spawn(move || {
                    // Tells the advancing thread this writer is done, also when it panics.
                    let _done = Done(left);
                    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0E17_0000 ^ i as u64);
                    let mut c = cluster.connect_as(DB, WRITER);
                    assert_logged_in_as(&mut c, WRITER);
                    let (mut rows, mut stmts, mut retries) = (0i64, 0u64, 0u64);
                    let mut methods = std::collections::BTreeMap::new();
                    while rows < quota {
                        let w = wm.load(Ordering::SeqCst);
                        let n = rng.random_range(1..=300);
                        let mut batch: Vec<Values> = Vec::with_capacity(n);
                        for _ in 0..n {
                            let old = if rng.random_bool(0.08) {
                                pool.lock().unwrap().choose(&mut rng).cloned()
                            } else {
                                None
                            };
                            let r = old.unwrap_or_else(|| {
                                let u: f64 = rng.random();
                                let ts = if u < 0.6 {
                                    w + rng.random_range(0..2 * HOUR)
                                } else if u < 0.85 {
                                    w - rng.random_range(0..3 * HOUR)
                                } else {
                                    w - rng.random_range(3 * HOUR..10 * HOUR)
                                };
                                let r = vec![
                                    Some(next_id.fetch_add(1, Ordering::SeqCst).to_string()),
                                    Some(format!("s{}", rng.random_range(0..6))),
                                    Some(format!(
                                        "{}.{:02}",
                                        rng.random_range(0..500),
                                        rng.random_range(0..100)
                                    )),
                                    Some(ts_text(ts)),
                                ];
                                pool.lock().unwrap().push(r.clone());
                                r
                            });
                            if rng.random_bool(0.03) {
                                batch.push(r.clone());
                            }
                            batch.push(r);
                        }
                        let method = *[Method::Insert, Method::Copy, Method::Ingest]
                            .choose(&mut rng)
                            .unwrap();
                        loop {
                            match send_one(&mut c, table, method, &batch) {
                                Ok(()) => break,
                                Err(e) => match e.failure() {
                                    Failure::Retry(_) => retries += 1,
                                    f => panic!(
                                        "{WRITER} {i}: {} of {} rows: {f:?}",
                                        method.name(),
                                        batch.len()
                                    ),
                                },
                            }
                        }
                        rows += batch.len() as i64;
                        stmts += 1;
                        *methods.entry(method.name()).or_insert(0u64) += 1;
                        thread::sleep(Duration::from_millis(rng.random_range(0..150)));
                    }
                    (rows, stmts, retries, methods)
                })
            })
            .collect();
        let adv = s.spawn(|| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0E17_A11C);
            let mut c = cluster.connect_as(DB, OWNER);
            assert_logged_in_as(&mut c, OWNER);
            let mut advances = 0u64;
            let mut finishing = false;
            loop {
                let next = if left.load(Ordering::SeqCst) == 0 {
                    finishing = true;
                    INFINITY
                } else {
                    thread::sleep(Duration::from_millis(rng.random_range(30..120)));
                    wm.load(Ordering::SeqCst) + rng.random_range(5..20) * MINUTE
                };
                let to = ts_text(next);
                loop {
                    match c.query(
                        "SELECT * FROM eventtime.advance_watermark('orders', $1::text::timestamptz)",
                        &[&to],
                    ) {
                        Ok(_) => break,
                        Err(e) => match classify(&e) {
                            Failure::Retry(_) => {}
                            f => panic!("{OWNER}: advance to {to}: {f:?}"),
                        },
                    }
                }
                advances += 1;
                if finishing {
                    return advances;
                }
                wm.store(next, Ordering::SeqCst);
            }
        });
        let mut out = Conc {
            rows: 0,
            statements: 0,
            methods: Default::default(),
            retries: 0,
            advances: 0,
        };
        let mut failed = Vec::new();
        for (i, h) in hs.into_iter().enumerate() {
            match h.join() {
                Ok((rows, stmts, retries, methods)) => {
                    out.rows += rows;
                    out.statements += stmts;
                    out.retries += retries;
                    for (k, v) in methods {
                        *out.methods.entry(k).or_insert(0) += v;
                    }
                }
                Err(_) => failed.push(format!("writer {i}")),
            }
        }
        match adv.join() {
            Ok(n) => out.advances = n,
            Err(_) => failed.push("advancing thread".into()),
        }
        assert!(
            failed.is_empty(),
            "concurrent run (seed {seed}): {failed:?} failed"
        );
        out
    })
}
