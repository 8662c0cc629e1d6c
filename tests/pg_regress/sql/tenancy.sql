-- Tenancy (SPEC §5, §9, §14): every committed row counts whichever table of a partitioned or
-- inherited source it was written to; a pipeline follows its table's owner through ALTER TABLE
-- ... OWNER TO, REASSIGN OWNED, DROP OWNED and DROP ROLE; history, refused rows, folds and the
-- ledger take no INSERT but the extension's own; tick() goes on past a pipeline that fails; session
-- writers lock rows only the pipeline's owner may lock. (What needs two sessions, an idle writer
-- and an advance that waits for it, is in the faults tier, tests/faults/tests/cases/tenancy.rs.)
\i include/setup.sql

SET client_min_messages = warning;
DO $$
DECLARE r text;
BEGIN
    PERFORM eventtime.drop_pipeline(name) FROM _eventtime.pipeline WHERE name LIKE 'tn\_%';
    DROP SCHEMA IF EXISTS tn CASCADE;
    FOREACH r IN ARRAY ARRAY['regress_tn_old', 'regress_tn_new', 'regress_tn_gone', 'regress_tn_heir',
                             'regress_tn_stranger'] LOOP
        IF EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('DROP OWNED BY %I CASCADE', r);
            EXECUTE format('DROP ROLE %I', r);
        END IF;
    END LOOP;
END $$;
RESET client_min_messages;
CREATE SCHEMA tn;
SET search_path = tn, public;

-- The tables a pipeline's trigger is on, of the tables whose names start with the argument.
CREATE FUNCTION pg_temp.triggered(prefix text) RETURNS TABLE (tbl text, pipeline text)
LANGUAGE sql AS $$
SELECT c.relname::text, p.name
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
JOIN _eventtime.pipeline p ON t.tgname = 'eventtime_ingest_p' || p.id
WHERE c.relname LIKE prefix || '%' ORDER BY 1, 2
$$;

---------------------------------------------------------------------------------------------
-- A partitioned source: rows written into a partition by name count as rows written through the
-- parent, partitions created or attached later included; a partition detached keeps what it
-- counted, and what is written into it afterwards is not the pipeline's.
---------------------------------------------------------------------------------------------
CREATE TABLE tn.op (id bigint, k text, v numeric, at timestamptz) PARTITION BY RANGE (at);
CREATE TABLE tn.op_2026_10 PARTITION OF tn.op FOR VALUES FROM ('2026-10-01') TO ('2026-11-01');
SELECT eventtime.create_pipeline(name => 'tn_op', source => 'tn.op', event_time => 'at', key => ARRAY['k'],
    event_id => 'id', window_size => '1 day', aggregates => 'count(*) AS n, sum(v) AS total');
