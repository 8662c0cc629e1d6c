-- pg_eventtime: objects that need the Rust functions to exist.

-- Whether a role may read a pipeline: it has the privileges of the pipeline's owner, or may read
-- at least one of the pipeline's views (USAGE on their schema and SELECT on the view).
-- eventtime.pipelines, eventtime.sources and explain show a role only such pipelines. The views
-- are looked up in the catalog, which names them without checking any privilege of the caller.
CREATE FUNCTION _eventtime.may_read(role oid, owner oid, view_schema name, name text) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
SELECT pg_catalog.pg_has_role(role, owner, 'USAGE')
    OR EXISTS (SELECT FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = view_schema
                 AND c.relname IN (name || '_history', name || '_latest', name || '_sealed', name || '_refused',
                                   name || '_provisional', name || '_current')
                 AND pg_catalog.has_schema_privilege(role, n.oid, 'USAGE')
                 AND pg_catalog.has_table_privilege(role, c.oid, 'SELECT'))
$$;

CREATE VIEW eventtime.pipelines AS
SELECT p.name,
       p.source,
       _eventtime.owner_of(p.source, p.owner)::regrole AS owner,
       p.event_time,
       p.key_columns,
       p.event_id,
       p.window_kind,
       p.window_size,
       CASE WHEN p.window_kind <> 'cumulate' THEN p.window_slide END AS window_slide,
       p.session_gap,
       p.time_zone,
       p.window_origin,
       p.allowed_lateness,
       p.watermark_lag,
       p.idle_timeout,
       p.clock_lag,
       p.max_ahead,
       p.aggregates,
       p.watermark,
       pg_catalog.to_regclass('_eventtime.p' || p.id || '_history') AS history_table,
       c.open_windows,
       c.state_rows,
       c.firings,
       c.refused,
       coalesce((SELECT sum(d.duplicates) FROM _eventtime.duplicate_counts d WHERE d.pipeline_id = p.id), 0)::bigint
         AS duplicates,
       p.created_at,
       c.idle_writers,
       (p.definition -> 'offsets' ->> 'column')::name AS offset_column,
       (p.definition -> 'offsets' ->> 'source_column')::name AS source_column,
       -- The source's unique index that is the pipeline's ledger of event ids (NULL: the
       -- pipeline keeps a ledger of its own, or has no event id).
       _eventtime.id_index_of(p.id)::regclass AS event_id_index,
       CASE WHEN p.window_kind = 'cumulate' THEN p.window_slide END AS cumulate_step,
       -- Batched late firings: the least processing time between two late versions of a window
       -- (NULL: one late version per ingest statement).
       pg_catalog.make_interval(secs => (p.definition ->> 'late_firing_us')::bigint / 1000000.0) AS late_firing
FROM _eventtime.pipeline p
CROSS JOIN LATERAL _eventtime.pipeline_counts(p.id) c
WHERE _eventtime.may_read((SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user),
                          _eventtime.owner_of(p.source, p.owner), p.view_schema, p.name);

GRANT SELECT ON eventtime.pipelines TO PUBLIC;

COMMENT ON VIEW eventtime.pipelines IS
  'One row per pipeline the current role may read (it has the privileges of the owner, or SELECT on one of the pipeline''s views): its definition, the watermark in force (NULL before the first advance), open windows, state rows, firings, refused rows and duplicates.';

COMMENT ON FUNCTION eventtime.create_pipeline(text, regclass, text, interval, text[], text, interval, text, timestamptz, interval, interval, interval, interval, interval, text, interval, text, text, interval, interval) IS
  'Creates an event-time pipeline on a source table, with tumbling, hopping (window_slide) or cumulate (cumulate_step) windows of a fixed duration or of calendar periods in a time zone, or sessions (session_gap), with late versions per statement or in batches (late_firing): triggers that route inserted rows, window state, and the views <name>_history, _latest, _sealed, _refused, _provisional and _current beside the source table.';
COMMENT ON FUNCTION eventtime.drop_pipeline(text) IS
  'Drops a pipeline: its trigger, state, history, refused rows and views. The source table and its rows stay.';
COMMENT ON FUNCTION eventtime.ingest(text, jsonb) IS
  'Inserts a JSON object or array of objects into the pipeline''s source table and returns how many (row, window) pairs were accepted, late, refused and duplicates.';
