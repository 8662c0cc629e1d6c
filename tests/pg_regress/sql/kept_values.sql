-- DISTINCT in any aggregate and the ordered-set aggregates: the window state keeps the values
-- (sorted and unique for DISTINCT), every version is the aggregate as written over them, equal
-- to PostgreSQL's GROUP BY of the rows it accounts for.
\i include/setup.sql
CREATE TABLE kv_events (store text, at timestamptz, customer text, amount numeric, ms double precision, ok boolean, d interval);
\set kaggs 'count(*) AS n, count(DISTINCT customer) AS customers, sum(DISTINCT amount) FILTER (WHERE ok) AS s, percentile_cont(0.9) WITHIN GROUP (ORDER BY ms) AS p90, percentile_cont(ARRAY[0.25, 0.5]) WITHIN GROUP (ORDER BY ms DESC) AS qs, percentile_disc(0.5) WITHIN GROUP (ORDER BY amount) AS med, mode() WITHIN GROUP (ORDER BY customer) AS top, array_agg(DISTINCT customer) AS cs, avg(DISTINCT amount * 2) AS a2, percentile_cont(0.5) WITHIN GROUP (ORDER BY d) AS d50, count(DISTINCT lower(customer)) FILTER (WHERE amount > 1) AS lc'
SELECT eventtime.create_pipeline('kv', 'kv_events', 'at', '1 hour', key => ARRAY['store'], allowed_lateness => '1 hour',
    aggregates => :'kaggs');
SELECT eventtime.create_pipeline('kv_s', 'kv_events', 'at', session_gap => '10 minutes', key => ARRAY['store'],
    allowed_lateness => '1 hour', aggregates => :'kaggs');
SELECT eventtime.create_pipeline('kv_h', 'kv_events', 'at', '1 hour', window_slide => '30 minutes', key => ARRAY['store'],
    allowed_lateness => '1 hour', aggregates => :'kaggs');
-- PostgreSQL's aggregates that collect their values keep every one, NULLs included.
SELECT eventtime.create_pipeline('kv_c', 'kv_events', 'at', '1 hour', key => ARRAY['store'], allowed_lateness => '1 hour',
    aggregates => 'count(*) AS n, array_agg(customer) AS cs, json_agg(amount) AS js, jsonb_agg(d) AS ds, array_agg(amount * 2) AS a2');
-- What each keeps: an array of its argument's values.
SELECT a->>'alias' AS aggregate, a->>'acc_type' AS state, a->'generic'->'values'->>'skip_nulls' AS skips_nulls
FROM _eventtime.pipeline p, jsonb_array_elements(p.definition->'aggregates') a WHERE p.name = 'kv' ORDER BY 1;
CREATE VIEW kv_rows AS SELECT *, date_trunc('hour', at) AS hour FROM kv_events;
\set kexpected 'count(*), count(DISTINCT customer), sum(DISTINCT amount) FILTER (WHERE ok), percentile_cont(0.9) WITHIN GROUP (ORDER BY ms), percentile_cont(ARRAY[0.25, 0.5]) WITHIN GROUP (ORDER BY ms DESC), percentile_disc(0.5) WITHIN GROUP (ORDER BY amount), mode() WITHIN GROUP (ORDER BY customer), array_agg(DISTINCT customer), avg(DISTINCT amount * 2), percentile_cont(0.5) WITHIN GROUP (ORDER BY d), count(DISTINCT lower(customer)) FILTER (WHERE amount > 1)'
\set kgot 'n, customers, s, p90, qs, med, top, cs, a2, d50, lc'
CREATE VIEW kv_expected (store, window_start, :kgot) AS SELECT store, hour AS window_start, :kexpected FROM kv_rows GROUP BY 1, 2;
CREATE VIEW kv_got AS SELECT store, window_start, :kgot FROM kv_latest;
-- A multi-row INSERT, single-row INSERTs and COPY; repeated values and NULLs.
INSERT INTO kv_events VALUES ('a', '2026-01-01 10:05+00', 'Ann', 5, 12.5, true, '1 minute'),
                             ('a', '2026-01-01 10:06+00', 'Bob', 5, 40, true, '3 minutes'),
                             ('a', '2026-01-01 10:07+00', 'ann', 7, 3, false, NULL),
                             ('b', '2026-01-01 10:08+00', NULL, NULL, NULL, NULL, '2 minutes');