-- Created later: a partition, a partitioned partition with one of its own, and an attached table.
CREATE TABLE tn.op_2026_11 PARTITION OF tn.op FOR VALUES FROM ('2026-11-01') TO ('2026-12-01');
CREATE TABLE tn.op_2027 PARTITION OF tn.op FOR VALUES FROM ('2027-01-01') TO ('2028-01-01') PARTITION BY RANGE (at);
CREATE TABLE tn.op_2027_01 PARTITION OF tn.op_2027 FOR VALUES FROM ('2027-01-01') TO ('2027-02-01');
CREATE TABLE tn.op_2026_12 (LIKE tn.op);
ALTER TABLE tn.op ATTACH PARTITION tn.op_2026_12 FOR VALUES FROM ('2026-12-01') TO ('2027-01-01');
SELECT * FROM pg_temp.triggered('op');
INSERT INTO tn.op VALUES (1, 'a', 1, '2026-10-29 10:00+00');
INSERT INTO tn.op_2026_10 VALUES (2, 'a', 2, '2026-10-29 11:00+00');
INSERT INTO tn.op_2026_10 VALUES (3, 'a', 3, '2026-10-29 12:00+00'), (4, 'b', 4, '2026-10-29 12:00+00');
COPY tn.op_2026_11 FROM stdin;
5	a	5	2026-11-02 10:00:00+00
\.
INSERT INTO tn.op_2026_12 VALUES (6, 'a', 6, '2026-12-02 10:00+00');
INSERT INTO tn.op_2026_12 VALUES (6, 'a', 6, '2026-12-02 10:00+00');
INSERT INTO tn.op_2027 VALUES (7, 'a', 7, '2027-01-02 10:00+00');
INSERT INTO tn.op_2027_01 VALUES (8, 'b', 8, '2027-01-02 10:00+00');
SELECT * FROM eventtime.ingest('tn_op', '{"id": 9, "k": "a", "v": 9, "at": "2026-10-29 13:00+00"}');
ALTER TABLE tn.op DETACH PARTITION tn.op_2026_12;
INSERT INTO tn.op_2026_12 VALUES (10, 'a', 10, '2026-12-03 10:00+00');
SELECT * FROM pg_temp.triggered('op');
SELECT * FROM eventtime.advance_watermark('tn_op', 'infinity');
SELECT k, window_start, n, total FROM tn.tn_op_history ORDER BY k, window_start;
SELECT duplicates FROM eventtime.pipelines WHERE name = 'tn_op';
-- A pipeline on a partition is refused: rows written through the parent fire the parent's
-- trigger only. So is a source that would become one.
SELECT eventtime.create_pipeline(name => 'tn_part', source => 'tn.op_2026_10', event_time => 'at', window_size => '1 day');
CREATE TABLE tn.solo (id bigint, k text, v numeric, at timestamptz);
SELECT eventtime.create_pipeline(name => 'tn_solo', source => 'tn.solo', event_time => 'at', window_size => '1 day');
-- PostgreSQL 16 refuses it itself, before the extension's event trigger, with a message of its
-- own naming the trigger (expected/tenancy_1.out); 15 and 18 leave it to the extension.
SELECT regexp_replace(pg_temp.try($$ALTER TABLE tn.op_2027 ATTACH PARTITION tn.solo FOR VALUES FROM ('2027-02-01') TO ('2027-03-01')$$),
    '_p[0-9]+"', '_p<id>"') AS attach;
SELECT relispartition FROM pg_class WHERE oid = 'tn.solo'::regclass;
SELECT eventtime.drop_pipeline('tn_solo');
-- drop_pipeline takes the trigger off every table.
SELECT eventtime.drop_pipeline('tn_op');
SELECT count(*) AS triggers_left FROM pg_temp.triggered('op');

---------------------------------------------------------------------------------------------
-- An inheritance child as the source: a grandchild's rows count, the parent's do not (they are
-- not rows of the source), and a rename through the parent of a column the pipeline uses is
-- refused as a rename of the source's own column is.
---------------------------------------------------------------------------------------------
CREATE TABLE tn.par (id bigint, k text, at timestamptz);
CREATE TABLE tn.kid () INHERITS (tn.par);
SELECT eventtime.create_pipeline(name => 'tn_kid', source => 'tn.kid', event_time => 'at', key => ARRAY['k'], window_size => '1 hour');
CREATE TABLE tn.grandkid () INHERITS (tn.kid);
SELECT * FROM pg_temp.triggered('grandkid');
ALTER TABLE tn.par RENAME COLUMN k TO k2;
ALTER TABLE tn.par RENAME COLUMN at TO at2;
INSERT INTO tn.kid VALUES (1, 'kid', '2026-10-29 10:00+00');
INSERT INTO tn.grandkid VALUES (2, 'grandkid', '2026-10-29 10:00+00');
INSERT INTO tn.par VALUES (3, 'par', '2026-10-29 10:00+00');
ALTER TABLE tn.grandkid NO INHERIT tn.kid;
INSERT INTO tn.grandkid VALUES (4, 'grandkid', '2026-10-29 10:00+00');
SELECT * FROM pg_temp.triggered('grandkid');
SELECT * FROM eventtime.advance_watermark('tn_kid', 'infinity');
SELECT k, events FROM tn.tn_kid_history ORDER BY k;
SELECT eventtime.drop_pipeline('tn_kid');

---------------------------------------------------------------------------------------------
-- A partitioned source managed by pg_partman is in tenancy_partman.sql (PostgreSQL 15 only, where
-- Debian packages pg_partman).
---------------------------------------------------------------------------------------------

