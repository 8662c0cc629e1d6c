-- A source with a unique index on the event id is its own ledger: two committed rows of it never
-- share an id, so the pipeline keeps no ledger table and every row its trigger sees is new. The
-- versions must be those of a twin pipeline whose source has no index and keeps a ledger, fed the
-- same statements (redeliveries included, which the index turns away with ON CONFLICT DO
-- NOTHING and the ledger counts as duplicates). Which indexes qualify; that the pipeline's
-- trigger holds the index; that the engine takes its statements of several rows.
\i include/setup.sql

CREATE TABLE ix_a (id bigint PRIMARY KEY, store text, qty int, at timestamptz);
CREATE TABLE ix_b (id bigint, store text, qty int, at timestamptz);
SELECT eventtime.create_pipeline(name => p, source => p::regclass, event_time => 'at', key => ARRAY['store'],
    window_size => '1 hour', allowed_lateness => '1 hour', event_id => 'id',
    aggregates => 'count(*) AS n, sum(qty) AS qty, max(qty) AS top')
FROM unnest(ARRAY['ix_a', 'ix_b']) p;
SELECT name, event_id, event_id_index FROM eventtime.pipelines WHERE name LIKE 'ix_%' ORDER BY name;
-- Only the twin keeps a ledger table.
SELECT p.name, to_regclass(format('_eventtime.p%s_ids', p.id)) IS NOT NULL AS has_ledger
FROM _eventtime.pipeline p WHERE p.name LIKE 'ix_%' ORDER BY 1;

