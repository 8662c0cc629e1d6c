-- Every misuse of SPEC §4 gets a PostgreSQL error with its SQLSTATE, a message naming the
-- offending thing, and a HINT where one helps; identifiers that need quoting work and no name
-- can inject SQL.
\i include/setup.sql
CREATE SCHEMA err;
SET search_path = err, public;

CREATE TABLE err_src (
    id       bigint,
    k        text,
    v        integer,
    amount   numeric,
    label    text,
    flag     boolean,
    doc      jsonb,
    at       timestamptz,
    at_local timestamp,
    at_text  text,
    at_date  date
);
CREATE VIEW err_src_view AS SELECT * FROM err_src;
SELECT eventtime.create_pipeline(name => 'err_p', source => 'err_src', event_time => 'at', key => ARRAY['k'],
    event_id => 'id', window_size => '1 day', allowed_lateness => '1 day', aggregates => 'count(*) AS n, sum(v) AS total');
INSERT INTO err_src (id, k, v, at) VALUES (1, 'a', 10, '2026-10-29 10:00+00');

-- What a failed ingest must leave untouched.
CREATE VIEW err_snapshot AS
SELECT (SELECT count(*) FROM err_src) AS source_rows,
       (SELECT count(*) FROM err_p_history) AS history_rows,
       (SELECT count(*) FROM err_p_refused) AS refused_rows,
       p.open_windows, p.state_rows, p.duplicates, p.watermark
FROM eventtime.pipelines p WHERE p.name = 'err_p';
SELECT * FROM err_snapshot;

---------------------------------------------------------------------------------------------
-- Unknown pipeline: 42704. Names are exact (case matters).
---------------------------------------------------------------------------------------------
SELECT pg_temp.try($$ SELECT eventtime.drop_pipeline('nope') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('nope', '{}') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.advance_watermark('nope', '2026-10-30 00:00+00') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.advance_watermark('ERR_P', '2026-10-30 00:00+00') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.advance_watermark('err_p ', '2026-10-30 00:00+00') $$);
-- As psql shows it:
SELECT * FROM eventtime.advance_watermark('nope', '2026-10-30 00:00+00');

---------------------------------------------------------------------------------------------
-- Duplicate pipeline name: 42710, whatever the other arguments.
---------------------------------------------------------------------------------------------
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_p', 'err_src', 'at', '1 hour') $$);
SELECT eventtime.create_pipeline('err_p', 'err_src', 'at', '1 day');

---------------------------------------------------------------------------------------------
-- The source: not a table (42809), or no such relation (PostgreSQL's own 42P01).
---------------------------------------------------------------------------------------------
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src_view', 'at', '1 day') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'no_such_table', 'at', '1 day') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src; DROP TABLE err_src', 'at', '1 day') $$);
SELECT eventtime.create_pipeline('err_q', 'err_src_view', 'at', '1 day');

---------------------------------------------------------------------------------------------
-- Source columns that do not exist: 42703, naming the column and the table.
---------------------------------------------------------------------------------------------
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'nope', '1 day') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'AT', '1 day') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', key => ARRAY['k', 'nope']) $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', event_id => 'nope') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', aggregates => 'sum(nope) AS s') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', aggregates => 'count(nope) AS c') $$);
SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', key => ARRAY['nope']);

---------------------------------------------------------------------------------------------
-- An event time column of the wrong type: 42804.
---------------------------------------------------------------------------------------------
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at_local', '1 day') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at_text', '1 day') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at_date', '1 day') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'id', '1 day') $$);
SELECT eventtime.create_pipeline('err_q', 'err_src', 'at_local', '1 day');

---------------------------------------------------------------------------------------------
-- NULL arguments: 22004, naming the argument.
---------------------------------------------------------------------------------------------
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline(NULL, 'err_src', 'at', '1 day') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', NULL, 'at', '1 day') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', NULL, '1 day') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', NULL) $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', allowed_lateness => NULL) $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', aggregates => NULL) $$);
SELECT pg_temp.try($$ SELECT eventtime.drop_pipeline(NULL) $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest(NULL, '{}') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('err_p', NULL) $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.advance_watermark(NULL, '2026-10-30 00:00+00') $$);
-- A NULL watermark.
SELECT pg_temp.try($$ SELECT * FROM eventtime.advance_watermark('err_p', NULL) $$);
SELECT * FROM eventtime.advance_watermark('err_p', NULL);
-- A NULL inside the key array: 22023.
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', key => ARRAY['k', NULL]) $$);
-- An empty name: 22023.
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('', 'err_src', 'at', '1 day') $$);
SELECT count(*) AS pipelines_named_err_q FROM eventtime.pipelines WHERE name IN ('err_q', '');

