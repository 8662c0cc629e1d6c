-- The ingest engine with the pipeline's own ledger of event ids: a statement of several rows in
-- open windows, of at most 10,000 rows, is deduplicated and grouped in the trigger's own code, its
-- ids inserted into the ledger with one statement. What it leaves (versions, counts, the ledger) must be
-- what the SQL path leaves for the same rows (ingested under REPEATABLE READ, which the engine
-- leaves to SQL): duplicates inside a statement and across statements, NULL ids, an id in
-- two keys or windows (not a duplicate), NULL keys, the first row of a duplicate kept.
\i include/setup.sql

CREATE TABLE el_a (store text COLLATE "C", region int, id bigint, qty int, name text, at timestamptz);
CREATE TABLE el_b (LIKE el_a INCLUDING ALL);
SELECT eventtime.create_pipeline(name => p, source => p::regclass, event_time => 'at', event_id => 'id',
    key => ARRAY['store', 'region'], window_size => '1 hour', allowed_lateness => '1 hour',
    aggregates => 'count(*) AS n, sum(qty) AS qty, avg(qty) AS avg_qty, min(name) AS first_name, max(qty) AS top')
FROM unnest(ARRAY['el_a', 'el_b']) p;

-- 9,000 rows: ids repeat every 4,000 rows, in the same key and window (a duplicate) with another
-- quantity (the first one counts); every 11th id is NULL. The second statement's ids come again
-- in other keys and windows too (not duplicates).
CREATE TABLE el_rows AS
SELECT (ARRAY['a', 'A', 'b', NULL])[1 + i % 4] AS store,
       CASE WHEN i % 7 = 0 THEN NULL ELSE i % 2 END AS region,
       CASE WHEN i % 11 = 0 THEN NULL ELSE i % 4000 END AS id,
       i AS qty,
       (ARRAY['Zed', 'alpha', 'Émile', NULL])[1 + (i * 7) % 4] AS name,
       timestamptz '2026-03-28 12:00+00' + make_interval(mins => ((i % 4000) * 37) % 300) AS at
FROM generate_series(1, 9000) i;

BEGIN;
SET LOCAL track_functions = 'pl';
SELECT * FROM eventtime.ingest('el_a', (SELECT jsonb_agg(to_jsonb(r)) FROM el_rows r));
SELECT count(*) AS sql_calls FROM pg_stat_xact_user_functions f
JOIN _eventtime.pipeline p ON f.funcname = format('p%s_ingest_sql', p.id) WHERE p.name = 'el_a';
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM eventtime.ingest('el_b', (SELECT jsonb_agg(to_jsonb(r)) FROM el_rows r));
COMMIT;

-- A second statement redelivers half of them and brings new ids; a third, two rows of one id,
-- key and window: the first counts, the second is a duplicate.
BEGIN;
SET LOCAL track_functions = 'pl';
SELECT * FROM eventtime.ingest('el_a', (SELECT jsonb_agg(to_jsonb(r) || jsonb_build_object('id', r.id + 2000 * (r.qty % 2))) FROM el_rows r WHERE qty % 3 = 0));
SELECT * FROM eventtime.ingest('el_a', '[{"store": "z", "region": 1, "id": 1, "qty": 5, "at": "2026-03-28 12:30+00"},
                                        {"store": "z", "region": 1, "id": 1, "qty": 7, "at": "2026-03-28 12:40+00"}]');
SELECT count(*) AS sql_calls FROM pg_stat_xact_user_functions f
JOIN _eventtime.pipeline p ON f.funcname = format('p%s_ingest_sql', p.id) WHERE p.name = 'el_a';
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM eventtime.ingest('el_b', (SELECT jsonb_agg(to_jsonb(r) || jsonb_build_object('id', r.id + 2000 * (r.qty % 2))) FROM el_rows r WHERE qty % 3 = 0));
SELECT * FROM eventtime.ingest('el_b', '[{"store": "z", "region": 1, "id": 1, "qty": 5, "at": "2026-03-28 12:30+00"},
                                        {"store": "z", "region": 1, "id": 1, "qty": 7, "at": "2026-03-28 12:40+00"}]');
COMMIT;

-- The same entries in both ledgers, and the same duplicates counted.
SELECT format('_eventtime.p%s_ids', id) AS ids_a FROM _eventtime.pipeline WHERE name = 'el_a' \gset
SELECT format('_eventtime.p%s_ids', id) AS ids_b FROM _eventtime.pipeline WHERE name = 'el_b' \gset
SELECT count(*) AS entries FROM :ids_a;
SELECT count(*) AS differ FROM (
  (SELECT window_start, store, region, event_id FROM :ids_a EXCEPT ALL SELECT window_start, store, region, event_id FROM :ids_b)
  UNION ALL
  (SELECT window_start, store, region, event_id FROM :ids_b EXCEPT ALL SELECT window_start, store, region, event_id FROM :ids_a)) d;
