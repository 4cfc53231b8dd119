#!/usr/bin/env bash
# A private PostgreSQL server for headroom's /db/* tests and benchmarks.
#
#   scripts/postgres.sh start    install Debian's postgresql if missing, create the cluster if
#                                missing, start it if stopped (idempotent); prints the URL
#   scripts/postgres.sh stop     stop it (idempotent)
#   scripts/postgres.sh status   say whether it runs
#   scripts/postgres.sh url      print the postgres:// URL, e.g. for HEADROOM_PG_URL
#   scripts/postgres.sh tls-url  the same with ?sslmode=require, e.g. for HEADROOM_PG_TLS_URL
#
#   HEADROOM_PG_DIR   where the cluster lives (default /tmp/headroom-pg: data/, log, socket)
#   HEADROOM_PG_PORT  its TCP port (default 25432)
#   HEADROOM_PG_SYNCHRONOUS_COMMIT  on|off (default off), applied when the server starts
#   HEADROOM_PKI_DIR  the test PKI the server's certificate comes from (default
#                     /tmp/headroom-pki; made by scripts/pki.sh when missing)
#
# TLS: `start` turns ssl on (ALTER SYSTEM and a reload, so a cluster already running gets it
# too) with $HEADROOM_PKI_DIR/localhost.pem (names localhost, 127.0.0.1, ::1; signed by the test
# CA, $HEADROOM_PKI_DIR/ca.pem), copied into the data directory for the cluster's owner. The
# pg_hba.conf lines are `host` lines, which match TLS and plain connections alike, so
# sslmode=disable, prefer, require and verify-full (with sslrootcert=CA, host=localhost or
# 127.0.0.1) all connect:
#   psql "host=127.0.0.1 port=25432 user=headroom dbname=headroom sslmode=verify-full sslrootcert=CA"
#   SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid();     -- t
#
# synchronous_commit is off by default: a commit returns without waiting for its WAL fsync (the
# WAL is still written in order and fsynced within ~0.6 s: a crash loses the last commits, never
# consistency). That matches the SQLite backend's synchronous=NORMAL, and keeps /db/write from
# measuring only this disk's fsync latency (~3.5 ms per commit here, so ~290 inserts/s per
# connection with it on). A client can still choose per connection, in the URL:
# ...?options=-c%20synchronous_commit%3Don
#
# The cluster is its own: initdb into $HEADROOM_PG_DIR/data, listening on 127.0.0.1 only (and on
# a Unix socket in $HEADROOM_PG_DIR), user "headroom" with password "headroom" (SCRAM over TCP),
# database "headroom", max_connections 300 (room for a 50-connection pool per server and then
# some). The system's own cluster (Debian's "main", port 5432) is neither used nor touched.
# PostgreSQL refuses to run as root, so as root the server runs as the "postgres" OS user.
#
# For the PostgreSQL protocol client's authentication tests (crates/headroom-proto/tests/
# pg_server.rs, docs/pgsql.md), `start` also makes sure of three login roles, each with password
# "headroom", and of pg_hba.conf lines (ahead of the general ones) that force their method over
# TCP from 127.0.0.1:
#   headroom_md5        md5            (its password is stored as MD5, so the server really asks
#                                       for MD5: the md5 method would take SCRAM if it could)
#   headroom_scram      scram-sha-256
#   headroom_cleartext  password       (cleartext PasswordMessage)
# An existing cluster gets them on its next `start` (the server reloads its pg_hba.conf).
set -euo pipefail

DIR=${HEADROOM_PG_DIR:-/tmp/headroom-pg}
PORT=${HEADROOM_PG_PORT:-25432}
SYNC_COMMIT=${HEADROOM_PG_SYNCHRONOUS_COMMIT:-off}
PGUSER_NAME=headroom
PGPASS=headroom
PGDB=headroom
DATA="$DIR/data"
PKI_DIR=${HEADROOM_PKI_DIR:-/tmp/headroom-pki}
SCRIPTS=$(cd "$(dirname "$0")" && pwd)
LOG="$DIR/postgresql.log"

say() { echo "postgres.sh: $*" >&2; }
die() { say "$*"; exit 1; }

url() { echo "postgres://$PGUSER_NAME:$PGPASS@127.0.0.1:$PORT/$PGDB"; }
tls_url() { echo "$(url)?sslmode=require"; }

