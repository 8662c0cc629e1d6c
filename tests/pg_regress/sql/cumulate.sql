-- Cumulate windows (SPEC §7): a period cut by a step, every window starting with the period.
-- Each step fires and is sealed at its own end; a late row makes a new version of every fired
-- step it belongs to and joins the open ones; refusals, dedup, restatements, the lateness
-- account and explain are per (row, window). The expected values below are computed by hand
-- from the rows.
\i include/setup.sql

---------------------------------------------------------------------------------------------
-- A day in steps of 6 hours, fixed, keyed, with event ids and a grace of 12 hours.
---------------------------------------------------------------------------------------------
CREATE TABLE cum_sales (id bigint, store text, amount numeric, at timestamptz);
SELECT eventtime.create_pipeline(name => 'cum_rev', source => 'cum_sales', event_time => 'at', key => ARRAY['store'],
    event_id => 'id', window_size => '1 day', cumulate_step => '6 hours', allowed_lateness => '12 hours',
    aggregates => 'count(*) AS n, sum(amount) AS revenue');
SELECT window_kind, window_size, window_slide, cumulate_step, time_zone FROM eventtime.pipelines WHERE name = 'cum_rev';
-- 01:00 10, 07:00 20, 13:00 30, and 07:00 redelivered: windows [0,6) 10, [0,12) 30, [0,18) and [0,24) 60.
INSERT INTO cum_sales VALUES (1, 'web', 10, '2026-11-01 01:00+00'), (2, 'web', 20, '2026-11-01 07:00+00'),
                         (3, 'web', 30, '2026-11-01 13:00+00'), (2, 'web', 20, '2026-11-01 07:00+00'),
                         (9, 'app', 1, '2026-11-01 23:00+00');
SELECT store, window_start, window_end, n, revenue FROM cum_rev_provisional ORDER BY store, window_end;
SELECT * FROM eventtime.advance_watermark('cum_rev', '2026-11-01 12:00+00');
SELECT store, window_start, window_end, version, kind, n, revenue, sealed FROM cum_rev_latest ORDER BY store, window_end;
-- A late row at 05:00: a new version of [0,6) and [0,12), joins the open [0,18) and [0,24).
SELECT * FROM eventtime.ingest('cum_rev', '{"id": 4, "store": "web", "amount": 5, "at": "2026-11-01 05:00+00"}');
SELECT * FROM eventtime.ingest('cum_rev', '{"id": 4, "store": "web", "amount": 5, "at": "2026-11-01 05:00+00"}');
SELECT store, window_end, version, kind, n, revenue, sealed FROM cum_rev_history ORDER BY store, window_end, version;
-- At 20:00 [0,18) fires and the grace of [0,6) (deadline 18:00) is over: a row at 02:00 is
-- refused for [0,6), late for [0,12) and [0,18), on time for [0,24).
SELECT * FROM eventtime.advance_watermark('cum_rev', '2026-11-01 20:00+00');
SELECT * FROM eventtime.ingest('cum_rev', '{"id": 5, "store": "web", "amount": 7, "at": "2026-11-01 02:00+00"}');
SELECT store, window_end, version, kind, n, revenue FROM cum_rev_latest WHERE store = 'web' ORDER BY window_end;
SELECT event_id, window_start, window_end, deadline, watermark FROM cum_rev_refused;
SELECT window_start, window_end, state, rows_in_state, latest_version, landing, provisional
FROM eventtime.explain('cum_rev', '2026-11-01 02:00+00', 'web');
SELECT store, window_end, version, kind, n, revenue FROM cum_rev_current WHERE store = 'web' ORDER BY window_end;
-- The restatement folds the refused row into [0,6) only.
SELECT * FROM eventtime.restate('cum_rev', '2026-11-01 00:00+00');
SELECT restated_in FROM cum_rev_refused;
SELECT key, window_end, on_time, late, refused FROM eventtime.lateness('cum_rev', '2026-11-01', '2026-11-02')
ORDER BY key::text, window_end;
SELECT * FROM eventtime.advance_watermark('cum_rev', 'infinity');
SELECT store, window_end, version, kind, n, revenue FROM cum_rev_latest ORDER BY store, window_end;
-- Every published value equals GROUP BY over the distinct accepted rows of its window.
WITH rows AS (SELECT DISTINCT ON (id) * FROM cum_sales ORDER BY id),
     windows AS (SELECT DISTINCT store, window_start, window_end FROM cum_rev_history)
