-- pg_eventtime 0.1.0 to 0.2.0. Run by ALTER EXTENSION pg_eventtime UPDATE, as the extension's
-- owner; the upgrade tier (tests/upgrade) checks that it leaves the objects a fresh install of
-- 0.2.0 makes.
\echo Use "ALTER EXTENSION pg_eventtime UPDATE" to load this file. \quit

-- Provisional reads: the views <name>_provisional and <name>_current read the pipeline watermark
-- through this function, which checks that their caller may read the pipeline.
CREATE FUNCTION _eventtime."provisional_watermark"(
	"pipeline_id" INT
) RETURNS timestamp with time zone
STRICT STABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'provisional_watermark_wrapper';

-- What a pipeline of an earlier version lacks, made by this and later upgrade scripts.
CREATE FUNCTION _eventtime."upgrade_pipeline"(
	"pipeline_id" INT
) RETURNS bool
STRICT VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'upgrade_pipeline_wrapper';
REVOKE ALL ON FUNCTION _eventtime.upgrade_pipeline(integer) FROM PUBLIC;

-- A reader of the new views may read the pipeline, as a reader of the others may.
CREATE OR REPLACE FUNCTION _eventtime.may_read(role oid, owner oid, view_schema name, name text) RETURNS boolean
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


-- explain shows an open window's aggregates so far, in a column of its own at the end.
DROP FUNCTION eventtime.explain(text, timestamptz, text[]);
DROP FUNCTION _eventtime.explain(text, timestamptz, text[]);
CREATE FUNCTION _eventtime."explain"(
	"pipeline" TEXT,
	"event_time" timestamp with time zone,
	"key" TEXT[]
) RETURNS TABLE (
	"window_start" timestamp with time zone,
	"window_end" timestamp with time zone,
	"deadline" timestamp with time zone,
	"state" TEXT,
	"rows_in_state" bigint,
	"latest_version" INT,
	"watermark" timestamp with time zone,
	"landing" TEXT,
	"held_back_by" TEXT[],
	"explanation" TEXT,
	"provisional" jsonb
)
STABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'explain_wrapper';
CREATE FUNCTION eventtime.explain(pipeline text, event_time timestamptz, VARIADIC key text[] DEFAULT '{}')
RETURNS TABLE (window_start timestamptz, window_end timestamptz, deadline timestamptz, state text,
               rows_in_state bigint, latest_version integer, watermark timestamptz, landing text,
               held_back_by text[], explanation text, provisional jsonb)
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM _eventtime.explain($1, $2, $3) $$;
COMMENT ON FUNCTION eventtime.explain(text, timestamptz, text[]) IS
  'Why a window has or has not closed: for an event time and key values, each window the row belongs to, its bounds and deadline, its state (open, fired, purged), rows in state, latest version, the pipeline watermark, the landing such a row would get now, the sources the watermark waits for, and for an open window of a key with rows its aggregates so far (provisional, as <name>_provisional shows them).';

-- Cumulate windows (SPEC §7): a window kind, its assignment function, create_pipeline's
-- cumulate_step (appended last, so calls by name and by position of earlier releases still
-- work), and eventtime.pipelines' cumulate_step (the internal window_slide holds it).
-- Batched late firings (SPEC §3): create_pipeline's late_firing, after cumulate_step, and
-- eventtime.pipelines' late_firing (the definition holds it).
ALTER TABLE _eventtime.pipeline DROP CONSTRAINT pipeline_window_kind_check;
ALTER TABLE _eventtime.pipeline ADD CONSTRAINT pipeline_window_kind_check
  CHECK (window_kind IN ('tumbling', 'hopping', 'cumulate', 'session'));
CREATE FUNCTION _eventtime."cumulate"(
	"event_time" timestamp with time zone, /* Option < TimestampWithTimeZone > */
	"size" TEXT, /* & str */
	"step" TEXT, /* & str */
	"origin_us" bigint, /* i64 */
	"time_zone" TEXT /* Option < & str > */
) RETURNS TABLE (
	"window_start" timestamp with time zone,  /* TimestampWithTimeZone */
	"window_end" timestamp with time zone  /* TimestampWithTimeZone */
)
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'cumulate_wrapper';
DROP FUNCTION eventtime.create_pipeline(text, regclass, text, interval, text[], text, interval, text, timestamptz, interval, interval, interval, interval, interval, text, interval, text, text);
CREATE FUNCTION eventtime."create_pipeline"(
	"name" TEXT, /* Option < & str > */
	"source" regclass, /* Option < PgRelation > */
	"event_time" TEXT, /* Option < & str > */
	"window_size" interval DEFAULT NULL, /* Option < Interval > */
	"key" TEXT[] DEFAULT '{}', /* :: std :: option :: Option < Vec < Option < String > > > */
	"event_id" TEXT DEFAULT NULL, /* Option < & str > */
	"allowed_lateness" interval DEFAULT '0', /* Option < Interval > */
	"aggregates" TEXT DEFAULT 'count(*) AS events', /* Option < & str > */
	"window_origin" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"watermark_lag" interval DEFAULT NULL, /* Option < Interval > */
	"idle_timeout" interval DEFAULT NULL, /* Option < Interval > */
	"clock_lag" interval DEFAULT NULL, /* Option < Interval > */
	"max_ahead" interval DEFAULT '1 day', /* Option < Interval > */
	"window_slide" interval DEFAULT NULL, /* Option < Interval > */
	"time_zone" TEXT DEFAULT NULL, /* Option < & str > */
	"session_gap" interval DEFAULT NULL, /* Option < Interval > */
	"offset_column" TEXT DEFAULT NULL, /* Option < & str > */
	"source_column" TEXT DEFAULT NULL, /* Option < & str > */
	"cumulate_step" interval DEFAULT NULL, /* Option < Interval > */
	"late_firing" interval DEFAULT NULL /* Option < Interval > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'create_pipeline_wrapper';
COMMENT ON FUNCTION eventtime.create_pipeline(text, regclass, text, interval, text[], text, interval, text, timestamptz, interval, interval, interval, interval, interval, text, interval, text, text, interval, interval) IS
  'Creates an event-time pipeline on a source table, with tumbling, hopping (window_slide) or cumulate (cumulate_step) windows of a fixed duration or of calendar periods in a time zone, or sessions (session_gap), with late versions per statement or in batches (late_firing): triggers that route inserted rows, window state, and the views <name>_history, _latest, _sealed, _refused, _provisional and _current beside the source table.';
CREATE OR REPLACE VIEW eventtime.pipelines AS
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

-- Aggregates over expressions: a rename or a move of what an expression names is refused.
CREATE FUNCTION _eventtime."check_names"(
	"classids" oid[],
	"objids" oid[]
) RETURNS void
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'check_names_wrapper';
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

-- Every pipeline gets its views _provisional and _current, as its owner's.
SELECT _eventtime.upgrade_pipeline(id) FROM _eventtime.pipeline ORDER BY id;

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