COMMENT ON FUNCTION eventtime.advance_watermark(text, timestamptz, text) IS
  'Moves the watermark of one source forward (default: the source "default"); the pipeline watermark, the minimum over active sources, then fires every window ending at or before it (version 1, sealed) and purges every window whose deadline it has reached.';
COMMENT ON FUNCTION eventtime.mark_idle(text, text) IS
  'Leaves a source out of the pipeline watermark until it advances again, and fires what the other sources then allow.';
COMMENT ON FUNCTION eventtime.landing(timestamptz, timestamptz, timestamptz, interval) IS
  'The landing rule: other-window, open, late-firing or side-output for a row''s event time, a window end, a watermark and an allowed lateness.';

CREATE VIEW eventtime.sources AS
SELECT pipeline, source, watermark, advanced_at, idle, idle_reason, holding_back, "offset"
FROM _eventtime.source_status();

GRANT SELECT ON eventtime.sources TO PUBLIC;

COMMENT ON VIEW eventtime.sources IS
  'One row per source of each pipeline: its watermark, when it last advanced, whether it is idle (marked, or past the idle_timeout), whether the pipeline watermark is waiting for it, and, for a pipeline with offset_column, the offset its rows committed (a job resumes after it; NULL watermark: the source brought rows but never advanced).';

-- The key values are VARIADIC text, so that any number of keys of any type can be given as
-- literals; the Rust function casts each to its key column's type.
CREATE FUNCTION eventtime.explain(pipeline text, event_time timestamptz, VARIADIC key text[] DEFAULT '{}')
RETURNS TABLE (window_start timestamptz, window_end timestamptz, deadline timestamptz, state text,
               rows_in_state bigint, latest_version integer, watermark timestamptz, landing text,
               held_back_by text[], explanation text, provisional jsonb)
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM _eventtime.explain($1, $2, $3) $$;

COMMENT ON FUNCTION eventtime.explain(text, timestamptz, text[]) IS
  'Why a window has or has not closed: for an event time and key values, each window the row belongs to, its bounds and deadline, its state (open, fired, purged), rows in state, latest version, the pipeline watermark, the landing such a row would get now, the sources the watermark waits for, and for an open window of a key with rows its aggregates so far (provisional, as <name>_provisional shows them).';