SELECT w.store, w.window_end, count(r.id) AS n, sum(r.amount) AS revenue
FROM windows w JOIN rows r ON r.store = w.store AND r.at >= w.window_start AND r.at < w.window_end
GROUP BY 1, 2
EXCEPT
SELECT store, window_end, n, revenue FROM cum_rev_latest;
SELECT state_rows, open_windows, refused, duplicates FROM eventtime.pipelines WHERE name = 'cum_rev';

---------------------------------------------------------------------------------------------
-- A Berlin day by the hour: 23 windows on 29 March 2026, 24 on 25 October (one step of two
-- hours); a Berlin month by the day.
---------------------------------------------------------------------------------------------
CREATE TABLE cum_till (amount numeric, paid_at timestamptz);
SELECT eventtime.create_pipeline(name => 'cum_hours', source => 'cum_till', event_time => 'paid_at',
    window_size => '1 day', cumulate_step => '1 hour', time_zone => 'Europe/Berlin', aggregates => 'sum(amount) AS takings');
SELECT eventtime.create_pipeline(name => 'cum_days', source => 'cum_till', event_time => 'paid_at',
    window_size => '1 month', cumulate_step => '1 day', time_zone => 'Europe/Berlin', aggregates => 'sum(amount) AS takings');
SELECT count(*), min(window_start), min(window_end), max(window_end), max(window_end - window_start)
FROM eventtime.explain('cum_hours', '2026-03-28 23:30+00');
SELECT count(*), min(window_start), max(window_end), max(window_end - window_start)
FROM eventtime.explain('cum_hours', '2026-10-24 22:30+00');
SET TimeZone = 'Europe/Berlin';
SELECT count(*), min(window_start), min(window_end), max(window_end)
FROM eventtime.explain('cum_days', '2026-02-10 13:00+01');
SET TimeZone = 'UTC';
-- Whole weeks in UTC start on a Monday, as tumbling weeks do: 2026-11-05 is a Thursday, so its
-- week is [Mon 2 Nov, +1 day) ... [Mon 2 Nov, +7 days) and it is in the steps ending 6 ... 9 Nov.
SELECT eventtime.create_pipeline(name => 'cum_week', source => 'cum_till', event_time => 'paid_at',
    window_size => '7 days', cumulate_step => '1 day', aggregates => 'sum(amount) AS takings');
SELECT time_zone FROM eventtime.pipelines WHERE name = 'cum_week';
SELECT count(*), min(window_start), min(window_end), max(window_end)
FROM eventtime.explain('cum_week', '2026-11-05 12:00+00');
SELECT eventtime.drop_pipeline('cum_week');
INSERT INTO cum_till VALUES (10, '2026-10-25 00:30+02'), (20, '2026-10-25 02:30+02'), (30, '2026-10-25 02:30+01'), (40, '2026-10-25 23:30+01');
SELECT * FROM eventtime.advance_watermark('cum_hours', '2026-10-25 03:00+01');
SELECT window_start, window_end, takings FROM cum_hours_latest ORDER BY window_end;
SELECT count(*) AS open_steps, min(takings), max(takings) FROM cum_hours_provisional;

---------------------------------------------------------------------------------------------
-- Errors: 22023 with a hint.
---------------------------------------------------------------------------------------------
CREATE TABLE err_cumulate (at timestamptz);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('c_err', 'err_cumulate', 'at', '1 day', cumulate_step => '1 day') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('c_err', 'err_cumulate', 'at', '1 hour', cumulate_step => '2 hours') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('c_err', 'err_cumulate', 'at', '1 hour', cumulate_step => '0') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('c_err', 'err_cumulate', 'at', '48 hours', cumulate_step => '1 day') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('c_err', 'err_cumulate', 'at', '1 month', cumulate_step => '1 minute') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('c_err', 'err_cumulate', 'at', '1 day', cumulate_step => '1 hour', window_slide => '1 hour') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('c_err', 'err_cumulate', 'at', session_gap => '1 hour', cumulate_step => '1 minute') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('c_err', 'err_cumulate', 'at', '1 day', cumulate_step => '1 hour', time_zone => 'Mars/Olympus_Mons') $$);
