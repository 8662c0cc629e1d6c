#!/usr/bin/env bash
# Runs the benchmark of SPEC §6 (tests/bench): each workload with and without a pipeline in the
# same run, alternating, and prints a markdown table of medians and ratios against the targets.
# Builds and installs the extension in release mode, and uses its own cluster under target/.
# A missed target is reported, not failed; the run fails on errors, on state rows left after the
# watermark passed every deadline, on a floor side that wrote other state than the pipeline, on a
# fingerprint that differs between the sides, on a writer that waited for another's transaction
# (h), on a read of one window or one day that scans the whole history (i), and on a backend that
# peaks at 512 MB or more in a COPY of 2,000,000 rows of 1,000,000 keys (m).
#   ./scripts/bench.sh                 full sizes, 3 runs per side (several minutes)
#   ./scripts/bench.sh --smoke         tiny sizes, 1 run: proves the command works (seconds)
#   ./scripts/bench.sh --runs 5 --only a,b    other arguments go to the client (tests/bench)
#   ./scripts/bench.sh --async-commit  synchronous_commit=off in the session: commits stop waiting
#                                      for the disk, whose flushes blur (b) and (d) on a busy machine
#   BENCH_PGPORT  port of the benchmark cluster (default 54349)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PORT="${BENCH_PGPORT:-54349}"
CLUSTER="$ROOT/target/bench-cluster"

ensure_deps
build_install release
mkdir -p "$ROOT/target"
trap 'stop_cluster "$CLUSTER"' EXIT
say "starting the benchmark cluster in $CLUSTER on port $PORT"
# A running cluster left by an interrupted run is restarted, so that every run starts alike.
stop_cluster "$CLUSTER"
start_cluster "$CLUSTER" "$PORT"
say "running the benchmark (tests/bench) $*"
cd "$ROOT/tests/bench"
PGHOST=127.0.0.1 PGPORT="$PORT" PGUSER=postgres cargo run --release --quiet -- "$@"
