//! SPEC §5, the critical interleavings, deterministically, with sessions in their own threads:
//!
//! 1. an ingest transaction holds an on-time row uncommitted while an advance passes its window
//!    end: the advance waits (seen in pg_stat_activity), and the row is counted in version 1;
//!    an ingest statement that starts while the advance waits does not queue behind it (SPEC §9:
//!    an advance never makes writers queue behind it): it commits at once, against the watermark
//!    before the advance, and is counted in version 1 too;
//! 2. the advance commits first: a row for the fired window within its lateness is late
//!    (version 2), a row past the deadline is refused;
//! 3. an ingest under REPEATABLE READ whose snapshot predates a committed advance: it fails with
//!    40001 or is classified against the new watermark, never against the old one;
//! 4. an advance holds its locks uncommitted while an ingest statement for a window it fires
//!    starts: the ingest waits and is then late, never open-and-missed.
//!
//! Also `redelivery_after_purge_is_a_duplicate`: SPEC §3 Dedup for a redelivery that arrives
//! after its window's deadline, across a committed purge; and
//! `concurrent_bulk_loads_of_new_windows_count_each_id_once`: two bulk loads with ids in common,
//! the second waiting for the first to commit or roll back.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use postgres::Client;

use pg_eventtime_faults::cluster::Cluster;
use pg_eventtime_faults::db::{backend_pid, describe, exec, one_i64, text_rows, wait_for_lock};
use pg_eventtime_faults::roles::{assert_logged_in_as, create_login_role, OWNER};

/// Created by `OWNER`, who logs in for every ingest and advance of these tests; the observer
/// connections (locks in pg_stat_activity, internal tables) are the superuser's.
const SETUP: &str = "
CREATE TABLE t (id bigint, store text, amount numeric, ts timestamptz);
SELECT eventtime.create_pipeline(
    name => 'crit', source => 't', event_time => 'ts', key => ARRAY['store'], event_id => 'id',
    window_size => interval '1 hour', allowed_lateness => interval '2 hours',
    aggregates => 'count(*) AS n, sum(amount) AS total');
SELECT eventtime.advance_watermark('crit', '2026-03-01 09:30+00');
";

fn setup(name: &str) -> Cluster {
    let cluster = Cluster::start(name, &["deadlock_timeout = 100ms"]);
    let mut su = cluster.connect("postgres");
    create_login_role(&mut su, OWNER);
    exec(&mut su, "CREATE DATABASE crit");
    exec(
        &mut cluster.connect("crit"),
        &format!("CREATE EXTENSION pg_eventtime; GRANT CREATE ON SCHEMA public TO {OWNER}"),
    );
    let mut owner = owner(&cluster);
    assert_logged_in_as(&mut owner, OWNER);
    exec(&mut owner, SETUP);
    cluster
}

/// A session of the pipeline's owner.
fn owner(cluster: &Cluster) -> Client {
    cluster.connect_as("crit", OWNER)
}

/// The rows of a query as text, or its error.
type QueryResult = Result<Vec<Vec<Option<String>>>, String>;

/// Runs `sql` on `c` in a thread; the result (rows as text, or the error) comes back on the
/// channel.
fn spawn_query(
    mut c: Client,
    sql: String,
) -> (mpsc::Receiver<QueryResult>, thread::JoinHandle<Client>) {
    let (tx, rx) = mpsc::channel();
    let h = thread::spawn(move || {
        let r = text_rows(&mut c, &sql).map_err(|e| describe(&e));
        let _ = tx.send(r);
        c
    });
    (rx, h)
}

/// History of a window as `version kind n total watermark` lines.
fn history(c: &mut Client, store: &str, start: &str) -> Vec<String> {
    c.query(
        "SELECT version, kind, n, total::text, watermark::text FROM crit_history
         WHERE store = $1 AND window_start = $2::text::timestamptz ORDER BY version",
        &[&store, &start],
    )
    .unwrap()
    .iter()
    .map(|r| {
        format!(
            "{} {} {} {} {}",
            r.get::<_, i32>(0),
            r.get::<_, String>(1),
            r.get::<_, i64>(2),
            r.get::<_, String>(3),
            r.get::<_, String>(4)
        )
    })
    .collect()
}

