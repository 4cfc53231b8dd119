#!/usr/bin/env bash
# A private RabbitMQ (AMQP 0-9-1 broker) for headroom's AMQP tests and benchmarks.
#
#   scripts/rabbitmq.sh start     install Debian's rabbitmq-server if missing, start the node if
#                                 it is not running (idempotent), make sure of the user
#                                 "headroom"; prints the amqp:// URL
#   scripts/rabbitmq.sh stop      stop the node and its private epmd (idempotent)
#   scripts/rabbitmq.sh status    say whether it runs (exit 3 when it does not)
#   scripts/rabbitmq.sh url       print the URL, e.g. for HEADROOM_AMQP_URL
#   scripts/rabbitmq.sh tls-url   print the amqps:// URL (TLS from the first byte), e.g. for
#                                 HEADROOM_AMQPS_URL
#   scripts/rabbitmq.sh ctl ARGS  run rabbitmqctl ARGS against the node, e.g.
#                                 `ctl list_queues name messages_ready messages_unacknowledged`
#   scripts/rabbitmq.sh counters  the broker's cumulative AMQP 0-9-1 message counters since it
#                                 started, one "name value" line each (see below)
#   scripts/rabbitmq.sh queues    one line per queue of vhost /: name, messages_ready,
#                                 messages_unacknowledged, consumers
#
#   HEADROOM_AMQP_DIR        where the node lives (default /tmp/headroom-amqp: mnesia/, log/,
#                            config, cookie)
#   HEADROOM_AMQP_PORT       its AMQP port on 127.0.0.1 (default 25672)
#   HEADROOM_AMQP_DIST_PORT  its Erlang distribution port (default 25673)
#   HEADROOM_AMQP_EPMD_PORT  the port of its own epmd (default 25674)
#   HEADROOM_AMQPS_PORT      its AMQP-over-TLS port on 127.0.0.1 (default HEADROOM_AMQP_PORT - 1,
#                            25671)
#   HEADROOM_PKI_DIR         the test PKI the TLS certificate comes from (default
#                            /tmp/headroom-pki; made by scripts/pki.sh when missing)
#
# TLS: amqps on HEADROOM_AMQPS_PORT with $HEADROOM_PKI_DIR/localhost.pem (names localhost,
# 127.0.0.1, ::1; signed by the test CA, $HEADROOM_PKI_DIR/ca.pem), no client certificate asked.
#   HEADROOM_AMQP_CHANNEL_MAX  the broker's channel_max (default 2047, RabbitMQ's own default);
#                            0 is "no limit", which Tsung 1.7's client needs: its Tune-Ok always
#                            says channel_max 0, and RabbitMQ closes a connection whose channel_max
#                            is above its own (0 counts as above any limit)
#
# The node is its own: Erlang node "headroom-amqp@localhost", config, Mnesia database, logs and
# Erlang cookie under $DIR, AMQP on 127.0.0.1 only, the distribution on 127.0.0.1 on a fixed
# port, and an epmd of its own on another port (ERL_EPMD_PORT, which the server and every CLI
# call here get), so it neither needs nor disturbs a system node (Debian's rabbit@HOST, epmd on
# 4369) or ejabberd's node (scripts/ejabberd.sh, no epmd). RabbitMQ's CLI tools find the node
# through that epmd; run by hand, use `scripts/rabbitmq.sh ctl ...`, which sets it up.
# (Debian's own rabbit node, if it were started, would want 25672 as *its* distribution port:
# AMQP port + 20000. The two cannot run at once with these defaults; set HEADROOM_AMQP_PORT.)
#
# The node gets the hard descriptor limit (at most 65,536) as its soft one: RabbitMQ refuses
# connections beyond it.
#
# As root the node runs as Debian's "rabbitmq" user (setpriv, HOME=$DIR so the cookie is
# $DIR/.erlang.cookie); anyone else runs it as themselves. No plugin is enabled (no management
# UI): the counters come from rabbitmqctl.
#
# Users: "headroom" / "headroom", all permissions on vhost "/" (guest stays, loopback only).
#
# Counters without the management plugin: rabbitmqctl's list_* commands have no cumulative
# message counts in 3.10 (list_queues has only the current messages_ready and
# messages_unacknowledged, list_channels messages_unconfirmed / messages_unacknowledged,
# list_connections recv_cnt / send_cnt in frames; per-queue message_stats need the management
# plugin, which is not enabled). The broker's own global counters (rabbit_global_counters, what the
# Prometheus plugin exports, kept by the core broker with no plugin) are read with
# `rabbitmqctl eval`; `counters` prints them for protocol amqp091, the per-queue-type ones
# summed over classic, quorum and stream queues:
#   messages_received_total            publishes received (Basic.Publish)
#   messages_received_confirm_total    ... of them on channels in confirm mode
#   messages_routed_total              routed to at least one queue
#   messages_unroutable_returned_total mandatory and unroutable: Basic.Return
#   messages_unroutable_dropped_total  unroutable and dropped
#   messages_confirmed_total           Basic.Ack confirms sent to publishers
#   messages_delivered_total           deliveries (consume and get, with or without ack)
#   messages_acknowledged_total        Basic.Ack received from consumers
#   messages_redelivered_total, messages_get_empty_total
# They count from the node's start: a test takes the difference between two readings. Not to
# be relied on in Debian's 3.10.8: the breakdown messages_delivered_consume_{manual,auto}_ack_
# total and ..._get_... stay 0 (only messages_delivered_total counts), and the gauges
# "consumers" and "publishers" drift (negative values seen).
set -euo pipefail