---------------------------------------------------------------------------------------------
-- Window size must be positive, a fixed duration or a calendar period but not both; lateness a
-- non-negative fixed duration: 22023. (More window errors in windows.sql.)
---------------------------------------------------------------------------------------------
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '0') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '-1 day') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '-1 hour') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day -24 hours') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day 2 hours') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 mon -30 days') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', allowed_lateness => '-1 hour') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', allowed_lateness => '-00:00:00.000001') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', allowed_lateness => '1 mon') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', window_origin => 'infinity') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', window_origin => '-infinity') $$);
SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '0');
SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day 2 hours');
SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', allowed_lateness => '-1 hour');

---------------------------------------------------------------------------------------------
-- The aggregate list: syntax errors are 42601 with the position; an aggregate the column's
-- type does not have is 42883; a name used twice or reserved by the views is 42701.
---------------------------------------------------------------------------------------------
SELECT a.list, pg_temp.try(format('SELECT eventtime.create_pipeline(%L, %L, %L, %L, aggregates => %L)',
                                  'err_q', 'err_src', 'at', '1 day', a.list)) AS result
FROM (VALUES
    (1, 'median(v) AS m'),
    (2, 'sum(*) AS s'),
    (3, 'sum(v)'),
    (4, 'sum(v) AS'),
    (5, 'count(*) AS n,'),
    (6, 'sum(v) AS s; DROP TABLE err_src'),
    (7, 'sum(v) AS s) --'),
    (8, ''),
    (9, 'sum(v, amount) AS s'),
    (10, 'sum(v) + 1 AS s'),
    (11, 'count(*) AS "unterminated'),
    (12, 'sum(v) AS s extra'),
    (13, 'count(*) AS n count(*) AS m'),
    (14, 'count() AS n'),
    (15, 'public.sum(v) AS s'),
    (16, 'string_agg(DISTINCT label, '','') AS n'),
    (17, 'sum(v) AS ""')
) AS a(n, list)
ORDER BY a.n;
SELECT a.list, pg_temp.try(format('SELECT eventtime.create_pipeline(%L, %L, %L, %L, aggregates => %L)',
                                  'err_q', 'err_src', 'at', '1 day', a.list)) AS result
FROM (VALUES
    (1, 'sum(label) AS s'),
    (2, 'avg(label) AS s'),
    (3, 'sum(at) AS s'),
    (4, 'avg(at) AS s'),
    (5, 'min(doc) AS s'),
    (6, 'max(flag) AS s'),
    (7, 'sum(flag) AS s')
) AS a(n, list)
ORDER BY a.n;
SELECT a.key, a.list, pg_temp.try(format('SELECT eventtime.create_pipeline(%L, %L, %L, %L, key => %L, aggregates => %L)',
                                  'err_q', 'err_src', 'at', '1 day', a.key, a.list)) AS result
FROM (VALUES
    (1, '{k}', 'count(*) AS k'),
    (2, '{k}', 'count(*) AS n, sum(v) AS n'),
    (3, '{k}', 'count(*) AS N, sum(v) AS n'),
    (4, '{}', 'count(*) AS window_start'),
    (5, '{}', 'count(*) AS version'),
    (6, '{}', 'count(*) AS sealed'),
    (7, '{}', 'count(*) AS "row"'),
    (8, '{}', 'count(*) AS _et_n'),
    (9, '{k,k}', 'count(*) AS n')
) AS a(n, key, list)
ORDER BY a.n;
-- Quoted aggregate names keep their case, so these differ.
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', event_id => 'id', aggregates => 'count(*) AS "N", sum(v) AS n') $$);
SELECT eventtime.drop_pipeline('err_q');
-- A key column named like a column the views add.
CREATE TABLE err_kinds (kind text, "version" integer, at timestamptz);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_kinds', 'at', '1 day', key => ARRAY['kind']) $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_q', 'err_kinds', 'at', '1 day', key => ARRAY['version']) $$);
-- As psql shows them:
SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', aggregates => 'sum(v) AS s; DROP TABLE err_src');
SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', aggregates => 'sum(label) AS s');
SELECT eventtime.create_pipeline('err_q', 'err_src', 'at', '1 day', key => ARRAY['k'], aggregates => 'count(*) AS k');
-- Nothing of the failed calls was created.
SELECT count(*) AS pipelines FROM eventtime.pipelines WHERE name = 'err_q';
SELECT count(*) AS views FROM pg_class WHERE relname LIKE 'err\_q\_%';

