-- tables
CREATE TABLE _eventtime."p7_state" ("store" text, window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, version integer NOT NULL DEFAULT 0, _et_n bigint NOT NULL, "_et_a0" bigint, "_et_a1" numeric, "_et_a1_n" bigint NOT NULL, _et_h integer GENERATED ALWAYS AS (pg_catalog.hash_record(ROW("store"))) STORED) WITH (fillfactor = 70);
CREATE UNIQUE INDEX ON _eventtime."p7_state" ("store", window_start) NULLS NOT DISTINCT WHERE version > 0;
CREATE INDEX ON _eventtime."p7_state" (window_end);
CREATE TABLE _eventtime."p7_history" ("store" text, window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, version integer NOT NULL, kind text NOT NULL, merged_into tstzrange, "orders" bigint, "mean" numeric, sealed boolean GENERATED ALWAYS AS (version = 1) STORED, watermark timestamptz NOT NULL, fired_at timestamptz NOT NULL DEFAULT now(), _et_n bigint NOT NULL, "_et_a0" bigint, "_et_a1" numeric, "_et_a1_n" bigint NOT NULL, _et_xid xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(), _et_seq bigint GENERATED ALWAYS AS IDENTITY);
CREATE UNIQUE INDEX ON _eventtime."p7_history" (window_start, "store", window_end, version DESC) NULLS NOT DISTINCT;
CREATE INDEX ON _eventtime."p7_history" (_et_xid);
CREATE TABLE _eventtime."p7_refused" ("store" text, event_id bigint, event_time timestamptz NOT NULL, "row" jsonb NOT NULL, window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, deadline timestamptz NOT NULL, watermark timestamptz NOT NULL, refused_at timestamptz NOT NULL DEFAULT now(), _et_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY);
CREATE INDEX ON _eventtime."p7_refused" (window_start);
CREATE TABLE _eventtime."p7_folds" (refused_id bigint PRIMARY KEY, version integer NOT NULL);
CREATE INDEX ON _eventtime."p7_state" (_et_h);
CREATE TABLE _eventtime."p7_locks" (bucket integer PRIMARY KEY);
INSERT INTO _eventtime."p7_locks" SELECT pg_catalog.generate_series(0, 1023);
CREATE TABLE _eventtime."p7_ids" ("store" text, event_id bigint NOT NULL);
CREATE UNIQUE INDEX ON _eventtime."p7_ids" ("store", event_id) NULLS NOT DISTINCT;
CREATE TRIGGER write_guard BEFORE INSERT ON _eventtime."p7_history" FOR EACH STATEMENT EXECUTE FUNCTION _eventtime.guard_insert('Orders "daily"', 'history');
CREATE TRIGGER write_guard BEFORE INSERT ON _eventtime."p7_refused" FOR EACH STATEMENT EXECUTE FUNCTION _eventtime.guard_insert('Orders "daily"', 'refused rows');
CREATE TRIGGER write_guard BEFORE INSERT ON _eventtime."p7_folds" FOR EACH STATEMENT EXECUTE FUNCTION _eventtime.guard_insert('Orders "daily"', 'folds');
CREATE TRIGGER write_guard BEFORE INSERT ON _eventtime."p7_ids" FOR EACH STATEMENT EXECUTE FUNCTION _eventtime.guard_insert('Orders "daily"', 'event-id ledger');
CREATE TRIGGER read_only BEFORE UPDATE OR DELETE ON _eventtime."p7_history" FOR EACH ROW EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'history');
CREATE TRIGGER read_only_truncate BEFORE TRUNCATE ON _eventtime."p7_history" FOR EACH STATEMENT EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'history');
CREATE TRIGGER read_only BEFORE UPDATE OR DELETE ON _eventtime."p7_refused" FOR EACH ROW EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'refused rows');
CREATE TRIGGER read_only_truncate BEFORE TRUNCATE ON _eventtime."p7_refused" FOR EACH STATEMENT EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'refused rows');
CREATE TRIGGER read_only BEFORE UPDATE OR DELETE ON _eventtime."p7_folds" FOR EACH ROW EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'folds');
CREATE TRIGGER read_only_truncate BEFORE TRUNCATE ON _eventtime."p7_folds" FOR EACH STATEMENT EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'folds');
CREATE TRIGGER read_only BEFORE UPDATE OR DELETE ON _eventtime."p7_ids" FOR EACH ROW EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'event-id ledger');
CREATE TRIGGER read_only_truncate BEFORE TRUNCATE ON _eventtime."p7_ids" FOR EACH STATEMENT EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'event-id ledger');

