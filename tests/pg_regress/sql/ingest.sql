-- Ingest through INSERT, COPY and eventtime.ingest(); dedup; NULL keys; window boundaries;
-- late versions; changes to source rows; advance_watermark.
\i include/setup.sql
CREATE SCHEMA ing;
SET search_path = ing, public;

-- Hourly windows, 2 hours of grace, dedup on id per key and window.
CREATE TABLE ev (id integer, k text, v integer, at timestamptz, note text DEFAULT 'none');
SELECT eventtime.create_pipeline(name => 'ing_hourly', source => 'ev', event_time => 'at', key => ARRAY['k'],
    event_id => 'id', window_size => '1 hour', allowed_lateness => '2 hours',
    aggregates => 'count(*) AS n, sum(v) AS total, avg(v) AS mean, min(v) AS lo, max(v) AS hi');

CREATE VIEW ing_stats AS
SELECT watermark, open_windows, state_rows, firings, refused, duplicates FROM eventtime.pipelines WHERE name = 'ing_hourly';
CREATE VIEW ing_history AS
SELECT k, window_start, version, kind, n, total, mean, lo, hi, sealed, watermark FROM ing_hourly_history;

---------------------------------------------------------------------------------------------
-- Open windows (no watermark yet): INSERT, COPY and ingest() all take the same path.
---------------------------------------------------------------------------------------------
SELECT * FROM eventtime.ingest('ing_hourly', '{"id": 1, "k": "a", "v": 10, "at": "2026-10-29 10:00:00+00"}');
SELECT * FROM eventtime.ingest('ing_hourly', '[{"id": 2, "k": "a", "v": 20, "at": "2026-10-29 10:30:00+00"},
                                              {"id": 3, "k": "b", "v": 30, "at": "2026-10-29 10:59:59.999999+00"},
                                              {"id": 4, "k": "a", "v": 40, "at": "2026-10-29 11:00:00+00"}]');
INSERT INTO ev (id, k, v, at) VALUES (5, 'a', 50, '2026-10-29 11:15+00'), (6, 'b', 60, '2026-10-29 12:00+00');
COPY ev (id, k, v, at) FROM stdin;
7	a	70	2026-10-29 11:45:00+00
8	b	80	2026-10-29 12:30:00+00
\.
COPY ev (id, k, v, at) FROM stdin (FORMAT csv);
9,a,90,2026-10-29 12:45:00+00
10,,100,2026-10-29 12:50:00+00
\.
-- An empty array ingests nothing.
SELECT * FROM eventtime.ingest('ing_hourly', '[]');
-- Columns missing from the document take their defaults.
SELECT * FROM eventtime.ingest('ing_hourly', '{"id": 11, "k": "b", "at": "2026-10-29 12:55:00+00"}');
SELECT id, k, v, at, note FROM ev WHERE id = 11;
SELECT * FROM ing_stats;

---------------------------------------------------------------------------------------------
-- Dedup: inside one statement, across statements, per key and window; NULL ids never dedup.
---------------------------------------------------------------------------------------------
-- Twice the same (key, window, id) in one statement: one accepted, one duplicate.
SELECT * FROM eventtime.ingest('ing_hourly', '[{"id": 20, "k": "a", "v": 1, "at": "2026-10-29 12:01:00+00"},
                                              {"id": 20, "k": "a", "v": 1, "at": "2026-10-29 12:02:00+00"}]');
-- Again in a later statement: a duplicate, whatever its other columns say.
SELECT * FROM eventtime.ingest('ing_hourly', '{"id": 20, "k": "a", "v": 999, "at": "2026-10-29 12:59:00+00"}');
-- The same id under another key, or in another window, is another event.
SELECT * FROM eventtime.ingest('ing_hourly', '[{"id": 20, "k": "b", "v": 2, "at": "2026-10-29 12:03:00+00"},
                                              {"id": 20, "k": "a", "v": 3, "at": "2026-10-29 13:03:00+00"}]');
-- Rows without an id are never duplicates, not even of each other.
SELECT * FROM eventtime.ingest('ing_hourly', '[{"k": "a", "v": 4, "at": "2026-10-29 12:04:00+00"},
                                              {"k": "a", "v": 4, "at": "2026-10-29 12:04:00+00"}]');
