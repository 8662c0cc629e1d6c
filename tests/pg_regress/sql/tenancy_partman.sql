-- A partitioned source whose partitions pg_partman makes (SPEC §14), as most users make them:
-- the partitions it creates at setup and by its maintenance all get the pipeline's trigger, and
-- rows written into any of them by name count. PostgreSQL 15 only (Debian's
-- postgresql-15-partman; scripts/test.sh leaves this file out on PostgreSQL 18).
\i include/setup.sql

SET client_min_messages = warning;
SELECT eventtime.drop_pipeline(name) FROM _eventtime.pipeline WHERE name = 'tnp_events';
DROP SCHEMA IF EXISTS tnp CASCADE;
DROP EXTENSION IF EXISTS pg_partman;
DROP SCHEMA IF EXISTS partman CASCADE;
RESET client_min_messages;
CREATE SCHEMA partman;
CREATE EXTENSION pg_partman SCHEMA partman;
CREATE SCHEMA tnp;

CREATE TABLE tnp.events (id bigint, k text, v integer, at timestamptz NOT NULL) PARTITION BY RANGE (at);
-- Whether every table below tnp.events carries the pipeline's trigger, and how many there are.
CREATE FUNCTION pg_temp.covered() RETURNS TABLE (partitions bigint, all_triggered boolean)
LANGUAGE sql AS $$
SELECT count(*), bool_and(EXISTS (SELECT FROM pg_trigger t JOIN _eventtime.pipeline p ON t.tgname = 'eventtime_ingest_p' || p.id
                                  WHERE p.name = 'tnp_events' AND t.tgrelid = i.inhrelid))
FROM pg_inherits i WHERE i.inhparent = 'tnp.events'::regclass
$$;

SELECT partman.create_parent(p_parent_table => 'tnp.events', p_control => 'at', p_type => 'native',
    p_interval => 'daily', p_premake => 2, p_start_partition => '2026-10-28');
SELECT eventtime.create_pipeline(name => 'tnp_events', source => 'tnp.events', event_time => 'at', key => ARRAY['k'],
    event_id => 'id', window_size => '1 day', aggregates => 'count(*) AS n, sum(v) AS total');
SELECT partitions > 30 AS made, all_triggered FROM pg_temp.covered();
CREATE TEMPORARY TABLE before AS SELECT partitions FROM pg_temp.covered();
-- The maintenance makes partitions further ahead: they get the trigger as they are attached.
UPDATE partman.part_config SET premake = 10, infinite_time_partitions = true WHERE parent_table = 'tnp.events';
SELECT partman.run_maintenance(p_parent_table => 'tnp.events');
SELECT c.partitions > b.partitions AS more, c.all_triggered FROM pg_temp.covered() c, before b;

-- Through the parent, into a partition by name (INSERT and COPY), into the default partition.
INSERT INTO tnp.events VALUES (1, 'a', 1, '2026-10-29 10:00+00');
INSERT INTO tnp.events_p2026_10_29 VALUES (2, 'a', 2, '2026-10-29 11:00+00'), (3, 'b', 3, '2026-10-29 11:00+00');
INSERT INTO tnp.events_p2026_10_29 VALUES (4, 'a', 4, '2026-10-29 12:00+00');
INSERT INTO tnp.events_p2026_10_29 VALUES (4, 'a', 4, '2026-10-29 12:00+00');
COPY tnp.events_p2026_10_30 FROM stdin;
5	a	5	2026-10-30 10:00:00+00
\.
INSERT INTO tnp.events_default VALUES (6, 'a', 6, '2020-01-01 10:00+00');
SELECT * FROM eventtime.advance_watermark('tnp_events', 'infinity');
SELECT k, window_start, n, total FROM tnp.tnp_events_history ORDER BY k, window_start;
SELECT duplicates FROM eventtime.pipelines WHERE name = 'tnp_events';

SET client_min_messages = warning;
SELECT eventtime.drop_pipeline('tnp_events');
DROP SCHEMA tnp CASCADE;
DROP EXTENSION pg_partman;
DROP SCHEMA partman CASCADE;
RESET client_min_messages;
