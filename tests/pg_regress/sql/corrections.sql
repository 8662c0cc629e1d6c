-- Corrections (SPEC §8): the seed's month end told to its end. Thursday is sealed at 1,402,
-- a late order makes 1,403, order 8841 is refused, and the month-end reconciliation restates
-- 1,404 beside them; the lateness account says whether the grace is too tight; the feed of
-- versions resumes from a cursor. Every restated number is checked against PostgreSQL's own
-- aggregates over the same rows.
\i include/setup.sql

CREATE TABLE corr_orders (order_id bigint, store text, amount numeric, ordered_at timestamptz);
SELECT eventtime.create_pipeline(name => 'corr_daily', source => 'corr_orders', event_time => 'ordered_at',
    key => ARRAY['store'], event_id => 'order_id', window_size => '1 day', allowed_lateness => '24 hours',
    aggregates => 'count(*) AS orders, sum(amount) AS revenue, avg(amount) AS mean, min(amount) AS smallest, max(amount) AS biggest',
    max_ahead => NULL);

-- 1,402 web orders and 3 shop orders on Thursday 29 October.
INSERT INTO corr_orders
SELECT g, 'web', 10 + g % 7, timestamptz '2026-10-29 00:00+00' + g * interval '61 seconds'
FROM generate_series(1, 1402) g;
INSERT INTO corr_orders VALUES (5001, 'shop', 100, '2026-10-29 09:00+00'), (5002, 'shop', 200, '2026-10-29 10:00+00'),
                               (5003, 'shop', 300, '2026-10-29 11:00+00');
SELECT windows_fired FROM eventtime.advance_watermark('corr_daily', '2026-10-30 00:00+00');

-- The feed from the start: both version 1s. Keep the cursor of the last row.
SELECT key, window_start, version, kind, aggregates->>'orders' AS orders, sealed FROM eventtime.changes('corr_daily')
ORDER BY key->>'store';
SELECT cursor AS corr_cursor FROM eventtime.changes('corr_daily') WITH ORDINALITY AS c ORDER BY c.ordinality DESC LIMIT 1 \gset

-- Friday noon: a Thursday order within the grace is version 2 (1,403).
SELECT windows_fired FROM eventtime.advance_watermark('corr_daily', '2026-10-30 12:00+00');
INSERT INTO corr_orders VALUES (9001, 'web', 25, '2026-10-29 23:40+00');

-- 1 November: the grace is over. Order 8841 and two shop orders are refused; a redelivery of 8841
-- is a duplicate of its refusal.
SELECT windows_purged FROM eventtime.advance_watermark('corr_daily', '2026-11-01 00:00+00');
INSERT INTO corr_orders VALUES (8841, 'web', 42, '2026-10-29 18:02+00');
INSERT INTO corr_orders VALUES (5004, 'shop', 40, '2026-10-29 12:00+00'), (5005, 'shop', 1, '2026-10-29 13:00+00'),
                               (8841, 'web', 42, '2026-10-29 18:02+00');
SELECT store, event_id, window_end, watermark, restated_in FROM corr_daily_refused ORDER BY event_id;

-- Is the grace too tight? Per key: rows on time, late, refused; what the refused rows were worth;
-- how late the late and refused rows arrived (watermark - window_end).
SELECT key, window_start, on_time, late, refused, round(refused_share::numeric, 6) AS refused_share,
       refused_value, round(refused_value_share::numeric, 6) AS refused_value_share,
       lateness_p50, lateness_p90, lateness_p99, lateness_max
FROM eventtime.lateness('corr_daily', '2026-10-01 00:00+00', '2026-11-01 00:00+00', 'amount')
ORDER BY key->>'store';
-- Without value, no money columns.
SELECT key, on_time, late, refused, refused_value, refused_value_share
FROM eventtime.lateness('corr_daily', '2026-10-29 00:00+00', '2026-10-30 00:00+00') ORDER BY key->>'store';
-- A lateness of 2 days would have accepted every row that came after its window closed; 12 hours
-- and a microsecond the web order 9001 (a quarter of them).
SELECT eventtime.suggest_lateness('corr_daily', 1.0) AS all_rows, eventtime.suggest_lateness('corr_daily', 0.25) AS a_quarter,
       eventtime.suggest_lateness('corr_daily', 0.5, since => now() + interval '1 day') AS none_since;

-- The month-end reconciliation restates Thursday for web: version 3, 1,404, beside 1,402 and 1,403.
SELECT key, window_start, window_end, version, rows_folded
FROM eventtime.restate('corr_daily', '2026-10-29 00:00+00', key => '{"store": "web"}');
SELECT version, kind, orders, revenue, mean, smallest, biggest, sealed FROM corr_daily_history
WHERE store = 'web' ORDER BY version;
-- Nothing new to fold: nothing is written.
SELECT count(*) AS versions_written FROM eventtime.restate('corr_daily', '2026-10-29 00:00+00', key => '{"store": "web"}');
-- Then every key of October: only shop has rows left to fold.
SELECT key, window_start, version, rows_folded
FROM eventtime.restate('corr_daily', '2026-10-01 00:00+00', '2026-11-01 00:00+00');
SELECT store, event_id, restated_in FROM corr_daily_refused ORDER BY event_id;

-- Every restated value equals PostgreSQL's own aggregates over the accepted and the folded rows:
-- here every distinct order of Thursday.
SELECT l.store, l.version, l.orders = g.orders AND l.revenue = g.revenue AND l.mean = g.mean
       AND l.smallest = g.smallest AND l.biggest = g.biggest AS equals_group_by
