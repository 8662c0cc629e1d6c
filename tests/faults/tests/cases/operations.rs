//! SPEC §10, Operations, each on a cluster of its own:
//!
//! 1. `a_pg_cron_job_alone_closes_windows`: a server with pg_cron preloaded runs the operations
//!    guide's blocks fenced as `sql pg_cron` (read from docs/operations.md at run time), which schedule
//!    `SELECT eventtime.tick()` every minute in database `shop`. No client calls anything of the
//!    extension after its rows are inserted: the windows already over (by the pipeline's
//!    `clock_lag`) get their version 1 from the cron job alone, with exact counts; the pipeline's
//!    only source is `clock`, at the processing time of a run of the job minus the lag; the window
//!    still open under the lag does not fire.
//! 2. `history_flows_to_a_subscriber`: a publication of a pipeline's history table (named by
//!    `eventtime.pipelines.history_table`) and a subscription in another database of the same
//!    cluster to a table built from the publisher's catalog: after the initial copy and a workload
//!    of main versions, late versions (one a window's first), refused rows and duplicates, the
//!    subscriber's rows equal the publisher's history, every column, twice.
//!
//! The pipelines belong to the ordinary role `et_owner`, which creates them and inserts or runs
//! the workload on its own connection; the superuser sets up pg_cron and replication and reads.

use std::fs;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use postgres::Client;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use pg_eventtime_faults::cluster::Cluster;
use pg_eventtime_faults::db::{describe, exec, lit, one_i64, render, text_rows};
use pg_eventtime_faults::roles::{assert_logged_in_as, create_login_role, OWNER};
use pg_eventtime_faults::rows::{quote_ident, send, Method, TableSpec, Values};
use pg_eventtime_faults::seed;
use pg_eventtime_faults::workload::{ts_text, HOUR, MINUTE, T0};

const SECOND: i64 = 1_000_000;

/// The SQL of the operations guide's code blocks fenced as ```` ```<tag> ````, in order.
fn readme_blocks(tag: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations.md");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let open = format!("```{tag}");
    let mut blocks = Vec::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        match cur.as_mut() {
            None if line.trim_end() == open => cur = Some(String::new()),
            None => {}
            Some(_) if line.trim_end() == "```" => blocks.push(cur.take().unwrap()),
            Some(b) => {
                b.push_str(line);
                b.push('\n');
            }
        }
    }
    assert!(
        cur.is_none(),
        "docs/operations.md: a block fenced as {open:?} is not closed"
    );
    blocks
}

/// Rows of `sql` as text (every column cast to text by the query), rendered one per line.
fn dump(c: &mut Client, sql: &str) -> String {
    match text_rows(c, sql) {
        Ok(rows) if rows.is_empty() => "    (no rows)".to_string(),
        Ok(rows) => rows
            .iter()
            .map(|r| format!("    {}", render(r)))
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => format!("    ({sql}: {})", describe(&e)),
    }
}

// ---------------------------------------------------------------------------------------------
// 1. pg_cron

const SHOP: &str = "shop";
const VISITS: &str = "visits_by_minute";
/// The pipeline's `clock_lag`, in minutes: long enough that the window of `OPEN` stays open for
/// the whole test, so that a `tick()` moving the clock to `now()` (without the lag) shows.
const LAG_MINUTES: i64 = 10;

fn visits_setup() -> String {
    format!(
        "CREATE TABLE shop.visits (id bigint NOT NULL, page text NOT NULL, visited_at timestamptz NOT NULL);
         SELECT eventtime.create_pipeline(name => '{VISITS}', source => 'shop.visits',
             event_time => 'visited_at', key => ARRAY['page'], event_id => 'id',
             window_size => interval '1 minute', allowed_lateness => interval '1 minute',
             clock_lag => interval '{LAG_MINUTES} minutes', aggregates => 'count(*) AS n');"
    )
}

