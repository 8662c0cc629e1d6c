-- Roles and security (SPEC §9): who may create, drop, advance and idle a pipeline (the source
-- table's owner), who may ingest (whoever may INSERT into it), who reads the views (whom the owner
-- grants them), what eventtime.pipelines, eventtime.sources and eventtime.explain show each role,
-- who owns what a pipeline creates, and that no code a pipeline reaches runs with more privilege
-- than the table's owner, nor depends on the caller's search_path.
\i include/setup.sql

-- An interrupted earlier run in this cluster may have left its pipelines, schemas and roles.
SET client_min_messages = warning;
DO $$
DECLARE r text;
BEGIN
    PERFORM eventtime.drop_pipeline(name) FROM _eventtime.pipeline WHERE name LIKE 'rl\_%';
    DROP SCHEMA IF EXISTS rl_app, rl_tenant, rl_private, rl_shared, regress_evil, rl_witness CASCADE;
    FOREACH r IN ARRAY ARRAY['regress_et_owner', 'regress_et_writer', 'regress_et_analyst', 'regress_et_stranger',
                             'regress_et_tenant', 'regress_et_deputy', 'regress_et_noinherit'] LOOP
        IF EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('DROP OWNED BY %I CASCADE', r);
            EXECUTE format('DROP ROLE %I', r);
        END IF;
    END LOOP;
END $$;
RESET client_min_messages;

---------------------------------------------------------------------------------------------
-- The roles: the owner of the tables, a writer (INSERT on one table), an analyst (SELECT on some
-- views, granted by the owner), a stranger (nothing), a second tenant with tables and pipelines
-- of its own, and two members of the owner's role, one that inherits its privileges and one
-- that does not. None has any grant on the extension beyond what CREATE EXTENSION gives PUBLIC.
---------------------------------------------------------------------------------------------
CREATE ROLE regress_et_owner;
CREATE ROLE regress_et_writer;
CREATE ROLE regress_et_analyst;
CREATE ROLE regress_et_stranger;
CREATE ROLE regress_et_tenant;
CREATE ROLE regress_et_deputy INHERIT IN ROLE regress_et_owner;
CREATE ROLE regress_et_noinherit NOINHERIT IN ROLE regress_et_owner;
CREATE SCHEMA rl_app AUTHORIZATION regress_et_owner;
CREATE SCHEMA rl_tenant AUTHORIZATION regress_et_tenant;
CREATE SCHEMA rl_private AUTHORIZATION regress_et_tenant;
CREATE SCHEMA regress_evil AUTHORIZATION regress_et_stranger;

-- The witness: code reached through a pipeline calls rl_witness.note(), which records who it
-- runs as, whether that role is a superuser, whether it may make regress_et_owner a superuser,
-- whether it may create a temporary table (refused inside a security-restricted operation) and
-- the trigger depth. The phase is set by this file before each step.
CREATE SCHEMA rl_witness;
GRANT USAGE ON SCHEMA rl_witness TO PUBLIC;
CREATE TABLE rl_witness.log (phase text, what text, who name, super boolean, alter_role text, temp_table text,
                             depth integer);
GRANT INSERT ON rl_witness.log TO PUBLIC;
CREATE FUNCTION rl_witness.note(what text) RETURNS boolean LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE alter_role text; temp_table text;
BEGIN
    BEGIN
        ALTER ROLE regress_et_owner SUPERUSER;
        alter_role := 'SUCCEEDED';
    EXCEPTION WHEN OTHERS THEN
        alter_role := 'refused: ' || SQLSTATE;
    END;
    BEGIN
        CREATE TEMP TABLE rl_probe (x integer);
        DROP TABLE rl_probe;
        temp_table := 'allowed';
    EXCEPTION WHEN OTHERS THEN
        temp_table := 'refused: ' || SQLSTATE;
    END;
    INSERT INTO rl_witness.log VALUES (coalesce(current_setting('rl.phase', true), ''), what, current_user,
        (SELECT rolsuper FROM pg_roles WHERE rolname = current_user), alter_role, temp_table, pg_trigger_depth());
    RETURN true;
END $$;
SET rl.phase = 'setup';

---------------------------------------------------------------------------------------------
-- The owner's table. Only its owner (or a member inheriting its privileges) may put a pipeline
-- on it: 42501 for everybody else, with a HINT naming the owner.
---------------------------------------------------------------------------------------------
SET ROLE regress_et_owner;
GRANT USAGE ON SCHEMA rl_app TO PUBLIC;
CREATE TABLE rl_app.orders (order_id bigint, store text, amount integer, ordered_at timestamptz);
GRANT INSERT ON rl_app.orders TO regress_et_writer;
SET ROLE regress_et_writer;
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline(name => 'rl_orders', source => 'rl_app.orders',
    event_time => 'ordered_at', window_size => '1 day') $$);
SET ROLE regress_et_stranger;
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline(name => 'rl_orders', source => 'rl_app.orders',
    event_time => 'ordered_at', window_size => '1 day') $$);
SET ROLE regress_et_analyst;
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline(name => 'rl_orders', source => 'rl_app.orders',
    event_time => 'ordered_at', window_size => '1 day') $$);
-- A member of the owner's role that does not inherit its privileges is not the owner.
SET ROLE regress_et_noinherit;
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline(name => 'rl_orders', source => 'rl_app.orders',
    event_time => 'ordered_at', window_size => '1 day') $$);
