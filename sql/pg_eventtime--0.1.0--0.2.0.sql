-- pg_eventtime 0.1.0 to 0.2.0. Run by ALTER EXTENSION pg_eventtime UPDATE, as the extension's
-- owner; the upgrade tier (tests/upgrade) checks that it leaves the objects a fresh install of
-- 0.2.0 makes.
\echo Use "ALTER EXTENSION pg_eventtime UPDATE" to load this file. \quit