---------------------------------------------------------------------------------------------
-- Ownership follows the table. ALTER TABLE ... OWNER TO hands every object of the table's
-- pipelines to the new owner, who then runs and manages them; the former owner no longer can.
---------------------------------------------------------------------------------------------
CREATE ROLE regress_tn_old;
CREATE ROLE regress_tn_new;
CREATE ROLE regress_tn_gone;
CREATE ROLE regress_tn_heir;
CREATE ROLE regress_tn_stranger;
GRANT USAGE, CREATE ON SCHEMA tn TO regress_tn_old, regress_tn_new, regress_tn_gone, regress_tn_heir;
GRANT USAGE ON SCHEMA tn TO regress_tn_stranger;
-- The roles that own the objects of a pipeline: its views, internal tables and functions.
CREATE FUNCTION pg_temp.owners(pipeline text) RETURNS TABLE (owner text, objects bigint)
LANGUAGE sql AS $$
SELECT o::text, count(*) FROM (
    SELECT c.relowner::regrole AS o FROM pg_class c JOIN _eventtime.pipeline p ON p.name = pipeline
    WHERE c.relname ~ ('^p' || p.id || '_(state|ids|history|refused|folds|locks)$')
       OR (c.relnamespace = p.view_schema::regnamespace AND c.relname LIKE pipeline || '\_%')
    UNION ALL
    SELECT f.proowner::regrole FROM pg_proc f JOIN _eventtime.pipeline p ON p.name = pipeline
    WHERE f.proname ~ ('^p' || p.id || '_ingest')
) x GROUP BY 1 ORDER BY 1
$$;
SET ROLE regress_tn_old;
CREATE TABLE tn.moved (id bigint, k text, at timestamptz);
SELECT eventtime.create_pipeline(name => 'tn_moved', source => 'tn.moved', event_time => 'at', key => ARRAY['k'],
    event_id => 'id', window_size => '1 hour');
INSERT INTO tn.moved VALUES (1, 'a', '2026-10-29 10:00+00');
RESET ROLE;
ALTER TABLE tn.moved OWNER TO regress_tn_new;
SELECT * FROM pg_temp.owners('tn_moved');
SELECT name, owner FROM eventtime.pipelines WHERE name = 'tn_moved';
SET ROLE regress_tn_new;
INSERT INTO tn.moved VALUES (2, 'a', '2026-10-29 10:10+00');
INSERT INTO tn.moved VALUES (3, 'a', '2026-10-29 10:20+00'), (4, 'b', '2026-10-29 10:20+00');
SELECT * FROM eventtime.advance_watermark('tn_moved', '2026-10-29 11:00+00');
SELECT k, events FROM tn.tn_moved_history ORDER BY k;
SET ROLE regress_tn_old;
SELECT pg_temp.try($$SELECT eventtime.drop_pipeline('tn_moved')$$);
SELECT pg_temp.try($$SELECT * FROM eventtime.advance_watermark('tn_moved', '2026-10-29 12:00+00')$$);
RESET ROLE;

---------------------------------------------------------------------------------------------
-- The usual removal of a role: REASSIGN OWNED, DROP OWNED, DROP ROLE. The heir has the pipeline
-- and everything of it, and it keeps working for every path of ingest.
---------------------------------------------------------------------------------------------
SET ROLE regress_tn_gone;
CREATE TABLE tn.inherited (id bigint, k text, at timestamptz);
SELECT eventtime.create_pipeline(name => 'tn_inherited', source => 'tn.inherited', event_time => 'at', key => ARRAY['k'],
    event_id => 'id', window_size => '1 hour');
INSERT INTO tn.inherited VALUES (1, 'a', '2026-10-29 10:00+00');
RESET ROLE;
REASSIGN OWNED BY regress_tn_gone TO regress_tn_heir;
DROP OWNED BY regress_tn_gone;
DROP ROLE regress_tn_gone;
SELECT * FROM pg_temp.owners('tn_inherited');
SET ROLE regress_tn_heir;
INSERT INTO tn.inherited VALUES (2, 'a', '2026-10-29 10:10+00');
INSERT INTO tn.inherited VALUES (3, 'a', '2026-10-29 10:10+00'), (4, 'b', '2026-10-29 10:10+00');
SELECT * FROM eventtime.ingest('tn_inherited', '{"id": 5, "k": "b", "at": "2026-10-29 10:30+00"}');
SELECT name, owner, state_rows > 0 AS has_state FROM eventtime.pipelines WHERE name = 'tn_inherited';
SELECT * FROM eventtime.advance_watermark('tn_inherited', '2026-10-29 11:00+00');
SELECT k, events FROM tn.tn_inherited_history ORDER BY k;
RESET ROLE;
SELECT name, owner FROM eventtime.pipelines WHERE name = 'tn_inherited';

