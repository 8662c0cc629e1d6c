-- create_pipeline, drop_pipeline and eventtime.pipelines: defaults, the four views and their
-- types, comments, window alignment, aggregate result types, and what dropping leaves behind.
\i include/setup.sql
CREATE SCHEMA pl;
SET search_path = pl, public;

-- Columns of a view or table, with their types, in order.
CREATE FUNCTION pg_temp.cols(rel text) RETURNS TABLE (col name, type text) LANGUAGE sql AS $$
    SELECT a.attname, format_type(a.atttypid, a.atttypmod)
    FROM pg_attribute a
    WHERE a.attrelid = rel::regclass AND a.attnum > 0 AND NOT a.attisdropped
    ORDER BY a.attnum
$$;
-- What a pipeline left in the database, by kind, with internal names made id-independent.
CREATE FUNCTION pg_temp.objects(pipeline_id int) RETURNS TABLE (kind text, object text) LANGUAGE sql AS $$
    SELECT 'internal table', replace(c.relname, 'p' || pipeline_id || '_', 'p<id>_')
    FROM pg_class c WHERE c.relnamespace = '_eventtime'::regnamespace AND c.relkind = 'r'
      AND c.relname LIKE 'p' || pipeline_id || '\_%'
    UNION ALL
    SELECT 'internal function', replace(p.proname, 'p' || pipeline_id || '_', 'p<id>_')
    FROM pg_proc p WHERE p.pronamespace = '_eventtime'::regnamespace AND p.proname LIKE 'p' || pipeline_id || '\_%'
    UNION ALL
    SELECT 'trigger on ' || t.tgrelid::regclass, replace(t.tgname, 'p' || pipeline_id, 'p<id>')
    FROM pg_trigger t WHERE NOT t.tgisinternal AND t.tgname LIKE '%\_p' || pipeline_id
    ORDER BY 1, 2
$$;

CREATE TABLE orders (order_id bigint, store text, amount numeric, qty integer, ordered_at timestamptz);
INSERT INTO orders VALUES (1, 'web', 10, 1, '2026-10-28 09:00+00');   -- before any pipeline

---------------------------------------------------------------------------------------------
-- Defaults: no key, no event id, lateness 0, origin 1970-01-01 UTC, 'count(*) AS events'.
---------------------------------------------------------------------------------------------
SELECT eventtime.create_pipeline('pl_defaults', 'orders', 'ordered_at', '1 day');
SELECT name, source, event_time, key_columns, event_id, window_kind, window_size, window_origin,
       allowed_lateness, aggregates, watermark, open_windows, state_rows, firings, refused, duplicates,
       created_at IS NOT NULL AS has_created_at
FROM eventtime.pipelines WHERE name = 'pl_defaults';
-- The four views sit beside the source table.
SELECT c.relname, c.relkind FROM pg_class c
WHERE c.relnamespace = 'pl'::regnamespace AND c.relname LIKE 'pl\_defaults\_%' ORDER BY c.relname;
SELECT * FROM pg_temp.cols('pl_defaults_history');
SELECT * FROM pg_temp.cols('pl_defaults_latest');
SELECT * FROM pg_temp.cols('pl_defaults_sealed');
SELECT * FROM pg_temp.cols('pl_defaults_refused');
-- Every view has a comment.
SELECT c.relname, obj_description(c.oid, 'pg_class') AS comment FROM pg_class c
WHERE c.relnamespace = 'pl'::regnamespace AND c.relname LIKE 'pl\_defaults\_%' ORDER BY c.relname;
-- So do the public functions and the introspection view.
SELECT p.oid::regprocedure AS function, obj_description(p.oid, 'pg_proc') IS NOT NULL AS has_comment
FROM pg_proc p WHERE p.pronamespace = 'eventtime'::regnamespace ORDER BY p.oid::regprocedure::text;
SELECT obj_description('eventtime.pipelines'::regclass, 'pg_class') AS comment;
-- The columns of eventtime.pipelines.
SELECT * FROM pg_temp.cols('eventtime.pipelines');