-- trigger function
CREATE FUNCTION _eventtime."p7_ingest"() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off AS $eventtime$
#variable_conflict use_column
<<pg_eventtime>>
DECLARE
  n_accepted bigint; n_late bigint; n_refused bigint; n_duplicates bigint; max_event_time timestamptz;
v_row record; v_ws timestamptz; v_we timestamptz; v_landing integer; v_w timestamptz; v_kept boolean; v_tid tid; v_done boolean := false;
v_restricted boolean; n_bad bigint := 0; v_bad timestamptz; n_versions bigint := 0; n_merged bigint := 0;
BEGIN
v_restricted := _eventtime.restrict();
IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
PERFORM _eventtime.refuse_lag_isolation(7);
END IF;
LOCK TABLE _eventtime."p7_state" IN ROW EXCLUSIVE MODE;
PERFORM FROM _eventtime."p7_locks" b WHERE b.bucket IN (SELECT pg_catalog.hash_record(ROW(r."store")) & 1023 FROM new_rows r) ORDER BY b.bucket FOR UPDATE OF b;
WITH /* pg_eventtime ingest */ wm AS MATERIALIZED (
SELECT p.watermark AS w,
coalesce(p.watermark, '-infinity') AS w_open,
coalesce(p.watermark - interval '24:00:00.000000', '-infinity') AS w_late
FROM _eventtime.pipeline p WHERE p.id = 7
),
cls AS MATERIALIZED (
SELECT r."store", r."_et_window_start", r."_et_window_end", r."order_id" AS _et_eid, r."ordered_at" AS _et_et, r."amount" AS "_et_v1", 
CASE WHEN r."_et_window_end" IS NULL THEN 4 WHEN r."_et_window_end" > wm.w_open THEN 1 WHEN r."_et_window_end" > wm.w_late THEN 2 ELSE 3 END AS _et_landing,
CASE WHEN r."_et_window_end" <= wm.w_late THEN to_jsonb(r.*) - '_et_window_start' - '_et_window_end' END AS _et_doc,
pg_catalog.row_number() OVER () AS _et_ord
FROM (SELECT n.*, w.window_start AS "_et_window_start", w.window_end AS "_et_window_end"
FROM new_rows n LEFT JOIN LATERAL (SELECT x.s AS window_start, x.s + interval '0:30:00.000000' AS window_end FROM (SELECT CASE WHEN n."ordered_at" > '-infinity'::timestamptz AND n."ordered_at" <= '294276-12-31T23:29:59.999999Z'::timestamptz THEN n."ordered_at" END AS s) x) w ON true OFFSET 0) r
CROSS JOIN wm
),
cls_n AS MATERIALIZED (
SELECT count(*) AS rows, count(_et_eid) AS ids, max(_et_et) AS max_et, max(_et_landing) AS max_landing,
count(*) FILTER (WHERE _et_landing = 4) AS bad,
(array_agg(_et_et) FILTER (WHERE _et_landing = 4))[1] AS bad_et
FROM cls
),
fresh AS (
INSERT INTO _eventtime."p7_ids" AS i ("store", event_id)
SELECT "store", _et_eid FROM cls WHERE _et_eid IS NOT NULL AND _et_landing < 4 ORDER BY "store", _et_eid
ON CONFLICT DO NOTHING
RETURNING i."store", i.event_id
),
all_fresh AS MATERIALIZED (
SELECT (SELECT count(*) FROM fresh) = (SELECT ids FROM cls_n) AS yes
),
kept AS MATERIALIZED (
SELECT c.* FROM cls c WHERE (SELECT yes FROM all_fresh)
UNION ALL
SELECT d.* FROM (
SELECT DISTINCT ON (c."store", c._et_eid) c.*
FROM cls c JOIN fresh f ON f.event_id = c._et_eid AND pg_catalog.record_eq(ROW(f."store"), ROW(c."store"))
WHERE NOT (SELECT yes FROM all_fresh)
ORDER BY c."store", c._et_eid, c._et_ord
) d
UNION ALL
SELECT c.* FROM cls c WHERE c._et_eid IS NULL AND NOT (SELECT yes FROM all_fresh)
),
batch AS MATERIALIZED (
SELECT "store", "_et_window_start" AS ws, "_et_window_end" AS we, max(_et_landing) AS _et_landing, count(*) AS _et_n, count(*) AS "_et_a0", sum("_et_v1")::numeric AS "_et_a1", count("_et_v1") AS "_et_a1_n", pg_catalog.hash_record(ROW("store")) AS _et_h
FROM kept WHERE _et_landing < 3 GROUP BY "store", "_et_window_start", "_et_window_end"
),
refused AS (
INSERT INTO _eventtime."p7_refused" ("store", event_id, event_time, "row", window_start, window_end, deadline, watermark)
SELECT c."store", c._et_eid, c._et_et, c._et_doc, c."_et_window_start", c."_et_window_end", c."_et_window_end" + interval '24:00:00.000000', wm.w
FROM kept c CROSS JOIN wm WHERE (SELECT max_landing FROM cls_n) = 3 AND c._et_landing = 3
RETURNING 1
),
live AS MATERIALIZED (
SELECT l.* FROM (SELECT b."store", b._et_h, min(b.ws) AS ws, max(b.we) AS we FROM batch b GROUP BY b."store", b._et_h) b
CROSS JOIN LATERAL (
SELECT s.ctid AS _et_tid, s."store", s._et_h, s.window_start AS ws, s.window_end AS we, s.version, s._et_n, s."_et_a0", s."_et_a1", s."_et_a1_n"
FROM _eventtime."p7_state" s WHERE s._et_h = b._et_h AND pg_catalog.record_eq(ROW(b."store"), ROW(s."store")) OFFSET 0
) l WHERE l.ws < b.we AND l.we > b.ws
),
members AS (
SELECT "store", _et_h, ws, we, NULL::tid AS _et_tid, NULL::integer AS version, _et_n, "_et_a0"::bigint AS "_et_a0", "_et_a1"::numeric AS "_et_a1", "_et_a1_n"::bigint AS "_et_a1_n", true AS _et_new FROM batch
UNION ALL
SELECT "store", _et_h, ws, we, _et_tid, version, _et_n, "_et_a0", "_et_a1", "_et_a1_n", false FROM live
),
grouped AS MATERIALIZED (
SELECT g.*, sum(g._et_brk) OVER (PARTITION BY "store" ORDER BY g.ws, g.we ROWS UNBOUNDED PRECEDING) AS _et_isl
FROM (SELECT m.*, CASE WHEN m.ws < max(m.we) OVER (PARTITION BY "store" ORDER BY m.ws, m.we ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) THEN 0 ELSE 1 END AS _et_brk
FROM members m) g
),
islands AS MATERIALIZED (
SELECT "store", _et_isl, min(_et_h) AS _et_h, min(ws) AS ws, max(we) AS we, count(_et_tid) AS _et_live,
min(ws) FILTER (WHERE NOT _et_new) AS _et_live_ws, max(we) FILTER (WHERE NOT _et_new) AS _et_live_we,
max(version) AS _et_live_version,
(array_agg(_et_tid ORDER BY ws) FILTER (WHERE NOT _et_new))[1] AS _et_survivor,
sum(_et_n)::bigint AS _et_n, sum("_et_a0")::bigint AS "_et_a0", sum("_et_a1")::numeric AS "_et_a1", sum("_et_a1_n")::bigint AS "_et_a1_n"
FROM grouped GROUP BY "store", _et_isl HAVING bool_or(_et_new)
),
res AS MATERIALIZED (
SELECT i.*, j.joined,
CASE WHEN j.joined THEN CASE WHEN i._et_live_version > 0 THEN i._et_live_version + 1 ELSE 0 END
WHEN i.we <= wm.w THEN 1 ELSE 0 END AS version,
CASE WHEN j.joined THEN i._et_live_version > 0 ELSE coalesce(i.we <= wm.w, false) END AS _et_write
FROM islands i CROSS JOIN wm
CROSS JOIN LATERAL (SELECT i._et_live = 1 AND i.ws = i._et_live_ws AND i.we = i._et_live_we AS joined) j
),
survived AS (
UPDATE _eventtime."p7_state" s SET window_start = r.ws, window_end = r.we, version = r.version, _et_n = r._et_n, "_et_a0" = r."_et_a0", "_et_a1" = r."_et_a1", "_et_a1_n" = r."_et_a1_n"
FROM res r WHERE s.ctid = ANY (ARRAY(SELECT _et_survivor FROM res)) AND s.ctid = r._et_survivor
),
absorbed AS (
DELETE FROM _eventtime."p7_state" s WHERE s.ctid = ANY (ARRAY(
SELECT g._et_tid FROM grouped g JOIN res r ON g._et_h = r._et_h AND g._et_isl = r._et_isl AND pg_catalog.record_eq(ROW(g."store"), ROW(r."store"))
WHERE g._et_tid IS NOT NULL AND g._et_tid <> r._et_survivor))
),
formed AS (
INSERT INTO _eventtime."p7_state" ("store", window_start, window_end, version, _et_n, "_et_a0", "_et_a1", "_et_a1_n")
SELECT r."store", r.ws, r.we, r.version, r._et_n, r."_et_a0", r."_et_a1", r."_et_a1_n" FROM res r WHERE r._et_survivor IS NULL
),
versions AS (
INSERT INTO _eventtime."p7_history" ("store", window_start, window_end, version, kind, merged_into, "orders", "mean", watermark, _et_n, "_et_a0", "_et_a1", "_et_a1_n")
SELECT r."store", r.ws, r.we, r.version, 'late', NULL::tstzrange, (r."_et_a0")::bigint, (r."_et_a1" / NULLIF(r."_et_a1_n", 0))::numeric, wm.w, r._et_n, r."_et_a0", r."_et_a1", r."_et_a1_n"
FROM res r CROSS JOIN wm WHERE r._et_write
UNION ALL
SELECT g."store", g.ws, g.we, g.version + 1, 'merged', pg_catalog.tstzrange(r.ws, r.we), (g."_et_a0")::bigint, (g."_et_a1" / NULLIF(g."_et_a1_n", 0))::numeric, wm.w, g._et_n, g."_et_a0", g."_et_a1", g."_et_a1_n"
FROM grouped g JOIN res r ON g._et_h = r._et_h AND g._et_isl = r._et_isl AND pg_catalog.record_eq(ROW(g."store"), ROW(r."store")) CROSS JOIN wm
WHERE NOT r.joined AND g.version > 0
RETURNING kind
),
counts AS MATERIALIZED (
SELECT coalesce(sum(_et_n) FILTER (WHERE _et_landing = 1), 0)::bigint AS accepted,
coalesce(sum(_et_n) FILTER (WHERE _et_landing = 2), 0)::bigint AS late,
(SELECT count(*) FROM refused) AS refused
FROM batch
)
SELECT accepted, late, refused, (SELECT rows FROM cls_n) - accepted - late - refused, (SELECT max_et FROM cls_n),
(SELECT bad FROM cls_n), (SELECT bad_et FROM cls_n), (SELECT count(*) FILTER (WHERE kind = 'late') FROM versions), (SELECT w FROM wm),
(SELECT count(*) FILTER (WHERE kind = 'merged') FROM versions) FROM counts
INTO n_accepted, n_late, n_refused, n_duplicates, max_event_time, n_bad, v_bad, n_versions, v_w, n_merged;
IF n_bad > 0 THEN
PERFORM _eventtime.raise_event_time_error(7, pg_eventtime.v_bad);
END IF;
IF n_duplicates > 0 THEN
INSERT INTO _eventtime.duplicate_counts (pipeline_id, duplicates) VALUES (7, n_duplicates);
END IF;
IF current_setting('pg_eventtime.collect_counts', true) = 'on' THEN
PERFORM _eventtime.note_counts(7, n_accepted, n_late, n_refused, n_duplicates);
END IF;
IF n_versions + n_merged > 0 THEN
PERFORM _eventtime.announce('Orders "daily"', 0, n_versions, 0, pg_eventtime.v_w, n_merged);
END IF;
RETURN NULL;
END pg_eventtime
$eventtime$;

