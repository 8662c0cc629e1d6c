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

COMMENT ON FUNCTION eventtime.create_pipeline(text, regclass, text, interval, text[], text, interval, text, timestamptz, interval, interval, interval, interval, interval, text, interval, text, text) IS
  'Creates an event-time pipeline on a source table, with tumbling or hopping (window_slide) windows of a fixed duration or of calendar periods in a time zone, or sessions (session_gap): triggers that route inserted rows, window state, and the views <name>_history, _latest, _sealed, _refused, _provisional and _current beside the source table.';

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

-- Every pipeline gets its views _provisional and _current, as its owner's.
SELECT _eventtime.upgrade_pipeline(id) FROM _eventtime.pipeline ORDER BY id;