bindir() {
  local d best=""
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && best=$(printf '%s\n%s\n' "$best" "$d" | sort -V | tail -n 1)
  done
  [ -n "$best" ] && echo "$best"
}

install_pg() {
  [ -n "$(bindir)" ] && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  say "installing Debian's postgresql"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
  [ -n "$(bindir)" ] || die "postgresql installed, but no /usr/lib/postgresql/*/bin/initdb"
}

# Run as the cluster's owner: "postgres" when we are root, ourselves otherwise.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

owner() { if [ "$(id -u)" -eq 0 ]; then echo postgres; else id -un; fi; }

running() {
  local bin
  bin=$(bindir) || return 1
  [ -f "$DATA/PG_VERSION" ] || return 1
  as_owner "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

init_cluster() {
  local bin=$1 own
  own=$(owner)
  mkdir -p "$DIR"
  chown "$own": "$DIR" 2>/dev/null || true
  chmod 700 "$DIR"
  as_owner test -w "$DIR" ||
    die "$own cannot write to $DIR (every parent directory must be searchable by $own); set HEADROOM_PG_DIR, e.g. under /tmp"
  if [ -f "$DATA/PG_VERSION" ]; then
    local have want
    have=$(cat "$DATA/PG_VERSION")
    want=$(basename "$(dirname "$bin")")
    [ "$have" = "$want" ] && return 0
    running && die "the cluster in $DATA is PostgreSQL $have and runs; stop it with the old binaries first"
    say "the cluster in $DATA is PostgreSQL $have, the installed server is $want: recreating it (test data only)"
  fi
  say "creating a cluster in $DATA"
  rm -rf "$DATA"
  local pw="$DIR/pwfile"
  printf '%s\n' "$PGPASS" >"$pw"
  chown "$own": "$pw" 2>/dev/null || true
  chmod 600 "$pw"
  as_owner "$bin/initdb" -D "$DATA" -U "$PGUSER_NAME" --pwfile="$pw" -E UTF8 --no-locale \
    --auth-local=trust --auth-host=scram-sha-256 >"$DIR/initdb.log" 2>&1 ||
    { rm -f "$pw"; cat "$DIR/initdb.log" >&2; die "initdb failed (log above)"; }
  rm -f "$pw"
  cat >>"$DATA/postgresql.conf" <<EOF

# headroom (scripts/postgres.sh): loopback only; the port and socket come from pg_ctl -o
listen_addresses = '127.0.0.1'
max_connections = 300
EOF
}

start() {
  install_pg
  local bin
  bin=$(bindir)
  init_cluster "$bin"
  if running; then
    local pidport
    pidport=$(sed -n 4p "$DATA/postmaster.pid" 2>/dev/null || true)
    [ "$pidport" = "$PORT" ] ||
      die "the cluster in $DATA already runs on port ${pidport:-?}, not $PORT: run 'scripts/postgres.sh stop' first (with its HEADROOM_PG_PORT)"
    say "already running on 127.0.0.1:$PORT"
  else
    case "$SYNC_COMMIT" in on|off) ;; *) die "HEADROOM_PG_SYNCHRONOUS_COMMIT must be on or off, not '$SYNC_COMMIT'" ;; esac
    say "starting on 127.0.0.1:$PORT, synchronous_commit=$SYNC_COMMIT (log: $LOG)"
    as_owner "$bin/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 \
      -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c synchronous_commit=$SYNC_COMMIT" \
      start >/dev/null ||
      {
        tail -n 20 "$LOG" >&2 || true
        if tail -n 5 "$LOG" | grep -q "Address already in use"; then
          die "port $PORT on 127.0.0.1 is taken (by a listener, or by a client socket: it is in the ephemeral range $(tr '\t' - </proc/sys/net/ipv4/ip_local_port_range)); start again when it is free, or set HEADROOM_PG_PORT"
        fi
        die "PostgreSQL did not start (log above)"
      }
  fi
  local exists
  exists=$(as_owner "$bin/psql" -h "$DIR" -p "$PORT" -U "$PGUSER_NAME" -d postgres -XtAq \
    -c "SELECT 1 FROM pg_database WHERE datname = '$PGDB'")
  if [ "$exists" != 1 ]; then
    as_owner "$bin/createdb" -h "$DIR" -p "$PORT" -U "$PGUSER_NAME" "$PGDB"
  fi
  auth_roles "$bin"
  tls_on "$bin"
  url
}

