-- Provisional reads (SPEC §3, §7): <name>_provisional shows each window that has rows and has not
-- fired, with the aggregates of its accepted rows so far (duplicates not counted), and the
-- watermark it was read at; <name>_current is _latest and _provisional together. No version is
-- minted and nothing is published; a reader of the views needs no right on the catalog.
\i include/setup.sql

CREATE TABLE pv_orders (id bigint, store text, amount numeric, at timestamptz);
SELECT eventtime.create_pipeline(name => 'pv_daily', source => 'pv_orders', event_time => 'at',
    key => ARRAY['store'], event_id => 'id', window_size => '1 day', allowed_lateness => '1 day',
    aggregates => 'count(*) AS orders, sum(amount) AS revenue, avg(amount) AS mean, min(at) AS first');

-- Before any advance: every window with rows is provisional. A statement of many rows, single
-- rows from two connections' worth of statements, a redelivery and a NULL key.
INSERT INTO pv_orders SELECT g, CASE WHEN g % 2 = 0 THEN 'web' ELSE 'shop' END, g,
    timestamptz '2026-06-01 00:00+00' + g * interval '1 hour' FROM generate_series(1, 40) g;
INSERT INTO pv_orders VALUES (100, 'web', 7, '2026-06-01 12:30+00');
INSERT INTO pv_orders VALUES (100, 'web', 7, '2026-06-01 12:30+00');
INSERT INTO pv_orders VALUES (101, NULL, 3, '2026-06-02 08:00+00');
SELECT store, window_start, window_end, orders, revenue, round(mean, 4) AS mean, first, watermark
FROM pv_daily_provisional ORDER BY window_start, store NULLS FIRST;
-- The same as PostgreSQL's own GROUP BY over the distinct accepted rows.
SELECT store, date_trunc('day', at) AS window_start, count(*) AS orders, sum(amount) AS revenue
FROM (SELECT DISTINCT ON (id) * FROM pv_orders ORDER BY id) o GROUP BY 1, 2
EXCEPT SELECT store, window_start, orders, revenue FROM pv_daily_provisional;

-- The first day fires: it leaves _provisional for _latest; _current shows both, and a late row
-- makes a version, never a provisional row.
SELECT count(*) FROM eventtime.advance_watermark('pv_daily', '2026-06-02 00:00+00');
INSERT INTO pv_orders VALUES (102, 'web', 50, '2026-06-01 23:00+00');
SELECT store, window_start, version, kind, orders, revenue, sealed, watermark, fired_at IS NOT NULL AS fired, provisional
FROM pv_daily_current ORDER BY window_start, store NULLS FIRST, version;
-- explain shows the same values for an open window of a key, and none for a fired one.
SELECT window_start, state, rows_in_state, provisional FROM eventtime.explain('pv_daily', '2026-06-02 10:00+00', 'web');
SELECT window_start, state, provisional FROM eventtime.explain('pv_daily', '2026-06-02 10:00+00', NULL);
SELECT window_start, state, provisional FROM eventtime.explain('pv_daily', '2026-06-01 10:00+00', 'web');
SELECT window_start, state, provisional FROM eventtime.explain('pv_daily', '2026-06-03 10:00+00', 'web');
-- One window of one key, as a dashboard reads it.
SELECT orders, revenue FROM pv_daily_current WHERE store = 'web' AND window_start = '2026-06-02 00:00+00';
SELECT orders, revenue FROM pv_daily_provisional WHERE store IS NULL;

-- Writes through the views are refused.
SELECT pg_temp.try($$DELETE FROM pv_daily_provisional$$);
SELECT pg_temp.try($$UPDATE pv_daily_current SET orders = 0$$);

-- Nothing is provisional once the watermark is at infinity.
SELECT count(*) FROM eventtime.advance_watermark('pv_daily', 'infinity');
SELECT count(*) AS provisional FROM pv_daily_provisional;
SELECT count(*) FILTER (WHERE provisional) AS provisional, count(*) AS windows FROM pv_daily_current;


-- Sessions: an open session shows with its bounds so far, and grows.
CREATE TABLE pv_clicks (usr text, at timestamptz);
SELECT eventtime.create_pipeline(name => 'pv_visits', source => 'pv_clicks', event_time => 'at',
    key => ARRAY['usr'], session_gap => '30 minutes', allowed_lateness => '1 hour');
INSERT INTO pv_clicks VALUES ('ann', '2026-06-01 10:00+00'), ('ann', '2026-06-01 10:20+00'), ('bob', '2026-06-01 10:05+00');
SELECT usr, window_start, window_end, events FROM pv_visits_provisional ORDER BY 1, 2;
SELECT count(*) FROM eventtime.advance_watermark('pv_visits', '2026-06-01 10:40+00');
INSERT INTO pv_clicks VALUES ('ann', '2026-06-01 10:45+00');
SELECT usr, window_start, window_end, version, kind, events, provisional FROM pv_visits_current ORDER BY 1, 2, 3;

-- Roles: a reader granted SELECT on _provisional or _current alone reads them; nobody else
-- learns anything, through the views or the function behind them.
CREATE ROLE regress_pv_reader;
CREATE ROLE regress_pv_stranger;
CREATE TABLE pv_sales (region text, n int, at timestamptz);
SELECT eventtime.create_pipeline(name => 'pv_sales', source => 'pv_sales', event_time => 'at',
    key => ARRAY['region'], window_size => '1 hour', aggregates => 'sum(n) AS n');
INSERT INTO pv_sales VALUES ('north', 5, '2026-06-01 10:10+00'), ('north', 6, '2026-06-01 10:20+00');
GRANT SELECT ON pv_sales_current TO regress_pv_reader;
SELECT id AS pv_sales_id FROM _eventtime.pipeline WHERE name = 'pv_sales' \gset
SET ROLE regress_pv_reader;
SELECT region, window_start, n, provisional FROM pv_sales_current;
SELECT pg_temp.try($$SELECT * FROM pv_sales_provisional$$);
RESET ROLE;
SET ROLE regress_pv_stranger;
SELECT pg_temp.try($$SELECT * FROM pv_sales_current$$);
SELECT regexp_replace(pg_temp.try(format('SELECT _eventtime.provisional_watermark(%s)', :pv_sales_id)), '#[0-9]+', '#<id>') AS try;
SELECT pg_temp.try(format('SELECT _eventtime.upgrade_pipeline(%s)', :pv_sales_id));
RESET ROLE;

-- drop_pipeline drops the new views with the others.
SELECT eventtime.drop_pipeline(p) FROM unnest(ARRAY['pv_daily', 'pv_visits', 'pv_sales']) p;
SELECT count(*) AS views_left FROM pg_class WHERE relname LIKE 'pv\_%' AND relkind = 'v';
DROP ROLE regress_pv_reader;
DROP ROLE regress_pv_stranger;
