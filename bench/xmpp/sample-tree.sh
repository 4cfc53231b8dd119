#!/usr/bin/env bash
# bench/xmpp/sample-tree.sh ROOT_PID PORT SERVER_PID OUT — used by bench/xmpp-vs-tsung.sh.
#
# Once a second, until ROOT_PID is gone (or this script gets SIGTERM), appends to OUT one line:
#
#   t_s gen_cpu_s gen_rss_kb gen_procs conns srv_cpu_s srv_rss_kb
#
#   t_s          seconds since the sampler started
#   gen_*        the process tree rooted at ROOT_PID (the generator and its wrappers): CPU
#                seconds (utime + stime of the live processes, plus cutime + cstime, i.e. what
#                they already reaped of their children, so a process's time is counted once,
#                alive or reaped), resident memory (sum of the processes' RSS) and process count
#   conns        TCP connections established *to* 127.0.0.1:PORT (the clients' side, dport),
#                counted by the kernel (`ss`), whatever tool opened them
#   srv_*        the same CPU and RSS for the tree rooted at SERVER_PID (the XMPP server)
#
# Everything comes from /proc (clock ticks, pages) and ss; one `ps` a second finds the trees.
set -euo pipefail

if [[ $# -ne 4 ]]; then
    echo "usage: $0 ROOT_PID PORT SERVER_PID OUT" >&2
    exit 2
fi
root=$1 port=$2 srv=$3 out=$4
tck=$(getconf CLK_TCK)
page_kb=$(($(getconf PAGESIZE) / 1024))

# tree PID: the pids of PID and all its descendants, one a line, from a "pid ppid" listing on stdin.
tree() {
    awk -v r="$1" '{ p[$1] = $2 } END {
        for (x in p) { y = x; n = 0; while (y != r && (y in p) && n++ < 100) y = p[y]; if (y == r) print x } }'
}

# usage PIDS...: "cpu_s rss_kb nprocs" of those processes (/proc/PID/stat; fields counted after
# the command name, so a name with spaces or parentheses cannot shift them). The wrappers the
# bench puts around a tool (timeout, /usr/bin/time) are not the tool: only what they reaped of
# their children counts, not their own CPU, memory or process.
usage() {
    local p
    for p in "$@"; do cat "/proc/$p/stat" 2>/dev/null || true; done |
        awk -v tck="$tck" -v pk="$page_kb" 'NF {
            comm = $0; sub(/^[^(]*\(/, "", comm); sub(/\) [^)]*$/, "", comm)
            sub(/^.*\) /, "")
            if (comm == "timeout" || comm == "time") { cpu += $14 + $15; next }
            cpu += $12 + $13 + $14 + $15; rss += $22; n++ }
            END { printf "%.2f %d %d", cpu / tck, rss * pk, n }'
}

trap 'exit 0' TERM INT
t0=$(date +%s.%N)
while kill -0 "$root" 2>/dev/null; do
    listing=$(ps -e -o pid=,ppid=)
    # shellcheck disable=SC2046 # pids are numbers
    gen=$(usage $(tree "$root" <<<"$listing"))
    # shellcheck disable=SC2046
    server=$(usage $(tree "$srv" <<<"$listing"))
    conns=$(ss -Htn state established "( dport = :$port )" 2>/dev/null | wc -l)
    read -r gcpu grss gn <<<"$gen"
    read -r scpu srss _ <<<"$server"
    now=$(date +%s.%N)
    awk -v a="$t0" -v b="$now" -v gc="$gcpu" -v gr="$grss" -v gn="$gn" -v c="$conns" \
        -v sc="$scpu" -v sr="$srss" 'BEGIN { printf "%.1f %s %s %s %s %s %s\n", b - a, gc, gr, gn, c, sc, sr }' >>"$out"
    sleep 1
done
