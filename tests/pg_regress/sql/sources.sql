-- Watermarks from many sources, idle sources, watermark_lag, eventtime.sources and
-- eventtime.explain.
\i include/setup.sql
CREATE SCHEMA src;
SET search_path = src, public;

-- Daily totals per store, a day of grace, fed by three Kafka partitions.
CREATE TABLE orders (order_id bigint, store text, amount numeric, ordered_at timestamptz);
SELECT eventtime.create_pipeline(name => 'src_daily', source => 'orders', event_time => 'ordered_at',
    key => ARRAY['store'], event_id => 'order_id', window_size => '1 day', allowed_lateness => '24 hours',
    aggregates => 'count(*) AS orders, sum(amount) AS revenue');
CREATE VIEW clocks AS
SELECT source, watermark, idle, idle_reason, holding_back FROM eventtime.sources WHERE pipeline = 'src_daily';
CREATE VIEW daily AS
SELECT store, window_start, version, kind, orders, revenue, sealed, watermark FROM src_daily_history;

---------------------------------------------------------------------------------------------
-- Per-source watermarks: the first advance of a source registers it; the pipeline watermark is
-- the minimum over the sources, so the slowest partition holds every store back.
---------------------------------------------------------------------------------------------
INSERT INTO orders VALUES (1, 'north', 100, '2026-10-27 09:00+00'), (2, 'south', 200, '2026-10-27 15:00+00'),
                          (3, 'north', 300, '2026-10-28 10:00+00');
-- A source that has not advanced yet is unknown to the pipeline: kafka-0 alone moves the
-- pipeline watermark and fires the 27th. (Register every source early to avoid that.)
SELECT * FROM eventtime.advance_watermark('src_daily', '2026-10-28 06:00+00', source => 'kafka-0');
-- kafka-1 registers behind it: the pipeline watermark does not go back.
SELECT * FROM eventtime.advance_watermark('src_daily', '2026-10-28 02:00+00', source => 'kafka-1');
SELECT * FROM eventtime.advance_watermark('src_daily', '2026-10-29 01:00+00', source => 'kafka-2');
SELECT * FROM clocks ORDER BY source;
SELECT * FROM daily ORDER BY store, window_start, version;
-- kafka-0 moves on: kafka-1 still holds the pipeline at 2026-10-28 02:00.
SELECT * FROM eventtime.advance_watermark('src_daily', '2026-10-29 05:00+00', source => 'kafka-0');
-- A source cannot go back: a NOTICE, nothing changes.
SELECT * FROM eventtime.advance_watermark('src_daily', '2026-10-28 00:00+00', source => 'kafka-0');
SELECT * FROM eventtime.advance_watermark('src_daily', '2026-10-29 05:00+00', source => 'kafka-0');
-- kafka-1 catches up: the minimum is now kafka-2's, the 28th fires and the 27th is purged.
SELECT * FROM eventtime.advance_watermark('src_daily', '2026-10-29 04:00+00', source => 'kafka-1');
SELECT * FROM clocks ORDER BY source;
SELECT * FROM daily ORDER BY store, window_start, version;

---------------------------------------------------------------------------------------------
-- "Why hasn't the 29th closed?" eventtime.explain answers in one query.
---------------------------------------------------------------------------------------------
INSERT INTO orders VALUES (4, 'north', 40, '2026-10-29 18:02+00');
SELECT window_start, window_end, deadline, state, rows_in_state, latest_version, watermark, landing, held_back_by
FROM eventtime.explain('src_daily', '2026-10-29 18:02+00', 'north');
-- (The processing time of the last advance is masked here.)
SELECT regexp_replace(explanation, 'last advanced at [^)]*', 'last advanced at ...') AS explanation
FROM eventtime.explain('src_daily', '2026-10-29 18:02+00', 'north');
-- A fired window, with its latest version; a store with no rows in that window.
SELECT state, rows_in_state, latest_version, landing, explanation
FROM eventtime.explain('src_daily', '2026-10-28 23:59+00', 'north');
SELECT state, rows_in_state, latest_version, landing, explanation
FROM eventtime.explain('src_daily', '2026-10-28 23:59+00', 'east');

