-- tables
CREATE TABLE _eventtime."p7_state" ("store" text, window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, version integer NOT NULL DEFAULT 0, _et_n bigint NOT NULL, "_et_a0" bigint, "_et_a1" numeric, "_et_a1_n" bigint NOT NULL, _et_late boolean NOT NULL DEFAULT false, _et_slot integer) WITH (fillfactor = 70);
CREATE UNIQUE INDEX ON _eventtime."p7_state" ("store", window_start) NULLS NOT DISTINCT WHERE _et_late;
CREATE INDEX ON _eventtime."p7_state" (window_end);
CREATE UNIQUE INDEX ON _eventtime."p7_state" ("store", window_start, _et_slot) NULLS NOT DISTINCT WHERE _et_slot IS NOT NULL;
CREATE TABLE _eventtime."p7_history" ("store" text, window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, version integer NOT NULL, kind text NOT NULL, "orders" bigint, "mean" numeric, sealed boolean GENERATED ALWAYS AS (version = 1) STORED, watermark timestamptz NOT NULL, fired_at timestamptz NOT NULL DEFAULT now(), _et_n bigint NOT NULL, "_et_a0" bigint, "_et_a1" numeric, "_et_a1_n" bigint NOT NULL, _et_xid xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(), _et_seq bigint GENERATED ALWAYS AS IDENTITY);
CREATE UNIQUE INDEX ON _eventtime."p7_history" (window_start, "store", version DESC) NULLS NOT DISTINCT;
CREATE INDEX ON _eventtime."p7_history" (_et_xid);
CREATE TABLE _eventtime."p7_refused" ("store" text, event_id bigint, event_time timestamptz NOT NULL, "row" jsonb NOT NULL, window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, deadline timestamptz NOT NULL, watermark timestamptz NOT NULL, refused_at timestamptz NOT NULL DEFAULT now(), _et_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY);
CREATE INDEX ON _eventtime."p7_refused" (window_start);
CREATE TABLE _eventtime."p7_folds" (refused_id bigint PRIMARY KEY, version integer NOT NULL);
CREATE TABLE _eventtime."p7_ids" (window_start timestamptz NOT NULL, "store" text, event_id bigint NOT NULL);
CREATE UNIQUE INDEX ON _eventtime."p7_ids" (window_start, "store", event_id) NULLS NOT DISTINCT;
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
CREATE FUNCTION _eventtime."p7_ingest_sql"() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off AS $eventtime$
#variable_conflict use_column
<<pg_eventtime>>
DECLARE
  n_accepted bigint; n_late bigint; n_refused bigint; n_duplicates bigint; max_event_time timestamptz;