-- trigger
CREATE TRIGGER "eventtime_ingest_p7" AFTER INSERT ON "public"."orders" REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION _eventtime."p7_ingest"();

-- views
CREATE VIEW "public"."Orders ""daily""_history" AS SELECT "store", window_start, window_end, version, kind, merged_into, "orders", "mean", sealed, watermark, fired_at FROM _eventtime."p7_history";
CREATE VIEW "public"."Orders ""daily""_latest" AS SELECT "store", window_start, window_end, version, kind, merged_into, "orders", "mean", sealed, watermark, fired_at FROM (SELECT DISTINCT ON (window_start, "store", window_end) "store", window_start, window_end, version, kind, merged_into, "orders", "mean", sealed, watermark, fired_at FROM _eventtime."p7_history" ORDER BY window_start, "store", window_end, version DESC) l WHERE kind <> 'merged';
CREATE VIEW "public"."Orders ""daily""_sealed" AS SELECT "store", window_start, window_end, version, kind, merged_into, "orders", "mean", sealed, watermark, fired_at FROM _eventtime."p7_history" WHERE version = 1;
CREATE VIEW "public"."Orders ""daily""_refused" AS SELECT r."store", r.event_id, r.event_time, r."row", r.window_start, r.window_end, r.deadline, r.watermark, r.refused_at, f.version AS restated_in FROM _eventtime."p7_refused" r LEFT JOIN _eventtime."p7_folds" f ON f.refused_id = r._et_id;
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON "public"."Orders ""daily""_history" FOR EACH ROW EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'history');
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON "public"."Orders ""daily""_latest" FOR EACH ROW EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'history');
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON "public"."Orders ""daily""_sealed" FOR EACH ROW EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'history');
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON "public"."Orders ""daily""_refused" FOR EACH ROW EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'refused rows');
CREATE VIEW "public"."Orders ""daily""_provisional" AS SELECT f."store", f.window_start, f.window_end, (f."_et_a0")::bigint AS "orders", (f."_et_a1" / NULLIF(f."_et_a1_n", 0))::numeric AS "mean", wm.w AS watermark
FROM (SELECT _eventtime.provisional_watermark(7) AS w OFFSET 0) wm CROSS JOIN LATERAL (SELECT "store", window_start, window_end, sum(_et_n)::bigint AS _et_n, sum("_et_a0")::bigint AS "_et_a0", sum("_et_a1")::numeric AS "_et_a1", sum("_et_a1_n")::bigint AS "_et_a1_n" FROM _eventtime."p7_state" s
WHERE s.window_end > coalesce(wm.w, '-infinity') GROUP BY "store", window_start, window_end) f;
CREATE VIEW "public"."Orders ""daily""_current" AS
SELECT "store", window_start, window_end, version, kind, merged_into, "orders", "mean", sealed, watermark, fired_at, false AS provisional FROM "public"."Orders ""daily""_latest"
UNION ALL
SELECT "store", window_start, window_end, NULL::integer, 'provisional', NULL::tstzrange, "orders", "mean", false, watermark, NULL::timestamptz, true FROM "public"."Orders ""daily""_provisional";
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON "public"."Orders ""daily""_provisional" FOR EACH ROW EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'results');
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON "public"."Orders ""daily""_current" FOR EACH ROW EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'results');

