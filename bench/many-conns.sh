#!/usr/bin/env bash
# bench/many-conns.sh — hold CONNS (default 200,000) idle TCP connections at once on one machine,
# headroom against headroom's own server, and say what each connection costs on both sides and
# how long it took to establish them all (issue 8).
#
# Usage: bench/many-conns.sh [-h|--help]      (everything else is environment, below)
#
# Why several processes: one process may hold at most 20,000 descriptors here (a hard limit that
# cannot be raised), so both sides are split into processes of at most PER_PROC connections:
#   server     SERVERS x `headroom serve --arch reactor --poller epoll --workers 1` all listening
#              on 127.0.0.1:PORT (the reactor always sets SO_REUSEPORT, so processes of the same
#              uid share the port and the kernel spreads the connections over their listeners);
#   generator  `headroom run URL --agents local:AGENTS -c CONNS` when `headroom run --help`
#              mentions --agents (the controller splits the load over child agents); otherwise
#              AGENTS separate `headroom run -c CONNS/AGENTS` processes (the output says which).
# Every user connects, sends one `GET /`, reads the reply and then thinks for an hour on its
# keep-alive connection (IDLE=request; IDLE=connect sends nothing): an idle connection, cheap on
# both sides (no timer firing before the run ends, no buffer held: the reactor keeps ~100 B per
# idle connection, the generator ~200 B besides its per-process baseline).
# Source addresses: ADDRS (default 127.1.0.1 and up, one address per 4,000 connections), with
# IP_BIND_ADDRESS_NO_PORT, so each (source address, 127.0.0.1:PORT) pair uses few of the
# ~28,000 ephemeral ports and connect() never has to search a nearly full port range.
#
# What it measures:
#   * time to establish: from starting the generator to the servers holding CONNS connections
#     (the sum of their open descriptors, minus what they had idle), counted every 0.1 s; also
#     when 50% and 90% were held; the rate is CONNS / time;
#   * held at once: connections in state ESTABLISHED on the server side (`ss sport = :PORT`)
#     and the client side (`dport`), at the start and at the end of a HOLD-second window; the
#     figure judged is the smallest server-side count of the two;
#   * memory per connection, at the end of the window: generator processes' summed VmRSS /
#     connections, server processes' summed VmRSS / connections (and minus the servers' RSS
#     before the load); kernel: /proc/net/sockstat "TCP: mem" (pages charged to tcp_mem: socket
#     buffers, both ends) and the growth of /proc/meminfo Slab (socket structs, files, dentries,
#     epoll items, both ends; other work on the machine adds noise), each / connections;
#   * CPU: utime + stime of each side's processes while establishing and during the hold;
#   * SYN and accept-queue trouble over the run: nstat TcpExtListenOverflows, ListenDrops,
#     SyncookiesSent, TCPReqQFullDrop, TCPBacklogDrop, TCPSynRetrans, and the packets dropped
#     at the per-CPU input queues (/proc/net/softnet_stat; these counters are machine-wide).
#
# System settings (SYSCTL=1, needs root): raised for the run and put back at exit, never
# lowered: net.core.somaxconn and net.ipv4.tcp_max_syn_backlog to 65535 (servers listen with
# --backlog 65535), net.core.netdev_max_backlog to 65536 (loopback SYNs queue there), fs.file-max
# to 2*CONNS + 500,000, net.netfilter.nf_conntrack_max to 2*CONNS + 100,000 when conntrack is
# loaded. The soft descriptor limit is raised to the hard one.
# net.ipv4.ip_local_port_range is left alone (the source addresses give the ports).
#
# Environment (defaults):
#   CONNS=200000     connections to hold at once
#   PER_PROC=17000   most connections per process (fd limit 20,000; SO_REUSEPORT spreads unevenly)
#   SERVERS, AGENTS  processes per side: ceil(CONNS / PER_PROC) each
#   HOLD=30          seconds to hold them all once established (sampled at start and end)
#   RAMP_MAX         seconds allowed to establish them all: max(120, CONNS / 1000)
#   ADDRS            source addresses, headroom run --bind syntax: 127.1.0.1-... (CONNS / 4000 + 1)
#   MODE=auto        agents | procs | auto (agents when this headroom has --agents)
#   IDLE=request     request: each user sends one GET / and then thinks on its keep-alive
#                    connection (quick mode; proves every connection carries HTTP; least
#                    generator memory, ~0.75 KiB per connection with the processes' own);
#                    connect: a scenario whose session is `connect` then `think: 3600s`: nothing
#                    is sent, about 20% less CPU to establish, but ~0.6 KiB more generator RSS
#                    per connection (a session's state)
#   THREADS=1        the generator's -t per process; WORKERS=1 the server's --workers per process
#   SYSCTL=1         0: change no system setting (then they must already allow CONNS)
#   MEM_CHECK=1      0: start even if CONNS x 12 KiB exceeds MemAvailable less 4 GiB
#   PORT             a free port in 20000-31999
#   HEADROOM=$CARGO_TARGET_DIR/release/headroom or target/release/headroom
#   OUT_DIR=bench/runs/<YYYY-MM-DD>-<host>   many-conns.{txt,json,csv,commands,versions}, .raw/
#
# Exit status: 0 CONNS connections were held at once; 1 fewer were; 2 bad settings or a missing
# tool. Bounded: RAMP_MAX + HOLD + the stopping (at most ~70 s + CONNS / 20,000 s).
#
# All traffic stays on 127.0.0.0/8. Every process the script starts is stopped at exit.