SELECT name, duplicates FROM eventtime.pipelines WHERE name LIKE 'el\_%' ORDER BY 1;

-- A statement with a row past its grace at its end: the engine refuses that row, and its id
-- goes into the ledger with the others' (as on the SQL path), none counted as a duplicate.
SELECT p, (eventtime.advance_watermark(p, '2026-03-28 13:00+00')).windows_fired FROM unnest(ARRAY['el_a', 'el_b']) p;
SELECT * FROM eventtime.ingest('el_a', '[{"store": "y", "region": 1, "id": 70001, "qty": 1, "at": "2026-03-28 15:30+00"},
                                        {"store": "y", "region": 1, "id": 70002, "qty": 1, "at": "2026-03-28 15:31+00"},
                                        {"store": "y", "region": 1, "id": 70003, "qty": 1, "at": "2026-03-28 12:31+00"}]');
SELECT * FROM eventtime.ingest('el_b', '[{"store": "y", "region": 1, "id": 70001, "qty": 1, "at": "2026-03-28 15:30+00"},
                                        {"store": "y", "region": 1, "id": 70002, "qty": 1, "at": "2026-03-28 15:31+00"},
                                        {"store": "y", "region": 1, "id": 70003, "qty": 1, "at": "2026-03-28 12:31+00"}]');

-- A statement of more than 10,000 rows goes to SQL, which sorts the whole statement's ids.
BEGIN;
SET LOCAL track_functions = 'pl';
INSERT INTO el_a SELECT 'x', 1, i, 1, NULL, '2026-03-28 16:00+00' FROM generate_series(1, 10001) i;
SELECT f.calls AS sql_calls FROM pg_stat_xact_user_functions f
JOIN _eventtime.pipeline p ON f.funcname = format('p%s_ingest_sql', p.id) WHERE p.name = 'el_a';
COMMIT;
INSERT INTO el_b SELECT 'x', 1, i, 1, NULL, '2026-03-28 16:00+00' FROM generate_series(1, 10001) i;

-- After the firing, the two pipelines published the same versions.
SELECT p, (eventtime.advance_watermark(p, 'infinity')).windows_fired FROM unnest(ARRAY['el_a', 'el_b']) p;
SELECT count(*) AS windows, sum(n) AS rows, sum(qty) AS qty FROM el_a_latest;
SELECT store, window_start, n, qty FROM el_a_latest WHERE store IN ('x', 'y', 'z') ORDER BY 1, 2;
SELECT count(*) AS differ FROM (
  (SELECT store, region, window_start, window_end, version, n, qty, avg_qty, first_name, top FROM el_a_history
   EXCEPT ALL
   SELECT store, region, window_start, window_end, version, n, qty, avg_qty, first_name, top FROM el_b_history)
  UNION ALL
  (SELECT store, region, window_start, window_end, version, n, qty, avg_qty, first_name, top FROM el_b_history
   EXCEPT ALL
   SELECT store, region, window_start, window_end, version, n, qty, avg_qty, first_name, top FROM el_a_history)) d;
-- The versions equal GROUP BY over the first row of each (key, window, id) and the rows without id.
WITH got AS (
  SELECT store, region, window_start, n, qty FROM el_a_latest WHERE store IS DISTINCT FROM 'x' AND store IS DISTINCT FROM 'y' AND store IS DISTINCT FROM 'z'
), want AS (
  SELECT store, region, ws, count(*), sum(qty) FROM (
    SELECT DISTINCT ON (store, region, ws, coalesce(id, -qty - 100000 * o)) store, region, ws, qty
    FROM (SELECT *, date_bin('1 hour', at, 'epoch') AS ws, 0 AS o FROM el_rows
          UNION ALL
          SELECT store, region, id + 2000 * (qty % 2), qty, name, at, date_bin('1 hour', at, 'epoch'), 1 FROM el_rows WHERE qty % 3 = 0) r
    ORDER BY store, region, ws, coalesce(id, -qty - 100000 * o), o, qty) f
  GROUP BY 1, 2, 3
)
SELECT (SELECT count(*) FROM got) AS windows,
       (SELECT count(*) FROM ((TABLE got EXCEPT ALL TABLE want) UNION ALL (TABLE want EXCEPT ALL TABLE got)) d) AS differ;
