-- pg_eventtime bootstrap: the internal schema and the catalog. Runs before any function is
-- created. Catalog tables are registered with pg_extension_config_dump so that pipelines survive
-- pg_dump; the per-pipeline tables are created by create_pipeline, belong to no extension, and
-- are dumped like any table.

CREATE SCHEMA IF NOT EXISTS _eventtime;
COMMENT ON SCHEMA _eventtime IS
  'pg_eventtime internals: catalog, window state, event-id ledgers, history and refused rows. Read the views; do not write here.';

CREATE TABLE _eventtime.pipeline (
    id               serial PRIMARY KEY,
    name             text NOT NULL UNIQUE,
    source           regclass NOT NULL,
    view_schema      name NOT NULL,
    event_time       name NOT NULL,
    key_columns      name[] NOT NULL,
    event_id         name,
    window_kind      text NOT NULL DEFAULT 'tumbling' CHECK (window_kind IN ('tumbling', 'hopping', 'cumulate', 'session')),
    -- NULL for sessions, which have a session_gap instead.
    window_size      interval CHECK ((window_size IS NULL) = (window_kind = 'session')),
    session_gap      interval CHECK ((session_gap IS NULL) = (window_kind <> 'session')),
    -- The slide of hopping windows, the step of cumulate windows; NULL for tumbling windows.
    window_slide     interval,
    -- The zone of calendar periods (a size with a day, week, month or year field); NULL for
    -- fixed durations.
    time_zone        text,
    -- The alignment in force (the default of the window's kind when create_pipeline had none);
    -- NULL for sessions.
    window_origin    timestamptz,
    allowed_lateness interval NOT NULL,
    watermark_lag    interval,
    idle_timeout     interval,
    -- tick() moves the source 'clock' to now() - clock_lag (NULL: no clock).
    clock_lag        interval,
    -- A watermark later than now() + max_ahead is refused (NULL: no bound).
    max_ahead        interval,
    aggregates       text NOT NULL,
    definition       jsonb NOT NULL,
    -- The owner of the source table when the pipeline was created, or when ALTER TABLE ... OWNER TO
    -- last moved it: every object of the pipeline belongs to the table's current owner
    -- (_eventtime.owner_of), its statements run as it, and it (or a role with its privileges)
    -- manages it.
    owner            regrole NOT NULL,
    watermark        timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE _eventtime.pipeline IS
  'One row per pipeline: the arguments of create_pipeline, the definition resolved from them, and the watermark in force.';

-- The watermark of each source of a pipeline. The pipeline watermark (in _eventtime.pipeline) is
-- the minimum over the sources that are not idle, and never goes back. A source is registered by
-- its first advance; 'default' is the source of the two-argument advance_watermark, and
-- 'watermark_lag' the one ingest statements advance when the pipeline has a watermark_lag, and
-- 'clock' the one eventtime.tick() advances when it has a clock_lag.
-- Rows go with their pipeline (drop_pipeline deletes them); there is no foreign key, so that
-- pg_dump may restore the catalog tables in any order.
CREATE TABLE _eventtime.source (
    pipeline_id integer NOT NULL,
    name        text NOT NULL,
    watermark   timestamptz NOT NULL,
    advanced_at timestamptz NOT NULL,
    marked_idle boolean NOT NULL DEFAULT false,
    PRIMARY KEY (pipeline_id, name)
);
COMMENT ON TABLE _eventtime.source IS
  'One row per source of a pipeline: its own forward-only watermark, when it last advanced, and whether mark_idle took it out of the minimum.';

-- Duplicates leave no row anywhere else, so their counts are kept here, one row per ingest
-- statement that saw any (an insert, not an update: concurrent ingest never contends here).
CREATE TABLE _eventtime.duplicate_counts (
    pipeline_id integer NOT NULL,
    duplicates  bigint NOT NULL
);
CREATE INDEX ON _eventtime.duplicate_counts (pipeline_id);

-- Who may touch the catalog. The extension's functions read and write it as its owner, after
-- checking the caller's rights (src/pg/security.rs). The one access from elsewhere is a
-- pipeline's trigger function, which runs as the pipeline's owner: it reads its watermark
-- FOR SHARE (which needs UPDATE on a column) and records duplicates. Row-level security limits that
-- to the pipelines of roles whose privileges the current role has; the UPDATE policy lets the
-- row lock through and refuses every actual update.
-- The role a pipeline belongs to: its source table's current owner (SPEC §9), or, once the
-- table is gone, the owner recorded at creation. REASSIGN OWNED moves the table and every object
-- of its pipelines together and fires no event trigger; ALTER TABLE ... OWNER TO moves the table
-- alone, and the event trigger eventtime_table_change moves the pipeline's objects after it and
-- records the new owner. No SET clause, so that it is inlined; every name is qualified.
CREATE FUNCTION _eventtime.owner_of(source regclass, recorded regrole) RETURNS oid
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
SELECT coalesce((SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) source::pg_catalog.oid),
                recorded::pg_catalog.oid)
$$;

GRANT USAGE ON SCHEMA _eventtime TO PUBLIC;
GRANT USAGE ON SCHEMA eventtime TO PUBLIC;
ALTER TABLE _eventtime.pipeline ENABLE ROW LEVEL SECURITY;
GRANT SELECT, UPDATE (watermark) ON _eventtime.pipeline TO PUBLIC;
-- The recorded owner first (no subquery on the common path), then the table's current owner.
CREATE POLICY own_pipelines ON _eventtime.pipeline FOR SELECT
    USING (pg_catalog.pg_has_role(owner, 'USAGE') OR pg_catalog.pg_has_role(_eventtime.owner_of(source, owner), 'USAGE'));
CREATE POLICY lock_only ON _eventtime.pipeline FOR UPDATE
    USING (pg_catalog.pg_has_role(owner, 'USAGE') OR pg_catalog.pg_has_role(_eventtime.owner_of(source, owner), 'USAGE'))
    WITH CHECK (false);
ALTER TABLE _eventtime.duplicate_counts ENABLE ROW LEVEL SECURITY;
GRANT INSERT ON _eventtime.duplicate_counts TO PUBLIC;
CREATE POLICY own_pipelines ON _eventtime.duplicate_counts FOR INSERT
    WITH CHECK (EXISTS (SELECT FROM _eventtime.pipeline p WHERE p.id OPERATOR(pg_catalog.=) pipeline_id));
ALTER TABLE _eventtime.source ENABLE ROW LEVEL SECURITY;

SELECT pg_catalog.pg_extension_config_dump('_eventtime.pipeline', '');
SELECT pg_catalog.pg_extension_config_dump('_eventtime.pipeline_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('_eventtime.duplicate_counts', '');
SELECT pg_catalog.pg_extension_config_dump('_eventtime.source', '');
