#!/usr/bin/env bash
# A private ejabberd (XMPP server) for headroom's XMPP tests and benchmarks.
#
#   scripts/ejabberd.sh start               install Debian's ejabberd if missing; if it is not
#                                           running, (re)write its config and start it
#                                           (idempotent); prints the address (host:port)
#   scripts/ejabberd.sh stop                stop it (idempotent)
#   scripts/ejabberd.sh status              say whether it runs (exit 3 when it does not)
#   scripts/ejabberd.sh register FIRST LAST register user{N} with password pass{N} for every N
#                                           in FIRST..=LAST (existing users are left as they are)
#   scripts/ejabberd.sh url                 print the c2s address, e.g. for HEADROOM_XMPP_ADDR
#   scripts/ejabberd.sh tls-url             print the direct-TLS c2s address, e.g. for
#                                           HEADROOM_XMPP_TLS_ADDR
#   scripts/ejabberd.sh bosh-url            print the BOSH endpoint (XEP-0124/0206, mod_bosh),
#                                           e.g. for HEADROOM_XMPP_BOSH_URL
#   scripts/ejabberd.sh bosh-tls-url        print the BOSH endpoint over TLS (https), e.g. for
#                                           HEADROOM_XMPP_BOSH_TLS_URL
#   scripts/ejabberd.sh sessions            print the node's own count of client sessions
#                                           (ejabberdctl connected_users_number)
#   scripts/ejabberd.sh watch-sessions [MS]  print "unix_ms<TAB>sessions" every MS ms (500) until
#                                           killed, over ONE distribution connection made at
#                                           the start: it keeps counting when the node is out
#                                           of descriptors and ejabberdctl can no longer connect
#
#   HEADROOM_EJABBERD_DIR   where it lives (default /tmp/headroom-ejabberd: etc/, spool/, logs/)
#   HEADROOM_EJABBERD_PORT  its c2s port on 127.0.0.1 (default 25222)
#   HEADROOM_EJABBERD_DIST_PORT  its Erlang distribution port on 127.0.0.1 (default 25223)
#   HEADROOM_EJABBERD_TLS_PORT   its direct-TLS c2s port on 127.0.0.1 (default c2s port + 2,
#                                so 25224; XEP-0368 "direct TLS": TLS from the first byte)
#   HEADROOM_EJABBERD_BOSH_PORT  its HTTP listener on 127.0.0.1 serving BOSH at /bosh (default
#                                c2s port + 58, so 25280)
#   HEADROOM_EJABBERD_BOSH_TLS_PORT  the same over TLS (https; the c2s TLS port's certificate;
#                                default BOSH port + 1, so 25281)
#   HEADROOM_PKI_DIR             the test PKI its certificate comes from (default
#                                /tmp/headroom-pki; made by scripts/pki.sh when missing)
#
# The instance is its own: config, Mnesia spool, logs and Erlang cookie under $DIR, Erlang node
# "headroom-ejabberd@localhost" reached on a fixed distribution port (ERL_DIST_PORT, so no epmd
# is needed or started), c2s on 127.0.0.1 only, domain "localhost". Debian's own ejabberd service
# (node ejabberd@localhost, ports 5222/5269/5280, epmd) is neither used, stopped nor disabled:
# the two coexist. (In a container whose policy-rc.d forbids starting services, installing the
# package does not start it at all.)
#
# TLS, for the XMPP-over-TLS tests: the c2s port offers STARTTLS, not required (a client that
# ignores <starttls/> logs in in plaintext as before), and a second c2s listener on the TLS port
# speaks TLS from the first byte. Both present $HEADROOM_PKI_DIR/localhost.pem (names localhost,
# 127.0.0.1, ::1; signed by the test CA, $HEADROOM_PKI_DIR/ca.pem), copied under $DIR/etc/tls
# for the ejabberd user. Check by hand:
#   openssl s_client -connect 127.0.0.1:25222 -starttls xmpp -xmpphost localhost -CAfile CA
#   openssl s_client -connect 127.0.0.1:25224 -CAfile CA -verify_hostname localhost
#
# What the config allows, for load tests rather than production: plaintext c2s (STARTTLS
# offered, not required), auth "internal" with plain passwords plus SASL
# ANONYMOUS, in-band registration (XEP-0077) for anyone from anywhere with no rate limit
# (registration_timeout: infinity), no traffic shaper on c2s, 100,000 sessions per user,
# 100,000 offline messages per user, max_fsm_queue 100,000, listen backlog 4,096, stanzas up to
# 1 MiB. Modules: roster, offline storage, registration, disco, ping (presence is core).
#
# Descriptors: Debian starts ejabberd with the soft limit it inherits (often 1,024, and ejabberd
# shuts down whole on EMFILE); start raises the soft limit to the hard one (at most 65,536),
# runs the node so that it keeps it (see ctl below), and refuses to start below 6,500 (6,000
# client connections plus ejabberd's own files).
#
# Registration: ejabberdctl's "register" starts an Erlang VM per user (0.61 s each here, so
# ~50 min for 5,000). "register" here starts ONE hidden Erlang node that calls
# ejabberd_auth:try_register/3 on the server over distribution for the whole range (5,000 users
# in ~2 s here; see docs/xmpp.md).
set -euo pipefail