RESET ROLE;
SELECT count(*) AS pipelines FROM _eventtime.pipeline WHERE name = 'rl_orders';
SET ROLE regress_et_owner;
SELECT eventtime.create_pipeline(name => 'rl_orders', source => 'rl_app.orders', event_time => 'ordered_at',
    key => ARRAY['store'], event_id => 'order_id', window_size => '1 day', allowed_lateness => '1 day',
    aggregates => 'count(*) AS orders, sum(amount) AS revenue');

-- The owner also needs CREATE on the table's schema, where the views go.
RESET ROLE;
CREATE SCHEMA rl_shared;
GRANT USAGE ON SCHEMA rl_shared TO PUBLIC;
CREATE TABLE rl_shared.ledger (id bigint, at timestamptz);
ALTER TABLE rl_shared.ledger OWNER TO regress_et_owner;
SET ROLE regress_et_owner;
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline(name => 'rl_ledger', source => 'rl_shared.ledger',
    event_time => 'at', window_size => '1 day') $$);
RESET ROLE;
SELECT count(*) AS pipelines FROM _eventtime.pipeline WHERE name = 'rl_ledger';

---------------------------------------------------------------------------------------------
-- The second tenant: its own tables and pipelines, one of them in a schema nobody else may even
-- look into. The first owner may do nothing with them, and does not see them.
---------------------------------------------------------------------------------------------
SET ROLE regress_et_tenant;
GRANT USAGE ON SCHEMA rl_tenant TO PUBLIC;
CREATE TABLE rl_tenant.orders (order_id bigint, store text, amount integer, ordered_at timestamptz);
SELECT eventtime.create_pipeline(name => 'rl_tenant_daily', source => 'rl_tenant.orders', event_time => 'ordered_at',
    key => ARRAY['store'], window_size => '1 day', aggregates => 'count(*) AS orders');
CREATE TABLE rl_private.events (id bigint, at timestamptz);
SELECT eventtime.create_pipeline(name => 'rl_private_p', source => 'rl_private.events', event_time => 'at',
    window_size => '1 hour');
INSERT INTO rl_tenant.orders VALUES (1, 'east', 5, '2026-03-01 08:00+00');
SELECT * FROM eventtime.advance_watermark('rl_tenant_daily', '2026-03-02 00:00+00');
SELECT store, window_start, version, orders FROM rl_tenant.rl_tenant_daily_history ORDER BY store, window_start;
SET ROLE regress_et_owner;
SELECT pg_temp.try($$ SELECT eventtime.create_pipeline(name => 'rl_tenant_mine', source => 'rl_tenant.orders',
    event_time => 'ordered_at', window_size => '1 hour') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.advance_watermark('rl_tenant_daily', '2026-03-03 00:00+00') $$);
SELECT pg_temp.try($$ SELECT eventtime.drop_pipeline('rl_tenant_daily') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('rl_tenant_daily',
    '{"order_id": 2, "store": "east", "amount": 1, "ordered_at": "2026-03-02 08:00+00"}') $$);
SELECT pg_temp.try($$ INSERT INTO rl_tenant.orders VALUES (2, 'east', 1, '2026-03-02 08:00+00') $$);
SELECT pg_temp.try($$ SELECT * FROM rl_tenant.rl_tenant_daily_history $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.explain('rl_tenant_daily', '2026-03-01 08:00+00', 'east') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.explain('rl_private_p', '2026-03-01 08:00+00') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.advance_watermark('rl_private_p', '2026-03-03 00:00+00') $$);
-- The tenant's pipelines are invisible to the owner, and the owner's to the tenant: no error.
SELECT name, source FROM eventtime.pipelines ORDER BY name;
SELECT pipeline, source, watermark FROM eventtime.sources ORDER BY pipeline, source;
SET ROLE regress_et_tenant;
SELECT name, source FROM eventtime.pipelines ORDER BY name;
SELECT pipeline, source, watermark FROM eventtime.sources ORDER BY pipeline, source;
SELECT pg_temp.try($$ SELECT * FROM eventtime.advance_watermark('rl_orders', '2026-03-03 00:00+00') $$);
RESET ROLE;
-- Nothing of that changed the tenant's pipeline.
SELECT name, watermark, firings FROM eventtime.pipelines WHERE name = 'rl_tenant_daily';

---------------------------------------------------------------------------------------------
-- Ingest: INSERT, COPY and eventtime.ingest() need INSERT on the source table, nothing more.
---------------------------------------------------------------------------------------------
SET ROLE regress_et_writer;
INSERT INTO rl_app.orders VALUES (1, 'north', 10, '2026-03-01 09:00+00'), (2, 'south', 20, '2026-03-01 10:00+00');
COPY rl_app.orders (order_id, store, amount, ordered_at) FROM stdin;
3	north	30	2026-03-01 11:00:00+00
4	south	40	2026-03-02 08:00:00+00
\.
SELECT * FROM eventtime.ingest('rl_orders', '[{"order_id": 5, "store": "north", "amount": 50, "ordered_at": "2026-03-01 12:00+00"},
                                             {"order_id": 1, "store": "north", "amount": 10, "ordered_at": "2026-03-01 09:00+00"}]');
