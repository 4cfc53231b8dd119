#!/usr/bin/env bash
# A private MQTT broker (Debian's mosquitto) for headroom's MQTT tests and benchmarks.
#
#   scripts/mosquitto.sh start    install Debian's mosquitto if missing; (re)write its config and
#                                 password file; start it if it is not running, restart it if
#                                 its config changed (idempotent); prints the mqtt:// URL
#   scripts/mosquitto.sh stop     stop it (idempotent)
#   scripts/mosquitto.sh status   say whether it runs (exit 3 when it does not)
#   scripts/mosquitto.sh url      print the mqtt:// URL, e.g. for HEADROOM_MQTT_URL
#   scripts/mosquitto.sh tls-url  print the mqtts:// URL of its TLS listener, e.g. for
#                                 HEADROOM_MQTTS_URL
#
#   HEADROOM_MQTT_DIR        config, password file, TLS copies, pid file and log (default
#                            /tmp/headroom-mqtt)
#   HEADROOM_MQTT_PORT       the plain listener on 127.0.0.1 (default 25883)
#   HEADROOM_MQTT_TLS_PORT   the TLS listener on 127.0.0.1 (default 25884)
#   HEADROOM_PKI_DIR         the test PKI its certificate comes from (default /tmp/headroom-pki;
#                            made by scripts/pki.sh when missing)
#
# The broker is its own: its config is $DIR/mosquitto.conf (Debian's /etc/mosquitto is not read),
# it listens on 127.0.0.1 only, keeps nothing on disk (persistence false) and logs to
# $DIR/mosquitto.log. Debian's own mosquitto service (port 1883) is neither used, stopped nor
# disabled. As root, mosquitto drops its privileges to the "mosquitto" user: $DIR and its files
# are given to that user.
#
# What the config allows, for load tests rather than production:
#   - anonymous clients (allow_anonymous true), and a password file with user "headroom",
#     password "headroom": a client that sends a user name must give its password (a wrong one
#     is refused: CONNACK 5 in MQTT 3.1.1, 0x87 in MQTT 5);
#   - max_inflight_messages 0 (no limit on QoS 1/2 messages in flight to a client) and
#     max_queued_messages 100000 (per client, beyond those in flight), max_queued_bytes 0: a
#     1,000-user test at QoS 1/2 loses nothing to the broker's queues;
#   - $SYS statistics every second (sys_interval 1), so a test can compare the broker's own
#     $SYS/broker/messages/received|sent and $SYS/broker/publish/messages/received|sent with
#     the client's counts;
#   - TCP_NODELAY on its sockets (latencies are not Nagle's), no connection limit; the
#     descriptor soft limit is raised to the hard one (at most 65,536) before it starts.
#
# TLS: the second listener speaks MQTT over TLS from the first byte with
# $HEADROOM_PKI_DIR/localhost.pem (names localhost, 127.0.0.1, ::1; signed by the test CA,
# $HEADROOM_PKI_DIR/ca.pem), copied under $DIR/tls for the mosquitto user. No client
# certificate is asked for. Check by hand:
#   mosquitto_pub -h localhost -p 25884 --cafile /tmp/headroom-pki/ca.pem -t hr/t -m hi -d
set -euo pipefail

DIR=${HEADROOM_MQTT_DIR:-/tmp/headroom-mqtt}
PORT=${HEADROOM_MQTT_PORT:-25883}
TLS_PORT=${HEADROOM_MQTT_TLS_PORT:-25884}
PKI_DIR=${HEADROOM_PKI_DIR:-/tmp/headroom-pki}
SCRIPTS=$(cd "$(dirname "$0")" && pwd)
BIN=/usr/sbin/mosquitto
CONF="$DIR/mosquitto.conf"
PIDFILE="$DIR/mosquitto.pid"
LOG="$DIR/mosquitto.log"
USER_NAME=headroom
USER_PASS=headroom

say() { echo "mosquitto.sh: $*" >&2; }
die() { say "$*"; exit 1; }

url() { echo "mqtt://127.0.0.1:$PORT"; }
tls_url() { echo "mqtts://localhost:$TLS_PORT"; }
listening() { ss -Htln "sport = :$1" 2>/dev/null | grep -q "127.0.0.1:$1"; }

install_pkg() {
  [ -x "$BIN" ] && command -v mosquitto_passwd >/dev/null && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  say "installing Debian's mosquitto and mosquitto-clients"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq mosquitto mosquitto-clients >/dev/null
  [ -x "$BIN" ] || die "mosquitto installed, but there is no $BIN"
}

# The pid in the pid file, if that process is alive and is our broker.
running_pid() {
  [ -f "$PIDFILE" ] || return 1
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-c $CONF" || return 1
  echo "$pid"
}

