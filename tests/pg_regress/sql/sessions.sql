-- Session windows (SPEC §7): a late row that bridges two sessions that already fired forms a
-- merged session, a new window; the sessions it absorbed keep what they published and get one
-- more version, kind merged, naming it. Then the cases around it, the feed, and the errors.
\i include/setup.sql

---------------------------------------------------------------------------------------------
-- A shop's visits: a session is a user's clicks with less than 30 minutes between them.
-- Lateness is 2 hours.
---------------------------------------------------------------------------------------------
CREATE TABLE visit_clicks (click_id bigint, user_id text, cents int, at timestamptz);
SELECT eventtime.create_pipeline(name => 'visits', source => 'visit_clicks', event_time => 'at',
    key => ARRAY['user_id'], event_id => 'click_id', allowed_lateness => '2 hours',
    aggregates => 'count(*) AS clicks, sum(cents) AS cents', session_gap => '30 minutes');
SELECT name, window_kind, window_size, session_gap, allowed_lateness FROM eventtime.pipelines WHERE name = 'visits';

-- Ann clicks at 10:00 and 10:20, then at 11:00 and 11:10: two sessions, [10:00, 10:50) and
-- [11:00, 11:40). Bob clicks at 10:00 and 10:05, and at 11:20. Carl clicks at 10:00 and 10:30:
-- his windows [10:00, 10:30) and [10:30, 11:00) touch but do not overlap, so they stay two
-- sessions.
INSERT INTO visit_clicks VALUES
    (1, 'ann', 100, '2026-11-30 10:00+00'),
    (2, 'ann', 200, '2026-11-30 10:20+00'),
    (3, 'ann', 400, '2026-11-30 11:00+00'),
    (4, 'ann', 800, '2026-11-30 11:10+00'),
    (5, 'bob',  10, '2026-11-30 10:00+00'),
    (6, 'bob',  20, '2026-11-30 10:05+00'),
    (7, 'bob',  30, '2026-11-30 11:20+00'),
    (8, 'carl',  1, '2026-11-30 10:00+00'),
    (9, 'carl',  2, '2026-11-30 10:30+00');
SELECT open_windows, state_rows FROM eventtime.pipelines WHERE name = 'visits';

-- The watermark passes 11:40: every session but Bob's second fires its sealed version 1.
SELECT * FROM eventtime.advance_watermark('visits', '2026-11-30 11:45+00');
SELECT user_id, window_start, window_end, version, kind, clicks, cents, sealed FROM visits_sealed ORDER BY 1, 2;

-- Ann's click of 10:35 arrives late. Its own window [10:35, 11:05) ended before the watermark,
-- within the grace; it overlaps both of her sessions and bridges them: the merged session
-- [10:00, 11:40), already due, is written at once as its version 1, kind late. Each absorbed
-- session gets version 2, kind merged, with the values it had published and merged_into
-- naming the session that absorbed it.
SELECT window_start, window_end, state, landing, explanation FROM eventtime.explain('visits', '2026-11-30 10:35+00', 'ann');
SELECT * FROM eventtime.ingest('visits', '{"click_id": 10, "user_id": "ann", "cents": 1600, "at": "2026-11-30 10:35+00"}');
SELECT user_id, window_start, window_end, version, kind, merged_into, clicks, cents, sealed, watermark
FROM visits_history WHERE user_id = 'ann' ORDER BY window_start, window_end, version;
-- What shipped is still there; _latest shows only sessions not absorbed.
SELECT user_id, window_start, window_end, version, kind, clicks, cents FROM visits_sealed WHERE user_id = 'ann' ORDER BY 2, 3;
SELECT user_id, window_start, window_end, version, kind, clicks, cents FROM visits_latest ORDER BY 1, 2;

-- A second late click, 11:30, extends the merged session to 12:00: a new session again (it is
-- open, so it fires as main when the watermark reaches 12:00), and [10:00, 11:40) gets its
-- merged version.
SELECT window_start, window_end, landing, explanation FROM eventtime.explain('visits', '2026-11-30 11:30+00', 'ann');
SELECT * FROM eventtime.ingest('visits', '{"click_id": 11, "user_id": "ann", "cents": 3200, "at": "2026-11-30 11:30+00"}');
-- A row whose window lies inside a fired session joins it: Bob's 10:03, whose window
-- [10:03, 10:33) is inside [10:00, 10:35), writes its version 2.
SELECT window_start, window_end, landing, explanation FROM eventtime.explain('visits', '2026-11-30 10:03+00', 'bob');
SELECT * FROM eventtime.ingest('visits', '{"click_id": 12, "user_id": "bob", "cents": 40, "at": "2026-11-30 10:03+00"}');
-- Redeliveries are duplicates, whatever their event time: dedup is per key and event id.
SELECT * FROM eventtime.ingest('visits', '[{"click_id": 11, "user_id": "ann", "cents": 3200, "at": "2026-11-30 11:30+00"},
                                           {"click_id": 12, "user_id": "bob", "cents": 40, "at": "2026-11-30 10:12+00"}]');
