-- What the pipelines of the scenario published, without the columns that depend on the clock.
SET TimeZone = 'UTC';
\pset footer off
SELECT name, watermark, open_windows, firings, refused, duplicates FROM eventtime.pipelines ORDER BY name;
SELECT pipeline, source, watermark, "offset" FROM eventtime.sources ORDER BY 1, 2;
SELECT store, window_start, version, kind, orders, revenue, round(mean, 6) AS mean, sealed, watermark FROM u_daily_history ORDER BY 1, 2, 3;
SELECT store, event_id, event_time, window_start, deadline, watermark, restated_in, "row" FROM u_daily_refused ORDER BY 2, 4;
SELECT window_start, window_end, version, kind, n, heaviest, watermark FROM u_hop_history ORDER BY 1, 3;
SELECT event_time, window_start, watermark FROM u_hop_refused ORDER BY 1, 2;
SELECT visitor, window_start, window_end, version, kind, merged_into, events FROM u_sessions_history ORDER BY 1, 2, 3, 4;
SELECT visitor, event_time, window_start, window_end FROM u_sessions_refused ORDER BY 1, 2;
SELECT region, window_start, version, kind, n, total, low FROM u_monthly_history ORDER BY 1, 2, 3;
SELECT region, event_time, window_start FROM u_monthly_refused ORDER BY 1, 2;
SELECT store, window_start, version, kind, n, total FROM u_paid_history ORDER BY 1, 2, 3;
SELECT store, event_id, event_time, window_start FROM u_paid_refused ORDER BY 2;
SELECT store, window_start, version, kind, n, total FROM u_offsets_history ORDER BY 1, 2, 3;
SELECT host, window_start, version, kind, n, total, watermark FROM u_lagged_history ORDER BY 1, 2, 3;
SELECT host, event_time, window_start FROM u_lagged_refused ORDER BY 1, 2;
SELECT store, window_start, version, orders FROM u_daily_latest ORDER BY 1, 2;
SELECT window_start, window_end, state, watermark, landing, provisional FROM eventtime.explain('u_daily', '2026-10-31 10:00+00', 'web');
SELECT window_start, state, provisional FROM eventtime.explain('u_daily', '2026-11-01 10:00+00', 'web');
SELECT store, window_start, window_end, orders, revenue, round(mean, 6) AS mean, watermark FROM u_daily_provisional ORDER BY 1, 2;
SELECT window_start, window_end, n, heaviest FROM u_hop_provisional ORDER BY 1, 2;
SELECT visitor, window_start, window_end, events FROM u_sessions_provisional ORDER BY 1, 2;
SELECT region, window_start, version, kind, n, total, low, sealed, provisional FROM u_monthly_current ORDER BY 1, 2, 3;
SELECT host, window_start, version, kind, n, total, provisional FROM u_lagged_current ORDER BY 1, 2, 3;
SELECT store, window_start, version, kind, n, total, provisional FROM u_paid_current ORDER BY 1, 2, 3;
SELECT store, window_start, version, kind, n, total, provisional FROM u_offsets_current ORDER BY 1, 2, 3;
SELECT c.relname, pg_get_userbyid(c.relowner) AS owner, obj_description(c.oid, 'pg_class') AS comment
FROM pg_class c WHERE c.relname LIKE 'u\_%\_provisional' OR c.relname LIKE 'u\_%\_current' ORDER BY 1;
SELECT count(*) AS views_left FROM pg_class WHERE relname LIKE 'u\_gone%' AND relkind = 'v';