INSERT INTO ev (id, k, v, at) VALUES (NULL, 'a', 4, '2026-10-29 12:04+00');
-- A NULL key is a group of its own (as in GROUP BY), and dedups inside that group.
SELECT * FROM eventtime.ingest('ing_hourly', '[{"id": 10, "k": null, "v": 100, "at": "2026-10-29 12:50:00+00"},
                                              {"id": 21, "v": 5, "at": "2026-10-29 12:51:00+00"},
                                              {"id": 10, "k": "c", "v": 6, "at": "2026-10-29 12:52:00+00"}]');
SELECT * FROM ing_stats;

---------------------------------------------------------------------------------------------
-- advance_watermark: fires every window with end <= watermark.
---------------------------------------------------------------------------------------------
-- 12:00 fires the windows ending at or before it: [10, 11) of a and b, [11, 12) of a (b has no
-- row there). Nothing is purged: the deadline of [10, 11) is 13:00.
SELECT * FROM eventtime.advance_watermark('ing_hourly', '2026-10-29 12:00+00');
SELECT * FROM ing_history ORDER BY k NULLS LAST, window_start, version;
-- The window [12:00, 13:00) per key, as PostgreSQL computes it over the rows ingested so far
-- (ids deduplicated per key and window).
SELECT k, count(*) AS n, sum(v) AS total, avg(v) AS mean, min(v) AS lo, max(v) AS hi
FROM (SELECT DISTINCT ON (k, coalesce(id::text, ctid::text)) * FROM ev
      WHERE at >= '2026-10-29 12:00+00' AND at < '2026-10-29 13:00+00'
      ORDER BY k, coalesce(id::text, ctid::text), ctid) r
GROUP BY k ORDER BY k NULLS LAST;
SELECT * FROM ing_stats;

-- A watermark equal to the current one, or behind it, changes nothing and says so.
SELECT * FROM eventtime.advance_watermark('ing_hourly', '2026-10-29 12:00+00');
SELECT * FROM eventtime.advance_watermark('ing_hourly', '2026-10-29 09:00+00');
SELECT * FROM eventtime.advance_watermark('ing_hourly', '-infinity');
SELECT * FROM ing_stats;

-- 13:00: [12, 13) fires; [10, 11) reaches its deadline (11:00 + 2 h) and is purged.
SELECT * FROM eventtime.advance_watermark('ing_hourly', '2026-10-29 13:00+00');
SELECT k, window_start, version, kind, n, total, watermark FROM ing_history
WHERE window_start = '2026-10-29 12:00+00' ORDER BY k NULLS LAST, version;
SELECT * FROM ing_stats;

---------------------------------------------------------------------------------------------
-- One statement mixing every landing, under watermark 13:00 (2 h grace):
--   [10, 11): deadline 13:00 = watermark -> refused
--   [11, 12): fired, deadline 14:00         -> late
--   [12, 13): fired at 13:00 = its end      -> late
--   [13, 14): not fired                     -> accepted
-- plus a duplicate of id 5 in [11, 12) and a duplicate of id 30 inside the statement.
---------------------------------------------------------------------------------------------
SELECT * FROM eventtime.ingest('ing_hourly', '[
    {"id": 30, "k": "a", "v": 1000, "at": "2026-10-29 10:30:00+00"},
    {"id": 31, "k": "a", "v": 1,    "at": "2026-10-29 11:30:00+00"},
    {"id": 32, "k": "a", "v": 2,    "at": "2026-10-29 11:31:00+00"},
    {"id": 33, "k": "b", "v": 3,    "at": "2026-10-29 12:59:59.999999+00"},
    {"id": 34, "k": "a", "v": 4,    "at": "2026-10-29 13:00:00+00"},
    {"id": 5,  "k": "a", "v": 50,   "at": "2026-10-29 11:15:00+00"},
    {"id": 30, "k": "a", "v": 1000, "at": "2026-10-29 10:30:00+00"}]');
-- One new version per window the statement added rows to, whatever the number of rows.
SELECT * FROM ing_history WHERE version > 1 ORDER BY k NULLS LAST, window_start, version;
SELECT k, event_id, event_time, "row", window_start, window_end, deadline, watermark FROM ing_hourly_refused
ORDER BY event_id;
SELECT * FROM ing_stats;

---------------------------------------------------------------------------------------------
-- Versions are gapless, one per statement: three late statements for [11, 12) of key a, with
-- two rows each, give versions 3, 4 and 5; a statement of duplicates only gives none.
---------------------------------------------------------------------------------------------
INSERT INTO ev (id, k, v, at) VALUES (40, 'a', 1, '2026-10-29 11:01+00'), (41, 'a', 1, '2026-10-29 11:02+00');
COPY ev (id, k, v, at) FROM stdin;
42	a	1	2026-10-29 11:03:00+00
43	a	1	2026-10-29 11:04:00+00
\.
SELECT * FROM eventtime.ingest('ing_hourly', '[{"id": 44, "k": "a", "v": 1, "at": "2026-10-29 11:05:00+00"},
                                              {"id": 45, "k": "a", "v": 1, "at": "2026-10-29 11:06:00+00"}]');
