-- Aggregates with a combine function beyond the five (PostgreSQL's own and a user's): a
-- statement's rows through the transition function, partials through the combine function,
-- every version the final function's result, equal to PostgreSQL's GROUP BY of its rows.
\i include/setup.sql
CREATE SCHEMA cg_app;
-- A user's aggregate: the spread (max - min), whose state is a pair and whose final function
-- subtracts.
CREATE FUNCTION cg_app.spread_step(s double precision[], v double precision) RETURNS double precision[]
    IMMUTABLE STRICT LANGUAGE sql AS 'SELECT ARRAY[least(s[1], v), greatest(s[2], v)]';
CREATE FUNCTION cg_app.spread_comb(a double precision[], b double precision[]) RETURNS double precision[]
    IMMUTABLE STRICT LANGUAGE sql AS 'SELECT ARRAY[least(a[1], b[1]), greatest(a[2], b[2])]';
CREATE FUNCTION cg_app.spread_final(s double precision[]) RETURNS double precision
    IMMUTABLE STRICT LANGUAGE sql AS 'SELECT CASE WHEN s[1] <= s[2] THEN s[2] - s[1] END';
CREATE AGGREGATE cg_app.spread(double precision) (SFUNC = cg_app.spread_step, STYPE = double precision[],
    INITCOND = '{Infinity,-Infinity}', COMBINEFUNC = cg_app.spread_comb, FINALFUNC = cg_app.spread_final);
CREATE TABLE cg_events (store text, at timestamptz, amount double precision, ok boolean, qty int, ms real);
\set aggs 'count(*) AS n, stddev(amount) AS sd, variance(amount) FILTER (WHERE ok) AS var_ok, bool_and(ok) AS all_ok, bool_or(ok) AS any_ok, every(qty > 1) AS big, bit_or(qty) AS bits, bit_xor(qty * 3) AS xbits, stddev_pop(ms) AS sd_ms, cg_app.spread(amount) AS spread'
SELECT eventtime.create_pipeline('cg', 'cg_events', 'at', '1 hour', key => ARRAY['store'], allowed_lateness => '1 hour',
    aggregates => :'aggs');
SELECT eventtime.create_pipeline('cg_s', 'cg_events', 'at', session_gap => '10 minutes', key => ARRAY['store'],
    allowed_lateness => '1 hour', aggregates => :'aggs');
SELECT eventtime.create_pipeline('cg_h', 'cg_events', 'at', '1 hour', window_slide => '30 minutes', key => ARRAY['store'],
    allowed_lateness => '1 hour', aggregates => :'aggs');
-- What each aggregate keeps: its transition type.
SELECT a->>'alias' AS aggregate, a->>'acc_type' AS state, a->'generic'->>'aggregate' AS function,
       a->'generic'->>'bounded' AS bounded
FROM _eventtime.pipeline p, jsonb_array_elements(p.definition->'aggregates') a WHERE p.name = 'cg' ORDER BY 1;
-- PostgreSQL's own answer over the rows of each hour; floats compared to 10 places, as the
-- combine of partial moments and one pass over the rows may differ in the last bits.
CREATE FUNCTION pg_temp.r(double precision) RETURNS numeric LANGUAGE sql AS 'SELECT round($1::numeric, 10)';
CREATE VIEW cg_expected AS
SELECT store, date_trunc('hour', at) AS window_start, count(*) AS n, pg_temp.r(stddev(amount)) AS sd,
       pg_temp.r(variance(amount) FILTER (WHERE ok)) AS var_ok, bool_and(ok) AS all_ok, bool_or(ok) AS any_ok,
       every(qty > 1) AS big, bit_or(qty) AS bits, bit_xor(qty * 3) AS xbits, pg_temp.r(stddev_pop(ms)) AS sd_ms,
       cg_app.spread(amount) AS spread
FROM cg_events GROUP BY 1, 2;
CREATE VIEW cg_got AS
SELECT store, window_start, n, pg_temp.r(sd) AS sd, pg_temp.r(var_ok) AS var_ok, all_ok, any_ok, big, bits, xbits,
       pg_temp.r(sd_ms) AS sd_ms, spread
FROM cg_latest;
-- Rows by a multi-row INSERT, single-row INSERTs and COPY; NULLs in every column.
INSERT INTO cg_events VALUES ('a', '2026-01-01 10:05+00', 1.5, true, 1, 10), ('a', '2026-01-01 10:10+00', 2.5, false, 2, 20),
                             ('b', '2026-01-01 10:20+00', 10, NULL, 4, NULL), (NULL, '2026-01-01 10:25+00', 7, false, 2, 5);