SELECT * FROM eventtime.advance_watermark('visits', '2026-11-30 12:00+00');
SELECT user_id, window_start, window_end, version, kind, merged_into, clicks, cents
FROM visits_history ORDER BY user_id, window_start, window_end, version;
SELECT user_id, window_start, window_end, version, kind, clicks, cents FROM visits_latest ORDER BY 1, 2;

-- At 12:40, Bob's first session ([10:00, 10:35), deadline 12:35) is purged. A click of his at
-- 10:20 is still within its own window's grace ([10:20, 10:50), deadline 12:50): it overlaps
-- the purged session, which never merges again, so it forms a session of its own, already due.
SELECT * FROM eventtime.advance_watermark('visits', '2026-11-30 12:40+00');
SELECT window_start, window_end, state, landing, explanation FROM eventtime.explain('visits', '2026-11-30 10:20+00', 'bob');
SELECT * FROM eventtime.ingest('visits', '{"click_id": 13, "user_id": "bob", "cents": 80, "at": "2026-11-30 10:20+00"}');
SELECT user_id, window_start, window_end, version, kind, merged_into, clicks, cents
FROM visits_history WHERE user_id = 'bob' ORDER BY window_start, window_end, version;
-- A row past its own window's grace is refused, with its own window and the refusing watermark.
SELECT window_start, window_end, deadline, state, landing, explanation FROM eventtime.explain('visits', '2026-11-30 10:00+00', 'ann');
SELECT * FROM eventtime.ingest('visits', '{"click_id": 14, "user_id": "ann", "cents": 1, "at": "2026-11-30 10:00+00"}');
SELECT user_id, event_id, event_time, window_start, window_end, deadline, watermark FROM visits_refused;

-- The end of the input: everything fires and every state row goes.
SELECT * FROM eventtime.advance_watermark('visits', 'infinity');
SELECT user_id, window_start, window_end, version, kind, clicks, cents FROM visits_latest ORDER BY 1, 2;
SELECT open_windows, state_rows, refused, duplicates FROM eventtime.pipelines WHERE name = 'visits';

-- The feed has every version, merged ones with merged_into.
SELECT key, window_start, window_end, version, kind, merged_into FROM eventtime.changes('visits')
ORDER BY key::text, window_start, window_end, version;

---------------------------------------------------------------------------------------------
-- One statement of many rows: its sessions are computed for all its rows at once. Unkeyed, no
-- event id, three aggregates.
---------------------------------------------------------------------------------------------
CREATE TABLE session_pings (at timestamptz, v int);
SELECT eventtime.create_pipeline(name => 'bursts', source => 'session_pings', event_time => 'at',
    aggregates => 'count(*) AS n, min(v) AS lo, max(v) AS hi', session_gap => '10 seconds');
INSERT INTO session_pings SELECT '2026-11-30 00:00+00'::timestamptz + i * interval '3 seconds', i FROM generate_series(0, 9) i;
INSERT INTO session_pings SELECT '2026-11-30 00:01+00'::timestamptz + i * interval '11 seconds', i FROM generate_series(0, 2) i;
SELECT * FROM eventtime.advance_watermark('bursts', '2026-11-30 00:02+00');
SELECT window_start, window_end, version, kind, n, lo, hi FROM bursts_latest ORDER BY 1;

---------------------------------------------------------------------------------------------
-- Errors.
---------------------------------------------------------------------------------------------
SELECT pg_temp.try($$SELECT eventtime.create_pipeline(name => 'x', source => 'session_pings', event_time => 'at', session_gap => '0')$$);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline(name => 'x', source => 'session_pings', event_time => 'at', session_gap => '-1 minute')$$);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline(name => 'x', source => 'session_pings', event_time => 'at', session_gap => '1 month')$$);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline(name => 'x', source => 'session_pings', event_time => 'at', session_gap => '1 hour', window_size => '1 hour')$$);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline(name => 'x', source => 'session_pings', event_time => 'at', session_gap => '1 hour', window_slide => '1 minute')$$);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline(name => 'x', source => 'session_pings', event_time => 'at', session_gap => '1 hour', time_zone => 'Europe/Berlin')$$);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline(name => 'x', source => 'session_pings', event_time => 'at', session_gap => '1 hour', window_origin => '2026-01-01')$$);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline(name => 'x', source => 'session_pings', event_time => 'at')$$);
CREATE TABLE till_sessions (register money, at timestamptz);
SELECT pg_temp.try($$SELECT eventtime.create_pipeline(name => 'x', source => 'till_sessions', event_time => 'at', key => ARRAY['register'], session_gap => '1 hour')$$);
DROP TABLE till_sessions;
SELECT pg_temp.try($$SELECT * FROM eventtime.restate('visits', '2026-11-30')$$);
SELECT pg_temp.try($$SELECT * FROM eventtime.lateness('visits', '2026-11-30', '2026-12-01')$$);
SELECT pg_temp.try($$SELECT * FROM eventtime.suggest_lateness('visits')$$);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.try($$INSERT INTO session_pings VALUES ('2026-11-30 00:05+00', 1)$$);
ROLLBACK;
SELECT eventtime.drop_pipeline('bursts');
SELECT eventtime.drop_pipeline('visits');
DROP TABLE visit_clicks, session_pings;
