-- Phase two: the same pipelines, run by the current version, go on: late rows into windows that
-- fired before, rows past the grace, new windows, advances that purge, and a restatement.
SET TimeZone = 'UTC';
SET client_min_messages = warning;
SET ROLE upgrade_owner;
INSERT INTO u_orders VALUES (3000, 'shop', 8, '2026-10-29 22:00+00'), (3001, 'web', 9, '2026-10-30 02:00+00');
INSERT INTO u_orders VALUES (2000, 'web', 25, '2026-10-29 23:40+00');
SELECT count(*) FROM eventtime.advance_watermark('u_daily', '2026-10-31 00:00+00');
INSERT INTO u_orders VALUES (3002, 'web', 30, '2026-10-29 12:00+00');
SELECT count(*) FROM eventtime.advance_watermark('u_daily', '2026-11-01 00:00+00');
SELECT count(*) FROM eventtime.restate('u_daily', '2026-10-29 00:00+00');
RESET ROLE;
INSERT INTO u_clicks VALUES ('2026-10-29 06:30+00', 3), ('2026-10-29 09:30+00', 4);
SELECT count(*) FROM eventtime.advance_watermark('u_hop', '2026-10-29 12:00+00');
INSERT INTO u_visits VALUES ('bob', '2026-10-29 10:50+00'), ('ann', '2026-10-29 12:10+00');
SELECT count(*) FROM eventtime.advance_watermark('u_sessions', '2026-10-29 14:00+00');
INSERT INTO u_visits VALUES ('ann', '2026-10-29 09:00+00');
INSERT INTO u_sales VALUES ('south', 2000, '2026-10-02 10:00+02'), ('south', 3000, '2026-09-15 10:00+02');
SELECT count(*) FROM eventtime.advance_watermark('u_monthly', '2026-11-01 00:00+01');
INSERT INTO u_payments VALUES (600, 'a', 1, '2026-10-29 01:50+00'), (20, 'a', 20, '2026-10-29 00:20+00') ON CONFLICT DO NOTHING;
SELECT count(*) FROM eventtime.advance_watermark('u_paid', '2026-10-29 05:00+00');
INSERT INTO u_feed VALUES (1, 149, 'a', 999, '2026-10-29 02:00+00'), (1, 153, 'a', 4, '2026-10-29 02:10+00');
SELECT count(*) FROM eventtime.advance_watermark('u_offsets', '2026-10-29 05:00+00');
INSERT INTO u_metrics SELECT 'h' || g % 2, g, timestamptz '2026-10-29 00:40+00' + g * interval '1 minute' FROM generate_series(1, 30) g;
INSERT INTO u_metrics VALUES ('h0', 100, '2026-10-29 00:01+00');
-- Rows in open windows, which the provisional views show, and a pipeline of phase one dropped
-- with all its views.
INSERT INTO u_orders VALUES (4000, 'web', 11, '2026-11-01 09:00+00'), (4001, 'web', 12, '2026-11-01 10:00+00');
INSERT INTO u_clicks VALUES ('2026-10-29 13:10+00', 9);
INSERT INTO u_visits VALUES ('cy', '2026-10-29 15:00+00');
SELECT eventtime.drop_pipeline('u_gone');
