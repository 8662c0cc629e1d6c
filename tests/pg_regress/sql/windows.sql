-- Window kinds (SPEC §7): calendar periods in a time zone and hopping windows, and their errors.
-- Bounds are shown in UTC and, where it matters, in the pipeline's own zone with their length.
\i include/setup.sql

---------------------------------------------------------------------------------------------
-- A Berlin shop's days: local midnight to local midnight, 23 hours on 29 March 2026 and 25 on
-- 25 October. The session's TimeZone plays no part: the pipeline is created, fed and read under
-- three different settings.
---------------------------------------------------------------------------------------------
CREATE TABLE shop (order_id bigint, store text, amount numeric, ordered_at timestamptz);
SET TimeZone = 'America/Los_Angeles';
SELECT eventtime.create_pipeline(name => 'shop_daily', source => 'shop', event_time => 'ordered_at',
    key => ARRAY['store'], event_id => 'order_id', window_size => '1 day', allowed_lateness => '6 hours',
    aggregates => 'count(*) AS orders, sum(amount) AS revenue', time_zone => 'Europe/Berlin');
SET TimeZone = 'Asia/Tokyo';
INSERT INTO shop VALUES
    (1, 'berlin', 10, '2026-03-28 23:59:59 Europe/Berlin'),   -- Saturday, the last second
    (2, 'berlin', 20, '2026-03-29 00:00 Europe/Berlin'),      -- Sunday, the first instant
    (3, 'berlin', 30, '2026-03-29 01:59 Europe/Berlin'),      -- before the clocks jump
    (4, 'berlin', 40, '2026-03-29 03:00 Europe/Berlin'),      -- after: one minute later
    (5, 'berlin', 50, '2026-03-29 23:59:59 Europe/Berlin'),
    (6, 'berlin', 60, '2026-03-30 00:00 Europe/Berlin'),
    (7, 'berlin', 70, '2026-10-25 02:30+02'),                 -- the first 02:30 (summer time)
    (8, 'berlin', 80, '2026-10-25 02:30+01'),                 -- the second 02:30 (winter time)
    (9, 'berlin', 90, '2026-10-25 23:59:59 Europe/Berlin');
SET TimeZone = 'UTC';
SELECT * FROM eventtime.advance_watermark('shop_daily', '2026-10-26 00:00 Europe/Berlin');
SELECT window_start AT TIME ZONE 'Europe/Berlin' AS local_start, window_end - window_start AS length,
       window_start, window_end, orders, revenue
FROM shop_daily_sealed ORDER BY window_start;
-- The window a row would join, from explain(), agrees.
SELECT window_start, window_end, state FROM eventtime.explain('shop_daily', '2026-03-29 12:00+00', 'berlin');
SELECT window_kind, window_size, window_slide, time_zone, window_origin
FROM eventtime.pipelines WHERE name = 'shop_daily';

---------------------------------------------------------------------------------------------
-- ISO weeks from Monday 00:00 local, months, quarters, and a fiscal year from 1 April.
---------------------------------------------------------------------------------------------
CREATE TABLE ledger (entry_id bigint, amount numeric, booked_at timestamptz);
SELECT eventtime.create_pipeline(name => 'ledger_weekly', source => 'ledger', event_time => 'booked_at',
    window_size => '1 week', aggregates => 'count(*) AS n, sum(amount) AS total', time_zone => 'Europe/Berlin');
SELECT eventtime.create_pipeline(name => 'ledger_monthly', source => 'ledger', event_time => 'booked_at',
    window_size => '1 month', aggregates => 'count(*) AS n, sum(amount) AS total', time_zone => 'Europe/Berlin');
SELECT eventtime.create_pipeline(name => 'ledger_quarterly', source => 'ledger', event_time => 'booked_at',
    window_size => '3 months', aggregates => 'count(*) AS n, sum(amount) AS total', time_zone => 'Europe/Berlin');
SELECT eventtime.create_pipeline(name => 'ledger_fiscal', source => 'ledger', event_time => 'booked_at',
    window_size => '1 year', window_origin => '2000-04-01 00:00 Europe/Berlin',
    aggregates => 'count(*) AS n, sum(amount) AS total', time_zone => 'Europe/Berlin');
INSERT INTO ledger VALUES
    (1, 100, '2026-01-31 23:59:59.999999 Europe/Berlin'),
    (2, 200, '2026-02-01 00:00 Europe/Berlin'),
    (3, 300, '2026-03-29 12:00 Europe/Berlin'),   -- a Sunday: the week of Monday 23 March
    (4, 400, '2026-03-30 00:00 Europe/Berlin'),   -- Monday: a new week
    (5, 500, '2026-03-31 23:30 Europe/Berlin'),   -- the fiscal year's last day
    (6, 600, '2026-04-01 00:30 Europe/Berlin');   -- the next fiscal year, second quarter