SELECT * FROM eventtime.ingest('ing_hourly', '[{"id": 44, "k": "a", "v": 1, "at": "2026-10-29 11:05:00+00"},
                                              {"id": 45, "k": "a", "v": 1, "at": "2026-10-29 11:06:00+00"}]');
SELECT * FROM ing_history WHERE k = 'a' AND window_start = '2026-10-29 11:00+00' ORDER BY version;
-- The sealed view keeps version 1; the latest view shows version 5.
SELECT k, window_start, version, n, total FROM ing_hourly_sealed WHERE window_start = '2026-10-29 11:00+00' ORDER BY k NULLS LAST;
SELECT k, window_start, version, n, total FROM ing_hourly_latest WHERE window_start = '2026-10-29 11:00+00' ORDER BY k NULLS LAST;

---------------------------------------------------------------------------------------------
-- A late row for a window that had no rows when it fired: its first firing is version 1, 'late'.
---------------------------------------------------------------------------------------------
SELECT * FROM eventtime.ingest('ing_hourly', '{"id": 50, "k": "z", "v": 7, "at": "2026-10-29 12:10:00+00"}');
SELECT * FROM ing_history WHERE k = 'z' ORDER BY window_start, version;
SELECT * FROM eventtime.ingest('ing_hourly', '{"id": 51, "k": "z", "v": 8, "at": "2026-10-29 12:20:00+00"}');
SELECT * FROM ing_history WHERE k = 'z' ORDER BY window_start, version;

---------------------------------------------------------------------------------------------
-- A rolled-back ingest leaves nothing behind.
---------------------------------------------------------------------------------------------
BEGIN;
SELECT * FROM eventtime.ingest('ing_hourly', '[{"id": 60, "k": "a", "v": 1, "at": "2026-10-29 11:10:00+00"},
                                              {"id": 61, "k": "a", "v": 1, "at": "2026-10-29 10:10:00+00"}]');
SELECT count(*) AS history_in_transaction FROM ing_hourly_history;
ROLLBACK;
SELECT count(*) AS history_rows FROM ing_hourly_history;
SELECT * FROM ing_stats;
-- The same rows after the rollback are not duplicates.
SELECT * FROM eventtime.ingest('ing_hourly', '[{"id": 60, "k": "a", "v": 1, "at": "2026-10-29 11:10:00+00"},
                                              {"id": 61, "k": "a", "v": 1, "at": "2026-10-29 10:10:00+00"}]');

---------------------------------------------------------------------------------------------
-- Events are facts: UPDATE, DELETE and TRUNCATE of source rows change no window.
---------------------------------------------------------------------------------------------
CREATE TEMP TABLE before_history AS SELECT * FROM ing_history;
CREATE TEMP TABLE before_refused AS SELECT k, event_id, event_time, window_start FROM ing_hourly_refused;
CREATE TEMP TABLE before_stats AS SELECT * FROM ing_stats;
UPDATE ev SET v = v * 100, at = at + interval '1 hour' WHERE k = 'a';
DELETE FROM ev WHERE k = 'b';
SELECT count(*) AS history_changes FROM ((TABLE ing_history EXCEPT ALL TABLE before_history)
                                         UNION ALL (TABLE before_history EXCEPT ALL TABLE ing_history)) d;
TRUNCATE ev;
SELECT count(*) AS source_rows FROM ev;
SELECT count(*) AS history_changes FROM ((TABLE ing_history EXCEPT ALL TABLE before_history)
                                         UNION ALL (TABLE before_history EXCEPT ALL TABLE ing_history)) d;
SELECT count(*) AS refused_changes FROM ((SELECT k, event_id, event_time, window_start FROM ing_hourly_refused EXCEPT ALL TABLE before_refused)
                                         UNION ALL (TABLE before_refused EXCEPT ALL SELECT k, event_id, event_time, window_start FROM ing_hourly_refused)) d;
SELECT (SELECT row(s.*)::text FROM ing_stats s) = (SELECT row(b.*)::text FROM before_stats b) AS stats_unchanged;
-- The window state also remembers the deleted rows: the next late row of [12, 13) for key b
-- counts them.
SELECT * FROM eventtime.ingest('ing_hourly', '{"id": 70, "k": "b", "v": 9, "at": "2026-10-29 12:40:00+00"}');
SELECT k, window_start, version, kind, n, total FROM ing_history WHERE k = 'b' ORDER BY window_start, version;

