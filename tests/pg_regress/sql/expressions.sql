-- Aggregates over expressions of the source row, and FILTER: read by PostgreSQL's own parser,
-- every version equal to PostgreSQL's GROUP BY of the rows it accounts for.
\i include/setup.sql
CREATE SCHEMA ex_app;
CREATE FUNCTION ex_app.net(numeric) RETURNS numeric IMMUTABLE LANGUAGE sql AS 'SELECT $1 * 0.8';
CREATE TABLE ex_sales (id bigint, store text, at timestamptz, price numeric, qty int, ok boolean, note text);
-- The aggregates the example of the README asks for, and casts, CASE, a function of the user's.
SELECT eventtime.create_pipeline('ex', 'ex_sales', 'at', '1 hour', key => ARRAY['store'], allowed_lateness => '1 hour',
    aggregates => 'count(*) AS n, sum(price * qty) AS revenue, count(*) FILTER (WHERE ok) AS oks,
                   avg(qty) FILTER (WHERE NOT ok) AS bad_qty, max(upper(note)) AS top,
                   min(CASE WHEN qty > 1 THEN qty::numeric / 2 END) AS half, sum(ex_app.net(price)) AS net,
                   sum(qty) FILTER (WHERE note IS NOT NULL) AS noted');
-- The expressions as PostgreSQL deparsed them, every name qualified.
SELECT a->>'alias' AS aggregate, a->'expr'->>'sql' AS expr, a->'expr'->'columns' AS columns
FROM _eventtime.pipeline p, jsonb_array_elements(p.definition->'aggregates') a WHERE p.name = 'ex' ORDER BY 1;
-- A view of PostgreSQL's own answer over the rows each window accounts for.
CREATE VIEW ex_expected AS
SELECT store, date_trunc('hour', at) AS window_start, count(*) AS n, sum(price * qty) AS revenue,
       count(*) FILTER (WHERE ok) AS oks, avg(qty) FILTER (WHERE NOT ok) AS bad_qty, max(upper(note)) AS top,
       min(CASE WHEN qty > 1 THEN qty::numeric / 2 END) AS half, sum(price * 0.8) AS net,
       sum(qty) FILTER (WHERE note IS NOT NULL) AS noted
FROM ex_sales GROUP BY 1, 2;
-- Rows by a multi-row INSERT, a single-row INSERT (the single-row path) and COPY.
INSERT INTO ex_sales VALUES (1, 'a', '2026-01-01 10:05+00', 2.5, 4, true, 'x'), (2, 'a', '2026-01-01 10:10+00', 1, 3, false, 'y'),
                            (3, 'b', '2026-01-01 10:20+00', 10, 1, NULL, NULL), (4, NULL, '2026-01-01 10:25+00', 7, 2, false, 'n');
INSERT INTO ex_sales VALUES (5, 'a', '2026-01-01 10:15+00', 3, 1, false, 'z');
COPY ex_sales FROM stdin;
6	b	2026-01-01 10:40:00+00	4.5	3	t	w
7	b	2026-01-01 11:10:00+00	1	1	f	\N
\.
SELECT windows_fired FROM eventtime.advance_watermark('ex', '2026-01-01 11:00+00');
SELECT store, n, revenue, oks, bad_qty, top, half, net, noted FROM ex_latest ORDER BY store NULLS LAST;
-- Equal to the GROUP BY, both ways.
(SELECT store, window_start, n, revenue, oks, bad_qty, top, half, net, noted FROM ex_latest
 EXCEPT SELECT * FROM ex_expected WHERE window_start < '2026-01-01 11:00+00')
UNION ALL
(SELECT * FROM ex_expected WHERE window_start < '2026-01-01 11:00+00'
 EXCEPT SELECT store, window_start, n, revenue, oks, bad_qty, top, half, net, noted FROM ex_latest);
-- A late row (single-row path) and a late statement of two: new versions, still equal.
INSERT INTO ex_sales VALUES (8, 'a', '2026-01-01 10:30+00', 5, 2, true, 'zz');
INSERT INTO ex_sales VALUES (9, 'b', '2026-01-01 10:50+00', 2, 5, false, 'q'), (10, NULL, '2026-01-01 10:55+00', 1, 1, true, NULL);
SELECT store, version, kind, n, revenue, oks, bad_qty, top, half, net, noted FROM ex_history ORDER BY store NULLS LAST, version;
SELECT count(*) AS differences FROM (
  (SELECT store, window_start, n, revenue, oks, bad_qty, top, half, net, noted FROM ex_latest
   EXCEPT SELECT * FROM ex_expected WHERE window_start < '2026-01-01 11:00+00')
  UNION ALL
  (SELECT * FROM ex_expected WHERE window_start < '2026-01-01 11:00+00'
   EXCEPT SELECT store, window_start, n, revenue, oks, bad_qty, top, half, net, noted FROM ex_latest)) d;
-- Past the grace: refused, then restated; the restatement computes the expressions again from
-- the refused rows as they were stored.
SELECT windows_fired FROM eventtime.advance_watermark('ex', '2026-01-01 13:00+00');
INSERT INTO ex_sales VALUES (11, 'a', '2026-01-01 10:45+00', 100, 3, true, 'late');
SELECT store, window_start FROM ex_refused;
SELECT version, rows_folded FROM eventtime.restate('ex', '2026-01-01 10:00+00');
SELECT store, version, kind, n, revenue, oks, top, net FROM ex_latest WHERE store = 'a';
SELECT count(*) AS differences FROM (
  (SELECT store, window_start, n, revenue, oks, bad_qty, top, half, net, noted FROM ex_latest
   EXCEPT SELECT * FROM ex_expected)
  UNION ALL
  (SELECT * FROM ex_expected EXCEPT SELECT store, window_start, n, revenue, oks, bad_qty, top, half, net, noted FROM ex_latest)) d;

-- Sessions and hopping windows take expressions too.
CREATE TABLE ex_clicks (k text, at timestamptz, ms int, ok boolean);
SELECT eventtime.create_pipeline('ex_s', 'ex_clicks', 'at', session_gap => '10 minutes', key => ARRAY['k'],
    aggregates => 'count(*) FILTER (WHERE ok) AS oks, sum(ms / 1000.0) AS seconds, max(ms) FILTER (WHERE ms < 500) AS fast');
SELECT eventtime.create_pipeline('ex_h', 'ex_clicks', 'at', '1 hour', window_slide => '30 minutes', key => ARRAY['k'],
    aggregates => 'count(*) FILTER (WHERE ok) AS oks, sum(ms / 1000.0) AS seconds, max(ms) FILTER (WHERE ms < 500) AS fast');
INSERT INTO ex_clicks SELECT 'k' || (g % 3), '2026-01-01 10:00+00'::timestamptz + g * interval '2 minutes', g * 37 % 900, g % 2 = 0
FROM generate_series(1, 60) g;
SELECT count(*) AS fired FROM eventtime.advance_watermark('ex_s', '2026-01-02');
SELECT count(*) AS fired FROM eventtime.advance_watermark('ex_h', '2026-01-02');
SELECT k, oks, seconds, fast FROM ex_s_latest ORDER BY k;
SELECT k, count(*) FILTER (WHERE ok) AS oks, sum(ms / 1000.0) AS seconds, max(ms) FILTER (WHERE ms < 500) AS fast
FROM ex_clicks GROUP BY k ORDER BY k;
SELECT count(*) AS differences FROM (
  (SELECT k, window_start, oks, seconds, fast FROM ex_h_latest
   EXCEPT
   SELECT c.k, w.s, count(*) FILTER (WHERE ok), sum(ms / 1000.0), max(ms) FILTER (WHERE ms < 500)
   FROM ex_clicks c, LATERAL (VALUES (date_bin('30 minutes', c.at, '2001-01-01')), (date_bin('30 minutes', c.at, '2001-01-01') - interval '30 minutes')) w(s)
   GROUP BY 1, 2)
  UNION ALL
  (SELECT c.k, w.s, count(*) FILTER (WHERE ok), sum(ms / 1000.0), max(ms) FILTER (WHERE ms < 500)
   FROM ex_clicks c, LATERAL (VALUES (date_bin('30 minutes', c.at, '2001-01-01')), (date_bin('30 minutes', c.at, '2001-01-01') - interval '30 minutes')) w(s)
   GROUP BY 1, 2
   EXCEPT SELECT k, window_start, oks, seconds, fast FROM ex_h_latest)) d;

-- What an expression may not be: each refused by name, with its SQLSTATE.
SELECT a.list, pg_temp.try(format('SELECT eventtime.create_pipeline(%L, %L, %L, %L, aggregates => %L)',
                                  'ex_bad', 'ex_sales', 'at', '1 day', a.list)) AS result
FROM (VALUES
    (1, 'sum(price * random()) AS s'),
    (2, 'count(*) FILTER (WHERE at < now()) AS s'),
    (3, 'count(*) FILTER (WHERE note::timestamptz > at) AS s'),
    (4, 'sum((SELECT 1)) AS s'),
    (5, 'sum(sum(price)) AS s'),
    (6, 'sum(price) FILTER (WHERE qty) AS s'),
    (7, 'sum(nope * 2) AS s'),
    (8, 'sum(note || ''x'') AS s'),
    (9, 'count(DISTINCT store, qty) AS s'),
    (10, 'max(note ORDER BY at) AS s'),
    (11, 'sum(price) OVER () AS s'),
    (12, 'count(ex_sales.*) AS s'),
    (13, 'sum(generate_series(1, qty)) AS s'),
    (14, 'sum(net(price)) AS s'),
    (15, 'avg(note > ''a'') AS s'),
    (16, 'count(*) AS n FROM pg_class --'),
    (17, 'sum(ctid::text::point[0]) AS s')
) AS a(n, list)
ORDER BY a.n;
-- A column named by its table is the column; the source's own name qualifies it.
SELECT eventtime.create_pipeline('ex_q', 'ex_sales', 'at', '1 day', aggregates => 'sum(ex_sales.qty * 2) AS s');
SELECT a->'expr'->>'sql' AS expr FROM _eventtime.pipeline p, jsonb_array_elements(p.definition->'aggregates') a WHERE p.name = 'ex_q';
SELECT eventtime.drop_pipeline('ex_q');

-- What the expressions use stays: a drop, a rename or a move is refused, naming the pipeline;
-- other changes pass. (The first line of errors that name the trigger, whose number varies.)
SELECT split_part(pg_temp.try('DROP FUNCTION ex_app.net(numeric)'), E'\n', 1) AS try;
SET client_min_messages = warning;
SELECT pg_temp.try('DROP FUNCTION ex_app.net(numeric) CASCADE');
RESET client_min_messages;
SELECT pg_temp.try('ALTER FUNCTION ex_app.net(numeric) RENAME TO net2');
SELECT pg_temp.try('ALTER SCHEMA ex_app RENAME TO ex_app2');
CREATE SCHEMA ex_other;
SELECT pg_temp.try('ALTER FUNCTION ex_app.net(numeric) SET SCHEMA ex_other');
SELECT pg_temp.try('ALTER FUNCTION ex_app.net(numeric) COST 5');
SELECT pg_temp.try('ALTER TABLE ex_sales RENAME COLUMN qty TO quantity');
SELECT split_part(pg_temp.try('ALTER TABLE ex_sales DROP COLUMN ok'), E'\n', 1) AS try;
SELECT split_part(pg_temp.try('ALTER TABLE ex_sales ALTER COLUMN note TYPE varchar(10)'), E'\n', 1) AS try;
-- And ingest still works.
INSERT INTO ex_sales VALUES (12, 'c', '2026-01-01 13:30+00', 1, 2, true, 'ok');
SELECT n, revenue, net FROM ex_provisional WHERE store = 'c';

SELECT eventtime.drop_pipeline('ex');
SELECT eventtime.drop_pipeline('ex_s');
SELECT eventtime.drop_pipeline('ex_h');
-- With the pipeline gone, the function goes too.
DROP FUNCTION ex_app.net(numeric);
DROP VIEW ex_expected;
DROP TABLE ex_sales, ex_clicks;
DROP SCHEMA ex_app, ex_other;

-- A source column named r, as the ingest statement calls the row, is a column like any other:
-- the refused row's document is the whole row, with or without expressions.
CREATE TABLE ex_r (at timestamptz, r int);
SELECT eventtime.create_pipeline('ex_r', 'ex_r', 'at', '1 hour', aggregates => 'sum(r * 2) AS s');
SELECT eventtime.create_pipeline('ex_r2', 'ex_r', 'at', '1 hour', aggregates => 'sum(r) AS s');
INSERT INTO ex_r VALUES ('2026-01-01 10:00+00', 1);
SELECT count(*) FROM eventtime.advance_watermark('ex_r', '2026-01-01 12:00+00');
SELECT count(*) FROM eventtime.advance_watermark('ex_r2', '2026-01-01 12:00+00');
INSERT INTO ex_r VALUES ('2026-01-01 10:30+00', 5);
SELECT row FROM ex_r_refused UNION ALL SELECT row FROM ex_r2_refused;
SELECT eventtime.drop_pipeline('ex_r');
SELECT eventtime.drop_pipeline('ex_r2');
