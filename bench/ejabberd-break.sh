#!/usr/bin/env bash
# ejabberd loaded past its descriptor limit by headroom's agents: does headroom's
# `connections_peak` (connections the server *served*: it sent its stream header) match the
# server's own count of sessions, and `tcp_connected_peak` show what sat in its accept queue?
# (Issue 26: before, `connections_peak` counted TCP handshakes the kernel completed into a full
# accept queue: 23,042 "connections" against 19,962 ejabberd sessions.)
#
#   bench/ejabberd-break.sh            24,000 XMPP users: 200/s for 90 s, then 50/s for 120 s
#   USERS=... FAST_S=... FAST_RATE=... SLOW_RATE=... AGENTS=2 bench/ejabberd-break.sh
#
# A private ejabberd (scripts/ejabberd.sh, its own directory and ports 25262/25263, the shared
# test instance on 25222 is left alone) is restarted with an empty spool, and users
# 1..USERS registered. Its descriptor limit is the machine's hard limit (20,000 here), so it
# cannot hold USERS sessions. headroom runs the users from AGENTS local agents (one process
# cannot hold more than 20,000 descriptors either): each logs in, sends its presence and stays.
# Every 250 ms the script asks ejabberd for its own session count (`ejabberd_sm:
# connected_users_number()`, over one Erlang distribution connection made before the load:
# `scripts/ejabberd.sh watch-sessions`; ejabberdctl cannot connect to a node out of
# descriptors), and every second counts the server side's established sockets, those ejabberd
# accepted (owned by its process) and all (the accept queue included); it prints the peaks
# beside headroom's, and their ratio. The slow phase (50/s near the limit) keeps the
# sampling's granularity far under 1% of the peak.
#
# Needs: ejabberd (scripts/ejabberd.sh installs it), jq, a built headroom (HEADROOM=... or
# target/release/headroom). Takes ~5 minutes. Every connection goes to 127.0.0.1.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HEADROOM=${HEADROOM:-$ROOT/target/release/headroom}
FAST_RATE=${FAST_RATE:-200} FAST_S=${FAST_S:-90} SLOW_RATE=${SLOW_RATE:-50} SLOW_S=${SLOW_S:-120}
USERS=$((FAST_RATE * FAST_S + SLOW_RATE * SLOW_S))
AGENTS=${AGENTS:-2}
export HEADROOM_EJABBERD_DIR=${EJABBERD_DIR:-/tmp/headroom-break-ejabberd}
export HEADROOM_EJABBERD_PORT=${XMPP_PORT:-25262}
export HEADROOM_EJABBERD_DIST_PORT=$((HEADROOM_EJABBERD_PORT + 1))
export HEADROOM_EJABBERD_TLS_PORT=$((HEADROOM_EJABBERD_PORT + 2))
EJ=$ROOT/scripts/ejabberd.sh
OUT=${OUT:-$(mktemp -d /tmp/ejabberd-break.XXXXXX)}
log() { echo "# $*" >&2; }
[[ -x $HEADROOM ]] || { echo "no headroom binary at $HEADROOM (cargo build --release -p headroom)" >&2; exit 2; }

"$EJ" stop >/dev/null 2>&1 || true
rm -rf "$HEADROOM_EJABBERD_DIR/spool"
"$EJ" start >/dev/null
trap '"$EJ" stop >/dev/null 2>&1 || true' EXIT
"$EJ" register 1 "$USERS"
pid=$(cat "$HEADROOM_EJABBERD_DIR/node.pid" 2>/dev/null || cat "$HEADROOM_EJABBERD_DIR/ejabberd.pid")
limit=$(awk '/Max open files/ { print $4 }' "/proc/$pid/limits")
log "ejabberd pid $pid may open $limit descriptors; $USERS users arrive ($FAST_RATE/s for ${FAST_S}s, then $SLOW_RATE/s for ${SLOW_S}s) from $AGENTS agents"

cat >"$OUT/break.yaml" <<YAML
name: ejabberd-break
servers: [{host: 127.0.0.1, port: $HEADROOM_EJABBERD_PORT, protocol: xmpp}]
xmpp: {domain: localhost, users: {first: 1, last: $USERS}, username: user, password: pass}
load:
  phases:
    - {duration: ${FAST_S}s, arrival_rate: $FAST_RATE, arrival: constant}
    - {duration: ${SLOW_S}s, arrival_rate: $SLOW_RATE, arrival: constant}
sessions:
  - name: stay
    steps:
      - xmpp: presence:initial
      - think: 3600s
YAML

# The server's own counts until the run ends: its sessions (one distribution connection), and
# its sockets every second: accepted (owned by a process) and established (queue included).
"$EJ" watch-sessions 250 >"$OUT/sessions.tsv" 2>"$OUT/watch.err" &
WATCH=$!
sleep 3
: >"$OUT/server.tsv"
(
    while [[ ! -e $OUT/done ]]; do
        ss -Htnp state established "( sport = :$HEADROOM_EJABBERD_PORT )" >"$OUT/ss.now"
        printf '%s\t%s\t%s\n' "$(date +%s)" "$(grep -c 'pid=' "$OUT/ss.now")" "$(wc -l <"$OUT/ss.now")" >>"$OUT/server.tsv"
        sleep 1
    done
) &
SAMPLER=$!
dur=$((FAST_S + SLOW_S + 10))
set +e
"$HEADROOM" run "$OUT/break.yaml" --agents "local:$AGENTS" -d "${dur}s" --out "$OUT/run" --quiet \
    >"$OUT/run.out" 2>"$OUT/run.err"
rc=$?
set -e
touch "$OUT/done"
wait $SAMPLER
kill $WATCH 2>/dev/null; wait $WATCH 2>/dev/null || true
s=$OUT/run/summary.json
[[ -s $s ]] || { cat "$OUT/run.err" >&2; exit 1; }
alive=$(kill -0 "$pid" 2>/dev/null && echo yes || echo no)
sess_peak=$(awk -F'\t' '$2 > s { s = $2 } END { print s + 0 }' "$OUT/sessions.tsv")
failed=$(awk -F'\t' '$2 < 0 { n++ } END { print n + 0 }' "$OUT/sessions.tsv")
samples=$(wc -l <"$OUT/sessions.tsv")
read -r held_peak est_peak < <(awk -F'\t' '$2 > h { h = $2 } $3 > e { e = $3 } END { print h + 0, e + 0 }' "$OUT/server.tsv")
served=$(jq '.connections_peak' "$s")
tcp=$(jq '.tcp_connected_peak' "$s")
logins=$(jq '.scenario.protocol.xmpp.logins // 0' "$s")
echo "headroom exit $rc; ejabberd still running: $alive; descriptor limit $limit"
echo "ejabberd sessions peak (its own count, $samples samples every 250 ms, $failed failed): $sess_peak"
echo "ejabberd accepted sockets peak (ss, owned by its process):    $held_peak"
echo "established sockets peak (ss, server side, queue included):   $est_peak"
echo "headroom connections_peak (served):                           $served"
echo "headroom tcp_connected_peak (TCP handshakes, queue included):  $tcp"
echo "headroom xmpp logins:                                          $logins"
awk -v a="$served" -v b="$sess_peak" 'BEGIN { printf "served / ejabberd sessions: %.4f (%+.2f%%)\n", a / b, (a / b - 1) * 100 }'
echo "files: $OUT"