---------------------------------------------------------------------------------------------
-- A watermark far ahead fires and purges in one call; 'infinity' ends the input.
---------------------------------------------------------------------------------------------
SELECT * FROM ing_stats;
-- 15:00: [13, 14) fires; every window of [11, 12) and [12, 13) reaches its deadline and is purged.
SELECT * FROM eventtime.advance_watermark('ing_hourly', '2026-10-29 15:00+00');
SELECT * FROM ing_stats;
INSERT INTO ev (id, k, v, at) VALUES (80, 'a', 1, '2026-10-29 16:00+00'), (81, 'a', 2, '2026-10-29 18:00+00'),
                                     (82, 'b', 3, '2026-10-30 18:00+00');
SELECT * FROM eventtime.advance_watermark('ing_hourly', 'infinity');
SELECT * FROM ing_stats;
SELECT k, window_start, version, kind, n, total, watermark FROM ing_history
WHERE window_start >= '2026-10-29 13:00+00' ORDER BY k NULLS LAST, window_start, version;
-- After the end of input every row is refused, and every further advance is a no-op.
SELECT * FROM eventtime.ingest('ing_hourly', '{"id": 90, "k": "a", "v": 1, "at": "3000-01-01 00:00:00+00"}');
SELECT k, event_id, event_time, window_start, window_end, deadline, watermark FROM ing_hourly_refused
WHERE event_id = 90;
SELECT * FROM eventtime.advance_watermark('ing_hourly', 'infinity');
SELECT * FROM ing_stats;

---------------------------------------------------------------------------------------------
-- A window that fires and is purged by the same advance; zero lateness; two pipelines on one
-- table each count their own rows through ingest().
---------------------------------------------------------------------------------------------
CREATE TABLE clicks (at timestamptz, page text);
SELECT eventtime.create_pipeline(name => 'ing_clicks', source => 'clicks', event_time => 'at',
    window_size => '10 minutes', key => ARRAY['page'], aggregates => 'count(*) AS clicks, max(at) AS last');
SELECT eventtime.create_pipeline(name => 'ing_clicks_hour', source => 'clicks', event_time => 'at',
    window_size => '1 hour', allowed_lateness => '1 hour', aggregates => 'count(*) AS clicks');
SELECT * FROM eventtime.ingest('ing_clicks', '[{"at": "2026-10-29 10:01:00+00", "page": "/"},
                                              {"at": "2026-10-29 10:11:00+00", "page": "/"},
                                              {"at": "2026-10-29 10:12:00+00", "page": "/buy"}]');
SELECT * FROM eventtime.advance_watermark('ing_clicks', '2026-10-29 10:20+00');
SELECT * FROM eventtime.advance_watermark('ing_clicks_hour', '2026-10-29 11:00+00');
-- ing_clicks: 10:10 window closed with no grace -> refused; 10:20 window open.
-- ing_clicks_hour: the 10:00 window fired at 11:00, within its grace -> late.
SELECT * FROM eventtime.ingest('ing_clicks', '[{"at": "2026-10-29 10:19:59.999999+00", "page": "/"},
                                              {"at": "2026-10-29 10:20:00+00", "page": "/"}]');
SELECT * FROM eventtime.ingest('ing_clicks_hour', '{"at": "2026-10-29 10:30:00+00", "page": "/"}');
SELECT page, window_start, version, kind, clicks, last FROM ing_clicks_history ORDER BY page, window_start, version;
SELECT page, event_time, window_start, window_end, deadline, watermark FROM ing_clicks_refused ORDER BY event_time;
SELECT window_start, version, kind, clicks FROM ing_clicks_hour_history ORDER BY window_start, version;
SELECT name, watermark, open_windows, state_rows, firings, refused, duplicates FROM eventtime.pipelines
WHERE name LIKE 'ing\_clicks%' ORDER BY name;

---------------------------------------------------------------------------------------------
-- Source columns may have the names of the trigger function's variables and of the columns its
-- statements compute: one row and several rows, open, late, a duplicate and a refused row.
---------------------------------------------------------------------------------------------
CREATE TABLE ing.clash (n_late text, max_event_time timestamptz, v_row int, v_ws numeric, n int, c0 text);
SELECT eventtime.create_pipeline(name => 'ing_clash', source => 'ing.clash', event_time => 'max_event_time',
    key => ARRAY['n_late', 'v_row'], event_id => 'n', window_size => interval '1 hour',
    allowed_lateness => interval '1 hour', aggregates => 'sum(v_ws) AS total, count(c0) AS c0s');