-- The row inserted before the pipeline existed is not part of it; the next ones are.
INSERT INTO orders VALUES (2, 'web', 20, 2, '2026-10-29 09:00+00'), (3, 'shop', 30, 3, '2026-10-29 23:59:59.999999+00');
SELECT open_windows, state_rows FROM eventtime.pipelines WHERE name = 'pl_defaults';
SELECT * FROM eventtime.advance_watermark('pl_defaults', '2026-10-30 00:00+00');
SELECT window_start, window_end, version, kind, events, sealed, watermark, fired_at IS NOT NULL AS fired
FROM pl_defaults_history ORDER BY window_start, version;
-- Lateness 0: a row for the fired day is refused at once.
INSERT INTO orders VALUES (4, 'web', 40, 4, '2026-10-29 12:00+00');
SELECT event_id, event_time, "row", window_start, window_end, deadline, watermark, refused_at IS NOT NULL AS refused
FROM pl_defaults_refused ORDER BY event_time;

---------------------------------------------------------------------------------------------
-- A full definition, with named arguments, as in SPEC §3.
---------------------------------------------------------------------------------------------
SELECT eventtime.create_pipeline(
    name             => 'pl_full',
    source           => 'orders',
    event_time       => 'ordered_at',
    key              => ARRAY['store'],
    event_id         => 'order_id',
    window_size      => interval '1 day',
    allowed_lateness => interval '24 hours',
    aggregates       => 'count(*) AS orders, sum(amount) AS revenue'
);
SELECT name, source, event_time, key_columns, event_id, window_size, window_origin, allowed_lateness, aggregates, watermark
FROM eventtime.pipelines WHERE name LIKE 'pl\_%' ORDER BY name;
SELECT * FROM pg_temp.cols('pl_full_history');
SELECT * FROM pg_temp.cols('pl_full_latest');
SELECT * FROM pg_temp.cols('pl_full_sealed');
SELECT * FROM pg_temp.cols('pl_full_refused');
SELECT c.relname, obj_description(c.oid, 'pg_class') AS comment FROM pg_class c
WHERE c.relnamespace = 'pl'::regnamespace AND c.relname LIKE 'pl\_full\_%' ORDER BY c.relname;

---------------------------------------------------------------------------------------------
-- Two pipelines on one source table: each sees every row inserted after its creation.
---------------------------------------------------------------------------------------------
INSERT INTO orders VALUES (5, 'web', 50, 5, '2026-10-30 10:00+00'), (6, 'shop', 60, 6, '2026-10-30 11:00+00'),
                          (7, 'web', 70, 7, '2026-10-30 12:00+00');
SELECT * FROM eventtime.advance_watermark('pl_defaults', '2026-10-31 00:00+00');
SELECT * FROM eventtime.advance_watermark('pl_full', '2026-10-31 00:00+00');
SELECT window_start, version, kind, events FROM pl_defaults_history ORDER BY window_start, version;
SELECT store, window_start, version, kind, orders, revenue, sealed, watermark FROM pl_full_history ORDER BY store, window_start, version;
SELECT name, watermark, open_windows, state_rows, firings, refused, duplicates FROM eventtime.pipelines WHERE name LIKE 'pl\_%' ORDER BY name;
-- The source table keeps every row it was given.
SELECT * FROM orders ORDER BY order_id;

---------------------------------------------------------------------------------------------
-- Window alignment: daily windows from an origin at 06:00 run 06:00 to 06:00.
---------------------------------------------------------------------------------------------
CREATE TABLE readings (sensor text, val double precision, at timestamptz);
SELECT eventtime.create_pipeline(name => 'pl_six', source => 'readings', event_time => 'at',
    window_size => '1 day', window_origin => '2000-01-01 06:00+00', aggregates => 'count(*) AS n, min(at) AS first, max(at) AS last');
SELECT eventtime.create_pipeline(name => 'pl_midnight', source => 'readings', event_time => 'at',
    window_size => '1 day', aggregates => 'count(*) AS n, min(at) AS first, max(at) AS last');