SELECT * FROM eventtime.advance_watermark('ledger_weekly', 'infinity');
SELECT * FROM eventtime.advance_watermark('ledger_monthly', 'infinity');
SELECT * FROM eventtime.advance_watermark('ledger_quarterly', 'infinity');
SELECT * FROM eventtime.advance_watermark('ledger_fiscal', 'infinity');
SELECT 'week' AS period, to_char(window_start AT TIME ZONE 'Europe/Berlin', 'YYYY-MM-DD HH24:MI Dy') AS local_start,
       window_end - window_start AS length, n, total FROM ledger_weekly_sealed
UNION ALL
SELECT 'month', to_char(window_start AT TIME ZONE 'Europe/Berlin', 'YYYY-MM-DD HH24:MI Dy'),
       window_end - window_start, n, total FROM ledger_monthly_sealed
UNION ALL
SELECT 'quarter', to_char(window_start AT TIME ZONE 'Europe/Berlin', 'YYYY-MM-DD HH24:MI Dy'),
       window_end - window_start, n, total FROM ledger_quarterly_sealed
UNION ALL
SELECT 'fiscal year', to_char(window_start AT TIME ZONE 'Europe/Berlin', 'YYYY-MM-DD HH24:MI Dy'),
       window_end - window_start, n, total FROM ledger_fiscal_sealed
ORDER BY 1, 2;

---------------------------------------------------------------------------------------------
-- Half-hour zones, New York's clock changes, a leap day, and times before the origin, through
-- explain() (which computes the windows the same way the ingest statements do).
---------------------------------------------------------------------------------------------
CREATE TABLE clocks (ts timestamptz);
SELECT eventtime.create_pipeline('kolkata_daily', 'clocks', 'ts', '1 day', time_zone => 'Asia/Kolkata');
SELECT eventtime.create_pipeline('ny_daily', 'clocks', 'ts', '1 day', time_zone => 'America/New_York');
SELECT eventtime.create_pipeline('utc_monthly', 'clocks', 'ts', '1 month');
SELECT p.name, t.ts, e.window_start, e.window_end, e.window_end - e.window_start AS length
FROM (VALUES ('kolkata_daily', timestamptz '2026-06-01 00:00+00'),
             ('ny_daily', '2026-03-08 12:00+00'),
             ('ny_daily', '2026-11-01 12:00+00'),
             ('ny_daily', '2026-11-02 04:30+00'),
             ('utc_monthly', '2028-02-29 12:00+00'),
             ('utc_monthly', '1969-12-31 23:59:59+00'),
             ('utc_monthly', '1815-06-18 12:00+00')) AS t(name, ts)
JOIN eventtime.pipelines p USING (name)
CROSS JOIN LATERAL eventtime.explain(p.name, t.ts) e
ORDER BY 1, 2;
-- The same instants, inserted: the windows that fire are those explain() named (the leap day's
-- month is not due yet).
INSERT INTO clocks VALUES ('2026-06-01 00:00+00'), ('2026-03-08 12:00+00'), ('2028-02-29 12:00+00');
SELECT * FROM eventtime.advance_watermark('kolkata_daily', '2026-07-01 00:00+00');
SELECT * FROM eventtime.advance_watermark('ny_daily', '2026-07-01 00:00+00');
SELECT * FROM eventtime.advance_watermark('utc_monthly', '2026-07-01 00:00+00');
SELECT 'kolkata_daily' AS name, window_start, window_end, events FROM kolkata_daily_sealed
UNION ALL SELECT 'ny_daily', window_start, window_end, events FROM ny_daily_sealed
UNION ALL SELECT 'utc_monthly', window_start, window_end, events FROM utc_monthly_sealed
ORDER BY 1, 2;

---------------------------------------------------------------------------------------------
-- Hopping windows: 3 hours every hour. One row is refused for its oldest window, late for the
-- next and open for the newest; each (row, window) pair is counted, and the refusal is a row of
-- its own.
---------------------------------------------------------------------------------------------
CREATE TABLE clicks (click_id bigint, page text, ms integer, at timestamptz);
SELECT eventtime.create_pipeline(name => 'clicks_3h', source => 'clicks', event_time => 'at',
    key => ARRAY['page'], event_id => 'click_id', window_size => '3 hours', window_slide => '1 hour',
    allowed_lateness => '1 hour', aggregates => 'count(*) AS clicks, max(ms) AS slowest');