SELECT eventtime.advance_watermark(p, '2026-05-01 10:00+00') FROM unnest(ARRAY['ix_a', 'ix_b']) p;
CREATE FUNCTION pg_temp.ix_both(sql text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format(sql, 'ix_a');
  EXECUTE format(sql, 'ix_b');
END $$;
-- Single rows, a redelivery of one, a statement of several rows (the engine's), one that
-- redelivers half of them with the other half new, a late row and its redelivery, a row past
-- the grace and its redelivery.
SELECT pg_temp.ix_both($$INSERT INTO %I VALUES (1, 'a', 5, '2026-05-01 10:05+00') ON CONFLICT DO NOTHING$$);
SELECT pg_temp.ix_both($$INSERT INTO %I VALUES (1, 'a', 5, '2026-05-01 10:05+00') ON CONFLICT DO NOTHING$$);
SELECT pg_temp.ix_both($$INSERT INTO %I SELECT i, (ARRAY['a', 'b', NULL])[1 + i %% 3], i, timestamptz '2026-05-01 10:00+00' + make_interval(mins => i %% 170)
                        FROM generate_series(2, 2000) i ON CONFLICT DO NOTHING$$);
SELECT pg_temp.ix_both($$INSERT INTO %I SELECT i, (ARRAY['a', 'b', NULL])[1 + i %% 3], i, timestamptz '2026-05-01 10:00+00' + make_interval(mins => i %% 170)
                        FROM generate_series(1000, 3000) i ON CONFLICT DO NOTHING$$);
SELECT eventtime.advance_watermark(p, '2026-05-01 12:00+00') FROM unnest(ARRAY['ix_a', 'ix_b']) p;
SELECT pg_temp.ix_both($$INSERT INTO %I VALUES (5000, 'a', 7, '2026-05-01 11:30+00') ON CONFLICT DO NOTHING$$);
SELECT pg_temp.ix_both($$INSERT INTO %I VALUES (5000, 'a', 7, '2026-05-01 11:30+00') ON CONFLICT DO NOTHING$$);
SELECT pg_temp.ix_both($$INSERT INTO %I VALUES (5001, 'b', 9, '2026-05-01 09:30+00'), (5002, 'b', 1, '2026-05-01 12:10+00') ON CONFLICT DO NOTHING$$);
SELECT pg_temp.ix_both($$INSERT INTO %I VALUES (5001, 'b', 9, '2026-05-01 09:30+00') ON CONFLICT DO NOTHING$$);
SELECT eventtime.advance_watermark(p, 'infinity') FROM unnest(ARRAY['ix_a', 'ix_b']) p;
-- The same versions and refused rows; the twin counted the redeliveries as duplicates, while
-- the index turned them away before the pipeline saw them.
SELECT count(*) AS versions FROM ix_a_history;
(SELECT store, window_start, version, kind, n, qty, top FROM ix_a_history
 EXCEPT ALL SELECT store, window_start, version, kind, n, qty, top FROM ix_b_history)
UNION ALL
(SELECT store, window_start, version, kind, n, qty, top FROM ix_b_history
 EXCEPT ALL SELECT store, window_start, version, kind, n, qty, top FROM ix_a_history);
SELECT store, event_id, window_start FROM ix_a_refused
EXCEPT ALL SELECT store, event_id, window_start FROM ix_b_refused;
SELECT count(*) AS refused FROM ix_b_refused;
SELECT name, duplicates FROM eventtime.pipelines WHERE name LIKE 'ix_%' ORDER BY name;
-- Every committed row of ix_a counts exactly once.
SELECT (SELECT sum(n) FROM ix_a_latest) + (SELECT count(*) FROM ix_a_refused) = (SELECT count(*) FROM ix_a) AS once;

-- The engine took ix_a's statement of several rows: its PL/pgSQL function was not called.
CREATE TABLE ix_c (id bigint PRIMARY KEY, store text, qty int, at timestamptz);
SELECT eventtime.create_pipeline(name => 'ix_c', source => 'ix_c', event_time => 'at', key => ARRAY['store'],
    window_size => '1 hour', event_id => 'id', aggregates => 'count(*) AS n');
BEGIN;
SET LOCAL track_functions = 'pl';
INSERT INTO ix_c SELECT i, 's' || i % 4, i, timestamptz '2026-05-01 10:00+00' + make_interval(secs => i) FROM generate_series(1, 500) i;
SELECT count(*) AS sql_calls FROM pg_stat_xact_user_functions f
JOIN _eventtime.pipeline p ON f.funcname = format('p%s_ingest_sql', p.id) WHERE p.name = 'ix_c';
COMMIT;
-- eventtime.ingest skips what the index turns away (on its columns only) and counts it.
SELECT * FROM eventtime.ingest('ix_c', '[{"id": 1, "store": "s1", "at": "2026-05-01 10:00:01+00"},
  {"id": 9001, "store": "s1", "at": "2026-05-01 10:00:01+00"}, {"id": 9001, "store": "s1", "at": "2026-05-01 10:00:01+00"}]');
SELECT * FROM eventtime.ingest('ix_c', '{"id": 9001, "store": "s1", "at": "2026-05-01 10:00:01+00"}');
-- ... and they are the pipeline's duplicates too.
SELECT duplicates FROM eventtime.pipelines WHERE name = 'ix_c';
SELECT eventtime.advance_watermark('ix_c', 'infinity');
SELECT store, n FROM ix_c_latest ORDER BY store;

-- The pipeline holds the index: dropping it, or its constraint, is refused while it exists.
SELECT regexp_replace(pg_temp.try('ALTER TABLE ix_a DROP CONSTRAINT ix_a_pkey'), '_p[0-9]+ ', '_p<id> ') AS try;
SELECT pg_temp.try('DROP INDEX ix_a_pkey');
-- With CASCADE, the trigger would go with the index and the pipeline would stop counting rows:
-- refused too, and the pipeline still counts them.
SET client_min_messages = warning;  -- (PostgreSQL's notice names the trigger)
SELECT pg_temp.try('ALTER TABLE ix_a DROP CONSTRAINT ix_a_pkey CASCADE');
RESET client_min_messages;
-- (the watermark is 'infinity': the row is refused, and counted so)
SELECT refused AS refused_before FROM eventtime.pipelines WHERE name = 'ix_a';
INSERT INTO ix_a VALUES (9001, 'north', 1, '2026-05-01 23:00+00');
SELECT refused AS refused_after FROM eventtime.pipelines WHERE name = 'ix_a';
SELECT eventtime.drop_pipeline('ix_a');
ALTER TABLE ix_a DROP CONSTRAINT ix_a_pkey;

-- Which indexes are a ledger: the id alone, or with key columns and NULLS NOT DISTINCT (the
-- ledger's NULL keys are equal); not with NULLS DISTINCT, deferrable, partial, over an
-- expression, with another collation, or with a column that is not a key.
CREATE TABLE ix_k1 (id bigint, store text, at timestamptz, UNIQUE NULLS NOT DISTINCT (store, id));
CREATE TABLE ix_k2 (id bigint, store text, at timestamptz, UNIQUE (store, id));
CREATE TABLE ix_k3 (id bigint UNIQUE DEFERRABLE, store text, at timestamptz);
CREATE TABLE ix_k4 (id bigint, store text, at timestamptz);
CREATE UNIQUE INDEX ON ix_k4 (id) WHERE store <> 'x';
CREATE TABLE ix_k5 (id text COLLATE "C", store text, at timestamptz);
CREATE UNIQUE INDEX ON ix_k5 (id COLLATE "POSIX");
CREATE TABLE ix_k6 (id bigint, store text, at timestamptz, UNIQUE NULLS NOT DISTINCT (at, id));
CREATE TABLE ix_k7 (id text, store text, at timestamptz);
CREATE UNIQUE INDEX ON ix_k7 (lower(id));
SELECT eventtime.create_pipeline(name => p, source => p::regclass, event_time => 'at', key => ARRAY['store'],
    window_size => '1 hour', event_id => 'id', aggregates => 'count(*) AS n')
FROM unnest(ARRAY['ix_k1', 'ix_k2', 'ix_k3', 'ix_k4', 'ix_k5', 'ix_k6', 'ix_k7']) p;
SELECT name, event_id_index FROM eventtime.pipelines WHERE name LIKE 'ix_k%' ORDER BY name;

-- A partitioned source: its unique index covers every partition, written to by name or not.
CREATE TABLE ix_p (id bigint, store text, at timestamptz, PRIMARY KEY (store, id)) PARTITION BY LIST (store);
CREATE TABLE ix_p_a PARTITION OF ix_p FOR VALUES IN ('a');
SELECT eventtime.create_pipeline(name => 'ix_p', source => 'ix_p', event_time => 'at', key => ARRAY['store'],
    window_size => '1 hour', event_id => 'id', aggregates => 'count(*) AS n');
SELECT event_id_index FROM eventtime.pipelines WHERE name = 'ix_p';
CREATE TABLE ix_p_b PARTITION OF ix_p FOR VALUES IN ('b');
INSERT INTO ix_p_a VALUES (1, 'a', '2026-05-01 10:00+00');
INSERT INTO ix_p VALUES (1, 'a', '2026-05-01 10:00+00'), (2, 'b', '2026-05-01 10:00+00') ON CONFLICT DO NOTHING;
INSERT INTO ix_p_b VALUES (2, 'b', '2026-05-01 10:00+00') ON CONFLICT DO NOTHING;
SELECT eventtime.advance_watermark('ix_p', 'infinity');
SELECT store, n FROM ix_p_latest ORDER BY store;
-- A table that inherits from a source whose index is its ledger would escape the index.
CREATE TABLE ix_i (id bigint PRIMARY KEY, store text, at timestamptz);
SELECT eventtime.create_pipeline(name => 'ix_i', source => 'ix_i', event_time => 'at', key => ARRAY['store'],
    window_size => '1 hour', event_id => 'id', aggregates => 'count(*) AS n');
SELECT pg_temp.try('CREATE TABLE ix_i_child () INHERITS (ix_i)');
CREATE TABLE ix_i_other (id bigint NOT NULL, store text, at timestamptz);
SELECT pg_temp.try('ALTER TABLE ix_i_other INHERIT ix_i');
SELECT to_regclass('ix_i_child');
-- A source that already has such a table keeps a ledger of its own.
CREATE TABLE ix_j (id bigint PRIMARY KEY, store text, at timestamptz);
CREATE TABLE ix_j_child () INHERITS (ix_j);
SELECT eventtime.create_pipeline(name => 'ix_j', source => 'ix_j', event_time => 'at', key => ARRAY['store'],
    window_size => '1 hour', event_id => 'id', aggregates => 'count(*) AS n');
SELECT event_id_index FROM eventtime.pipelines WHERE name = 'ix_j';
INSERT INTO ix_j VALUES (1, 'a', '2026-05-01 10:00+00');
INSERT INTO ix_j_child VALUES (1, 'a', '2026-05-01 10:00+00');
SELECT duplicates FROM eventtime.pipelines WHERE name = 'ix_j';

-- Sessions and hopping windows dedup by the index too.
CREATE TABLE ix_s (id bigint PRIMARY KEY, store text, at timestamptz);
SELECT eventtime.create_pipeline(name => 'ix_s', source => 'ix_s', event_time => 'at', key => ARRAY['store'],
    session_gap => '10 minutes', event_id => 'id', aggregates => 'count(*) AS n');
CREATE TABLE ix_h (id bigint PRIMARY KEY, store text, at timestamptz);
SELECT eventtime.create_pipeline(name => 'ix_h', source => 'ix_h', event_time => 'at', key => ARRAY['store'],
    window_size => '1 hour', window_slide => '30 minutes', event_id => 'id', aggregates => 'count(*) AS n');
SELECT name, event_id_index FROM eventtime.pipelines WHERE name IN ('ix_s', 'ix_h') ORDER BY name;
INSERT INTO ix_s VALUES (1, 'a', '2026-05-01 10:00+00'), (2, 'a', '2026-05-01 10:05+00');
INSERT INTO ix_s VALUES (2, 'a', '2026-05-01 10:05+00'), (3, 'a', '2026-05-01 10:12+00') ON CONFLICT DO NOTHING;
INSERT INTO ix_h VALUES (1, 'a', '2026-05-01 10:40+00');
INSERT INTO ix_h VALUES (1, 'a', '2026-05-01 10:40+00'), (2, 'a', '2026-05-01 10:50+00') ON CONFLICT DO NOTHING;
SELECT * FROM eventtime.ingest('ix_h', '[{"id": 2, "store": "a", "at": "2026-05-01 10:50+00"}, {"id": 3, "store": "a", "at": "2026-05-01 10:55+00"}]');
SELECT eventtime.advance_watermark(p, 'infinity') FROM unnest(ARRAY['ix_s', 'ix_h']) p;
SELECT store, window_start, window_end, n FROM ix_s_latest ORDER BY 2;
SELECT store, window_start, n FROM ix_h_latest ORDER BY 2;

-- A dump and restore does not keep the trigger's dependency on the index (pg_dump writes no
-- pg_depend rows): the pipeline still finds its index in the catalog, and once the index is
-- gone, eventtime.ingest says so instead of counting redeliveries again.
CREATE TABLE ix_r (id bigint PRIMARY KEY, store text, at timestamptz);
SELECT eventtime.create_pipeline(name => 'ix_r', source => 'ix_r', event_time => 'at', key => ARRAY['store'],
    window_size => '1 hour', event_id => 'id', aggregates => 'count(*) AS n');
DELETE FROM pg_depend WHERE classid = 'pg_trigger'::regclass AND refobjid = 'ix_r_pkey'::regclass
  AND objid = (SELECT oid FROM pg_trigger WHERE tgrelid = 'ix_r'::regclass AND tgname LIKE 'eventtime_ingest_p%');
SELECT event_id_index FROM eventtime.pipelines WHERE name = 'ix_r';
SELECT * FROM eventtime.ingest('ix_r', '[{"id": 1, "store": "a", "at": "2026-05-01 10:00+00"}, {"id": 1, "store": "a", "at": "2026-05-01 10:00+00"}]');
ALTER TABLE ix_r DROP CONSTRAINT ix_r_pkey;
SELECT event_id_index FROM eventtime.pipelines WHERE name = 'ix_r';
SELECT pg_temp.try($$SELECT * FROM eventtime.ingest('ix_r', '{"id": 1, "store": "a", "at": "2026-05-01 10:00+00"}')$$);
