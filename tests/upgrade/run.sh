#!/usr/bin/env bash
# The upgrade tier. Builds the release named in tests/upgrade/from from its commit (with
# `git archive`, into target/upgrade/src), installs it into the system's PostgreSQL, and in a
# throwaway cluster makes and feeds pipelines of every kind with it (before.sql). Then installs the
# current build, runs `ALTER EXTENSION pg_eventtime UPDATE` and goes on feeding them (after.sql).
# A second database gets the same statements on a fresh install of the current version. Passes
# when both databases publish the same results (show.sql) and hold the same extension objects
# (catalog.sql): the upgrade scripts of sql/ make what a fresh install makes, and pipelines made
# by the release keep working. Leaves the current build installed.
#   TEST_UPGRADE_PORT  port of its cluster (default 54379)
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
set -euo pipefail

here="$ROOT/tests/upgrade"
dir="$ROOT/target/upgrade"
port="${TEST_UPGRADE_PORT:-54379}"
read -r from commit < <(grep -v '^#' "$here/from")
current=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)

if ! git -C "$ROOT" cat-file -e "$commit^{commit}" 2>/dev/null; then
    echo "the release $from (commit $commit) is not in this clone's history: git fetch --unshallow, or clone without --depth"
    exit 1
fi
say "building and installing the release $from (commit ${commit:0:12})"
rm -rf "$dir/src"; mkdir -p "$dir/src"
git -C "$ROOT" archive "$commit" | tar -x -C "$dir/src"
# The same target directory as the current build, so that the dependencies are built once. Cargo
# judges the crate by its files' times, which git archive sets to the commit's: touched, so that
# an artifact of the same version built from other files is never taken for this one.
find "$dir/src" -type f -exec touch {} +
(cd "$dir/src" && as_root env "PATH=$PATH" "CARGO_TARGET_DIR=$ROOT/target" cargo pgrx install --pg-config "$PG_CONFIG" >/dev/null)
# The release's library and schema generator now sit where the current build's are copied from,
# and Cargo copies them there again only when it compiles: make it compile the current crate.
touch "$ROOT/src/lib.rs"

cluster="$dir/cluster"
stop_cluster "$cluster"
rm -rf "$cluster"
start_cluster "$cluster" "$port"
trap 'stop_cluster "$cluster"' EXIT
q() { "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -v ON_ERROR_STOP=1 "$@"; }
for db in upgraded fresh; do
    q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
done

say "pipelines made and fed by $from"
q -d upgraded -c "CREATE EXTENSION pg_eventtime VERSION '$from'" >/dev/null
q -d upgraded -f "$here/before.sql" >/dev/null

build_install debug
say "ALTER EXTENSION pg_eventtime UPDATE ($from to $current), then the same pipelines fed on"
q -d upgraded -c "ALTER EXTENSION pg_eventtime UPDATE" >/dev/null
got=$(q -d upgraded -Atc "SELECT extversion FROM pg_extension WHERE extname = 'pg_eventtime'")
[ "$got" = "$current" ] || { echo "after the update the extension is at $got, not $current"; exit 1; }
q -d upgraded -f "$here/after.sql" >/dev/null

say "the same statements on a fresh install of $current"
q -d fresh -c "CREATE EXTENSION pg_eventtime" >/dev/null
q -d fresh -f "$here/before.sql" >/dev/null
q -d fresh -f "$here/after.sql" >/dev/null

status=0
for db in upgraded fresh; do
    q -d "$db" -f "$here/show.sql" > "$dir/$db.results"
    q -d "$db" -f "$here/catalog.sql" > "$dir/$db.catalog"
done
if ! diff -u "$dir/fresh.results" "$dir/upgraded.results"; then
    echo "pipelines made by $from publish other results after the update than on a fresh install (above: - fresh, + upgraded)"
    status=1
fi
if ! diff -u "$dir/fresh.catalog" "$dir/upgraded.catalog"; then
    echo "the update from $from makes other objects than a fresh install of $current (above: - fresh, + upgraded): fix sql/pg_eventtime--$from--$current.sql"
    status=1
fi
[ "$status" -eq 0 ] && echo "upgrade from $from: same results and same objects as a fresh install of $current"
exit "$status"
