-- Exactly-once by source offsets (SPEC §12): a row at or below its source's committed offset is a
-- duplicate, the committed offset moves in the ingesting transaction to the greatest the
-- statement brought, eventtime.sources shows it, and no ledger is kept. Each (source, offset)
-- counts once inside a statement too, out of order or not; with event_id both apply.
\i include/setup.sql

CREATE TABLE of_events (part int, off bigint, store text, amount numeric, at timestamptz, id bigint);
SELECT eventtime.create_pipeline(name => 'of_daily', source => 'of_events', event_time => 'at',
    key => ARRAY['store'], window_size => '1 day', allowed_lateness => '1 day',
    aggregates => 'count(*) AS n, sum(amount) AS total', offset_column => 'off', source_column => 'part');
SELECT event_id, offset_column, source_column FROM eventtime.pipelines WHERE name = 'of_daily';

-- Two sources; the committed offset of each is the greatest its rows brought.
INSERT INTO of_events VALUES (0, 1, 'a', 1, '2026-01-01 10:00+00'), (0, 2, 'a', 2, '2026-01-01 11:00+00'),
                             (1, 1, 'b', 5, '2026-01-01 10:00+00');
SELECT source, watermark, "offset" FROM eventtime.sources WHERE pipeline = 'of_daily' ORDER BY source;

-- A redelivery of 0:2 beside the new 0:3, which also comes twice in the statement: the first
-- counts. A statement entirely at or below the committed offset counts nothing.
SELECT * FROM eventtime.ingest('of_daily', '[{"part": 0, "off": 2, "store": "a", "amount": 100, "at": "2026-01-01 12:00+00"},
                                             {"part": 0, "off": 3, "store": "a", "amount": 3, "at": "2026-01-01 12:00+00"},
                                             {"part": 0, "off": 3, "store": "a", "amount": 300, "at": "2026-01-01 12:00+00"}]');
SELECT * FROM eventtime.ingest('of_daily', '{"part": 1, "off": 1, "store": "b", "amount": 500, "at": "2026-01-01 10:00+00"}');
-- Out of order inside one statement, above the committed offset: every row counts once.
SELECT * FROM eventtime.ingest('of_daily', '[{"part": 1, "off": 4, "store": "b", "amount": 4, "at": "2026-01-01 10:00+00"},
                                             {"part": 1, "off": 2, "store": "b", "amount": 2, "at": "2026-01-01 10:00+00"},
                                             {"part": 1, "off": 3, "store": "b", "amount": 3, "at": "2026-01-01 10:00+00"}]');
-- Rising offsets whose first is a redelivery, in open windows: the engine takes the statement
-- (no PL/pgSQL function runs) and counts only what is above the committed offset.
BEGIN;
SET LOCAL track_functions = 'pl';
SELECT * FROM eventtime.ingest('of_daily', '[{"part": 1, "off": 4, "store": "b", "amount": 400, "at": "2026-01-01 10:00+00"},
                                             {"part": 1, "off": 5, "store": "b", "amount": 5, "at": "2026-01-01 10:00+00"},
                                             {"part": 0, "off": 3, "store": "a", "amount": 300, "at": "2026-01-01 10:00+00"}]');
SELECT count(*) AS sql_calls FROM pg_stat_xact_user_functions f
JOIN _eventtime.pipeline p ON f.funcname = format('p%s_ingest_sql', p.id) WHERE p.name = 'of_daily';
COMMIT;
-- A rolled-back statement moves no offset; a failing one applies nothing.
BEGIN;
INSERT INTO of_events VALUES (1, 9, 'b', 9, '2026-01-01 10:00+00');
ROLLBACK;
SELECT pg_temp.try($$INSERT INTO of_events VALUES (1, 5, 'b', 9, '2026-01-01 10:00+00'), (NULL, 6, 'b', 9, '2026-01-01 10:00+00')$$);
SELECT pg_temp.try($$INSERT INTO of_events VALUES (1, NULL, 'b', 9, '2026-01-01 10:00+00')$$);
SELECT source, "offset" FROM eventtime.sources WHERE pipeline = 'of_daily' ORDER BY source;
SELECT duplicates FROM eventtime.pipelines WHERE name = 'of_daily';

