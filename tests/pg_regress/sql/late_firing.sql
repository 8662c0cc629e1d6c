-- Batched late firings (late_firing): a fired window's late rows wait in pending rows of the
-- state, no version is written by the ingest statement, and the window's next version is written
-- by the first tick() or advance at least late_firing after its first pending row; an advance
-- that reaches the window's deadline writes it first, whatever the interval. The same rows
-- through the engine (statements of several rows), the SQL path (REPEATABLE READ) and the
-- single-row path must leave what a pipeline with a version per statement leaves, but for the
-- number of late versions.
\i include/setup.sql

CREATE TABLE lf_ref (store text, id bigint, qty int, at timestamptz);
CREATE TABLE lf_eng (LIKE lf_ref);
CREATE TABLE lf_sql (LIKE lf_ref);
CREATE TABLE lf_one (LIKE lf_ref);
CREATE TABLE lf_hour (LIKE lf_ref);
SELECT eventtime.create_pipeline(name => p, source => p::regclass, event_time => 'at', event_id => 'id',
    key => ARRAY['store'], window_size => '1 hour', allowed_lateness => '3 hours',
    aggregates => 'count(*) AS n, sum(qty) AS qty, max(qty) AS top, avg(qty) AS mean',
    late_firing => CASE p WHEN 'lf_ref' THEN NULL WHEN 'lf_hour' THEN interval '1 hour' ELSE interval '1 millisecond' END)
FROM unnest(ARRAY['lf_ref', 'lf_eng', 'lf_sql', 'lf_one', 'lf_hour']) p;
SELECT name, late_firing FROM eventtime.pipelines WHERE name LIKE 'lf\_%' ORDER BY name;

-- Rows over five hours; the watermark then closes the first three, and every later statement
-- brings late rows into them (redeliveries among them), beside rows of open windows.
CREATE TABLE lf_rows AS
SELECT s AS stmt, (ARRAY['a', 'b', NULL])[1 + i % 3] AS store, (s * 1000 + i) % 1500 AS id, s * 10 + i AS qty,
       timestamptz '2026-05-01 00:00+00' + make_interval(mins => (i * 37 + s * 11) % 300) AS at
FROM generate_series(0, 4) s, generate_series(1, 60) i;
CREATE FUNCTION pg_temp.lf_load(s int, ps text[]) RETURNS TABLE (p text, accepted bigint, late bigint, refused bigint, duplicates bigint)
LANGUAGE sql AS $$
  SELECT p, i.* FROM unnest(ps) p,
    eventtime.ingest(p, (SELECT jsonb_agg(to_jsonb(r) - 'stmt') FROM lf_rows r WHERE r.stmt = s)) i
$$;
-- lf_one gets the same rows one statement per row.
CREATE FUNCTION pg_temp.lf_load_one(s int) RETURNS TABLE (accepted bigint, late bigint, refused bigint, duplicates bigint)
LANGUAGE sql AS $$
  SELECT sum(i.accepted)::bigint, sum(i.late)::bigint, sum(i.refused)::bigint, sum(i.duplicates)::bigint
  FROM lf_rows r, eventtime.ingest('lf_one', to_jsonb(r) - 'stmt') i WHERE r.stmt = s
$$;
SELECT * FROM pg_temp.lf_load(0, ARRAY['lf_ref', 'lf_eng', 'lf_hour']);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM pg_temp.lf_load(0, ARRAY['lf_sql']);
COMMIT;
SELECT * FROM pg_temp.lf_load_one(0);
SELECT p, (eventtime.advance_watermark(p, '2026-05-01 03:00+00')).windows_fired
FROM unnest(ARRAY['lf_ref', 'lf_eng', 'lf_sql', 'lf_one', 'lf_hour']) p;

-- Late rows: the reference writes a version per statement and window, the others none.
SELECT e.* FROM generate_series(1, 3) s, pg_temp.lf_load(s, ARRAY['lf_ref', 'lf_eng', 'lf_hour']) e;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT e.* FROM generate_series(1, 3) s, pg_temp.lf_load(s, ARRAY['lf_sql']) e;
COMMIT;
SELECT e.* FROM generate_series(1, 3) s, pg_temp.lf_load_one(s) e;
SELECT p, (SELECT count(*) FROM eventtime.changes(p) c WHERE c.kind = 'late') AS late_versions
FROM unnest(ARRAY['lf_ref', 'lf_eng', 'lf_sql', 'lf_one', 'lf_hour']) p;