DIR=${HEADROOM_EJABBERD_DIR:-/tmp/headroom-ejabberd}
PORT=${HEADROOM_EJABBERD_PORT:-25222}
DIST_PORT=${HEADROOM_EJABBERD_DIST_PORT:-25223}
TLS_PORT=${HEADROOM_EJABBERD_TLS_PORT:-$((PORT + 2))}
BOSH_PORT=${HEADROOM_EJABBERD_BOSH_PORT:-$((PORT + 58))}
BOSH_TLS_PORT=${HEADROOM_EJABBERD_BOSH_TLS_PORT:-$((BOSH_PORT + 1))}
SCRIPTS=$(cd "$(dirname "$0")" && pwd)
PKI_DIR=${HEADROOM_PKI_DIR:-/tmp/headroom-pki}
DOMAIN=localhost
NODE=headroom-ejabberd@localhost
MIN_FDS=6500
ETC="$DIR/etc"
SPOOL="$DIR/spool"
LOGS="$DIR/logs"

say() { echo "ejabberd.sh: $*" >&2; }
die() { say "$*"; exit 1; }

url() { echo "127.0.0.1:$PORT"; }
bosh_url() { echo "http://127.0.0.1:$BOSH_PORT/bosh"; }
bosh_tls_url() { echo "https://127.0.0.1:$BOSH_TLS_PORT/bosh"; }
tls_url() { echo "127.0.0.1:$TLS_PORT"; }

install_ejabberd() {
  [ -x /usr/sbin/ejabberdctl ] && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  say "installing Debian's ejabberd"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq ejabberd >/dev/null
  [ -x /usr/sbin/ejabberdctl ] || die "ejabberd installed, but no /usr/sbin/ejabberdctl"
}

# The user the server runs as: Debian's "ejabberd" when we are root, ourselves otherwise.
owner() { if [ "$(id -u)" -eq 0 ]; then echo ejabberd; else id -un; fi; }

# Debian's ejabberdctl switches to the "ejabberd" user through su when called by root, and su's
# PAM session (pam_limits) resets the descriptor soft limit to 1,024. So as root it is run as
# "ejabberd" through setpriv (no PAM: the raised limit is inherited); anyone else runs it as
# themselves, through a copy without its "root or ejabberd only" check.
ctl_bin() {
  if [ "$(id -u)" -eq 0 ] || [ "$(id -un)" = ejabberd ]; then
    echo /usr/sbin/ejabberdctl
  else
    local copy="$DIR/bin/ejabberdctl"
    if [ ! -x "$copy" ] || [ /usr/sbin/ejabberdctl -nt "$copy" ]; then
      mkdir -p "$DIR/bin"
      sed 's/^INSTALLUSER=ejabberd$/INSTALLUSER=/' /usr/sbin/ejabberdctl >"$copy"
      chmod 755 "$copy"
    fi
    echo "$copy"
  fi
}

ctl() {
  local as=()
  if [ "$(id -u)" -eq 0 ]; then
    as=(setpriv --reuid=ejabberd --regid=ejabberd --init-groups env HOME="$DIR")
  fi
  (cd "$DIR" && "${as[@]}" "$(ctl_bin)" --config-dir "$ETC" --config "$ETC/ejabberd.yml" \
    --ctl-config "$ETC/ejabberdctl.cfg" --logs "$LOGS" --spool "$SPOOL" --node "$NODE" "$@")
}

cookie() { cat "$ETC/cookie"; }