# Who the broker runs as: it drops root for "mosquitto" (or "nobody" if that user is missing).
owner() {
  if [ "$(id -u)" -ne 0 ]; then
    id -un
  elif id mosquitto >/dev/null 2>&1; then
    echo mosquitto
  else
    echo nobody
  fi
}

# Writes the config, password file and TLS copies; true when the config differs from the one
# the running broker (if any) was started with.
configure() {
  local own tmp
  own=$(owner)
  mkdir -p "$DIR/tls"
  "$SCRIPTS/pki.sh" "$PKI_DIR" >/dev/null
  cp "$PKI_DIR/localhost.pem" "$DIR/tls/localhost.pem"
  cp "$PKI_DIR/localhost.key" "$DIR/tls/localhost.key"
  chmod 600 "$DIR/tls/localhost.key"
  # mosquitto_passwd -c rewrites the file; only when the user's line is missing or wrong (its
  # hash is salted, so check by trying: the file is ours, a missing user means a fresh file).
  if ! grep -q "^$USER_NAME:" "$DIR/passwd" 2>/dev/null; then
    rm -f "$DIR/passwd"
    mosquitto_passwd -c -b "$DIR/passwd" "$USER_NAME" "$USER_PASS" >/dev/null
  fi
  chmod 600 "$DIR/passwd"
  tmp=$(mktemp "$DIR/conf.XXXXXX")
  cat >"$tmp" <<EOF
# Written by headroom's scripts/mosquitto.sh; rewritten on every start.
per_listener_settings false
allow_anonymous true
password_file $DIR/passwd
persistence false
log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
connection_messages true
sys_interval 1
max_inflight_messages 0
max_inflight_bytes 0
max_queued_messages 100000
max_queued_bytes 0
max_connections -1
set_tcp_nodelay true

listener $PORT 127.0.0.1

listener $TLS_PORT 127.0.0.1
certfile $DIR/tls/localhost.pem
keyfile $DIR/tls/localhost.key
EOF
  chmod 644 "$tmp"
  local changed=true
  if cmp -s "$tmp" "$CONF"; then
    changed=false
    rm -f "$tmp"
  else
    mv -f "$tmp" "$CONF"
  fi
  chown -R "$own": "$DIR" 2>/dev/null || true
  $changed
}

start() {
  install_pkg
  local pid changed=false
  configure && changed=true
  if pid=$(running_pid); then
    if ! $changed && listening "$PORT" && listening "$TLS_PORT"; then
      say "already running (pid $pid) on 127.0.0.1:$PORT and $TLS_PORT (TLS)"
      url
      return 0
    fi
    say "running (pid $pid) with another config: restarting it"
    stop
  fi
  rm -f "$PIDFILE"
  local hard
  hard=$(ulimit -Hn)
  [ "$hard" = unlimited ] && hard=65536
  [ "$hard" -gt 65536 ] && hard=65536
  ulimit -Sn "$hard" 2>/dev/null || true
  say "starting on 127.0.0.1:$PORT and $TLS_PORT (TLS) (log: $LOG)"
  nohup "$BIN" -c "$CONF" >>"$LOG" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$PIDFILE"
  # Ready when both listeners listen; at most 10 s.
  local i
  for i in $(seq 1 100); do
    if listening "$PORT" && listening "$TLS_PORT"; then
      url
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$PIDFILE"
      tail -n 20 "$LOG" >&2 || true
      if tail -n 5 "$LOG" | grep -qi "address already in use"; then
        die "port $PORT or $TLS_PORT on 127.0.0.1 is taken; set HEADROOM_MQTT_PORT / HEADROOM_MQTT_TLS_PORT, or stop what holds it"
      fi
      die "mosquitto exited (log above)"
    fi
    sleep 0.1
  done
  kill "$pid" 2>/dev/null || true
  rm -f "$PIDFILE"
  die "mosquitto did not listen on 127.0.0.1:$PORT and $TLS_PORT within 10 s (log: $LOG)"
}

stop() {
  local pid
  if pid=$(running_pid); then
    say "stopping pid $pid"
    kill "$pid"
    local i
    for i in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
  else
    say "not running"
  fi
  rm -f "$PIDFILE"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status)
    if pid=$(running_pid); then say "running (pid $pid) on 127.0.0.1:$PORT and $TLS_PORT (TLS)"; else say "not running"; exit 3; fi ;;
  url) url ;;
  tls-url) tls_url ;;
  *) echo "usage: scripts/mosquitto.sh start|stop|status|url|tls-url  (HEADROOM_MQTT_DIR, HEADROOM_MQTT_PORT, HEADROOM_MQTT_TLS_PORT)" >&2; exit 2 ;;
esac
