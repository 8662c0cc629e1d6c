#!/usr/bin/env bash
# The package tier. For each PostgreSQL major given (default: 15 16 18), the installable archive
# of scripts/package.sh is installed and used the way its INSTALL.md says:
#   - the archive is built with scripts/package.sh, or taken from target/package when it is newer
#     than every file it is made from (PACKAGE_REBUILD=1 builds it again anyway);
#   - extracted into a temporary folder, it holds the control file, the install script of the
#     version of Cargo.toml, every upgrade script of sql/, the library, INSTALL.md, install.sh and
#     a META.json that parses and names that version and that major;
#   - its install.sh refuses a pg_config of another major version and writes nothing, then
#     installs the files into the directories of that major's pg_config (15: the system's, whose
#     build installed before it replaces; 16 and 18: the wheels' under target/pg<N>);
#   - in a fresh cluster (target/package/cluster-pg<N>, port TEST_PACKAGE_PORT_BASE + N % 10,
#     default 5438<N % 10>) scripts/demo.sql plays with ON_ERROR_STOP and shows its published
#     results (Thursday sealed at 1,402 orders, version 2 at 1,403, order 8841 refused), the
#     extension is at Cargo.toml's version and its upgrade path from each earlier version is
#     known. The cluster is then stopped and removed.
# Prints one line per major passed; exits non-zero with the reason at the first failure. Leaves
# the archive's build installed.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
set -euo pipefail