-- DROP OWNED without REASSIGN drops the table and every object of its pipeline: the pipeline
-- stays listed, without counts, and a superuser drops it.
SET ROLE regress_tn_heir;
CREATE TABLE tn.doomed (k text, at timestamptz);
SELECT eventtime.create_pipeline(name => 'tn_doomed', source => 'tn.doomed', event_time => 'at', window_size => '1 hour');
RESET ROLE;
DROP OWNED BY regress_tn_heir;
DROP ROLE regress_tn_heir;
SELECT name, history_table IS NULL AS tables_gone, state_rows, firings FROM eventtime.pipelines
WHERE name IN ('tn_doomed', 'tn_inherited') ORDER BY name;
SET client_min_messages = warning;
SELECT eventtime.drop_pipeline('tn_doomed');
SELECT eventtime.drop_pipeline('tn_inherited');
RESET client_min_messages;
SELECT count(*) AS left_over FROM eventtime.pipelines WHERE name IN ('tn_doomed', 'tn_inherited');

---------------------------------------------------------------------------------------------
-- History, refused rows, folds and the ledger take no INSERT but the pipeline's own, not even
-- from their owner or a superuser (UPDATE, DELETE and TRUNCATE were refused already).
---------------------------------------------------------------------------------------------
SET ROLE regress_tn_new;
SELECT pg_temp.try(format($$INSERT INTO _eventtime.p%s_history (k, window_start, window_end, version, kind, events, watermark, _et_n, _et_a0)
                             VALUES ('a', '2026-10-29 10:00+00', '2026-10-29 11:00+00', 2, 'late', 999, '2026-10-29 11:00+00', 999, 999)$$,
                          (SELECT id FROM _eventtime.pipeline WHERE name = 'tn_moved')));
SELECT pg_temp.try(format($$INSERT INTO _eventtime.p%s_refused (k, event_id, event_time, "row", window_start, window_end, deadline, watermark)
                             VALUES ('a', 77, '2026-10-29 01:00+00', '{}', '2026-10-29', '2026-10-30', '2026-10-31', '2026-11-01')$$,
                          (SELECT id FROM _eventtime.pipeline WHERE name = 'tn_moved')));
SELECT pg_temp.try(format($$INSERT INTO _eventtime.p%s_ids VALUES ('2026-11-05', 'a', 12345)$$,
                          (SELECT id FROM _eventtime.pipeline WHERE name = 'tn_moved')));
SELECT pg_temp.try(format($$INSERT INTO _eventtime.p%s_folds VALUES (1, 2)$$,
                          (SELECT id FROM _eventtime.pipeline WHERE name = 'tn_moved')));
RESET ROLE;
SELECT pg_temp.try(format($$INSERT INTO _eventtime.p%s_ids VALUES ('2026-11-05', 'a', 12345)$$,
                          (SELECT id FROM _eventtime.pipeline WHERE name = 'tn_moved')));
-- The pipeline's own writes go on.
SET ROLE regress_tn_new;
INSERT INTO tn.moved VALUES (5, 'a', '2026-10-29 11:10+00');
SELECT * FROM eventtime.advance_watermark('tn_moved', 'infinity');
SELECT k, window_start, version, events FROM tn.tn_moved_history ORDER BY k, window_start, version;
RESET ROLE;

