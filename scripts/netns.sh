#!/usr/bin/env bash
# Separate "hosts" on this machine for distributed-run tests: network namespaces on one bridge.
#
#   scripts/netns.sh up N        create N namespaces hr-agent-1..N (runs `down` first)
#   scripts/netns.sh down        remove them all, and any leftover of an earlier run (idempotent)
#   scripts/netns.sh exec I CMD  run CMD inside namespace I (as root, like `ip netns exec`)
#   scripts/netns.sh ip I        print namespace I's address
#   scripts/netns.sh status      list what exists now
#
# Addresses (10.203.0.0/24, private):
#   root namespace:  10.203.0.1/24 on the bridge hr-br0
#   namespace I:     10.203.0.(10+I)/24 on its eth0 (I = 1..200), loopback up
# Each namespace is joined to hr-br0 by a veth pair whose root end is hr-veth-I. A namespace
# has no default route: it reaches the root namespace (10.203.0.1) and the other namespaces, and
# nothing else, so traffic stays on this machine. A server the agents load listens on
# 10.203.0.1 (or 0.0.0.0) in the root namespace; an agent in namespace I listens on 10.203.0.(10+I).
# This satisfies the project's rule that load only goes to 127.0.0.0/8, ::1, or a namespace the
# test made itself.
#
# Safety: only names starting with hr- are touched, and links only if they carry this script's
# alias (hr-br0 and hr-veth-*); `up` refuses when 10.203.0.0/24 is already routed elsewhere or an
# hr-br0 exists that this script did not make. Needs root (CAP_NET_ADMIN): sudo scripts/netns.sh.
set -euo pipefail

PREFIX=hr-agent-
BRIDGE=hr-br0
VETH=hr-veth-
NET=10.203.0
ALIAS=headroom-netns
MAX=200

die() {
  echo "netns.sh: $*" >&2
  exit 1
}

need_root() {
  [ "$(id -u)" -eq 0 ] || die "needs root to create network namespaces: sudo $0 $*"
  command -v ip >/dev/null || die "needs the ip command (Debian: apt-get install iproute2)"
}

index_ok() {
  if ! [[ "$1" =~ ^[0-9]+$ ]] || [ "$1" -lt 1 ] || [ "$1" -gt "$MAX" ]; then
    die "'$1' is not a namespace index; use 1..$MAX"
  fi
}

# Namespaces named hr-agent-<digits>.
namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}[0-9]+$" || true
}

# Links in the root namespace named hr-* that carry our alias.
our_links() {
  local l
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
    grep -E "^(${BRIDGE}|${VETH}[0-9]+)$" || true); do
    if [ "$(cat "/sys/class/net/$l/ifalias" 2>/dev/null)" = "$ALIAS" ]; then
      echo "$l"
    fi
  done
}

cmd_down() {
  need_root down
  local ns l
  for ns in $(namespaces); do
    ip netns delete "$ns" # deleting a namespace deletes its veth end, and so the pair
  done
  for l in $(our_links); do
    [ "$l" = "$BRIDGE" ] && continue
    ip link delete "$l" 2>/dev/null || true
  done
  if [ -e "/sys/class/net/$BRIDGE" ]; then
    if [ "$(cat "/sys/class/net/$BRIDGE/ifalias" 2>/dev/null)" = "$ALIAS" ]; then
      ip link delete "$BRIDGE"
    else
      echo "netns.sh: leaving $BRIDGE alone: this script did not create it" >&2
    fi
  fi
}

cmd_up() {
  local n="${1:-}"
  [ -n "$n" ] || die "usage: $0 up N"
  index_ok "$n"
  need_root up "$n"
  cmd_down
  [ -e "/sys/class/net/$BRIDGE" ] && die "$BRIDGE exists and is not ours; remove it or pick another machine"
  if ip -4 route show | grep -qE "^${NET//./\\.}\.0/24"; then
    die "${NET}.0/24 is already routed on this machine ($(ip -4 route show | grep -E "^${NET//./\\.}\.0/24")); refusing to overlap it"
  fi
  ip link add "$BRIDGE" type bridge
  ip link set "$BRIDGE" alias "$ALIAS"
  ip addr add "${NET}.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  local i ns
  for i in $(seq 1 "$n"); do
    ns="${PREFIX}${i}"
    ip netns add "$ns"
    ip link add "${VETH}${i}" type veth peer name eth0 netns "$ns"
    ip link set "${VETH}${i}" alias "$ALIAS"
    ip link set "${VETH}${i}" master "$BRIDGE"
    ip link set "${VETH}${i}" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "${NET}.$((10 + i))/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
  # Wait until each namespace's link is up (IPv4 needs no duplicate address detection).
  for i in $(seq 1 "$n"); do
    for _ in $(seq 1 50); do
      ip -n "${PREFIX}${i}" -o link show eth0 | grep -q "LOWER_UP" && break
      sleep 0.1
    done
  done
  echo "netns.sh: $n namespaces up: root ${NET}.1 on $BRIDGE; ${PREFIX}I at ${NET}.(10+I)"
}

cmd_exec() {
  local i="${1:-}"
  if [ -z "$i" ] || [ "$#" -lt 2 ]; then
    die "usage: $0 exec I CMD [ARGS...]"
  fi
  index_ok "$i"
  shift
  need_root exec "$i" "$@"
  ip netns list | awk '{print $1}' | grep -qx "${PREFIX}${i}" ||
    die "namespace ${PREFIX}${i} does not exist; run: $0 up N"
  exec ip netns exec "${PREFIX}${i}" "$@"
}

cmd_ip() {
  local i="${1:-}"
  [ -n "$i" ] || die "usage: $0 ip I"
  index_ok "$i"
  echo "${NET}.$((10 + i))"
}

cmd_status() {
  echo "namespaces: $(namespaces | tr '\n' ' ')"
  echo "links:      $(our_links | tr '\n' ' ')"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  exec) shift; cmd_exec "$@" ;;
  ip) shift; cmd_ip "$@" ;;
  status) cmd_status ;;
  *)
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