v_row record; v_ws timestamptz; v_we timestamptz; v_landing integer; v_w timestamptz; v_kept boolean; v_tid tid; v_done boolean := false;
v_restricted boolean; n_bad bigint := 0; v_bad timestamptz; n_versions bigint := 0;
BEGIN
v_restricted := _eventtime.restrict();
IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
LOCK TABLE _eventtime."p7_state" IN ROW EXCLUSIVE MODE;
PERFORM FROM _eventtime.pipeline p WHERE p.id = 7 FOR SHARE;
END IF;
SELECT (SELECT count(*) FROM (SELECT FROM new_rows LIMIT 1000) n) AS n, r."store" AS c0, r."order_id" AS c1, r."ordered_at" AS c2, r."amount" AS c3
INTO v_row FROM new_rows r LIMIT 1;
IF v_row.n = 1 THEN
WITH /* pg_eventtime ingest */ wm AS MATERIALIZED (
SELECT p.watermark AS w,
coalesce(p.watermark, '-infinity') AS w_open,
coalesce(p.watermark - interval '24:00:00.000000', '-infinity') AS w_late
FROM _eventtime.pipeline p WHERE p.id = 7
),
c AS MATERIALIZED (
SELECT x.window_start AS "_et_window_start", x.window_end AS "_et_window_end", CASE WHEN x.window_end IS NULL THEN 4 WHEN x.window_end > wm.w_open THEN 1 WHEN x.window_end > wm.w_late THEN 2 ELSE 3 END AS _et_landing, wm.w
FROM wm LEFT JOIN LATERAL _eventtime.calendar(pg_eventtime.v_row.c2, 1, 1, true, 0, 'Europe/Berlin') x ON true
),
fresh AS (
INSERT INTO _eventtime."p7_ids" (window_start, "store", event_id)
SELECT c."_et_window_start", pg_eventtime.v_row.c0, pg_eventtime.v_row.c1 FROM c WHERE pg_eventtime.v_row.c1 IS NOT NULL AND c._et_landing < 4
ON CONFLICT DO NOTHING
RETURNING 1
),
appended AS (
INSERT INTO _eventtime."p7_state" AS s ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n", _et_slot)
SELECT *, _eventtime.backend_slot() FROM (SELECT r."store", r.window_start, r.window_end, r._et_n, r."_et_a0", _eventtime.acc_check(r."_et_a1", 7, 'mean', r.window_start), r."_et_a1_n" FROM (SELECT pg_eventtime.v_row.c0, c."_et_window_start", c."_et_window_end", 1, 1::bigint, (pg_eventtime.v_row.c3)::numeric, CASE WHEN pg_eventtime.v_row.c3 IS NULL THEN 0::bigint ELSE 1::bigint END
FROM c WHERE c._et_landing = 1 AND (pg_eventtime.v_row.c1 IS NULL OR EXISTS (SELECT FROM fresh))) r ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n")) c
ON CONFLICT ("store", window_start, _et_slot) WHERE _et_slot IS NOT NULL DO UPDATE SET
_et_n = s._et_n + excluded._et_n, "_et_a0" = s."_et_a0" + excluded."_et_a0", "_et_a1" = _eventtime.acc_check(CASE WHEN s."_et_a1" IS NULL THEN excluded."_et_a1" WHEN excluded."_et_a1" IS NULL THEN s."_et_a1" ELSE s."_et_a1" + excluded."_et_a1" END, 7, 'mean', s.window_start), "_et_a1_n" = s."_et_a1_n" + excluded."_et_a1_n"
),
up AS (
INSERT INTO _eventtime."p7_state" AS s ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n", version, _et_late)
SELECT *, 1, true FROM (SELECT r."store", r.window_start, r.window_end, r._et_n, r."_et_a0", _eventtime.acc_check(r."_et_a1", 7, 'mean', r.window_start), r."_et_a1_n" FROM (SELECT pg_eventtime.v_row.c0, c."_et_window_start", c."_et_window_end", 1, 1::bigint, (pg_eventtime.v_row.c3)::numeric, CASE WHEN pg_eventtime.v_row.c3 IS NULL THEN 0::bigint ELSE 1::bigint END
FROM c WHERE c._et_landing = 2 AND (pg_eventtime.v_row.c1 IS NULL OR EXISTS (SELECT FROM fresh))) r ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n")) r
ON CONFLICT ("store", window_start) WHERE _et_late DO UPDATE SET
version = s.version + 1, _et_n = s._et_n + excluded._et_n, "_et_a0" = s."_et_a0" + excluded."_et_a0", "_et_a1" = _eventtime.acc_check(CASE WHEN s."_et_a1" IS NULL THEN excluded."_et_a1" WHEN excluded."_et_a1" IS NULL THEN s."_et_a1" ELSE s."_et_a1" + excluded."_et_a1" END, 7, 'mean', s.window_start), "_et_a1_n" = s."_et_a1_n" + excluded."_et_a1_n"
RETURNING s.ctid
)
SELECT c."_et_window_start", c."_et_window_end", c._et_landing, c.w, (pg_eventtime.v_row.c1 IS NULL OR EXISTS (SELECT FROM fresh)), (SELECT ctid FROM up) FROM c
INTO v_ws, v_we, v_landing, v_w, v_kept, v_tid;
n_accepted := 0; n_late := 0; n_refused := 0; n_duplicates := 0; max_event_time := pg_eventtime.v_row.c2;
IF v_landing = 4 THEN
n_bad := 1;
v_bad := pg_eventtime.v_row.c2;
ELSIF NOT v_kept THEN
n_duplicates := 1;
ELSIF v_landing = 1 THEN
n_accepted := 1;
ELSIF v_landing = 2 THEN
n_late := 1;
n_versions := 1;
INSERT INTO _eventtime."p7_history" ("store", window_start, window_end, version, kind, "orders", "mean", watermark, _et_n, "_et_a0", "_et_a1", "_et_a1_n")
SELECT v."store", v.window_start, v.window_end, v.version, 'late', (v."_et_a0")::bigint, (v."_et_a1" / NULLIF(v."_et_a1_n", 0))::numeric, v._et_w, v._et_n, v."_et_a0", v."_et_a1", v."_et_a1_n"
FROM (SELECT u."store", u.window_start, u.window_end, u.version + (m._et_n IS NOT NULL)::integer AS version, pg_eventtime.v_w AS _et_w, coalesce(m._et_n, 0) + u._et_n AS _et_n, coalesce(m."_et_a0", 0) + u."_et_a0" AS "_et_a0", CASE WHEN m."_et_a1" IS NULL THEN u."_et_a1" WHEN u."_et_a1" IS NULL THEN m."_et_a1" ELSE m."_et_a1" + u."_et_a1" END AS "_et_a1", coalesce(m."_et_a1_n", 0) + u."_et_a1_n" AS "_et_a1_n"
FROM _eventtime."p7_state" u
LEFT JOIN LATERAL (
SELECT m._et_n, m."_et_a0", m."_et_a1", m."_et_a1_n" FROM _eventtime."p7_history" m WHERE m.window_start = u.window_start AND m.version = 1 AND m.kind = 'main' AND m."store" OPERATOR(pg_catalog.=) u."store"
UNION ALL
SELECT m._et_n, m."_et_a0", m."_et_a1", m."_et_a1_n" FROM _eventtime."p7_history" m WHERE m.window_start = u.window_start AND m.version = 1 AND m.kind = 'main' AND m."store" IS NULL AND u."store" IS NULL
) m ON true WHERE u.ctid = pg_eventtime.v_tid) v;
ELSE
n_refused := 1;
INSERT INTO _eventtime."p7_refused" ("store", event_id, event_time, "row", window_start, window_end, deadline, watermark)
SELECT r."store", r."order_id", r."ordered_at", to_jsonb(r.*), pg_eventtime.v_ws, pg_eventtime.v_we, pg_eventtime.v_we + interval '24:00:00.000000', pg_eventtime.v_w
FROM new_rows r;
END IF;
ELSE
IF (CASE WHEN v_row.n >= 1000 THEN (
SELECT NOT EXISTS (SELECT FROM _eventtime."p7_ids" i WHERE i.window_start BETWEEN (SELECT min(w.window_start) FROM _eventtime.calendar(m.lo, 1, 1, true, 0, 'Europe/Berlin') w) AND (SELECT max(w.window_start) FROM _eventtime.calendar(m.hi, 1, 1, true, 0, 'Europe/Berlin') w))
FROM (SELECT min(n."ordered_at") AS lo, max(n."ordered_at") AS hi FROM new_rows n) m
) ELSE false END) THEN
BEGIN
WITH /* pg_eventtime ingest */ wm AS MATERIALIZED (
SELECT p.watermark AS w,
coalesce(p.watermark, '-infinity') AS w_open,
coalesce(p.watermark - interval '24:00:00.000000', '-infinity') AS w_late
FROM _eventtime.pipeline p WHERE p.id = 7
),
cls AS NOT MATERIALIZED (
SELECT r."store", r."_et_window_start", r."_et_window_end", r."order_id" AS _et_eid, r."ordered_at" AS _et_et, r."amount" AS "_et_v1", 
CASE WHEN r."_et_window_end" IS NULL THEN 4 WHEN r."_et_window_end" > wm.w_open THEN 1 WHEN r."_et_window_end" > wm.w_late THEN 2 ELSE 3 END AS _et_landing,
CASE WHEN r."_et_window_end" <= wm.w_late THEN to_jsonb(r.*) - '_et_window_start' - '_et_window_end' END AS _et_doc
FROM (SELECT n.*, w.window_start AS "_et_window_start", w.window_end AS "_et_window_end"
FROM new_rows n LEFT JOIN LATERAL _eventtime.calendar(n."ordered_at", 1, 1, true, 0, 'Europe/Berlin') w ON true OFFSET 0) r
CROSS JOIN wm
),
fresh AS (
INSERT INTO _eventtime."p7_ids" (window_start, "store", event_id)
SELECT "_et_window_start", "store", _et_eid FROM cls WHERE _et_eid IS NOT NULL AND _et_landing < 4 ORDER BY "_et_window_start", "store", _et_eid
),
batch AS MATERIALIZED (
SELECT "store", "_et_window_start", "_et_window_end", max(_et_landing) AS _et_landing, count(*) AS _et_n, count(*) FILTER (WHERE _et_landing < 3) AS _et_p0, sum("_et_v1") FILTER (WHERE _et_landing < 3)::numeric AS _et_p1, count("_et_v1") FILTER (WHERE _et_landing < 3) AS _et_p2
FROM cls GROUP BY "store", "_et_window_start", "_et_window_end"
),
cls_n AS MATERIALIZED (
SELECT coalesce(sum(_et_n), 0) AS rows, NULL::timestamptz AS max_et, max(_et_landing) AS max_landing,
coalesce(sum(_et_n) FILTER (WHERE _et_landing = 4), 0) AS bad
FROM batch
),
kept AS NOT MATERIALIZED (SELECT * FROM cls),
refused AS (
INSERT INTO _eventtime."p7_refused" ("store", event_id, event_time, "row", window_start, window_end, deadline, watermark)
SELECT c."store", c._et_eid, c._et_et, c._et_doc, c."_et_window_start", c."_et_window_end", c."_et_window_end" + interval '24:00:00.000000', wm.w
FROM kept c CROSS JOIN wm WHERE (SELECT max_landing FROM cls_n) = 3 AND c._et_landing = 3
RETURNING 1
),
appended AS (
INSERT INTO _eventtime."p7_state" AS s ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n", _et_slot)
SELECT *, _eventtime.backend_slot() FROM (SELECT r."store", r.window_start, r.window_end, r._et_n, r."_et_a0", _eventtime.acc_check(r."_et_a1", 7, 'mean', r.window_start), r."_et_a1_n" FROM (SELECT "store", "_et_window_start", "_et_window_end", _et_n, _et_p0, _et_p1, _et_p2
FROM batch WHERE _et_landing = 1 ORDER BY "_et_window_start", "store") r ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n")) c
ON CONFLICT ("store", window_start, _et_slot) WHERE _et_slot IS NOT NULL DO UPDATE SET
_et_n = s._et_n + excluded._et_n, "_et_a0" = s."_et_a0" + excluded."_et_a0", "_et_a1" = _eventtime.acc_check(CASE WHEN s."_et_a1" IS NULL THEN excluded."_et_a1" WHEN excluded."_et_a1" IS NULL THEN s."_et_a1" ELSE s."_et_a1" + excluded."_et_a1" END, 7, 'mean', s.window_start), "_et_a1_n" = s."_et_a1_n" + excluded."_et_a1_n"
),
up AS (
INSERT INTO _eventtime."p7_state" AS s ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n", version, _et_late)
SELECT *, 1, true FROM (SELECT r."store", r.window_start, r.window_end, r._et_n, r."_et_a0", _eventtime.acc_check(r."_et_a1", 7, 'mean', r.window_start), r."_et_a1_n" FROM (SELECT "store", "_et_window_start", "_et_window_end", _et_n, _et_p0, _et_p1, _et_p2
FROM batch WHERE _et_landing = 2 ORDER BY "_et_window_start", "store") r ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n")) r
ON CONFLICT ("store", window_start) WHERE _et_late DO UPDATE SET
version = s.version + 1, _et_n = s._et_n + excluded._et_n, "_et_a0" = s."_et_a0" + excluded."_et_a0", "_et_a1" = _eventtime.acc_check(CASE WHEN s."_et_a1" IS NULL THEN excluded."_et_a1" WHEN excluded."_et_a1" IS NULL THEN s."_et_a1" ELSE s."_et_a1" + excluded."_et_a1" END, 7, 'mean', s.window_start), "_et_a1_n" = s."_et_a1_n" + excluded."_et_a1_n"
RETURNING s.*
),
late_versions AS (
INSERT INTO _eventtime."p7_history" ("store", window_start, window_end, version, kind, "orders", "mean", watermark, _et_n, "_et_a0", "_et_a1", "_et_a1_n")
SELECT v."store", v.window_start, v.window_end, v.version, 'late', (v."_et_a0")::bigint, (v."_et_a1" / NULLIF(v."_et_a1_n", 0))::numeric, v._et_w, v._et_n, v."_et_a0", v."_et_a1", v."_et_a1_n"
FROM (SELECT u."store", u.window_start, u.window_end, u.version + (m._et_n IS NOT NULL)::integer AS version, wm.w AS _et_w, coalesce(m._et_n, 0) + u._et_n AS _et_n, coalesce(m."_et_a0", 0) + u."_et_a0" AS "_et_a0", CASE WHEN m."_et_a1" IS NULL THEN u."_et_a1" WHEN u."_et_a1" IS NULL THEN m."_et_a1" ELSE m."_et_a1" + u."_et_a1" END AS "_et_a1", coalesce(m."_et_a1_n", 0) + u."_et_a1_n" AS "_et_a1_n"
FROM up u CROSS JOIN wm
LEFT JOIN LATERAL (
SELECT m._et_n, m."_et_a0", m."_et_a1", m."_et_a1_n" FROM _eventtime."p7_history" m WHERE m.window_start = u.window_start AND m.version = 1 AND m.kind = 'main' AND m."store" OPERATOR(pg_catalog.=) u."store"
UNION ALL
SELECT m._et_n, m."_et_a0", m."_et_a1", m."_et_a1_n" FROM _eventtime."p7_history" m WHERE m.window_start = u.window_start AND m.version = 1 AND m.kind = 'main' AND m."store" IS NULL AND u."store" IS NULL
) m ON true WHERE u.window_end <= wm.w) v
RETURNING 1
),
counts AS MATERIALIZED (
SELECT coalesce(sum(_et_n) FILTER (WHERE _et_landing = 1), 0)::bigint AS accepted,
coalesce(sum(_et_n) FILTER (WHERE _et_landing = 2), 0)::bigint AS late,
(SELECT count(*) FROM refused) AS refused
FROM batch
)
SELECT accepted, late, refused, (SELECT rows FROM cls_n) - accepted - late - refused, (SELECT max_et FROM cls_n),
(SELECT bad FROM cls_n), CASE WHEN (SELECT bad FROM cls_n) > 0 THEN (SELECT (array_agg(_et_et) FILTER (WHERE _et_landing = 4))[1] FROM cls) END, (SELECT count(*) FROM late_versions), (SELECT w FROM wm) FROM counts
INTO n_accepted, n_late, n_refused, n_duplicates, max_event_time, n_bad, v_bad, n_versions, v_w;
v_done := true;
EXCEPTION WHEN unique_violation THEN
v_done := false;
END;
END IF;
IF NOT v_done THEN
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
FROM new_rows n LEFT JOIN LATERAL _eventtime.calendar(n."ordered_at", 1, 1, true, 0, 'Europe/Berlin') w ON true OFFSET 0) r
CROSS JOIN wm
),
cls_n AS MATERIALIZED (
SELECT count(*) AS rows, count(_et_eid) AS ids, max(_et_et) AS max_et, max(_et_landing) AS max_landing,
count(*) FILTER (WHERE _et_landing = 4) AS bad,
(array_agg(_et_et) FILTER (WHERE _et_landing = 4))[1] AS bad_et
FROM cls
),
fresh AS (
INSERT INTO _eventtime."p7_ids" AS i (window_start, "store", event_id)
SELECT "_et_window_start", "store", _et_eid FROM cls WHERE _et_eid IS NOT NULL AND _et_landing < 4 ORDER BY "_et_window_start", "store", _et_eid
ON CONFLICT DO NOTHING
RETURNING i.window_start, i."store", i.event_id
),
all_fresh AS MATERIALIZED (
SELECT (SELECT count(*) FROM fresh) = (SELECT ids FROM cls_n) AS yes
),
kept AS MATERIALIZED (
SELECT c.* FROM cls c WHERE (SELECT yes FROM all_fresh)
UNION ALL
SELECT d.* FROM (
SELECT DISTINCT ON (c."_et_window_start", c."store", c._et_eid) c.*
FROM cls c JOIN fresh f ON f.window_start = c."_et_window_start" AND f.event_id = c._et_eid AND pg_catalog.record_eq(ROW(f."store"), ROW(c."store"))
WHERE NOT (SELECT yes FROM all_fresh)
ORDER BY c."_et_window_start", c."store", c._et_eid, c._et_ord
) d
UNION ALL
SELECT c.* FROM cls c WHERE c._et_eid IS NULL AND NOT (SELECT yes FROM all_fresh)
),
batch AS (
SELECT "store", "_et_window_start", "_et_window_end", max(_et_landing) AS _et_landing, count(*) AS _et_n, count(*) AS _et_p0, sum("_et_v1")::numeric AS _et_p1, count("_et_v1") AS _et_p2
FROM kept WHERE _et_landing < 3 GROUP BY "store", "_et_window_start", "_et_window_end"
),
refused AS (
INSERT INTO _eventtime."p7_refused" ("store", event_id, event_time, "row", window_start, window_end, deadline, watermark)
SELECT c."store", c._et_eid, c._et_et, c._et_doc, c."_et_window_start", c."_et_window_end", c."_et_window_end" + interval '24:00:00.000000', wm.w
FROM kept c CROSS JOIN wm WHERE (SELECT max_landing FROM cls_n) = 3 AND c._et_landing = 3
RETURNING 1
),
appended AS (
INSERT INTO _eventtime."p7_state" AS s ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n", _et_slot)
SELECT *, _eventtime.backend_slot() FROM (SELECT r."store", r.window_start, r.window_end, r._et_n, r."_et_a0", _eventtime.acc_check(r."_et_a1", 7, 'mean', r.window_start), r."_et_a1_n" FROM (SELECT "store", "_et_window_start", "_et_window_end", _et_n, _et_p0, _et_p1, _et_p2
FROM batch WHERE _et_landing = 1 ORDER BY "_et_window_start", "store") r ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n")) c
ON CONFLICT ("store", window_start, _et_slot) WHERE _et_slot IS NOT NULL DO UPDATE SET
_et_n = s._et_n + excluded._et_n, "_et_a0" = s."_et_a0" + excluded."_et_a0", "_et_a1" = _eventtime.acc_check(CASE WHEN s."_et_a1" IS NULL THEN excluded."_et_a1" WHEN excluded."_et_a1" IS NULL THEN s."_et_a1" ELSE s."_et_a1" + excluded."_et_a1" END, 7, 'mean', s.window_start), "_et_a1_n" = s."_et_a1_n" + excluded."_et_a1_n"
),
up AS (
INSERT INTO _eventtime."p7_state" AS s ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n", version, _et_late)
SELECT *, 1, true FROM (SELECT r."store", r.window_start, r.window_end, r._et_n, r."_et_a0", _eventtime.acc_check(r."_et_a1", 7, 'mean', r.window_start), r."_et_a1_n" FROM (SELECT "store", "_et_window_start", "_et_window_end", _et_n, _et_p0, _et_p1, _et_p2
FROM batch WHERE _et_landing = 2 ORDER BY "_et_window_start", "store") r ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n")) r
ON CONFLICT ("store", window_start) WHERE _et_late DO UPDATE SET
version = s.version + 1, _et_n = s._et_n + excluded._et_n, "_et_a0" = s."_et_a0" + excluded."_et_a0", "_et_a1" = _eventtime.acc_check(CASE WHEN s."_et_a1" IS NULL THEN excluded."_et_a1" WHEN excluded."_et_a1" IS NULL THEN s."_et_a1" ELSE s."_et_a1" + excluded."_et_a1" END, 7, 'mean', s.window_start), "_et_a1_n" = s."_et_a1_n" + excluded."_et_a1_n"
RETURNING s.*
),
late_versions AS (
INSERT INTO _eventtime."p7_history" ("store", window_start, window_end, version, kind, "orders", "mean", watermark, _et_n, "_et_a0", "_et_a1", "_et_a1_n")
SELECT v."store", v.window_start, v.window_end, v.version, 'late', (v."_et_a0")::bigint, (v."_et_a1" / NULLIF(v."_et_a1_n", 0))::numeric, v._et_w, v._et_n, v."_et_a0", v."_et_a1", v."_et_a1_n"
FROM (SELECT u."store", u.window_start, u.window_end, u.version + (m._et_n IS NOT NULL)::integer AS version, wm.w AS _et_w, coalesce(m._et_n, 0) + u._et_n AS _et_n, coalesce(m."_et_a0", 0) + u."_et_a0" AS "_et_a0", CASE WHEN m."_et_a1" IS NULL THEN u."_et_a1" WHEN u."_et_a1" IS NULL THEN m."_et_a1" ELSE m."_et_a1" + u."_et_a1" END AS "_et_a1", coalesce(m."_et_a1_n", 0) + u."_et_a1_n" AS "_et_a1_n"
FROM up u CROSS JOIN wm
LEFT JOIN LATERAL (
SELECT m._et_n, m."_et_a0", m."_et_a1", m."_et_a1_n" FROM _eventtime."p7_history" m WHERE m.window_start = u.window_start AND m.version = 1 AND m.kind = 'main' AND m."store" OPERATOR(pg_catalog.=) u."store"
UNION ALL
SELECT m._et_n, m."_et_a0", m."_et_a1", m."_et_a1_n" FROM _eventtime."p7_history" m WHERE m.window_start = u.window_start AND m.version = 1 AND m.kind = 'main' AND m."store" IS NULL AND u."store" IS NULL
) m ON true WHERE u.window_end <= wm.w) v
RETURNING 1
),
counts AS MATERIALIZED (
SELECT coalesce(sum(_et_n) FILTER (WHERE _et_landing = 1), 0)::bigint AS accepted,
coalesce(sum(_et_n) FILTER (WHERE _et_landing = 2), 0)::bigint AS late,
(SELECT count(*) FROM refused) AS refused
FROM batch
)
SELECT accepted, late, refused, (SELECT rows FROM cls_n) - accepted - late - refused, (SELECT max_et FROM cls_n),
(SELECT bad FROM cls_n), (SELECT bad_et FROM cls_n), (SELECT count(*) FROM late_versions), (SELECT w FROM wm) FROM counts
INTO n_accepted, n_late, n_refused, n_duplicates, max_event_time, n_bad, v_bad, n_versions, v_w;
END IF;
END IF;
IF n_bad > 0 THEN
PERFORM _eventtime.raise_event_time_error(7, pg_eventtime.v_bad);
END IF;
IF n_duplicates > 0 THEN
INSERT INTO _eventtime.duplicate_counts (pipeline_id, duplicates) VALUES (7, n_duplicates);
END IF;
IF current_setting('pg_eventtime.collect_counts', true) = 'on' THEN
PERFORM _eventtime.note_counts(7, n_accepted, n_late, n_refused, n_duplicates);
END IF;
IF n_versions > 0 THEN
PERFORM _eventtime.announce('Orders "daily"', 0, n_versions, 0, pg_eventtime.v_w);
END IF;
RETURN NULL;
END pg_eventtime
$eventtime$;

-- front
CREATE FUNCTION _eventtime."p7_ingest"() RETURNS trigger LANGUAGE c AS '$libdir/pg_eventtime', 'eventtime_ingest_front';

-- one on-time row
WITH /* pg_eventtime ingest, one on-time row */ fresh AS (
INSERT INTO _eventtime."p7_ids" (window_start, "store", event_id)
SELECT $1::timestamptz, $3, $4
FROM _eventtime.pipeline p
WHERE p.id = 7 AND (p.watermark IS NULL OR $2::timestamptz > p.watermark)
ON CONFLICT DO NOTHING
RETURNING 1
)
INSERT INTO _eventtime."p7_state" AS s ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n", _et_slot)
SELECT *, _eventtime.backend_slot() FROM (SELECT r."store", r.window_start, r.window_end, r._et_n, r."_et_a0", _eventtime.acc_check(r."_et_a1", 7, 'mean', r.window_start), r."_et_a1_n" FROM (SELECT $3, $1::timestamptz, $2::timestamptz, 1, 1::bigint, ($6)::numeric, CASE WHEN $6 IS NULL THEN 0::bigint ELSE 1::bigint END
FROM fresh) r ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n")) c
ON CONFLICT ("store", window_start, _et_slot) WHERE _et_slot IS NOT NULL DO UPDATE SET
_et_n = s._et_n + excluded._et_n, "_et_a0" = s."_et_a0" + excluded."_et_a0", "_et_a1" = _eventtime.acc_check(CASE WHEN s."_et_a1" IS NULL THEN excluded."_et_a1" WHEN excluded."_et_a1" IS NULL THEN s."_et_a1" ELSE s."_et_a1" + excluded."_et_a1" END, 7, 'mean', s.window_start), "_et_a1_n" = s."_et_a1_n" + excluded."_et_a1_n";
SELECT /* pg_eventtime ingest, one row's window */ p.watermark IS NULL OR $1::timestamptz > p.watermark
FROM _eventtime.pipeline p WHERE p.id = 7;

-- engine
/* pg_eventtime ingest, groups of open windows */
INSERT INTO _eventtime."p7_state" AS s ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n", _et_slot)
SELECT *, _eventtime.backend_slot() FROM (SELECT r."store", r.window_start, r.window_end, r._et_n, r."_et_a0", _eventtime.acc_check(r."_et_a1", 7, 'mean', r.window_start), r."_et_a1_n" FROM (SELECT u.c0, u.c1, u.c2, u.c3, u.c4, u.c5, u.c6 FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::bigint[], $5::bigint[], $6::numeric[], $7::bigint[]) AS u(c0, c1, c2, c3, c4, c5, c6) ORDER BY u.c1, u.c0) r ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n")) c
ON CONFLICT ("store", window_start, _et_slot) WHERE _et_slot IS NOT NULL DO UPDATE SET
_et_n = s._et_n + excluded._et_n, "_et_a0" = s."_et_a0" + excluded."_et_a0", "_et_a1" = _eventtime.acc_check(CASE WHEN s."_et_a1" IS NULL THEN excluded."_et_a1" WHEN excluded."_et_a1" IS NULL THEN s."_et_a1" ELSE s."_et_a1" + excluded."_et_a1" END, 7, 'mean', s.window_start), "_et_a1_n" = s."_et_a1_n" + excluded."_et_a1_n";
WITH /* pg_eventtime ingest, groups of fired windows */ up AS (
INSERT INTO _eventtime."p7_state" AS s ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n", version, _et_late)
SELECT *, 1, true FROM (SELECT r."store", r.window_start, r.window_end, r._et_n, r."_et_a0", _eventtime.acc_check(r."_et_a1", 7, 'mean', r.window_start), r."_et_a1_n" FROM (SELECT u.c0, u.c1, u.c2, u.c3, u.c4, u.c5, u.c6 FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::bigint[], $5::bigint[], $6::numeric[], $7::bigint[]) AS u(c0, c1, c2, c3, c4, c5, c6) ORDER BY u.c1, u.c0) r ("store", window_start, window_end, _et_n, "_et_a0", "_et_a1", "_et_a1_n")) r
ON CONFLICT ("store", window_start) WHERE _et_late DO UPDATE SET
version = s.version + 1, _et_n = s._et_n + excluded._et_n, "_et_a0" = s."_et_a0" + excluded."_et_a0", "_et_a1" = _eventtime.acc_check(CASE WHEN s."_et_a1" IS NULL THEN excluded."_et_a1" WHEN excluded."_et_a1" IS NULL THEN s."_et_a1" ELSE s."_et_a1" + excluded."_et_a1" END, 7, 'mean', s.window_start), "_et_a1_n" = s."_et_a1_n" + excluded."_et_a1_n"
RETURNING s.*
),
late_versions AS (
INSERT INTO _eventtime."p7_history" ("store", window_start, window_end, version, kind, "orders", "mean", watermark, _et_n, "_et_a0", "_et_a1", "_et_a1_n")
SELECT v."store", v.window_start, v.window_end, v.version, 'late', (v."_et_a0")::bigint, (v."_et_a1" / NULLIF(v."_et_a1_n", 0))::numeric, v._et_w, v._et_n, v."_et_a0", v."_et_a1", v."_et_a1_n"
FROM (SELECT u."store", u.window_start, u.window_end, u.version + (m._et_n IS NOT NULL)::integer AS version, $8::timestamptz AS _et_w, coalesce(m._et_n, 0) + u._et_n AS _et_n, coalesce(m."_et_a0", 0) + u."_et_a0" AS "_et_a0", CASE WHEN m."_et_a1" IS NULL THEN u."_et_a1" WHEN u."_et_a1" IS NULL THEN m."_et_a1" ELSE m."_et_a1" + u."_et_a1" END AS "_et_a1", coalesce(m."_et_a1_n", 0) + u."_et_a1_n" AS "_et_a1_n"
FROM up u
LEFT JOIN LATERAL (
SELECT m._et_n, m."_et_a0", m."_et_a1", m."_et_a1_n" FROM _eventtime."p7_history" m WHERE m.window_start = u.window_start AND m.version = 1 AND m.kind = 'main' AND m."store" OPERATOR(pg_catalog.=) u."store"
UNION ALL
SELECT m._et_n, m."_et_a0", m."_et_a1", m."_et_a1_n" FROM _eventtime."p7_history" m WHERE m.window_start = u.window_start AND m.version = 1 AND m.kind = 'main' AND m."store" IS NULL AND u."store" IS NULL
) m ON true WHERE u.window_end <= $8::timestamptz) v
RETURNING 1
)
SELECT count(*) FROM late_versions;
/* pg_eventtime ingest, refused rows */
INSERT INTO _eventtime."p7_refused" ("store", event_id, event_time, "row", window_start, window_end, deadline, watermark)
SELECT t."store", t."order_id", t."ordered_at", pg_catalog.to_jsonb(t.*) - '_et_window_start' - '_et_window_end', w.window_start, w.window_end, w.window_end + interval '24:00:00.000000', $2::timestamptz
FROM pg_catalog.unnest($1) t CROSS JOIN LATERAL _eventtime.calendar(t."ordered_at", 1, 1, true, 0, 'Europe/Berlin') w;
/* pg_eventtime ingest, event ids of open windows */
INSERT INTO _eventtime."p7_ids" AS i (window_start, "store", event_id)
SELECT u.c0, u.c1, u.c2 FROM unnest($1::timestamptz[], $2::text[], $3::bigint[]) AS u(c0, c1, c2)
ON CONFLICT DO NOTHING
RETURNING i.window_start, i."store", i.event_id;

-- trigger
CREATE TRIGGER "eventtime_ingest_p7" AFTER INSERT ON "public"."orders" REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION _eventtime."p7_ingest"();

-- views
CREATE VIEW "public"."Orders ""daily""_history" AS SELECT "store", window_start, window_end, version, kind, "orders", "mean", sealed, watermark, fired_at FROM _eventtime."p7_history";
CREATE VIEW "public"."Orders ""daily""_latest" AS SELECT DISTINCT ON (window_start, "store") "store", window_start, window_end, version, kind, "orders", "mean", sealed, watermark, fired_at FROM _eventtime."p7_history" ORDER BY window_start, "store", version DESC;
CREATE VIEW "public"."Orders ""daily""_sealed" AS SELECT "store", window_start, window_end, version, kind, "orders", "mean", sealed, watermark, fired_at FROM _eventtime."p7_history" WHERE version = 1;
CREATE VIEW "public"."Orders ""daily""_refused" AS SELECT r."store", r.event_id, r.event_time, r."row", r.window_start, r.window_end, r.deadline, r.watermark, r.refused_at, f.version AS restated_in FROM _eventtime."p7_refused" r LEFT JOIN _eventtime."p7_folds" f ON f.refused_id = r._et_id;
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON "public"."Orders ""daily""_history" FOR EACH ROW EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'history');
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON "public"."Orders ""daily""_latest" FOR EACH ROW EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'history');
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON "public"."Orders ""daily""_sealed" FOR EACH ROW EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'history');
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON "public"."Orders ""daily""_refused" FOR EACH ROW EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'refused rows');
CREATE VIEW "public"."Orders ""daily""_provisional" AS SELECT f."store", f.window_start, f.window_end, (f."_et_a0")::bigint AS "orders", (f."_et_a1" / NULLIF(f."_et_a1_n", 0))::numeric AS "mean", wm.w AS watermark
FROM (SELECT _eventtime.provisional_watermark(7) AS w OFFSET 0) wm CROSS JOIN LATERAL (SELECT "store", window_start, window_end, sum(_et_n)::bigint AS _et_n, sum("_et_a0")::bigint AS "_et_a0", sum("_et_a1")::numeric AS "_et_a1", sum("_et_a1_n")::bigint AS "_et_a1_n" FROM _eventtime."p7_state" s
WHERE s.window_end > coalesce(wm.w, '-infinity') AND s._et_slot IS NOT NULL GROUP BY "store", window_start, window_end) f;
CREATE VIEW "public"."Orders ""daily""_current" AS
SELECT "store", window_start, window_end, version, kind, "orders", "mean", sealed, watermark, fired_at, false AS provisional FROM "public"."Orders ""daily""_latest"
UNION ALL
SELECT "store", window_start, window_end, NULL::integer, 'provisional', "orders", "mean", false, watermark, NULL::timestamptz, true FROM "public"."Orders ""daily""_provisional";
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON "public"."Orders ""daily""_provisional" FOR EACH ROW EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'results');
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON "public"."Orders ""daily""_current" FOR EACH ROW EXECUTE FUNCTION _eventtime.refuse_change('Orders "daily"', 'results');

