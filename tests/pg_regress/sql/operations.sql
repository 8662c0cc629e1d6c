-- Operations (SPEC §10): the bound on watermarks ahead of the clock (max_ahead), the clock
-- (clock_lag and eventtime.tick()), and renames of the columns a pipeline uses. Everything here
-- that depends on the clock is compared with now() inside one transaction, or printed as
-- booleans and counts, so that the output does not depend on when the test runs.
\i include/setup.sql

-- try() with the timestamps of its message masked: the refused watermark depends on now().
CREATE FUNCTION pg_temp.try_masked(sql text) RETURNS text LANGUAGE sql AS $$
    SELECT regexp_replace(pg_temp.try(sql), '\d{4,}-\d\d-\d\d [0-9:.+-]+', '<timestamp>', 'g')
$$;

CREATE TABLE ops_events (k text, v integer, ts timestamptz, note text);
SELECT eventtime.create_pipeline(name => 'ops_bound', source => 'ops_events', event_time => 'ts',
    key => ARRAY['k'], window_size => '1 hour', aggregates => 'count(*) AS n, sum(v) AS total');
-- max_ahead is 1 day unless given; clock_lag is none.
SELECT max_ahead, clock_lag FROM eventtime.pipelines WHERE name = 'ops_bound';

-- A typo in a watermark is refused, with a hint, and changes nothing.
SELECT pg_temp.try($$SELECT * FROM eventtime.advance_watermark('ops_bound', '20260-01-01 00:00+00')$$);
SELECT watermark FROM eventtime.pipelines WHERE name = 'ops_bound';

-- The bound is now() + max_ahead, now() being the start of the transaction: exactly at the bound
-- passes, one microsecond beyond it is refused (whatever the source).
BEGIN;
SELECT windows_fired, watermark = now() + interval '1 day' AS at_the_bound
FROM eventtime.advance_watermark('ops_bound', now() + interval '1 day');
SELECT pg_temp.try_masked(format('SELECT * FROM eventtime.advance_watermark(%L, %L, %L)',
    'ops_bound', now() + interval '1 day 1 microsecond', 'kafka-0'));
ROLLBACK;

-- 'infinity' is the end of the input, always allowed.
INSERT INTO ops_events VALUES ('a', 1, '2026-01-01 10:00+00');
SELECT windows_fired, windows_purged, watermark FROM eventtime.advance_watermark('ops_bound', 'infinity');

-- With max_ahead => NULL there is no bound.
CREATE TABLE ops_unbounded (ts timestamptz);
SELECT eventtime.create_pipeline(name => 'ops_unbounded', source => 'ops_unbounded', event_time => 'ts',
    window_size => '1 hour', max_ahead => NULL);
SELECT watermark FROM eventtime.advance_watermark('ops_unbounded', '20260-01-01 00:00+00');
SELECT pg_temp.try($$SELECT eventtime.create_pipeline(name => 'ops_bad', source => 'ops_unbounded',
    event_time => 'ts', window_size => '1 hour', max_ahead => '-1 hour')$$);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline(name => 'ops_bad', source => 'ops_unbounded',
    event_time => 'ts', window_size => '1 hour', clock_lag => '1 month')$$);

-- With a watermark_lag, a row from the future joins its window but does not move the watermark.
CREATE TABLE ops_lagged (k text, ts timestamptz);
SELECT eventtime.create_pipeline(name => 'ops_lagged', source => 'ops_lagged', event_time => 'ts',
    key => ARRAY['k'], window_size => '1 hour', watermark_lag => '0');
SELECT now() - interval '2 hours' AS past, now() + interval '10 years' AS future \gset
SELECT * FROM eventtime.ingest('ops_lagged', format('[{"k": "a", "ts": "%s"}]', :'future')::jsonb);
SELECT watermark IS NULL AS not_moved, open_windows FROM eventtime.pipelines WHERE name = 'ops_lagged';
-- In one statement with a row of the past, the past row moves it and the future one does not.
SELECT * FROM eventtime.ingest('ops_lagged',
    format('[{"k": "a", "ts": "%s"}, {"k": "b", "ts": "%s"}]', :'future', :'past')::jsonb);
SELECT watermark = :'past'::timestamptz AS at_the_past_row FROM eventtime.pipelines WHERE name = 'ops_lagged';
-- One row at a time takes the same rule.
INSERT INTO ops_lagged VALUES ('c', :'future'::timestamptz + interval '1 hour');
SELECT watermark = :'past'::timestamptz AS still_at_the_past_row FROM eventtime.pipelines WHERE name = 'ops_lagged';

