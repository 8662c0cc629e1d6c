-- eventtime.landing(): the landing rule of SPEC §2 as a pure function.
\i include/setup.sql

-- The signature, with lateness defaulting to zero.
SELECT pg_get_function_arguments('eventtime.landing'::regproc) AS arguments,
       pg_get_function_result('eventtime.landing'::regproc) AS result,
       p.provolatile, p.proisstrict
FROM pg_proc p WHERE p.oid = 'eventtime.landing'::regproc;
SELECT obj_description('eventtime.landing'::regproc, 'pg_proc') IS NOT NULL AS has_comment;

-- The worked example: daily window ending 2026-10-30 00:00 UTC, 24 h lateness, order 8841 with
-- event time 2026-10-29 18:02 UTC, under three watermarks.
SELECT w AS watermark,
       eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', w, '24 hours') AS landing
FROM unnest(ARRAY['2026-10-29 20:00+00', '2026-10-30 12:00+00', '2026-11-01 00:00+00']::timestamptz[]) w
ORDER BY w;

-- Named arguments.
SELECT eventtime.landing(event_time => '2026-10-29 18:02+00', window_end => '2026-10-30 00:00+00',
                         watermark => '2026-10-30 12:00+00', allowed_lateness => '1 day') AS landing;

-- The table of SPEC §2, row by row, around one window [2026-10-29, 2026-10-30) with 24 h grace.
SELECT c.what, c.e AS event_time, c.w AS watermark,
       eventtime.landing(c.e, '2026-10-30 00:00+00', c.w, '24 hours') AS landing
FROM (VALUES
    (1, 'event at the window end belongs to the next window', timestamptz '2026-10-30 00:00+00', timestamptz '2026-10-29 12:00+00'),
    (2, 'event after the window end',                         '2026-10-30 08:00+00', '2026-10-29 12:00+00'),
    (3, 'last microsecond of the window, watermark before end', '2026-10-29 23:59:59.999999+00', '2026-10-29 23:59:59.999999+00'),
    (4, 'watermark one microsecond before end',              '2026-10-29 12:00+00', '2026-10-29 23:59:59.999999+00'),
    (5, 'watermark equal to the end: fired, within grace',   '2026-10-29 12:00+00', '2026-10-30 00:00+00'),
    (6, 'watermark one microsecond before the deadline',     '2026-10-29 12:00+00', '2026-10-30 23:59:59.999999+00'),
    (7, 'watermark equal to the deadline refuses',           '2026-10-29 12:00+00', '2026-10-31 00:00+00'),
    (8, 'watermark after the deadline',                      '2026-10-29 12:00+00', '2026-11-15 00:00+00'),
    (9, 'watermark far before the event',                    '2026-10-29 12:00+00', '2026-01-01 00:00+00')
) AS c(n, what, e, w)
ORDER BY c.n;

-- Zero lateness (the default): the grace line is the window end.
SELECT w AS watermark,
       eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', w) AS default_lateness,
       eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', w, '0') AS zero_lateness
FROM unnest(ARRAY['2026-10-29 23:59:59.999999+00', '2026-10-30 00:00+00', '2026-10-30 00:00:00.000001+00']::timestamptz[]) w
ORDER BY w;

-- Lateness in other units: days count as 24 hours, fractions of a second count.
SELECT l AS allowed_lateness,
       eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', '2026-10-31 00:00+00', l) AS at_24h
FROM unnest(ARRAY['1 day', '24 hours', '23:59:59.999999', '24:00:00.000001', '2 days', '1 week']::interval[]) l
ORDER BY l, l::text;

-- The session time zone does not matter: the same instants give the same answer.
SET TimeZone = 'America/New_York';
SELECT eventtime.landing('2026-10-29 14:02-04', '2026-10-29 20:00-04', '2026-10-30 08:00-04', '24 hours') AS new_york;
SET TimeZone = 'UTC';

-- Infinite values.
SELECT w AS watermark,
       eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', w, '24 hours') AS landing
FROM unnest(ARRAY['-infinity', 'infinity']::timestamptz[]) w
ORDER BY w;
SELECT eventtime.landing('2026-10-29 18:02+00', 'infinity', '2026-11-01 00:00+00', '24 hours') AS window_end_infinity;
SELECT eventtime.landing('infinity', '2026-10-30 00:00+00', '2026-10-29 00:00+00', '24 hours') AS event_infinity;
SELECT eventtime.landing('-infinity', '2026-10-30 00:00+00', '2026-10-29 00:00+00', '24 hours') AS event_minus_infinity;
-- A deadline beyond the timestamp range never arrives before infinity.
SELECT eventtime.landing('294276-12-30 00:00+00', '294276-12-31 00:00+00', '294276-12-31 12:00+00', '7 days') AS near_the_end;

-- The function is strict: any NULL argument gives NULL.
SELECT eventtime.landing(NULL, '2026-10-30 00:00+00', '2026-10-29 20:00+00', '24 hours') IS NULL AS null_event,
       eventtime.landing('2026-10-29 18:02+00', NULL, '2026-10-29 20:00+00', '24 hours') IS NULL AS null_end,
       eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', NULL, '24 hours') IS NULL AS null_watermark,
       eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', '2026-10-29 20:00+00', NULL) IS NULL AS null_lateness;

-- Errors: a negative or month-based lateness.
SELECT pg_temp.try($$ SELECT eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', '2026-10-29 20:00+00', '-1 hour') $$);
SELECT pg_temp.try($$ SELECT eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', '2026-10-29 20:00+00', '-00:00:00.000001') $$);
SELECT pg_temp.try($$ SELECT eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', '2026-10-29 20:00+00', '1 mon') $$);
SELECT pg_temp.try($$ SELECT eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', '2026-10-29 20:00+00', '1 year') $$);
SELECT pg_temp.try($$ SELECT eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', '2026-10-29 20:00+00', '1 mon -30 days') $$);
-- A lateness of mixed signs that totals zero or more is a duration.
SELECT eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', '2026-10-30 12:00+00', '1 day -1 hour') AS mixed_signs;
-- The same errors as psql shows them.
SELECT eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', '2026-10-29 20:00+00', '-1 hour');
SELECT eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', '2026-10-29 20:00+00', '1 mon');