---------------------------------------------------------------------------------------------
-- Pipeline names: at most 51 bytes (the view names add up to 12: "_provisional"); 42622.
---------------------------------------------------------------------------------------------
SELECT pg_temp.try(format('SELECT eventtime.create_pipeline(%L, %L, %L, %L)', repeat('n', 52), 'err_src', 'at', '1 day'));
SELECT pg_temp.try(format('SELECT eventtime.create_pipeline(%L, %L, %L, %L)', repeat('ü', 28), 'err_src', 'at', '1 day'));
SELECT pg_temp.try(format('SELECT eventtime.create_pipeline(%L, %L, %L, %L, event_id => %L)', repeat('n', 51), 'err_src', 'at', '1 day', 'id'));
SELECT c.relname FROM pg_class c WHERE c.relname LIKE repeat('n', 51) || '\_%' ORDER BY c.relname;
SELECT eventtime.drop_pipeline(repeat('n', 51));

---------------------------------------------------------------------------------------------
-- advance_watermark needs READ COMMITTED: 25000.
---------------------------------------------------------------------------------------------
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.try($$ SELECT * FROM eventtime.advance_watermark('err_p', '2026-10-30 00:00+00') $$);
ROLLBACK;

---------------------------------------------------------------------------------------------
-- A NULL or infinite event time fails the whole statement; nothing of it is applied:
-- 22004 and 22008, for INSERT, COPY and ingest().
---------------------------------------------------------------------------------------------
SELECT pg_temp.try($$ INSERT INTO err_src (id, k, v, at) VALUES (2, 'a', 1, '2026-10-29 11:00+00'), (3, 'a', 1, NULL) $$);
SELECT pg_temp.try($$ INSERT INTO err_src (id, k, v, at) VALUES (2, 'a', 1, '2026-10-29 11:00+00'), (3, 'a', 1, 'infinity') $$);
SELECT pg_temp.try($$ INSERT INTO err_src (id, k, v, at) VALUES (2, 'a', 1, '-infinity') $$);
SELECT pg_temp.try($$ INSERT INTO err_src (id, k, v) VALUES (2, 'a', 1) $$);
-- The last window before the end of the timestamp range cannot end inside it.
SELECT pg_temp.try($$ INSERT INTO err_src (id, k, v, at) VALUES (2, 'a', 1, '294276-12-31 12:00+00') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('err_p', '[{"id": 2, "k": "a", "v": 1, "at": "2026-10-29 11:00:00+00"},
                                                                {"id": 3, "k": "a", "v": 1, "at": null}]') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('err_p', '[{"id": 2, "k": "a", "v": 1, "at": "2026-10-29 11:00:00+00"},
                                                                {"id": 3, "k": "a", "v": 1}]') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('err_p', '{"id": 3, "k": "a", "v": 1, "at": "infinity"}') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('err_p', '{}') $$);
SELECT * FROM err_snapshot;
-- As psql shows them, COPY included:
INSERT INTO err_src (id, k, v, at) VALUES (2, 'a', 1, '2026-10-29 11:00+00'), (3, 'a', 1, NULL);
INSERT INTO err_src (id, k, v, at) VALUES (2, 'a', 1, '2026-10-29 11:00+00'), (3, 'a', 1, 'infinity');
COPY err_src (id, k, v, at) FROM stdin;
2	a	1	2026-10-29 11:00:00+00
3	a	1	\N
\.
COPY err_src (id, k, v, at) FROM stdin;
2	a	1	2026-10-29 11:00:00+00
3	a	1	infinity
\.
SELECT * FROM err_snapshot;
-- The same rows with good event times go through, and were not remembered as duplicates.
SELECT * FROM eventtime.ingest('err_p', '[{"id": 2, "k": "a", "v": 1, "at": "2026-10-29 11:00:00+00"},
                                         {"id": 3, "k": "a", "v": 1, "at": "2026-10-29 12:00:00+00"}]');
SELECT * FROM err_snapshot;

---------------------------------------------------------------------------------------------
-- ingest() documents: an object or an array of objects keyed by source column names.
---------------------------------------------------------------------------------------------
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('err_p', '42') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('err_p', '"a string"') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('err_p', 'null') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('err_p', 'true') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('err_p', '[{"id": 4, "k": "a", "at": "2026-10-29 11:00:00+00"}, 1, [2]]') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('err_p', '[null]') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('err_p', '{"id": 4, "k": "a", "at": "2026-10-29 11:00:00+00", "nope": 1}') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('err_p', '[{"id": 4, "at": "2026-10-29 11:00:00+00"}, {"K": "a"}]') $$);
-- Values PostgreSQL cannot read as the column's type: PostgreSQL's own errors.
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('err_p', '{"id": 4, "k": "a", "v": "ten", "at": "2026-10-29 11:00:00+00"}') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('err_p', '{"id": 4, "k": "a", "v": 1, "at": "tomorrow-ish"}') $$);
SELECT * FROM eventtime.ingest('err_p', '[1]');
SELECT * FROM eventtime.ingest('err_p', '{"id": 4, "k": "a", "at": "2026-10-29 11:00:00+00", "nope": 1}');
SELECT * FROM err_snapshot;

