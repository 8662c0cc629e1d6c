#!/usr/bin/env bash
# Installs every prerequisite, builds and installs pg_eventtime, starts a local PostgreSQL
# cluster owned by postgres in .pgdata/ and plays the demo. Safe to run again.
#   PGPORT  port of the local cluster (default 54329)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PORT="${PGPORT:-54329}"
DATA="$ROOT/.pgdata"

ensure_deps
build_install debug
say "starting PostgreSQL ${PG_MAJOR} in $DATA on port $PORT"
start_cluster "$DATA" "$PORT"
say "playing the demo (scripts/demo.sql) in database eventtime_demo"
psql -X -q -h "$DATA" -p "$PORT" -U postgres -d postgres -c "DROP DATABASE IF EXISTS eventtime_demo" -c "CREATE DATABASE eventtime_demo"
psql -X -h "$DATA" -p "$PORT" -U postgres -d eventtime_demo -v ON_ERROR_STOP=1 -f "$ROOT/scripts/demo.sql"
cat <<EOT

PostgreSQL ${PG_MAJOR} with pg_eventtime is running on port $PORT (data in $DATA).
  Connect:  psql -h 127.0.0.1 -p $PORT -U postgres eventtime_demo
  Stop:     runuser -u postgres -- $PG_BIN/pg_ctl -D $DATA/data stop
EOT