/// (page, minutes before the start of the current minute at setup, rows): windows that end at
/// least 11 minutes before the first run of the job, so its first `tick()` fires them.
const OVER: [(&str, i64, i64); 5] = [
    ("/", 14, 3),
    ("/cart", 14, 1),
    ("/", 13, 2),
    ("/checkout", 12, 4),
    ("/", 12, 1),
];
/// A window that ends one minute before the start of the minute of setup: it fires only once the
/// clock, `now() - 10 minutes`, passes its end, 8 minutes or more after setup (beyond
/// `CRON_WAIT`).
const OPEN: [(&str, i64, i64); 2] = [("/", 2, 2), ("/cart", 2, 1)];

/// How long to wait for the job's first run to fire: a cron minute boundary must pass.
const CRON_WAIT: Duration = Duration::from_secs(150);

/// (page, window_start, version, kind, n, sealed) of `shop.visits_by_minute_history`.
type VisitRow = (String, String, i32, String, i64, bool);

fn visit_history(c: &mut Client) -> Vec<VisitRow> {
    c.query(
        "SELECT page, (extract(epoch FROM window_start) * 1000000)::bigint, version, kind, n, sealed
         FROM shop.visits_by_minute_history ORDER BY page, window_start, version",
        &[],
    )
    .unwrap_or_else(|e| panic!("read shop.visits_by_minute_history: {}", describe(&e)))
    .iter()
    .map(|r| (r.get(0), ts_text(r.get(1)), r.get(2), r.get(3), r.get(4), r.get(5)))
    .collect()
}

fn cron_report(cron: &mut Client, cluster: &Cluster) -> String {
    format!(
        "cron.job:\n{}\ncron.job_run_details:\n{}\n--- server log tail ---\n{}",
        dump(
            cron,
            "SELECT jobid::text, schedule, command, database, username, active::text FROM cron.job ORDER BY jobid"
        ),
        dump(
            cron,
            "SELECT jobid::text, runid::text, status, return_message, start_time::text, end_time::text
             FROM cron.job_run_details ORDER BY runid"
        ),
        cluster.log_tail(40)
    )
}