---------------------------------------------------------------------------------------------
-- History is append-only: UPDATE, DELETE and TRUNCATE are refused with 55000.
---------------------------------------------------------------------------------------------
SELECT * FROM eventtime.advance_watermark('err_p', '2026-10-30 00:00+00');
SELECT k, window_start, version, kind, n, total FROM err_p_history ORDER BY k, window_start, version;
SELECT format('_eventtime.%I', 'p' || id || '_history') AS history_table FROM _eventtime.pipeline WHERE name = 'err_p' \gset
SELECT pg_temp.try(format('UPDATE %s SET total = 0', :'history_table'));
SELECT pg_temp.try(format('UPDATE %s SET version = 9 WHERE version = 1', :'history_table'));
SELECT pg_temp.try(format('DELETE FROM %s', :'history_table'));
SELECT pg_temp.try(format('TRUNCATE %s', :'history_table'));
-- Through the views: UPDATE and DELETE reach the history table and are refused the same way.
SELECT pg_temp.try($$ UPDATE err_p_history SET total = 0 $$);
SELECT pg_temp.try($$ DELETE FROM err_p_history $$);
SELECT pg_temp.try($$ DELETE FROM err_p_sealed $$);
SELECT pg_temp.try($$ UPDATE err_p_latest SET total = 0 $$);
SELECT pg_temp.try($$ TRUNCATE err_p_history $$);
DELETE FROM err_p_history;
SELECT k, window_start, version, kind, n, total FROM err_p_history ORDER BY k, window_start, version;

---------------------------------------------------------------------------------------------
-- A pipeline whose source table was dropped: ingest is refused (55000); it can be dropped.
---------------------------------------------------------------------------------------------
CREATE TABLE err_gone (id integer, at timestamptz);
SELECT eventtime.create_pipeline('err_gone', 'err_gone', 'at', '1 day', event_id => 'id');
DROP TABLE err_gone;
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('err_gone', '{"id": 1, "at": "2026-10-29 00:00:00+00"}') $$);
SELECT eventtime.drop_pipeline('err_gone');
SELECT count(*) AS views_left FROM pg_class WHERE relname LIKE 'err\_gone\_%';

---------------------------------------------------------------------------------------------
-- Identifiers that need quoting work everywhere.
---------------------------------------------------------------------------------------------
CREATE TABLE "Order Events" ("Order ID" bigint, "Store Name" text, "Amount €" numeric, "Event Time" timestamptz);
SELECT eventtime.create_pipeline(
    name => 'Daily "Orders" ü', source => '"Order Events"', event_time => 'Event Time', key => ARRAY['Store Name'],
    event_id => 'Order ID', window_size => '1 day', allowed_lateness => '1 day',
    aggregates => 'count(*) AS "Orders", sum("Amount €") AS "Revenue ""net""", MAX("Amount €") top');