write_config() {
  local own
  own=$(owner)
  mkdir -p "$ETC" "$SPOOL" "$LOGS"
  if [ ! -s "$ETC/cookie" ]; then
    # An Erlang cookie of 32 hex digits; anyone holding it controls the node, so it is 0600.
    od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$ETC/cookie"
  fi
  chmod 600 "$ETC/cookie"
  [ -f "$ETC/inetrc" ] || cp /etc/ejabberd/inetrc "$ETC/inetrc"
  # The test PKI's localhost certificate, and its CA (ca_file: ejabberd checks the chain).
  "$SCRIPTS/pki.sh" "$PKI_DIR" >/dev/null
  mkdir -p "$ETC/tls"
  cp "$PKI_DIR/localhost.pem" "$PKI_DIR/localhost.key" "$PKI_DIR/ca.pem" "$ETC/tls/"
  chmod 600 "$ETC/tls/localhost.key"
  local new="$ETC/ejabberd.yml.new"
  cat >"$new" <<EOF
# headroom's private ejabberd (written by scripts/ejabberd.sh; edits are overwritten)
hosts:
  - $DOMAIN
loglevel: warning
log_rotate_count: 1
log_rotate_size: 10485760
certfiles:
  - "$ETC/tls/localhost.pem"
  - "$ETC/tls/localhost.key"
ca_file: "$ETC/tls/ca.pem"
listen:
  -
    port: $PORT
    ip: "127.0.0.1"
    module: ejabberd_c2s
    max_stanza_size: 1048576
    shaper: c2s_shaper
    access: c2s
    starttls: true
    starttls_required: false
    backlog: 4096
    max_fsm_queue: 100000
  -
    port: $TLS_PORT
    ip: "127.0.0.1"
    module: ejabberd_c2s
    tls: true
    max_stanza_size: 1048576
    shaper: c2s_shaper
    access: c2s
    backlog: 4096
    max_fsm_queue: 100000
  -
    port: $BOSH_PORT
    ip: "127.0.0.1"
    module: ejabberd_http
    backlog: 4096
    request_handlers:
      /bosh: mod_bosh
  -
    port: $BOSH_TLS_PORT
    ip: "127.0.0.1"
    module: ejabberd_http
    tls: true
    backlog: 4096
    request_handlers:
      /bosh: mod_bosh
auth_method: [internal, anonymous]
auth_password_format: plain
anonymous_protocol: sasl_anon
allow_multiple_connections: true
registration_timeout: infinity
max_fsm_queue: 100000
acl:
  local:
    user_regexp: ""
  loopback:
    ip:
      - 127.0.0.0/8
access_rules:
  local:
    allow: local
  c2s:
    allow: all
  register:
    allow: all
api_permissions:
  "console commands":
    from:
      - ejabberd_ctl
    who: all
    what: "*"
shaper_rules:
  max_user_sessions: 100000
  max_user_offline_messages: 100000
  c2s_shaper: none
  s2s_shaper: none
modules:
  mod_bosh: {}
  mod_disco: {}
  mod_offline:
    access_max_user_messages: max_user_offline_messages
  mod_ping: {}
  mod_register:
    access: register
    ip_access: all
    password_strength: 0
    welcome_message: {}
  mod_roster: {}
EOF
  mv "$new" "$ETC/ejabberd.yml"
  cat >"$ETC/ejabberdctl.cfg" <<EOF
# headroom's private ejabberd (written by scripts/ejabberd.sh)
ERL_OPTIONS="-setcookie $(cookie) -env ERL_CRASH_DUMP_BYTES 0"
ERL_DIST_PORT=$DIST_PORT
INET_DIST_INTERFACE=127.0.0.1
ERL_MAX_PORTS=65536
EJABBERD_PID_PATH=$DIR/ejabberd.pid
EJABBERD_BYPASS_WARNINGS=true
EOF
  chown -R "$own": "$DIR" 2>/dev/null || true
  chmod 700 "$DIR"
  if [ "$own" != "$(id -un)" ]; then
    runuser -u "$own" -- test -w "$SPOOL" ||
      die "$own cannot write to $SPOOL (every parent directory must be searchable by $own); set HEADROOM_EJABBERD_DIR, e.g. under /tmp"
  fi
}

# The node's OS pid. ejabberd writes ejabberd.pid and deletes it early in its shutdown, while the
# VM still holds its ports; so start keeps a copy (node.pid), and a pid counts only while its
# command line still names our node (not a recycled pid).
pid() {
  local p f
  for f in "$DIR/node.pid" "$DIR/ejabberd.pid"; do
    p=$(cat "$f" 2>/dev/null) || continue
    [ -n "$p" ] && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "-sname $NODE " && { echo "$p"; return 0; }
  done
  return 1
}