---------------------------------------------------------------------------------------------
-- Idle sources. mark_idle takes kafka-1 out of the minimum and fires what the others allow.
---------------------------------------------------------------------------------------------
SELECT * FROM eventtime.advance_watermark('src_daily', '2026-10-30 06:00+00', source => 'kafka-0');
SELECT * FROM eventtime.advance_watermark('src_daily', '2026-10-30 03:00+00', source => 'kafka-2');
SELECT * FROM eventtime.mark_idle('src_daily', 'kafka-1');
SELECT * FROM clocks ORDER BY source;
SELECT * FROM daily WHERE window_start = '2026-10-29' ORDER BY store, version;
-- Marking an idle source idle again changes nothing.
SELECT * FROM eventtime.mark_idle('src_daily', 'kafka-1');
-- kafka-1 returns behind the pipeline watermark: the pipeline watermark does not go back, and
-- waits for kafka-1 before it moves again.
SELECT * FROM eventtime.advance_watermark('src_daily', '2026-10-29 12:00+00', source => 'kafka-1');
SELECT * FROM clocks ORDER BY source;
-- Its rows are classified against the pipeline watermark like any other: a row of the 29th is
-- late (a new version), whatever kafka-1's own watermark says.
SELECT * FROM eventtime.ingest('src_daily', '{"order_id": 5, "store": "north", "amount": 5, "ordered_at": "2026-10-29 13:00+00"}');
SELECT * FROM daily WHERE window_start = '2026-10-29' ORDER BY store, version;
SELECT state, latest_version, watermark, landing, held_back_by
FROM eventtime.explain('src_daily', '2026-10-29 13:00+00', 'north');
-- Every source idle: the pipeline watermark stays where it is.
SELECT * FROM eventtime.mark_idle('src_daily', 'kafka-0');
SELECT * FROM eventtime.mark_idle('src_daily', 'kafka-1');
SELECT * FROM eventtime.mark_idle('src_daily', 'kafka-2');
SELECT * FROM clocks ORDER BY source;
SELECT held_back_by, explanation FROM eventtime.explain('src_daily', '2026-10-30 09:00+00', 'north');

-- The two-argument form is the source "default", one source among the others.
SELECT * FROM eventtime.advance_watermark('src_daily', '2026-10-31 00:00+00');
SELECT * FROM clocks ORDER BY source;