-- typed feed
CREATE FUNCTION "public"."Orders ""daily""_changes"(after text DEFAULT NULL) RETURNS TABLE ("store" text, window_start timestamptz, window_end timestamptz, version integer, kind text, merged_into tstzrange, "orders" bigint, "mean" numeric, sealed boolean, watermark timestamptz, fired_at timestamptz, "cursor" text) LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS 'SELECT r."store", c.window_start, c.window_end, c.version, c.kind, c.merged_into, r."orders", r."mean", c.sealed, c.watermark, c.fired_at, c."cursor" FROM eventtime.changes(''Orders "daily"'', $1) c CROSS JOIN LATERAL pg_catalog.jsonb_populate_record(NULL::"public"."Orders ""daily""_history", c.key OPERATOR(pg_catalog.||) c.aggregates) r';
COMMENT ON FUNCTION "public"."Orders ""daily""_changes"(text) IS 'pg_eventtime pipeline Orders "daily": the versions committed since a cursor (eventtime.changes), keys and aggregates in their own types';

-- hand over
ALTER TABLE IF EXISTS _eventtime."p7_state" OWNER TO "app owner";
ALTER TABLE IF EXISTS _eventtime."p7_ids" OWNER TO "app owner";
ALTER TABLE IF EXISTS _eventtime."p7_history" OWNER TO "app owner";
ALTER TABLE IF EXISTS _eventtime."p7_refused" OWNER TO "app owner";
ALTER TABLE IF EXISTS _eventtime."p7_folds" OWNER TO "app owner";
ALTER TABLE IF EXISTS _eventtime."p7_locks" OWNER TO "app owner";
REVOKE ALL ON FUNCTION _eventtime."p7_ingest"() FROM PUBLIC;
ALTER FUNCTION _eventtime."p7_ingest"() OWNER TO "app owner";