-- An origin in the future aligns the same way; 15-minute windows with an origin at :05.
SELECT eventtime.create_pipeline(name => 'pl_quarter', source => 'readings', event_time => 'at',
    window_size => '15 minutes', window_origin => '2100-01-01 00:05+00', aggregates => 'count(*) AS n');
-- The session time zone does not move windows: origins and sizes are instants and durations.
SET TimeZone = 'America/New_York';
INSERT INTO readings VALUES
    ('a', 1, '2026-10-29 05:59:59.999999+00'), ('a', 2, '2026-10-29 06:00+00'), ('a', 3, '2026-10-29 23:00+00'),
    ('a', 4, '2026-10-30 05:00+00'), ('a', 5, '2026-10-30 06:00+00'), ('a', 6, '2026-10-29 00:05+00'),
    ('a', 7, '2026-10-29 00:19:59+00'), ('a', 8, '2026-10-29 00:20+00');
SET TimeZone = 'UTC';
SELECT * FROM eventtime.advance_watermark('pl_six', 'infinity');
SELECT * FROM eventtime.advance_watermark('pl_midnight', 'infinity');
SELECT * FROM eventtime.advance_watermark('pl_quarter', 'infinity');
SELECT window_start, window_end, n, first, last FROM pl_six_history ORDER BY window_start;
SELECT window_start, window_end, n, first, last FROM pl_midnight_history ORDER BY window_start;
SELECT window_start, window_end, n FROM pl_quarter_history ORDER BY window_start;
-- Hourly windows of 90 minutes from the default origin.
CREATE TABLE ticks (at timestamptz);
SELECT eventtime.create_pipeline('pl_ninety', 'ticks', 'at', '90 minutes');
INSERT INTO ticks VALUES ('2026-10-29 00:00+00'), ('2026-10-29 01:29:59+00'), ('2026-10-29 01:30+00'), ('1969-12-31 23:00+00');
SELECT * FROM eventtime.advance_watermark('pl_ninety', 'infinity');
SELECT window_start, window_end, events FROM pl_ninety_history ORDER BY window_start;

---------------------------------------------------------------------------------------------
-- Aggregate result types and values are PostgreSQL's own.
---------------------------------------------------------------------------------------------
CREATE TABLE typed (
    k    text,
    i2   smallint,
    i4   integer,
    i8   bigint,
    num  numeric(10,2),
    f4   real,
    f8   double precision,
    iv   interval,
    tx   text,
    vc   varchar(20),
    ts   timestamptz,
    d    date,
    at   timestamptz
);
SELECT eventtime.create_pipeline(name => 'pl_types', source => 'typed', event_time => 'at', key => ARRAY['k'],
    window_size => '1 day', aggregates =>
    'count(*) AS n, count(tx) AS n_tx, sum(i2) AS sum_i2, sum(i4) AS sum_i4, sum(i8) AS sum_i8, sum(num) AS sum_num, '
    'sum(f4) AS sum_f4, sum(f8) AS sum_f8, sum(iv) AS sum_iv, '
    'avg(i2) AS avg_i2, avg(i4) AS avg_i4, avg(i8) AS avg_i8, avg(num) AS avg_num, avg(f4) AS avg_f4, avg(f8) AS avg_f8, avg(iv) AS avg_iv, '
    'min(i4) AS min_i4, max(num) AS max_num, min(tx) AS min_tx, max(tx) AS max_tx, max(vc) AS max_vc, '
    'min(ts) AS min_ts, max(d) AS max_d, min(iv) AS min_iv');