INSERT INTO kv_events VALUES ('a', '2026-01-01 10:09+00', 'Bob', 1, 99, true, '10 seconds');
INSERT INTO kv_events VALUES ('b', '2026-01-01 10:10+00', 'Cy', 2.5, 7, true, NULL);
COPY kv_events FROM stdin;
b	2026-01-01 10:20:00+00	Cy	2.5	8	t	5 minutes
a	2026-01-01 10:30:00+00	Dee	0.5	1	f	\N
b	2026-01-01 11:10:00+00	Cy	3	2	t	1 minute
\.
SELECT store, n, customers, s, p90, qs, med, top, cs, a2, d50, lc FROM kv_provisional ORDER BY store, window_start;
SELECT windows_fired FROM eventtime.advance_watermark('kv', '2026-01-01 11:00+00');
SELECT count(*) AS differences FROM (
  (SELECT * FROM kv_got EXCEPT SELECT * FROM kv_expected WHERE window_start < '2026-01-01 11:00+00')
  UNION ALL
  (SELECT * FROM kv_expected WHERE window_start < '2026-01-01 11:00+00' EXCEPT SELECT * FROM kv_got)) d;
-- Late rows: a new version beside the sealed one, its values joined to those kept.
INSERT INTO kv_events VALUES ('a', '2026-01-01 10:40+00', 'Eve', 5, 50, true, '1 hour');
INSERT INTO kv_events VALUES ('b', '2026-01-01 10:50+00', 'Dee', 9, 1000, true, NULL), ('b', '2026-01-01 10:51+00', 'cy', 9, 0, false, NULL);
SELECT store, version, kind, n, customers, s, p90, med, top, cs FROM kv_history ORDER BY store, version;
SELECT count(*) AS differences FROM (
  (SELECT * FROM kv_got EXCEPT SELECT * FROM kv_expected WHERE window_start < '2026-01-01 11:00+00')
  UNION ALL
  (SELECT * FROM kv_expected WHERE window_start < '2026-01-01 11:00+00' EXCEPT SELECT * FROM kv_got)) d;
-- Past the grace: refused, then restated with the refused row joined to the values kept.
SELECT windows_fired FROM eventtime.advance_watermark('kv', '2026-01-01 13:00+00');
INSERT INTO kv_events VALUES ('a', '2026-01-01 10:45+00', 'Zed', 100, 5, true, '2 hours');
SELECT store, window_start FROM kv_refused;
SELECT version, rows_folded FROM eventtime.restate('kv', '2026-01-01 10:00+00');
SELECT count(*) AS differences FROM (
  (SELECT * FROM kv_got EXCEPT SELECT * FROM kv_expected)
  UNION ALL
  (SELECT * FROM kv_expected EXCEPT SELECT * FROM kv_got)) d;
-- Sessions (merged from the values of their members) and hopping windows.
SELECT count(*) > 0 AS fired FROM eventtime.advance_watermark('kv_s', '2026-01-02');
SELECT count(*) > 0 AS fired FROM eventtime.advance_watermark('kv_h', '2026-01-02');
SELECT count(*) AS session_differences FROM (
  SELECT s.store, s.window_start FROM kv_s_latest s JOIN kv_events e ON e.store = s.store AND e.at >= s.window_start AND e.at < s.window_end
  GROUP BY s.store, s.window_start, s.n, s.customers, s.s, s.p90, s.qs, s.med, s.top, s.cs, s.a2, s.d50, s.lc
  HAVING ROW(s.n, s.customers, s.s, s.p90, s.qs, s.med, s.top, s.cs, s.a2, s.d50, s.lc) IS DISTINCT FROM ROW(:kexpected)) d;
SELECT count(*) AS sessions FROM kv_s_latest;
SELECT count(*) AS differences FROM (
  (SELECT store, window_start, :kgot FROM kv_h_latest
   EXCEPT
   SELECT e.store, w.s, :kexpected
   FROM kv_events e, LATERAL (VALUES (date_bin('30 minutes', e.at, '2001-01-01')), (date_bin('30 minutes', e.at, '2001-01-01') - interval '30 minutes')) w(s)
   GROUP BY 1, 2)
  UNION ALL
  (SELECT e.store, w.s, :kexpected
   FROM kv_events e, LATERAL (VALUES (date_bin('30 minutes', e.at, '2001-01-01')), (date_bin('30 minutes', e.at, '2001-01-01') - interval '30 minutes')) w(s)
   GROUP BY 1, 2
   EXCEPT SELECT store, window_start, :kgot FROM kv_h_latest)) d;
