#!/usr/bin/env bash
# A private MariaDB server for headroom's MySQL-protocol tests and benchmarks.
#
#   scripts/mariadb.sh start    install Debian's mariadb-server if missing, create the data
#                               directory if missing, start the server if stopped, make sure of
#                               the test users, databases and tables (idempotent); prints the URL
#   scripts/mariadb.sh stop     stop it (idempotent)
#   scripts/mariadb.sh status   say whether it runs (exit 3 when not)
#   scripts/mariadb.sh url      print the mysql:// URL, e.g. for HEADROOM_MYSQL_URL
#   scripts/mariadb.sh sql ...  run the `mariadb` client as the server's root over its Unix
#                               socket, e.g. `scripts/mariadb.sh sql -e "SHOW GLOBAL STATUS"`
#
#   HEADROOM_MYSQL_DIR   where it lives (default /tmp/headroom-mysql: data/, my.cnf, socket,
#                        pid file, error log, TLS files)
#   HEADROOM_MYSQL_PORT  its TCP port on 127.0.0.1 (default 25306)
#   HEADROOM_MYSQL_MAX_CONNECTIONS  (default 1500: room for a 1,000-user test and then some)
#   HEADROOM_PKI_DIR     the test PKI the server's certificate comes from (default
#                        /tmp/headroom-pki; made by scripts/pki.sh when missing)
#
# The server is its own: `mariadb-install-db` into $HEADROOM_MYSQL_DIR/data, `mariadbd` with
# --defaults-file=$HEADROOM_MYSQL_DIR/my.cnf only (the system's /etc/mysql is not read), on
# 127.0.0.1 and a Unix socket in $HEADROOM_MYSQL_DIR, skip-name-resolve, run as the `mysql` OS
# user. Debian's own service (port 3306) is neither used nor touched.
# innodb_flush_log_at_trx_commit = 2: a commit is written to the OS at once and fsynced about
# once a second (a crash of the machine loses the last second, never consistency), like
# postgres.sh's synchronous_commit=off, so that writes do not measure this disk's fsync.
#
# TLS is on (ssl_cert/ssl_key: $HEADROOM_PKI_DIR/localhost.pem, names localhost and 127.0.0.1,
# signed by the test CA $HEADROOM_PKI_DIR/ca.pem), optional for every user but headroom_tls:
#   mariadb -h 127.0.0.1 -P 25306 -u headroom -pheadroom --ssl --ssl-ca=CA --ssl-verify-server-cert
#   SHOW STATUS LIKE 'Ssl_version';        -- TLSv1.3
#
# What `start` makes sure of (users may connect from any host; passwords as below):
#   user headroom / headroom        mysql_native_password; ALL on database headroom, whose table
#                                   items(id INT PRIMARY KEY, name VARCHAR(64)) has 100 rows
#                                   (id 1..100, name 'item-<id>')
#   user headroom_tls / headroom    mysql_native_password, REQUIRE SSL (a login without TLS is
#                                   refused with 1045): proves a login really used TLS
#   user headroom_ed / headroom     ed25519 (plugin auth_ed25519): a login the codec cannot do
#                                   (the server switches to client_ed25519)
#   user test / test                database test with tables gens and te (10 rows each): what
#                                   Tsung's stock examples/mysql.xml selects from
# MariaDB has no caching_sha2_password (MySQL 8's default): that plugin is tested on hand-made
# packets only.
#
# The server's own counters, for a test that checks what a load did (SHOW GLOBAL STATUS needs no
# privilege):
#   SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_select', 'Com_insert',
#     'Com_stmt_prepare', 'Com_stmt_execute', 'Com_stmt_close', 'Connections',
#     'Threads_connected', 'Max_used_connections', 'Aborted_connects', 'Ssl_accepts');
set -euo pipefail

DIR=${HEADROOM_MYSQL_DIR:-/tmp/headroom-mysql}
PORT=${HEADROOM_MYSQL_PORT:-25306}
MAX_CONN=${HEADROOM_MYSQL_MAX_CONNECTIONS:-1500}
PKI_DIR=${HEADROOM_PKI_DIR:-/tmp/headroom-pki}
SCRIPTS=$(cd "$(dirname "$0")" && pwd)
DATA="$DIR/data"
CNF="$DIR/my.cnf"
SOCK="$DIR/mysqld.sock"
PIDFILE="$DIR/mysqld.pid"
LOG="$DIR/error.log"