DIR=${HEADROOM_AMQP_DIR:-/tmp/headroom-amqp}
PORT=${HEADROOM_AMQP_PORT:-25672}
DIST_PORT=${HEADROOM_AMQP_DIST_PORT:-25673}
EPMD_PORT=${HEADROOM_AMQP_EPMD_PORT:-25674}
TLS_PORT=${HEADROOM_AMQPS_PORT:-$((PORT - 1))}
PKI_DIR=${HEADROOM_PKI_DIR:-/tmp/headroom-pki}
SCRIPTS=$(cd "$(dirname "$0")" && pwd)
CHANNEL_MAX=${HEADROOM_AMQP_CHANNEL_MAX:-2047}
case $CHANNEL_MAX in
  '' | *[!0-9]*) echo "rabbitmq.sh: HEADROOM_AMQP_CHANNEL_MAX must be a number 0-65535: $CHANNEL_MAX" >&2; exit 2 ;;
esac
[ "$CHANNEL_MAX" -le 65535 ] || { echo "rabbitmq.sh: HEADROOM_AMQP_CHANNEL_MAX must be 0-65535: $CHANNEL_MAX" >&2; exit 2; }
NODE=headroom-amqp@localhost
USER_NAME=headroom
USER_PASS=headroom
BIN=/usr/lib/rabbitmq/bin

say() { echo "rabbitmq.sh: $*" >&2; }
die() { say "$*"; exit 1; }

url() { echo "amqp://$USER_NAME:$USER_PASS@127.0.0.1:$PORT/"; }
tls_url() { echo "amqps://$USER_NAME:$USER_PASS@127.0.0.1:$TLS_PORT/"; }

install_rabbitmq() {
  [ -x "$BIN/rabbitmq-server" ] && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  say "installing Debian's rabbitmq-server"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq rabbitmq-server >/dev/null
  [ -x "$BIN/rabbitmq-server" ] || die "rabbitmq-server installed, but no $BIN/rabbitmq-server"
}

owner() { if [ "$(id -u)" -eq 0 ]; then echo rabbitmq; else id -un; fi; }

# Runs a command as the node's owner with the node's whole environment: every rabbitmq script
# reads these variables (and nothing from /etc/rabbitmq: RABBITMQ_CONF_ENV_FILE is ours).
as_node() {
  local as=()
  if [ "$(id -u)" -eq 0 ]; then
    as=(setpriv --reuid=rabbitmq --regid=rabbitmq --init-groups)
  fi
  (cd "$DIR" && "${as[@]}" env HOME="$DIR" \
    RABBITMQ_NODENAME="$NODE" \
    RABBITMQ_USE_LONGNAME=false \
    RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    RABBITMQ_NODE_PORT="$PORT" \
    RABBITMQ_DIST_PORT="$DIST_PORT" \
    ERL_EPMD_PORT="$EPMD_PORT" \
    ERL_EPMD_ADDRESS=127.0.0.1 \
    RABBITMQ_CTL_DIST_PORT_MIN="$((DIST_PORT + 10))" \
    RABBITMQ_CTL_DIST_PORT_MAX="$((DIST_PORT + 20))" \
    RABBITMQ_CONF_ENV_FILE="$DIR/rabbitmq-env.conf" \
    RABBITMQ_CONFIG_FILE="$DIR/rabbitmq.conf" \
    RABBITMQ_ADVANCED_CONFIG_FILE="$DIR/advanced.config" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$DIR/enabled_plugins" \
    RABBITMQ_MNESIA_BASE="$DIR/mnesia" \
    RABBITMQ_LOG_BASE="$DIR/log" \
    RABBITMQ_PID_FILE="$DIR/rabbitmq.pid" \
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
    "$@")
}

