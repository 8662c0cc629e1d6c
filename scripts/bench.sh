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
# After the run it draws target/bench/ratios.svg, the ratios against their targets and floors,
# from target/bench/ratios.json (tests/bench/chart.py, with matplotlib from PyPI).
#   BENCH_PGPORT  port of the benchmark cluster (default 54349)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PORT="${BENCH_PGPORT:-54349}"
MATPLOTLIB_VERSION=3.9.4
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
rm -f "$ROOT/target/bench/ratios.json"
(cd "$ROOT/tests/bench" && BENCH_RATIOS="$ROOT/target/bench/ratios.json" PGHOST=127.0.0.1 PGPORT="$PORT" PGUSER=postgres \
    cargo run --release --quiet -- "$@")

# The chart of the run's ratios against their targets and floors (matplotlib, from PyPI, in a
# virtualenv of its own), when the run had workloads with ratios.
if [ -f "$ROOT/target/bench/ratios.json" ]; then
    ensure_venv "$ROOT/target/bench/venv"
    if ! "${VENV_PY[@]}" -c "import matplotlib" 2>/dev/null; then
        say "installing matplotlib $MATPLOTLIB_VERSION (PyPI) into target/bench/venv"
        "${VENV_PY[@]}" -m pip install -q "matplotlib==$MATPLOTLIB_VERSION"
    fi
    "${VENV_PY[@]}" "$ROOT/tests/bench/chart.py" "$ROOT/target/bench/ratios.json" "$ROOT/target/bench/ratios.svg"
fi