---------------------------------------------------------------------------------------------
-- idle_timeout: a source that has not advanced for that long (processing time, the
-- transaction's now()) is left out until it advances again.
---------------------------------------------------------------------------------------------
CREATE TABLE ticks (id bigint, at timestamptz);
SELECT eventtime.create_pipeline(name => 'src_idle', source => 'ticks', event_time => 'at',
    window_size => '1 hour', idle_timeout => '1 second');
INSERT INTO ticks VALUES (1, '2026-10-29 09:30+00'), (2, '2026-10-29 10:30+00');
BEGIN;
SELECT * FROM eventtime.advance_watermark('src_idle', '2026-10-29 10:00+00', source => 'slow');
SELECT * FROM eventtime.advance_watermark('src_idle', '2026-10-29 12:00+00', source => 'fast');
SELECT source, watermark, idle, idle_reason, holding_back FROM eventtime.sources WHERE pipeline = 'src_idle' ORDER BY source;
COMMIT;
SELECT pg_sleep(1.5);
-- Both sources are now past the timeout; the one that advances counts again, the other not, so
-- the 10:00 window fires (the 09:00 one fired at 10:00, when slow held the pipeline).
SELECT source, idle, idle_reason, holding_back FROM eventtime.sources WHERE pipeline = 'src_idle' ORDER BY source;
BEGIN;
SELECT * FROM eventtime.advance_watermark('src_idle', '2026-10-29 12:30+00', source => 'fast');
SELECT source, idle, idle_reason, holding_back FROM eventtime.sources WHERE pipeline = 'src_idle' ORDER BY source;
COMMIT;
SELECT window_start, version, kind, events, watermark FROM src_idle_history ORDER BY window_start, version;

---------------------------------------------------------------------------------------------
-- watermark_lag: each ingest statement advances the source "watermark_lag" to the greatest
-- event time it saw minus the lag, and fires what is due in the same statement. The rows of the
-- statement are classified against the watermark in force when it started.
---------------------------------------------------------------------------------------------
CREATE TABLE clicks (id bigint, page text, at timestamptz);
SELECT eventtime.create_pipeline(name => 'src_lag', source => 'clicks', event_time => 'at', key => ARRAY['page'],
    event_id => 'id', window_size => '1 hour', allowed_lateness => '30 minutes', watermark_lag => '10 minutes');
SELECT watermark_lag, idle_timeout, watermark FROM eventtime.pipelines WHERE name = 'src_lag';
-- 11:15 - 10 min = 11:05: the 10:00 window fires in this statement, with the 10:05 row in it.
SELECT * FROM eventtime.ingest('src_lag', '[{"id": 1, "page": "home", "at": "2026-10-29 10:05+00"},
                                            {"id": 2, "page": "home", "at": "2026-10-29 11:15+00"}]');
SELECT source, watermark, holding_back FROM eventtime.sources WHERE pipeline = 'src_lag';
SELECT page, window_start, version, kind, events, watermark FROM src_lag_history ORDER BY page, window_start, version;
-- A late row (10:50, under watermark 11:05) and a row that moves the watermark to 11:35, past
-- the 10:00 window's deadline (11:30): the late row was classified against 11:05, so it makes
-- version 2; then the window is purged.
INSERT INTO clicks VALUES (3, 'home', '2026-10-29 10:50+00'), (4, 'home', '2026-10-29 11:45+00');
SELECT page, window_start, version, kind, events, watermark FROM src_lag_history ORDER BY page, window_start, version;
SELECT watermark, state_rows FROM eventtime.pipelines WHERE name = 'src_lag';
-- Now a row for 10:00 is refused, and the watermark stays (10:55 - 10 min is behind it).
SELECT * FROM eventtime.ingest('src_lag', '{"id": 5, "page": "home", "at": "2026-10-29 10:55+00"}');
SELECT page, event_id, event_time, window_end, deadline, watermark FROM src_lag_refused;
-- A redelivery of the refused row is a duplicate, as always.
SELECT * FROM eventtime.ingest('src_lag', '{"id": 5, "page": "home", "at": "2026-10-29 10:55+00"}');
-- Manual sources count too: a second source holds the pipeline back.
SELECT * FROM eventtime.advance_watermark('src_lag', '2026-10-29 11:40+00', source => 'batch');
INSERT INTO clicks VALUES (6, 'home', '2026-10-29 13:30+00');
SELECT source, watermark, holding_back FROM eventtime.sources WHERE pipeline = 'src_lag' ORDER BY source;
SELECT watermark FROM eventtime.pipelines WHERE name = 'src_lag';
-- The advance inside the ingest statement needs READ COMMITTED, as advance_watermark does.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.try($$ INSERT INTO clicks VALUES (7, 'home', '2026-10-29 13:40+00') $$);
ROLLBACK;
SELECT count(*) AS clicks_rows FROM clicks;

---------------------------------------------------------------------------------------------
-- explain: key values are given as text and cast to the key columns' types; NULL keys are a
-- group of their own; pipelines without keys take no key values.
---------------------------------------------------------------------------------------------
CREATE TABLE readings (sensor integer, site text, at timestamptz, v numeric);
SELECT eventtime.create_pipeline(name => 'src_multi', source => 'readings', event_time => 'at',
    key => ARRAY['sensor', 'site'], window_size => '15 minutes');
INSERT INTO readings VALUES (7, 'roof', '2026-10-29 10:01+00', 1), (7, NULL, '2026-10-29 10:02+00', 2);
SELECT window_start, window_end, state, rows_in_state, landing, held_back_by
FROM eventtime.explain('src_multi', '2026-10-29 10:05+00', '7', 'roof');
SELECT rows_in_state FROM eventtime.explain('src_multi', '2026-10-29 10:05+00', '7', NULL);
SELECT rows_in_state FROM eventtime.explain('src_multi', '2026-10-29 10:05+00', '8', 'roof');
SELECT window_start, state, explanation FROM eventtime.explain('src_idle', '2026-10-29 09:59+00');

---------------------------------------------------------------------------------------------
-- Source names are values, never SQL: any name works, quoted or not.
---------------------------------------------------------------------------------------------
SELECT * FROM eventtime.advance_watermark('src_idle', '2026-10-29 13:00+00', source => 'Kafka "p-3"; DROP TABLE ticks; --');
SELECT * FROM eventtime.mark_idle('src_idle', 'Kafka "p-3"; DROP TABLE ticks; --');
SELECT source, idle, idle_reason FROM eventtime.sources WHERE pipeline = 'src_idle' ORDER BY source;
SELECT count(*) AS ticks_rows FROM ticks;

---------------------------------------------------------------------------------------------
-- Errors.
---------------------------------------------------------------------------------------------
-- Unknown pipeline: 42704.
SELECT pg_temp.try($$ SELECT * FROM eventtime.advance_watermark('nope', '2026-10-30 00:00+00', source => 'kafka-0') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.mark_idle('nope', 'kafka-0') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.explain('nope', '2026-10-30 00:00+00') $$);
-- Unknown source: 42704 (mark_idle cannot register a source).
SELECT pg_temp.try($$ SELECT * FROM eventtime.mark_idle('src_daily', 'kafka-9') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.mark_idle('src_daily', 'KAFKA-0') $$);
-- NULL or empty source: 22004, 22023.
SELECT pg_temp.try($$ SELECT * FROM eventtime.advance_watermark('src_daily', '2026-11-01 00:00+00', source => NULL) $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.mark_idle('src_daily', NULL) $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.advance_watermark('src_daily', '2026-11-01 00:00+00', source => '') $$);
-- Negative or month-based watermark_lag; zero, negative or month-based idle_timeout: 22023.
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline(name => 'src_bad', source => 'ticks', event_time => 'at',
    window_size => '1 hour', watermark_lag => '-1 minute') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline(name => 'src_bad', source => 'ticks', event_time => 'at',
    window_size => '1 hour', watermark_lag => '1 month') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline(name => 'src_bad', source => 'ticks', event_time => 'at',
    window_size => '1 hour', idle_timeout => '-5 minutes') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline(name => 'src_bad', source => 'ticks', event_time => 'at',
    window_size => '1 hour', idle_timeout => '0') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline(name => 'src_bad', source => 'ticks', event_time => 'at',
    window_size => '1 hour', idle_timeout => '1 year') $$);