FROM corr_daily_latest l
JOIN (SELECT store, count(*) AS orders, sum(amount) AS revenue, avg(amount) AS mean, min(amount) AS smallest,
             max(amount) AS biggest
      FROM (SELECT DISTINCT ON (order_id) * FROM corr_orders ORDER BY order_id) o GROUP BY store) g USING (store)
ORDER BY l.store;

-- The feed from the cursor kept after the main firings: exactly what came after, in order.
SELECT key, version, kind, aggregates->>'orders' AS orders FROM eventtime.changes('corr_daily', :'corr_cursor');
-- The last cursor has nothing after it.
SELECT cursor AS corr_cursor FROM eventtime.changes('corr_daily', :'corr_cursor') WITH ORDINALITY AS c ORDER BY c.ordinality DESC LIMIT 1 \gset
SELECT count(*) AS after_the_last FROM eventtime.changes('corr_daily', :'corr_cursor');

---------------------------------------------------------------------------------------------
-- Hopping windows: each window of a refused row is restated on its own.
---------------------------------------------------------------------------------------------
CREATE TABLE corr_clicks (click_id bigint, ms integer, at timestamptz);
SELECT eventtime.create_pipeline(name => 'corr_hop', source => 'corr_clicks', event_time => 'at', event_id => 'click_id',
    window_size => '2 hours', window_slide => '1 hour', aggregates => 'count(*) AS clicks, sum(ms) AS ms', max_ahead => NULL);
INSERT INTO corr_clicks VALUES (1, 10, '2026-10-29 05:30+00');
SELECT windows_fired FROM eventtime.advance_watermark('corr_hop', '2026-10-29 07:00+00');
-- Click 2 at 05:45 is refused for [04:00, 06:00) and [05:00, 07:00).
SELECT * FROM eventtime.ingest('corr_hop', '{"click_id": 2, "ms": 20, "at": "2026-10-29 05:45+00"}');
SELECT key, window_start, window_end, version, rows_folded FROM eventtime.restate('corr_hop', '2026-10-29 04:00+00', '2026-10-29 06:00+00');
SELECT window_start, version, kind, clicks, ms FROM corr_hop_latest ORDER BY window_start;
SELECT event_id, window_start, restated_in FROM corr_hop_refused ORDER BY window_start;

---------------------------------------------------------------------------------------------
-- Errors: 22023, 42703, 42804, 42704, 42501, with hints.
---------------------------------------------------------------------------------------------
SELECT pg_temp.try($$ SELECT * FROM eventtime.restate('no_such', '2026-10-29') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.restate('corr_daily', '2026-10-29', '2026-10-29') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.restate('corr_daily', '2026-10-29', key => '{"shop": "web"}') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.restate('corr_daily', '2026-10-29', key => '["web"]') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.restate('corr_daily', NULL) $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.lateness('corr_daily', '2026-11-01', '2026-10-01') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.lateness('corr_daily', '2026-10-01', '2026-11-01', 'store') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.lateness('corr_daily', '2026-10-01', '2026-11-01', 'price') $$);
SELECT pg_temp.try($$ SELECT eventtime.suggest_lateness('corr_daily', 0) $$);
SELECT pg_temp.try($$ SELECT eventtime.suggest_lateness('corr_daily', 1.5) $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.changes('corr_daily', 'yesterday') $$);
-- A cursor of another pipeline (its snapshots masked: they depend on the run).
SELECT regexp_replace(pg_temp.try(format('SELECT * FROM eventtime.changes(%L, %L)', 'corr_hop', :'corr_cursor')),
                      '"v1;[^"]*"', '"<cursor of corr_daily>"') AS try;
-- The feed returns committed versions only: not in a transaction that has written.
BEGIN;
CREATE TEMP TABLE corr_scratch (x int);
INSERT INTO corr_scratch VALUES (1);
SELECT pg_temp.try($$ SELECT * FROM eventtime.changes('corr_daily') $$);
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.try($$ SELECT * FROM eventtime.restate('corr_daily', '2026-10-29') $$);
ROLLBACK;
-- A role that is not the owner may not restate; one that may not read the views sees nothing.
CREATE ROLE regress_corr_stranger;
GRANT USAGE ON SCHEMA public TO regress_corr_stranger;
SET ROLE regress_corr_stranger;
SELECT pg_temp.try($$ SELECT * FROM eventtime.restate('corr_daily', '2026-10-29') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.lateness('corr_daily', '2026-10-01', '2026-11-01') $$);
SELECT pg_temp.try($$ SELECT * FROM eventtime.changes('corr_daily') $$);
-- Reading one view is not reading them all: the feed needs the history, the account the history
-- and the refused rows, and value a column of the source it may read.
RESET ROLE;
GRANT SELECT ON corr_daily_sealed TO regress_corr_stranger;
SET ROLE regress_corr_stranger;
SELECT pg_temp.try($$ SELECT * FROM eventtime.changes('corr_daily') $$);
RESET ROLE;
GRANT SELECT ON corr_daily_history, corr_daily_refused TO regress_corr_stranger;
SET ROLE regress_corr_stranger;
SELECT count(*) AS versions FROM eventtime.changes('corr_daily');
SELECT count(*) AS windows FROM eventtime.lateness('corr_daily', '2026-10-01', '2026-11-01');
SELECT pg_temp.try($$ SELECT * FROM eventtime.lateness('corr_daily', '2026-10-01', '2026-11-01', 'amount') $$);
RESET ROLE;
DROP OWNED BY regress_corr_stranger;
DROP ROLE regress_corr_stranger;
