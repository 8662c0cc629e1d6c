-- The worked example of SPEC §2 inside a pipeline: 29 October 2026 is sealed at 1,402
-- orders; a late order within the 24-hour grace writes version 2 beside it; redeliveries are
-- duplicates; order 8841 arrives after the grace and lands in the refused rows, while the
-- sealed total stays 1,402.
\i include/setup.sql
CREATE SCHEMA seed;
SET search_path = seed, public;

CREATE TABLE orders (order_id bigint, store text, amount numeric, ordered_at timestamptz);

SELECT eventtime.create_pipeline(
    name             => 'seed_orders_daily',
    source           => 'orders',
    event_time       => 'ordered_at',
    key              => ARRAY['store'],
    event_id         => 'order_id',
    window_size      => interval '1 day',
    allowed_lateness => interval '24 hours',
    aggregates       => 'count(*) AS orders, sum(amount) AS revenue'
);
SELECT name, watermark, open_windows, state_rows, firings, refused, duplicates
FROM eventtime.pipelines WHERE name = 'seed_orders_daily';

-- 29 October: 1,402 orders over the day, in one statement. Order ids 1..1402.
INSERT INTO orders
SELECT g, 'web', 10 + g % 7, timestamptz '2026-10-29 00:00+00' + g * interval '61 seconds'
FROM generate_series(1, 1402) g;
SELECT count(*) AS orders, sum(amount) AS revenue, min(ordered_at) AS first, max(ordered_at) AS last FROM orders;
SELECT name, watermark, open_windows, state_rows, firings, refused, duplicates
FROM eventtime.pipelines WHERE name = 'seed_orders_daily';

-- Watermark 2026-10-29 20:00: the day is still open; nothing fires.
SELECT * FROM eventtime.advance_watermark('seed_orders_daily', '2026-10-29 20:00+00');
SELECT count(*) AS firings FROM seed_orders_daily_history;

-- Midnight: the day fires. Version 1 is sealed.
SELECT * FROM eventtime.advance_watermark('seed_orders_daily', '2026-10-30 00:00+00');
SELECT store, window_start, window_end, version, kind, orders, revenue, sealed, watermark, fired_at IS NOT NULL AS fired
FROM seed_orders_daily_history ORDER BY store, window_start, version;

-- 30 October noon: an order of the 29th arrives late, within the grace. Version 2 appears
-- beside version 1.
SELECT * FROM eventtime.advance_watermark('seed_orders_daily', '2026-10-30 12:00+00');
SELECT * FROM eventtime.ingest('seed_orders_daily',
    '{"order_id": 9001, "store": "web", "amount": 25, "ordered_at": "2026-10-29 23:40:00+00"}');
SELECT store, window_start, version, kind, orders, revenue, sealed, watermark
FROM seed_orders_daily_history ORDER BY store, window_start, version;
SELECT store, window_start, version, kind, orders, revenue FROM seed_orders_daily_latest ORDER BY store, window_start;
SELECT store, window_start, version, kind, orders, revenue FROM seed_orders_daily_sealed ORDER BY store, window_start;

-- The broker redelivers order 9001, and an order of the main firing: duplicates, nothing changes.
SELECT * FROM eventtime.ingest('seed_orders_daily',
    '{"order_id": 9001, "store": "web", "amount": 25, "ordered_at": "2026-10-29 23:40:00+00"}');
INSERT INTO orders VALUES (17, 'web', 13, '2026-10-29 00:17:17+00');
SELECT store, window_start, version, orders, revenue FROM seed_orders_daily_history ORDER BY store, window_start, version;

-- 1 November: the grace of the 29th is over; its state is purged.
SELECT * FROM eventtime.advance_watermark('seed_orders_daily', '2026-11-01 00:00+00');
SELECT name, watermark, open_windows, state_rows FROM eventtime.pipelines WHERE name = 'seed_orders_daily';

-- Order 8841, placed on the 29th at 18:02, arrives now: refused, with the window it missed and
-- the watermark that refused it.
INSERT INTO orders VALUES (8841, 'web', 42, '2026-10-29 18:02+00');
SELECT store, event_id, event_time, window_start, window_end, deadline, watermark, "row", refused_at IS NOT NULL AS refused
FROM seed_orders_daily_refused ORDER BY event_id;
-- Its redelivery is a duplicate: still one refused row.
SELECT * FROM eventtime.ingest('seed_orders_daily',
    '{"order_id": 8841, "store": "web", "amount": 42, "ordered_at": "2026-10-29 18:02:00+00"}');
SELECT count(*) AS refused_rows FROM seed_orders_daily_refused;

-- The published numbers: version 1 is still 1,402; the latest is version 2.
SELECT store, window_start, window_end, version, kind, orders, revenue, sealed, watermark
FROM seed_orders_daily_history ORDER BY store, window_start, version;
SELECT store, window_start, version, orders, revenue FROM seed_orders_daily_sealed ORDER BY store, window_start;
SELECT store, window_start, version, orders, revenue FROM seed_orders_daily_latest ORDER BY store, window_start;
-- The latest version equals the aggregates over the accepted rows (all rows but 8841 and the
-- redeliveries).
SELECT store, count(*) AS orders, sum(amount) AS revenue
FROM (SELECT DISTINCT ON (order_id) * FROM orders WHERE order_id <> 8841 ORDER BY order_id) accepted
GROUP BY store ORDER BY store;
-- The source table keeps every row it was given: 1,402 + 9001 twice + 17 again + 8841 twice.
SELECT count(*) AS source_rows, count(DISTINCT order_id) AS distinct_orders FROM orders;

SELECT name, watermark, open_windows, state_rows, firings, refused, duplicates
FROM eventtime.pipelines WHERE name = 'seed_orders_daily';

-- The landing rule for order 8841 under the three watermarks of the story.
SELECT w AS watermark,
       eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', w, '24 hours') AS landing
FROM unnest(ARRAY['2026-10-29 20:00+00', '2026-10-30 12:00+00', '2026-11-01 00:00+00']::timestamptz[]) w
ORDER BY w;

SELECT eventtime.drop_pipeline('seed_orders_daily');
DROP SCHEMA seed CASCADE;
RESET search_path;
