-- The ingest engine with rows in fired windows within their grace (late rows): a statement of
-- several rows, open and late, is grouped in the trigger's own code, its late groups upserted
-- into their windows' late rows and written as late versions in one statement. What it leaves
-- must be what the SQL path leaves for the same rows (under REPEATABLE READ, which the engine
-- leaves to SQL): versions, their numbers and watermarks, counts, refused rows, with and without
-- event ids. A statement with a row past its grace is the engine's too: it refuses that row.
\i include/setup.sql

CREATE TABLE elt_a (store text, id bigint, qty int, at timestamptz);
CREATE TABLE elt_b (LIKE elt_a);
CREATE TABLE elt_c (LIKE elt_a);
CREATE TABLE elt_d (LIKE elt_a);
SELECT eventtime.create_pipeline(name => p, source => p::regclass, event_time => 'at',
    event_id => CASE WHEN p IN ('elt_a', 'elt_b') THEN 'id' END,
    key => ARRAY['store'], window_size => '1 hour', allowed_lateness => '3 hours',
    aggregates => 'count(*) AS n, sum(qty) AS qty, max(qty) AS top')
FROM unnest(ARRAY['elt_a', 'elt_b', 'elt_c', 'elt_d']) p;

-- Rows over five hours; the watermark then closes the first three, and every later statement
-- brings late rows into them (redeliveries among them), beside rows of open windows.
CREATE TABLE elt_rows AS
SELECT s AS stmt, (ARRAY['a', 'b', NULL])[1 + i % 3] AS store, (s * 1000 + i) % 1500 AS id, s * 10 + i AS qty,
       timestamptz '2026-05-01 00:00+00' + make_interval(mins => (i * 37 + s * 11) % 300) AS at
FROM generate_series(0, 5) s, generate_series(1, 400) i;
CREATE FUNCTION pg_temp.elt_load(s int, ps text[]) RETURNS TABLE (p text, accepted bigint, late bigint, refused bigint, duplicates bigint)
LANGUAGE sql AS $$
  SELECT p, i.* FROM unnest(ps) p,
    eventtime.ingest(p, (SELECT jsonb_agg(to_jsonb(r) - 'stmt') FROM elt_rows r WHERE r.stmt = s)) i
$$;
-- Calls of the PL/pgSQL functions of pipelines ps in this transaction (track_functions).
CREATE FUNCTION pg_temp.elt_sql_calls(ps text[]) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM pg_stat_xact_user_functions f
  JOIN _eventtime.pipeline p ON f.funcname = format('p%s_ingest_sql', p.id) WHERE p.name = ANY (ps)
$$;
-- elt_b and elt_d in REPEATABLE READ go to SQL; elt_a and elt_c to the engine.
BEGIN;
SET LOCAL track_functions = 'pl';
SELECT * FROM pg_temp.elt_load(0, ARRAY['elt_a', 'elt_c']);
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM pg_temp.elt_load(0, ARRAY['elt_b', 'elt_d']);
COMMIT;
SELECT p, (eventtime.advance_watermark(p, '2026-05-01 03:00+00')).windows_fired FROM unnest(ARRAY['elt_a', 'elt_b', 'elt_c', 'elt_d']) p;

BEGIN;
SET LOCAL track_functions = 'pl';
SELECT e.* FROM generate_series(1, 4) s, pg_temp.elt_load(s, ARRAY['elt_a', 'elt_c']) e;
SELECT pg_temp.elt_sql_calls(ARRAY['elt_a', 'elt_c']) AS sql_calls;
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT e.* FROM generate_series(1, 4) s, pg_temp.elt_load(s, ARRAY['elt_b', 'elt_d']) e;
COMMIT;

-- The watermark moves on: the first hour is now past its grace; a statement with a row of it is
-- the engine's, and refuses that row.
SELECT p, (eventtime.advance_watermark(p, '2026-05-01 04:30+00')).windows_fired FROM unnest(ARRAY['elt_a', 'elt_b', 'elt_c', 'elt_d']) p;
BEGIN;
SET LOCAL track_functions = 'pl';
SELECT * FROM pg_temp.elt_load(5, ARRAY['elt_a', 'elt_c']);
SELECT pg_temp.elt_sql_calls(ARRAY['elt_a', 'elt_c']) AS sql_calls;
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM pg_temp.elt_load(5, ARRAY['elt_b', 'elt_d']);
COMMIT;