-- Before its batch, a fired window's next values are in _provisional: those the reference
-- published for it.
CREATE FUNCTION pg_temp.lf_pending_differ(p text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM ((SELECT store, window_start, n, qty, top, mean FROM %1$I WHERE window_end <= ''2026-05-01 03:00+00''
                   EXCEPT ALL SELECT store, window_start, n, qty, top, mean FROM lf_ref_latest WHERE version > 1 OR kind = ''late'')
                  UNION ALL (SELECT store, window_start, n, qty, top, mean FROM lf_ref_latest WHERE version > 1 OR kind = ''late''
                   EXCEPT ALL SELECT store, window_start, n, qty, top, mean FROM %1$I WHERE window_end <= ''2026-05-01 03:00+00'')) d',
                 p || '_provisional') INTO n;
  RETURN n;
END $$;
SELECT p, pg_temp.lf_pending_differ(p) AS provisional_differ FROM unnest(ARRAY['lf_eng', 'lf_sql', 'lf_one', 'lf_hour']) p;
SELECT explanation LIKE '%pending late rows (late_firing 3600 s), the first written at %: the next version is written by the first eventtime.tick() or advance from %' AS explained
FROM eventtime.explain('lf_hour', '2026-05-01 00:30+00', 'a');

-- The batches of late_firing '1 millisecond' are due after it: tick() writes them, one version
-- per window; lf_hour's are not due yet.
SELECT pg_sleep(0.01);
SELECT pipeline, windows_fired FROM eventtime.tick() WHERE pipeline LIKE 'lf\_%' ORDER BY pipeline;
CREATE FUNCTION pg_temp.lf_latest_differ(x text, y text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM ((SELECT store, window_start, n, qty, top, mean FROM %1$I
                   EXCEPT ALL SELECT store, window_start, n, qty, top, mean FROM %2$I)
                  UNION ALL (SELECT store, window_start, n, qty, top, mean FROM %2$I
                   EXCEPT ALL SELECT store, window_start, n, qty, top, mean FROM %1$I)) d',
                 x || '_latest', y || '_latest') INTO n;
  RETURN n;
END $$;
SELECT p, pg_temp.lf_latest_differ('lf_ref', p) AS latest_differ
FROM unnest(ARRAY['lf_eng', 'lf_sql', 'lf_one', 'lf_hour']) p;
-- One version per window and batch: the reference wrote one per statement.
SELECT 'lf_ref' AS p, count(*) FILTER (WHERE kind = 'late') AS late_versions, max(version) AS last FROM lf_ref_history
UNION ALL SELECT 'lf_eng', count(*) FILTER (WHERE kind = 'late'), max(version) FROM lf_eng_history
UNION ALL SELECT 'lf_sql', count(*) FILTER (WHERE kind = 'late'), max(version) FROM lf_sql_history
UNION ALL SELECT 'lf_one', count(*) FILTER (WHERE kind = 'late'), max(version) FROM lf_one_history;
-- Versions are gapless per window, and version 1 is the reference's.
SELECT count(*) AS gaps FROM (
  SELECT version, row_number() OVER (PARTITION BY store, window_start ORDER BY version) AS rn FROM lf_eng_history
  UNION ALL
  SELECT version, row_number() OVER (PARTITION BY store, window_start ORDER BY version) FROM lf_one_history) v
WHERE version <> rn;
SELECT count(*) AS sealed_differ FROM (
  (SELECT store, window_start, kind, n, qty FROM lf_ref_sealed EXCEPT ALL SELECT store, window_start, kind, n, qty FROM lf_eng_sealed)
  UNION ALL
  (SELECT store, window_start, kind, n, qty FROM lf_eng_sealed EXCEPT ALL SELECT store, window_start, kind, n, qty FROM lf_ref_sealed)) d;
-- No pending row is left, and the latest versions are GROUP BY over the first row of each id.
SELECT count(*) AS pending FROM _eventtime.pipeline p,
  LATERAL (SELECT * FROM eventtime.explain(p.name, '2026-05-01 00:30+00', 'a')) e
WHERE p.name IN ('lf_eng', 'lf_sql', 'lf_one') AND e.explanation LIKE '%the first written at%';
SELECT count(*) AS differ FROM (
  (SELECT store, window_start, n, qty, top FROM lf_eng_latest
   EXCEPT ALL
   SELECT store, date_trunc('hour', at), count(*), sum(qty), max(qty)
   FROM (SELECT DISTINCT ON (store, date_trunc('hour', at), id) * FROM lf_rows
         WHERE stmt <= 3 AND at < '2026-05-01 03:00+00' ORDER BY store, date_trunc('hour', at), id, stmt) r
   GROUP BY 1, 2)
  UNION ALL
  (SELECT store, date_trunc('hour', at), count(*), sum(qty), max(qty)
   FROM (SELECT DISTINCT ON (store, date_trunc('hour', at), id) * FROM lf_rows
         WHERE stmt <= 3 AND at < '2026-05-01 03:00+00' ORDER BY store, date_trunc('hour', at), id, stmt) r
   GROUP BY 1, 2
   EXCEPT ALL
   SELECT store, window_start, n, qty, top FROM lf_eng_latest)) d;

