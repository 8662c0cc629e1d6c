-- Phase one of the upgrade scenario: pipelines of every kind, made and fed by the release the
-- extension is upgraded from (or, in the database it is compared with, by the current one).
-- Each gets on-time rows, a main firing, a late version, a redelivery and a refused row.
SET TimeZone = 'UTC';
SET client_min_messages = warning;
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'upgrade_owner') THEN CREATE ROLE upgrade_owner; END IF;
END $$;
GRANT CREATE ON SCHEMA public TO upgrade_owner;

-- Tumbling, keyed, with the pipeline's own ledger of event ids, owned by an ordinary role.
CREATE TABLE u_orders (order_id bigint, store text, amount numeric, at timestamptz);
ALTER TABLE u_orders OWNER TO upgrade_owner;
SET ROLE upgrade_owner;
SELECT eventtime.create_pipeline(name => 'u_daily', source => 'u_orders', event_time => 'at',
    key => ARRAY['store'], event_id => 'order_id', window_size => '1 day', allowed_lateness => '1 day',
    aggregates => 'count(*) AS orders, sum(amount) AS revenue, avg(amount) AS mean');
RESET ROLE;
-- Hopping, unkeyed.
CREATE TABLE u_clicks (at timestamptz, weight int);
SELECT eventtime.create_pipeline(name => 'u_hop', source => 'u_clicks', event_time => 'at',
    window_size => '2 hours', window_slide => '1 hour', allowed_lateness => '1 hour',
    aggregates => 'count(*) AS n, max(weight) AS heaviest');
-- Sessions.
CREATE TABLE u_visits (visitor text, at timestamptz);
SELECT eventtime.create_pipeline(name => 'u_sessions', source => 'u_visits', event_time => 'at',
    key => ARRAY['visitor'], session_gap => '30 minutes', allowed_lateness => '1 hour');
-- Calendar months in a time zone.
CREATE TABLE u_sales (region text, amount int, at timestamptz);
SELECT eventtime.create_pipeline(name => 'u_monthly', source => 'u_sales', event_time => 'at',
    key => ARRAY['region'], window_size => '1 month', time_zone => 'Europe/Berlin',
    allowed_lateness => '3 days', aggregates => 'count(*) AS n, sum(amount) AS total, min(amount) AS low');
-- Dedup by the source's unique index.
CREATE TABLE u_payments (id bigint PRIMARY KEY, store text, amount int, at timestamptz);
SELECT eventtime.create_pipeline(name => 'u_paid', source => 'u_payments', event_time => 'at',
    key => ARRAY['store'], event_id => 'id', window_size => '1 hour', allowed_lateness => '1 hour',
    aggregates => 'count(*) AS n, sum(amount) AS total');
-- Exactly-once by source offsets.
CREATE TABLE u_feed (part int, off bigint, store text, amount int, at timestamptz);
SELECT eventtime.create_pipeline(name => 'u_offsets', source => 'u_feed', event_time => 'at',
    key => ARRAY['store'], window_size => '1 hour', allowed_lateness => '1 hour',
    aggregates => 'count(*) AS n, sum(amount) AS total', offset_column => 'off', source_column => 'part');
-- A watermark that follows the rows.
CREATE TABLE u_metrics (host text, v int, at timestamptz);
SELECT eventtime.create_pipeline(name => 'u_lagged', source => 'u_metrics', event_time => 'at',
    key => ARRAY['host'], window_size => '10 minutes', allowed_lateness => '10 minutes',
    watermark_lag => '5 minutes', aggregates => 'count(*) AS n, sum(v) AS total');
-- A pipeline the second phase drops.
CREATE TABLE u_gone (at timestamptz);
SELECT eventtime.create_pipeline(name => 'u_gone', source => 'u_gone', event_time => 'at', window_size => '1 hour');

-- Rows, one statement of many and single ones.
INSERT INTO u_orders SELECT g, CASE WHEN g % 3 = 0 THEN 'web' ELSE 'shop' END, 10 + g % 7,
    timestamptz '2026-10-29 00:00+00' + g * interval '9 minutes' FROM generate_series(1, 300) g;
INSERT INTO u_orders VALUES (1000, 'web', 5, '2026-10-30 01:00+00');
INSERT INTO u_clicks SELECT timestamptz '2026-10-29 00:00+00' + g * interval '7 minutes', g % 11 FROM generate_series(1, 60) g;
INSERT INTO u_visits VALUES ('ann', '2026-10-29 10:00+00'), ('ann', '2026-10-29 10:20+00'), ('bob', '2026-10-29 10:05+00');
INSERT INTO u_visits VALUES ('ann', '2026-10-29 12:00+00');
INSERT INTO u_sales SELECT CASE WHEN g % 2 = 0 THEN 'north' ELSE 'south' END, g,
    timestamptz '2026-09-20 00:00+00' + g * interval '13 hours' FROM generate_series(1, 80) g;
INSERT INTO u_payments SELECT g, 'a', g, timestamptz '2026-10-29 00:00+00' + g * interval '1 minute' FROM generate_series(1, 150) g;
INSERT INTO u_feed SELECT g % 2, g, 'a', g, timestamptz '2026-10-29 00:00+00' + g * interval '1 minute' FROM generate_series(1, 150) g;
INSERT INTO u_metrics SELECT 'h' || g % 2, g, timestamptz '2026-10-29 00:00+00' + g * interval '1 minute' FROM generate_series(1, 40) g;

-- Main firings.
SELECT count(*) FROM eventtime.advance_watermark('u_daily', '2026-10-30 00:00+00');
SELECT count(*) FROM eventtime.advance_watermark('u_hop', '2026-10-29 05:00+00');
SELECT count(*) FROM eventtime.advance_watermark('u_sessions', '2026-10-29 11:00+00');
SELECT count(*) FROM eventtime.advance_watermark('u_monthly', '2026-10-01 00:00+02');
SELECT count(*) FROM eventtime.advance_watermark('u_paid', '2026-10-29 02:00+00');
SELECT count(*) FROM eventtime.advance_watermark('u_offsets', '2026-10-29 02:00+00');

-- Late rows (a version 2), redeliveries, and rows past the grace.
INSERT INTO u_orders VALUES (2000, 'web', 25, '2026-10-29 23:40+00');
INSERT INTO u_orders VALUES (2000, 'web', 25, '2026-10-29 23:40+00');
INSERT INTO u_clicks VALUES ('2026-10-29 04:30+00', 50);
INSERT INTO u_visits VALUES ('bob', '2026-10-29 10:30+00');
INSERT INTO u_sales VALUES ('north', 1000, '2026-09-30 23:30+02');
INSERT INTO u_payments VALUES (10, 'a', 10, '2026-10-29 00:10+00') ON CONFLICT DO NOTHING;
INSERT INTO u_payments VALUES (500, 'a', 7, '2026-10-29 01:30+00');
INSERT INTO u_feed VALUES (0, 150, 'a', 999, '2026-10-29 01:00+00'), (0, 151, 'a', 3, '2026-10-29 01:10+00');
SELECT count(*) FROM eventtime.advance_watermark('u_hop', '2026-10-29 08:00+00');
INSERT INTO u_clicks VALUES ('2026-10-29 01:30+00', 70);
