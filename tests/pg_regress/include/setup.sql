\set ECHO none
-- Included by every file of tests/pg_regress/sql with `\i include/setup.sql` (scripts/test.sh runs
-- pg_regress from tests/pg_regress). Each file runs in a session of its own, so each needs these
-- settings and the helper; the file itself is not echoed into the results.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO';
SET IntervalStyle = 'postgres';
\set VERBOSITY default
\set SHOW_CONTEXT never
-- The database is shared by all files of a run; any of them may come first.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_eventtime;
RESET client_min_messages;

-- try(sql): 'ok', or the error as SQLSTATE: message, DETAIL and HINT.
CREATE FUNCTION pg_temp.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    DECLARE d text; h text;
    BEGIN
        GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
        RETURN SQLSTATE || ': ' || SQLERRM
            || coalesce(E'\nDETAIL: ' || nullif(d, ''), '')
            || coalesce(E'\nHINT: ' || nullif(h, ''), '');
    END;
END $$;
\set ECHO all
