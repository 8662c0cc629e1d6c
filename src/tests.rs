//! In-database tests of internals. Each runs in one transaction that pgrx rolls back, so they
//! prove what one session sees; commits and concurrency are tested out of process.

#[cfg(any(test, feature = "pg_test"))]
use pgrx::prelude::*;

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    fn count(sql: &str) -> i64 {
        Spi::get_one::<i64>(sql).expect("query").expect("a count")
    }

    /// The internal table `what` of pipeline `p`. Sequences are not rolled back with the test
    /// transactions, so the pipeline id differs from test to test.
    fn internal(what: &str) -> String {
        let id = Spi::get_one::<i32>("SELECT id FROM _eventtime.pipeline WHERE name = 'p'")
            .unwrap()
            .unwrap();
        format!("_eventtime.p{id}_{what}")
    }

    fn setup(lateness: &str, event_id: bool) {
        Spi::run("SET LOCAL TimeZone = 'UTC'").unwrap();
        Spi::run("CREATE TABLE t (id int, k text, v numeric, at timestamptz)").unwrap();
        Spi::run(&format!(
            "SELECT eventtime.create_pipeline(name => 'p', source => 't', event_time => 'at', key => ARRAY['k'], \
             event_id => {}, window_size => '1 hour', allowed_lateness => '{lateness}', \
             aggregates => 'count(*) AS n, sum(v) AS total')",
            if event_id { "'id'" } else { "NULL" }
        ))
        .unwrap();
    }

    #[pg_test]
    fn state_is_one_row_per_key_and_window_and_is_purged_at_the_deadline() {
        setup("30 minutes", true);
        Spi::run(
            "INSERT INTO t SELECT g, 'k' || (g % 3), 1, '2026-01-01 00:00+00'::timestamptz + g * interval '1 minute' \
             FROM generate_series(0, 179) g",
        )
        .unwrap();
        // 3 keys × 3 hours.
        assert_eq!(
            count(&format!("SELECT count(*) FROM {}", internal("state"))),
            9
        );
        assert_eq!(
            count(&format!(
                "SELECT sum(_et_n)::bigint FROM {}",
                internal("state")
            )),
            180
        );
        Spi::run("SELECT eventtime.advance_watermark('p', '2026-01-01 01:00+00')").unwrap();
        // The first hour fired but is within its grace: its state stays.
        assert_eq!(
            count(&format!(
                "SELECT count(*) FROM {} WHERE window_end <= '2026-01-01 01:00+00'",
                internal("state")
            )),
            3
        );
        assert_eq!(count("SELECT count(*) FROM p_sealed"), 3);
        Spi::run("SELECT eventtime.advance_watermark('p', '2026-01-01 01:30+00')").unwrap();
        assert_eq!(
            count(&format!("SELECT count(*) FROM {}", internal("state"))),
            6
        );
        Spi::run("SELECT eventtime.advance_watermark('p', 'infinity')").unwrap();
        assert_eq!(
            count(&format!("SELECT count(*) FROM {}", internal("state"))),
            0
        );
        assert_eq!(
            count(&format!(
                "SELECT count(*) FROM {} WHERE version = 1",
                internal("history")
            )),
            9
        );
    }

    #[pg_test]
    fn each_late_statement_writes_exactly_one_version() {
        setup("1 day", false);
        Spi::run("INSERT INTO t VALUES (1, 'a', 1, '2026-01-01 00:10+00')").unwrap();
        Spi::run("SELECT eventtime.advance_watermark('p', '2026-01-01 02:00+00')").unwrap();
        for _ in 0..3 {
            Spi::run("INSERT INTO t VALUES (2, 'a', 1, '2026-01-01 00:20+00'), (3, 'a', 1, '2026-01-01 00:30+00')").unwrap();
        }
        let versions = Spi::get_one::<Vec<i32>>(&format!(
            "SELECT array_agg(version ORDER BY version) FROM {} WHERE k = 'a'",
            internal("history")
        ))
        .unwrap()
        .unwrap();
        assert_eq!(versions, vec![1, 2, 3, 4]);
        assert_eq!(count("SELECT n FROM p_latest WHERE k = 'a'"), 7);
        assert_eq!(count("SELECT n FROM p_sealed WHERE k = 'a'"), 1);
    }

    #[pg_test]
    fn a_late_window_counts_its_versions_with_hot_updates() {
        setup("1 day", true);
        Spi::run("INSERT INTO t VALUES (1, 'a', 1, '2026-01-01 00:10+00')").unwrap();
        Spi::run("SELECT eventtime.advance_watermark('p', '2026-01-01 02:00+00')").unwrap();
        // The first late statement inserts the window's row of late rows; the next ones update
        // its version and accumulators, which no index reads: every update is HOT, and the
        // row keeps one entry in each index of the state.
        for id in 2..6 {
            Spi::run(&format!(
                "INSERT INTO t VALUES ({id}, 'a', 1, '2026-01-01 00:20+00'), ({}, 'b', 1, '2026-01-01 00:30+00')",
                id + 100
            ))
            .unwrap();
        }
        let state = internal("state");
        assert_eq!(
            count(&format!(
                "SELECT pg_stat_get_xact_tuples_updated('{state}'::regclass)"
            )),
            6
        );
        assert_eq!(
            count(&format!(
                "SELECT pg_stat_get_xact_tuples_hot_updated('{state}'::regclass)"
            )),
            6
        );
        assert_eq!(
            count(&format!(
                "SELECT count(*) FROM {state} WHERE _et_late AND version = 4"
            )),
            2
        );
        assert_eq!(count("SELECT max(version) FROM p_history WHERE k = 'a'"), 5);
        assert_eq!(count("SELECT max(version) FROM p_history WHERE k = 'b'"), 4);
    }

    #[pg_test]
    fn event_ids_are_remembered_after_the_window_is_purged() {
        setup("0", true);
        Spi::run("INSERT INTO t VALUES (1, 'a', 1, '2026-01-01 00:10+00')").unwrap();
        Spi::run("SELECT eventtime.advance_watermark('p', '2026-01-02 00:00+00')").unwrap();
        assert_eq!(
            count(&format!("SELECT count(*) FROM {}", internal("state"))),
            0
        );
        // The same event again, long after: a duplicate, not a refusal.
        let dups = count("SELECT duplicates FROM eventtime.ingest('p', '{\"id\": 1, \"k\": \"a\", \"v\": 1, \"at\": \"2026-01-01 00:10+00\"}')");
        assert_eq!(dups, 1);
        assert_eq!(count("SELECT count(*) FROM p_refused"), 0);
        // A new event of the purged window is refused once, then a duplicate.
        let body = "'{\"id\": 2, \"k\": \"a\", \"v\": 1, \"at\": \"2026-01-01 00:20+00\"}'";
        assert_eq!(
            count(&format!(
                "SELECT refused FROM eventtime.ingest('p', {body})"
            )),
            1
        );
        assert_eq!(
            count(&format!(
                "SELECT duplicates FROM eventtime.ingest('p', {body})"
            )),
            1
        );
        assert_eq!(count("SELECT count(*) FROM p_refused"), 1);
        // The published version is untouched.
        assert_eq!(count("SELECT n FROM p_latest"), 1);
    }

    #[pg_test]
    fn null_keys_form_one_group() {
        setup("0", true);
        Spi::run("INSERT INTO t VALUES (1, NULL, 1, '2026-01-01 00:10+00'), (2, NULL, 2, '2026-01-01 00:20+00'), (2, NULL, 2, '2026-01-01 00:20+00')").unwrap();
        Spi::run("SELECT eventtime.advance_watermark('p', '2026-01-01 01:00+00')").unwrap();
        assert_eq!(count("SELECT count(*) FROM p_history"), 1);
        assert_eq!(count("SELECT n FROM p_history WHERE k IS NULL"), 2);
        assert_eq!(
            count("SELECT duplicates FROM eventtime.pipelines WHERE name = 'p'"),
            1
        );
    }

    /// Session keys under a case-insensitive (non-deterministic) collation are one key whatever
    /// the case, as `GROUP BY` on the source column makes them: the pipeline's tables carry the
    /// column's collation, so the key hash and the comparisons agree with it.
    #[pg_test]
    fn session_keys_follow_their_column_collation() {
        Spi::run(
            "CREATE COLLATION session_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false); \
             CREATE TABLE nd (u text COLLATE session_ci, at timestamptz); \
             SELECT eventtime.create_pipeline(name => 'nd', source => 'nd', event_time => 'at', key => ARRAY['u'], \
                                              session_gap => '30 minutes')",
        )
        .unwrap();
        for (u, t) in [("Ann", "10:00"), ("ann", "10:10"), ("Ann", "10:05")] {
            Spi::run(&format!(
                "INSERT INTO nd VALUES ('{u}', '2026-11-30 {t}+00')"
            ))
            .unwrap();
        }
        Spi::run("SELECT eventtime.advance_watermark('nd', 'infinity')").unwrap();
        assert_eq!(count("SELECT count(*) FROM nd_latest"), 1);
        assert_eq!(
            count("SELECT events FROM nd_latest WHERE window_start = '2026-11-30 10:00+00' AND window_end = '2026-11-30 10:40+00'"),
            3
        );
    }

    /// A late version adds the window's late rows to its main firing, which it finds in history
    /// by key: with NULL keys, and with a key type whose equality is not in `pg_catalog`
    /// (`citext`, equal regardless of case); from a single-row statement and from one of many.
    #[pg_test]
    fn late_versions_add_to_the_main_firing_whatever_the_keys() {
        Spi::run("SET LOCAL TimeZone = 'UTC'").unwrap();
        Spi::run("CREATE EXTENSION IF NOT EXISTS citext").unwrap();
        Spi::run("CREATE TABLE t (id int, k citext, r int, v int, at timestamptz)").unwrap();
        Spi::run(
            "SELECT eventtime.create_pipeline(name => 'p', source => 't', event_time => 'at', key => ARRAY['k', 'r'], \
             event_id => 'id', window_size => '1 hour', allowed_lateness => '1 day', \
             aggregates => 'count(*) AS n, sum(v) AS total, min(v) AS lo, avg(v) AS mean')",
        )
        .unwrap();
        Spi::run(
            "INSERT INTO t VALUES (1, 'a', 1, 10, '2026-01-01 00:10+00'), (2, NULL, 1, 5, '2026-01-01 00:20+00'), \
             (3, 'b', NULL, 7, '2026-01-01 00:30+00'), (4, NULL, NULL, 1, '2026-01-01 00:40+00')",
        )
        .unwrap();
        Spi::run("INSERT INTO t VALUES (5, 'a', 1, 20, '2026-01-01 00:11+00')").unwrap();
        Spi::run("SELECT eventtime.advance_watermark('p', '2026-01-01 02:00+00')").unwrap();
        Spi::run("INSERT INTO t VALUES (6, 'A', 1, 3, '2026-01-01 00:50+00')").unwrap();
        Spi::run(
            "INSERT INTO t VALUES (7, NULL, 1, 2, '2026-01-01 00:51+00'), (8, 'B', NULL, 100, '2026-01-01 00:52+00'), \
             (9, NULL, NULL, -4, '2026-01-01 00:53+00'), (10, 'c', 2, 1, '2026-01-01 00:54+00')",
        )
        .unwrap();
        Spi::run("INSERT INTO t VALUES (11, 'a', 1, 1, '2026-01-01 00:55+00'), (12, 'A', 1, 1, '2026-01-01 00:56+00')").unwrap();
        let history = Spi::get_one::<String>(
            "SELECT string_agg(concat_ws(' ', lower(k::text), r, version, kind, n, total, lo, round(mean, 2)), '; ' \
             ORDER BY lower(k::text), r, version) FROM p_history",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            history,
            "a 1 1 main 2 30 10 15.00; a 1 2 late 3 33 3 11.00; a 1 3 late 5 35 1 7.00; \
             b 1 main 1 7 7 7.00; b 2 late 2 107 7 53.50; c 2 1 late 1 1 1 1.00; \
             1 1 main 1 5 5 5.00; 1 2 late 2 7 2 3.50; 1 main 1 1 1 1.00; 2 late 2 -3 -4 -1.50"
        );
        // The state of each fired window (its rows as they came, and its late rows) is purged
        // at its deadline; five windows had fired.
        assert_eq!(
            count("SELECT windows_purged::bigint FROM eventtime.advance_watermark('p', '2026-01-02 01:00+00')"),
            5
        );
        assert_eq!(
            count(&format!("SELECT count(*) FROM {}", internal("state"))),
            0
        );
    }

    /// Calls of the pipeline's PL/pgSQL function in this transaction (`track_functions`).
    fn sql_function_calls() -> i64 {
        count(&format!(
            "SELECT coalesce((SELECT calls FROM pg_stat_xact_user_functions WHERE funcid = '{}_sql()'::regprocedure), 0)",
            internal("ingest")
        ))
    }

    #[pg_test]
    fn without_event_ids_a_row_of_a_closed_window_goes_from_the_front_to_the_engine() {
        setup("30 minutes", false);
        Spi::run("SET LOCAL track_functions = 'pl'").unwrap();
        Spi::run("INSERT INTO t VALUES (NULL, 'a', 1, '2026-01-01 00:10+00')").unwrap();
        Spi::run("INSERT INTO t VALUES (NULL, 'a', 1, '2026-01-01 00:10+00')").unwrap();
        assert_eq!(sql_function_calls(), 0);
        Spi::run("SELECT eventtime.advance_watermark('p', '2026-01-01 01:10+00')").unwrap();
        // Late, then refused: the front's path for one row on time writes nothing, and the
        // engine writes each (no PL/pgSQL call); nothing is counted as a duplicate.
        Spi::run("INSERT INTO t VALUES (NULL, 'a', 2, '2026-01-01 00:20+00')").unwrap();
        Spi::run("SELECT eventtime.advance_watermark('p', '2026-01-01 01:40+00')").unwrap();
        Spi::run("INSERT INTO t VALUES (NULL, 'a', 3, '2026-01-01 00:30+00')").unwrap();
        assert_eq!(sql_function_calls(), 0);
        assert_eq!(count("SELECT count(*) FROM _eventtime.duplicate_counts"), 0);
        let history = Spi::get_one::<String>(
            "SELECT string_agg(concat_ws(' ', version, kind, n, total), '; ' ORDER BY version) FROM p_history",
        )
        .unwrap()
        .unwrap();
        assert_eq!(history, "1 main 2 2; 2 late 3 4");
        assert_eq!(count("SELECT count(*) FROM p_refused"), 1);
    }

    #[pg_test]
    fn the_front_writes_one_on_time_row_and_the_engine_the_other_statements() {
        setup("30 minutes", true);
        Spi::run("SET LOCAL track_functions = 'pl'").unwrap();
        // The trigger's function is the front, in C, the owner's, not SECURITY DEFINER, and not
        // PUBLIC's.
        assert_eq!(
            Spi::get_one::<String>(
                "SELECT concat_ws(' ', l.lanname, p.prosecdef, has_function_privilege('public', p.oid, 'EXECUTE')) \
                 FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid JOIN pg_language l ON l.oid = p.prolang \
                 WHERE t.tgrelid = 't'::regclass"
            )
            .unwrap()
            .unwrap(),
            "c f f"
        );
        let state = internal("state");
        let dups = || {
            count("SELECT coalesce(sum(duplicates), 0)::bigint FROM _eventtime.duplicate_counts")
        };
        // One on-time row, then its duplicate: written by the front alone.
        Spi::run("INSERT INTO t VALUES (1, 'a', 10, '2026-01-01 00:10+00')").unwrap();
        Spi::run("INSERT INTO t VALUES (1, 'a', 99, '2026-01-01 00:20+00')").unwrap();
        assert_eq!(count(&format!("SELECT count(*) FROM {state}")), 1);
        assert_eq!(dups(), 1);
        assert_eq!(sql_function_calls(), 0);
        // eventtime.ingest gets the front's counts: a new row, then the same row again.
        let ingest = || {
            Spi::get_one::<String>(
                "SELECT concat_ws(' ', accepted, late, refused, duplicates) FROM eventtime.ingest('p', \
                 '[{\"id\": 2, \"k\": \"b\", \"v\": 1, \"at\": \"2026-01-01 00:30+00\"}]')",
            )
            .unwrap()
            .unwrap()
        };
        assert_eq!(ingest(), "1 0 0 0");
        assert_eq!(ingest(), "0 0 0 1");
        assert_eq!(sql_function_calls(), 0);
        // A row without an id: the engine, which keeps it with no entry in the ledger. A
        // statement of two rows in open windows: the engine, which finds the second row's id in
        // the ledger.
        Spi::run("INSERT INTO t VALUES (NULL, 'a', 1, '2026-01-01 00:40+00')").unwrap();
        Spi::run("INSERT INTO t VALUES (3, 'a', 2, '2026-01-01 00:50+00'), (1, 'a', 5, '2026-01-01 00:10+00')").unwrap();
        assert_eq!(sql_function_calls(), 0);
        assert_eq!(dups(), 3);
        // After an advance: a late row and a refused row go to the engine, which writes them as
        // the PL/pgSQL function would; an on-time row is still the front's. None calls the
        // PL/pgSQL function.
        Spi::run("SELECT eventtime.advance_watermark('p', '2026-01-01 01:10+00')").unwrap();
        Spi::run("INSERT INTO t VALUES (4, 'a', 4, '2026-01-01 00:55+00')").unwrap();
        Spi::run("SELECT eventtime.advance_watermark('p', '2026-01-01 01:40+00')").unwrap();
        Spi::run("INSERT INTO t VALUES (5, 'a', 5, '2026-01-01 00:56+00')").unwrap();
        Spi::run("INSERT INTO t VALUES (6, 'a', 6, '2026-01-01 02:00+00')").unwrap();
        assert_eq!(sql_function_calls(), 0);
        let history = Spi::get_one::<String>(
            "SELECT string_agg(concat_ws(' ', k, version, kind, n, total), '; ' ORDER BY k, version) FROM p_history",
        )
        .unwrap()
        .unwrap();
        assert_eq!(history, "a 1 main 3 13; a 2 late 4 17; b 1 main 1 1");
        assert_eq!(
            count("SELECT count(*) FROM p_refused WHERE event_id = 5"),
            1
        );
        assert_eq!(
            count(&format!(
                "SELECT count(*) FROM {state} WHERE window_start = '2026-01-01 02:00+00'"
            )),
            1
        );
    }

    /// Local days in Berlin across the change to summer time: the front's windows, row by row,
    /// are the PL/pgSQL function's, from one statement of the same rows.
    #[pg_test]
    fn the_front_computes_calendar_days_as_the_sql_assignment_does() {
        Spi::run("SET LOCAL track_functions = 'pl'").unwrap();
        let rows = [
            "(1, 10, '2026-03-28 22:59:59+00')",
            "(2, 20, '2026-03-28 23:00:00+00')",
            "(3, 30, '2026-03-29 21:59:59+00')",
            "(4, 40, '2026-03-29 22:00:00+00')",
            "(5, 50, '2026-10-24 22:30:00+00')",
            "(6, 60, '2026-10-25 22:59:59+00')",
        ];
        // The backfill's watermark lag (far behind its rows: nothing fires) leaves it without a
        // front: its statement is the PL/pgSQL function's, windows by the SQL assignment.
        for (t, lag) in [("live", "NULL"), ("backfill", "'36500 days'")] {
            Spi::run(&format!("CREATE TABLE {t} (id int, v int, at timestamptz)")).unwrap();
            Spi::run(&format!(
                "SELECT eventtime.create_pipeline(name => '{t}', source => '{t}', event_time => 'at', \
                 event_id => 'id', window_size => '1 day', time_zone => 'Europe/Berlin', \
                 watermark_lag => {lag}, aggregates => 'count(*) AS n, sum(v) AS total')"
            ))
            .unwrap();
        }
        for r in rows {
            Spi::run(&format!("INSERT INTO live VALUES {r}")).unwrap();
        }
        Spi::run(&format!("INSERT INTO backfill VALUES {}", rows.join(", "))).unwrap();
        let windows = |t: &str| {
            let id = Spi::get_one::<i32>(&format!(
                "SELECT id FROM _eventtime.pipeline WHERE name = '{t}'"
            ))
            .unwrap()
            .unwrap();
            let calls = count(&format!(
                "SELECT coalesce((SELECT sum(calls) FROM pg_stat_xact_user_functions \
                 WHERE schemaname = '_eventtime' AND funcname IN ('p{id}_ingest_sql', 'p{id}_ingest')), 0)::bigint"
            ));
            let state = Spi::get_one::<String>(&format!(
                "SELECT string_agg(concat_ws(' ', window_start AT TIME ZONE 'UTC', window_end AT TIME ZONE 'UTC', n, total), '; ' \
                 ORDER BY window_start) FROM (SELECT window_start, window_end, sum(_et_n) AS n, sum(_et_a1) AS total \
                 FROM _eventtime.p{id}_state GROUP BY 1, 2) s"
            ))
            .unwrap()
            .unwrap();
            (calls, state)
        };
        let (live_calls, live) = windows("live");
        let (backfill_calls, backfill) = windows("backfill");
        assert_eq!((live_calls, backfill_calls), (0, 1));
        assert_eq!(live, backfill);
        assert_eq!(
            live,
            "2026-03-27 23:00:00 2026-03-28 23:00:00 1 10; 2026-03-28 23:00:00 2026-03-29 22:00:00 2 50; \
             2026-03-29 22:00:00 2026-03-30 22:00:00 1 40; 2026-10-24 22:00:00 2026-10-25 23:00:00 2 110"
        );
    }

    #[pg_test]
    fn drop_pipeline_leaves_the_source_and_its_rows() {
        setup("0", true);
        Spi::run("INSERT INTO t VALUES (1, 'a', 1, '2026-01-01 00:10+00')").unwrap();
        let _ = internal("state");
        Spi::run("SELECT eventtime.drop_pipeline('p')").unwrap();
        assert_eq!(count("SELECT count(*) FROM t"), 1);
        assert_eq!(count("SELECT count(*) FROM pg_class WHERE relnamespace = '_eventtime'::regnamespace AND relname ~ '^p[0-9]+_'"), 0);
        assert_eq!(
            count("SELECT count(*) FROM pg_trigger WHERE tgrelid = 't'::regclass"),
            0
        );
        Spi::run("INSERT INTO t VALUES (2, 'a', 1, '2026-01-01 00:10+00')").unwrap();
    }

    /// The zones with their rules written out, which the pure tests of calendar windows use,
    /// agree with PostgreSQL's time zone database on every hour of 2026 to 2028, and so do the
    /// daily windows computed with each.
    #[pg_test]
    fn the_written_out_zones_agree_with_postgresql() {
        use crate::core::time::MICROS_PER_DAY;
        use crate::core::window::test_zones::RuleZone;
        use crate::core::window::{local_time, Period, WindowSpec, Zone};
        use crate::pg::zone::PgZone;

        let hour = 3_600_000_000;
        for (name, rules) in [
            ("Europe/Berlin", RuleZone::berlin()),
            ("America/New_York", RuleZone::new_york()),
            ("Asia/Kolkata", RuleZone::kolkata()),
        ] {
            let pg = PgZone::new(name);
            let daily = WindowSpec::Calendar {
                size: Period::Days(1),
                slide: Period::Days(1),
                origin: 0,
                time_zone: name.into(),
            };
            let (from, to) = (local_time(2026, 1, 1, 0, 0), local_time(2029, 1, 1, 0, 0));
            let mut t = from;
            while t < to {
                assert_eq!(pg.local(t), rules.local(t), "{name} at {t}");
                if t % MICROS_PER_DAY == 0 {
                    assert_eq!(
                        daily.windows(t, &pg),
                        daily.windows(t, &rules),
                        "{name} at {t}"
                    );
                }
                t += hour;
            }
        }
    }
}