-- A zero lag is allowed: the watermark follows the greatest event time.
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline(name => 'src_zero_lag', source => 'ticks', event_time => 'at',
    window_size => '1 hour', watermark_lag => '0') $$);
-- explain: NULL arguments (22004), wrong number of key values, infinite event time (22023).
SELECT pg_temp.try($$ SELECT * FROM eventtime.explain('src_daily', NULL, 'north') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.explain(NULL, '2026-10-30 00:00+00', 'north') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.explain('src_daily', '2026-10-30 00:00+00') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.explain('src_daily', '2026-10-30 00:00+00', 'north', 'extra') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.explain('src_idle', '2026-10-30 00:00+00', 'north') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.explain('src_daily', 'infinity', 'north') $$);
-- A key value that is not of the key column's type: PostgreSQL's own error.
SELECT pg_temp.try($$ SELECT * FROM eventtime.explain('src_multi', '2026-10-29 10:05+00', 'seven', 'roof') $$);
-- As psql shows them:
SELECT * FROM eventtime.mark_idle('src_daily', 'kafka-9');
SELECT * FROM eventtime.advance_watermark('src_daily', '2026-11-01 00:00+00', source => NULL);

---------------------------------------------------------------------------------------------
-- drop_pipeline takes the sources with it.
---------------------------------------------------------------------------------------------
SELECT eventtime.drop_pipeline('src_zero_lag');
SELECT eventtime.drop_pipeline('src_idle');
SELECT count(*) AS sources_left FROM _eventtime.source s
WHERE NOT EXISTS (SELECT 1 FROM _eventtime.pipeline p WHERE p.id = s.pipeline_id);
SELECT DISTINCT pipeline FROM eventtime.sources WHERE pipeline LIKE 'src\_%' ORDER BY pipeline;