---------------------------------------------------------------------------------------------
-- tick() runs every pipeline on its own: one whose firing fails is reported and skipped, the
-- others move, and eventtime.pipelines goes on for everyone.
---------------------------------------------------------------------------------------------
CREATE TABLE tn.ta (k text, at timestamptz);
CREATE TABLE tn.tb (k text, at timestamptz);
SELECT eventtime.create_pipeline(name => 'tn_ta', source => 'tn.ta', event_time => 'at', window_size => '1 minute', clock_lag => '0');
SELECT eventtime.create_pipeline(name => 'tn_tb', source => 'tn.tb', event_time => 'at', window_size => '1 minute', clock_lag => '0');
INSERT INTO tn.ta VALUES ('x', now() - interval '10 minutes');
INSERT INTO tn.tb VALUES ('x', now() - interval '10 minutes');
-- The owner breaks its own pipeline: its firing now fails.
DO $$ BEGIN EXECUTE (SELECT format('ALTER TABLE _eventtime.p%s_state RENAME TO p%s_state_gone', id, id) FROM _eventtime.pipeline WHERE name = 'tn_ta'); END $$;
SET client_min_messages = error;
SELECT pipeline, windows_fired, watermark IS NOT NULL AS moved, split_part(skipped, ':', 1) AS skipped FROM eventtime.tick()
WHERE pipeline LIKE 'tn\_t_' ORDER BY pipeline;
RESET client_min_messages;
SELECT name, open_windows, state_rows, firings FROM eventtime.pipelines WHERE name LIKE 'tn\_t_' ORDER BY name;
SELECT events FROM tn.tn_tb_history;
DO $$ BEGIN EXECUTE (SELECT format('ALTER TABLE _eventtime.p%s_state_gone RENAME TO p%s_state', id, id) FROM _eventtime.pipeline WHERE name = 'tn_ta'); END $$;
SELECT pipeline, windows_fired, skipped FROM eventtime.tick() WHERE pipeline LIKE 'tn\_t_' ORDER BY pipeline;
SELECT events FROM tn.tn_ta_history;

---------------------------------------------------------------------------------------------
-- A sum that would overflow when a firing adds up a window's state is refused by the statement
-- that causes it (22003 naming the pipeline, aggregate and window; nothing of it applied): each
-- backend's part of a window's sum stays within a bound (masked below: it depends on
-- max_connections) that the firing cannot exceed. The firing never fails on data, and an open
-- window keeps one state row per backend, not one per statement.
---------------------------------------------------------------------------------------------
CREATE TABLE tn.tover (k text, amount numeric, span interval, cash money, f double precision, at timestamptz);
SELECT eventtime.create_pipeline(name => 'tn_over', source => 'tn.tover', event_time => 'at', key => ARRAY['k'],
    window_size => '1 hour', allowed_lateness => '1 hour',
    aggregates => 'count(*) AS n, sum(amount) AS revenue, avg(span) AS mean_span, sum(cash) AS cash, sum(f) AS f');