-- The same history on both paths: every version, its number, kind and watermark.
SELECT p, (eventtime.advance_watermark(p, 'infinity')).windows_fired FROM unnest(ARRAY['elt_a', 'elt_b', 'elt_c', 'elt_d']) p;
SELECT kind, count(*) AS versions, max(version) AS last FROM elt_a_history GROUP BY 1 ORDER BY 1;
CREATE FUNCTION pg_temp.elt_differ(x text, y text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM ((SELECT store, window_start, version, kind, watermark, n, qty, top FROM %1$I
                   EXCEPT ALL SELECT store, window_start, version, kind, watermark, n, qty, top FROM %2$I)
                  UNION ALL (SELECT store, window_start, version, kind, watermark, n, qty, top FROM %2$I
                   EXCEPT ALL SELECT store, window_start, version, kind, watermark, n, qty, top FROM %1$I)) d',
                 x || '_history', y || '_history') INTO n;
  RETURN n;
END $$;
SELECT pg_temp.elt_differ('elt_a', 'elt_b') AS with_ids_differ, pg_temp.elt_differ('elt_c', 'elt_d') AS without_ids_differ;
-- Versions are gapless per window.
SELECT count(*) AS gaps FROM (
  SELECT version, row_number() OVER (PARTITION BY store, window_start ORDER BY version) AS rn FROM elt_a_history) v
WHERE version <> rn;
-- Without ids, the latest versions equal GROUP BY over every row.
SELECT count(*) AS differ FROM (
  (SELECT store, window_start, n, qty, top FROM elt_c_latest
   EXCEPT ALL
   SELECT store, date_bin('1 hour', at, 'epoch'), count(*), sum(qty), max(qty) FROM elt_rows
   WHERE NOT (stmt = 5 AND at < '2026-05-01 01:00+00') GROUP BY 1, 2)
  UNION ALL
  (SELECT store, date_bin('1 hour', at, 'epoch'), count(*), sum(qty), max(qty) FROM elt_rows
   WHERE NOT (stmt = 5 AND at < '2026-05-01 01:00+00') GROUP BY 1, 2
   EXCEPT ALL
   SELECT store, window_start, n, qty, top FROM elt_c_latest)) d;
SELECT count(*) AS refused FROM elt_c_refused;

-- Every window is now past its grace: a redelivery of statement 5 is refused whole, by the engine
-- as by SQL. With ids, the rows refused before are duplicates (a refused row's id is in the
-- ledger, on both paths alike).
BEGIN;
SET LOCAL track_functions = 'pl';
SELECT * FROM pg_temp.elt_load(5, ARRAY['elt_a', 'elt_c']);
SELECT pg_temp.elt_sql_calls(ARRAY['elt_a', 'elt_c']) AS sql_calls;
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM pg_temp.elt_load(5, ARRAY['elt_b', 'elt_d']);
COMMIT;
-- The same refused rows on both paths: keys, ids, event times, documents, windows, deadlines and
-- refusing watermarks.
CREATE FUNCTION pg_temp.elt_refused_differ(x text, y text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM ((SELECT store, event_id, event_time, "row", window_start, window_end, deadline, watermark FROM %1$I
                   EXCEPT ALL SELECT store, event_id, event_time, "row", window_start, window_end, deadline, watermark FROM %2$I)
                  UNION ALL (SELECT store, event_id, event_time, "row", window_start, window_end, deadline, watermark FROM %2$I
                   EXCEPT ALL SELECT store, event_id, event_time, "row", window_start, window_end, deadline, watermark FROM %1$I)) d',
                 x || '_refused', y || '_refused') INTO n;
  RETURN n;