-- Inserting is all the writer may do.
SELECT pg_temp.try($$ SELECT * FROM rl_app.orders $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.advance_watermark('rl_orders', '2026-03-02 00:00+00') $$);
SELECT pg_temp.try($$ SELECT eventtime.drop_pipeline('rl_orders') $$);
SELECT pg_temp.try($$ SELECT * FROM rl_app.rl_orders_latest $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.explain('rl_orders', '2026-03-01 09:00+00', 'north') $$);
SELECT name FROM eventtime.pipelines ORDER BY name;
SELECT pipeline, source FROM eventtime.sources ORDER BY pipeline, source;
-- Without INSERT on the table, no way in.
SET ROLE regress_et_stranger;
SELECT pg_temp.try($$ INSERT INTO rl_app.orders VALUES (90, 'north', 1, '2026-03-01 09:30+00') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('rl_orders',
    '{"order_id": 90, "store": "north", "amount": 1, "ordered_at": "2026-03-01 09:30+00"}') $$);
SET ROLE regress_et_analyst;
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('rl_orders',
    '{"order_id": 91, "store": "north", "amount": 1, "ordered_at": "2026-03-01 09:30+00"}') $$);
RESET ROLE;
SELECT order_id, store, amount, ordered_at FROM rl_app.orders ORDER BY order_id, ordered_at;

---------------------------------------------------------------------------------------------
-- Advance, idle and drop: the owner's. Everybody else gets 42501 and nothing changes.
---------------------------------------------------------------------------------------------
SET ROLE regress_et_owner;
SELECT * FROM eventtime.advance_watermark('rl_orders', '2026-03-02 00:00+00');
SELECT * FROM eventtime.advance_watermark('rl_orders', '2026-03-02 00:00+00', source => 'kafka-0');
SET ROLE regress_et_writer;
SELECT pg_temp.try($$ SELECT * FROM eventtime.advance_watermark('rl_orders', '2026-03-05 00:00+00', source => 'kafka-0') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.mark_idle('rl_orders', 'kafka-0') $$);
SET ROLE regress_et_analyst;
SELECT pg_temp.try($$ SELECT * FROM eventtime.advance_watermark('rl_orders', '2026-03-05 00:00+00') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.mark_idle('rl_orders', 'kafka-0') $$);
SELECT pg_temp.try($$ SELECT eventtime.drop_pipeline('rl_orders') $$);
SET ROLE regress_et_stranger;
SELECT pg_temp.try($$ SELECT * FROM eventtime.advance_watermark('rl_orders', '2026-03-05 00:00+00') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.mark_idle('rl_orders', 'kafka-0') $$);
SELECT pg_temp.try($$ SELECT eventtime.drop_pipeline('rl_orders') $$);
SET ROLE regress_et_noinherit;
SELECT pg_temp.try($$ SELECT * FROM eventtime.advance_watermark('rl_orders', '2026-03-05 00:00+00') $$);
SET ROLE regress_et_owner;
SELECT * FROM eventtime.mark_idle('rl_orders', 'kafka-0');
SELECT pipeline, source, watermark, idle, idle_reason FROM eventtime.sources WHERE pipeline = 'rl_orders'
ORDER BY source;
-- A late order (a new version) and, once the grace is over, a refused one.
SET ROLE regress_et_writer;
SELECT * FROM eventtime.ingest('rl_orders', '{"order_id": 6, "store": "north", "amount": 60, "ordered_at": "2026-03-01 20:00+00"}');
SET ROLE regress_et_owner;
SELECT * FROM eventtime.advance_watermark('rl_orders', '2026-03-03 00:00+00');
SET ROLE regress_et_writer;
INSERT INTO rl_app.orders VALUES (7, 'north', 70, '2026-03-01 21:00+00');
SET ROLE regress_et_owner;
SELECT store, window_start, version, kind, orders, revenue, sealed, watermark FROM rl_app.rl_orders_history
ORDER BY store, window_start, version;
SELECT event_id, store, event_time, window_end, watermark FROM rl_app.rl_orders_refused ORDER BY event_id;

---------------------------------------------------------------------------------------------
-- Reading: the views are the owner's to grant. eventtime.pipelines and eventtime.sources show a
-- role the pipelines of which it may read at least one view; explain needs the same.
---------------------------------------------------------------------------------------------
SET ROLE regress_et_owner;
GRANT SELECT ON rl_app.rl_orders_latest, rl_app.rl_orders_sealed TO regress_et_analyst;
SET ROLE regress_et_analyst;
SELECT store, window_start, version, kind, orders, revenue FROM rl_app.rl_orders_latest ORDER BY store, window_start;
SELECT store, window_start, version, orders, revenue FROM rl_app.rl_orders_sealed ORDER BY store, window_start;
SELECT pg_temp.try($$ SELECT * FROM rl_app.rl_orders_history $$);
SELECT pg_temp.try($$ SELECT * FROM rl_app.rl_orders_refused $$);
SELECT name, source, watermark, firings, refused, duplicates FROM eventtime.pipelines ORDER BY name;
SELECT pipeline, source, watermark, idle FROM eventtime.sources ORDER BY pipeline, source;
SELECT window_start, window_end, deadline, state, rows_in_state, latest_version, watermark, landing
FROM eventtime.explain('rl_orders', '2026-03-02 08:00+00', 'south');
SELECT pg_temp.try($$ SELECT * FROM eventtime.explain('rl_tenant_daily', '2026-03-01 08:00+00', 'east') $$);
-- The reader of a view may not pass it on.
SELECT pg_temp.try($$ GRANT SELECT ON rl_app.rl_orders_latest TO regress_et_stranger $$);
SET ROLE regress_et_stranger;
SELECT pg_temp.try($$ SELECT * FROM rl_app.rl_orders_latest $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.explain('rl_orders', '2026-03-02 08:00+00', 'south') $$);
SELECT name FROM eventtime.pipelines ORDER BY name;
SELECT pipeline, source FROM eventtime.sources ORDER BY pipeline, source;
-- Revoked, the pipeline disappears for the analyst; any one view of it is enough to see it again.
SET ROLE regress_et_owner;
REVOKE SELECT ON rl_app.rl_orders_latest, rl_app.rl_orders_sealed FROM regress_et_analyst;
SET ROLE regress_et_analyst;
SELECT name FROM eventtime.pipelines ORDER BY name;
SELECT pipeline, source FROM eventtime.sources ORDER BY pipeline, source;
SELECT pg_temp.try($$ SELECT * FROM eventtime.explain('rl_orders', '2026-03-02 08:00+00', 'south') $$);
SET ROLE regress_et_owner;
GRANT SELECT ON rl_app.rl_orders_refused TO regress_et_analyst;
SET ROLE regress_et_analyst;
SELECT name FROM eventtime.pipelines ORDER BY name;
SELECT event_id, store, "row", window_end, watermark FROM rl_app.rl_orders_refused ORDER BY event_id;
SELECT state, latest_version, landing FROM eventtime.explain('rl_orders', '2026-03-01 21:00+00', 'north');
RESET ROLE;

