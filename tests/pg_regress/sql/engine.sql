-- The ingest engine: a statement of several rows in open windows, without event ids, is grouped
-- in the trigger's own code. Its state must be what the SQL statement for many rows leaves (the
-- same rows ingested under REPEATABLE READ, which the engine leaves to SQL), for NULL keys,
-- several keys, a collation, every aggregate and their casts, calendar windows, and a statement
-- with more groups than the engine holds before it writes.
\i include/setup.sql

CREATE TABLE en_a (store text COLLATE "C", region int, qty int, big bigint, price numeric, w real,
                   took interval, name text, at timestamptz);
CREATE TABLE en_b (LIKE en_a INCLUDING ALL);
CREATE FUNCTION pg_temp.en_pipeline(p text, src text, size text) RETURNS void LANGUAGE sql AS $$
  SELECT eventtime.create_pipeline(name => p, source => src::regclass, event_time => 'at',
      key => ARRAY['store', 'region'], window_size => size::interval, allowed_lateness => '1 hour',
      aggregates => 'count(*) AS n, count(qty) AS qtys, sum(qty) AS qty, sum(big) AS big, sum(price) AS price,
                     sum(w) AS w, avg(qty) AS avg_qty, avg(w) AS avg_w, avg(took) AS avg_took,
                     min(name) AS first_name, max(name) AS last_name, min(at) AS first_at, max(price) AS top')
$$;
SELECT pg_temp.en_pipeline('en_a', 'en_a', '1 hour'), pg_temp.en_pipeline('en_b', 'en_b', '1 hour');
-- Calendar days in a zone with a DST change, and the same by SQL.
CREATE TABLE en_c (LIKE en_a INCLUDING ALL);
CREATE TABLE en_d (LIKE en_a INCLUDING ALL);
SELECT eventtime.create_pipeline(name => p, source => p::regclass, event_time => 'at', key => ARRAY['store'],
    window_size => '1 day', time_zone => 'Europe/Paris', aggregates => 'count(*) AS n, sum(price) AS price')
FROM unnest(ARRAY['en_c', 'en_d']) p;

-- Rows with NULL keys and NULL values, keys equal in "C" only if equal bytes, names whose least
-- depends on the collation, big sums past bigint, fractions, intervals.
CREATE TABLE en_rows AS
SELECT (ARRAY['a', 'A', 'b', NULL])[1 + i % 4] AS store,
       CASE WHEN i % 7 = 0 THEN NULL ELSE i % 3 END AS region,
       CASE WHEN i % 5 = 0 THEN NULL ELSE i END AS qty,
       9223372036854775807 - i AS big,
       (i * 1.25)::numeric AS price,
       (i / 3.0)::real AS w,
       make_interval(secs => i) AS took,
       (ARRAY['Zed', 'alpha', 'Émile', NULL])[1 + (i * 7) % 4] AS name,
       timestamptz '2026-03-28 12:00+00' + make_interval(mins => (i * 37) % 2880) AS at
FROM generate_series(1, 3000) i;

INSERT INTO en_a SELECT * FROM en_rows;
INSERT INTO en_c SELECT * FROM en_rows;
BEGIN ISOLATION LEVEL REPEATABLE READ;
INSERT INTO en_b SELECT * FROM en_rows;
INSERT INTO en_d SELECT * FROM en_rows;
COMMIT;
-- A second statement of this backend adds to its state rows. The engine took en_a's, SQL
-- en_b's: only en_b's PL/pgSQL function was called.
BEGIN;
SET LOCAL track_functions = 'pl';
INSERT INTO en_a SELECT * FROM en_rows WHERE qty % 2 = 0;
SELECT count(*) AS sql_calls FROM pg_stat_xact_user_functions f
JOIN _eventtime.pipeline p ON f.funcname = format('p%s_ingest_sql', p.id) WHERE p.name = 'en_a';
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SET LOCAL track_functions = 'pl';
INSERT INTO en_b SELECT * FROM en_rows WHERE qty % 2 = 0;
SELECT p.name, f.calls FROM pg_stat_xact_user_functions f
JOIN _eventtime.pipeline p ON f.funcname = format('p%s_ingest_sql', p.id) ORDER BY 1;
COMMIT;

-- After the firing, the two pipelines published the same versions.
SELECT p, (eventtime.advance_watermark(p, 'infinity')).windows_fired FROM unnest(ARRAY['en_a', 'en_b', 'en_c', 'en_d']) p;
SELECT count(*) AS windows, sum(n) AS rows FROM en_a_latest;
SELECT count(*) AS differ FROM (
  (SELECT store, region, window_start, window_end, version, n, qtys, qty, big, price, w, avg_qty, avg_w, avg_took, first_name, last_name, first_at, top FROM en_a_latest
   EXCEPT ALL
   SELECT store, region, window_start, window_end, version, n, qtys, qty, big, price, w, avg_qty, avg_w, avg_took, first_name, last_name, first_at, top FROM en_b_latest)
  UNION ALL
  (SELECT store, region, window_start, window_end, version, n, qtys, qty, big, price, w, avg_qty, avg_w, avg_took, first_name, last_name, first_at, top FROM en_b_latest
   EXCEPT ALL
   SELECT store, region, window_start, window_end, version, n, qtys, qty, big, price, w, avg_qty, avg_w, avg_took, first_name, last_name, first_at, top FROM en_a_latest)) d;
SELECT count(*) AS windows FROM en_c_latest;
SELECT count(*) AS differ FROM (
  (SELECT store, window_start, window_end, n, price FROM en_c_latest EXCEPT ALL SELECT store, window_start, window_end, n, price FROM en_d_latest)
  UNION ALL
  (SELECT store, window_start, window_end, n, price FROM en_d_latest EXCEPT ALL SELECT store, window_start, window_end, n, price FROM en_c_latest)) d;
-- The one window of 2026-03-29 in Paris is 23 hours long.
SELECT window_start, window_end - window_start AS length FROM en_c_latest WHERE store = 'a' ORDER BY 1;

-- A statement with a row in a fired window within its grace is the engine's too (see engine_late):
-- late version and counts as the SQL path writes them.
SELECT eventtime.drop_pipeline('en_c'), eventtime.drop_pipeline('en_d');
CREATE TABLE en_e (k int, v bigint, at timestamptz);
SELECT eventtime.create_pipeline(name => 'en_e', source => 'en_e', event_time => 'at', key => ARRAY['k'],
    window_size => '1 hour', allowed_lateness => '1 hour', aggregates => 'count(*) AS n, sum(v) AS total');
INSERT INTO en_e VALUES (1, 1, '2026-01-01 00:10+00'), (1, 2, '2026-01-01 01:10+00');
SELECT windows_fired FROM eventtime.advance_watermark('en_e', '2026-01-01 01:00+00');
SELECT * FROM eventtime.ingest('en_e', '[{"k": 1, "v": 10, "at": "2026-01-01 01:20+00"}, {"k": 1, "v": 20, "at": "2026-01-01 00:20+00"}]');
SELECT window_start, version, n, total FROM en_e_history ORDER BY 1, 2;
-- A row without an event time fails the statement, whatever came before it.
SELECT pg_temp.try($$INSERT INTO en_e VALUES (2, 1, '2026-01-01 01:30+00'), (2, 1, NULL)$$);

-- The engine holds up to 50,000 groups: a statement of more goes to SQL, whose grouping spills
-- past work_mem, and one of fewer is the engine's, whatever its number of rows. One of more groups
-- with a late row at its end: the engine writes nothing and SQL takes the whole statement.
BEGIN;
SET LOCAL track_functions = 'pl';
INSERT INTO en_e SELECT i % 49999, i, '2026-01-01 01:35+00' FROM generate_series(1, 99998) i;
SELECT count(*) AS sql_calls FROM pg_stat_xact_user_functions f
JOIN _eventtime.pipeline p ON f.funcname = format('p%s_ingest_sql', p.id) WHERE p.name = 'en_e';
INSERT INTO en_e SELECT i, i, '2026-01-01 01:40+00' FROM generate_series(1, 60001) i;
SELECT f.calls AS sql_calls FROM pg_stat_xact_user_functions f
JOIN _eventtime.pipeline p ON f.funcname = format('p%s_ingest_sql', p.id) WHERE p.name = 'en_e';
COMMIT;
SELECT * FROM eventtime.ingest('en_e', (SELECT jsonb_agg(jsonb_build_object('k', i, 'v', 1, 'at', CASE WHEN i = 60001 THEN '2026-01-01 00:40+00' ELSE '2026-01-01 01:50+00' END)) FROM generate_series(1, 60001) i));
SELECT windows_fired FROM eventtime.advance_watermark('en_e', 'infinity');
SELECT window_start, count(*) AS windows, sum(n) AS rows, sum(total) AS total, max(version) AS version
FROM en_e_latest GROUP BY 1 ORDER BY 1;