-- typed feed
CREATE FUNCTION "public"."Orders ""daily""_changes"(after text DEFAULT NULL) RETURNS TABLE ("store" text, window_start timestamptz, window_end timestamptz, version integer, kind text, "orders" bigint, "mean" numeric, sealed boolean, watermark timestamptz, fired_at timestamptz, "cursor" text) LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS 'SELECT r."store", c.window_start, c.window_end, c.version, c.kind, r."orders", r."mean", c.sealed, c.watermark, c.fired_at, c."cursor" FROM eventtime.changes(''Orders "daily"'', $1) c CROSS JOIN LATERAL pg_catalog.jsonb_populate_record(NULL::"public"."Orders ""daily""_history", c.key OPERATOR(pg_catalog.||) c.aggregates) r';
COMMENT ON FUNCTION "public"."Orders ""daily""_changes"(text) IS 'pg_eventtime pipeline Orders "daily": the versions committed since a cursor (eventtime.changes), keys and aggregates in their own types';

-- hand over
ALTER TABLE IF EXISTS _eventtime."p7_state" OWNER TO "app owner";
ALTER TABLE IF EXISTS _eventtime."p7_ids" OWNER TO "app owner";
ALTER TABLE IF EXISTS _eventtime."p7_history" OWNER TO "app owner";
ALTER TABLE IF EXISTS _eventtime."p7_refused" OWNER TO "app owner";
ALTER TABLE IF EXISTS _eventtime."p7_folds" OWNER TO "app owner";
REVOKE ALL ON FUNCTION _eventtime."p7_ingest"() FROM PUBLIC;
ALTER FUNCTION _eventtime."p7_ingest"() OWNER TO "app owner";
REVOKE ALL ON FUNCTION _eventtime."p7_ingest_sql"() FROM PUBLIC;
ALTER FUNCTION _eventtime."p7_ingest_sql"() OWNER TO "app owner";