running() {
  [ -f "$ETC/ejabberd.yml" ] || return 1
  pid >/dev/null || return 1
  ctl status >/dev/null 2>&1
}

raise_fd_limit() {
  local hard want
  hard=$(ulimit -Hn)
  want=65536
  if [ "$hard" != unlimited ] && [ "$hard" -lt "$want" ]; then want=$hard; fi
  ulimit -Sn "$want" 2>/dev/null || true
  local soft
  soft=$(ulimit -Sn)
  if [ "$soft" != unlimited ] && [ "$soft" -lt "$MIN_FDS" ]; then
    die "the descriptor limit is $soft (hard $hard): ejabberd needs at least $MIN_FDS for 6,000 connections; raise it (ulimit -Hn, /etc/security/limits.d) and start again"
  fi
}

start() {
  install_ejabberd
  if running; then
    if tls_port_open && bosh_port_open && bosh_tls_port_open; then
      say "already running on $(url) and $(tls_url) (TLS) (node $NODE)"
      url
      return 0
    fi
    # Started by an older version of this script, without the TLS or BOSH listener: restart it.
    say "running without its TLS listener on $(tls_url) or BOSH on $(bosh_url) or $(bosh_tls_url): restarting it with the new config"
    stop
  fi
  # A node left half-alive (pid file, no answer to status) is stopped first.
  if pid >/dev/null; then
    say "a previous node (pid $(pid)) does not answer; stopping it"
    stop
  fi
  local p
  for p in "$PORT" "$DIST_PORT" "$TLS_PORT" "$BOSH_PORT" "$BOSH_TLS_PORT"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      die "127.0.0.1:$p is taken by another process; free it, or set HEADROOM_EJABBERD_PORT / HEADROOM_EJABBERD_DIST_PORT / HEADROOM_EJABBERD_TLS_PORT / HEADROOM_EJABBERD_BOSH_PORT / HEADROOM_EJABBERD_BOSH_TLS_PORT"
    fi
  done
  write_config
  raise_fd_limit
  say "starting on $(url), domain $DOMAIN, node $NODE, fd limit $(ulimit -Sn) (logs: $LOGS)"
  local t0
  t0=$(date +%s.%N)
  ctl start >/dev/null 2>"$LOGS/start.err" || { cat "$LOGS/start.err" >&2; die "ejabberdctl start failed"; }
  for _ in $(seq 1 60); do
    if ctl status >/dev/null 2>&1 && port_open && tls_port_open && bosh_port_open && bosh_tls_port_open; then
      cp "$DIR/ejabberd.pid" "$DIR/node.pid" 2>/dev/null || true
      say "started in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s (pid $(pid || echo ?), open files limit $(fd_limit_of_pid))"
      url
      return 0
    fi
    sleep 0.5
  done
  tail -n 30 "$LOGS/ejabberd.log" >&2 || true
  if grep -q "eaddrinuse" "$LOGS/ejabberd.log" 2>/dev/null; then
    die "port $PORT (or $DIST_PORT) on 127.0.0.1 is taken; free it, or set HEADROOM_EJABBERD_PORT / HEADROOM_EJABBERD_DIST_PORT"
  fi
  die "ejabberd did not answer within a minute (log above)"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }
tls_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$TLS_PORT") 2>/dev/null; }
bosh_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$BOSH_PORT") 2>/dev/null; }
bosh_tls_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$BOSH_TLS_PORT") 2>/dev/null; }

fd_limit_of_pid() {
  local p
  p=$(pid) || { echo "?"; return; }
  awk '/Max open files/ {print $4}' "/proc/$p/limits" 2>/dev/null || echo "?"
}

# Waits (up to 20 s) until process $1 is gone, then kills it.
wait_gone() {
  for _ in $(seq 1 80); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.25
  done
  if kill -0 "$1" 2>/dev/null; then
    say "pid $1 still alive after 20 s: killing it"
    kill -9 "$1" 2>/dev/null || true
    sleep 0.5
  fi
  rm -f "$DIR/node.pid" "$DIR/ejabberd.pid"
}

stop() {
  local p
  p=$(pid) || { say "not running"; rm -f "$DIR/node.pid"; return 0; }
  if ctl status >/dev/null 2>&1; then
    say "stopping node $NODE (pid $p)"
    ctl stop >/dev/null 2>&1 || kill "$p" 2>/dev/null || true
  else
    say "stopping a node that does not answer (pid $p)"
    kill "$p" 2>/dev/null || true
  fi
  wait_gone "$p"
}