-- fire
WITH f AS MATERIALIZED (
SELECT "store", window_start, window_end, sum(_et_n)::bigint AS _et_n, sum("_et_a0")::bigint AS "_et_a0", sum("_et_a1")::numeric AS "_et_a1", sum("_et_a1_n")::bigint AS "_et_a1_n"
FROM _eventtime."p7_state" s WHERE s.window_end <= $1 AND ($2::timestamptz IS NULL OR s.window_end > $2)
GROUP BY "store", window_start, window_end
),
compacted AS (
DELETE FROM _eventtime."p7_state" s WHERE s.window_end <= $1 AND ($2::timestamptz IS NULL OR s.window_end > $2) AND s.window_end > $1 - interval '24:00:00.000000'
),
kept AS (
INSERT INTO _eventtime."p7_state" ("store", window_start, window_end, version, _et_n, "_et_a0", "_et_a1", "_et_a1_n")
SELECT f."store", f.window_start, f.window_end, 1, f._et_n, f."_et_a0", f."_et_a1", f."_et_a1_n" FROM f WHERE f.window_end > $1 - interval '24:00:00.000000'
),
fired AS (
INSERT INTO _eventtime."p7_history" ("store", window_start, window_end, version, kind, "orders", "mean", watermark, _et_n, "_et_a0", "_et_a1", "_et_a1_n")
SELECT f."store", f.window_start, f.window_end, 1, 'main', (f."_et_a0")::bigint, (f."_et_a1" / NULLIF(f."_et_a1_n", 0))::numeric, $1, f._et_n, f."_et_a0", f."_et_a1", f."_et_a1_n" FROM f
RETURNING 1
)
SELECT (SELECT count(*) FROM fired), (SELECT count(*) FROM f WHERE f.window_end <= $1 - interval '24:00:00.000000');

