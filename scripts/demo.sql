-- The seed story, end to end: Thursday 29 October 2026 is sealed at 1,402 orders; a late order
-- within the grace makes version 2 beside it; a redelivered order changes nothing; order 8841
-- arrives after the grace and lands in the refused rows, while the sealed total stays 1,402.
\set ECHO queries
SET TimeZone = 'UTC';
CREATE EXTENSION pg_eventtime;

CREATE TABLE orders (order_id bigint, store text, amount numeric, ordered_at timestamptz);

SELECT eventtime.create_pipeline(
    name             => 'orders_daily',
    source           => 'orders',
    event_time       => 'ordered_at',
    key              => ARRAY['store'],
    event_id         => 'order_id',
    window_size      => interval '1 day',
    allowed_lateness => interval '24 hours',
    aggregates       => 'count(*) AS orders, sum(amount) AS revenue'
);

-- Thursday: 1,402 orders over the day, inserted in one COPY-sized statement.
INSERT INTO orders
SELECT g, 'web', 10 + g % 7, timestamptz '2026-10-29 00:00+00' + g * interval '61 seconds'
FROM generate_series(1, 1402) g;

-- The watermark reaches 20:00: the day is still open.
SELECT * FROM eventtime.advance_watermark('orders_daily', '2026-10-29 20:00+00');
-- Midnight: the day fires. Version 1 is sealed.
SELECT * FROM eventtime.advance_watermark('orders_daily', '2026-10-30 00:00+00');
SELECT store, window_start, version, kind, orders, revenue, sealed FROM orders_daily_history;

-- Friday noon: a Thursday order arrives late, within the 24-hour grace. Version 2 appears
-- beside version 1.
SELECT * FROM eventtime.advance_watermark('orders_daily', '2026-10-30 12:00+00');
SELECT * FROM eventtime.ingest('orders_daily',
    '{"order_id": 9001, "store": "web", "amount": 25, "ordered_at": "2026-10-29 23:40:00+00"}');
-- The broker redelivers it: a duplicate, nothing changes.
SELECT * FROM eventtime.ingest('orders_daily',
    '{"order_id": 9001, "store": "web", "amount": 25, "ordered_at": "2026-10-29 23:40:00+00"}');

-- 1 November: the grace of Thursday is over; its state is purged.
SELECT * FROM eventtime.advance_watermark('orders_daily', '2026-11-01 00:00+00');
-- Order 8841, placed Thursday 18:02, arrives now: refused, with the window and the watermark.
INSERT INTO orders VALUES (8841, 'web', 42, '2026-10-29 18:02+00');

\echo '--- every firing'
SELECT store, window_start, window_end, version, kind, orders, revenue, sealed, watermark
FROM orders_daily_history ORDER BY store, window_start, version;
\echo '--- what was published first, and never changes'
SELECT store, window_start, version, orders, revenue FROM orders_daily_sealed ORDER BY store, window_start;
\echo '--- the latest version of each day'
SELECT store, window_start, version, orders, revenue FROM orders_daily_latest ORDER BY store, window_start;
\echo '--- refused rows'
SELECT store, event_id, event_time, window_start, window_end, deadline, watermark, "row"
FROM orders_daily_refused ORDER BY event_id;
\echo '--- the pipeline'
SELECT name, watermark, open_windows, state_rows, firings, refused, duplicates FROM eventtime.pipelines;
\echo '--- the landing rule for order 8841 under three watermarks'
SELECT w AS watermark, eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', w, '24 hours') AS landing
FROM unnest(ARRAY['2026-10-29 20:00+00', '2026-10-30 12:00+00', '2026-11-01 00:00+00']::timestamptz[]) w;

-- From 1 November two Kafka partitions feed the pipeline, each with its own watermark. The job
-- that advanced the watermark so far (the source "default") hands over and is marked idle.
SELECT * FROM eventtime.advance_watermark('orders_daily', '2026-11-01 00:00+00', source => 'kafka-0');
SELECT * FROM eventtime.advance_watermark('orders_daily', '2026-11-01 00:00+00', source => 'kafka-1');
SELECT * FROM eventtime.mark_idle('orders_daily', 'default');
INSERT INTO orders VALUES (9100, 'web', 30, '2026-11-01 15:00+00'), (9101, 'north', 12, '2026-11-01 16:30+00');
-- kafka-0 is already in 2 November; kafka-1 is slow.
SELECT * FROM eventtime.advance_watermark('orders_daily', '2026-11-02 06:00+00', source => 'kafka-0');
SELECT * FROM eventtime.advance_watermark('orders_daily', '2026-11-01 20:00+00', source => 'kafka-1');
\echo '--- why has 1 November not closed? the clock to read is the slowest partition'
SELECT source, watermark, idle, idle_reason, holding_back FROM eventtime.sources
WHERE pipeline = 'orders_daily' ORDER BY source;
SELECT window_start, window_end, state, rows_in_state, watermark, landing, held_back_by
FROM eventtime.explain('orders_daily', '2026-11-01 15:00+00', 'web');
-- kafka-1 catches up: 1 November fires.
SELECT * FROM eventtime.advance_watermark('orders_daily', '2026-11-02 01:00+00', source => 'kafka-1');
SELECT store, window_start, version, kind, orders, revenue FROM orders_daily_history
WHERE window_start = '2026-11-01' ORDER BY store;