SELECT name, source, event_time, key_columns, event_id, aggregates FROM eventtime.pipelines WHERE name = 'Daily "Orders" ü';
SELECT c.relname FROM pg_class c WHERE c.relname LIKE 'Daily%' ORDER BY c.relname;
SELECT c.attname, c.type FROM (SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnum
               FROM pg_attribute a WHERE a.attrelid = '"Daily ""Orders"" ü_history"'::regclass AND a.attnum > 0) c
ORDER BY c.attnum;
INSERT INTO "Order Events" VALUES (1, 'Main St.', 10, '2026-10-29 09:00+00'), (2, 'Main St.', 20, '2026-10-29 10:00+00');
COPY "Order Events" ("Order ID", "Store Name", "Amount €", "Event Time") FROM stdin;
3	O'Hare "Terminal"	30	2026-10-29 11:00:00+00
\.
SELECT * FROM eventtime.ingest('Daily "Orders" ü', '[{"Order ID": 4, "Store Name": "Main St.", "Amount €": 40, "Event Time": "2026-10-29 12:00:00+00"},
                                                    {"Order ID": 1, "Store Name": "Main St.", "Amount €": 10, "Event Time": "2026-10-29 09:00:00+00"}]');
SELECT * FROM eventtime.advance_watermark('Daily "Orders" ü', '2026-10-30 00:00+00');
SELECT * FROM eventtime.ingest('Daily "Orders" ü', '{"Order ID": 5, "Store Name": "Main St.", "Amount €": 50, "Event Time": "2026-10-29 13:00:00+00"}');
SELECT * FROM eventtime.advance_watermark('Daily "Orders" ü', '2026-10-31 00:00+00');
SELECT * FROM eventtime.ingest('Daily "Orders" ü', '{"Order ID": 6, "Store Name": "Main St.", "Amount €": 60, "Event Time": "2026-10-29 14:00:00+00"}');
SELECT "Store Name", window_start, version, kind, "Orders", "Revenue ""net""", top, sealed
FROM "Daily ""Orders"" ü_history" ORDER BY "Store Name", window_start, version;
SELECT "Store Name", event_id, event_time, "row", window_end, watermark FROM "Daily ""Orders"" ü_refused" ORDER BY event_id;
SELECT name, open_windows, state_rows, firings, refused, duplicates FROM eventtime.pipelines WHERE name = 'Daily "Orders" ü';
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('Daily "Orders" ü', '"Order Events"', 'Event Time', '1 hour') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('Daily "Orders" ü', '{"store name": "x"}') $$);
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline('err_case', '"Order Events"', 'event time', '1 hour') $$);
SELECT eventtime.drop_pipeline('Daily "Orders" ü');
SELECT count(*) AS views_left FROM pg_class WHERE relname LIKE 'Daily%';
SELECT count(*) AS source_rows FROM "Order Events";

---------------------------------------------------------------------------------------------
-- Names cannot inject SQL: pipeline names, column names and aggregate names with quotes,
-- semicolons and comment markers are only names.
---------------------------------------------------------------------------------------------
CREATE TABLE err_victim (x integer);
INSERT INTO err_victim VALUES (1);
CREATE TABLE "err ""src""; DROP TABLE err_victim; --" (
    "a""b" text,
    "it's" bigint,
    "v); DROP TABLE err_victim; --" integer,
    "t"" timestamptz); DROP TABLE err_victim; --" timestamptz
);
SELECT eventtime.create_pipeline(
    name => 'x"; DROP TABLE err_victim; --',
    source => '"err ""src""; DROP TABLE err_victim; --"',
    event_time => 't" timestamptz); DROP TABLE err_victim; --',
    key => ARRAY['a"b'],
    event_id => 'it''s',
    window_size => '1 day',
    allowed_lateness => '1 day',
    aggregates => 'count(*) AS "n""); DROP TABLE err_victim; --", sum("v); DROP TABLE err_victim; --") AS "it''s $$ total"');
SELECT eventtime.create_pipeline(
    name => E'it''s a \\ "name"; DROP TABLE err_victim; --',
    source => '"err ""src""; DROP TABLE err_victim; --"',
    event_time => 't" timestamptz); DROP TABLE err_victim; --',
    window_size => '1 hour',
    aggregates => 'max("a""b") AS "$1"');