---------------------------------------------------------------------------------------------
-- The extension's internals are no way around: the catalog shows a role only the pipelines it
-- owns, the internal functions check what the public ones check, and the pipeline's trigger
-- function cannot be put on another table. (Internal names carry the pipeline id, shown as <id>.)
---------------------------------------------------------------------------------------------
SELECT id AS orders_id, format('_eventtime.%I', 'p' || id || '_ingest') AS orders_trigger_function
FROM _eventtime.pipeline WHERE name = 'rl_orders' \gset
SET ROLE regress_et_stranger;
SELECT count(*) AS catalog_rows FROM _eventtime.pipeline;
SELECT pg_temp.try($$ SELECT * FROM _eventtime.source $$);
SELECT pg_temp.try(format('INSERT INTO _eventtime.duplicate_counts VALUES (%s, 1000)', :orders_id));
SELECT pg_temp.try(format('SELECT _eventtime.advance_by_watermark_lag(%s, %L, 0)', :orders_id, 'infinity'));
SELECT count(*) AS count_rows FROM _eventtime.pipeline_counts(:orders_id);
SELECT pg_temp.try($$ SELECT * FROM _eventtime.explain('rl_orders', '2026-03-01 09:00+00', '{north}') $$);
SELECT pg_temp.try($$ SELECT _eventtime.restrict() $$);
CREATE TABLE regress_evil.orders (order_id bigint, store text, amount integer, ordered_at timestamptz);
SELECT regexp_replace(pg_temp.try(format('CREATE TRIGGER steal AFTER INSERT ON regress_evil.orders '
    'REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION %s()', :'orders_trigger_function')),
    'p[0-9]+_', 'p<id>_', 'g') AS try;
-- Nor can the PL/pgSQL function behind the trigger's front.
SELECT regexp_replace(pg_temp.try(format('CREATE TRIGGER steal AFTER INSERT ON regress_evil.orders '
    'REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION %s_sql()', :'orders_trigger_function')),
    'p[0-9]+_', 'p<id>_', 'g') AS try;
SET ROLE regress_et_analyst;
SELECT count(*) AS catalog_rows FROM _eventtime.pipeline;
SELECT pg_temp.try(format('SELECT _eventtime.advance_by_watermark_lag(%s, %L, 0)', :orders_id, 'infinity'));
SET ROLE regress_et_owner;
SELECT name FROM _eventtime.pipeline ORDER BY name;
SET ROLE regress_et_tenant;
SELECT name FROM _eventtime.pipeline ORDER BY name;
RESET ROLE;
SELECT name, watermark, firings, refused, duplicates FROM eventtime.pipelines WHERE name = 'rl_orders';

---------------------------------------------------------------------------------------------
-- (a) A cast the owner defines, reached from the pipeline's trigger: a refused row is stored as
-- to_jsonb(row), which uses the owner's CAST (channel AS json). The pipeline is created by the
-- superuser; the refused rows are inserted by the writer, by the superuser and through ingest().
-- The cast must run as the owner (never as the superuser who created the pipeline, nor as the
-- writer), inside a security-restricted operation.
---------------------------------------------------------------------------------------------
SET ROLE regress_et_owner;
CREATE TYPE rl_app.channel AS ENUM ('web', 'app');
CREATE FUNCTION rl_app.channel_json(c rl_app.channel) RETURNS json LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM rl_witness.note('CAST (channel AS json)');
    RETURN json_build_object('channel', c::text);
END $$;
CREATE CAST (rl_app.channel AS json) WITH FUNCTION rl_app.channel_json(rl_app.channel);
CREATE TABLE rl_app.payments (pay_id bigint, ch rl_app.channel, amount integer, paid_at timestamptz);
GRANT INSERT ON rl_app.payments TO regress_et_writer;
RESET ROLE;
SET rl.phase = 'a0 create_pipeline by postgres';
SELECT eventtime.create_pipeline(name => 'rl_chan', source => 'rl_app.payments', event_time => 'paid_at',
    key => ARRAY['ch'], event_id => 'pay_id', window_size => '1 day', aggregates => 'count(*) AS payments, sum(amount) AS total');
