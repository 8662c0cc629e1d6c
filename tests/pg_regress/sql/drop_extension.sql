-- DROP EXTENSION pg_eventtime CASCADE takes every pipeline with it: its tables, its views and its
-- typed feed, and the triggers on the source tables, which stay with their rows. Nothing is left
-- that a new pipeline of the same name would collide with. In a database of its own, since the
-- other files share theirs.
\i include/setup.sql
CREATE DATABASE eventtime_drop_extension;
\c eventtime_drop_extension
\i include/setup.sql
CREATE TABLE de_sales (id bigint PRIMARY KEY, store text, amount numeric, at timestamptz);
SELECT eventtime.create_pipeline(name => 'de_rev', source => 'de_sales', event_time => 'at', key => ARRAY['store'],
    event_id => 'id', window_size => '1 hour', aggregates => 'sum(amount) AS total');
INSERT INTO de_sales VALUES (1, 'a', 10, '2026-01-01 00:10+00');
SET client_min_messages = warning;  -- (the list of what goes names internal ids)
DROP EXTENSION pg_eventtime CASCADE;
RESET client_min_messages;
SELECT count(*) AS rows_kept FROM de_sales;
SELECT c.relname, c.relkind FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace ORDER BY 1;
SELECT p.oid::regprocedure AS function_left FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace;
SELECT tgname AS trigger_left FROM pg_trigger WHERE tgrelid = 'de_sales'::regclass;
CREATE EXTENSION pg_eventtime;
SELECT eventtime.create_pipeline(name => 'de_rev', source => 'de_sales', event_time => 'at', key => ARRAY['store'],
    event_id => 'id', window_size => '1 hour', aggregates => 'sum(amount) AS total');
INSERT INTO de_sales VALUES (2, 'a', 5, '2026-01-01 00:20+00');
SELECT windows_fired FROM eventtime.advance_watermark('de_rev', '2026-01-01 01:00+00');
SELECT store, total FROM de_rev_latest;
SELECT * FROM de_rev_changes() ORDER BY "cursor" LIMIT 0;
\c eventtime_regress
DROP DATABASE eventtime_drop_extension;