say() { echo "mariadb.sh: $*" >&2; }
die() { say "$*"; exit 1; }

url() { echo "mysql://headroom:headroom@127.0.0.1:$PORT/headroom"; }

install_mariadb() {
  command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] && command -v mariadb >/dev/null &&
    command -v mariadb-install-db >/dev/null && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  say "installing Debian's mariadb-server and mariadb-client"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq mariadb-server mariadb-client >/dev/null
}

mariadbd_bin() {
  if command -v mariadbd >/dev/null 2>&1; then command -v mariadbd; else echo /usr/sbin/mariadbd; fi
}

# The server's OS user: "mysql" when we are root (mariadbd refuses to run as root), ourselves
# otherwise.
owner() { if [ "$(id -u)" -eq 0 ]; then echo mysql; else id -un; fi; }
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u mysql -- "$@"; else "$@"; fi
}

# The client as the server's root account (unix_socket authentication: the OS user root, or
# the owner when not run as root, which mariadb-install-db makes an administrator too).
client() {
  local user=root
  [ "$(id -u)" -eq 0 ] || user=$(id -un)
  mariadb --no-defaults --socket="$SOCK" -u "$user" "$@"
}

pid() { [ -s "$PIDFILE" ] && cat "$PIDFILE"; }

running() {
  local p
  p=$(pid) || return 1
  kill -0 "$p" 2>/dev/null || return 1
  client -N -e "SELECT 1" >/dev/null 2>&1
}

write_cnf() {
  local tmp
  tmp=$(mktemp)
  cat >"$tmp" <<EOF
# written by headroom's scripts/mariadb.sh (rewritten at every start)
[mariadbd]
datadir = $DATA
socket = $SOCK
pid-file = $PIDFILE
log-error = $LOG
port = $PORT
bind-address = 127.0.0.1
skip-name-resolve
max_connections = $MAX_CONN
max_allowed_packet = 64M
innodb_flush_log_at_trx_commit = 2
ssl_ca = $DIR/tls/ca.pem
ssl_cert = $DIR/tls/server.pem
ssl_key = $DIR/tls/server.key
EOF
  if ! cmp -s "$tmp" "$CNF"; then
    cat "$tmp" >"$CNF"
  fi
  rm -f "$tmp"
  chmod 644 "$CNF"
}

# Copies of the test PKI's files the server's user owns (the private key must be readable by it).
tls_files() {
  local own
  own=$(owner)
  "$SCRIPTS/pki.sh" "$PKI_DIR" >/dev/null
  mkdir -p "$DIR/tls"
  cp "$PKI_DIR/ca.pem" "$DIR/tls/ca.pem"
  cp "$PKI_DIR/localhost.pem" "$DIR/tls/server.pem"
  cp "$PKI_DIR/localhost.key" "$DIR/tls/server.key"
  chown -R "$own": "$DIR/tls" 2>/dev/null || true
  chmod 600 "$DIR/tls/server.key"
}

init_data() {
  local own
  own=$(owner)
  mkdir -p "$DIR"
  chown "$own": "$DIR" 2>/dev/null || true
  chmod 755 "$DIR"
  as_owner test -w "$DIR" ||
    die "$own cannot write to $DIR (every parent directory must be searchable by $own); set HEADROOM_MYSQL_DIR, e.g. under /tmp"
  [ -d "$DATA/mysql" ] && return 0
  say "creating a data directory in $DATA"
  rm -rf "$DATA"
  as_owner mariadb-install-db --no-defaults --datadir="$DATA" --user="$own" \
    --auth-root-authentication-method=socket --skip-test-db >"$DIR/install-db.log" 2>&1 ||
    { cat "$DIR/install-db.log" >&2; die "mariadb-install-db failed (log above)"; }
}

