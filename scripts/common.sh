# Shared by setup.sh, test.sh and bench scripts. Every step is idempotent: a second run checks
# and skips what is already there.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_MAJOR=15
PG_BIN="/usr/lib/postgresql/${PG_MAJOR}/bin"
PG_CONFIG=/usr/bin/pg_config
PGRX_VERSION=0.18.0
HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
export HOME
export PATH="$HOME/.cargo/bin:$PATH"

say() { printf '\n==> %s\n' "$*"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Debian packages, cargo-pgrx and pgrx's configuration.
ensure_deps() {
    local pkgs=(postgresql-${PG_MAJOR} postgresql-server-dev-${PG_MAJOR} libclang-dev clang sudo build-essential pkg-config python3)
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
    if ! grep -qs "pg${PG_MAJOR}" "$HOME/.pgrx/config.toml"; then
        say "configuring pgrx for PostgreSQL ${PG_MAJOR}"
        cargo pgrx init --pg${PG_MAJOR} "$PG_CONFIG" >/dev/null
    fi
}

# Builds the extension and installs it into the system PostgreSQL.
build_install() {
    say "building and installing pg_eventtime ($1)"
    local flags=()
    [ "$1" = release ] && flags+=(--release)
    (cd "$ROOT" && as_root env "PATH=$PATH" cargo pgrx install --pg-config "$PG_CONFIG" "${flags[@]}" >/dev/null)
}

# start_cluster DIR PORT: a cluster owned by postgres in DIR, listening on PORT on loopback and
# on a socket in DIR. Initialised once, started if not running.
start_cluster() {
    # pgrx appends a Rust backtrace to error details when RUST_BACKTRACE is set: not for users.
    unset RUST_BACKTRACE
    local dir="$1" port="$2"
    mkdir -p "$dir"
    chown postgres "$dir"
    chmod 700 "$dir"
    # postgres must reach DIR through its parents.
    local d="$dir"
    while [ "$d" != / ]; do d="$(dirname "$d")"; chmod o+x "$d" 2>/dev/null || true; done
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        runuser -u postgres -- "$PG_BIN/initdb" -D "$dir/data" -A trust -U postgres --no-instructions >/dev/null
    fi
    if ! runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
        runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
            -o "-p $port -k $dir -c listen_addresses=127.0.0.1" start >/dev/null
    fi
}

stop_cluster() {
    local dir="$1"
    if [ -f "$dir/data/PG_VERSION" ]; then
        runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
}
