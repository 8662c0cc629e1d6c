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
    window_kind      text NOT NULL DEFAULT 'tumbling' CHECK (window_kind IN ('tumbling')),
    window_size      interval NOT NULL,
    window_origin    timestamptz NOT NULL,
    allowed_lateness interval NOT NULL,
    aggregates       text NOT NULL,
    definition       jsonb NOT NULL,
    watermark        timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE _eventtime.pipeline IS
  'One row per pipeline: the arguments of create_pipeline, the definition resolved from them, and the watermark in force.';

-- Duplicates leave no row anywhere else, so their counts are kept here, one row per ingest
-- statement that saw any (an insert, not an update: concurrent ingest never contends here).
CREATE TABLE _eventtime.duplicate_counts (
    pipeline_id integer NOT NULL,
    duplicates  bigint NOT NULL
);
CREATE INDEX ON _eventtime.duplicate_counts (pipeline_id);

SELECT pg_catalog.pg_extension_config_dump('_eventtime.pipeline', '');
SELECT pg_catalog.pg_extension_config_dump('_eventtime.pipeline_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('_eventtime.duplicate_counts', '');