ctl() { as_node "$BIN/rabbitmqctl" -n "$NODE" "$@"; }

write_config() {
  local own
  own=$(owner)
  mkdir -p "$DIR/mnesia" "$DIR/log"
  if [ ! -s "$DIR/.erlang.cookie" ]; then
    # An Erlang cookie of 32 hex digits; anyone holding it controls the node, so it is 0400.
    od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$DIR/.erlang.cookie"
  fi
  chmod 400 "$DIR/.erlang.cookie"
  # Copies of the test PKI's files the node's user owns (the private key must be readable by it).
  "$SCRIPTS/pki.sh" "$PKI_DIR" >/dev/null
  mkdir -p "$DIR/tls"
  cp "$PKI_DIR/ca.pem" "$DIR/tls/ca.pem"
  cp "$PKI_DIR/localhost.pem" "$DIR/tls/server.pem"
  cp "$PKI_DIR/localhost.key" "$DIR/tls/server.key"
  chmod 600 "$DIR/tls/server.key"
  : >"$DIR/rabbitmq-env.conf"
  echo '[].' >"$DIR/enabled_plugins"
  echo '[].' >"$DIR/advanced.config"
  cat >"$DIR/rabbitmq.conf" <<EOF
# headroom's private RabbitMQ (written by scripts/rabbitmq.sh; edits are overwritten)
listeners.tcp.default = 127.0.0.1:$PORT
listeners.ssl.default = 127.0.0.1:$TLS_PORT
ssl_options.cacertfile = $DIR/tls/ca.pem
ssl_options.certfile = $DIR/tls/server.pem
ssl_options.keyfile = $DIR/tls/server.key
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false
loopback_users.guest = true
# a load generator opens many connections and channels (0: no limit)
channel_max = $CHANNEL_MAX
frame_max = 131072
heartbeat = 60
disk_free_limit.absolute = 50MB
log.console = false
log.file.level = warning
EOF
  chown -R "$own": "$DIR" 2>/dev/null || true
  chmod 700 "$DIR"
  if [ "$own" != "$(id -un)" ]; then
    runuser -u "$own" -- test -w "$DIR/mnesia" ||
      die "$own cannot write to $DIR (every parent directory must be searchable by $own); set HEADROOM_AMQP_DIR, e.g. under /tmp"
  fi
}