SET rl.phase = 'a0 on time, by writer';
SET ROLE regress_et_writer;
INSERT INTO rl_app.payments VALUES (1, 'web', 10, '2026-03-01 09:00+00'), (2, 'app', 20, '2026-03-01 10:00+00');
RESET ROLE;
SET rl.phase = 'a0 advance by postgres';
SELECT * FROM eventtime.advance_watermark('rl_chan', '2026-03-02 00:00+00');
SET rl.phase = 'a1 refused row, INSERT by writer';
SET ROLE regress_et_writer;
INSERT INTO rl_app.payments VALUES (3, 'web', 30, '2026-03-01 11:00+00');
SET rl.phase = 'a2 refused row, ingest() by writer';
SELECT * FROM eventtime.ingest('rl_chan', '{"pay_id": 4, "ch": "app", "amount": 40, "paid_at": "2026-03-01 12:00+00"}');
RESET ROLE;
SET rl.phase = 'a3 refused row, INSERT by postgres';
INSERT INTO rl_app.payments VALUES (5, 'app', 50, '2026-03-01 13:00+00');
RESET rl.phase;
-- The stored rows went through the owner's cast.
SET ROLE regress_et_owner;
SELECT event_id, ch, "row", window_end, watermark FROM rl_app.rl_chan_refused ORDER BY event_id;
SELECT ch, window_start, version, payments, total FROM rl_app.rl_chan_history ORDER BY ch, window_start, version;
RESET ROLE;
SELECT phase, what, who, super, alter_role, temp_table FROM rl_witness.log WHERE phase LIKE 'a%'
GROUP BY phase, what, who, super, alter_role, temp_table ORDER BY phase, what, who;

---------------------------------------------------------------------------------------------
-- (b) A domain whose CHECK calls the owner's function, as the key column's type, with two
-- pipelines on the table: one created by the owner, one by the superuser. PostgreSQL runs the
-- CHECK when a value is coerced to the domain: in the writer's own INSERT and in the JSON
-- coercion of ingest(), both as the caller (a value already of the domain's type, copied into
-- the pipeline's tables, is not checked again). The owner also owns the pipelines' internal
-- tables and puts triggers of its own on them: code reached by ingest (state, late versions,
-- refused rows) and by advance_watermark (firing, purging), even when the superuser advances.
-- All of it must run as the owner at most, in a security-restricted operation.
---------------------------------------------------------------------------------------------
SET ROLE regress_et_owner;
CREATE FUNCTION rl_app.region_ok(r text) RETURNS boolean LANGUAGE plpgsql STRICT
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM rl_witness.note('CHECK of domain region');
    RETURN r <> '';
END $$;
CREATE DOMAIN rl_app.region AS text CHECK (rl_app.region_ok(VALUE));
CREATE TABLE rl_app.readings (rid integer, region rl_app.region, val integer, at timestamptz);
GRANT INSERT ON rl_app.readings TO regress_et_writer;
CREATE FUNCTION rl_app.watch() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM rl_witness.note(TG_ARGV[0] || ': trigger ' || TG_OP || ' on ' || regexp_replace(TG_TABLE_NAME, '^p[0-9]+_', 'p<id>_'));
    RETURN NULL;
END $$;
SET rl.phase = 'b0 create_pipeline by owner';
SELECT eventtime.create_pipeline(name => 'rl_dom_o', source => 'rl_app.readings', event_time => 'at',
    key => ARRAY['region'], event_id => 'rid', window_size => '1 hour', allowed_lateness => '1 hour',
    aggregates => 'count(*) AS n, sum(val) AS total');
RESET ROLE;
SET rl.phase = 'b0 create_pipeline by postgres';
SELECT eventtime.create_pipeline(name => 'rl_dom_s', source => 'rl_app.readings', event_time => 'at',
    key => ARRAY['region'], event_id => 'rid', window_size => '1 hour', allowed_lateness => '1 hour',
    aggregates => 'count(*) AS n, sum(val) AS total');
-- The owner's row triggers on the internal tables of both pipelines (names carry the pipeline
-- id): they run for each state row written or purged, each version and each refused row.
SELECT format('_eventtime.%I', 'p' || id || '_state') AS o_state, format('_eventtime.%I', 'p' || id || '_history') AS o_history,
       format('_eventtime.%I', 'p' || id || '_refused') AS o_refused
FROM _eventtime.pipeline WHERE name = 'rl_dom_o' \gset
SELECT format('_eventtime.%I', 'p' || id || '_state') AS s_state, format('_eventtime.%I', 'p' || id || '_history') AS s_history,
       format('_eventtime.%I', 'p' || id || '_refused') AS s_refused
FROM _eventtime.pipeline WHERE name = 'rl_dom_s' \gset
SET ROLE regress_et_owner;
CREATE TRIGGER rl_watch AFTER INSERT OR UPDATE OR DELETE ON :o_state FOR EACH ROW EXECUTE FUNCTION rl_app.watch('rl_dom_o');
CREATE TRIGGER rl_watch AFTER INSERT ON :o_history FOR EACH ROW EXECUTE FUNCTION rl_app.watch('rl_dom_o');
CREATE TRIGGER rl_watch AFTER INSERT ON :o_refused FOR EACH ROW EXECUTE FUNCTION rl_app.watch('rl_dom_o');
CREATE TRIGGER rl_watch AFTER INSERT OR UPDATE OR DELETE ON :s_state FOR EACH ROW EXECUTE FUNCTION rl_app.watch('rl_dom_s');
CREATE TRIGGER rl_watch AFTER INSERT ON :s_history FOR EACH ROW EXECUTE FUNCTION rl_app.watch('rl_dom_s');
CREATE TRIGGER rl_watch AFTER INSERT ON :s_refused FOR EACH ROW EXECUTE FUNCTION rl_app.watch('rl_dom_s');
SET rl.phase = 'b1 on time, INSERT by writer';
SET ROLE regress_et_writer;
INSERT INTO rl_app.readings VALUES (1, 'north', 10, '2026-03-01 10:10+00'), (2, 'south', 20, '2026-03-01 10:20+00'),
                                   (3, 'north', 30, '2026-03-01 11:10+00');