GRANT USAGE ON SCHEMA tn TO regress_tn_stranger;
GRANT INSERT ON tn.tover TO regress_tn_stranger;
CREATE FUNCTION pg_temp.over(v text) RETURNS text LANGUAGE sql AS $$
SELECT regexp_replace(pg_temp.try(format('INSERT INTO tn.tover VALUES %s', v)), '±[0-9.e+]+(?![0-9.e+^])', '±<bound>', 'g')
$$;
SET ROLE regress_tn_stranger;
-- The value two of which overflow numeric: beyond the bound, even alone.
SELECT pg_temp.over($$('a', ('9' || repeat('0', 131071))::numeric, NULL, NULL, NULL, '2026-10-29 10:00+00')$$);
-- Values of 131060 digits: one is taken; a second from the same backend is refused.
SELECT pg_temp.over($$('a', ('9' || repeat('0', 131059))::numeric, NULL, NULL, NULL, '2026-10-29 10:00+00')$$);
SELECT pg_temp.over($$('a', ('9' || repeat('0', 131059))::numeric, NULL, NULL, NULL, '2026-10-29 10:05+00')$$);
-- interval (each field), money and double precision have bounds of their own.
SELECT pg_temp.over($$('a', 1, '2000000000 hours', NULL, NULL, '2026-10-29 10:10+00')$$);
SELECT pg_temp.over($$('a', 1, '90 minutes', '90000000000000000', NULL, '2026-10-29 10:10+00')$$);
SELECT pg_temp.over($$('a', 1, '90 minutes', '1000.50', 1e308, '2026-10-29 10:10+00')$$);
-- Nothing of a refused statement is applied, whatever its other rows.
SELECT pg_temp.over($$('a', 1, '30 minutes', '1.50', 2.5, '2026-10-29 10:20+00'), ('a', 1, '1000000000 hours', NULL, NULL, '2026-10-29 10:20+00')$$);
SELECT pg_temp.over($$('a', 1, '30 minutes', '1.50', 2.5, '2026-10-29 10:20+00')$$);
INSERT INTO tn.tover SELECT 'a', 1, '1 minute', '0.01', 1, '2026-10-29 10:30+00' FROM generate_series(1, 20);
INSERT INTO tn.tover VALUES ('a', 1, '1 minute', '0.01', 1, '2026-10-29 10:31+00');
INSERT INTO tn.tover VALUES ('a', 1, '1 minute', '0.01', 1, '2026-10-29 10:32+00');
RESET ROLE;
SELECT count(*) AS rows_taken FROM tn.tover;
SELECT format('SELECT count(*) AS state_rows FROM _eventtime.p%s_state', id) AS state_rows FROM _eventtime.pipeline WHERE name = 'tn_over' \gset
:state_rows;
SELECT * FROM eventtime.advance_watermark('tn_over', '2026-10-29 11:00+00');
-- A late row's sum is bounded the same way.
SET ROLE regress_tn_stranger;
SELECT pg_temp.over($$('a', ('9' || repeat('0', 131071))::numeric, NULL, NULL, NULL, '2026-10-29 10:40+00')$$);
SELECT pg_temp.over($$('a', 5, '1 hour', '2.00', 1, '2026-10-29 10:40+00')$$);
RESET ROLE;
SELECT * FROM eventtime.advance_watermark('tn_over', 'infinity');
SELECT k, window_start, version, n, revenue - ('9' || repeat('0', 131059))::numeric AS revenue_beside_the_large_row,
       mean_span, cash, f
FROM tn.tn_over_history ORDER BY version;

---------------------------------------------------------------------------------------------
-- Session writers take turns on the rows of a table of the pipeline's own, which no other role
-- may lock (advisory locks, which any role may take, are no longer used).
---------------------------------------------------------------------------------------------
SET ROLE regress_tn_new;
CREATE TABLE tn.clicks (u text, at timestamptz);
SELECT eventtime.create_pipeline(name => 'tn_clicks', source => 'tn.clicks', event_time => 'at', key => ARRAY['u'], session_gap => '30 minutes');
GRANT INSERT ON tn.clicks TO regress_tn_stranger;
RESET ROLE;
SELECT count(*) AS buckets FROM pg_class c JOIN _eventtime.pipeline p ON c.relname = 'p' || p.id || '_locks' WHERE p.name = 'tn_clicks';
SELECT prosrc LIKE '%advisory%' AS takes_advisory_locks FROM pg_proc p JOIN _eventtime.pipeline e ON p.proname = 'p' || e.id || '_ingest'
WHERE e.name = 'tn_clicks';
SELECT format('SELECT FROM _eventtime.p%s_locks FOR UPDATE', id) AS lock_buckets FROM _eventtime.pipeline WHERE name = 'tn_clicks' \gset
SET ROLE regress_tn_stranger;
SELECT regexp_replace(pg_temp.try(:'lock_buckets'), 'p[0-9]+_', 'p<id>_') AS stranger_locks;
INSERT INTO tn.clicks VALUES ('bob', '2026-10-29 10:05+00'), ('bob', '2026-10-29 10:20+00');
RESET ROLE;
SELECT * FROM eventtime.advance_watermark('tn_clicks', 'infinity');
SELECT u, window_start, window_end, events FROM tn.tn_clicks_history ORDER BY u;

---------------------------------------------------------------------------------------------
-- A row refused for several windows is stored once: the refused row of its first window holds
-- the document, the others point to it; the view and restatements read it from there.
---------------------------------------------------------------------------------------------
CREATE TABLE tn.hop (id bigint, k text, note text, v integer, at timestamptz);
SELECT eventtime.create_pipeline(name => 'tn_hop', source => 'tn.hop', event_time => 'at', key => ARRAY['k'], event_id => 'id',
    window_size => '100 hours', window_slide => '1 hour', max_ahead => NULL, aggregates => 'count(*) AS n, sum(v) AS total');