# The node's OS pid, from its pid file, while that process is still our node's VM (its command
# line has our HOME; the node name is not on it: RabbitMQ starts distribution itself).
pid() {
  local p
  p=$(cat "$DIR/rabbitmq.pid" 2>/dev/null) || return 1
  [ -n "$p" ] && tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -q -- "-home $DIR -epmd_port $EPMD_PORT " && { echo "$p"; return 0; }
  return 1
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

running() {
  [ -f "$DIR/rabbitmq.conf" ] || return 1
  pid >/dev/null || return 1
  # (A node started before TLS was configured does not listen there: it is restarted.)
  port_open "$PORT" && port_open "$TLS_PORT"
}

ensure_user() {
  if ! ctl list_users --quiet --no-table-headers 2>/dev/null | awk '{print $1}' | grep -qx "$USER_NAME"; then
    ctl add_user "$USER_NAME" "$USER_PASS" >/dev/null
  fi
  ctl set_permissions -p / "$USER_NAME" '.*' '.*' '.*' >/dev/null
}

start() {
  install_rabbitmq
  if running; then
    say "already running on 127.0.0.1:$PORT (node $NODE, pid $(pid))"
    ensure_user
    url
    return 0
  fi
  if pid >/dev/null; then
    say "a previous node (pid $(pid)) does not listen on $PORT; stopping it"
    stop
  fi
  local p
  for p in "$PORT" "$DIST_PORT" "$TLS_PORT"; do
    if port_open "$p"; then
      die "127.0.0.1:$p is taken by another process; free it, or set HEADROOM_AMQP_PORT / HEADROOM_AMQP_DIST_PORT"
    fi
  done
  write_config
  # Descriptors: a load test opens thousands of connections, and RabbitMQ refuses connections
  # beyond its descriptor limit (the soft one it inherits, often 1,024): raise it to the hard one.
  local hard
  hard=$(ulimit -Hn)
  if [ "$hard" = unlimited ] || [ "$hard" -gt 65536 ]; then hard=65536; fi
  ulimit -Sn "$hard" 2>/dev/null || true
  say "starting node $NODE on 127.0.0.1:$PORT (logs: $DIR/log)"
  local t0
  t0=$(date +%s.%N)
  # In the background, in its own session: the script returns once the broker listens.
  as_node setsid "$BIN/rabbitmq-server" >"$DIR/log/startup.log" 2>&1 </dev/null &
  local launcher=$!
  for _ in $(seq 1 120); do
    if pid >/dev/null && port_open "$PORT" && port_open "$TLS_PORT"; then
      # Up to 30 s more for the boot to finish (the listener opens near its end).
      ctl await_startup --timeout 30 >/dev/null 2>&1 || true
      ensure_user
      say "started in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s (pid $(pid))"
      url
      return 0
    fi
    kill -0 "$launcher" 2>/dev/null || break
    sleep 0.5
  done
  tail -n 30 "$DIR/log/startup.log" >&2 || true
  die "RabbitMQ did not listen on 127.0.0.1:$PORT within 60 s (log above, and $DIR/log)"
}

# Waits (up to 30 s) until process $1 is gone, then kills it.
wait_gone() {
  for _ in $(seq 1 120); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.25
  done
  say "pid $1 still alive after 30 s: killing it"
  kill -9 "$1" 2>/dev/null || true
  sleep 0.5
}

stop() {
  local p
  if p=$(pid); then
    say "stopping node $NODE (pid $p)"
    ctl stop >/dev/null 2>&1 || kill "$p" 2>/dev/null || true
    wait_gone "$p"
  else
    say "not running"
  fi
  rm -f "$DIR/rabbitmq.pid"
  # Our own epmd (on its own port; a system epmd on 4369 is another process): ask it to quit.
  if port_open "$EPMD_PORT"; then
    as_node epmd -port "$EPMD_PORT" -kill >/dev/null 2>&1 || true
  fi
}

counters() {
  running || die "not running: run 'scripts/rabbitmq.sh start' first"
  ctl eval '
    M = rabbit_global_counters:overview(),
    Proto = maps:get([{protocol, amqp091}], M, #{}),
    Qs = [V || {K, V} <- maps:to_list(M), lists:member({protocol, amqp091}, K), length(K) =:= 2],
    Add = fun(Q, Acc) -> maps:fold(fun(K, V, A) -> maps:update_with(K, fun(X) -> X + V end, V, A) end, Acc, Q) end,
    Sum = lists:foldl(Add, #{}, Qs),
    [io:format("~s ~b~n", [K, V]) || {K, V} <- lists:sort(maps:to_list(maps:merge(Proto, Sum)))],
    done.' | grep -v '^done$'
}

queues() {
  running || die "not running: run 'scripts/rabbitmq.sh start' first"
  ctl list_queues -p / --quiet --no-table-headers name messages_ready messages_unacknowledged \
    consumers
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status)
    if running; then
      say "running on 127.0.0.1:$PORT (node $NODE, pid $(pid))"
    else
      say "not running"
      exit 3
    fi
    ;;
  url) url ;;
  tls-url) tls_url ;;
  ctl) shift; ctl "$@" ;;
  counters) counters ;;
  queues) queues ;;
  *)
    echo "usage: scripts/rabbitmq.sh start|stop|status|url|tls-url|ctl ARGS|counters|queues  (HEADROOM_AMQP_DIR, HEADROOM_AMQP_PORT, HEADROOM_AMQP_DIST_PORT, HEADROOM_AMQP_EPMD_PORT, HEADROOM_AMQPS_PORT)" >&2
    exit 2
    ;;
esac