RESET ROLE;
SET rl.phase = 'b2 advance rl_dom_s by postgres (fires)';
SELECT * FROM eventtime.advance_watermark('rl_dom_s', '2026-03-01 11:00+00');
SET rl.phase = 'b3 advance rl_dom_o by owner (fires)';
SET ROLE regress_et_owner;
SELECT * FROM eventtime.advance_watermark('rl_dom_o', '2026-03-01 11:00+00');
SET rl.phase = 'b4 late row, INSERT by writer';
SET ROLE regress_et_writer;
INSERT INTO rl_app.readings VALUES (4, 'north', 40, '2026-03-01 10:40+00');
SET rl.phase = 'b5 late row, ingest() by writer';
SELECT * FROM eventtime.ingest('rl_dom_s', '{"rid": 5, "region": "south", "val": 50, "at": "2026-03-01 10:50+00"}');
SELECT pg_temp.try($$ SELECT * FROM eventtime.ingest('rl_dom_s', '{"rid": 6, "region": "", "val": 60, "at": "2026-03-01 10:50+00"}') $$);
RESET ROLE;
SET rl.phase = 'b6 advance rl_dom_s by postgres (fires, purges)';
SELECT * FROM eventtime.advance_watermark('rl_dom_s', '2026-03-01 12:00+00');
SET rl.phase = 'b7 advance rl_dom_o by owner (fires, purges)';
SET ROLE regress_et_owner;
SELECT * FROM eventtime.advance_watermark('rl_dom_o', '2026-03-01 12:00+00');
SET rl.phase = 'b8 refused row, INSERT by writer';
SET ROLE regress_et_writer;
INSERT INTO rl_app.readings VALUES (7, 'south', 70, '2026-03-01 10:30+00');
RESET ROLE;
RESET rl.phase;
SET ROLE regress_et_owner;
SELECT region, window_start, version, kind, n, total, sealed FROM rl_app.rl_dom_o_history ORDER BY region, window_start, version;
SELECT region, window_start, version, kind, n, total, sealed FROM rl_app.rl_dom_s_history ORDER BY region, window_start, version;
SELECT event_id, region, event_time FROM rl_app.rl_dom_o_refused ORDER BY event_id;
SELECT event_id, region, event_time FROM rl_app.rl_dom_s_refused ORDER BY event_id;
RESET ROLE;
SELECT phase, what, who, super, alter_role, temp_table, depth FROM rl_witness.log WHERE phase LIKE 'b%'
GROUP BY phase, what, who, super, alter_role, temp_table, depth ORDER BY phase, what, who, depth;

---------------------------------------------------------------------------------------------
-- (c) A hostile search_path: a schema ahead of pg_catalog defining now(), count(*), sum(integer),
-- to_jsonb(anyelement), jsonb_typeof(jsonb) and = for (text, text), each recording that it ran.
-- Ingest and advance, by the writer, the owner and the superuser, give the right results and
-- never run them.
---------------------------------------------------------------------------------------------
SET ROLE regress_et_owner;
CREATE TABLE rl_app.clicks (id text, page text, n integer, at timestamptz);
GRANT INSERT ON rl_app.clicks TO regress_et_writer;
SELECT eventtime.create_pipeline(name => 'rl_clicks', source => 'rl_app.clicks', event_time => 'at',
    key => ARRAY['page'], event_id => 'id', window_size => '1 hour', allowed_lateness => '1 hour',
    aggregates => 'count(*) AS clicks, sum(n) AS total');
RESET ROLE;
SET ROLE regress_et_stranger;
GRANT USAGE ON SCHEMA regress_evil TO PUBLIC;
CREATE FUNCTION regress_evil.now() RETURNS timestamptz LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN PERFORM rl_witness.note('regress_evil.now()'); RETURN pg_catalog.now(); END $$;
CREATE FUNCTION regress_evil.count_step(bigint) RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN PERFORM rl_witness.note('regress_evil.count(*)'); RETURN $1 + 1; END $$;
CREATE AGGREGATE regress_evil.count(*) (SFUNC = regress_evil.count_step, STYPE = bigint, INITCOND = '0');
CREATE FUNCTION regress_evil.sum_step(bigint, integer) RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM rl_witness.note('regress_evil.sum(integer)');
    IF $2 IS NULL THEN RETURN $1; END IF;
    RETURN coalesce($1, 0) + $2;