SELECT windows_fired FROM eventtime.advance_watermark('of_daily', '2026-01-02 00:00+00');
-- a: 1 + 2 + 3; b: 5 + 4 + 2 + 3 + 5. The redeliveries' amounts (100, 300, 400, 500) are not
-- counted.
SELECT store, n, total FROM of_daily_latest ORDER BY store;
-- A late row within the grace, at a new offset, makes version 2; its redelivery makes nothing.
SELECT * FROM eventtime.ingest('of_daily', '{"part": 0, "off": 4, "store": "a", "amount": 10, "at": "2026-01-01 13:00+00"}');
SELECT * FROM eventtime.ingest('of_daily', '{"part": 0, "off": 4, "store": "a", "amount": 10, "at": "2026-01-01 13:00+00"}');
SELECT store, version, n, total FROM of_daily_history ORDER BY store, version;
-- A statement with a row past its grace, at new offsets, beside a redelivery: the engine takes it
-- (no PL/pgSQL function runs), refuses that row and counts the redelivery as a duplicate.
BEGIN;
SET LOCAL track_functions = 'pl';
SELECT * FROM eventtime.ingest('of_daily', '[{"part": 0, "off": 4, "store": "a", "amount": 10, "at": "2026-01-01 13:00+00"},
                                             {"part": 0, "off": 5, "store": "a", "amount": 7, "at": "2025-12-31 13:00+00"},
                                             {"part": 0, "off": 6, "store": "c", "amount": 8, "at": "2026-01-02 14:00+00"}]');
SELECT count(*) AS sql_calls FROM pg_stat_xact_user_functions f
JOIN _eventtime.pipeline p ON f.funcname = format('p%s_ingest_sql', p.id) WHERE p.name = 'of_daily';
COMMIT;
SELECT store, event_time, "row", window_start, window_end, watermark FROM of_daily_refused ORDER BY event_time;
-- The watermark's sources and the offsets' sources are named alike, and listed side by side.
SELECT windows_fired FROM eventtime.advance_watermark('of_daily', '2026-01-02 00:00+00', '0');
SELECT source, watermark, "offset" FROM eventtime.sources WHERE pipeline = 'of_daily' ORDER BY source;

-- The offsets are the pipeline's to write: the owner's plain statements are refused.
SELECT pg_temp.try($$UPDATE _eventtime.p$$ || (SELECT id FROM _eventtime.pipeline WHERE name = 'of_daily') || $$_offsets SET "offset" = 0$$);
SELECT pg_temp.try($$DELETE FROM _eventtime.p$$ || (SELECT id FROM _eventtime.pipeline WHERE name = 'of_daily') || $$_offsets$$);

-- One source (no source_column): its name is the default source's. Hopping windows count a
-- redelivered row's pairs (row, window) as duplicates. With event_id as well, both apply.
CREATE TABLE of_one (off integer, id bigint, v bigint, at timestamptz);
SELECT eventtime.create_pipeline(name => 'of_hop', source => 'of_one', event_time => 'at',
    window_size => '2 hours', window_slide => '1 hour', event_id => 'id',
    aggregates => 'count(*) AS n, sum(v) AS total', offset_column => 'off');
INSERT INTO of_one VALUES (1, 100, 1, '2026-01-01 00:30+00'), (2, 101, 2, '2026-01-01 01:30+00');
SELECT * FROM eventtime.ingest('of_hop', '[{"off": 2, "id": 101, "v": 2, "at": "2026-01-01 01:30+00"},
                                           {"off": 3, "id": 100, "v": 1, "at": "2026-01-01 00:30+00"},
                                           {"off": 4, "id": 102, "v": 4, "at": "2026-01-01 01:40+00"}]');
SELECT offset_column, source_column FROM eventtime.pipelines WHERE name = 'of_hop';
SELECT source, watermark, "offset" FROM eventtime.sources WHERE pipeline = 'of_hop';
SELECT windows_fired FROM eventtime.advance_watermark('of_hop', 'infinity');
SELECT window_start, n, total FROM of_hop_latest ORDER BY window_start;

-- Sessions with offsets.
CREATE TABLE of_clicks (part text, off bigint, usr text, at timestamptz);
SELECT eventtime.create_pipeline(name => 'of_sess', source => 'of_clicks', event_time => 'at',
    key => ARRAY['usr'], session_gap => '30 minutes', offset_column => 'off', source_column => 'part');