# One hidden Erlang node, connected to ours over distribution (the same cookie and port), that
# registers every user of the range in a single RPC batch per 500 users. Prints a summary and
# fails if any registration failed for another reason than "exists".
register() {
  local first=${1:-} last=${2:-}
  [[ "$first" =~ ^[0-9]+$ && "$last" =~ ^[0-9]+$ ]] || die "usage: register FIRST LAST (numbers)"
  [ "$first" -le "$last" ] || die "register: FIRST ($first) is above LAST ($last)"
  running || die "not running: run 'scripts/ejabberd.sh start' first"
  local t0 out
  t0=$(date +%s.%N)
  out=$(erl -sname "headroom-register-$$@localhost" -hidden -noinput -noshell \
    -setcookie "$(cookie)" -erl_epmd_port "$DIST_PORT" -start_epmd false -dist_listen false \
    -eval '
      Node = '"'$NODE'"',
      Host = <<"'"$DOMAIN"'">>,
      First = '"$first"', Last = '"$last"',
      Reg = fun(From, To) ->
        [begin
           N = integer_to_binary(I),
           case rpc:call(Node, ejabberd_auth, try_register,
                         [<<"user", N/binary>>, Host, <<"pass", N/binary>>], 60000) of
             ok -> new;
             {error, exists} -> exists;
             Other -> {I, Other}
           end
         end || I <- lists:seq(From, To)]
      end,
      Batches = [{S, min(S + 499, Last)} || S <- lists:seq(First, Last, 500)],
      Parent = self(),
      Pids = [spawn(fun() -> Parent ! {self(), Reg(A, B)} end) || {A, B} <- Batches],
      Results = lists:append([receive {P, R} -> R after 600000 -> [{P, timeout}] end || P <- Pids]),
      New = length([x || new <- Results]),
      Exists = length([x || exists <- Results]),
      Errors = [E || E <- Results, E =/= new, E =/= exists],
      io:format("new ~b exists ~b errors ~b~n", [New, Exists, length(Errors)]),
      [io:format("error ~p~n", [E]) || E <- lists:sublist(Errors, 5)],
      halt(case Errors of [] -> 0; _ -> 1 end).' 2>&1) ||
    { echo "$out" >&2; die "registering user$first..user$last failed"; }
  local t1
  t1=$(date +%s.%N)
  say "user$first..user$last ($out) in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') s"
}

# The node's session count every MS ms over one distribution connection (a hidden Erlang node,
# as register's), -1 when a call fails.
watch_sessions() {
  local ms=${1:-500}
  [[ "$ms" =~ ^[0-9]+$ ]] || die "usage: watch-sessions [MS]"
  running || die "not running: run 'scripts/ejabberd.sh start' first"
  exec erl -sname "headroom-watch-$$@localhost" -hidden -noinput -noshell \
    -setcookie "$(cookie)" -erl_epmd_port "$DIST_PORT" -start_epmd false -dist_listen false \
    -eval '
      Node = '"'$NODE'"',
      Count = fun() ->
        case rpc:call(Node, ejabberd_sm, connected_users_number, [], 5000) of
          N when is_integer(N) -> N;
          _ -> -1
        end
      end,
      Loop = fun L() ->
        io:format("~b\t~b~n", [erlang:system_time(millisecond), Count()]),
        timer:sleep('"$ms"'),
        L()
      end,
      Loop().'
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status)
    if running; then
      say "running on $(url) and $(tls_url) (TLS) (node $NODE, pid $(pid), open files limit $(fd_limit_of_pid))"
    else
      say "not running"
      exit 3
    fi
    ;;
  register) shift; register "$@" ;;
  url) url ;;
  tls-url) tls_url ;;
  bosh-url) bosh_url ;;
  bosh-tls-url) bosh_tls_url ;;
  sessions) running || die "not running"; ctl connected_users_number ;;
  watch-sessions) shift; watch_sessions "$@" ;;
  *)
    echo "usage: scripts/ejabberd.sh start|stop|status|register FIRST LAST|url|tls-url|bosh-url|bosh-tls-url|sessions  (HEADROOM_EJABBERD_DIR, HEADROOM_EJABBERD_PORT, HEADROOM_EJABBERD_TLS_PORT, HEADROOM_EJABBERD_BOSH_PORT, HEADROOM_EJABBERD_BOSH_TLS_PORT)" >&2
    exit 2
    ;;
esac
