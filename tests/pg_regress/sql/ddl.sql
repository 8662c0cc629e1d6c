-- DDL on a source table: the columns a pipeline uses cannot be dropped or change type while it
-- exists; other columns can. Dropping the source leaves the pipeline for drop_pipeline.
\i include/setup.sql
CREATE TABLE ddl_src (id int, k text, v int, other int, at timestamptz);
SELECT eventtime.create_pipeline('ddl_p', 'ddl_src', 'at', '1 hour', key => ARRAY['k'], event_id => 'id',
    aggregates => 'sum(v) AS s');
-- (terse: the DETAIL names the trigger, whose name carries the pipeline's internal id)
\set VERBOSITY terse
ALTER TABLE ddl_src DROP COLUMN v;
ALTER TABLE ddl_src DROP COLUMN at;
ALTER TABLE ddl_src DROP COLUMN id;
ALTER TABLE ddl_src ALTER COLUMN k TYPE varchar(10);
\set VERBOSITY default
-- With CASCADE, PostgreSQL would drop the pipeline's trigger with the column: refused, naming the
-- pipeline, and nothing is dropped.
SET client_min_messages = warning;  -- (PostgreSQL's notice names the trigger)
ALTER TABLE ddl_src DROP COLUMN v CASCADE;
RESET client_min_messages;
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'ddl_src'::regclass AND tgname LIKE 'eventtime_ingest_p%';
ALTER TABLE ddl_src DROP COLUMN other;
ALTER TABLE ddl_src ADD COLUMN note text;
INSERT INTO ddl_src (id, k, v, at, note) VALUES (1, 'a', 5, '2026-01-01 00:10+00', 'added later');
SELECT windows_fired FROM eventtime.advance_watermark('ddl_p', '2026-01-01 01:00+00');
SELECT k, s FROM ddl_p_history ORDER BY k;
-- The source goes away: the pipeline stays, with its history, until it is dropped.
DROP TABLE ddl_src;
SELECT name, firings FROM eventtime.pipelines WHERE name = 'ddl_p';
SELECT * FROM eventtime.ingest('ddl_p', '{"id": 2}');
SELECT eventtime.drop_pipeline('ddl_p');
SELECT count(*) AS pipelines_left FROM eventtime.pipelines WHERE name = 'ddl_p';