# ssl = on with the test PKI's localhost certificate (idempotent: the files are copied again
# only when they differ, and the settings written and reloaded only when not in force).
tls_on() {
  local bin=$1 own changed=false f
  own=$(owner)
  "$SCRIPTS/pki.sh" "$PKI_DIR" >/dev/null
  for f in crt key; do
    local src="$PKI_DIR/localhost.pem"
    [ "$f" = key ] && src="$PKI_DIR/localhost.key"
    if ! cmp -s "$src" "$DATA/server.$f"; then
      cp "$src" "$DATA/server.$f"
      changed=true
    fi
    chown "$own": "$DATA/server.$f" 2>/dev/null || true
    # PostgreSQL refuses a key that others can read.
    chmod 600 "$DATA/server.$f"
  done
  local psql=(as_owner "$bin/psql" -h "$DIR" -p "$PORT" -U "$PGUSER_NAME" -d postgres -XqAt
    -v ON_ERROR_STOP=1)
  if $changed || [ "$("${psql[@]}" -c 'SHOW ssl')" != on ]; then
    say "turning TLS on (certificate from $PKI_DIR)"
    "${psql[@]}" -c "ALTER SYSTEM SET ssl = on" -c "ALTER SYSTEM SET ssl_cert_file = 'server.crt'" \
      -c "ALTER SYSTEM SET ssl_key_file = 'server.key'" -c "SELECT pg_reload_conf()" >/dev/null
    local i
    for i in $(seq 1 50); do
      [ "$("${psql[@]}" -c 'SHOW ssl')" = on ] && return 0
      sleep 0.1
    done
    tail -n 5 "$LOG" >&2 || true
    die "ssl is still off after the reload (log above)"
  fi
}

# The roles and pg_hba.conf lines of the protocol client's auth tests (see the top). Idempotent:
# the hba block is added once (found again by its marker line), a role is created when missing,
# and its password set again only when it is not stored the way its method needs.
HBA_MARK="# headroom (scripts/postgres.sh): auth-method test roles"
auth_roles() {
  local bin=$1 hba="$DATA/pg_hba.conf"
  if ! grep -qxF "$HBA_MARK" "$hba"; then
    say "adding the auth test roles' lines to $hba"
    local tmp
    tmp=$(mktemp)
    {
      echo "$HBA_MARK"
      echo "host    all    headroom_md5          127.0.0.1/32    md5"
      echo "host    all    headroom_scram        127.0.0.1/32    scram-sha-256"
      echo "host    all    headroom_cleartext    127.0.0.1/32    password"
      echo
      cat "$hba"
    } >"$tmp"
    # Rewrite in place, so the file keeps its owner and mode.
    cat "$tmp" >"$hba"
    rm -f "$tmp"
    as_owner "$bin/pg_ctl" -D "$DATA" reload >/dev/null
  fi
  as_owner "$bin/psql" -h "$DIR" -p "$PORT" -U "$PGUSER_NAME" -d postgres -XqAt -v ON_ERROR_STOP=1 \
    >/dev/null <<'SQL'
DO $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT * FROM (VALUES ('headroom_md5', 'md5', 'md5%'),
                                 ('headroom_scram', 'scram-sha-256', 'SCRAM-SHA-256$%'),
                                 ('headroom_cleartext', 'scram-sha-256', 'SCRAM-SHA-256$%'))
                 AS t(name, enc, stored) LOOP
    PERFORM set_config('password_encryption', r.enc, true);
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r.name) THEN
      EXECUTE format('CREATE ROLE %I LOGIN PASSWORD %L', r.name, 'headroom');
    ELSIF NOT EXISTS (SELECT 1 FROM pg_authid
                      WHERE rolname = r.name AND rolcanlogin AND rolpassword LIKE r.stored) THEN
      EXECUTE format('ALTER ROLE %I LOGIN PASSWORD %L', r.name, 'headroom');
    END IF;
  END LOOP;
END
$$;
SQL
}

stop() {
  if running; then
    say "stopping the cluster in $DATA"
    as_owner "$(bindir)/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null
  else
    say "not running"
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status)
    if running; then say "running on 127.0.0.1:$(sed -n 4p "$DATA/postmaster.pid")"; else say "not running"; exit 3; fi ;;
  url) url ;;
  tls-url) tls_url ;;
  *) echo "usage: scripts/postgres.sh start|stop|status|url|tls-url  (HEADROOM_PG_DIR, HEADROOM_PG_PORT)" >&2; exit 2 ;;
esac
