-- pg_eventtime: objects that need the Rust functions to exist.

CREATE VIEW eventtime.pipelines AS
SELECT p.name,
       p.source,
       p.event_time,
       p.key_columns,
       p.event_id,
       p.window_kind,
       p.window_size,
       p.window_origin,
       p.allowed_lateness,
       p.aggregates,
       p.watermark,
       c.open_windows,
       c.state_rows,
       c.firings,
       c.refused,
       coalesce((SELECT sum(d.duplicates) FROM _eventtime.duplicate_counts d WHERE d.pipeline_id = p.id), 0)::bigint
         AS duplicates,
       p.created_at
FROM _eventtime.pipeline p
CROSS JOIN LATERAL _eventtime.pipeline_counts(p.id) c;

COMMENT ON VIEW eventtime.pipelines IS
  'One row per pipeline: its definition, the watermark in force (NULL before the first advance), open windows, state rows, firings, refused rows and duplicates.';

COMMENT ON FUNCTION eventtime.create_pipeline(text, regclass, text, interval, text[], text, interval, text, timestamptz) IS
  'Creates a tumbling event-time pipeline on a source table: triggers that route inserted rows, window state, and the views <name>_history, _latest, _sealed and _refused beside the source table.';
COMMENT ON FUNCTION eventtime.drop_pipeline(text) IS
  'Drops a pipeline: its trigger, state, history, refused rows and views. The source table and its rows stay.';
COMMENT ON FUNCTION eventtime.ingest(text, jsonb) IS
  'Inserts a JSON object or array of objects into the pipeline''s source table and returns how many (row, window) pairs were accepted, late, refused and duplicates.';
COMMENT ON FUNCTION eventtime.advance_watermark(text, timestamptz) IS
  'Moves the pipeline watermark forward: fires every window ending at or before it (version 1, sealed) and purges every window whose deadline it has reached.';
COMMENT ON FUNCTION eventtime.landing(timestamptz, timestamptz, timestamptz, interval) IS
  'The landing rule: other-window, open, late-firing or side-output for a row''s event time, a window end, a watermark and an allowed lateness.';