-- The lateness account counts a batched row's lateness from the watermark it arrived under.
CREATE FUNCTION pg_temp.lf_account_differ(x text, y text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM ((SELECT * FROM eventtime.lateness(%1$L, ''2026-05-01'', ''2026-05-02'')
                   EXCEPT ALL SELECT * FROM eventtime.lateness(%2$L, ''2026-05-01'', ''2026-05-02''))
                  UNION ALL (SELECT * FROM eventtime.lateness(%2$L, ''2026-05-01'', ''2026-05-02'')
                   EXCEPT ALL SELECT * FROM eventtime.lateness(%1$L, ''2026-05-01'', ''2026-05-02''))) d', x, y) INTO n;
  RETURN n;
END $$;
SELECT sum(late) AS late_rows, max(lateness_max) AS worst FROM eventtime.lateness('lf_ref', '2026-05-01', '2026-05-02');
SELECT p, pg_temp.lf_account_differ('lf_ref', p) AS account_differ FROM unnest(ARRAY['lf_eng', 'lf_sql', 'lf_one']) p;
SELECT suggest_lateness = (SELECT eventtime.suggest_lateness('lf_ref')) AS same_suggestion
FROM eventtime.suggest_lateness('lf_eng') suggest_lateness;

-- An advance past the deadlines writes lf_hour's batches before it purges: nothing accepted is
-- lost; and the versions of the batch are in the feed.
SELECT (eventtime.advance_watermark('lf_hour', '2026-05-01 06:00+00')).windows_purged;
SELECT count(*) AS latest_differ FROM (
  (SELECT store, window_start, n, qty, top, mean FROM lf_ref_latest
   EXCEPT ALL SELECT store, window_start, n, qty, top, mean FROM lf_hour_latest WHERE window_end <= '2026-05-01 03:00+00')
  UNION ALL
  (SELECT store, window_start, n, qty, top, mean FROM lf_hour_latest WHERE window_end <= '2026-05-01 03:00+00'
   EXCEPT ALL SELECT store, window_start, n, qty, top, mean FROM lf_ref_latest)) d;
SELECT count(*) FILTER (WHERE kind = 'late') AS late_in_feed FROM eventtime.changes('lf_hour');
SELECT count(*) AS pending FROM lf_hour_provisional WHERE window_end <= '2026-05-01 03:00+00';

-- Sessions: rows that join a fired session, and a late session of new rows, wait for the batch;
-- a statement that merges sessions that had published versions writes them at once. After the
-- same rows and the deadlines, both pipelines publish the same sessions.
CREATE TABLE lf_clicks (usr text, at timestamptz, ms int);
CREATE TABLE lf_clicks_ref (LIKE lf_clicks);
SELECT eventtime.create_pipeline(name => p, source => p::regclass, event_time => 'at', key => ARRAY['usr'],
    session_gap => '30 minutes', allowed_lateness => '1 day', aggregates => 'count(*) AS n, sum(ms) AS ms',
    late_firing => CASE WHEN p = 'lf_clicks' THEN interval '1 millisecond' END)
FROM unnest(ARRAY['lf_clicks', 'lf_clicks_ref']) p;
-- Per user: sessions [00:00, 00:50), [02:00, 02:35) and [04:00, 04:30) that fire; then rows that
-- join the first (statements 1 and 2), a late session of new rows (06:00, statement 1) that
-- statement 2 extends, and a bridge of the first two (statement 3), which merges fired sessions.
CREATE TABLE lf_click_rows AS
SELECT stmt, usr, timestamptz '2026-05-01 00:00+00' + m * interval '1 minute' AS at, stmt * 1000 + m AS ms
FROM (VALUES (0, 0), (0, 10), (0, 20), (0, 120), (0, 125), (0, 240),
             (1, 5), (1, 360), (2, 15), (2, 370), (2, 6), (3, 45), (3, 70), (3, 95), (4, 250)) v(stmt, m),
     unnest(ARRAY['u1', 'u2', NULL]) usr;
CREATE FUNCTION pg_temp.lf_clicks_load(s int) RETURNS void LANGUAGE sql AS $$
  INSERT INTO lf_clicks SELECT usr, at, ms FROM lf_click_rows WHERE stmt = s;
  INSERT INTO lf_clicks_ref SELECT usr, at, ms FROM lf_click_rows WHERE stmt = s;
$$;
SELECT pg_temp.lf_clicks_load(0);
SELECT p, (eventtime.advance_watermark(p, '2026-05-01 10:00+00')).windows_fired FROM unnest(ARRAY['lf_clicks', 'lf_clicks_ref']) p;
SELECT pg_temp.lf_clicks_load(s) FROM generate_series(1, 2) s;
-- Rows that joined fired sessions, and the late session, wait: no version yet.
SELECT (SELECT count(*) FROM lf_clicks_ref_history WHERE kind <> 'main') AS ref_versions,
       (SELECT count(*) FROM lf_clicks_history WHERE kind <> 'main') AS batched_versions;
SELECT count(*) AS pending, count(*) FILTER (WHERE (usr, window_start, window_end, n, ms) IS DISTINCT FROM
         (SELECT (r.usr, r.window_start, r.window_end, r.n, r.ms) FROM lf_clicks_ref_latest r
          WHERE r.usr IS NOT DISTINCT FROM p.usr AND r.window_start = p.window_start AND r.window_end = p.window_end)) AS differ
FROM lf_clicks_provisional p;
SELECT explanation LIKE '%join session [2026-05-01 00:00:00+00, 2026-05-01 00:50:00+00) of this key, which fired: it waits with the session''s late rows for their batch, which writes version 2 %' AS explained
FROM eventtime.explain('lf_clicks', '2026-05-01 00:07+00', 'u1');
SELECT pg_temp.lf_clicks_load(s) FROM generate_series(3, 4) s;
SELECT (SELECT count(*) FROM lf_clicks_ref_history WHERE kind <> 'main') AS ref_versions,
       (SELECT count(*) FROM lf_clicks_history WHERE kind <> 'main') AS batched_versions_before_the_batch;
SELECT count(*) AS provisional_differ FROM (
  (SELECT usr, window_start, window_end, n, ms FROM lf_clicks_provisional
   EXCEPT ALL SELECT usr, window_start, window_end, n, ms FROM lf_clicks_ref_latest)) d;
SELECT usr, window_start, window_end, n, ms FROM lf_clicks_provisional ORDER BY usr, window_start;
SELECT pg_sleep(0.01);
SELECT pipeline, windows_fired FROM eventtime.tick() WHERE pipeline LIKE 'lf\_clicks%' ORDER BY pipeline;
SELECT count(*) AS latest_differ FROM (
  (SELECT usr, window_start, window_end, n, ms FROM lf_clicks_latest
   EXCEPT ALL SELECT usr, window_start, window_end, n, ms FROM lf_clicks_ref_latest)
  UNION ALL
  (SELECT usr, window_start, window_end, n, ms FROM lf_clicks_ref_latest
   EXCEPT ALL SELECT usr, window_start, window_end, n, ms FROM lf_clicks_latest)) d;
SELECT kind, count(*) FROM lf_clicks_history GROUP BY kind ORDER BY kind;
SELECT kind, count(*) FROM lf_clicks_ref_history GROUP BY kind ORDER BY kind;
SELECT count(*) AS gaps FROM (
  SELECT version, row_number() OVER (PARTITION BY usr, window_start, window_end ORDER BY version) AS rn FROM lf_clicks_history) v
WHERE version <> rn;
-- The latest sessions are the gaps and islands of the rows.
SELECT count(*) AS differ FROM (
  (SELECT usr, window_start, window_end, n, ms FROM lf_clicks_latest
   EXCEPT ALL
   SELECT usr, min(at), max(at) + interval '30 minutes', count(*), sum(ms)
   FROM (SELECT usr, at, ms, sum(brk) OVER (PARTITION BY usr ORDER BY at ROWS UNBOUNDED PRECEDING) AS isl
         FROM (SELECT usr, at, ms, CASE WHEN at < max(at) OVER (PARTITION BY usr ORDER BY at ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) + interval '30 minutes' THEN 0 ELSE 1 END AS brk
               FROM lf_click_rows) b) g
   GROUP BY usr, isl)) d;
SELECT eventtime.drop_pipeline(p) FROM unnest(ARRAY['lf_clicks', 'lf_clicks_ref']) p;

-- What late_firing refuses.
SELECT pg_temp.try($$SELECT eventtime.create_pipeline('lf_bad', 'lf_ref', 'at', window_size => '1 hour', late_firing => '0')$$);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline('lf_bad', 'lf_ref', 'at', window_size => '1 hour', late_firing => '1 month')$$);

SELECT eventtime.drop_pipeline(p) FROM unnest(ARRAY['lf_ref', 'lf_eng', 'lf_sql', 'lf_one', 'lf_hour']) p;