start_server() {
  local bin
  bin=$(mariadbd_bin)
  say "starting on 127.0.0.1:$PORT (log: $LOG)"
  rm -f "$SOCK" "$PIDFILE"
  : >>"$LOG"
  chown "$(owner)": "$LOG" 2>/dev/null || true
  # Detached from this shell (its own session, no terminal), so that it outlives the caller.
  setsid "$bin" --defaults-file="$CNF" --user="$(owner)" </dev/null >>"$DIR/mariadbd.out" 2>&1 &
  local i
  for i in $(seq 1 300); do
    running && return 0
    if ! kill -0 $! 2>/dev/null; then
      tail -n 20 "$LOG" >&2 || true
      if tail -n 20 "$LOG" | grep -q "Address already in use"; then
        die "port $PORT on 127.0.0.1 is taken (by a listener, or by a client socket: it is in the ephemeral range $(tr '\t' - </proc/sys/net/ipv4/ip_local_port_range)); start again when it is free, or set HEADROOM_MYSQL_PORT"
      fi
      die "mariadbd exited (log above)"
    fi
    sleep 0.1
  done
  tail -n 20 "$LOG" >&2 || true
  die "mariadbd did not answer within 30 s (log above)"
}

# Users, databases and tables (see the top); every statement is idempotent.
provision() {
  if [ "$(client -N -e "SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'ed25519'")" = 0 ]; then
    client -e "INSTALL SONAME 'auth_ed25519'"
  fi
  client --batch >/dev/null <<'SQL'
CREATE DATABASE IF NOT EXISTS headroom;
CREATE TABLE IF NOT EXISTS headroom.items (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL);
INSERT IGNORE INTO headroom.items (id, name)
  SELECT seq, CONCAT('item-', seq) FROM headroom.seq_1_to_100;
CREATE USER IF NOT EXISTS 'headroom'@'%';
ALTER USER 'headroom'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('headroom') REQUIRE NONE;
GRANT ALL ON headroom.* TO 'headroom'@'%';
CREATE USER IF NOT EXISTS 'headroom_tls'@'%';
ALTER USER 'headroom_tls'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('headroom') REQUIRE SSL;
GRANT ALL ON headroom.* TO 'headroom_tls'@'%';
CREATE USER IF NOT EXISTS 'headroom_ed'@'%';
ALTER USER 'headroom_ed'@'%' IDENTIFIED VIA ed25519 USING PASSWORD('headroom') REQUIRE NONE;
GRANT ALL ON headroom.* TO 'headroom_ed'@'%';
CREATE DATABASE IF NOT EXISTS test;
CREATE TABLE IF NOT EXISTS test.gens (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL);
INSERT IGNORE INTO test.gens (id, name) SELECT seq, CONCAT('gen-', seq) FROM test.seq_1_to_10;
CREATE TABLE IF NOT EXISTS test.te (id INT PRIMARY KEY, value VARCHAR(64) NOT NULL);
INSERT IGNORE INTO test.te (id, value) SELECT seq, CONCAT('te-', seq) FROM test.seq_1_to_10;
CREATE USER IF NOT EXISTS 'test'@'%';
ALTER USER 'test'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('test') REQUIRE NONE;
GRANT ALL ON test.* TO 'test'@'%';
SQL
}

start() {
  install_mariadb
  init_data
  tls_files
  write_cnf
  if running; then
    local have
    have=$(client -N -e "SELECT @@port")
    [ "$have" = "$PORT" ] ||
      die "the server in $DIR already runs on port $have, not $PORT: run 'scripts/mariadb.sh stop' first (with its HEADROOM_MYSQL_PORT)"
    say "already running on 127.0.0.1:$PORT"
    # Certificates made anew by pki.sh are taken without a restart.
    client -e "FLUSH SSL" >/dev/null 2>&1 || true
  else
    start_server
  fi
  [ "$(client -N -e "SELECT @@have_ssl")" = YES ] ||
    die "TLS is not on (have_ssl is $(client -N -e "SELECT @@have_ssl"); see $LOG)"
  provision || die "creating the test users and tables failed"
  url
}

stop() {
  local p
  if p=$(pid) && kill -0 "$p" 2>/dev/null; then
    say "stopping the server in $DIR (pid $p)"
    kill -TERM "$p"
    local i
    for i in $(seq 1 600); do
      kill -0 "$p" 2>/dev/null || { say "stopped"; return 0; }
      sleep 0.1
    done
    die "mariadbd (pid $p) did not stop within 60 s"
  else
    say "not running"
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status)
    if running; then say "running on 127.0.0.1:$PORT (pid $(pid))"; else say "not running"; exit 3; fi ;;
  url) url ;;
  sql) shift; client "$@" ;;
  *) echo "usage: scripts/mariadb.sh start|stop|status|url|sql [mariadb args]  (HEADROOM_MYSQL_DIR, HEADROOM_MYSQL_PORT)" >&2; exit 2 ;;
esac
