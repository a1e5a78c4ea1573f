#!/bin/bash
# The official postgres image's entrypoint, in short. On an empty $PGDATA: initdb with POSTGRES_USER and
# POSTGRES_PASSWORD (scram-sha-256 for connections over TCP, trust on the local socket), then a server on the
# socket only, so health checks over TCP fail until setup is done; POSTGRES_DB created; every *.sql and *.sh in
# /docker-entrypoint-initdb.d run in name order; that server stopped. Then the server itself, as postgres.
set -Eeuo pipefail

if [ "${1:0:1}" = '-' ]; then set -- postgres "$@"; fi

if [ "$1" = postgres ] && [ "$(id -u)" = 0 ]; then
  # A fresh named volume is root's.
  mkdir -p "$PGDATA"
  chown -R postgres:postgres "$PGDATA"
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$BASH_SOURCE" "$@"
fi

if [ "$1" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_USER:=postgres}"
  : "${POSTGRES_DB:=$POSTGRES_USER}"
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "docker-entrypoint.sh: POSTGRES_PASSWORD is not set (the official image refuses to start too)" >&2
    exit 1
  fi
  initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") \
    --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  printf 'host all all all scram-sha-256\n' >> "$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/var/run/postgresql -p 5432" \
    -w start >/dev/null
  export PGUSER="$POSTGRES_USER" PGHOST=/var/run/postgresql
  if [ "$POSTGRES_DB" != postgres ]; then
    psql -v ON_ERROR_STOP=1 --dbname=postgres --quiet --no-psqlrc \
      -c "CREATE DATABASE \"$POSTGRES_DB\"" >/dev/null
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sql) echo "docker-entrypoint.sh: running $f"; psql -v ON_ERROR_STOP=1 --dbname="$POSTGRES_DB" --no-psqlrc -f "$f" ;;
      *.sh) echo "docker-entrypoint.sh: running $f"; . "$f" ;;
      *) if [ -e "$f" ]; then echo "docker-entrypoint.sh: ignoring $f"; fi ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  unset PGUSER PGHOST
  echo "docker-entrypoint.sh: PostgreSQL init process complete; ready for start up."
fi

if [ "$1" = postgres ]; then
  shift
  # The official build's socket directory; the npm package's binaries were built with /tmp.
  exec postgres -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql "$@"
fi
exec "$@"