-- purge
WITH gone AS (DELETE FROM _eventtime."p7_state" s WHERE s.window_end <= $1 - interval '24:00:00.000000' RETURNING s.version)
SELECT count(*) FILTER (WHERE version > 0) FROM gone;

-- drop
DROP FUNCTION IF EXISTS "public"."Orders ""daily""_changes"(text);
DROP VIEW IF EXISTS "public"."Orders ""daily""_current";
DROP VIEW IF EXISTS "public"."Orders ""daily""_history";
DROP VIEW IF EXISTS "public"."Orders ""daily""_latest";
DROP VIEW IF EXISTS "public"."Orders ""daily""_sealed";
DROP VIEW IF EXISTS "public"."Orders ""daily""_refused";
DROP VIEW IF EXISTS "public"."Orders ""daily""_provisional";
DROP TRIGGER IF EXISTS "eventtime_ingest_p7" ON "public"."orders";
DROP FUNCTION IF EXISTS _eventtime."p7_ingest"();
DROP TABLE IF EXISTS _eventtime."p7_state";
DROP TABLE IF EXISTS _eventtime."p7_ids";
DROP TABLE IF EXISTS _eventtime."p7_history";
DROP TABLE IF EXISTS _eventtime."p7_refused";
DROP TABLE IF EXISTS _eventtime."p7_folds";
DROP TABLE IF EXISTS _eventtime."p7_locks";