MAJORS="${*:-15 16 18}"
OUT="$ROOT/target/package"
PORT_BASE="${TEST_PACKAGE_PORT_BASE:-54380}"
NAME=$(sed -n 's/^name = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)
cluster=""      # the cluster of the major under test, stopped and removed on exit
cluster_bin=""
scratch=""      # the temporary folder of the major under test, removed on exit

# fail MESSAGE: the reason of a failure, on stderr; exits non-zero.
fail() { echo "package tier failed: $*" >&2; exit 1; }

# cleanup: stops and removes the cluster and the temporary folder of the major under test; keeps
# the server's log beside the archive.
cleanup() {
    if [ -n "$cluster" ]; then
        stop_cluster "$cluster" "$cluster_bin"
        [ ! -f "$cluster/server.log" ] || cp "$cluster/server.log" "$OUT/${cluster##*/}.server.log"
        rm -rf "$cluster"
    fi
    [ -z "$scratch" ] || rm -rf "$scratch"
    cluster=""; scratch=""
}
trap cleanup EXIT

# stale ARCHIVE: true when ARCHIVE is missing or older than a file it is made from.
stale() {
    [ -f "$1" ] || return 0
    [ -n "$(find "$ROOT/Cargo.toml" "$ROOT/Cargo.lock" "$ROOT/$NAME.control" "$ROOT/src" "$ROOT/sql" \
        "$ROOT/packaging" "$ROOT/scripts/package.sh" "$ROOT/scripts/common.sh" -newer "$1" -print -quit)" ]
}

# port_free PORT: true when nothing listens on PORT on loopback.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# section FILE TITLE: the rows of the demo's output after its `\echo '--- TITLE'`, up to the next
# one, with the blanks around the column separators taken out.
section() {
    awk -v title="--- $2" '$0 == title { on = 1; next } /^--- / { on = 0 } on' "$1" \
        | grep '|' | sed 's/^ *//; s/ *| */|/g; s/ *$//'
}

# expect_row FILE TITLE PREFIX: the section TITLE of the demo's output has a row starting PREFIX.
expect_row() {
    section "$1" "$2" | grep -qF -- "$3" || fail "the demo's \"$2\" shows no row $3 (see $1)"
}

# check_major N: the archive for PostgreSQL N, installed and used.
check_major() {
    local major="$1" pg_config bin started=$SECONDS
    if [ "$major" = "$PG_MAJOR" ]; then
        pg_config="$PG_CONFIG"; bin="$PG_BIN"
    else
        ensure_wheel_pg "$major"
        pg_config="$WPG_CONFIG"; bin="$WPG_BIN"
    fi
    local base archive
    base="$NAME-$VERSION-pg$major-$(uname -s | tr '[:upper:]' '[:lower:]')-$(uname -m)"
    archive="$OUT/$base.tar.gz"
    if [ -n "${PACKAGE_REBUILD:-}" ] || stale "$archive"; then
        say "PostgreSQL $major: building the archive (scripts/package.sh $major)"
        "$ROOT/scripts/package.sh" "$major" >"$OUT/package-pg$major.log" 2>&1 \
            || { tail -30 "$OUT/package-pg$major.log"; fail "scripts/package.sh $major failed (see $OUT/package-pg$major.log)"; }
    else
        say "PostgreSQL $major: reusing $archive, newer than its sources"
    fi
    [ -f "$archive" ] || fail "scripts/package.sh $major made no $archive"

    mkdir -p "$OUT"
    scratch="$(mktemp -d "$OUT/check-pg$major.XXXXXX")"
    tar -xzf "$archive" -C "$scratch" || fail "$archive does not extract"
    local dir="$scratch/$base" f
    [ -d "$dir" ] || fail "$archive has no folder $base"
    local need=(INSTALL.md META.json install.sh "lib/$NAME.so" "share/extension/$NAME.control" "share/extension/$NAME--$VERSION.sql")
    for f in "$ROOT"/sql/"$NAME"--*--*.sql; do
        [ -e "$f" ] && need+=("share/extension/$(basename "$f")")
    done
    for f in "${need[@]}"; do
        [ -f "$dir/$f" ] || fail "$archive lacks $base/$f"
    done
    [ -x "$dir/install.sh" ] || fail "$base/install.sh is not executable"

    python3 -m json.tool "$dir/META.json" >/dev/null || fail "$base/META.json does not parse"
    python3 - "$dir/META.json" "$NAME" "$VERSION" "$major" <<'EOF' || fail "$base/META.json is not the META.json of $NAME $VERSION for PostgreSQL $major"
import json, sys
path, name, version, major = sys.argv[1:]
meta = json.load(open(path))
problems = []
for key in ("name", "abstract", "version", "maintainer", "license", "provides", "meta-spec"):
    if not meta.get(key):
        problems.append(f"no {key}")
if meta.get("name") != name: problems.append(f"name {meta.get('name')!r}")
if meta.get("version") != version: problems.append(f"version {meta.get('version')!r}")
provided = meta.get("provides", {}).get(name, {})
if provided.get("version") != version: problems.append(f"provides {name} version {provided.get('version')!r}")
if provided.get("file") != f"share/extension/{name}--{version}.sql": problems.append(f"provides {name} file {provided.get('file')!r}")
requires = meta.get("prereqs", {}).get("runtime", {}).get("requires", {}).get("PostgreSQL", "")
if requires != f">= {major}.0.0, < {int(major) + 1}.0.0": problems.append(f"requires PostgreSQL {requires!r}")
if meta.get("meta-spec", {}).get("version") != "1.0.0": problems.append("meta-spec is not 1.0.0")
for p in problems:
    print(f"META.json: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
EOF

    # install.sh refuses a pg_config of another major, and writes nothing where it would point.
    local other=$((major == 99 ? 98 : 99)) fake="$scratch/other-pg_config"
    printf '#!/bin/sh\ncase "$1" in\n  --version) echo "PostgreSQL %s.1" ;;\n  --sharedir) echo "%s/other/share" ;;\n  --pkglibdir) echo "%s/other/lib" ;;\nesac\n' \
        "$other" "$scratch" "$scratch" >"$fake"
    chmod 755 "$fake"
    if "$dir/install.sh" "$fake" >"$scratch/refused.out" 2>&1; then
        fail "$base/install.sh accepted a pg_config of PostgreSQL $other"
    fi
    grep -q "for PostgreSQL $major" "$scratch/refused.out" \
        || fail "$base/install.sh refused PostgreSQL $other without saying why: $(cat "$scratch/refused.out")"
    [ ! -e "$scratch/other" ] || fail "$base/install.sh wrote files for PostgreSQL $other though it refused"

    say "PostgreSQL $major: $base/install.sh $pg_config"
    as_root "$dir/install.sh" "$pg_config" >"$OUT/install-pg$major.log" 2>&1 \
        || { cat "$OUT/install-pg$major.log"; fail "$base/install.sh $pg_config failed"; }
    local sharedir pkglibdir
    sharedir="$("$pg_config" --sharedir)"; pkglibdir="$("$pg_config" --pkglibdir)"
    for f in "$dir"/share/extension/*; do
        cmp -s "$f" "$sharedir/extension/$(basename "$f")" || fail "install.sh did not install $sharedir/extension/$(basename "$f")"
    done
    cmp -s "$dir/lib/$NAME.so" "$pkglibdir/$NAME.so" || fail "install.sh did not install $pkglibdir/$NAME.so"

    local port=$((PORT_BASE + major % 10))
    cluster="$OUT/cluster-pg$major"; cluster_bin="$bin"
    stop_cluster "$cluster" "$bin"
    rm -rf "$cluster"
    port_free "$port" || fail "port $port is taken: set TEST_PACKAGE_PORT_BASE (the cluster of PostgreSQL $major listens on it + $((major % 10)))"
    say "PostgreSQL $major: a fresh cluster in $cluster on port $port plays scripts/demo.sql"
    start_cluster "$cluster" "$port" "$bin"
    local psql=("$bin/psql" -X -h 127.0.0.1 -p "$port" -U postgres -v ON_ERROR_STOP=1)
    "${psql[@]}" -q -d postgres -c "CREATE DATABASE eventtime_demo" >/dev/null || fail "CREATE DATABASE failed on PostgreSQL $major"
    local demo="$OUT/demo-pg$major.out"
    "${psql[@]}" -d eventtime_demo -f "$ROOT/scripts/demo.sql" >"$demo" 2>&1 \
        || { tail -20 "$demo"; fail "scripts/demo.sql failed on PostgreSQL $major (see $demo)"; }
    expect_row "$demo" "what was published first, and never changes" "web|2026-10-29 00:00:00+00|1|1402|18223"
    expect_row "$demo" "the latest version of each day" "web|2026-10-29 00:00:00+00|2|1403|18248"
    expect_row "$demo" "refused rows" "web|8841|2026-10-29 18:02:00+00|2026-10-29 00:00:00+00|2026-10-30 00:00:00+00|2026-10-31 00:00:00+00|2026-11-01 00:00:00+00|"

    local got
    got="$("${psql[@]}" -d eventtime_demo -Atc "SELECT extversion FROM pg_extension WHERE extname = '$NAME'")"
    [ "$got" = "$VERSION" ] || fail "on PostgreSQL $major the extension is at '$got', not Cargo.toml's $VERSION"
    for f in "$dir"/share/extension/"$NAME"--*--*.sql; do
        [ -e "$f" ] || continue
        local from="${f##*/$NAME--}"; from="${from%%--*}"
        got="$("${psql[@]}" -d eventtime_demo -Atc \
            "SELECT path FROM pg_extension_update_paths('$NAME') WHERE source = '$from' AND target = '$VERSION'")"
        [ -n "$got" ] || fail "on PostgreSQL $major there is no update path from $from to $VERSION"
    done

    cleanup
    echo "package pg$major: passed ($base.tar.gz installed with its install.sh; demo: sealed 1402, version 2 at 1403, order 8841 refused; extversion $VERSION; META.json $VERSION; $((SECONDS - started)) s)"
}

ensure_deps
mkdir -p "$OUT"
for major in $MAJORS; do
    [[ "$major" =~ ^[0-9]+$ ]] || { echo "usage: $0 [MAJOR...]   (PostgreSQL majors, e.g. 15 16 18)" >&2; exit 2; }
    check_major "$major"
done