#[test]
fn the_critical_interleavings() {
    let _ = pg_eventtime_faults::seed("interleaving");
    let cluster = setup("interleaving");
    let mut obs = cluster.connect("crit");
    // Advances of the owner while `a` holds a transaction open.
    let mut adv = owner(&cluster);

    // 1. The advance waits for the open ingest transaction; a later ingest goes past it.
    let mut a = owner(&cluster);
    a.batch_execute("BEGIN; INSERT INTO t VALUES (1, 'a', 10, '2026-03-01 10:15+00')")
        .unwrap();
    let mut b = owner(&cluster);
    let b_pid = backend_pid(&mut b);
    let (b_rx, b_h) = spawn_query(b, "SELECT windows_fired::text, watermark::text FROM eventtime.advance_watermark('crit', '2026-03-01 11:30+00')".into());
    let waits = wait_for_lock(&mut obs, b_pid, Duration::from_secs(10));
    assert!(
        waits.is_some(),
        "advance_watermark did not wait for the open ingest transaction"
    );
    eprintln!("  1: the advance waits on {}", waits.unwrap());
    assert!(b_rx.recv_timeout(Duration::from_secs(1)).is_err(), "advance_watermark returned while an ingest transaction with a row of a window it fires was open");
    let d = owner(&cluster);
    let (d_rx, d_h) = spawn_query(
        d,
        "INSERT INTO t VALUES (2, 'a', 5, '2026-03-01 10:40+00')".into(),
    );
    d_rx.recv_timeout(Duration::from_secs(5))
        .expect("an ingest statement that started while the advance waited queued behind it")
        .unwrap_or_else(|e| panic!("the later ingest failed: {e}"));
    eprintln!("  1: the later ingest committed while the advance waited");
    assert!(
        b_rx.try_recv().is_err(),
        "advance_watermark returned while the first ingest transaction was open"
    );
    a.batch_execute("COMMIT").unwrap();
    let r = b_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("advance_watermark did not return after the ingest committed");
    let r = r.unwrap_or_else(|e| panic!("advance_watermark failed: {e}"));
    assert_eq!(r[0][0].as_deref(), Some("1"), "windows fired: {r:?}");
    let _ = (b_h.join(), d_h.join());
    assert_eq!(
        history(&mut obs, "a", "2026-03-01 10:00+00"),
        vec!["1 main 2 15 2026-03-01 11:30:00+00"],
        "the rows of the open transaction and of the statement that went past the waiting advance must both be in version 1 (the advance waited for both)"
    );

    // 2. The advance commits first: late within the grace, refused after the deadline.
    exec(
        &mut a,
        "INSERT INTO t VALUES (10, 'b', 7, '2026-03-01 11:10+00')",
    );
    exec(
        &mut adv,
        "SELECT eventtime.advance_watermark('crit', '2026-03-01 12:30+00')",
    );
    a.batch_execute("BEGIN").unwrap();
    a.query("SELECT count(*) FROM t", &[]).unwrap();
    let c = a
        .query_one("SELECT accepted, late, refused, duplicates FROM eventtime.ingest('crit', '{\"id\": 11, \"store\": \"b\", \"amount\": 3, \"ts\": \"2026-03-01 11:20+00\"}')", &[])
        .unwrap();
    a.batch_execute("COMMIT").unwrap();
    assert_eq!(
        (
            c.get::<_, i64>(0),
            c.get::<_, i64>(1),
            c.get::<_, i64>(2),
            c.get::<_, i64>(3)
        ),
        (0, 1, 0, 0),
        "a row of a fired window within its grace is late"
    );
    exec(
        &mut adv,
        "SELECT eventtime.advance_watermark('crit', '2026-03-01 14:00+00')",
    );
    exec(
        &mut a,
        "INSERT INTO t VALUES (12, 'b', 100, '2026-03-01 11:30+00')",
    );
    assert_eq!(
        history(&mut obs, "b", "2026-03-01 11:00+00"),
        vec![
            "1 main 1 7 2026-03-01 12:30:00+00",
            "2 late 2 10 2026-03-01 12:30:00+00"
        ],
        "late row: version 2 beside version 1; refused row: no new version"
    );
    let refused = text_rows(&mut obs, "SELECT event_id::text, window_end::text, deadline::text, watermark::text FROM crit_refused ORDER BY event_id").unwrap();
    assert_eq!(
        refused,
        vec![vec![
            Some("12".into()),
            Some("2026-03-01 12:00:00+00".into()),
            Some("2026-03-01 14:00:00+00".into()),
            Some("2026-03-01 14:00:00+00".into())
        ]],
        "the row past the deadline is refused with its window and the refusing watermark"
    );

    // 3. REPEATABLE READ ingest whose snapshot predates a committed advance.
    exec(
        &mut a,
        "INSERT INTO t VALUES (20, 'c', 1, '2026-03-01 14:10+00')",
    );
    a.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .unwrap();
    a.query("SELECT count(*) FROM t", &[]).unwrap();
    exec(
        &mut adv,
        "SELECT eventtime.advance_watermark('crit', '2026-03-01 15:30+00')",
    );
    let r = a.batch_execute("INSERT INTO t VALUES (21, 'c', 2, '2026-03-01 14:20+00')");
    let outcome = match r {
        Ok(()) => {
            a.batch_execute("COMMIT").unwrap();
            "committed"
        }
        Err(e) => {
            let code = e.code().map(|c| c.code().to_string());
            a.batch_execute("ROLLBACK").unwrap();
            assert_eq!(code.as_deref(), Some("40001"), "REPEATABLE READ ingest after a concurrent advance failed with something else than 40001: {}", describe(&e));
            "failed with 40001"
        }
    };
    eprintln!("  3: REPEATABLE READ ingest with a snapshot older than the advance {outcome}");
    let h = history(&mut obs, "c", "2026-03-01 14:00+00");
    if outcome == "committed" {
        assert_eq!(
            h,
            vec![
                "1 main 1 1 2026-03-01 15:30:00+00",
                "2 late 2 3 2026-03-01 15:30:00+00"
            ],
            "the REPEATABLE READ row must be late, not open"
        );
    } else {
        assert_eq!(h, vec!["1 main 1 1 2026-03-01 15:30:00+00"]);
        assert_eq!(one_i64(&mut obs, "SELECT count(*) FROM t WHERE id = 21"), 0);
    }

    // 4. The advance holds its locks, uncommitted; an ingest statement starts meanwhile.
    exec(
        &mut a,
        "INSERT INTO t VALUES (30, 'd', 4, '2026-03-01 16:10+00')",
    );
    let mut b = owner(&cluster);
    b.batch_execute("BEGIN").unwrap();
    b.query(
        "SELECT * FROM eventtime.advance_watermark('crit', '2026-03-01 17:00+00')",
        &[],
    )
    .unwrap();
    let mut e = owner(&cluster);
    e.batch_execute("BEGIN").unwrap();
    e.query("SELECT count(*) FROM t", &[]).unwrap();
    let e_pid = backend_pid(&mut e);
    let (e_rx, e_h) = spawn_query(
        e,
        "INSERT INTO t VALUES (31, 'd', 6, '2026-03-01 16:20+00') RETURNING id::text".into(),
    );
    let w = wait_for_lock(&mut obs, e_pid, Duration::from_secs(10));
    assert!(
        w.is_some(),
        "an ingest statement did not wait for an uncommitted advance"
    );
    eprintln!("  4: the ingest waits on {}", w.unwrap());
    b.batch_execute("COMMIT").unwrap();
    e_rx.recv_timeout(Duration::from_secs(30))
        .expect("ingest did not return")
        .unwrap_or_else(|x| panic!("ingest failed: {x}"));
    let mut e = e_h.join().unwrap();
    e.batch_execute("COMMIT").unwrap();
    assert_eq!(
        history(&mut obs, "d", "2026-03-01 16:00+00"),
        vec!["1 main 1 4 2026-03-01 17:00:00+00", "2 late 2 10 2026-03-01 17:00:00+00"],
        "an ingest that waited for an advance must be classified against the watermark it committed (late), not the one before"
    );

    // Nothing lost or counted twice overall.
    exec(
        &mut adv,
        "SELECT eventtime.advance_watermark('crit', 'infinity')",
    );
    let r = obs
        .query_one(
            "SELECT (SELECT count(*) FROM t), (SELECT coalesce(sum(n), 0)::bigint FROM crit_latest), (SELECT count(*) FROM crit_refused), duplicates, state_rows
             FROM eventtime.pipelines WHERE name = 'crit'",
            &[],
        )
        .unwrap();
    let (src, latest, refused, dups, state): (i64, i64, i64, i64, i64) =
        (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
    assert_eq!(
        src,
        latest + refused + dups,
        "accounting: source {src} = latest {latest} + refused {refused} + duplicates {dups}"
    );
    assert_eq!(state, 0);
}

/// SPEC §3 Dedup: "a second row with the same id in the same key and window is ignored (counted
/// as a duplicate): no state change, no new version, no refused row". Also after the window's
/// state is purged.
#[test]
fn redelivery_after_purge_is_a_duplicate() {
    let _ = pg_eventtime_faults::seed("redelivery");
    let cluster = setup("redelivery");
    let mut c = owner(&cluster);
    let row = r#"{"id": 1, "store": "e", "amount": 10, "ts": "2026-03-01 10:15+00"}"#;
    let ingest = |c: &mut Client| -> (i64, i64, i64, i64) {
        let r = c.query_one("SELECT accepted, late, refused, duplicates FROM eventtime.ingest('crit', $1::text::jsonb)", &[&row]).unwrap();
        (r.get(0), r.get(1), r.get(2), r.get(3))
    };
    assert_eq!(ingest(&mut c), (1, 0, 0, 0));
    // Redelivered while the window is open, fired and within grace, then after the purge.
    assert_eq!(ingest(&mut c), (0, 0, 0, 1), "redelivery while open");
    exec(
        &mut c,
        "SELECT eventtime.advance_watermark('crit', '2026-03-01 11:30+00')",
    );
    assert_eq!(ingest(&mut c), (0, 0, 0, 1), "redelivery during the grace");
    exec(
        &mut c,
        "SELECT eventtime.advance_watermark('crit', '2026-03-01 13:00+00')",
    );
    let after_purge = ingest(&mut c);
    let refused = one_i64(&mut c, "SELECT count(*) FROM crit_refused");
    assert!(
        after_purge == (0, 0, 0, 1) && refused == 0,
        "a redelivery of an accepted row after its window was purged must be a duplicate (SPEC §3 Dedup); \
         ingest returned (accepted, late, refused, duplicates) = {after_purge:?} and crit_refused has {refused} row(s)"
    );
}

/// Bulk loads of new windows (1,000 rows or more) first try the ledger without dedup. Two such
/// statements with ids in common, in two transactions: the second waits for the first's ledger
/// entries. When the first commits, the second's try fails on the unique index and the statement
/// that dedups runs: the common ids are duplicates, once. When the first rolls back, the
/// second's try goes through: every one of its rows counts.
#[test]
fn concurrent_bulk_loads_of_new_windows_count_each_id_once() {
    let _ = pg_eventtime_faults::seed("bulk_race");
    let cluster = setup("bulk_race");
    let mut obs = cluster.connect("crit");
    let load = |from: i64, to: i64, day: &str| {
        format!(
            "INSERT INTO t SELECT i, 's' || (i % 5), 1, '{day} 00:00+00'::timestamptz + (i % 4) * interval '1 hour' \
             FROM generate_series({from}, {to}) i"
        )
    };
    let rows_of_day = |obs: &mut Client, day: &str| {
        one_i64(
            obs,
            &format!(
                "SELECT coalesce(sum(_et_n), 0)::bigint FROM _eventtime.p1_state \
                 WHERE window_start >= '{day} 00:00+00' AND window_start < '{day} 00:00+00'::timestamptz + interval '1 day'"
            ),
        )
    };
    for (day, commit_first) in [("2026-03-02", true), ("2026-03-03", false)] {
        let dups_before = one_i64(
            &mut obs,
            "SELECT duplicates FROM eventtime.pipelines WHERE name = 'crit'",
        );
        let mut a = owner(&cluster);
        a.batch_execute(&format!("BEGIN; {}", load(1, 1500, day)))
            .unwrap();
        let mut b = owner(&cluster);
        let b_pid = backend_pid(&mut b);
        let (b_rx, b_h) = spawn_query(b, load(1001, 2500, day));
        let waits = wait_for_lock(&mut obs, b_pid, Duration::from_secs(10));
        assert!(
            waits.is_some(),
            "{day}: the second bulk load did not wait for the first one's ledger entries"
        );
        eprintln!(
            "  bulk loads, {day}: the second waits on {}",
            waits.unwrap()
        );
        a.batch_execute(if commit_first { "COMMIT" } else { "ROLLBACK" })
            .unwrap();
        b_rx.recv_timeout(Duration::from_secs(30))
            .expect("the second bulk load did not return")
            .unwrap_or_else(|e| panic!("{day}: the second bulk load failed: {e}"));
        b_h.join().unwrap();
        let dups = one_i64(
            &mut obs,
            "SELECT duplicates FROM eventtime.pipelines WHERE name = 'crit'",
        ) - dups_before;
        let rows = rows_of_day(&mut obs, day);
        if commit_first {
            assert_eq!(
                (rows, dups),
                (2500, 500),
                "{day}: ids 1001 to 1500 of the second load are duplicates, once"
            );
        } else {
            assert_eq!(
                (rows, dups),
                (1500, 0),
                "{day}: after the first load rolled back, all of the second counts"
            );
        }
    }
    let ledger = one_i64(&mut obs, "SELECT count(*) FROM _eventtime.p1_ids");
    assert_eq!(
        ledger,
        2500 + 1500,
        "one ledger entry per distinct (window, key, id)"
    );
}