-- fire
WITH f AS MATERIALIZED (
SELECT "store", window_start, window_end, sum(_et_n)::bigint AS _et_n, sum("_et_a0")::bigint AS "_et_a0", sum("_et_a1")::numeric AS "_et_a1", sum("_et_a1_n")::bigint AS "_et_a1_n"
FROM _eventtime."p7_state" s WHERE s.window_end <= $1 AND ($2::timestamptz IS NULL OR s.window_end > $2)
GROUP BY "store", window_start, window_end
),
fired AS (
INSERT INTO _eventtime."p7_history" ("store", window_start, window_end, version, kind, "orders", "mean", watermark, _et_n, "_et_a0", "_et_a1", "_et_a1_n")
SELECT f."store", f.window_start, f.window_end, 1, 'main', (f."_et_a0")::bigint, (f."_et_a1" / NULLIF(f."_et_a1_n", 0))::numeric, $1, f._et_n, f."_et_a0", f."_et_a1", f."_et_a1_n" FROM f
RETURNING 1
)
SELECT (SELECT count(*) FROM fired), (SELECT count(*) FROM f WHERE f.window_end <= $1 - interval '24:00:00.000000');

-- purge
WITH gone AS (DELETE FROM _eventtime."p7_state" s WHERE s.window_end <= $1 - interval '24:00:00.000000' RETURNING s."store", s.window_start, s.window_end)
SELECT count(*) FROM (SELECT DISTINCT "store", window_start FROM gone WHERE window_end <= $2::timestamptz) g;

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
DROP FUNCTION IF EXISTS _eventtime."p7_ingest_sql"();
DROP TABLE IF EXISTS _eventtime."p7_state";
DROP TABLE IF EXISTS _eventtime."p7_ids";
DROP TABLE IF EXISTS _eventtime."p7_history";
DROP TABLE IF EXISTS _eventtime."p7_refused";
DROP TABLE IF EXISTS _eventtime."p7_folds";