INSERT INTO tn.hop VALUES (0, 'a', 'first', 1, '2026-10-29 10:00+00');
SELECT * FROM eventtime.advance_watermark('tn_hop', '2026-11-01 12:00+00');
-- One row, 19 kB, refused for the 74 windows whose deadline passed, and open in the 26 others.
INSERT INTO tn.hop SELECT 1, 'a', string_agg(md5(g::text), ''), 5, '2026-10-29 10:00+00' FROM generate_series(1, 600) g;
CREATE FUNCTION pg_temp.documents(p_name text) RETURNS TABLE (refused_rows bigint, documents bigint, under_200_kb boolean)
LANGUAGE plpgsql AS $$
DECLARE t text := format('_eventtime.p%s_refused', (SELECT id FROM _eventtime.pipeline WHERE name = p_name));
BEGIN
    RETURN QUERY EXECUTE format('SELECT count(*), count("row"), pg_total_relation_size(%L::regclass) < 200000 FROM %s', t, t);
END $$;
SELECT * FROM pg_temp.documents('tn_hop');
SELECT count(*) AS refused_rows, count(DISTINCT "row") AS distinct_documents, bool_and(("row"->>'v')::int = 5) AS every_row_whole
FROM tn.tn_hop_refused;
-- A restatement of a window whose refused row points to another's document (that of the
-- earliest window, 2026-10-25 07:00) folds its value in.
SELECT key, window_start, version, rows_folded FROM eventtime.restate('tn_hop', '2026-10-27 08:00+00');
SELECT window_start, version, kind, n, total FROM tn.tn_hop_history WHERE window_start = '2026-10-27 08:00+00' ORDER BY version;

---------------------------------------------------------------------------------------------
-- eventtime.ingest answers as the INSERT it stands for: column-level INSERT grants are enough
-- for the columns they cover, and a column outside them is refused as PostgreSQL refuses it.
---------------------------------------------------------------------------------------------
SET ROLE regress_tn_new;
CREATE TABLE tn.cols (id bigint, k text, secret text, at timestamptz);
SELECT eventtime.create_pipeline(name => 'tn_cols', source => 'tn.cols', event_time => 'at', key => ARRAY['k'], window_size => '1 hour');
GRANT INSERT (id, k, at) ON tn.cols TO regress_tn_stranger;
RESET ROLE;
SET ROLE regress_tn_stranger;
SELECT * FROM eventtime.ingest('tn_cols', '{"id": 1, "k": "a", "at": "2026-10-29 10:00+00"}');
SELECT pg_temp.try($$SELECT * FROM eventtime.ingest('tn_cols', '{"id": 2, "k": "a", "secret": "x", "at": "2026-10-29 10:00+00"}')$$);
-- A pipeline the caller may neither write nor read: its table and owner are not named.
SELECT pg_temp.try($$SELECT * FROM eventtime.ingest('tn_moved', '{"id": 9, "k": "a", "at": "2026-10-29 10:00+00"}')$$);
RESET ROLE;
SELECT * FROM eventtime.advance_watermark('tn_cols', 'infinity');
SELECT k, events FROM tn.tn_cols_history;

-- Time zones that stand for the host's settings are not zones a window can follow.
SELECT pg_temp.try($$SELECT eventtime.create_pipeline(name => 'tn_local', source => 'tn.cols', event_time => 'at', window_size => '1 day', time_zone => 'localtime')$$);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline(name => 'tn_local', source => 'tn.cols', event_time => 'at', window_size => '1 day', time_zone => 'Factory')$$);

---------------------------------------------------------------------------------------------
-- Clean up.
---------------------------------------------------------------------------------------------
SET client_min_messages = warning;
SELECT eventtime.drop_pipeline(name) FROM eventtime.pipelines WHERE name LIKE 'tn\_%' ORDER BY name;
DROP SCHEMA tn CASCADE;
DROP OWNED BY regress_tn_old, regress_tn_new, regress_tn_stranger;
DROP ROLE regress_tn_old, regress_tn_new, regress_tn_stranger;
RESET client_min_messages;
RESET search_path;