-- tick() runs each pipeline in a subtransaction of its own: one that fails is reported (a
-- WARNING, and its row's skipped) and rolled back alone; one whose writers hold its state for
-- longer than a moment (_eventtime.tick_pipeline waits 200 ms for them) is skipped as busy. The
-- others move.
CREATE FUNCTION eventtime.tick()
RETURNS TABLE (pipeline text, windows_fired bigint, windows_purged bigint, watermark timestamptz, skipped text)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
BEGIN
    FOR pipeline IN SELECT * FROM _eventtime.tick_candidates() LOOP
        BEGIN
            SELECT * INTO r FROM _eventtime.tick_pipeline(pipeline);
            IF r.watermark IS NOT NULL THEN
                windows_fired := r.windows_fired; windows_purged := r.windows_purged;
                watermark := r.watermark; skipped := NULL;
                RETURN NEXT;
            END IF;
        EXCEPTION
            WHEN lock_not_available THEN
                windows_fired := 0; windows_purged := 0; watermark := NULL;
                skipped := 'busy: a writer held the pipeline''s state (idle in its transaction?); the next tick tries again';
                RETURN NEXT;
            WHEN OTHERS THEN
                RAISE WARNING 'eventtime.tick(): pipeline "%" failed and was skipped: %', pipeline, SQLERRM
                    USING ERRCODE = SQLSTATE;
                windows_fired := 0; windows_purged := 0; watermark := NULL;
                skipped := 'error ' || SQLSTATE || ': ' || SQLERRM;
                RETURN NEXT;
        END;
    END LOOP;
END
$$;

-- The advance's wait in the lock queue, bounded (see src/pg/locks.rs): true when it got the lock.
CREATE FUNCTION _eventtime.lock_briefly(rel regclass) RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp SET lock_timeout = '20ms'
AS $$
BEGIN
    EXECUTE pg_catalog.format('LOCK TABLE %s IN EXCLUSIVE MODE', rel);
    RETURN true;
EXCEPTION WHEN lock_not_available THEN
    RETURN false;
END
$$;

COMMENT ON FUNCTION eventtime.tick() IS
  'What processing time moves, for every pipeline the caller may manage: advances the source "clock" of pipelines with a clock_lag to now() - clock_lag, applies idle timeouts, fires and purges what is due; one row per pipeline whose watermark moved, or that it skipped (skipped says why: a writer held it, or it failed). Schedule it with pg_cron.';

-- Renaming a column a pipeline uses would make every insert into its source table fail: the
-- ALTER TABLE is refused (see _eventtime.check_columns). A table that joins or leaves the tree
-- of a pipeline's source (a partition created, attached or detached, an inheritance child)
-- gets or loses the pipeline's trigger (see _eventtime.sync_members).
CREATE FUNCTION _eventtime.on_table_change() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tables oid[];
BEGIN
    SELECT pg_catalog.array_agg(c.objid) INTO tables
    FROM pg_catalog.pg_event_trigger_ddl_commands() c
    WHERE c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass;
    IF tables IS NULL THEN
        RETURN;
    END IF;
    IF TG_TAG OPERATOR(pg_catalog.=) 'ALTER TABLE' THEN
        PERFORM _eventtime.check_columns(tables);
    END IF;
    PERFORM _eventtime.sync_members(tables);
END
$$;
CREATE EVENT TRIGGER eventtime_table_change ON ddl_command_end WHEN TAG IN ('ALTER TABLE', 'CREATE TABLE')
    EXECUTE FUNCTION _eventtime.on_table_change();

-- The aggregates' expressions are kept as text that names what they call: a rename or a move to
-- another schema of such a function, operator, type or collation, or of its schema, is refused.
CREATE FUNCTION _eventtime.on_object_change() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM _eventtime.check_names(pg_catalog.array_agg(c.classid), pg_catalog.array_agg(c.objid))
    FROM pg_catalog.pg_event_trigger_ddl_commands() c;
END
$$;
CREATE EVENT TRIGGER eventtime_object_change ON ddl_command_end
    WHEN TAG IN ('ALTER FUNCTION', 'ALTER PROCEDURE', 'ALTER ROUTINE', 'ALTER OPERATOR', 'ALTER TYPE',
                 'ALTER DOMAIN', 'ALTER COLLATION', 'ALTER SCHEMA')
    EXECUTE FUNCTION _eventtime.on_object_change();

-- A pipeline's trigger depends on the source columns it reads and on the source's unique index
-- that is its ledger of event ids, so a plain DROP of one is refused by PostgreSQL. DROP ...
-- CASCADE would drop the trigger with it and leave the pipeline blind to every row written after:
-- that is refused too, naming the pipeline. A trigger dropped with its table (DROP TABLE, DROP
-- SCHEMA, a partition dropped), by drop_pipeline itself, or with the extension is not concerned.
-- The pipeline whose trigger is named `trigger`, whoever asks: the catalog's rows are each
-- owner's own, and a role that drops what another role's pipeline uses must be told (the
-- trigger's comment names the pipeline too).
CREATE FUNCTION _eventtime.pipeline_of_trigger(trigger text) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT p.name FROM _eventtime.pipeline p
    WHERE ('eventtime_ingest_p' OPERATOR(pg_catalog.||) p.id) OPERATOR(pg_catalog.=) trigger
$$;
CREATE FUNCTION _eventtime.on_drop() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    hit record;
BEGIN
    SELECT p.name, t.address_names[1] AS nsp, t.address_names[2] AS rel,
           (SELECT pg_catalog.string_agg(o.object_type OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) o.object_identity, ', ')
            FROM pg_catalog.pg_event_trigger_dropped_objects() o WHERE o.original) AS what
    INTO hit
    FROM pg_catalog.pg_event_trigger_dropped_objects() t
    CROSS JOIN LATERAL (SELECT _eventtime.pipeline_of_trigger(t.address_names[3]) AS name) p
    WHERE t.object_type OPERATOR(pg_catalog.=) 'trigger' AND NOT t.original AND p.name IS NOT NULL
      AND NOT EXISTS (SELECT FROM pg_catalog.pg_event_trigger_dropped_objects() d
                      WHERE d.object_type OPERATOR(pg_catalog.=) ANY (ARRAY['table', 'foreign table', 'extension'])
                        AND (d.address_names OPERATOR(pg_catalog.=) t.address_names[1:2]
                             OR d.object_identity OPERATOR(pg_catalog.=) 'pg_eventtime'))
    ORDER BY p.name
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot drop %: pipeline "%" uses it', hit.what, hit.name
            USING ERRCODE = 'dependent_objects_still_exist',
                  DETAIL = pg_catalog.format('CASCADE would drop the pipeline''s trigger on %I.%I, and the rows written into the table after it would not be counted. Nothing was changed.', hit.nsp, hit.rel),
                  HINT = pg_catalog.format('Drop the pipeline first with eventtime.drop_pipeline(%L), then the object.', hit.name);
    END IF;
END
$$;
CREATE EVENT TRIGGER eventtime_drop ON sql_drop EXECUTE FUNCTION _eventtime.on_drop();

COMMENT ON FUNCTION eventtime.restate(text, timestamptz, timestamptz, jsonb) IS
  'Folds the refused rows not yet folded of the windows starting at window_from (or in [window_from, window_to)), of every key or of the key given as a JSON object, into one new version per window, kind restatement: the latest version plus those rows. Returns one row per version written. For the pipeline''s owner.';
COMMENT ON FUNCTION eventtime.lateness(text, timestamptz, timestamptz, text) IS
  'The lateness account of the windows starting in [window_from, window_to): per key and window, rows on time, late and refused, the refused share (of the rows, and with value of that numeric column), and the arrival lateness of late and refused rows (watermark - window_end) as p50, p90, p99 and max.';
COMMENT ON FUNCTION eventtime.suggest_lateness(text, double precision, timestamptz) IS
  'The smallest allowed lateness that would have accepted the share coverage of the rows that arrived after their window closed (since the given time, or ever).';
COMMENT ON FUNCTION eventtime.changes(text, text) IS
  'The versions committed since the cursor (NULL: from the first), each with a cursor to resume after it: a consumer that loops on it sees every version once, in commit order.';

-- The scan of an ingest statement's offsets (SPEC §12, src/api/offsets.rs): per source, the least
-- and greatest offset and whether they rose in the statement's order, as JSON. Its state lives in
-- Rust, in the aggregate's memory: one entry per source, whatever the number of rows.
CREATE FUNCTION _eventtime.offset_scan_step(internal, integer, text, bigint) RETURNS internal
LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'eventtime_offset_scan_step';
CREATE FUNCTION _eventtime.offset_scan_final(internal) RETURNS text
LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'eventtime_offset_scan_final';
CREATE AGGREGATE _eventtime.offset_scan(integer, text, bigint) (
    SFUNC = _eventtime.offset_scan_step,
    STYPE = internal,
    FINALFUNC = _eventtime.offset_scan_final
);

-- Aggregates whose transition state is internal (src/pg/sealed.rs): a window keeps their
-- serialized states sealed with this database's secret, which only the catalog's owner reads.
-- The table is dumped with the database, so a restored database reads its states (the oldest
-- key is the one in use).
CREATE TABLE _eventtime.state_key (
    key bytea NOT NULL,
    made timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
REVOKE ALL ON _eventtime.state_key FROM PUBLIC;
INSERT INTO _eventtime.state_key (key)
SELECT pg_catalog.decode(pg_catalog.replace(pg_catalog.gen_random_uuid()::text OPERATOR(pg_catalog.||) pg_catalog.gen_random_uuid()::text, '-', ''), 'hex');
SELECT pg_catalog.pg_extension_config_dump('_eventtime.state_key', '');
CREATE FUNCTION _eventtime.sealed_out(internal) RETURNS bytea
LANGUAGE c AS 'MODULE_PATHNAME', 'eventtime_sealed_out';
CREATE FUNCTION _eventtime.sealed_in(internal, bytea) RETURNS internal
LANGUAGE c AS 'MODULE_PATHNAME', 'eventtime_sealed_in';

-- Run by the upgrade scripts only (it also checks that its caller is a superuser).
REVOKE ALL ON FUNCTION _eventtime.upgrade_pipeline(integer) FROM PUBLIC;