END $$;
SELECT pg_temp.elt_refused_differ('elt_a', 'elt_b') AS with_ids_differ, pg_temp.elt_refused_differ('elt_c', 'elt_d') AS without_ids_differ;
SELECT p, (SELECT refused FROM eventtime.pipelines WHERE name = p) AS refused,
       (SELECT duplicates FROM eventtime.pipelines WHERE name = p) AS duplicates
FROM unnest(ARRAY['elt_a', 'elt_b', 'elt_c', 'elt_d']) p ORDER BY p;
-- A refused row keeps the source's row as it was when it arrived: columns added, then dropped,
-- after the engine kept its statement in this session.
ALTER TABLE elt_c ADD COLUMN note text DEFAULT 'n';
INSERT INTO elt_c VALUES ('z', 1, 1, '2026-05-01 00:10+00'), ('z', 2, 2, '2026-05-01 00:20+00');
ALTER TABLE elt_c DROP COLUMN note;
INSERT INTO elt_c VALUES ('z', 3, 3, '2026-05-01 00:30+00'), ('z', 4, 4, '2026-05-01 00:40+00');
SELECT event_time, "row", window_start, deadline FROM elt_c_refused WHERE store = 'z' ORDER BY event_time;

-- Statements of one row that the path for one row on time cannot take (a late row, a refused
-- row, redeliveries into a fired window and of a refused row) are the engine's too, and leave
-- what SQL leaves (elt_t, the same statements under REPEATABLE READ).
CREATE TABLE elt_s (LIKE elt_a);
CREATE TABLE elt_t (LIKE elt_a);
SELECT eventtime.create_pipeline(name => p, source => p::regclass, event_time => 'at', event_id => 'id',
    key => ARRAY['store'], window_size => '1 hour', allowed_lateness => '1 hour',
    aggregates => 'count(*) AS n, sum(qty) AS qty, max(qty) AS top')
FROM unnest(ARRAY['elt_s', 'elt_t']) p;
CREATE TABLE elt_one (n int, store text, id bigint, qty int, at timestamptz);
INSERT INTO elt_one VALUES (1, 'a', 1, 1, '2026-05-01 00:10+00'), (2, 'a', 2, 2, '2026-05-01 01:10+00'),
  (3, 'b', 3, 3, '2026-05-01 02:10+00'), (4, 'a', 4, 4, '2026-05-01 01:20+00'), (5, 'a', 5, 5, '2026-05-01 00:20+00'),
  (6, 'a', 2, 20, '2026-05-01 01:10+00'), (7, 'a', 5, 50, '2026-05-01 00:20+00'), (8, 'b', 8, 8, '2026-05-01 02:30+00');
SELECT p, i.* FROM unnest(ARRAY['elt_s', 'elt_t']) p,
  LATERAL eventtime.ingest(p, (SELECT jsonb_agg(to_jsonb(o) - 'n') FROM elt_one o WHERE o.n <= 3)) i;
SELECT p, (eventtime.advance_watermark(p, '2026-05-01 02:00+00')).windows_fired FROM unnest(ARRAY['elt_s', 'elt_t']) p;
BEGIN;
SET LOCAL track_functions = 'pl';
SELECT o.n, i.* FROM (SELECT * FROM elt_one WHERE n > 3 ORDER BY n) o,
  LATERAL eventtime.ingest('elt_s', to_jsonb(o) - 'n') i;
SELECT pg_temp.elt_sql_calls(ARRAY['elt_s']) AS sql_calls;
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT o.n, i.* FROM (SELECT * FROM elt_one WHERE n > 3 ORDER BY n) o,
  LATERAL eventtime.ingest('elt_t', to_jsonb(o) - 'n') i;
COMMIT;
SELECT store, window_start, version, kind, n, qty FROM elt_s_history ORDER BY window_start, store, version;
SELECT pg_temp.elt_differ('elt_s', 'elt_t') AS versions_differ, pg_temp.elt_refused_differ('elt_s', 'elt_t') AS refused_differ;
SELECT name, refused, duplicates FROM eventtime.pipelines WHERE name IN ('elt_s', 'elt_t') ORDER BY name;