END $$;
CREATE AGGREGATE regress_evil.sum(integer) (SFUNC = regress_evil.sum_step, STYPE = bigint);
CREATE FUNCTION regress_evil.to_jsonb(anyelement) RETURNS jsonb LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN PERFORM rl_witness.note('regress_evil.to_jsonb(anyelement)'); RETURN pg_catalog.to_jsonb($1); END $$;
CREATE FUNCTION regress_evil.jsonb_typeof(jsonb) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN PERFORM rl_witness.note('regress_evil.jsonb_typeof(jsonb)'); RETURN pg_catalog.jsonb_typeof($1); END $$;
CREATE FUNCTION regress_evil.text_eq(text, text) RETURNS boolean LANGUAGE plpgsql STRICT SET search_path = pg_catalog, pg_temp AS $$
BEGIN PERFORM rl_witness.note('regress_evil.= (text, text)'); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR regress_evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = regress_evil.text_eq);
RESET ROLE;
-- From here to RESET search_path this file calls nothing but the extension's functions, so that
-- any run of the evil functions comes from them.
SET search_path = regress_evil, pg_catalog, public;
-- The control: an ordinary query of the writer does run them.
SET rl.phase = 'c0 control: the writer''s own query';
SET ROLE regress_et_writer;
SELECT count(*) AS n, sum(x) AS total, to_jsonb(max(x)) AS j, jsonb_typeof('{}') AS t, 'a'::text = 'a'::text AS eq,
       now() IS NOT NULL AS has_now
FROM (VALUES (1), (2)) v(x);
SET rl.phase = 'c1 INSERT by writer';
INSERT INTO rl_app.clicks VALUES ('a1', 'home', 1, '2026-03-01 10:05+00'), ('a2', 'home', 2, '2026-03-01 10:10+00'),
                                 ('a3', 'cart', 3, '2026-03-01 10:20+00'), ('a2', 'home', 2, '2026-03-01 10:10+00');
SET rl.phase = 'c2 ingest() by writer';
SELECT * FROM eventtime.ingest('rl_clicks', '[{"id": "a4", "page": "home", "n": 4, "at": "2026-03-01 10:40+00"},
                                              {"id": "a1", "page": "home", "n": 1, "at": "2026-03-01 10:05+00"},
                                              {"id": "b1", "page": "cart", "n": 5, "at": "2026-03-01 11:15+00"}]');
SET rl.phase = 'c3 advance by owner';
SET ROLE regress_et_owner;
SELECT * FROM eventtime.advance_watermark('rl_clicks', '2026-03-01 11:00+00');
SET rl.phase = 'c4 late row and a redelivery, INSERT by writer';
SET ROLE regress_et_writer;
INSERT INTO rl_app.clicks VALUES ('a5', 'cart', 6, '2026-03-01 10:50+00'), ('a3', 'cart', 3, '2026-03-01 10:20+00');
SET rl.phase = 'c5 late row, ingest() by owner';
SET ROLE regress_et_owner;
SELECT * FROM eventtime.ingest('rl_clicks', '{"id": "a6", "page": "home", "n": 10, "at": "2026-03-01 10:59:59+00"}');
SET rl.phase = 'c6 advance by postgres';
RESET ROLE;
SELECT * FROM eventtime.advance_watermark('rl_clicks', '2026-03-01 12:00+00');
SET rl.phase = 'c7 refused row and a redelivery, ingest() by writer';
SET ROLE regress_et_writer;
SELECT * FROM eventtime.ingest('rl_clicks', '[{"id": "a7", "page": "home", "n": 7, "at": "2026-03-01 10:30+00"},
                                              {"id": "a1", "page": "home", "n": 1, "at": "2026-03-01 10:05+00"}]');
SET rl.phase = 'c8 reads by owner';
SET ROLE regress_et_owner;
SELECT window_start, state, rows_in_state, latest_version, watermark, landing
FROM eventtime.explain('rl_clicks', '2026-03-01 10:30+00', 'home');
SELECT name, watermark, open_windows, state_rows, firings, refused, duplicates FROM eventtime.pipelines ORDER BY name;
SELECT pipeline, source, watermark FROM eventtime.sources ORDER BY pipeline, source;
RESET ROLE;
RESET rl.phase;
RESET search_path;
-- The right results: the windows of the rows above, each id once.
SELECT page, window_start, version, kind, clicks, total, sealed, watermark FROM rl_app.rl_clicks_history
ORDER BY page, window_start, version;
SELECT event_id, page, event_time, "row", window_end, watermark FROM rl_app.rl_clicks_refused ORDER BY event_id;
SELECT name, watermark, firings, refused, duplicates FROM eventtime.pipelines WHERE name = 'rl_clicks';
-- The evil functions ran for the control only.
SELECT phase, what, who, super FROM rl_witness.log WHERE phase LIKE 'c%'
GROUP BY phase, what, who, super ORDER BY phase, what, who;

---------------------------------------------------------------------------------------------
-- A member inheriting the owner's privileges acts as the owner; what it creates is the owner's.
---------------------------------------------------------------------------------------------
SET ROLE regress_et_deputy;
SELECT eventtime.create_pipeline(name => 'rl_deputy', source => 'rl_app.orders', event_time => 'ordered_at',
    window_size => '1 day', aggregates => 'sum(amount) AS revenue');
SELECT * FROM eventtime.advance_watermark('rl_orders', '2026-03-04 00:00+00');
SELECT name FROM eventtime.pipelines ORDER BY name;
RESET ROLE;

---------------------------------------------------------------------------------------------
-- Ownership: every object of every pipeline belongs to its source table's owner, whoever
-- created the pipeline (the owner, the superuser, the deputy). Internal names carry the
-- pipeline id, shown as <id>.
---------------------------------------------------------------------------------------------
SELECT p.name AS pipeline, regexp_replace(c.relname, '^p[0-9]+_', 'p<id>_') AS relation, c.relkind,
       pg_get_userbyid(c.relowner) AS owner