SELECT * FROM eventtime.ingest('clicks_3h', '{"click_id": 1, "page": "/", "ms": 10, "at": "2026-10-29 05:30+00"}');
SELECT window_start, window_end, state, rows_in_state FROM eventtime.explain('clicks_3h', '2026-10-29 05:30+00', '/');
SELECT * FROM eventtime.advance_watermark('clicks_3h', '2026-10-29 07:30+00');
SELECT page, window_start, window_end, version, kind, clicks, slowest FROM clicks_3h_history ORDER BY window_start, version;
-- Click 2 at 05:45: [03:00, 06:00) is past its deadline 07:00, [04:00, 07:00) fired and is in
-- its grace until 08:00, [05:00, 08:00) is open. Click 1 again is a duplicate in all three.
SELECT window_start, window_end, state, landing FROM eventtime.explain('clicks_3h', '2026-10-29 05:45+00', '/');
SELECT * FROM eventtime.ingest('clicks_3h', '[{"click_id": 2, "page": "/", "ms": 99, "at": "2026-10-29 05:45+00"},
                                              {"click_id": 1, "page": "/", "ms": 10, "at": "2026-10-29 05:30+00"}]');
SELECT page, event_id, event_time, window_start, window_end, deadline, watermark, "row"->>'ms' AS ms FROM clicks_3h_refused;
SELECT page, window_start, window_end, version, kind, clicks, slowest, sealed FROM clicks_3h_history ORDER BY window_start, version;
-- The redelivered refused click is a duplicate of its refusal, and a duplicate in the others.
SELECT * FROM eventtime.ingest('clicks_3h', '{"click_id": 2, "page": "/", "ms": 99, "at": "2026-10-29 05:45+00"}');
SELECT * FROM eventtime.advance_watermark('clicks_3h', 'infinity');
SELECT page, window_start, window_end, version, kind, clicks, slowest FROM clicks_3h_latest ORDER BY window_start;
SELECT name, window_kind, window_size, window_slide, time_zone, refused, duplicates FROM eventtime.pipelines WHERE name = 'clicks_3h';

---------------------------------------------------------------------------------------------
-- Hopping calendar windows: seven local days, every day, across the spring clock change.
---------------------------------------------------------------------------------------------
CREATE TABLE visits (at timestamptz);
SELECT eventtime.create_pipeline('visits_7d', 'visits', 'at', '7 days', window_slide => '1 day', time_zone => 'Europe/Berlin');
SELECT * FROM eventtime.ingest('visits_7d', '{"at": "2026-03-29 12:00+00"}');
SELECT window_start AT TIME ZONE 'Europe/Berlin' AS local_start, window_end AT TIME ZONE 'Europe/Berlin' AS local_end,
       window_end - window_start AS length
FROM eventtime.explain('visits_7d', '2026-03-29 12:00+00');
SELECT open_windows, state_rows FROM eventtime.pipelines WHERE name = 'visits_7d';

---------------------------------------------------------------------------------------------
-- Errors: 22023 with a hint.
---------------------------------------------------------------------------------------------
CREATE TABLE err_windows (at timestamptz);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('w_err', 'err_windows', 'at', '1 hour', window_slide => '0') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('w_err', 'err_windows', 'at', '1 hour', window_slide => '-10 minutes') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('w_err', 'err_windows', 'at', '1 hour', window_slide => '1 hour') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('w_err', 'err_windows', 'at', '1 hour', window_slide => '2 hours') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('w_err', 'err_windows', 'at', '1 day', window_slide => '1 hour') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('w_err', 'err_windows', 'at', '3 months', window_slide => '7 days') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('w_err', 'err_windows', 'at', '1 day', time_zone => 'Mars/Olympus_Mons') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('w_err', 'err_windows', 'at', '1 hour', time_zone => 'Europe/Berlin') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('w_err', 'err_windows', 'at', '1 mon 1 day') $$);
-- Abbreviations are not zones (their meaning depends on the session's timezone_abbreviations).
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('w_err', 'err_windows', 'at', '1 day', time_zone => 'PDT') $$);
-- At most 1,000 windows per row.
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('w_err', 'err_windows', 'at', '24 hours', window_slide => '1 minute') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('w_err', 'err_windows', 'at', '3000 days', window_slide => '1 day') $$);
-- The assignment functions refuse such specs too: no windows, whoever calls them.
SELECT count(*) AS windows FROM _eventtime.hop('2026-10-29', 86400000000, 1, 0);
SELECT count(*) AS windows FROM _eventtime.calendar('2026-10-29', 2000000000, 1, false, 0, 'UTC');
SELECT eventtime.create_pipeline('w_err', 'err_windows', 'at', '1 hour', window_slide => '1 hour');
-- Zone names are matched as the time zone database spells them, whatever the case given.
SELECT eventtime.create_pipeline('w_case', 'err_windows', 'at', '1 day', time_zone => 'europe/BERLIN');
SELECT time_zone FROM eventtime.pipelines WHERE name = 'w_case';
SELECT window_start, window_end FROM eventtime.explain('w_case', '2026-03-29 12:00+00');
SELECT count(*) AS pipelines_named_w_err FROM eventtime.pipelines WHERE name = 'w_err';