INSERT INTO cg_events VALUES ('a', '2026-01-01 10:15+00', 7, true, 8, 30);
INSERT INTO cg_events VALUES ('a', '2026-01-01 10:20+00', NULL, NULL, NULL, NULL);
COPY cg_events FROM stdin;
b	2026-01-01 10:40:00+00	4.5	t	16	7.5
b	2026-01-01 11:10:00+00	-1	f	3	1
\.
SELECT store, n, round(sd::numeric, 6) AS sd, var_ok, all_ok, any_ok, big, bits, xbits, round(sd_ms::numeric, 6) AS sd_ms, spread
FROM cg_provisional ORDER BY store NULLS LAST, window_start;
SELECT windows_fired FROM eventtime.advance_watermark('cg', '2026-01-01 11:00+00');
SELECT count(*) AS differences FROM (
  (SELECT * FROM cg_got EXCEPT SELECT * FROM cg_expected WHERE window_start < '2026-01-01 11:00+00')
  UNION ALL
  (SELECT * FROM cg_expected WHERE window_start < '2026-01-01 11:00+00' EXCEPT SELECT * FROM cg_got)) d;
-- Late rows (one, then a statement of two): new versions beside the sealed ones, still equal.
INSERT INTO cg_events VALUES ('a', '2026-01-01 10:30+00', 100, false, 32, 2);
INSERT INTO cg_events VALUES ('b', '2026-01-01 10:50+00', 3, true, 64, 4), (NULL, '2026-01-01 10:55+00', 1, true, 1, 1);
SELECT store, version, kind, n, round(sd::numeric, 6) AS sd, all_ok, bits, spread FROM cg_history ORDER BY store NULLS LAST, version;
SELECT count(*) AS differences FROM (
  (SELECT * FROM cg_got EXCEPT SELECT * FROM cg_expected WHERE window_start < '2026-01-01 11:00+00')
  UNION ALL
  (SELECT * FROM cg_expected WHERE window_start < '2026-01-01 11:00+00' EXCEPT SELECT * FROM cg_got)) d;
-- Past the grace: refused, then restated from the refused row as it was stored.
SELECT windows_fired FROM eventtime.advance_watermark('cg', '2026-01-01 13:00+00');
INSERT INTO cg_events VALUES ('a', '2026-01-01 10:45+00', -50, true, 128, 3);
SELECT store, window_start FROM cg_refused;
SELECT version, rows_folded FROM eventtime.restate('cg', '2026-01-01 10:00+00');
SELECT count(*) AS differences FROM (
  (SELECT * FROM cg_got EXCEPT SELECT * FROM cg_expected)
  UNION ALL
  (SELECT * FROM cg_expected EXCEPT SELECT * FROM cg_got)) d;
-- Sessions and hopping windows: each session equal to the aggregates of its rows.
SELECT count(*) > 0 AS fired FROM eventtime.advance_watermark('cg_s', '2026-01-02');
SELECT count(*) > 0 AS fired FROM eventtime.advance_watermark('cg_h', '2026-01-02');
SELECT s.store, s.window_start, s.n, pg_temp.r(s.sd) IS NOT DISTINCT FROM pg_temp.r(stddev(e.amount)) AS sd, s.all_ok IS NOT DISTINCT FROM bool_and(e.ok) AS all_ok,
       s.bits = bit_or(e.qty) AS bits, s.spread = cg_app.spread(e.amount) AS spread, s.n = count(*) AS n_equal
FROM cg_s_latest s JOIN cg_events e ON e.store IS NOT DISTINCT FROM s.store AND e.at >= s.window_start AND e.at < s.window_end
GROUP BY s.store, s.window_start, s.n, s.sd, s.all_ok, s.bits, s.spread ORDER BY 1 NULLS LAST, 2;
SELECT count(*) AS differences FROM (
  (SELECT store, window_start, n, pg_temp.r(sd), bits, xbits, spread FROM cg_h_latest
   EXCEPT
   SELECT c.store, w.s, count(*), pg_temp.r(stddev(amount)), bit_or(qty), bit_xor(qty * 3), cg_app.spread(amount)
   FROM cg_events c, LATERAL (VALUES (date_bin('30 minutes', c.at, '2001-01-01')), (date_bin('30 minutes', c.at, '2001-01-01') - interval '30 minutes')) w(s)
   GROUP BY 1, 2)
  UNION ALL
  (SELECT c.store, w.s, count(*), pg_temp.r(stddev(amount)), bit_or(qty), bit_xor(qty * 3), cg_app.spread(amount)
   FROM cg_events c, LATERAL (VALUES (date_bin('30 minutes', c.at, '2001-01-01')), (date_bin('30 minutes', c.at, '2001-01-01') - interval '30 minutes')) w(s)
   GROUP BY 1, 2
   EXCEPT SELECT store, window_start, n, pg_temp.r(sd), bits, xbits, spread FROM cg_h_latest)) d;