FROM _eventtime.pipeline p
JOIN pg_class c ON c.relnamespace = '_eventtime'::regnamespace AND c.relname ~ ('^p' || p.id || '_')
WHERE p.name LIKE 'rl\_%' AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
ORDER BY pipeline, relation;
-- The trigger's function of a tumbling pipeline is the front, in C, which switches to the owner
-- itself; the PL/pgSQL function behind it, and the trigger function of the other kinds, are
-- SECURITY DEFINER. None is PUBLIC's.
SELECT p.name AS pipeline, regexp_replace(f.proname, '^p[0-9]+_', 'p<id>_') AS function, pg_get_userbyid(f.proowner) AS owner,
       l.lanname AS language, f.prosecdef AS security_definer, has_function_privilege('public', f.oid, 'EXECUTE') AS public_executes
FROM _eventtime.pipeline p
JOIN pg_proc f ON f.pronamespace = '_eventtime'::regnamespace AND f.proname ~ ('^p' || p.id || '_')
JOIN pg_language l ON l.oid = f.prolang
WHERE p.name LIKE 'rl\_%'
ORDER BY pipeline, function;
SELECT p.name AS pipeline, t.tgrelid::regclass AS on_table, pg_get_userbyid(c.relowner) AS table_owner,
       pg_get_userbyid(f.proowner) AS function_owner
FROM _eventtime.pipeline p
JOIN pg_proc f ON f.pronamespace = '_eventtime'::regnamespace AND f.proname ~ ('^p' || p.id || '_')
JOIN pg_trigger t ON t.tgfoid = f.oid
JOIN pg_class c ON c.oid = t.tgrelid
WHERE p.name LIKE 'rl\_%'
ORDER BY pipeline, t.tgrelid::regclass::text;
SELECT schemaname, viewname, viewowner FROM pg_views WHERE schemaname IN ('rl_app', 'rl_tenant', 'rl_private', 'rl_shared')
ORDER BY schemaname, viewname;
-- Every relation of a pipeline in _eventtime, indexes included, has its source table's owner.
SELECT p.name AS pipeline, pg_get_userbyid(s.relowner) AS table_owner, bool_and(c.relowner = s.relowner) AS all_the_owners
FROM _eventtime.pipeline p
JOIN pg_class s ON s.oid = p.source
JOIN pg_class c ON c.relnamespace = '_eventtime'::regnamespace AND c.relname ~ ('^p' || p.id || '_')
WHERE p.name LIKE 'rl\_%'
GROUP BY p.name, s.relowner ORDER BY pipeline;
SET ROLE regress_et_deputy;
SELECT eventtime.drop_pipeline('rl_deputy');
RESET ROLE;

---------------------------------------------------------------------------------------------
-- No escalation: no regress role became a superuser, and every run of a witness was as a role
-- that is not one.
---------------------------------------------------------------------------------------------
SELECT rolname, rolsuper FROM pg_roles WHERE rolname LIKE 'regress\_et\_%' ORDER BY rolname;
SELECT count(*) FILTER (WHERE super) AS runs_as_superuser, count(*) FILTER (WHERE alter_role <> 'refused: 42501') AS alter_role_not_refused,
       count(DISTINCT phase) AS phases_witnessed
FROM rl_witness.log;
-- Who ran what, over the whole file: the owner's code always as the owner, inside a
-- security-restricted operation; the writer only for its own statements.
SELECT who, super, alter_role, temp_table, string_agg(DISTINCT split_part(phase, ' ', 1), ', ' ORDER BY split_part(phase, ' ', 1)) AS phases
FROM rl_witness.log GROUP BY who, super, alter_role, temp_table ORDER BY who, temp_table;

---------------------------------------------------------------------------------------------
-- The owner drops its pipelines, including those the superuser created; the tenant its own.
---------------------------------------------------------------------------------------------
SET ROLE regress_et_owner;
SELECT eventtime.drop_pipeline(name) FROM (VALUES ('rl_orders'), ('rl_chan'), ('rl_dom_o'), ('rl_dom_s'), ('rl_clicks')) v(name);
SELECT name FROM eventtime.pipelines ORDER BY name;
SET ROLE regress_et_tenant;
SELECT eventtime.drop_pipeline(name) FROM (VALUES ('rl_tenant_daily'), ('rl_private_p')) v(name);
RESET ROLE;
SELECT count(*) AS pipelines_left FROM _eventtime.pipeline WHERE name LIKE 'rl\_%';
SELECT (SELECT count(*) FROM pg_class WHERE relnamespace = '_eventtime'::regnamespace
          AND pg_get_userbyid(relowner) LIKE 'regress\_et\_%') AS relations_left,
       (SELECT count(*) FROM pg_proc WHERE pronamespace = '_eventtime'::regnamespace
          AND pg_get_userbyid(proowner) LIKE 'regress\_et\_%') AS functions_left;
SET client_min_messages = warning;
DROP SCHEMA rl_app, rl_tenant, rl_private, rl_shared, regress_evil, rl_witness CASCADE;
DROP OWNED BY regress_et_owner, regress_et_writer, regress_et_analyst, regress_et_stranger, regress_et_tenant,
    regress_et_deputy, regress_et_noinherit CASCADE;
DROP ROLE regress_et_owner, regress_et_writer, regress_et_analyst, regress_et_stranger, regress_et_tenant,
    regress_et_deputy, regress_et_noinherit;
RESET client_min_messages;
