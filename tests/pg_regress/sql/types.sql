-- Types from other schemas, domains and enums: the pipeline resolves them when it is created, so
-- ingest and advances work whatever the search_path of the session that runs them.
\i include/setup.sql
CREATE SCHEMA ty_app;
CREATE TYPE ty_app.mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN ty_app.price AS numeric(12,2) CHECK (VALUE >= 0);
SET search_path = ty_app, public;
CREATE TABLE ty_app.ev (id int, m mood, amt price, at timestamptz);
SELECT eventtime.create_pipeline('ty', 'ev', 'at', '1 hour', key => ARRAY['m'],
    aggregates => 'count(*) AS n, min(m) AS lo, max(amt) AS hi, sum(amt) AS total, avg(amt) AS mean');
-- Another session search_path: nothing of the pipeline depends on it.
SET search_path = public;
INSERT INTO ty_app.ev VALUES (1, 'ok', 10, '2026-01-01 00:10+00'), (2, 'sad', 12.5, '2026-01-01 00:20+00'),
                             (3, 'ok', 7.25, '2026-01-01 00:30+00'), (4, NULL, 1, '2026-01-01 00:40+00');
SELECT windows_fired FROM eventtime.advance_watermark('ty', '2026-01-01 01:00+00');
SELECT m, n, lo, hi, total, mean FROM ty_app.ty_history ORDER BY m NULLS LAST;
-- The same values as PostgreSQL's own GROUP BY.
SELECT m, count(*) AS n, min(m) AS lo, max(amt) AS hi, sum(amt) AS total, avg(amt) AS mean
FROM ty_app.ev GROUP BY m ORDER BY m NULLS LAST;
SELECT column_name, data_type, udt_schema, udt_name FROM information_schema.columns
WHERE table_schema = 'ty_app' AND table_name = 'ty_history' AND column_name IN ('m', 'lo', 'hi', 'total', 'mean')
ORDER BY ordinal_position;
SELECT eventtime.drop_pipeline('ty');
DROP SCHEMA ty_app CASCADE;
RESET search_path;