-- Aggregates of two arguments (corr, covar_*, regr_*): each row's transition state from its
-- arguments, NULL in either skips the row, FILTER as PostgreSQL applies it.
CREATE TABLE cg2_events (store text, at timestamptz, y double precision, x int, ok boolean);
\set aggs2 'corr(y, x) AS r, covar_pop(y, x * 2) FILTER (WHERE ok) AS cv, regr_slope(y, x) AS slope, regr_count(y, x) AS n, regr_avgx(y, x) FILTER (WHERE false) AS none'
SELECT eventtime.create_pipeline('cg2', 'cg2_events', 'at', '1 hour', key => ARRAY['store'], allowed_lateness => '1 hour',
    aggregates => :'aggs2');
INSERT INTO cg2_events VALUES ('a', '2026-01-01 10:05+00', 1, 1, true), ('a', '2026-01-01 10:06+00', 2.5, 2, true),
                              ('b', '2026-01-01 10:07+00', 3, NULL, true), ('b', '2026-01-01 10:08+00', 4, 5, false);
INSERT INTO cg2_events VALUES ('a', '2026-01-01 10:09+00', 2, 4, false);
INSERT INTO cg2_events VALUES ('b', '2026-01-01 10:10+00', NULL, 7, true);
COPY cg2_events FROM stdin;
b	2026-01-01 10:20:00+00	9	6	t
a	2026-01-01 10:30:00+00	-3	3	t
\.
SELECT windows_fired FROM eventtime.advance_watermark('cg2', '2026-01-01 11:00+00');
INSERT INTO cg2_events VALUES ('a', '2026-01-01 10:40+00', 5, 8, true), ('b', '2026-01-01 10:41+00', 1, 1, true);
CREATE VIEW cg2_expected AS
SELECT store, date_trunc('hour', at) AS window_start, pg_temp.r(corr(y, x)) AS r,
       pg_temp.r(covar_pop(y, x * 2) FILTER (WHERE ok)) AS cv, pg_temp.r(regr_slope(y, x)) AS slope,
       regr_count(y, x) AS n, regr_avgx(y, x) FILTER (WHERE false) AS none
FROM cg2_events GROUP BY 1, 2;
SELECT store, version, kind, round(r::numeric, 6) AS r, round(cv::numeric, 6) AS cv, round(slope::numeric, 6) AS slope, n, none
FROM cg2_history ORDER BY store, version;
SELECT count(*) AS differences FROM (
  (SELECT store, window_start, pg_temp.r(r), pg_temp.r(cv), pg_temp.r(slope), n, none FROM cg2_latest
   EXCEPT SELECT * FROM cg2_expected)
  UNION ALL
  (SELECT * FROM cg2_expected
   EXCEPT SELECT store, window_start, pg_temp.r(r), pg_temp.r(cv), pg_temp.r(slope), n, none FROM cg2_latest)) d;
DROP VIEW cg2_expected;
SELECT eventtime.drop_pipeline('cg2');

-- The moments of stddev and its kinds stay within a bound at ingest, so that no firing can
-- overflow when it combines them: a statement beyond it fails with 22003 and applies nothing.
SELECT pg_temp.try($$INSERT INTO cg_events VALUES ('c', '2026-01-03 10:00+00', 1e141, true, 1, 1)$$) AS try;
SELECT count(*) AS rows_of_c FROM cg_events WHERE store = 'c';

-- What a pipeline cannot keep: each refused by name, with its SQLSTATE and a hint.
CREATE AGGREGATE cg_app.no_comb(double precision) (SFUNC = float8pl, STYPE = double precision);
SELECT a.list, pg_temp.try(format('SELECT eventtime.create_pipeline(%L, %L, %L, %L, aggregates => %L)',
                                  'cg_bad', 'cg_events', 'at', '1 day', a.list)) AS result
FROM (VALUES
    (2, 'jsonb_object_agg(qty, qty) AS s'),
    (3, 'regr_slope(amount) AS s'),
    (4, 'rank(1) WITHIN GROUP (ORDER BY amount) AS s'),
    (6, 'median(amount) AS s'),
    (7, 'spread(amount) AS s'),
    (8, 'bool_and(qty) AS s'),
    (9, 'cg_app.spread(amount ORDER BY amount) AS s'),
    (10, 'cg_app.no_comb(amount) AS s')
) AS a(n, list)
ORDER BY a.n;
-- A transition function that is not strict.
CREATE FUNCTION cg_app.lax_step(s bigint, v double precision) RETURNS bigint IMMUTABLE LANGUAGE sql AS 'SELECT s + 1';
CREATE AGGREGATE cg_app.lax(double precision) (SFUNC = cg_app.lax_step, STYPE = bigint, INITCOND = '0', COMBINEFUNC = int8pl);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline('cg_bad', 'cg_events', 'at', '1 day', aggregates => 'cg_app.lax(amount) AS s')$$) AS try;