INSERT INTO of_clicks VALUES ('p', 1, 'u', '2026-01-01 10:00+00'), ('p', 2, 'u', '2026-01-01 10:20+00');
INSERT INTO of_clicks VALUES ('p', 2, 'u', '2026-01-01 10:20+00'), ('p', 3, 'u', '2026-01-01 10:40+00'), ('q', 1, 'u', '2026-01-01 12:00+00');
SELECT windows_fired FROM eventtime.advance_watermark('of_sess', 'infinity');
SELECT usr, window_start, window_end, events FROM of_sess_latest ORDER BY window_start;

-- Event ids and offsets on a tumbling pipeline, in single-row statements: each statement claims
-- its offset (the trigger's front hands every such statement to the function that claims), so a
-- row at or below the committed offset is a duplicate even with a new id, and a redelivered id
-- is one even with a new offset.
CREATE TABLE of_single (off bigint, id bigint, v int, at timestamptz);
SELECT eventtime.create_pipeline(name => 'of_single_daily', source => 'of_single', event_time => 'at',
    window_size => '1 day', event_id => 'id', offset_column => 'off',
    aggregates => 'count(*) AS n, sum(v) AS total');
INSERT INTO of_single VALUES (1, 10, 1, '2026-01-01 10:00+00');
INSERT INTO of_single VALUES (2, 20, 2, '2026-01-01 11:00+00');
INSERT INTO of_single VALUES (2, 30, 100, '2026-01-01 12:00+00');
INSERT INTO of_single VALUES (3, 10, 1000, '2026-01-01 12:00+00');
INSERT INTO of_single VALUES (4, 40, 4, '2026-01-01 12:00+00');
SELECT source, "offset" FROM eventtime.sources WHERE pipeline = 'of_single_daily';
SELECT * FROM eventtime.ingest('of_single_daily', '{"off": 4, "id": 50, "v": 10000, "at": "2026-01-01 12:00+00"}');
SELECT windows_fired FROM eventtime.advance_watermark('of_single_daily', 'infinity');
SELECT window_start, n, total FROM of_single_daily_latest;

-- Event ids and offsets in statements of several rows: the engine takes them (no PL/pgSQL
-- function runs) and leaves what SQL leaves (of_multi_sql, fed the same statements under
-- REPEATABLE READ, which the engine leaves to SQL): a row at or below its source's committed
-- offset is a duplicate whatever its id, one at a new offset with an id seen before is one too,
-- and a row past its grace is refused, its id kept.
CREATE TABLE of_multi (part int, off bigint, id bigint, v int, at timestamptz);
CREATE TABLE of_multi_sql (LIKE of_multi);
SELECT eventtime.create_pipeline(name => p, source => p::regclass, event_time => 'at',
    window_size => '1 day', allowed_lateness => '1 day', event_id => 'id', offset_column => 'off',
    source_column => 'part', aggregates => 'count(*) AS n, sum(v) AS total')
FROM unnest(ARRAY['of_multi', 'of_multi_sql']) p;
CREATE TABLE of_multi_stmts (stmt int, rows jsonb);
INSERT INTO of_multi_stmts VALUES
  (1, '[{"part": 0, "off": 1, "id": 1, "v": 1, "at": "2026-01-01 10:00+00"}, {"part": 0, "off": 2, "id": 2, "v": 2, "at": "2026-01-01 11:00+00"},
        {"part": 0, "off": 3, "id": 3, "v": 3, "at": "2025-12-31 11:00+00"}, {"part": 1, "off": 1, "id": 4, "v": 4, "at": "2026-01-02 11:00+00"}]'),
  (2, '[{"part": 0, "off": 3, "id": 9, "v": 90, "at": "2026-01-01 10:00+00"}, {"part": 0, "off": 4, "id": 2, "v": 20, "at": "2026-01-01 11:00+00"},
        {"part": 0, "off": 5, "id": 6, "v": 6, "at": "2026-01-02 10:00+00"}, {"part": 1, "off": 2, "id": 7, "v": 7, "at": "2026-01-02 12:00+00"}]'),
  (3, '[{"part": 0, "off": 6, "id": 8, "v": 8, "at": "2025-12-31 12:00+00"}, {"part": 0, "off": 7, "id": 10, "v": 10, "at": "2026-01-01 12:00+00"},
        {"part": 0, "off": 8, "id": 8, "v": 80, "at": "2025-12-31 12:00+00"}, {"part": 1, "off": 2, "id": 11, "v": 110, "at": "2026-01-02 13:00+00"},
        {"part": 1, "off": 3, "id": 12, "v": 12, "at": "2026-01-02 13:00+00"}]');
BEGIN;
SET LOCAL track_functions = 'pl';
SELECT stmt, i.* FROM of_multi_stmts, eventtime.ingest('of_multi', rows) i WHERE stmt < 3 ORDER BY stmt;
SELECT windows_fired FROM eventtime.advance_watermark('of_multi', '2026-01-03 00:00+00');
SELECT stmt, i.* FROM of_multi_stmts, eventtime.ingest('of_multi', rows) i WHERE stmt = 3;
SELECT count(*) AS sql_calls FROM pg_stat_xact_user_functions f
JOIN _eventtime.pipeline p ON f.funcname = format('p%s_ingest_sql', p.id) WHERE p.name = 'of_multi';
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT stmt, i.* FROM of_multi_stmts, eventtime.ingest('of_multi_sql', rows) i WHERE stmt = 1;
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT stmt, i.* FROM of_multi_stmts, eventtime.ingest('of_multi_sql', rows) i WHERE stmt = 2;
COMMIT;
SELECT windows_fired FROM eventtime.advance_watermark('of_multi_sql', '2026-01-03 00:00+00');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT stmt, i.* FROM of_multi_stmts, eventtime.ingest('of_multi_sql', rows) i WHERE stmt = 3;
COMMIT;
SELECT p, (eventtime.advance_watermark(p, 'infinity')).windows_fired FROM unnest(ARRAY['of_multi', 'of_multi_sql']) p;
SELECT window_start, version, kind, n, total FROM of_multi_history ORDER BY window_start, version;
SELECT count(*) AS differ FROM (
  (SELECT window_start, version, kind, watermark, n, total FROM of_multi_history
   EXCEPT ALL SELECT window_start, version, kind, watermark, n, total FROM of_multi_sql_history)
  UNION ALL
  (SELECT window_start, version, kind, watermark, n, total FROM of_multi_sql_history
   EXCEPT ALL SELECT window_start, version, kind, watermark, n, total FROM of_multi_history)) d;
SELECT event_id, event_time, "row" ->> 'off' AS off, window_start, watermark FROM of_multi_refused ORDER BY event_id;
SELECT count(*) AS differ FROM (
  (SELECT event_id, event_time, "row", window_start, deadline, watermark FROM of_multi_refused
   EXCEPT ALL SELECT event_id, event_time, "row", window_start, deadline, watermark FROM of_multi_sql_refused)
  UNION ALL
  (SELECT event_id, event_time, "row", window_start, deadline, watermark FROM of_multi_sql_refused
   EXCEPT ALL SELECT event_id, event_time, "row", window_start, deadline, watermark FROM of_multi_refused)) d;
SELECT pipeline, source, "offset" FROM eventtime.sources WHERE pipeline LIKE 'of_multi%' ORDER BY 1, 2;
SELECT name, duplicates FROM eventtime.pipelines WHERE name LIKE 'of_multi%' ORDER BY 1;

-- What create_pipeline refuses.
SELECT pg_temp.try($$SELECT eventtime.create_pipeline('of_bad', 'of_events', 'at', '1 day', offset_column => 'store')$$);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline('of_bad', 'of_events', 'at', '1 day', offset_column => 'nope')$$);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline('of_bad', 'of_events', 'at', '1 day', source_column => 'part')$$);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline('of_bad', 'of_events', 'at', '1 day', offset_column => 'off', source_column => 'off')$$);
-- The columns it reads cannot be dropped while the pipeline exists.
SELECT pg_temp.try($$ALTER TABLE of_events DROP COLUMN part$$) LIKE '2BP01%' AS refused;

SELECT eventtime.drop_pipeline('of_daily');
SELECT eventtime.drop_pipeline('of_hop');
SELECT eventtime.drop_pipeline('of_sess');
SELECT eventtime.drop_pipeline('of_single_daily');
SELECT eventtime.drop_pipeline('of_multi');
SELECT eventtime.drop_pipeline('of_multi_sql');
SELECT count(*) AS left_over FROM pg_tables WHERE schemaname = '_eventtime' AND tablename LIKE '%offsets';