#[test]
fn a_pg_cron_job_alone_closes_windows() {
    let t0 = Instant::now();
    let cluster = Cluster::start(
        "operations_cron",
        &[
            "shared_preload_libraries = 'pg_cron'",
            "cron.database_name = 'postgres'",
            "cron.use_background_workers = on",
            "max_worker_processes = 16",
        ],
    );
    let mut cron = cluster.connect("postgres");
    create_login_role(&mut cron, OWNER);
    exec(&mut cron, &format!("CREATE DATABASE {SHOP}"));
    let mut su = cluster.connect(SHOP);
    exec(
        &mut su,
        &format!("CREATE EXTENSION pg_eventtime; CREATE SCHEMA shop AUTHORIZATION {OWNER}"),
    );
    let mut owner = cluster.connect_as(SHOP, OWNER);
    assert_logged_in_as(&mut owner, OWNER);
    exec(&mut owner, &visits_setup());

    // The rows, relative to the start of the current minute.
    let base = one_i64(
        &mut owner,
        "SELECT (extract(epoch FROM date_trunc('minute', now())) * 1000000)::bigint",
    );
    let mut values = Vec::new();
    let mut id = 0;
    for (page, back, n) in OVER.iter().chain(OPEN.iter()) {
        for k in 0..*n {
            id += 1;
            let at = base - back * MINUTE + k * 7 * SECOND;
            values.push(format!("({id}, {}, {})", lit(page), lit(&ts_text(at))));
        }
    }
    exec(
        &mut owner,
        &format!(
            "INSERT INTO shop.visits (id, page, visited_at) VALUES {}",
            values.join(", ")
        ),
    );
    drop(owner);
    let mut expected: Vec<VisitRow> = OVER
        .iter()
        .map(|(page, back, n)| {
            (
                page.to_string(),
                ts_text(base - back * MINUTE),
                1,
                "main".to_string(),
                *n,
                true,
            )
        })
        .collect();
    expected.sort();
    assert!(
        visit_history(&mut su).is_empty(),
        "history before any tick: nothing may have fired at insert"
    );
    let wm: Option<String> = su
        .query_one(
            "SELECT watermark::text FROM eventtime.pipelines WHERE name = $1",
            &[&VISITS],
        )
        .unwrap_or_else(|e| panic!("eventtime.pipelines: {}", describe(&e)))
        .get(0);
    assert_eq!(wm, None, "the pipeline watermark before any tick");

    // The operations guide's pg_cron blocks, as the superuser in cron.database_name.
    let blocks = readme_blocks("sql pg_cron");
    assert!(
        !blocks.is_empty(),
        "docs/operations.md has no block fenced as ```sql pg_cron"
    );
    for b in &blocks {
        eprintln!("[operations_cron] running the operations guide's pg_cron block:\n{b}");
        exec(&mut cron, b);
    }
    let scheduled = Instant::now();
    let jobs = cron
        .query(
            "SELECT jobid, database, username, command FROM cron.job",
            &[],
        )
        .unwrap_or_else(|e| panic!("cron.job: {}", describe(&e)));
    assert_eq!(
        jobs.len(),
        1,
        "the operations guide schedules one job:\n{}",
        cron_report(&mut cron, &cluster)
    );
    let (jobid, db, user, command): (i64, String, String, String) = (
        jobs[0].get(0),
        jobs[0].get(1),
        jobs[0].get(2),
        jobs[0].get(3),
    );
    assert!(
        db == SHOP && user == "postgres" && command.contains("eventtime.tick()"),
        "the operations guide's job must run eventtime.tick() in database {SHOP} as the superuser that \
         scheduled it; it runs {command:?} in {db:?} as {user:?}"
    );

    // From now on no client calls the extension: read-only polling of the history.
    let seen = loop {
        let rows = visit_history(&mut su);
        let done = expected
            .iter()
            .all(|e| rows.iter().any(|r| (&r.0, &r.1) == (&e.0, &e.1)));
        if done {
            break rows;
        }
        if scheduled.elapsed() > CRON_WAIT {
            panic!(
                "after {:?} the windows already over have not fired (no eventtime.tick() by the \
                 cron job?)\nhistory seen: {rows:?}\nexpected version 1 of: {expected:?}\n{}",
                scheduled.elapsed(),
                cron_report(&mut cron, &cluster)
            );
        }
        thread::sleep(Duration::from_secs(2));
    };
    let fired_after = scheduled.elapsed();
    eprintln!(
        "[operations_cron] the windows over fired {fired_after:?} after the job was scheduled"
    );
    assert_eq!(
        seen,
        expected,
        "history after the cron job's tick: exactly version 1 (main, sealed) of each window over, \
         with its count; nothing of the open window\n{}",
        cron_report(&mut cron, &cluster)
    );

    // The pipeline's only source is the clock, moved to the processing time of the tick minus
    // the lag; the open window (two keys) still waits.
    let src = su
        .query(
            "SELECT source::text, watermark::text, advanced_at::text, idle,
                    (extract(epoch FROM watermark) * 1000000)::bigint,
                    (extract(epoch FROM advanced_at) * 1000000)::bigint
             FROM eventtime.sources WHERE pipeline = $1",
            &[&VISITS],
        )
        .unwrap_or_else(|e| panic!("eventtime.sources: {}", describe(&e)));
    let sources: Vec<(String, String, String, bool)> = src
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    assert!(
        src.len() == 1 && sources[0].0 == "clock" && !sources[0].3,
        "the pipeline's only source is an active `clock`: {sources:?}"
    );
    let (clock_wm, advanced_at): (i64, i64) = (src[0].get(4), src[0].get(5));
    assert_eq!(
        clock_wm,
        advanced_at - LAG_MINUTES * MINUTE,
        "the clock's watermark is its last advance's processing time minus clock_lag: {sources:?}"
    );
    let p = su
        .query_one(
            "SELECT watermark::text, open_windows::bigint FROM eventtime.pipelines WHERE name = $1",
            &[&VISITS],
        )
        .unwrap_or_else(|e| panic!("eventtime.pipelines: {}", describe(&e)));
    let (pipe_wm, open): (Option<String>, i64) = (p.get(0), p.get(1));
    assert_eq!(
        pipe_wm.as_deref(),
        Some(sources[0].1.as_str()),
        "the pipeline watermark is its only source's"
    );
    assert_eq!(
        open,
        OPEN.len() as i64,
        "open windows: the window under the lag, one per key"
    );

    // The clock moved in a successful run of the job: wait (briefly) for pg_cron to record it.
    let advanced = sources[0].2.clone();
    let t = Instant::now();
    loop {
        let n = one_i64(
            &mut cron,
            &format!(
                "SELECT count(*) FROM cron.job_run_details
                 WHERE jobid = {jobid} AND status = 'succeeded' AND database = {}
                   AND start_time - interval '2 seconds' <= {adv}::timestamptz
                   AND {adv}::timestamptz <= end_time",
                lit(SHOP),
                adv = lit(&advanced)
            ),
        );
        if n == 1 {
            break;
        }
        if t.elapsed() > Duration::from_secs(20) {
            panic!(
                "no succeeded run of job {jobid} in cron.job_run_details spans the clock's last \
                 advance at {advanced}\n{}",
                cron_report(&mut cron, &cluster)
            );
        }
        thread::sleep(Duration::from_millis(500));
    }
    eprintln!(
        "[operations_cron] runs of the job:\n{}",
        dump(
            &mut cron,
            "SELECT runid::text, status, return_message, start_time::text, end_time::text
             FROM cron.job_run_details ORDER BY runid"
        )
    );
    eprintln!(
        "[operations_cron] done in {:?}: {} windows fired by the cron job alone, clock at {}, \
         the open window still open",
        t0.elapsed(),
        expected.len(),
        sources[0].1
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Logical replication of history

const PUB: &str = "pub";
const SUB: &str = "sub";
const SALES: &str = "sales";
const PUBLICATION: &str = "sales_versions";
const SLOT: &str = "sales_sub";
const SUBSCRIPTION: &str = "sales_sub";
const REPLICATION_WAIT: Duration = Duration::from_secs(60);

const SALES_SETUP: &str = "
CREATE TABLE sales (id bigint NOT NULL, store text NOT NULL, region text, amount numeric NOT NULL, ts timestamptz NOT NULL);
SELECT eventtime.create_pipeline(name => 'sales', source => 'sales', event_time => 'ts',
    key => ARRAY['store', 'region'], event_id => 'id', window_size => interval '1 hour',
    allowed_lateness => interval '2 hours',
    aggregates => 'count(*) AS n, sum(amount) AS total, max(amount) AS top, avg(amount) AS mean');
";

/// The workload of `et_owner` on `sales`: seeded rows, each statement (INSERT, COPY or
/// `eventtime.ingest`) in its own transaction or two in one, and advances.
struct Workload {
    rng: ChaCha8Rng,
    spec: TableSpec,
    next_id: i64,
    statements: usize,
}

impl Workload {
    fn row(&mut self, store: &str, region: Option<&str>, at: i64) -> Values {
        self.next_id += 1;
        let cents: i64 = self.rng.random_range(1..100_000);
        vec![
            Some(self.next_id.to_string()),
            Some(store.to_string()),
            region.map(str::to_string),
            Some(format!("{}.{:02}", cents / 100, cents % 100)),
            Some(ts_text(at)),
        ]
    }

    /// `n` rows in the hour starting at `hour`, for random keys (a NULL region among them).
    fn rows(&mut self, hour: i64, n: usize) -> Vec<Values> {
        (0..n)
            .map(|_| {
                let store = *["s1", "s2", "s3"].choose(&mut self.rng).unwrap();
                let region = *[Some("north"), Some("south"), None]
                    .choose(&mut self.rng)
                    .unwrap();
                let at = hour + self.rng.random_range(0..HOUR);
                self.row(store, region, at)
            })
            .collect()
    }

    /// Sends `rows` in statements of 1 to 25 rows, with about 8% of them delivered again.
    fn send(&mut self, c: &mut Client, mut rows: Vec<Values>) {
        let again: Vec<Values> = rows
            .iter()
            .filter(|_| self.rng.random_bool(0.08))
            .cloned()
            .collect();
        for r in again {
            let at = self.rng.random_range(0..=rows.len());
            rows.insert(at, r);
        }
        let mut rest = &rows[..];
        while !rest.is_empty() {
            let mut tx = c
                .transaction()
                .unwrap_or_else(|e| panic!("BEGIN: {}", describe(&e)));
            let statements = if self.rng.random_bool(0.2) { 2 } else { 1 };
            for _ in 0..statements {
                if rest.is_empty() {
                    break;
                }
                let n = self.rng.random_range(1..=25).min(rest.len());
                let method = *[Method::Insert, Method::Copy, Method::Ingest]
                    .choose(&mut self.rng)
                    .unwrap();
                send(&mut tx, &self.spec, method, &rest[..n])
                    .unwrap_or_else(|e| panic!("{} of {n} rows into sales: {e:?}", method.name()));
                self.statements += 1;
                rest = &rest[n..];
            }
            tx.commit()
                .unwrap_or_else(|e| panic!("COMMIT: {}", describe(&e)));
        }
    }

    fn advance(&mut self, c: &mut Client, to: i64) {
        let to = ts_text(to);
        c.query_one(
            "SELECT windows_fired FROM eventtime.advance_watermark('sales', $1::text::timestamptz)",
            &[&to],
        )
        .unwrap_or_else(|e| panic!("advance sales to {to}: {}", describe(&e)));
    }

    /// Hours `base` to `base + 4`: on time; the first two fire; late rows into them (and a key
    /// new to the second, whose version 1 is late); the next two fire and the first is purged;
    /// its rows are refused, late rows go to the third; the fifth fires.
    fn round(&mut self, c: &mut Client, base: i64) {
        let mut rows = Vec::new();
        for h in 0..5 {
            rows.extend(self.rows(base + h * HOUR, 24));
        }
        self.send(c, rows);
        self.advance(c, base + 2 * HOUR);
        let mut late = self.rows(base, 6);
        late.extend(self.rows(base + HOUR, 6));
        let newcomer = format!("late{}", (base - T0) / HOUR);
        late.push(self.row(&newcomer, Some("west"), base + HOUR + 30 * MINUTE));
        self.send(c, late);
        self.advance(c, base + 4 * HOUR);
        let mut more = self.rows(base, 4); // deadline base + 3h: refused
        more.extend(self.rows(base + 2 * HOUR, 5)); // deadline base + 5h: late
        self.send(c, more);
        self.advance(c, base + 5 * HOUR);
    }
}

/// `CREATE TABLE` of a table with the columns of `table` (regclass text) on the publisher: names,
/// types, NOT NULL, and its generated columns generated by the same expression.
fn subscriber_ddl(c: &mut Client, table: &str) -> (String, Vec<String>) {
    let cols = c
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                    a.attgenerated::text, pg_get_expr(d.adbin, d.adrelid)
             FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
             WHERE a.attrelid = $1::text::regclass AND a.attnum > 0 AND NOT a.attisdropped
             ORDER BY a.attnum",
            &[&table],
        )
        .unwrap_or_else(|e| panic!("columns of {table}: {}", describe(&e)));
    let mut defs = Vec::new();
    let mut names = Vec::new();
    let mut sealed_generated = false;
    for r in &cols {
        let (name, ty, notnull, generated, expr): (String, String, bool, String, Option<String>) =
            (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
        let mut d = format!("{} {ty}", quote_ident(&name));
        if generated == "s" {
            d += &format!(
                " GENERATED ALWAYS AS ({}) STORED",
                expr.expect("the expression of a generated column")
            );
            sealed_generated |= name == "sealed";
        } else if notnull {
            d += " NOT NULL";
        }
        defs.push(d);
        names.push(name);
    }
    assert!(
        sealed_generated,
        "the column `sealed` of {table} is generated (version = 1): {defs:?}"
    );
    (format!("CREATE TABLE {table} ({})", defs.join(", ")), names)
}

/// Every row of `table`, every column as text, in the order of the keys, window and version.
fn all_rows(c: &mut Client, table: &str, cols: &[String], order: &str) -> Vec<Vec<Option<String>>> {
    let sql = format!(
        "SELECT {} FROM {table} ORDER BY {order}",
        cols.iter()
            .map(|c| format!("{}::text", quote_ident(c)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    text_rows(c, &sql).unwrap_or_else(|e| panic!("{sql}: {}", describe(&e)))
}

fn replication_report(publ: &mut Client, sub: &mut Client, cluster: &Cluster) -> String {
    format!(
        "pg_stat_subscription:\n{}\npg_subscription_rel:\n{}\npg_replication_slots:\n{}\n--- server log tail ---\n{}",
        dump(
            sub,
            "SELECT subname::text, pid::text, received_lsn::text, latest_end_lsn::text FROM pg_stat_subscription"
        ),
        dump(
            sub,
            "SELECT srrelid::regclass::text, srsubstate::text, srsublsn::text FROM pg_subscription_rel"
        ),
        dump(
            publ,
            "SELECT slot_name::text, plugin::text, active::text, confirmed_flush_lsn::text FROM pg_replication_slots"
        ),
        cluster.log_tail(40)
    )
}

/// Waits until the subscriber has as many rows as the publisher's history, then compares every
/// row. Returns the number of rows.
fn wait_and_compare(
    cluster: &Cluster,
    publ: &mut Client,
    sub: &mut Client,
    table: &str,
    cols: &[String],
    order: &str,
) -> usize {
    let want = one_i64(publ, &format!("SELECT count(*) FROM {table}"));
    let t = Instant::now();
    loop {
        let have = one_i64(sub, &format!("SELECT count(*) FROM {table}"));
        if have == want {
            break;
        }
        if t.elapsed() > REPLICATION_WAIT {
            panic!(
                "after {:?} the subscriber has {have} rows of {table}, the publisher {want}\n{}",
                t.elapsed(),
                replication_report(publ, sub, cluster)
            );
        }
        thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "[operations_replication] subscriber caught up with {want} rows in {:?}",
        t.elapsed()
    );
    let a = all_rows(publ, table, cols, order);
    let b = all_rows(sub, table, cols, order);
    if a != b {
        let first = (0..a.len().max(b.len()))
            .find(|&i| a.get(i) != b.get(i))
            .unwrap();
        let show = |v: &[Vec<Option<String>>]| {
            v.iter()
                .skip(first)
                .take(5)
                .map(|r| format!("    {}", render(r)))
                .collect::<Vec<_>>()
                .join("\n")
        };
        panic!(
            "the subscriber's {table} differs from the publisher's from row {first} on \
             (columns {cols:?}):\npublisher:\n{}\nsubscriber:\n{}",
            show(&a),
            show(&b)
        );
    }
    a.len()
}

#[test]
fn history_flows_to_a_subscriber() {
    let t0 = Instant::now();
    let seed = seed("operations_replication");
    let cluster = Cluster::start("operations_replication", &["wal_level = logical"]);
    let mut su = cluster.connect("postgres");
    create_login_role(&mut su, OWNER);
    exec(&mut su, &format!("CREATE DATABASE {PUB}"));
    exec(&mut su, &format!("CREATE DATABASE {SUB}"));
    drop(su);
    let mut publ = cluster.connect(PUB);
    exec(
        &mut publ,
        &format!("CREATE EXTENSION pg_eventtime; GRANT CREATE ON SCHEMA public TO {OWNER}"),
    );
    let mut owner = cluster.connect_as(PUB, OWNER);
    assert_logged_in_as(&mut owner, OWNER);
    exec(&mut owner, SALES_SETUP);
    let mut w = Workload {
        rng: ChaCha8Rng::seed_from_u64(seed),
        spec: TableSpec {
            sql_name: "public.sales".into(),
            columns: ["id", "store", "region", "amount", "ts"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            pipeline: SALES.into(),
        },
        next_id: 0,
        statements: 0,
    };
    // Versions written before the subscription: the initial copy carries them.
    w.round(&mut owner, T0);

    let r = publ
        .query_one(
            "SELECT history_table::text, array_to_string(key_columns, ',') FROM eventtime.pipelines WHERE name = $1",
            &[&SALES],
        )
        .unwrap_or_else(|e| panic!("eventtime.pipelines: {}", describe(&e)));
    let (table, keys): (String, String) = (r.get(0), r.get(1));
    let order = keys
        .split(',')
        .map(quote_ident)
        .chain(["window_start".into(), "version".into()])
        .collect::<Vec<_>>()
        .join(", ");
    eprintln!("[operations_replication] history table {table}, ordered by {order}");
    exec(
        &mut publ,
        &format!("CREATE PUBLICATION {PUBLICATION} FOR TABLE {table}"),
    );
    let (ddl, cols) = subscriber_ddl(&mut publ, &table);
    eprintln!("[operations_replication] subscriber table: {ddl}");
    let mut sub = cluster.connect(SUB);
    exec(&mut sub, &format!("CREATE SCHEMA _eventtime; {ddl}"));
    exec(
        &mut publ,
        &format!(
            "SELECT pg_create_logical_replication_slot({}, 'pgoutput')",
            lit(SLOT)
        ),
    );
    exec(
        &mut sub,
        &format!(
            "CREATE SUBSCRIPTION {SUBSCRIPTION} CONNECTION 'host=127.0.0.1 port={} dbname={PUB} user=postgres' \
             PUBLICATION {PUBLICATION} WITH (create_slot = false, slot_name = {}, copy_data = true)",
            cluster.port,
            lit(SLOT)
        ),
    );

    w.round(&mut owner, T0 + 6 * HOUR);
    let first = wait_and_compare(&cluster, &mut publ, &mut sub, &table, &cols, &order);
    let copied = one_i64(
        &mut sub,
        &format!(
            "SELECT count(*) FROM {table} WHERE window_start < {}::timestamptz",
            lit(&ts_text(T0 + 6 * HOUR))
        ),
    );
    assert!(
        copied > 0 && (copied as usize) < first,
        "the subscriber has the versions written before it (initial copy: {copied}) and after \
         (of {first})"
    );

    w.round(&mut owner, T0 + 12 * HOUR);
    w.advance(&mut owner, i64::MAX);
    let second = wait_and_compare(&cluster, &mut publ, &mut sub, &table, &cols, &order);
    assert!(
        second > first,
        "the second round wrote versions: {first} rows, then {second}"
    );

    // What the replicated history holds: every kind of version the workload is to produce.
    let r = publ
        .query_one(
            &format!(
                "SELECT count(*) FILTER (WHERE kind = 'main' AND version = 1),
                        count(*) FILTER (WHERE kind = 'late' AND version > 1),
                        count(*) FILTER (WHERE kind = 'late' AND version = 1),
                        count(*) FILTER (WHERE region IS NULL),
                        (SELECT refused::bigint FROM eventtime.pipelines WHERE name = 'sales'),
                        (SELECT duplicates::bigint FROM eventtime.pipelines WHERE name = 'sales')
                 FROM {table}"
            ),
            &[],
        )
        .unwrap_or_else(|e| panic!("coverage: {}", describe(&e)));
    let cover: Vec<i64> = (0..6).map(|i| r.get(i)).collect();
    eprintln!(
        "[operations_replication] {} statements; {second} versions: {} main, {} late after a \
         first, {} late firsts, {} with a NULL key; {} refused rows, {} duplicates",
        w.statements, cover[0], cover[1], cover[2], cover[3], cover[4], cover[5]
    );
    assert!(
        cover.iter().all(|&n| n > 0),
        "the workload must produce main versions, late versions, late first versions, NULL keys, \
         refused rows and duplicates: {cover:?}"
    );

    exec(&mut sub, "SET statement_timeout = '60s'");
    exec(&mut sub, &format!("DROP SUBSCRIPTION {SUBSCRIPTION}"));
    assert_eq!(
        one_i64(&mut publ, "SELECT count(*) FROM pg_replication_slots"),
        0,
        "DROP SUBSCRIPTION drops its slot on the publisher"
    );
    let errors: Vec<String> = cluster
        .log_text()
        .lines()
        .filter(|l| l.contains("ERROR:"))
        .map(str::to_string)
        .collect();
    assert!(
        errors.is_empty(),
        "errors in the server log:\n{}",
        errors.join("\n")
    );
    eprintln!(
        "[operations_replication] done in {:?}: {second} history rows equal on the subscriber",
        t0.elapsed()
    );
}