INSERT INTO ing.clash VALUES ('a', '2026-01-01 00:10+00', 1, 1.5, 1, 'x');
INSERT INTO ing.clash VALUES ('a', '2026-01-01 00:20+00', 1, 2.5, 2, NULL), ('b', '2026-01-01 00:30+00', NULL, 4, 3, 'y'),
                             ('a', '2026-01-01 00:40+00', 1, 9, 2, 'z');
SELECT watermark FROM eventtime.advance_watermark('ing_clash', '2026-01-01 01:30+00');
INSERT INTO ing.clash VALUES ('a', '2026-01-01 00:50+00', 1, 10, 4, 'w');
INSERT INTO ing.clash VALUES ('a', '2026-01-01 00:50+00', 1, 10, 4, 'w');
SELECT * FROM eventtime.ingest('ing_clash', '{"n_late": "b", "max_event_time": "2026-01-01 00:55+00", "n": 5, "v_ws": 1}');
SELECT watermark FROM eventtime.advance_watermark('ing_clash', '2026-01-01 02:00+00');
INSERT INTO ing.clash VALUES ('a', '2026-01-01 00:59+00', 1, 100, 6, 'v');
SELECT n_late, v_row, window_start, version, kind, total, c0s FROM ing.ing_clash_history
ORDER BY n_late, v_row, window_start, version;
SELECT n_late, v_row, event_id, "row" FROM ing.ing_clash_refused;
SELECT refused, duplicates FROM eventtime.pipelines WHERE name = 'ing_clash';

---------------------------------------------------------------------------------------------
-- A statement of 1,000 rows or more into windows that have no event id yet is first written
-- without dedup. A duplicate inside it, or a window that already has ids, takes the statement
-- that dedups: the same results either way.
---------------------------------------------------------------------------------------------
CREATE TABLE ing.bulk (id bigint, k int, at timestamptz);
SELECT eventtime.create_pipeline(name => 'ing_bulk', source => 'ing.bulk', event_time => 'at', key => ARRAY['k'],
    event_id => 'id', window_size => interval '1 day', allowed_lateness => interval '1 day', aggregates => 'count(*) AS n');
-- New windows, no duplicate.
INSERT INTO ing.bulk SELECT i, i % 3, '2026-03-01 00:00+00'::timestamptz + (i % 2) * interval '1 day' FROM generate_series(1, 1200) i;
-- New windows, one duplicate inside: (5, 2) on 4 March twice.
INSERT INTO ing.bulk SELECT i, i % 3, '2026-03-03 00:00+00'::timestamptz + (i % 2) * interval '1 day' FROM generate_series(1, 1200) i
UNION ALL SELECT 5, 2, '2026-03-04 12:00+00';
-- Windows that have ids: 600 redeliveries, 600 new rows.
INSERT INTO ing.bulk SELECT i, i % 3, '2026-03-01 00:00+00'::timestamptz + (i % 2) * interval '1 day' FROM generate_series(601, 1800) i;
-- Through eventtime.ingest: 1,000 rows into a new window, then the same rows again.
SELECT * FROM eventtime.ingest('ing_bulk', (SELECT jsonb_agg(jsonb_build_object('id', i, 'k', 0, 'at', '2026-03-10 08:00+00')) FROM generate_series(1, 1000) i));
SELECT * FROM eventtime.ingest('ing_bulk', (SELECT jsonb_agg(jsonb_build_object('id', i, 'k', 0, 'at', '2026-03-10 08:00+00')) FROM generate_series(1, 1000) i));
SELECT watermark FROM eventtime.advance_watermark('ing_bulk', '2026-03-20 00:00+00');
SELECT window_start, sum(n) AS n, count(*) AS keys FROM ing.ing_bulk_latest GROUP BY window_start ORDER BY window_start;
SELECT duplicates, refused FROM eventtime.pipelines WHERE name = 'ing_bulk';

---------------------------------------------------------------------------------------------
-- Clean up.
---------------------------------------------------------------------------------------------
DROP VIEW ing_history;
SET client_min_messages = warning;
SELECT eventtime.drop_pipeline(name) FROM eventtime.pipelines WHERE name LIKE 'ing\_%' ORDER BY name;
DROP SCHEMA ing CASCADE;
RESET client_min_messages;
RESET search_path;