SELECT name, event_time, key_columns, event_id, aggregates FROM eventtime.pipelines
WHERE name IN ('x"; DROP TABLE err_victim; --', E'it''s a \\ "name"; DROP TABLE err_victim; --') ORDER BY name;
SELECT c.relname FROM pg_class c
WHERE c.relnamespace = 'err'::regnamespace AND (c.relname LIKE 'x"%' OR c.relname LIKE 'it''s%') ORDER BY c.relname;
INSERT INTO "err ""src""; DROP TABLE err_victim; --" VALUES ('k"1', 1, 5, '2026-10-29 01:00+00'), ('k"1', 1, 5, '2026-10-29 02:00+00');
SELECT * FROM eventtime.ingest('x"; DROP TABLE err_victim; --',
    '{"a\"b": "k\"1", "it''s": 2, "v); DROP TABLE err_victim; --": 7, "t\" timestamptz); DROP TABLE err_victim; --": "2026-10-29 03:00:00+00"}');
SELECT * FROM eventtime.advance_watermark('x"; DROP TABLE err_victim; --', 'infinity');
SELECT * FROM eventtime.advance_watermark(E'it''s a \\ "name"; DROP TABLE err_victim; --', 'infinity');
SELECT "a""b", window_start, version, "n""); DROP TABLE err_victim; --", "it's $$ total"
FROM "x""; DROP TABLE err_victim; --_history" ORDER BY 1, 2, 3;
SELECT window_start, version, "$1" FROM "it's a \ ""name""; DROP TABLE err_victim; --_latest" ORDER BY 1, 2;
SELECT obj_description('"x""; DROP TABLE err_victim; --_latest"'::regclass, 'pg_class') AS comment;
-- The table the names tried to drop is still there.
SELECT * FROM err_victim;
SELECT eventtime.drop_pipeline('x"; DROP TABLE err_victim; --');
SELECT eventtime.drop_pipeline(E'it''s a \\ "name"; DROP TABLE err_victim; --');
SELECT * FROM err_victim;
SELECT count(*) AS objects_left FROM pg_class c WHERE c.relname LIKE 'x"%' OR c.relname LIKE 'it''s%';

-- Nobody writes history or refused rows but the pipeline: not through the views either.
SELECT windows_purged FROM eventtime.advance_watermark('err_p', '2026-12-01 00:00+00');
INSERT INTO err_src (id, k, v, at) VALUES (77, 'a', 1, '2026-10-29 11:00+00');
SELECT k, event_id, window_start, watermark FROM err_p_refused ORDER BY event_id;
SELECT pg_temp.try($$INSERT INTO err_p_history (k, window_start, window_end, version, kind, n, total, watermark)
    VALUES ('a', '2026-10-29', '2026-10-30', 2, 'main', 999, 999, '2026-10-30')$$);
SELECT pg_temp.try($$INSERT INTO err_p_sealed (k, window_start, window_end, version, kind, n, total, watermark)
    VALUES ('a', '2026-10-29', '2026-10-30', 1, 'main', 999, 999, '2026-10-30')$$);
SELECT pg_temp.try($$DELETE FROM err_p_refused$$);
SELECT pg_temp.try($$UPDATE err_p_refused SET watermark = 'infinity'$$);
SELECT pg_temp.try(format('UPDATE _eventtime.%I SET watermark = %L', 'p' || id || '_refused', 'infinity'))
FROM _eventtime.pipeline WHERE name = 'err_p';
SELECT pg_temp.try(format('TRUNCATE _eventtime.%I', 'p' || id || '_refused'))
FROM _eventtime.pipeline WHERE name = 'err_p';
SELECT count(*) AS refused_rows_left FROM err_p_refused;

-- Keys and event ids are grouped and deduplicated: their type needs an ordering.
CREATE TABLE err_json (id json, doc json, at timestamptz);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline('err_j', 'err_json', 'at', '1 day', event_id => 'id')$$);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline('err_j', 'err_json', 'at', '1 day', key => ARRAY['doc'])$$);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline('err_j', 'err_json', 'at', '1 day', key => NULL)$$);
SELECT eventtime.create_pipeline('err_j', 'err_json', 'at', '1 day', event_id => 'id');

---------------------------------------------------------------------------------------------
-- Clean up.
---------------------------------------------------------------------------------------------
DROP VIEW err_snapshot;
SELECT eventtime.drop_pipeline('err_p');
SELECT count(*) AS pipelines_left FROM eventtime.pipelines WHERE name LIKE 'err\_%';
SET client_min_messages = warning;
DROP SCHEMA err CASCADE;
RESET client_min_messages;
RESET search_path;