# shellcheck disable=SC2317 # the cleanup functions run from lib.sh's EXIT trap
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n '2,/^$/{s/^# \{0,1\}//;p}' "$0"
    exit 0
fi
if [[ $# -gt 0 ]]; then
    echo "error: no arguments besides --help; settings are environment variables (see --help)" >&2
    exit 2
fi

BENCH_ROOT=$(cd "$(dirname "$0")/.." && pwd)
HEADROOM=${HEADROOM:-${CARGO_TARGET_DIR:-$BENCH_ROOT/target}/release/headroom}
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"

# Many processes per side share the two cores: no pinning (lib.sh's SERVER_PIN/GEN_PIN unused,
# and record_versions says so).
SERVER_PIN=() GEN_PIN=()

usage_die() { echo "error: $*" >&2; exit 2; }
is_int() { [[ $1 =~ ^[0-9]+$ ]]; }
ceil_div() { echo $((($1 + $2 - 1) / $2)); }

# --- settings ----------------------------------------------------------------------------------

CONNS=${CONNS:-200000}
PER_PROC=${PER_PROC:-17000}
SERVERS=${SERVERS:-$(ceil_div "$CONNS" "$PER_PROC")}
AGENTS=${AGENTS:-$(ceil_div "$CONNS" "$PER_PROC")}
HOLD=${HOLD:-30}
RAMP_MAX=${RAMP_MAX:-$((CONNS / 1000 > 120 ? CONNS / 1000 : 120))}
MODE=${MODE:-auto}
IDLE=${IDLE:-request}
THREADS=${THREADS:-1}
WORKERS=${WORKERS:-1}
SYSCTL=${SYSCTL:-1}
for v in CONNS PER_PROC SERVERS AGENTS HOLD RAMP_MAX THREADS WORKERS; do
    if ! is_int "${!v}" || ((${!v} == 0)); then usage_die "$v must be a positive integer: ${!v}"; fi
done
[[ $MODE == auto || $MODE == agents || $MODE == procs ]] || usage_die "MODE must be auto, agents or procs: $MODE"
[[ $IDLE == request || $IDLE == connect ]] || usage_die "IDLE must be request or connect: $IDLE"
[[ $SYSCTL == 0 || $SYSCTL == 1 ]] || usage_die "SYSCTL must be 0 or 1: $SYSCTL"

FD_HARD=$(ulimit -Hn)
[[ $FD_HARD == unlimited ]] && FD_HARD=1048576
ulimit -Sn "$FD_HARD" 2>/dev/null || true
# A process needs its connections plus ~50 descriptors of its own.
for side in SERVERS AGENTS; do
    per=$(ceil_div "$CONNS" "${!side}")
    ((per + 50 <= FD_HARD)) ||
        usage_die "$side=${!side}: $per connections per process, above the descriptor limit $FD_HARD; use more processes"
done

if [[ -z ${ADDRS:-} ]]; then
    n_addrs=$((CONNS / 4000 + 1))
    last=$(((127 << 24) + (1 << 16) + n_addrs))
    ADDRS=127.1.0.1-$((last >> 24)).$(((last >> 16) & 255)).$(((last >> 8) & 255)).$((last & 255))
fi
IFS=',-' read -ra addr_list <<<"$ADDRS"
for a in "${addr_list[@]}"; do
    [[ $a =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || usage_die "ADDRS must be loopback addresses (127.x.y.z): $ADDRS"
done
ip_num() { local IFS=.; read -r a b c d <<<"$1"; echo $(((a << 24) + (b << 16) + (c << 8) + d)); }
if [[ $ADDRS == *-* ]]; then
    n_addrs=$(($(ip_num "${addr_list[1]}") - $(ip_num "${addr_list[0]}") + 1))
else
    n_addrs=${#addr_list[@]}
fi
# Each (source address, 127.0.0.1:PORT) pair has the ephemeral range's ports; stay well inside.
read -r port_lo port_hi </proc/sys/net/ipv4/ip_local_port_range
((n_addrs > 0 && CONNS / n_addrs <= (port_hi - port_lo) * 3 / 4)) ||
    usage_die "ADDRS ($n_addrs addresses) gives $((port_hi - port_lo + 1)) ports each; $CONNS connections need more addresses"

# Memory: ~10 KiB of kernel memory per connection (both sockets, files, epoll items; measured
# here) and ~1.3 KiB of the processes'. Leave 4 GiB to whoever else uses the machine.
NEED_KB=$((CONNS * 12))
AVAIL_KB=$(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo)
if ((NEED_KB > AVAIL_KB - 4 * 1048576)) && [[ ${MEM_CHECK:-1} == 1 ]]; then
    usage_die "$CONNS connections need ~$((NEED_KB / 1048576)) GiB; $((AVAIL_KB / 1048576)) GiB available, less 4 GiB kept free (MEM_CHECK=0 skips this)"
fi

for c in ss nstat awk stat ps renice jq; do
    command -v "$c" >/dev/null || usage_die "$c is missing (Debian: apt-get install -y iproute2 procps coreutils jq)"
done
have_headroom || usage_die "headroom binary not found at $HEADROOM (cargo build --release -p headroom)"
"$HEADROOM" serve --help 2>/dev/null | grep -q -- --poller || usage_die "$HEADROOM has no 'serve --poller'"

RUN_HELP=$("$HEADROOM" run --help 2>/dev/null || true)
HAS_AGENTS=0
grep -q -- --agents <<<"$RUN_HELP" && HAS_AGENTS=1
if [[ $MODE == auto ]]; then
    if ((HAS_AGENTS)); then MODE=agents; else MODE=procs; fi
fi
[[ $MODE == agents ]] && ! ((HAS_AGENTS)) && usage_die "MODE=agents, but '$HEADROOM run --help' has no --agents"

# --- run directory -----------------------------------------------------------------------------

NAME=many-conns
WORK=$(mktemp -d /tmp/headroom-many-conns.XXXXXX)
on_exit "rm -rf '$WORK'"
cd "$WORK" || exit
snapshot_headroom "$WORK"
OUT=${OUT_DIR:-$(run_dir)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
RAW=$OUT/$NAME.raw
rm -rf "$RAW" && mkdir -p "$RAW"
CSV=$OUT/$NAME.csv
echo "t_s,phase,server_held,server_fds,gen_rss_kb,srv_rss_kb,gen_cpu_s,srv_cpu_s,tcp_inuse,tcp_mem_pages,slab_kb" >"$CSV"
: >"$OUT/$NAME.commands"
record_versions "$OUT/$NAME.versions"
{
    echo "mode: $MODE (headroom run --agents: $( ((HAS_AGENTS)) && echo present || echo absent))"
    echo "descriptor limit: $(ulimit -Sn) soft, $FD_HARD hard"
    echo "mem: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
} >>"$OUT/$NAME.versions"

PORT=${PORT:-$(free_port)}
URL="http://127.0.0.1:$PORT/"

# --- system settings, put back at exit ---------------------------------------------------------

SYSCTL_SAVED=()
restore_sysctls() {
    local kv
    for kv in "${SYSCTL_SAVED[@]}"; do
        sysctl -q -w "$kv" >/dev/null 2>&1 || log "could not restore $kv"
    done
    SYSCTL_SAVED=()
}
on_exit restore_sysctls
# raise KEY VALUE — set a one-number sysctl to VALUE if it is lower now.
raise() {
    local key=$1 want=$2 f cur
    f=/proc/sys/${key//.//}
    [[ -f $f ]] || return 0
    cur=$(cat "$f")
    ((cur >= want)) && return 0
    sysctl -q -w "$key=$want" >/dev/null || die "cannot set $key=$want (SYSCTL=0 to leave settings alone)"
    SYSCTL_SAVED+=("$key=$cur")
    log "sysctl $key: $cur -> $want (restored at exit)"
}
if ((SYSCTL)); then
    raise net.core.somaxconn 65535
    raise net.ipv4.tcp_max_syn_backlog 65535
    # Loopback hands every packet to the per-CPU input queue; a generator issuing thousands of
    # connects in one turn overflows the default 1,000 (softnet_stat drops, then SYN resends).
    raise net.core.netdev_max_backlog 65536
    raise fs.file-max $((2 * CONNS + 500000))
    raise net.netfilter.nf_conntrack_max $((2 * CONNS + 100000))
fi
{
    for k in net.core.somaxconn net.ipv4.tcp_max_syn_backlog net.core.netdev_max_backlog fs.file-max fs.nr_open \
        net.ipv4.ip_local_port_range net.ipv4.tcp_mem net.ipv4.tcp_syncookies \
        net.netfilter.nf_conntrack_max; do
        [[ -f /proc/sys/${k//.//} ]] && echo "$k = $(tr '\t' ' ' <"/proc/sys/${k//.//}")"
    done
} >>"$OUT/$NAME.versions"

# --- process bookkeeping -----------------------------------------------------------------------

SERVER_PIDS=()
GEN_PIDS=()
# tree PID... — the pids and all their descendants that are still alive (one ps call).
tree() {
    (($#)) || return 0
    ps -e -o pid=,ppid= | awk -v roots="$*" '
        BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) want[r[i]] = 1 }
        { parent[$1] = $2 }
        END {
            do {
                grew = 0
                for (p in parent) if (!(p in want) && (parent[p] in want)) { want[p] = 1; grew = 1 }
            } while (grew)
            for (p in want) if (p in parent) print p
        }'
}
kill_all() {
    local p
    for p in $(tree "${GEN_PIDS[@]}" "${SERVER_PIDS[@]}"); do kill -KILL "$p" 2>/dev/null || true; done
    for p in "${GEN_PIDS[@]}" "${SERVER_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    GEN_PIDS=() SERVER_PIDS=()
}
on_exit kill_all

# The sums below read /proc files of processes that may exit meanwhile: a file gone counts 0
# (and must not fail the pipeline: pipefail and set -e would end the script). Each is a few
# forks whatever the number of processes: during the ramp the cores are saturated, and a fork
# per process made a sample take seconds.
# proc_files NAME PID... — /proc/PID/NAME for each PID, in PROC_FILES
proc_files() {
    local name=$1 p
    shift
    PROC_FILES=()
    for p in "$@"; do PROC_FILES+=("/proc/$p/$name"); done
}
# sum_status KEY PID... — summed /proc/PID/status field (kB)
sum_status() {
    local key=$1
    shift
    proc_files status "$@"
    ((${#PROC_FILES[@]})) || { echo 0; return; }
    { cat "${PROC_FILES[@]}" 2>/dev/null || true; } | awk -v k="$key:" '$1 == k { s += $2 } END { print s + 0 }'
}
# sum_fds PID... — open descriptors of these processes: the size of /proc/PID/fd (Linux 6.2+
# reports the count there). Listing the directory instead would cost seconds at 200,000 and
# leave a dentry and an inode per descriptor in the Slab this script measures.
sum_fds() {
    proc_files fd "$@"
    ((${#PROC_FILES[@]})) || { echo 0; return; }
    { stat -c %s "${PROC_FILES[@]}" 2>/dev/null || true; } | awk '{ s += $1 } END { print s + 0 }'
}
TCK=$(getconf CLK_TCK)
# sum_cpu PID... — utime + stime in seconds (fields 14, 15 of /proc/PID/stat, after the ')')
sum_cpu() {
    proc_files stat "$@"
    ((${#PROC_FILES[@]})) || { echo 0.00; return; }
    { cat "${PROC_FILES[@]}" 2>/dev/null || true; } | sed 's/.*) //' |
        awk -v t="$TCK" '{ s += $12 + $13 } END { printf "%.2f", s / t }'
}
sockstat() { awk -v f="$1" '$1 == "TCP:" { for (i = 2; i < NF; i++) if ($i == f) print $(i + 1) }' /proc/net/sockstat; }
slab_kb() { awk '$1 == "Slab:" { print $2 }' /proc/meminfo; }
established() { ss -Htn state established "( $1 = :$PORT )" | wc -l; }
NSTAT_KEYS=(TcpExtListenOverflows TcpExtListenDrops TcpExtSyncookiesSent TcpExtTCPReqQFullDrop
    TcpExtTCPSynRetrans TcpExtTCPBacklogDrop)
nstat_now() {
    nstat -asz "${NSTAT_KEYS[@]}" 2>/dev/null | awk '!/^#/ { print $1 "=" $2 }'
    # packets dropped at the per-CPU input queue (second column, hex), all CPUs
    local line cols sum=0
    while read -r line; do
        read -ra cols <<<"$line"
        sum=$((sum + 16#${cols[1]}))
    done </proc/net/softnet_stat
    echo "SoftnetDropped=$sum"
}

# sample PHASE T — one CSV row; leaves S_* variables.
sample() {
    local gen srv
    mapfile -t gen < <(tree "${GEN_PIDS[@]}")
    mapfile -t srv < <(tree "${SERVER_PIDS[@]}")
    S_SRV_FDS=$(sum_fds "${srv[@]}")
    S_HELD=$((S_SRV_FDS - SRV_FDS0))
    S_GEN_RSS=$(sum_status VmRSS "${gen[@]}")
    S_SRV_RSS=$(sum_status VmRSS "${srv[@]}")
    S_GEN_CPU=$(sum_cpu "${gen[@]}")
    S_SRV_CPU=$(sum_cpu "${srv[@]}")
    S_INUSE=$(sockstat inuse)
    S_MEM=$(sockstat mem)
    S_SLAB=$(slab_kb)
    S_NGEN=${#gen[@]}
    echo "$2,$1,$S_HELD,$S_SRV_FDS,$S_GEN_RSS,$S_SRV_RSS,$S_GEN_CPU,$S_SRV_CPU,$S_INUSE,$S_MEM,$S_SLAB" >>"$CSV"
}

# --- servers -----------------------------------------------------------------------------------

SERVER_CMD=("$HEADROOM" serve --arch reactor --poller epoll --workers "$WORKERS"
    --listen "127.0.0.1:$PORT" --backlog 65535 --drain-timeout 2s)
echo "${SERVER_CMD[*]}   # x $SERVERS processes" >>"$OUT/$NAME.commands"
log "starting $SERVERS servers on 127.0.0.1:$PORT (SO_REUSEPORT)"
for i in $(seq 1 "$SERVERS"); do
    "${SERVER_CMD[@]}" >"$RAW/server-$i.out" 2>"$RAW/server-$i.err" &
    SERVER_PIDS+=($!)
    # The first one must hold the port before the others join it.
    for _ in $(seq 1 200); do
        grep -q "listening on" "$RAW/server-$i.out" 2>/dev/null && break
        kill -0 "${SERVER_PIDS[-1]}" 2>/dev/null || break
        sleep 0.05
    done
    grep -q "listening on" "$RAW/server-$i.out" ||
        { cat "$RAW/server-$i.err" >&2; die "server $i did not start on 127.0.0.1:$PORT"; }
done
((SERVERS == $(ss -Htln "( sport = :$PORT )" | wc -l))) ||
    die "expected $SERVERS listeners on :$PORT, found $(ss -Htln "( sport = :$PORT )" | wc -l)"

# Baselines: what the idle servers hold, the kernel's counters before the load.
SRV_FDS0=$(sum_fds "${SERVER_PIDS[@]}")
SERVER_FD_DIRS=()
for p in "${SERVER_PIDS[@]}"; do SERVER_FD_DIRS+=("/proc/$p/fd"); done
SRV_RSS0=$(sum_status VmRSS "${SERVER_PIDS[@]}")
SLAB0=$(slab_kb)
MEM0=$(sockstat mem)
INUSE0=$(sockstat inuse)
NSTAT0=$(nstat_now)

# --- generator ---------------------------------------------------------------------------------

# One run lasts at most this long; it is stopped (SIGINT: it reports) once the hold is over.
RUN_S=$((RAMP_MAX + HOLD + 60))
# gen_args CONNS — the `headroom run` arguments for CONNS users (IDLE=connect writes the
# scenario file they need into WORK).
gen_args() {
    # Every user starts at once, so the last connect may wait for the CPU until the end of the
    # ramp: no connect or reply times out before RAMP_MAX.
    local common=(-t "$THREADS" -d "${RUN_S}s" --bind "$ADDRS" --connect-timeout "${RAMP_MAX}s"
        --timeout "${RAMP_MAX}s" -q --json)
    if [[ $IDLE == request ]]; then
        echo run "$URL" -c "$1" --think 3600s "${common[@]}"
    else
        local f=$WORK/connect-$1.yaml
        [[ -f $f ]] || cat >"$f" <<EOF
# many-conns.sh IDLE=connect: each user opens its connection and holds it, sending nothing.
name: idle-connect
servers: [{host: 127.0.0.1, port: $PORT}]
load:
  users: [{count: $1, session: hold}]
sessions:
  - name: hold
    steps:
      - connect
      - think: 3600s
EOF
        echo run "$f" "${common[@]}"
    fi
}
# start_generator — the whole load; sets GEN_PIDS and GEN_DESC.
start_generator() {
    if [[ $MODE == agents ]]; then
        echo "$HEADROOM $(gen_args "$CONNS") --agents local:$AGENTS" >>"$OUT/$NAME.commands"
        # shellcheck disable=SC2046
        "$HEADROOM" $(gen_args "$CONNS") --agents "local:$AGENTS" >"$RAW/gen-1.json" 2>"$RAW/gen-1.err" &
        GEN_PIDS+=($!)
        GEN_DESC="headroom run --agents local:$AGENTS (one controller, $AGENTS agents)"
    else
        local i share rest=$CONNS
        for i in $(seq 1 "$AGENTS"); do
            share=$(ceil_div "$rest" $((AGENTS - i + 1)))
            rest=$((rest - share))
            echo "$HEADROOM $(gen_args "$share")" >>"$OUT/$NAME.commands"
            # shellcheck disable=SC2046
            "$HEADROOM" $(gen_args "$share") >"$RAW/gen-$i.json" 2>"$RAW/gen-$i.err" &
            GEN_PIDS+=($!)
        done
        GEN_DESC="$AGENTS separate headroom run processes (this headroom has no --agents)"
    fi
    if [[ $IDLE == connect ]]; then cp "$WORK"/connect-*.yaml "$RAW/"; fi
}
# stop_generator — SIGINT to each started process only (a run stops cleanly and prints its
# summary; with --agents the controller stops its agents: a second SIGINT would make an agent
# quit without its report), KILL what is left after STOP_WAIT s (closing 17,000 connections
# per process on busy cores takes a while).
STOP_WAIT=$((60 + CONNS / 20000))
stop_generator() {
    local p i
    for p in "${GEN_PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    for i in $(seq 1 $((STOP_WAIT * 10))); do
        [[ -z $(tree "${GEN_PIDS[@]}") ]] && break
        sleep 0.1
    done
    for p in $(tree "${GEN_PIDS[@]}"); do
        log "generator pid $p still running $STOP_WAIT s after SIGINT: killing it"
        kill -KILL "$p" 2>/dev/null || true
    done
    GEN_STATUS=()
    for p in "${GEN_PIDS[@]}"; do
        local rc=0
        wait "$p" || rc=$?
        GEN_STATUS+=("$rc")
    done
}

log "generator: $MODE mode; $CONNS connections from $ADDRS to $URL, ramp limit ${RAMP_MAX}s, hold ${HOLD}s"
T0=$EPOCHREALTIME
start_generator
log "$GEN_DESC"
# The load keeps both cores busy while it connects; the counting below must still run on time.
renice -n -10 -p $$ >/dev/null 2>&1 || true
us() { local t=${1/./}; echo $((10#$t)); } # EPOCHREALTIME -> microseconds
T0_US=$(us "$T0")
# now_t: T_NOW = seconds since T0, two decimals, without a fork; elapsed prints it.
now_t() {
    local t=${EPOCHREALTIME/./} d
    d=$((10#$t - T0_US))
    printf -v T_NOW '%d.%02d' $((d / 1000000)) $((d % 1000000 / 10000))
}
elapsed() { now_t; echo "$T_NOW"; }

# --- establishing: count every 0.1 s until the servers hold CONNS or RAMP_MAX passes ----------
# Only the servers' descriptors are counted each time (one fork); the full sample every 5 s.

T50=- T90=- T_EST=- last_log=0 last_full=-5 S_NGEN=${#GEN_PIDS[@]}
while :; do
    now_t
    t=$T_NOW
    if ((${t%.*} >= last_full + 5)); then
        last_full=${t%.*}
        sample ramp "$t"
    else
        mapfile -t sizes < <(stat -c %s "${SERVER_FD_DIRS[@]}" 2>/dev/null)
        S_HELD=$(($(IFS=+; echo "${sizes[*]:-0}") - SRV_FDS0))
        echo "$t,count,$S_HELD,,,,,,,," >>"$CSV"
    fi
    [[ $T50 == - ]] && ((S_HELD * 2 >= CONNS)) && T50=$t
    [[ $T90 == - ]] && ((S_HELD * 10 >= CONNS * 9)) && T90=$t
    if ((S_HELD >= CONNS)); then
        T_EST=$t
        break
    fi
    if ((S_NGEN == 0)); then
        log "every generator process has exited"
        break
    fi
    if ((${t%.*} >= RAMP_MAX)); then
        log "not all connections established within RAMP_MAX=${RAMP_MAX}s"
        break
    fi
    if ((${t%.*} >= last_log + 5)); then
        last_log=${t%.*}
        log "${t}s: servers hold $S_HELD connections"
    fi
    sleep 0.1
done
sample ramp "$(elapsed)"
RAMP_GEN_CPU=$S_GEN_CPU RAMP_SRV_CPU=$S_SRV_CPU
log "established: $S_HELD at $(elapsed)s (all: ${T_EST}s)"

# --- the hold window ---------------------------------------------------------------------------

hold_sample() { # LABEL — ss both ends, then the process/kernel sample
    local e_srv e_cli
    e_srv=$(established sport)
    e_cli=$(established dport)
    sample "$1" "$(elapsed)"
    log "$1 at $(elapsed)s: established server side $e_srv, client side $e_cli; servers hold $S_HELD"
    H_SRV+=("$e_srv") H_CLI+=("$e_cli")
}
H_SRV=() H_CLI=()
HOLD_T0=$EPOCHREALTIME
hold_sample hold-start
H0_GEN_CPU=$S_GEN_CPU H0_SRV_CPU=$S_SRV_CPU
rest=$(awk -v a="$HOLD_T0" -v b="$EPOCHREALTIME" -v h="$HOLD" 'BEGIN { r = h - (b - a); print (r > 0 ? r : 0) }')
sleep "$rest"
hold_sample hold-end
HOLD_S=$(awk -v a="$HOLD_T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
NSTAT1=$(nstat_now)

# Memory at the end of the window (the CSV has the same row).
GEN_RSS=$S_GEN_RSS SRV_RSS=$S_SRV_RSS SLAB1=$S_SLAB MEM1=$S_MEM INUSE1=$S_INUSE
HOLD_GEN_CPU=$(awk -v a="$H0_GEN_CPU" -v b="$S_GEN_CPU" 'BEGIN { printf "%.2f", b - a }')
HOLD_SRV_CPU=$(awk -v a="$H0_SRV_CPU" -v b="$S_SRV_CPU" 'BEGIN { printf "%.2f", b - a }')
HELD=$((H_SRV[0] < H_SRV[1] ? H_SRV[0] : H_SRV[1]))
HELD_CLI=$((H_CLI[0] < H_CLI[1] ? H_CLI[0] : H_CLI[1]))

log "stopping the generator"
stop_generator
log "stopping the servers"
for p in "${SERVER_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for _ in $(seq 1 150); do
    [[ -z $(tree "${SERVER_PIDS[@]}") ]] && break
    sleep 0.1
done
kill_all

# --- report ------------------------------------------------------------------------------------

# The generators' own figures: connections_peak and errors, summed over their summaries.
gen_sum() {
    local f
    for f in "$RAW"/gen-*.json; do jq -r "$1 // 0" "$f" 2>/dev/null || echo 0; done |
        awk '{ s += $1 } END { print s + 0 }'
}
GEN_PEAK=$(gen_sum .connections_peak)
GEN_ERRORS=$(gen_sum '.errors_total // .errors.total')
GEN_REQUESTS=$(gen_sum .requests)
delta() { # KEY — nstat counter growth over the run
    local a b
    a=$(sed -n "s/^$1=//p" <<<"$NSTAT0")
    b=$(sed -n "s/^$1=//p" <<<"$NSTAT1")
    echo $((${b:-0} - ${a:-0}))
}

per() { awk -v a="$1" -v n="$2" 'BEGIN { if (n > 0) printf "%.0f B (%.2f KiB)", a * 1024 / n, a / n; else print "-" }'; }
RATE=$(awk -v n="$CONNS" -v t="$T_EST" 'BEGIN { if (t != "-" && t > 0) printf "%.0f", n / t; else print "-" }')
PAGE=$(getconf PAGESIZE)
{
    echo "many-conns: $CONNS idle connections to 127.0.0.1:$PORT; $(date -Is) on $(hostname -s)"
    echo "servers:   $SERVERS x headroom serve --arch reactor --poller epoll --workers $WORKERS (SO_REUSEPORT)"
    echo "generator: $GEN_DESC; -t $THREADS; source addresses $ADDRS"
    echo
    printf '%-44s %s\n' "held at once (ss ESTABLISHED, server side)" "$HELD of $CONNS (min of window start ${H_SRV[0]} / end ${H_SRV[1]})"
    printf '%-44s %s\n' "held at once (ss ESTABLISHED, client side)" "$HELD_CLI (start ${H_CLI[0]} / end ${H_CLI[1]})"
    printf '%-44s %s\n' "generator's own connections_peak (sum)" "$GEN_PEAK; requests $GEN_REQUESTS; errors $GEN_ERRORS"
    printf '%-44s %s\n' "time to establish all (50% / 90%)" "${T_EST} s ($T50 s / $T90 s); $RATE conn/s"
    printf '%-44s %s\n' "hold window" "$HOLD_S s"
    echo
    printf '%-44s %s\n' "CPU while establishing: generator / servers" "$RAMP_GEN_CPU s / $RAMP_SRV_CPU s"
    printf '%-44s %s\n' "CPU during the hold: generator / servers" "$HOLD_GEN_CPU s / $HOLD_SRV_CPU s"
    echo
    echo "memory per connection (at the end of the hold, / $HELD connections):"
    printf '  %-42s %s\n' "generator RSS sum / conns" "$(per "$GEN_RSS" "$HELD")  [sum $((GEN_RSS / 1024)) MiB]"
    printf '  %-42s %s\n' "server RSS sum / conns" "$(per "$SRV_RSS" "$HELD")  [sum $((SRV_RSS / 1024)) MiB]"
    printf '  %-42s %s\n' "server (RSS - idle RSS) / conns" "$(per $((SRV_RSS - SRV_RSS0)) "$HELD")  [idle $((SRV_RSS0 / 1024)) MiB]"
    printf '  %-42s %s\n' "kernel sockstat TCP mem / conns (both ends)" "$(per $(((MEM1 - MEM0) * PAGE / 1024)) "$HELD")  [$MEM0 -> $MEM1 pages]"
    printf '  %-42s %s\n' "kernel Slab growth / conns (both ends)" "$(per $((SLAB1 - SLAB0)) "$HELD")  [$((SLAB0 / 1024)) -> $((SLAB1 / 1024)) MiB]"
    printf '  %-42s %s\n' "TCP sockets in use (sockstat)" "$INUSE0 -> $INUSE1"
    echo
    echo "SYN / accept queue over the run: ListenOverflows $(delta TcpExtListenOverflows)," \
        "ListenDrops $(delta TcpExtListenDrops), SyncookiesSent $(delta TcpExtSyncookiesSent)," \
        "ReqQFullDrop $(delta TcpExtTCPReqQFullDrop), BacklogDrop $(delta TcpExtTCPBacklogDrop);" \
        "SYN resent $(delta TcpExtTCPSynRetrans); softnet drops $(delta SoftnetDropped) (machine-wide)"
    echo "generator exit statuses: ${GEN_STATUS[*]}"
    echo
    if ((HELD >= CONNS)); then
        echo "RESULT: $HELD >= $CONNS connections held at once"
    else
        echo "RESULT: FAILED: $HELD < $CONNS connections held at once"
    fi
} | tee "$OUT/$NAME.txt"
jq -nc --argjson conns "$CONNS" --argjson held "$HELD" --argjson held_client "$HELD_CLI" \
    --arg mode "$MODE" --argjson servers "$SERVERS" --argjson agents "$AGENTS" \
    --arg t_est "$T_EST" --arg t50 "$T50" --arg t90 "$T90" \
    --argjson gen_rss_kb "$GEN_RSS" --argjson srv_rss_kb "$SRV_RSS" --argjson srv_rss0_kb "$SRV_RSS0" \
    --argjson tcp_mem_pages0 "$MEM0" --argjson tcp_mem_pages "$MEM1" --argjson slab0_kb "$SLAB0" --argjson slab_kb "$SLAB1" \
    --arg ramp_gen_cpu "$RAMP_GEN_CPU" --arg ramp_srv_cpu "$RAMP_SRV_CPU" \
    --arg hold_gen_cpu "$HOLD_GEN_CPU" --arg hold_srv_cpu "$HOLD_SRV_CPU" \
    --argjson listen_overflows "$(delta TcpExtListenOverflows)" \
    '{conns: $conns, held: $held, held_client: $held_client, mode: $mode, servers: $servers,
      agents: $agents, t_establish_s: $t_est, t50_s: $t50, t90_s: $t90,
      gen_rss_kb: $gen_rss_kb, srv_rss_kb: $srv_rss_kb, srv_rss_idle_kb: $srv_rss0_kb,
      tcp_mem_pages: [$tcp_mem_pages0, $tcp_mem_pages], slab_kb: [$slab0_kb, $slab_kb],
      cpu_establish_s: {generator: $ramp_gen_cpu, servers: $ramp_srv_cpu},
      cpu_hold_s: {generator: $hold_gen_cpu, servers: $hold_srv_cpu},
      listen_overflows: $listen_overflows}' | tee "$OUT/$NAME.json"
echo "run dir: $OUT" >&2
((HELD >= CONNS)) || exit 1
