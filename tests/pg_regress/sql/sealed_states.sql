-- Aggregates whose transition state is internal (stddev and variance of integers and numeric,
-- a user's aggregate written in C): the window state keeps the aggregate's serialization of it,
-- sealed; a statement's rows go through its transition function, partials meet through its
-- combine function, every version is its final function's result, equal to PostgreSQL's GROUP
-- BY of the rows it accounts for. The pipeline belongs to an ordinary role.
\i include/setup.sql
DO $$ BEGIN CREATE ROLE ss_owner; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
CREATE SCHEMA ss_app;
GRANT CREATE, USAGE ON SCHEMA ss_app TO ss_owner;
-- A user's aggregate of an internal state (only a superuser creates one).
CREATE AGGREGATE ss_app.nvar(numeric) (SFUNC = numeric_accum, STYPE = internal, FINALFUNC = numeric_var_samp,
    COMBINEFUNC = numeric_combine, SERIALFUNC = numeric_serialize, DESERIALFUNC = numeric_deserialize);
CREATE AGGREGATE ss_app.no_serial(numeric) (SFUNC = numeric_accum, STYPE = internal, FINALFUNC = numeric_var_samp,
    COMBINEFUNC = numeric_combine);
CREATE TABLE ss_app.ss_events (store text, at timestamptz, amount numeric, qty int, big bigint, ok boolean);
ALTER TABLE ss_app.ss_events OWNER TO ss_owner;
SET ROLE ss_owner;
\set saggs 'count(*) AS n, stddev(amount) AS sd, variance(qty) AS vq, var_pop(big) FILTER (WHERE ok) AS vp, stddev_pop(amount * qty) AS sp, ss_app.nvar(amount) AS nv, stddev_samp(qty::bigint + big) AS sb'
SELECT eventtime.create_pipeline('ss', 'ss_app.ss_events', 'at', '1 hour', key => ARRAY['store'], allowed_lateness => '1 hour',
    aggregates => :'saggs');
SELECT eventtime.create_pipeline('ss_s', 'ss_app.ss_events', 'at', session_gap => '10 minutes', key => ARRAY['store'],
    allowed_lateness => '1 hour', aggregates => :'saggs');
SELECT eventtime.create_pipeline('ss_h', 'ss_app.ss_events', 'at', '1 hour', window_slide => '30 minutes', key => ARRAY['store'],
    allowed_lateness => '1 hour', aggregates => :'saggs');
-- What each keeps: the sealed serialization, in bytea.
SELECT a->>'alias' AS aggregate, a->>'acc_type' AS state, a->'generic'->'serial'->>'serialfn' AS serialized_by
FROM _eventtime.pipeline p, jsonb_array_elements(p.definition->'aggregates') a WHERE p.name = 'ss' ORDER BY 1;
CREATE VIEW ss_app.ss_rows AS SELECT *, date_trunc('hour', at) AS hour FROM ss_app.ss_events;
\set sexpected 'count(*), stddev(amount), variance(qty), var_pop(big) FILTER (WHERE ok), stddev_pop(amount * qty), ss_app.nvar(amount), stddev_samp(qty::bigint + big)'
\set sgot 'n, sd, vq, vp, sp, nv, sb'
CREATE VIEW ss_app.ss_expected (store, window_start, :sgot) AS SELECT store, hour AS window_start, :sexpected FROM ss_app.ss_rows GROUP BY 1, 2;
CREATE VIEW ss_app.ss_got AS SELECT store, window_start, :sgot FROM ss_app.ss_latest;
-- A multi-row INSERT, single-row INSERTs and COPY; NULLs, big values, one-row windows.
INSERT INTO ss_app.ss_events VALUES ('a', '2026-01-01 10:05+00', 5.25, 2, 9000000000000000000, true),
                                    ('a', '2026-01-01 10:06+00', 5, 3, -9000000000000000000, true),
                                    ('a', '2026-01-01 10:07+00', 7.125, NULL, 12, false),
                                    ('b', '2026-01-01 10:08+00', NULL, NULL, NULL, NULL);
INSERT INTO ss_app.ss_events VALUES ('a', '2026-01-01 10:09+00', 1e20, 1, 1, true);
INSERT INTO ss_app.ss_events VALUES ('b', '2026-01-01 10:10+00', 2.5, 4, 7, true);
COPY ss_app.ss_events FROM stdin;
b	2026-01-01 10:20:00+00	2.5	5	8	t
a	2026-01-01 10:30:00+00	0.000001	6	\N	f
b	2026-01-01 11:10:00+00	3	7	2	t
c	2026-01-01 10:30:00+00	4	8	3	t
c	2026-01-01 10:45:00+00	-4	2	3	f
\.
SELECT store, n, sd, vq, vp, nv FROM ss_app.ss_provisional ORDER BY store, window_start;
SELECT windows_fired FROM eventtime.advance_watermark('ss', '2026-01-01 11:00+00');
SELECT windows_fired FROM eventtime.advance_watermark('ss_s', '2026-01-01 11:00+00');
SELECT count(*) AS differences FROM (
  (SELECT * FROM ss_app.ss_got EXCEPT SELECT * FROM ss_app.ss_expected WHERE window_start < '2026-01-01 11:00+00')
  UNION ALL
  (SELECT * FROM ss_app.ss_expected WHERE window_start < '2026-01-01 11:00+00' EXCEPT SELECT * FROM ss_app.ss_got)) d;
-- Late rows: a new version beside the sealed one, from the kept state and the rows (for
-- sessions, c's row at 10:38 merges its two sessions).
INSERT INTO ss_app.ss_events VALUES ('a', '2026-01-01 10:40+00', 5, 2, 3, true);
INSERT INTO ss_app.ss_events VALUES ('c', '2026-01-01 10:38+00', 1.5, 1, 1, true);
INSERT INTO ss_app.ss_events VALUES ('b', '2026-01-01 10:50+00', 9, 9, 9, true), ('b', '2026-01-01 10:51+00', -9, 1, 1, false);
SELECT store, version, kind, n, sd, vq, nv FROM ss_app.ss_history ORDER BY store, version;
SELECT count(*) AS differences FROM (
  (SELECT * FROM ss_app.ss_got EXCEPT SELECT * FROM ss_app.ss_expected WHERE window_start < '2026-01-01 11:00+00')
  UNION ALL
  (SELECT * FROM ss_app.ss_expected WHERE window_start < '2026-01-01 11:00+00' EXCEPT SELECT * FROM ss_app.ss_got)) d;
-- Past the grace: refused, then restated from the kept state and the refused row.
SELECT windows_fired FROM eventtime.advance_watermark('ss', '2026-01-01 13:00+00');
INSERT INTO ss_app.ss_events VALUES ('a', '2026-01-01 10:45+00', 100, 10, 10, true);
SELECT store, window_start FROM ss_app.ss_refused;
SELECT version, rows_folded FROM eventtime.restate('ss', '2026-01-01 10:00+00');
SELECT count(*) AS differences FROM (
  (SELECT * FROM ss_app.ss_got EXCEPT SELECT * FROM ss_app.ss_expected)
  UNION ALL
  (SELECT * FROM ss_app.ss_expected EXCEPT SELECT * FROM ss_app.ss_got)) d;
-- Sessions (merged from their members' kept states) and hopping windows.
SELECT count(*) > 0 AS fired FROM eventtime.advance_watermark('ss_s', '2026-01-02');
SELECT count(*) > 0 AS fired FROM eventtime.advance_watermark('ss_h', '2026-01-02');
SELECT count(*) AS session_differences FROM (
  SELECT s.store, s.window_start FROM ss_app.ss_s_latest s JOIN ss_app.ss_events e ON e.store = s.store AND e.at >= s.window_start AND e.at < s.window_end
  GROUP BY s.store, s.window_start, s.n, s.sd, s.vq, s.vp, s.sp, s.nv, s.sb
  HAVING ROW(s.n, s.sd, s.vq, s.vp, s.sp, s.nv, s.sb) IS DISTINCT FROM ROW(:sexpected)) d;
SELECT count(*) AS sessions, count(*) FILTER (WHERE kind = 'merged') AS merged FROM ss_app.ss_s_history;
SELECT count(*) AS differences FROM (
  (SELECT store, window_start, :sgot FROM ss_app.ss_h_latest
   EXCEPT
   SELECT e.store, w.s, :sexpected
   FROM ss_app.ss_events e, LATERAL (VALUES (date_bin('30 minutes', e.at, '2001-01-01')), (date_bin('30 minutes', e.at, '2001-01-01') - interval '30 minutes')) w(s)
   GROUP BY 1, 2)
  UNION ALL
  (SELECT e.store, w.s, :sexpected
   FROM ss_app.ss_events e, LATERAL (VALUES (date_bin('30 minutes', e.at, '2001-01-01')), (date_bin('30 minutes', e.at, '2001-01-01') - interval '30 minutes')) w(s)
   GROUP BY 1, 2
   EXCEPT SELECT store, window_start, :sgot FROM ss_app.ss_h_latest)) d;
RESET ROLE;

-- Bytes that no pipeline sealed never reach a deserialization function: made up, changed by
-- one bit, or the state of another aggregate (numeric_serialize's, given to variance(integer),
-- whose state numeric_poly_serialize writes).
CREATE FUNCTION pg_temp.helper(pname text, fn text) RETURNS text LANGUAGE sql AS
  $$ SELECT format('_eventtime.p%s_%s', id, fn) FROM _eventtime.pipeline WHERE name = pname $$;
CREATE TABLE pg_temp.kept (sd bytea);
GRANT SELECT ON pg_temp.kept TO ss_owner;
DO $$ BEGIN EXECUTE format('INSERT INTO pg_temp.kept SELECT "_et_a1" FROM _eventtime.%I WHERE "_et_a1" IS NOT NULL LIMIT 1',
    (SELECT 'p' || id || '_history' FROM _eventtime.pipeline WHERE name = 'ss')); END $$;
SELECT count(*) AS kept FROM pg_temp.kept;
SET ROLE ss_owner;
SELECT pg_temp.try(format('SELECT %s(%L::bytea)', pg_temp.helper('ss', 'a1_final'), '\x455473310000')) AS made_up;
SELECT pg_temp.try(format('SELECT %s(%L::bytea)', pg_temp.helper('ss', 'a1_final'),
    (SELECT set_byte(sd, length(sd) - 1, get_byte(sd, length(sd) - 1) # 1) FROM pg_temp.kept))) AS one_bit;
SELECT pg_temp.try(format('SELECT %s(%L::bytea)', pg_temp.helper('ss', 'a2_final'), (SELECT sd FROM pg_temp.kept))) AS another_aggregate;
SELECT pg_temp.try(format('SELECT %s(%L::bytea) IS NOT NULL', pg_temp.helper('ss', 'a1_final'), (SELECT sd FROM pg_temp.kept))) AS its_own;
-- The secret is the catalog owner's.
SELECT pg_temp.try('SELECT key FROM _eventtime.state_key') AS read_key;
RESET ROLE;

-- A state another server major sealed (made here with the key, as HMAC-SHA256 over what the
-- seal covers) is refused with what to do, and nothing else changes.
CREATE FUNCTION pg_temp.hmac(key bytea, msg bytea) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE k bytea := key || decode(repeat('00', 64 - length(key)), 'hex'); i bytea := k; o bytea := k;
BEGIN
  FOR n IN 0..63 LOOP
    i := set_byte(i, n, get_byte(k, n) # 54);
    o := set_byte(o, n, get_byte(k, n) # 92);
  END LOOP;
  RETURN sha256(o || sha256(i || msg));
END $$;
CREATE TABLE pg_temp.old AS
SELECT 'ETs1'::bytea || '\x000e'::bytea
       || pg_temp.hmac((SELECT key FROM _eventtime.state_key ORDER BY made LIMIT 1),
                       'ETs1'::bytea || '\x000e'::bytea || int4send(length(f)) || convert_to(f, 'UTF8') || substr(sd, 39))
       || substr(sd, 39) AS sd
FROM pg_temp.kept, (VALUES ('pg_catalog.numeric_serialize')) v(f);
GRANT SELECT ON pg_temp.old TO ss_owner;
SELECT substr(sd, 39) = substr((SELECT sd FROM pg_temp.kept), 39) AS same_serialization FROM pg_temp.old;
SET ROLE ss_owner;
SELECT pg_temp.try(format('SELECT %s(%L::bytea)', pg_temp.helper('ss', 'a1_final'), (SELECT sd FROM pg_temp.old))) AS other_major;
RESET ROLE;

-- What is refused, by name, with its SQLSTATE and a hint.
SET ROLE ss_owner;
SELECT a.list, pg_temp.try(format('SELECT eventtime.create_pipeline(%L, %L, %L, %L, aggregates => %L)',
                                  'ss_bad', 'ss_app.ss_events', 'at', '1 day', a.list)) AS result
FROM (VALUES
    (1, 'ss_app.no_serial(amount) AS s'),
    (2, 'ss_app.nvar(amount) FILTER (WHERE ok) AS s'),
    (4, 'json_object_agg(qty, qty) AS s')
) AS a(n, list)
ORDER BY a.n;
-- An aggregate its owner may not execute, kept as a state or as values: refused (42501).
RESET ROLE;
REVOKE EXECUTE ON FUNCTION ss_app.nvar(numeric) FROM PUBLIC;
SET ROLE ss_owner;
SELECT pg_temp.try($$SELECT eventtime.create_pipeline('ss_bad', 'ss_app.ss_events', 'at', '1 day', aggregates => 'ss_app.nvar(amount) AS s')$$) AS state,
       pg_temp.try($$SELECT eventtime.create_pipeline('ss_bad', 'ss_app.ss_events', 'at', '1 day', aggregates => 'ss_app.nvar(DISTINCT amount) AS s')$$) AS "values";
-- The helpers go with the pipelines.
DROP VIEW ss_app.ss_got, ss_app.ss_expected;
SELECT eventtime.drop_pipeline(p) FROM unnest(ARRAY['ss', 'ss_s', 'ss_h']) p;
RESET ROLE;
DROP VIEW ss_app.ss_rows;
SELECT count(*) AS helpers_left FROM pg_proc WHERE pronamespace = '_eventtime'::regnamespace AND proname ~ '^p[0-9]+_a[0-9]+_';
DROP SCHEMA ss_app CASCADE;
