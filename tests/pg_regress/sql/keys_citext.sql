-- Session keys compare as GROUP BY compares them: with their type's equality and their column's
-- collation, whatever the search_path: a citext user is one key whatever the case (the core tier
-- checks a case-insensitive collation, which needs ICU). Of two rows with one event id in a
-- statement, the first is kept. A file of its own: PostgreSQL 16's tier has no citext.
\i include/setup.sql

CREATE EXTENSION IF NOT EXISTS citext;
CREATE TABLE ci_clicks (click_id bigint, user_id citext, at timestamptz);
SELECT eventtime.create_pipeline(name => 'ci_visits', source => 'ci_clicks', event_time => 'at',
    key => ARRAY['user_id'], event_id => 'click_id', session_gap => '30 minutes');
INSERT INTO ci_clicks VALUES (1, 'Ann', '2026-11-30 10:00+00');
INSERT INTO ci_clicks VALUES (2, 'ann', '2026-11-30 10:10+00');
INSERT INTO ci_clicks VALUES (3, 'ANN', '2026-11-30 10:20+00'), (3, 'ann', '2026-11-30 09:00+00');
SELECT * FROM eventtime.advance_watermark('ci_visits', 'infinity');
SELECT lower(user_id::text) AS user_id, window_start, window_end, version, kind, events FROM ci_visits_latest;
SELECT eventtime.drop_pipeline('ci_visits');
DROP TABLE ci_clicks;