-- The collecting aggregates: every value of the window, in no particular order (as in a GROUP BY
-- whose call has no ORDER BY), so both sides are compared sorted.
CREATE FUNCTION pg_temp.sorted(a anyarray) RETURNS anyarray IMMUTABLE LANGUAGE sql AS 'SELECT array_agg(x ORDER BY x) FROM unnest(a) x';
CREATE FUNCTION pg_temp.sorted(j jsonb) RETURNS jsonb IMMUTABLE LANGUAGE sql AS 'SELECT jsonb_agg(x ORDER BY x) FROM jsonb_array_elements(j) x';
SELECT windows_fired FROM eventtime.advance_watermark('kv_c', '2026-01-01 11:00+00');
INSERT INTO kv_events VALUES ('a', '2026-01-01 10:41+00', NULL, 4, 2, true, '5 seconds');
SELECT windows_fired FROM eventtime.advance_watermark('kv_c', '2026-01-02');
SELECT store, version, kind, n, pg_temp.sorted(cs) AS cs, pg_temp.sorted(js::jsonb) AS js FROM kv_c_history WHERE window_start = '2026-01-01 10:00+00' ORDER BY store, version;
SELECT count(*) AS differences FROM (
  (SELECT store, window_start, n, pg_temp.sorted(cs), pg_temp.sorted(js::jsonb), pg_temp.sorted(ds), pg_temp.sorted(a2) FROM kv_c_latest
   EXCEPT
   SELECT store, hour, count(*), pg_temp.sorted(array_agg(customer)), pg_temp.sorted(json_agg(amount)::jsonb), pg_temp.sorted(jsonb_agg(d)), pg_temp.sorted(array_agg(amount * 2)) FROM kv_rows GROUP BY 1, 2)
  UNION ALL
  (SELECT store, hour, count(*), pg_temp.sorted(array_agg(customer)), pg_temp.sorted(json_agg(amount)::jsonb), pg_temp.sorted(jsonb_agg(d)), pg_temp.sorted(array_agg(amount * 2)) FROM kv_rows GROUP BY 1, 2
   EXCEPT
   SELECT store, window_start, n, pg_temp.sorted(cs), pg_temp.sorted(js::jsonb), pg_temp.sorted(ds), pg_temp.sorted(a2) FROM kv_c_latest)) d;
-- What is refused, by name, with its SQLSTATE and a hint.
SELECT a.list, pg_temp.try(format('SELECT eventtime.create_pipeline(%L, %L, %L, %L, aggregates => %L)',
                                  'kv_bad', 'kv_events', 'at', '1 day', a.list)) AS result
FROM (VALUES
    (1, 'rank(3) WITHIN GROUP (ORDER BY ms) AS s'),
    (2, 'array_agg(ms ORDER BY ms) AS s'),
    (3, 'array_agg(DISTINCT customer) FILTER (WHERE ok) AS s'),
    (4, 'percentile_cont(ms / 1000) WITHIN GROUP (ORDER BY ms) AS s'),
    (5, 'count(DISTINCT ARRAY[ms]) AS s'),
    (6, 'string_agg(DISTINCT customer, '','') AS s'),
    (7, 'percentile_cont(random()) WITHIN GROUP (ORDER BY ms) AS s'),
    (8, 'percentile_cont(0.5) WITHIN GROUP (ORDER BY ms USING >) AS s')
) AS a(n, list)
ORDER BY a.n;
-- The helpers go with the pipelines.
DROP VIEW kv_got, kv_expected, kv_rows;
SELECT eventtime.drop_pipeline(p) FROM unnest(ARRAY['kv', 'kv_s', 'kv_h', 'kv_c']) p;
SELECT count(*) AS helpers_left FROM pg_proc WHERE pronamespace = '_eventtime'::regnamespace AND proname ~ '^p[0-9]+_a[0-9]+_';
