-- Two aggregates people run for distinct counts and percentiles, as Debian packages them for
-- PostgreSQL 15 (postgresql-15-hll, postgresql-15-tdigest): their states are internal, kept
-- sealed. hll_add_agg's union is exact register by register, so every version equals GROUP BY's
-- hll; a t-digest depends on the order it is combined in, so its percentiles are compared
-- within the digest's own error. tdigest(value, compression) has two arguments: the ingest
-- statements give them as one row of a composite type.
\i include/setup.sql
CREATE SCHEMA ht_ext;
CREATE EXTENSION hll SCHEMA ht_ext;
CREATE EXTENSION tdigest SCHEMA ht_ext;
CREATE TABLE ht_visits (page text, at timestamptz, uid text, ms double precision);
\set haggs 'count(*) AS n, ht_ext.hll_add_agg(ht_ext.hll_hash_text(uid)) AS users, ht_ext.tdigest(ms, 100) AS td, ht_ext.tdigest_percentile(ms, 100, 0.9) AS p90'
SELECT eventtime.create_pipeline('ht', 'ht_visits', 'at', '1 hour', key => ARRAY['page'], allowed_lateness => '1 hour',
    aggregates => :'haggs');
SELECT eventtime.create_pipeline('ht_s', 'ht_visits', 'at', session_gap => '10 minutes', key => ARRAY['page'],
    allowed_lateness => '1 hour', aggregates => :'haggs');
SELECT a->>'alias' AS aggregate, a->>'acc_type' AS state, a->'generic'->'serial'->>'serialfn' AS serialized_by,
       a->'generic'->>'arg_type' LIKE '%\_args' AS arguments_as_a_row
FROM _eventtime.pipeline p, jsonb_array_elements(p.definition->'aggregates') a WHERE p.name = 'ht' ORDER BY 1;
-- What each window of the rows gives, by GROUP BY.
CREATE VIEW ht_expected AS
SELECT page, date_trunc('hour', at) AS window_start, count(*) AS n, ht_ext.hll_add_agg(ht_ext.hll_hash_text(uid)) AS users,
       ht_ext.tdigest_percentile(ms, 100, 0.9) AS p90, percentile_cont(0.9) WITHIN GROUP (ORDER BY ms) AS exact_p90
FROM ht_visits GROUP BY 1, 2;
-- Each published window against it: rows, the hll's registers, the percentiles within 2% of the
-- values' range (0 to 1000), the digest's own and from its state.
CREATE VIEW ht_check AS
SELECT count(*) AS windows,
       count(*) FILTER (WHERE l.n = e.n) AS same_rows,
       count(*) FILTER (WHERE l.users OPERATOR(ht_ext.=) e.users) AS same_hll,
       count(*) FILTER (WHERE coalesce(abs(l.p90 - e.exact_p90) < 20 AND abs(l.p90 - e.p90) < 20,
                                       l.p90 IS NULL AND e.exact_p90 IS NULL)) AS p90_within,
       count(*) FILTER (WHERE coalesce(abs(d.p90 - e.exact_p90) < 20, d.p90 IS NULL AND e.exact_p90 IS NULL)) AS digest_within
FROM ht_latest l JOIN ht_expected e USING (page, window_start)
CROSS JOIN LATERAL (SELECT ht_ext.tdigest_percentile(x, 0.9) AS p90 FROM (VALUES (l.td)) v(x)) d;
-- A multi-row INSERT, single-row INSERTs and COPY.
INSERT INTO ht_visits SELECT 'p' || (i % 2), '2026-01-01 00:00+00'::timestamptz + (i % 120) * interval '1 minute',
                             'u' || (i % 37), (i * 7919) % 1000 FROM generate_series(1, 3000) i;
INSERT INTO ht_visits VALUES ('p0', '2026-01-01 00:10+00', 'zz', 999);
INSERT INTO ht_visits VALUES ('p2', '2026-01-01 00:20+00', NULL, NULL);
COPY ht_visits FROM stdin;
p1	2026-01-01 01:05:00+00	u1	10
p1	2026-01-01 01:06:00+00	new	20
\.
SELECT windows_fired FROM eventtime.advance_watermark('ht', '2026-01-01 02:00+00');
SELECT * FROM ht_check;
SELECT page, window_start, n, ht_ext.hll_cardinality(users) AS users FROM ht_latest ORDER BY 1, 2;
-- Late rows: a new version from the kept states and the rows.
INSERT INTO ht_visits VALUES ('p1', '2026-01-01 01:20+00', 'late', 1);
INSERT INTO ht_visits SELECT 'p0', '2026-01-01 01:30+00', 'v' || i, i FROM generate_series(1, 50) i;
SELECT page, window_start, version, kind, n, ht_ext.hll_cardinality(users) AS users FROM ht_history WHERE version > 1 ORDER BY 1, 2, 3;
SELECT * FROM ht_check;
-- Past the grace: refused, then restated.
SELECT windows_fired FROM eventtime.advance_watermark('ht', '2026-01-01 04:00+00');
INSERT INTO ht_visits VALUES ('p0', '2026-01-01 00:30+00', 'refused', 500);
SELECT page, window_start FROM ht_refused;
SELECT version, rows_folded FROM eventtime.restate('ht', '2026-01-01 00:00+00');
SELECT * FROM ht_check;
-- Sessions: each page's rows (a row every minute) make one session, equal to the GROUP BY of
-- its rows.
SELECT windows_fired > 0 AS fired FROM eventtime.advance_watermark('ht_s', '2026-01-01 05:00+00');
SELECT count(*) AS differences FROM ht_s_latest s
CROSS JOIN LATERAL (SELECT count(*) AS n, ht_ext.hll_add_agg(ht_ext.hll_hash_text(uid)) AS users,
                           percentile_cont(0.9) WITHIN GROUP (ORDER BY ms) AS exact_p90
                    FROM ht_visits e WHERE e.page = s.page AND e.at >= s.window_start AND e.at < s.window_end) e
WHERE s.n <> e.n OR NOT s.users OPERATOR(ht_ext.=) e.users OR abs(s.p90 - e.exact_p90) >= 20;
-- What is refused: a FILTER on an aggregate that is not known to ignore NULLs.
SELECT pg_temp.try($$SELECT eventtime.create_pipeline('ht_bad', 'ht_visits', 'at', '1 day',
    aggregates => 'ht_ext.tdigest(ms, 100) FILTER (WHERE ms > 1) AS td')$$) AS filtered;
-- The helpers, the arguments' row type included, go with the pipelines.
DROP VIEW ht_check, ht_expected;
SELECT eventtime.drop_pipeline(p) FROM unnest(ARRAY['ht', 'ht_s']) p;
SELECT count(*) AS helpers_left FROM pg_proc WHERE pronamespace = '_eventtime'::regnamespace AND proname ~ '^p[0-9]+_a[0-9]+_';
SELECT count(*) AS types_left FROM pg_type WHERE typnamespace = '_eventtime'::regnamespace AND typname ~ '^p[0-9]+_a[0-9]+_args';
DROP TABLE ht_visits;
DROP EXTENSION tdigest;
DROP EXTENSION hll;
DROP SCHEMA ht_ext;