SELECT * FROM pg_temp.cols('pl_types_latest');
-- The same aggregates computed by PostgreSQL, for comparison.
CREATE VIEW typed_reference AS
SELECT k, count(*) AS n, count(tx) AS n_tx, sum(i2) AS sum_i2, sum(i4) AS sum_i4, sum(i8) AS sum_i8, sum(num) AS sum_num,
       sum(f4) AS sum_f4, sum(f8) AS sum_f8, sum(iv) AS sum_iv,
       avg(i2) AS avg_i2, avg(i4) AS avg_i4, avg(i8) AS avg_i8, avg(num) AS avg_num, avg(f4) AS avg_f4, avg(f8) AS avg_f8, avg(iv) AS avg_iv,
       min(i4) AS min_i4, max(num) AS max_num, min(tx) AS min_tx, max(tx) AS max_tx, max(vc) AS max_vc,
       min(ts) AS min_ts, max(d) AS max_d, min(iv) AS min_iv
FROM typed GROUP BY k;
SELECT r.col, r.type AS postgresql, p.type AS pipeline, r.type = p.type AS same
FROM pg_temp.cols('typed_reference') r LEFT JOIN pg_temp.cols('pl_types_latest') p USING (col)
ORDER BY r.col;
-- Values, in three statements so that partial results are merged, and with NULLs.
INSERT INTO typed VALUES
    ('a', 1, 10, 100, 1.25, 0.5, 0.25, '1 hour', 'pear', 'x', '2026-01-01 00:00+00', '2026-01-01', '2026-10-29 01:00+00'),
    ('a', 2, 20, 9223372036854775807, 2.50, 1.5, 0.5, '2 hours', 'apple', 'yy', '2026-01-02 00:00+00', '2026-01-02', '2026-10-29 02:00+00');
INSERT INTO typed VALUES
    ('a', NULL, NULL, 9223372036854775807, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '2026-10-29 03:00+00'),
    ('b', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '2026-10-29 04:00+00');
INSERT INTO typed VALUES
    ('a', 32767, 2147483647, 1, 3.33, 2, 1, '1 day 30 minutes', 'zebra', 'zz', '2025-12-31 00:00+00', '2025-12-31', '2026-10-29 05:00+00'),
    (NULL, 7, 7, 7, 7, 7, 7, '7 minutes', 'seven', '7', '2026-07-07 00:00+00', '2026-07-07', '2026-10-29 06:00+00');
SELECT * FROM eventtime.advance_watermark('pl_types', '2026-10-30 00:00+00');
\x on
SELECT k, window_start, window_end, version, kind, n, n_tx, sum_i2, sum_i4, sum_i8, sum_num, sum_f4, sum_f8, sum_iv,
       avg_i2, avg_i4, avg_i8, avg_num, avg_f4, avg_f8, avg_iv, min_i4, max_num, min_tx, max_tx, max_vc, min_ts, max_d, min_iv,
       sealed, watermark
FROM pl_types_latest ORDER BY k NULLS LAST;
\x off
-- Every published value equals PostgreSQL's over the same rows: no row of one is missing from
-- the other.
SELECT (SELECT count(*) FROM pl_types_latest) AS windows,
       (SELECT count(*) FROM (
            SELECT k, n, n_tx, sum_i2, sum_i4, sum_i8, sum_num, sum_f4, sum_f8, sum_iv, avg_i2, avg_i4, avg_i8, avg_num,
                   avg_f4, avg_f8, avg_iv, min_i4, max_num, min_tx, max_tx, max_vc, min_ts, max_d, min_iv
            FROM pl_types_latest
            EXCEPT ALL SELECT * FROM typed_reference) d) AS only_in_pipeline,
       (SELECT count(*) FROM (
            SELECT * FROM typed_reference
            EXCEPT ALL
            SELECT k, n, n_tx, sum_i2, sum_i4, sum_i8, sum_num, sum_f4, sum_f8, sum_iv, avg_i2, avg_i4, avg_i8, avg_num,
                   avg_f4, avg_f8, avg_iv, min_i4, max_num, min_tx, max_tx, max_vc, min_ts, max_d, min_iv
            FROM pl_types_latest) d) AS only_in_postgresql;

