#!/usr/bin/env bash
# Runs the whole test suite, tier by tier:
#   core      pure core (#[test]) and in-database internals (#[pg_test]), through cargo pgrx test;
#   regress   the SQL contract, as pg_regress golden files (tests/pg_regress);
#   readme    every runnable SQL example of README.md, run in order in one session, with the
#             outputs it shows compared (tests/readme);
#   property  the seeded randomized property test against an independent model (tests/property);
#   faults    concurrency, crashes, the critical interleaving, dump and restore, against servers
#             of its own with real client connections (tests/faults);
#   bench     a seconds-long smoke run of the benchmark command, to prove it works.
# Installs what is missing first, like setup.sh. Uses its own throwaway clusters under target/.
# Arguments pick tiers; no argument runs them all.
#   PROPERTY_SEED  seed of the property test (default: fixed)   TEST_PGPORT (default 54339)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PORT="${TEST_PGPORT:-54339}"
CLUSTER="$ROOT/target/test-cluster"
PGRX_DATA="$ROOT/target/pgrx-test-data"
passed=0
failed=0
TIERS="${*:-core regress readme property faults bench}"
want() { [[ " $TIERS " == *" $1 "* ]]; }

tally_cargo() { # sums "test result: ... N passed; M failed" lines of a cargo test log
    local p f
    p=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed' "$1" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
    f=$(grep -Eo '[0-9]+ failed' "$1" | awk '{s+=$1} END {print s+0}')
    passed=$((passed + p)); failed=$((failed + f))
}

ensure_deps
mkdir -p "$ROOT/target"
trap 'stop_cluster "$CLUSTER"' EXIT

if want core; then
    say "tier 1: pure core and in-database tests (cargo pgrx test)"
    mkdir -p "$PGRX_DATA"; chown postgres "$PGRX_DATA"
    log="$ROOT/target/pgrx-test.log"
    (cd "$ROOT" && cargo pgrx test pg${PG_MAJOR} --runas postgres --pgdata "$PGRX_DATA" 2>&1) | tee "$log" | grep -E '^test |test result|panicked|error' || true
    tally_cargo "$log"
    grep -q 'test result: ok' "$log" && ! grep -q 'test result: FAILED' "$log" || { echo "tier 1 failed (see $log)"; exit 1; }
fi

build_install debug
say "starting a throwaway cluster in $CLUSTER on port $PORT"
stop_cluster "$CLUSTER"
rm -rf "$CLUSTER"
start_cluster "$CLUSTER" "$PORT"

if want regress; then
    say "tier 2: SQL contract (pg_regress)"
    regress_out="$ROOT/target/regress"
    rm -rf "$regress_out"; mkdir -p "$regress_out"; chmod 777 "$regress_out"
    tests=$(cd "$ROOT/tests/pg_regress/sql" && ls *.sql | sed 's/\.sql$//' | sort)
    pg_regress="$($PG_CONFIG --pkglibdir)/pgxs/src/test/regress/pg_regress"
    # From tests/pg_regress, where each file's `\i include/setup.sql` finds the shared preamble.
    if (cd "$ROOT/tests/pg_regress" && "$pg_regress" --host=127.0.0.1 --port="$PORT" --user=postgres --dbname=eventtime_regress \
            --inputdir="$ROOT/tests/pg_regress" --outputdir="$regress_out" --bindir="$PG_BIN" $tests); then
        passed=$((passed + $(echo $tests | wc -w)))
    else
        head -300 "$regress_out/regression.diffs" 2>/dev/null || true
        exit 1
    fi
fi

if want readme; then
    say "tier 3: README examples (tests/readme)"
    if PGHOST=127.0.0.1 PGPORT="$PORT" PGUSER=postgres PSQL="$PG_BIN/psql" \
            python3 "$ROOT/tests/readme/check.py" eventtime_readme; then
        passed=$((passed + 1))
    else
        echo "tier 3 failed"; exit 1
    fi
fi

if want property; then
    say "tier 4: seeded randomized property test (tests/property)"
    log="$ROOT/target/property.log"
    (cd "$ROOT/tests/property" && PGHOST=127.0.0.1 PGPORT="$PORT" PGUSER=postgres cargo test --release 2>&1) | tee "$log" | grep -E '^test |test result|panicked|seed' || true
    tally_cargo "$log"
    grep -q 'test result: ok' "$log" && ! grep -q 'test result: FAILED' "$log" || { echo "tier 4 failed (see $log)"; exit 1; }
fi

stop_cluster "$CLUSTER"

if want faults; then
    say "tier 5: concurrency, crashes, interleaving, dump and restore (tests/faults)"
    log="$ROOT/target/faults.log"
    (cd "$ROOT/tests/faults" && FAULTS_PG_BIN="$PG_BIN" cargo test --release -- --test-threads=1 2>&1) | tee "$log" | grep -E '^test |test result|panicked|seed|retries' || true
    tally_cargo "$log"
    grep -q 'test result: ok' "$log" && ! grep -q 'test result: FAILED' "$log" || { echo "tier 5 failed (see $log)"; exit 1; }
fi

if want bench; then
    say "tier 6: benchmark smoke run (scripts/bench.sh --smoke)"
    if "$ROOT/scripts/bench.sh" --smoke; then passed=$((passed + 1)); else echo "tier 6 failed"; exit 1; fi
fi

echo
echo "all tiers: ${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