-- The helper objects are the pipeline's: what the user's aggregate calls stays (a drop is
-- refused, naming the pipeline, with CASCADE too), a rename changes nothing, and
-- drop_pipeline takes them with it. (The first line of errors that name objects by number.)
SELECT split_part(pg_temp.try('DROP FUNCTION cg_app.spread_comb(double precision[], double precision[])'), E'\n', 1) AS try;
SET client_min_messages = warning;
SELECT pg_temp.try('DROP FUNCTION cg_app.spread_comb(double precision[], double precision[]) CASCADE');
SELECT split_part(pg_temp.try('DROP AGGREGATE cg_app.spread(double precision)'), E'\n', 1) AS try;
RESET client_min_messages;
ALTER FUNCTION cg_app.spread_final(double precision[]) RENAME TO spread_result;
INSERT INTO cg_events VALUES ('a', '2026-01-02 10:00+00', 4, true, 1, 1), ('a', '2026-01-02 10:01+00', 6, true, 1, 1);
SELECT store, n, spread FROM cg_provisional WHERE window_start = '2026-01-02 10:00+00';
DROP VIEW cg_got, cg_expected;
SELECT eventtime.drop_pipeline('cg');
SELECT eventtime.drop_pipeline('cg_s');
SELECT eventtime.drop_pipeline('cg_h');
SELECT count(*) AS helpers_left FROM pg_proc WHERE pronamespace = '_eventtime'::regnamespace AND proname ~ '^p[0-9]+_a[0-9]+_';
DROP AGGREGATE cg_app.spread(double precision);

-- Across roles: a role's aggregate in another role's pipeline. The aggregate's owner cannot
-- drop its functions from under the pipeline (it does not see the pipeline's catalog row, and is
-- refused all the same), the helpers follow the table to a new owner, and an owner who may not
-- execute a function of the aggregate cannot create the pipeline.
SET client_min_messages = warning;
DO $$
DECLARE r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['regress_cg_fn', 'regress_cg_owner', 'regress_cg_heir'] LOOP
        IF EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('DROP OWNED BY %I CASCADE', r);
            EXECUTE format('DROP ROLE %I', r);
        END IF;
    END LOOP;
END $$;
RESET client_min_messages;
CREATE ROLE regress_cg_fn;
CREATE ROLE regress_cg_owner;
CREATE ROLE regress_cg_heir;
CREATE SCHEMA cg_fn AUTHORIZATION regress_cg_fn;
CREATE SCHEMA cg_own AUTHORIZATION regress_cg_owner;
GRANT USAGE ON SCHEMA cg_fn TO regress_cg_owner, regress_cg_heir;
GRANT USAGE, CREATE ON SCHEMA cg_own TO regress_cg_heir;
SET ROLE regress_cg_fn;
CREATE FUNCTION cg_fn.top_step(s double precision, v double precision) RETURNS double precision
    IMMUTABLE STRICT LANGUAGE sql AS 'SELECT greatest(s, v)';
CREATE AGGREGATE cg_fn.top(double precision) (SFUNC = cg_fn.top_step, STYPE = double precision,
    COMBINEFUNC = cg_fn.top_step);
SET ROLE regress_cg_owner;
CREATE TABLE cg_own.readings (at timestamptz, v double precision);
SELECT eventtime.create_pipeline('cg_x', 'cg_own.readings', 'at', '1 hour', aggregates => 'cg_fn.top(v) AS top');
INSERT INTO cg_own.readings VALUES ('2026-01-01 10:00+00', 3), ('2026-01-01 10:10+00', 5);
SET ROLE regress_cg_fn;
SET client_min_messages = warning;
SELECT pg_temp.try('DROP FUNCTION cg_fn.top_step(double precision, double precision) CASCADE');
RESET client_min_messages;
RESET ROLE;
ALTER TABLE cg_own.readings OWNER TO regress_cg_heir;
SELECT DISTINCT r.rolname AS helpers_owner FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
WHERE p.pronamespace = '_eventtime'::regnamespace
  AND p.proname LIKE 'p' || (SELECT id FROM _eventtime.pipeline WHERE name = 'cg_x') || '\_a%';
SET ROLE regress_cg_heir;
INSERT INTO cg_own.readings VALUES ('2026-01-01 10:20+00', 4);
SELECT top FROM cg_own.cg_x_provisional;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION cg_fn.top_step(double precision, double precision) FROM PUBLIC;
SET ROLE regress_cg_heir;
SELECT pg_temp.try($$SELECT eventtime.create_pipeline('cg_y', 'cg_own.readings', 'at', '1 hour', aggregates => 'cg_fn.top(v) AS top')$$) AS try;
RESET ROLE;
SELECT eventtime.drop_pipeline('cg_x');
