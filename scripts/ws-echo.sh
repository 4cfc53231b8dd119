#!/usr/bin/env bash
# A WebSocket echo server for headroom's WebSocket tests: Debian's python3-websockets (an
# independent RFC 6455 implementation) running scripts/ws_echo.py.
#
#   scripts/ws-echo.sh start    install python3-websockets if missing, start the server if it is
#                               not running (idempotent); prints the ws:// URL
#   scripts/ws-echo.sh stop     stop it (idempotent)
#   scripts/ws-echo.sh status   say whether it runs
#   scripts/ws-echo.sh url      print the ws:// URL, e.g. for HEADROOM_WS_URL
#   scripts/ws-echo.sh wss-url  print the wss:// URL of its TLS listener, e.g. for
#                               HEADROOM_WSS_URL
#
#   HEADROOM_WS_DIR   pid file and log (default /tmp/headroom-ws)
#   HEADROOM_WS_PORT  its TCP port on 127.0.0.1 (default 25380)
#   HEADROOM_WSS_PORT its TLS port on 127.0.0.1 (default 25381): the same paths over TLS, with
#                     the test PKI's localhost certificate (names localhost, 127.0.0.1, ::1)
#   HEADROOM_PKI_DIR  the test PKI (default /tmp/headroom-pki; made by scripts/pki.sh if missing);
#                     clients trust $HEADROOM_PKI_DIR/ca.pem
#
# The server runs under Debian's /usr/bin/python3 (the package installs there; a python3 earlier
# in PATH, e.g. pyenv's, would not see it). Paths it serves: see scripts/ws_echo.py.
set -euo pipefail

cd "$(dirname "$0")/.."
DIR=${HEADROOM_WS_DIR:-/tmp/headroom-ws}
PORT=${HEADROOM_WS_PORT:-25380}
TLS_PORT=${HEADROOM_WSS_PORT:-25381}
PKI_DIR=${HEADROOM_PKI_DIR:-/tmp/headroom-pki}
PY=/usr/bin/python3
PIDFILE="$DIR/ws-echo.pid"
LOG="$DIR/ws-echo.log"

say() { echo "ws-echo.sh: $*" >&2; }
die() { say "$*"; exit 1; }

url() { echo "ws://127.0.0.1:$PORT"; }
wss_url() { echo "wss://127.0.0.1:$TLS_PORT"; }
tls_listening() { ss -Htln "sport = :$TLS_PORT" 2>/dev/null | grep -q "127.0.0.1:$TLS_PORT"; }

have_pkg() { [ -x "$PY" ] && "$PY" -c 'import websockets' 2>/dev/null; }

install_pkg() {
  have_pkg && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  say "installing Debian's python3-websockets"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-websockets >/dev/null
  have_pkg || die "python3-websockets installed, but $PY cannot import websockets"
}

# The pid in the pid file, if that process is alive and is our server.
running_pid() {
  [ -f "$PIDFILE" ] || return 1
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "ws_echo.py" || return 1
  echo "$pid"
}

start() {
  install_pkg
  mkdir -p "$DIR"
  local pid
  if pid=$(running_pid); then
    if tls_listening; then
      say "already running (pid $pid) on 127.0.0.1:$PORT and $TLS_PORT (TLS)"
      url
      return 0
    fi
    # Started by an older version of this script, without TLS.
    say "running (pid $pid) without its TLS listener: restarting it"
    stop
  fi
  rm -f "$PIDFILE"
  scripts/pki.sh "$PKI_DIR" >/dev/null
  say "starting on 127.0.0.1:$PORT and $TLS_PORT (TLS) (log: $LOG)"
  nohup "$PY" scripts/ws_echo.py --host 127.0.0.1 --port "$PORT" --tls-port "$TLS_PORT" \
    --cert "$PKI_DIR/localhost.pem" --key "$PKI_DIR/localhost.key" >"$LOG" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$PIDFILE"
  # Ready when it says so; at most 10 s.
  local i
  for i in $(seq 1 100); do
    if grep -q "^ws_echo: listening" "$LOG" 2>/dev/null; then
      url
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$PIDFILE"
      tail -n 20 "$LOG" >&2 || true
      if grep -q "address already in use" "$LOG" 2>/dev/null; then
        die "port $PORT or $TLS_PORT on 127.0.0.1 is taken; set HEADROOM_WS_PORT / HEADROOM_WSS_PORT, or stop what holds it"
      fi
      die "the server exited (log above)"
    fi
    sleep 0.1
  done
  kill "$pid" 2>/dev/null || true
  rm -f "$PIDFILE"
  die "the server did not say it was listening within 10 s (log: $LOG)"
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
    if pid=$(running_pid); then say "running (pid $pid) on 127.0.0.1:$PORT"; else say "not running"; exit 3; fi ;;
  url) url ;;
  wss-url) wss_url ;;
  *) echo "usage: scripts/ws-echo.sh start|stop|status|url|wss-url  (HEADROOM_WS_DIR, HEADROOM_WS_PORT, HEADROOM_WSS_PORT)" >&2; exit 2 ;;
esac
