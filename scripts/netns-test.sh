#!/usr/bin/env bash
# Test of scripts/netns.sh on this machine (needs root; it creates and removes namespaces
# hr-agent-1..2 and the bridge hr-br0, nothing else):
#   sudo scripts/netns-test.sh
# Checks: ping both ways between the root namespace and each namespace; TCP from the root
# namespace to a listener in namespace 1, from namespace 1 to a listener in the root namespace
# (agents loading a server), and between namespaces; no route out of the machine; `down` removes
# everything, leftovers included, and is idempotent; a foreign hr-br0 is refused and kept.
# Exit 0 when every check passes; the first failure says which.
set -euo pipefail
cd "$(dirname "$0")/.."
NS=scripts/netns.sh

fail() {
  echo "netns-test: FAIL: $*" >&2
  exit 1
}
[ "$(id -u)" -eq 0 ] || fail "needs root (it creates network namespaces): sudo $0"
command -v ping >/dev/null || fail "needs ping (Debian: apt-get install iputils-ping)"
command -v python3 >/dev/null || fail "needs python3"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  $NS down >/dev/null 2>&1 || true
}
trap cleanup EXIT

ok() { echo "netns-test: ok: $*"; }

# A TCP server on ADDR:PORT that answers one line, run by the command prefix in $1 ("" = root).
serve() {
  local where="$1" addr="$2" port="$3" word="$4"
  # shellcheck disable=SC2086
  $where python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(8)
while True:
    c, _ = s.accept(); c.sendall(sys.argv[3].encode() + b"\n"); c.close()
' "$addr" "$port" "$word" &
  pids+=($!)
}

# Connect to ADDR:PORT from the command prefix in $1 and expect WORD, retrying for ~5 s.
expect_tcp() {
  local where="$1" addr="$2" port="$3" word="$4" got=""
  for _ in $(seq 1 50); do
    # shellcheck disable=SC2086
    got=$($where python3 -c '
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1)
    print(c.makefile().readline().strip())
except OSError:
    pass
' "$addr" "$port") || true
    [ "$got" = "$word" ] && return 0
    sleep 0.1
  done
  fail "TCP to $addr:$port from ${where:-the root namespace}: got '${got}', wanted '$word'"
}

$NS up 2 >/dev/null
[ "$($NS ip 1)" = 10.203.0.11 ] || fail "ip 1 is $($NS ip 1)"
[ "$($NS ip 2)" = 10.203.0.12 ] || fail "ip 2 is $($NS ip 2)"
[ "$(ip netns list | grep -c '^hr-agent-')" -eq 2 ] || fail "not 2 namespaces: $(ip netns list)"
ok "up 2"

for i in 1 2; do
  a=$($NS ip "$i")
  ping -c1 -W2 "$a" >/dev/null || fail "ping $a from the root namespace"
  $NS exec "$i" ping -c1 -W2 10.203.0.1 >/dev/null || fail "ping 10.203.0.1 from namespace $i"
  $NS exec "$i" ip -o link show lo | grep -q "UP" || fail "loopback down in namespace $i"
done
ok "ping root <-> each namespace"

serve "$NS exec 1" 10.203.0.11 18081 ns1
expect_tcp "" 10.203.0.11 18081 ns1
ok "TCP root -> listener in namespace 1"
expect_tcp "$NS exec 2" 10.203.0.11 18081 ns1
ok "TCP namespace 2 -> namespace 1"
serve "" 10.203.0.1 18082 root
expect_tcp "$NS exec 1" 10.203.0.1 18082 root
ok "TCP namespace 1 -> listener in the root namespace"

if $NS exec 1 ip route get 192.0.2.1 >/dev/null 2>&1 || $NS exec 1 ip route get 1.1.1.1 >/dev/null 2>&1; then
  fail "namespace 1 has a route out of the machine"
fi
ok "no route out of the machine"

for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()

# A leftover of a crashed run: a namespace without its veth pair.
ip netns add hr-agent-7
$NS down
$NS down
[ -z "$(ip netns list | grep '^hr-agent-' || true)" ] || fail "namespaces left: $(ip netns list)"
[ -z "$(ip -o link show | grep -E ': hr-(br0|veth-)' || true)" ] || fail "links left"
ok "down removes everything, leftovers included, and is idempotent"

# A bridge named hr-br0 that is not ours is refused and kept.
ip link add hr-br0 type bridge
if $NS up 1 2>/tmp/netns-test.err; then
  ip link delete hr-br0
  fail "up went on over a foreign hr-br0"
fi
[ -e /sys/class/net/hr-br0 ] || fail "the foreign hr-br0 was deleted"
ip link delete hr-br0
grep -q "not" /tmp/netns-test.err || fail "no reason given: $(cat /tmp/netns-test.err)"
ok "a foreign hr-br0 is refused and left alone"

$NS exec 0 true 2>/dev/null && fail "exec 0 accepted"
ok "bad index refused"
echo "netns-test: all checks passed"
