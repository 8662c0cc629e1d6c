-- What ingestion jobs and consumers meet from their drivers: any key or aggregate name works in
-- the feed, reads leave the transaction without an id (so a consumer may read the feed twice in
-- one transaction, after reading the catalog views), a key comes back into restate() in the form
-- changes() and lateness() give it, a lateness as psycopg sends a timedelta is a duration, and a
-- reserved name is refused naming the pipeline and the argument.
\i include/setup.sql

CREATE TABLE cl_events (a text, tags text[], v numeric, at timestamptz);
-- A key named a and an aggregate named b: the feed's own columns once had those names.
SELECT eventtime.create_pipeline(name => 'cl_ab', source => 'cl_events', event_time => 'at',
    key => ARRAY['a'], window_size => '1 hour', aggregates => 'sum(v) AS b, count(*) AS now');
-- An array key, and a lateness of 36 hours as psycopg sends timedelta(hours=36).
SELECT eventtime.create_pipeline(name => 'cl_tags', source => 'cl_events', event_time => 'at',
    key => ARRAY['tags'], window_size => '1 hour', allowed_lateness => '1 day 12:00:00',
    aggregates => 'sum(v) AS total');
SELECT name, allowed_lateness FROM eventtime.pipelines WHERE name LIKE 'cl\_%' ORDER BY name;

INSERT INTO cl_events VALUES ('x', '{a,b}', 1632163.50, '2026-01-01 00:10+00'),
                             ('y', '{c}', 1, '2026-01-01 00:20+00');
SELECT windows_fired FROM eventtime.advance_watermark('cl_ab', '2026-01-01 01:00+00');
SELECT windows_fired FROM eventtime.advance_watermark('cl_tags', '2026-01-01 01:00+00');
SELECT key, window_start, version, kind, aggregates FROM eventtime.changes('cl_ab') ORDER BY key::text;

-- Reads write nothing: after each, the transaction still has no id, and the feed reads twice.
BEGIN;
SELECT count(*) AS pipelines FROM eventtime.pipelines WHERE name LIKE 'cl\_%';
SELECT count(*) AS sources FROM eventtime.sources WHERE pipeline LIKE 'cl\_%';
SELECT count(*) AS explained FROM eventtime.explain('cl_ab', '2026-01-01 00:10+00', 'x');
SELECT count(*) AS accounted FROM eventtime.lateness('cl_tags', '2026-01-01', '2026-01-02');
SELECT count(*) AS versions FROM eventtime.changes('cl_ab');
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_transaction_id;
SELECT count(*) AS versions_again FROM eventtime.changes('cl_ab');
COMMIT;

-- 30 hours late is within the 36 hours: a late version, not a refused row.
SELECT windows_fired FROM eventtime.advance_watermark('cl_tags', '2026-01-02 06:00+00');
INSERT INTO cl_events VALUES ('x', '{a,b}', 2, '2026-01-01 00:30+00');
SELECT tags, version, kind, total FROM cl_tags_history ORDER BY tags, version;
-- 40 hours late is refused; restate() takes the key in the form lateness() gives it.
SELECT windows_fired FROM eventtime.advance_watermark('cl_tags', '2026-01-02 16:00+00');
INSERT INTO cl_events VALUES ('x', '{a,b}', 3, '2026-01-01 00:40+00');
SELECT key, window_start, refused FROM eventtime.lateness('cl_tags', '2026-01-01', '2026-01-02')
WHERE refused > 0;
SELECT key, window_start, version, rows_folded
FROM eventtime.restate('cl_tags', '2026-01-01 00:00+00',
    key => (SELECT key FROM eventtime.lateness('cl_tags', '2026-01-01', '2026-01-02') WHERE refused > 0));
SELECT tags, version, kind, total FROM cl_tags_history ORDER BY tags, version;

-- The typed feed: the same versions, keys and aggregates in the history's own columns and types,
-- every digit of a numeric kept, an array key as an array; its cursors are the feed's.
SELECT a, window_start, version, kind, b, pg_typeof(b) AS b_type, now, sealed FROM cl_ab_changes() ORDER BY a;
SELECT tags, pg_typeof(tags) AS tags_type, version, kind, total FROM cl_tags_changes() ORDER BY tags, version;
SELECT (SELECT array_agg("cursor") FROM cl_ab_changes()) = (SELECT array_agg("cursor") FROM eventtime.changes('cl_ab'))
    AS same_cursors;
SELECT count(*) AS after_the_last FROM cl_ab_changes((SELECT "cursor" FROM cl_ab_changes() OFFSET 1));
-- It runs as its caller: a role that may not read the history gets the feed's own refusal.
CREATE ROLE regress_cl_stranger;
SET ROLE regress_cl_stranger;
SELECT pg_temp.try($$ SELECT * FROM cl_ab_changes() $$);
RESET ROLE;
DROP ROLE regress_cl_stranger;
-- cursor is a column of the typed feed, so no key or aggregate may take the name.
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline(name => 'cl_cursor', source => 'cl_events',
    event_time => 'at', window_size => '1 hour', aggregates => 'count(*) AS cursor') $$);

-- A system column's name is refused, naming the pipeline and the aggregate.
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline(name => 'cl_xmin', source => 'cl_events',
    event_time => 'at', window_size => '1 hour', aggregates => 'count(*) AS xmin') $$);

SELECT eventtime.drop_pipeline('cl_ab');
SELECT eventtime.drop_pipeline('cl_tags');
SELECT to_regprocedure('cl_ab_changes(text)') AS feed_after_drop;
DROP TABLE cl_events;