-- The clock: a pipeline with a clock_lag has a source "clock" that eventtime.tick() moves to
-- now() - clock_lag, firing what that makes due, with no other call.
CREATE TABLE ops_clocked (k text, ts timestamptz);
SELECT eventtime.create_pipeline(name => 'ops_clocked', source => 'ops_clocked', event_time => 'ts',
    key => ARRAY['k'], window_size => '1 hour', clock_lag => '10 minutes');
SELECT date_trunc('hour', now()) - interval '3 hours' AS h3 \gset
INSERT INTO ops_clocked VALUES ('a', :'h3'), ('a', :'h3'::timestamptz + interval '1 hour 30 minutes');
SELECT pipeline, windows_fired, windows_purged, watermark = now() - interval '10 minutes' AS at_the_clock
FROM eventtime.tick() WHERE pipeline LIKE 'ops\_%' ORDER BY pipeline;
SELECT k, window_start - :'h3'::timestamptz AS after_h3, version, kind, events
FROM ops_clocked_history ORDER BY window_start;
SELECT source, watermark = advanced_at - interval '10 minutes' AS lags_the_clock FROM eventtime.sources
WHERE pipeline = 'ops_clocked';
-- A row for a window the clock has closed is refused (the default lateness is 0).
INSERT INTO ops_clocked VALUES ('a', :'h3');
SELECT k, window_start = :'h3'::timestamptz AS its_window FROM ops_clocked_refused;

-- tick() also applies idle timeouts: a source that stopped advancing stops holding the pipeline
-- back once its idle_timeout has passed, with nobody advancing anything.
CREATE TABLE ops_idle (ts timestamptz);
SELECT eventtime.create_pipeline(name => 'ops_idle', source => 'ops_idle', event_time => 'ts',
    window_size => '1 hour', clock_lag => '0', idle_timeout => '1 second');
SELECT windows_fired FROM eventtime.advance_watermark('ops_idle', :'h3', source => 'slow');
SELECT count(*) AS moved FROM eventtime.tick() WHERE pipeline = 'ops_idle';
SELECT watermark = :'h3'::timestamptz AS held_back_by_slow FROM eventtime.pipelines WHERE name = 'ops_idle';
SELECT pg_sleep(1.2);
SELECT pipeline, watermark = now() AS at_the_clock FROM eventtime.tick() WHERE pipeline = 'ops_idle';
SELECT source, idle, idle_reason FROM eventtime.sources WHERE pipeline = 'ops_idle' ORDER BY source;

-- tick() moves only the pipelines whose owner's privileges the caller has: for another role it
-- does nothing, and says nothing of the others.
CREATE ROLE regress_ops_other;
SET ROLE regress_ops_other;
SELECT count(*) AS moved FROM eventtime.tick();
RESET ROLE;
DROP ROLE regress_ops_other;

-- Renaming a column a pipeline uses is refused, naming the pipeline; the table stays writable.
SELECT pg_temp.try('ALTER TABLE ops_events RENAME COLUMN v TO value');
SELECT pg_temp.try('ALTER TABLE ops_events RENAME COLUMN ts TO at');
SELECT pg_temp.try('ALTER TABLE ops_events RENAME COLUMN k TO key');
-- The columns keep their names, and the table takes rows.
SELECT attname FROM pg_attribute WHERE attrelid = 'ops_events'::regclass AND attnum > 0 AND NOT attisdropped
ORDER BY attnum;
INSERT INTO ops_events VALUES ('b', 2, '2026-01-01 11:00+00');
SELECT refused FROM eventtime.pipelines WHERE name = 'ops_bound';
-- Columns no pipeline uses, and the table itself, may be renamed.
ALTER TABLE ops_events RENAME COLUMN note TO remark;
ALTER TABLE ops_events RENAME TO ops_events_renamed;
CREATE TABLE ops_second (ts timestamptz, v integer);
SELECT eventtime.create_pipeline(name => 'ops_second', source => 'ops_second', event_time => 'ts',
    window_size => '1 hour', aggregates => 'sum(v) AS total');
INSERT INTO ops_second VALUES ('2026-01-01 10:00+00', 5);
SELECT pg_temp.try('ALTER TABLE ops_second RENAME COLUMN v TO amount');
INSERT INTO ops_second VALUES ('2026-01-01 10:30+00', 7);
SELECT rows_in_state FROM eventtime.explain('ops_second', '2026-01-01 10:00+00');

SELECT eventtime.drop_pipeline(name) FROM eventtime.pipelines WHERE name LIKE 'ops\_%' ORDER BY name;
-- Once the pipeline is gone, the column is the table's again.
ALTER TABLE ops_second RENAME COLUMN v TO amount;
DROP TABLE ops_events_renamed, ops_unbounded, ops_lagged, ops_clocked, ops_idle, ops_second;