---------------------------------------------------------------------------------------------
-- drop_pipeline removes views, trigger, trigger function and internal tables; the source
-- table and its rows stay, and the other pipeline on the same table keeps working.
---------------------------------------------------------------------------------------------
SELECT id AS full_id FROM _eventtime.pipeline WHERE name = 'pl_full' \gset
SELECT * FROM pg_temp.objects(:full_id);
SELECT eventtime.drop_pipeline('pl_full');
SELECT * FROM pg_temp.objects(:full_id);
SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'pl'::regnamespace AND c.relname LIKE 'pl\_full%' ORDER BY 1;
SELECT count(*) AS catalog_rows FROM _eventtime.pipeline WHERE name = 'pl_full';
SELECT name FROM eventtime.pipelines WHERE name LIKE 'pl\_%' ORDER BY name;
SELECT count(*) AS source_rows FROM orders;
INSERT INTO orders VALUES (8, 'web', 80, 8, '2026-10-31 10:00+00');
SELECT count(*) AS source_rows FROM orders;
SELECT * FROM eventtime.advance_watermark('pl_defaults', '2026-11-01 00:00+00');
SELECT window_start, version, kind, events FROM pl_defaults_history ORDER BY window_start, version;
-- The name can be used again.
SELECT eventtime.create_pipeline('pl_full', 'orders', 'ordered_at', '1 hour');
SELECT name, window_size, watermark, firings FROM eventtime.pipelines WHERE name = 'pl_full';

---------------------------------------------------------------------------------------------
-- A source table in another schema: the views go beside it, not on the search path.
---------------------------------------------------------------------------------------------
CREATE SCHEMA pl_other;
CREATE TABLE pl_other.events (at timestamptz, v integer);
SELECT eventtime.create_pipeline('pl_elsewhere', 'pl_other.events', 'at', '1 hour', aggregates => 'sum(v) AS total');
SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname LIKE 'pl\_elsewhere%' ORDER BY 1, 2;
SELECT name, source FROM eventtime.pipelines WHERE name = 'pl_elsewhere';
INSERT INTO pl_other.events VALUES ('2026-10-29 10:15+00', 5), ('2026-10-29 10:45+00', 6);
SELECT * FROM eventtime.advance_watermark('pl_elsewhere', '2026-10-29 11:00+00');
SELECT window_start, window_end, total FROM pl_other.pl_elsewhere_history ORDER BY window_start;

---------------------------------------------------------------------------------------------
-- A partitioned source table: rows inserted or copied through the parent are routed.
---------------------------------------------------------------------------------------------
CREATE TABLE part (at timestamptz, v integer) PARTITION BY RANGE (at);
CREATE TABLE part_2026 PARTITION OF part FOR VALUES FROM ('2026-01-01 00:00+00') TO ('2027-01-01 00:00+00');
CREATE TABLE part_2027 PARTITION OF part FOR VALUES FROM ('2027-01-01 00:00+00') TO ('2028-01-01 00:00+00');
SELECT eventtime.create_pipeline('pl_part', 'part', 'at', '1 day', aggregates => 'sum(v) AS total');
INSERT INTO part VALUES ('2026-12-31 23:00+00', 1), ('2027-01-01 01:00+00', 2);
COPY part FROM stdin;
2026-12-31 23:30:00+00	4
\.
SELECT * FROM eventtime.advance_watermark('pl_part', 'infinity');
SELECT window_start, total FROM pl_part_history ORDER BY window_start;
-- Rows inserted straight into a partition count too: see tenancy.sql.
-- A materialized view is not a table.
CREATE MATERIALIZED VIEW pl_mv AS SELECT timestamptz '2026-10-29 00:00+00' AS at;
SELECT eventtime.create_pipeline('pl_mv', 'pl_mv', 'at', '1 day');

---------------------------------------------------------------------------------------------
-- Clean up.
---------------------------------------------------------------------------------------------
SELECT eventtime.drop_pipeline(name) FROM eventtime.pipelines WHERE name LIKE 'pl\_%' ORDER BY name;
SELECT count(*) AS pipelines_left FROM eventtime.pipelines WHERE name LIKE 'pl\_%';
SET client_min_messages = warning;
DROP SCHEMA pl CASCADE;
DROP SCHEMA pl_other CASCADE;
RESET client_min_messages;
RESET search_path;
