#!/usr/bin/env bash
# bench/xmpp-vs-tsung.sh — generator CPU and memory per connected XMPP user, headroom against
# Tsung 1.7, running the same XMPP scenario against the same ejabberd, one tool after the other.
#
# Usage: bench/xmpp-vs-tsung.sh [-h|--help]      (everything else is environment, below)
#
# The scenario (bench/xmpp/xmpp-mix.tsung.xml.in and bench/xmpp/xmpp-mix.headroom.yaml.in,
# scenarios/xmpp-mix.yaml with the knobs below filled in): users arrive as a Poisson process at
# RATE/s until USERS have started; each logs in (stream, SASL PLAIN, bind, session) as
# user{N}/pass{N}@localhost, N handed out in order from 1..IDS, sends its initial presence, then
#   20% inactive  roster get, think HOLD/2, a 56-byte chat to an offline user and a 256-byte chat
#                 to an online one, think HOLD/2, close
#   60% idle      think HOLD, close
#   20% active    10 x (think HOLD/10, a 256-byte chat to an online user), close
# Every session lasts longer than the arrival phase, so all USERS users are connected at once
# for a while (HOLD - USERS/RATE s, ~20 s by default) and no user leaves before the last one
# arrived. The run ends by itself when the last user has left (~USERS/RATE + HOLD s).
#
# What it measures, per tool (same method for both):
#   * peak connected users: TCP connections established to the server's port, counted with
#     `ss` every second (tool-independent), next to the tool's own figure (Tsung: the `users`
#     maximum of tsung.log; headroom: connections_peak of summary.json);
#   * generator CPU-seconds: user + sys of the tool's whole process tree over the whole run
#     (wait4's rusage from /usr/bin/time, which covers every descendant it reaped; the /proc
#     sample of the tree is kept as a cross-check); peak RSS: the tree's summed VmRSS, sampled
#     every second (max);
#   * per connected user: CPU-s / peak connected, RSS KiB / peak connected;
#   * chats sent / received, logins, errors, as far as each tool counts them; ejabberd's CPU.
# Then the ratios Tsung/headroom per connected user, PASS/FAIL against CPU_GOAL (5) and RSS_GOAL (4).
#
# ejabberd: the bench runs its own instance with scripts/ejabberd.sh (EJABBERD_DIR, XMPP_PORT,
# XMPP_DIST_PORT; not the shared 127.0.0.1:25222 one that tests use, because it restarts it and
# wipes its spool). Before each tool it is stopped, its spool (Mnesia: users, rosters, offline
# messages) deleted, started again and users 1..IDS registered, so both tools start from the same
# state with no session left. It must have at least max(6500, USERS + 1500) descriptors. With
# PIN=1 (default, 2+ cores) ejabberd runs on CPU 0 and the generator on CPU 1.
#
# Tsung (Debian 1.7.0): client inside the controller VM (use_controller_vm), so `tsung start`
# stays in the foreground and its one beam.smp is a descendant of /usr/bin/time (its figure
# includes the controller's statistics and the VM's start and stop); -n: no web GUI; -i: a node
# name of its own. It needs epmd; if this run starts it (on 127.0.0.1), it is stopped at exit.
#
# Environment (defaults):
#   USERS=5000        users started (= peak connected users)
#   RATE=50           arrivals per second (Poisson)
#   HOLD=(ARRIVE_S+10) seconds of think time per session; must exceed ARRIVE_S
#   IDS=2*USERS       user ids 1..IDS are registered and used (logins take 1, 2, 3, ...; the ids
#                     above give "offline" chats someone to go to)
#   ARRIVE_S          arrival phase length: ceil(USERS/RATE) + 10 (the USERS cap ends arrivals)
#   TOOLS="tsung headroom"  which tools, in this order (TOOLS=tsung: Tsung alone, no ratios)
#   HEADROOM=$CARGO_TARGET_DIR/release/headroom or target/release/headroom
#   HR_THREADS=1 when pinned, else the number of cores: headroom's -t
#   PIN=1  XMPP_PORT=25242  XMPP_DIST_PORT=25243  EJABBERD_DIR=/tmp/headroom-xmpp-bench-ejabberd
#   KEEP_EJABBERD=0   1: leave ejabberd running (and its dir) at exit
#   OUT_DIR=bench/runs/<YYYY-MM-DD>-<host>   where xmpp-vs-tsung.{txt,json,commands,versions}
#                     and xmpp-vs-tsung.raw/ go
#   CPU_GOAL=5  RSS_GOAL=4   STRICT=0 (1: exit 4 when a ratio misses its goal)
#   TSUNG_ERL_FLAGS=  extra flags for Tsung's Erlang VM (ERL_FLAGS), e.g. "+sbwt none" to stop
#                     its schedulers' busy waiting; empty: Tsung as shipped
#
# Exit status: 0 done (the ratios may still FAIL: see STRICT); 1 a run failed or fewer than USERS
# users were connected at once; 2 bad settings or a missing tool; 3 headroom cannot run the
# XMPP scenario (not built, or its XMPP engine not there yet); 4 STRICT=1 and a goal missed.
#
# Output: a table on stdout, then one line of JSON (the same as xmpp-vs-tsung.json).

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
XDIR=$BENCH_DIR/xmpp
EJ=$REPO_ROOT/scripts/ejabberd.sh

usage_die() { echo "error: $*" >&2; exit 2; }
is_int() { [[ $1 =~ ^[0-9]+$ ]]; }

# --- settings ----------------------------------------------------------------------------------

USERS=${USERS:-5000}
RATE=${RATE:-50}
if ! is_int "$USERS" || ((USERS < 1)); then usage_die "USERS must be a positive integer: $USERS"; fi
if ! [[ $RATE =~ ^[0-9]+(\.[0-9]+)?$ ]] || ! awk -v r="$RATE" 'BEGIN { exit !(r > 0) }'; then
    usage_die "RATE must be a positive number: $RATE"
fi
ARRIVE_S=${ARRIVE_S:-$(awk -v u="$USERS" -v r="$RATE" 'BEGIN { a = u / r; c = int(a); if (c < a) c++; print c + 10 }')}
HOLD=${HOLD:-$((ARRIVE_S + 10))}
IDS=${IDS:-$((2 * USERS))}
for v in ARRIVE_S HOLD IDS; do is_int "${!v}" || usage_die "$v must be a whole number: ${!v}"; done
((HOLD > ARRIVE_S)) || usage_die "HOLD ($HOLD s) must exceed the arrival phase ARRIVE_S ($ARRIVE_S s): every user must still be connected when the last one arrives (and headroom's max_users, which caps users alive, then equals Tsung's maxnumber, which caps users started)"
((IDS >= USERS)) || usage_die "IDS ($IDS) must be at least USERS ($USERS)"
# A safety stop for both tools: the run ends by itself at about USERS/RATE + HOLD.
LIMIT_S=$((ARRIVE_S + HOLD + 60))
TOOLS=${TOOLS:-tsung headroom}
for t in $TOOLS; do [[ $t == tsung || $t == headroom ]] || usage_die "TOOLS: unknown tool '$t' (tsung, headroom)"; done
XMPP_PORT=${XMPP_PORT:-25242}
XMPP_DIST_PORT=${XMPP_DIST_PORT:-25243}
EJABBERD_DIR=${EJABBERD_DIR:-/tmp/headroom-xmpp-bench-ejabberd}
[[ $EJABBERD_DIR == /tmp/headroom-ejabberd || $XMPP_PORT == 25222 ]] &&
    usage_die "the bench restarts its ejabberd and deletes its spool: give it a directory and port of its own, not the shared instance's (/tmp/headroom-ejabberd, 25222)"
KEEP_EJABBERD=${KEEP_EJABBERD:-0}
CPU_GOAL=${CPU_GOAL:-5}
RSS_GOAL=${RSS_GOAL:-4}
STRICT=${STRICT:-0}
TSUNG_ERL_FLAGS=${TSUNG_ERL_FLAGS:-}
if ((${#GEN_PIN[@]})); then HR_THREADS=${HR_THREADS:-1}; else HR_THREADS=${HR_THREADS:-$(nproc)}; fi

export HEADROOM_EJABBERD_DIR=$EJABBERD_DIR HEADROOM_EJABBERD_PORT=$XMPP_PORT HEADROOM_EJABBERD_DIST_PORT=$XMPP_DIST_PORT
export ERL_EPMD_ADDRESS=127.0.0.1 # only matters if Tsung is what starts epmd

for c in tsung erl ss jq timeout awk ps getconf; do
    command -v "$c" >/dev/null || usage_die "$c is missing (Debian: apt-get install -y tsung jq iproute2 procps time)"
done
[[ -x /usr/bin/time ]] || usage_die "/usr/bin/time is missing (apt-get install -y time)"

# Descriptors: each generator holds USERS sockets, ejabberd as many plus its own files.
ulimit -Sn "$(ulimit -Hn)" 2>/dev/null || true
FD_LIMIT=$(ulimit -Sn)
[[ $FD_LIMIT == unlimited ]] && FD_LIMIT=1048576
((FD_LIMIT >= USERS + 1000)) ||
    usage_die "the descriptor limit is $FD_LIMIT: $USERS users need at least $((USERS + 1000)) (ulimit -Hn)"
EJ_MIN_FDS=$((USERS + 1500 > 6500 ? USERS + 1500 : 6500))
# Tsung starts another client VM when a VM would exceed maxusers, and warns when maxusers exceeds
# the descriptors it has: room for every user, below the limit.
TSUNG_MAXUSERS=$((FD_LIMIT - 500 < 2 * USERS ? FD_LIMIT - 500 : 2 * USERS))

# --- run directory -----------------------------------------------------------------------------

WORK=$(mktemp -d /tmp/headroom-xmpp-bench.XXXXXX)
on_exit "rm -rf '$WORK'"
cd "$WORK"
OUT=${OUT_DIR:-$(run_dir)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
NAME=xmpp-vs-tsung
RAW=$OUT/$NAME.raw
rm -rf "$RAW" && mkdir -p "$RAW"
{
    echo "# tsung.xml is $NAME.tsung.xml and headroom.yaml is $NAME.headroom.yaml (in $WORK during the run);"
    echo "# each command ran under: timeout -k 10 LIMIT /usr/bin/time -f '%U %S %M %e', sampled by bench/xmpp/sample-tree.sh"
} >"$OUT/$NAME.commands"

want() { [[ " $TOOLS " == *" $1 "* ]]; }

# --- ejabberd ----------------------------------------------------------------------------------

EJ_STARTED=0
ej_pid() { cat "$EJABBERD_DIR/node.pid" 2>/dev/null; }

ej_cleanup() {
    ((EJ_STARTED)) || return 0
    if [[ $KEEP_EJABBERD == 1 ]]; then
        log "leaving ejabberd running on 127.0.0.1:$XMPP_PORT (KEEP_EJABBERD=1; stop: HEADROOM_EJABBERD_DIR=$EJABBERD_DIR HEADROOM_EJABBERD_PORT=$XMPP_PORT HEADROOM_EJABBERD_DIST_PORT=$XMPP_DIST_PORT $EJ stop)"
        return 0
    fi
    "$EJ" stop >/dev/null 2>&1 || true
    rm -rf "$EJABBERD_DIR"
}
on_exit ej_cleanup

# ej_fresh: ejabberd stopped, its spool deleted, started again, users 1..IDS registered,
# pinned, its descriptor limit checked, and no client connection left on its port.
ej_fresh() {
    "$EJ" stop >/dev/null 2>&1 || true
    rm -rf "$EJABBERD_DIR/spool"
    EJ_STARTED=1
    "$EJ" start >/dev/null 2>"$WORK/ej-start.err" || { cat "$WORK/ej-start.err" >&2; die "ejabberd did not start"; }
    "$EJ" register 1 "$IDS" 2>"$WORK/ej-register.err" || { cat "$WORK/ej-register.err" >&2; die "registering user1..user$IDS failed"; }
    local pid lim
    pid=$(ej_pid) || die "ejabberd runs but its pid is unknown"
    lim=$(awk '/Max open files/ { print $4 }' "/proc/$pid/limits")
    [[ $lim == unlimited ]] || ((lim >= EJ_MIN_FDS)) ||
        die "ejabberd (pid $pid) may open $lim descriptors; $USERS users need at least $EJ_MIN_FDS"
    if ((${#SERVER_PIN[@]})); then taskset -a -p -c 0 "$pid" >/dev/null; fi
    local i n
    for i in $(seq 1 30); do
        n=$(ss -Htn state established "( dport = :$XMPP_PORT )" | wc -l)
        ((n == 0)) && return 0
        sleep 1
    done
    die "$n connections to 127.0.0.1:$XMPP_PORT remain after restarting ejabberd"
}

# --- Tsung's epmd ------------------------------------------------------------------------------

if want tsung && ! pgrep -x epmd >/dev/null; then
    on_exit stop_our_epmd
fi
stop_our_epmd() {
    local pid
    pid=$(pgrep -x epmd | head -n 1) || return 0
    if epmd -names 2>/dev/null | grep -q '^name '; then
        log "epmd ($pid) has other nodes registered; leaving it running"
    else
        kill "$pid" 2>/dev/null || true
    fi
}

# --- the scenario files ------------------------------------------------------------------------

secs_of_ms() { awk -v m="$1" 'BEGIN { if (m % 1000 == 0) print m / 1000; else printf "%.3f\n", m / 1000 }'; }
dur_of_ms() { if (($1 % 1000 == 0)); then echo "$(($1 / 1000))s"; else echo "${1}ms"; fi; }

# render TEMPLATE OUT USERS RATE ARRIVE_S HOLD_S IDS LIMIT_S — the template with its @NAMES@ set
# (think times as Tsung seconds in .xml files, as headroom durations in .yaml files).
render() {
    local tpl=$1 out=$2 users=$3 rate=$4 arrive=$5 hold=$6 ids=$7 limit=$8 half act holds
    if [[ $tpl == *.xml.in ]]; then
        half=$(secs_of_ms $((hold * 500)))
        act=$(secs_of_ms $((hold * 100)))
        holds=$hold
    else
        half=$(dur_of_ms $((hold * 500)))
        act=$(dur_of_ms $((hold * 100)))
        holds=${hold}s
    fi
    sed -e "s/@USERS@/$users/g; s/@RATE@/$rate/g; s/@ARRIVE_S@/$arrive/g; s/@IDS@/$ids/g" \
        -e "s/@LIMIT_S@/$limit/g; s/@PORT@/$XMPP_PORT/g; s/@MAXUSERS@/$TSUNG_MAXUSERS/g" \
        -e "s/@HOLD_S@s/$holds/g; s/@HOLD_S@/$holds/g; s/@HALF_HOLD_S@s/$half/g; s/@HALF_HOLD_S@/$half/g" \
        -e "s/@ACTIVE_THINK_S@s/$act/g; s/@ACTIVE_THINK_S@/$act/g" "$tpl" >"$out"
    if grep -q '@[A-Z_]*@' "$out"; then die "unfilled @NAME@ left in $out"; fi
}

render "$XDIR/xmpp-mix.tsung.xml.in" "$WORK/tsung.xml" "$USERS" "$RATE" "$ARRIVE_S" "$HOLD" "$IDS" "$LIMIT_S"
render "$XDIR/xmpp-mix.headroom.yaml.in" "$WORK/headroom.yaml" "$USERS" "$RATE" "$ARRIVE_S" "$HOLD" "$IDS" "$LIMIT_S"
cp "$WORK/tsung.xml" "$OUT/$NAME.tsung.xml"
cp "$WORK/headroom.yaml" "$OUT/$NAME.headroom.yaml"

TSUNG_ID=hx$$
TSUNG_CMD=(tsung -n -i "$TSUNG_ID" -f "$WORK/tsung.xml" -l "$WORK/tsung-log" start)
if [[ -n $TSUNG_ERL_FLAGS ]]; then TSUNG_CMD=(env "ERL_FLAGS=$TSUNG_ERL_FLAGS" "${TSUNG_CMD[@]}"); fi
HR_CMD=("$HEADROOM" run "$WORK/headroom.yaml" -d "${LIMIT_S}s" -t "$HR_THREADS" -q --no-report --out "$WORK/headroom-out")

# --- versions ----------------------------------------------------------------------------------

{
    echo "date: $(date -Is)"
    echo "host: $(hostname -s)"
    echo "kernel: $(uname -srm)"
    echo "cpus: $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'))"
    echo "pinning: ejabberd=${SERVER_PIN[*]:-none} generator=${GEN_PIN[*]:-none}"
    echo "tsung: $(tsung -v 2>&1 | head -n 1)"
    echo "erlang: $(erl -noshell -eval 'io:format("~s~n",[erlang:system_info(otp_release)]),halt().' 2>/dev/null || echo '?')"
    echo "ejabberd: $(dpkg-query -W -f '${Version}' ejabberd 2>/dev/null || echo '?')"
    if [[ -x $HEADROOM ]]; then
        echo "headroom: $("$HEADROOM" --version 2>&1 | head -n 1) ($HEADROOM, sha256 $(sha256sum "$HEADROOM" | cut -c1-16))"
    else
        echo "headroom: (not built: $HEADROOM)"
    fi
    echo "headroom git: $(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(
        git -C "$REPO_ROOT" diff --quiet HEAD 2>/dev/null || echo ' (dirty)')"
} >"$OUT/$NAME.versions"

# --- headroom: can it run the scenario? --------------------------------------------------------

HR_NOT_READY=""
# why_not_ready STDERR: what headroom's failure on the XMPP scenario says, in one line.
why_not_ready() {
    if grep -q 'not run yet' "$1"; then
        echo "its engine does not run xmpp steps yet ($(grep -m1 -o '[^:]*not run yet' "$1" | sed 's/^ *//'))"
    elif grep -q "unknown key 'xmpp'\|unknown step 'xmpp'\|protocol: expected" "$1"; then
        echo "its scenario parser does not know xmpp servers and steps yet ($(grep -m1 -o "unknown step 'xmpp'[^;]*\|unknown key 'xmpp'[^;]*\|protocol: expected[^(]*" "$1"))"
    else
        head -n 3 "$1" | tr '\n' ' '
    fi
}

# A short run of the same scenario (2 users, 3 s holds): the XMPP steps must parse and run, and
# the users log in. Fails fast, before minutes of Tsung, while headroom's XMPP engine is missing.
headroom_preflight() {
    local dir=$WORK/preflight rc=0 logins
    mkdir -p "$dir"
    render "$XDIR/xmpp-mix.headroom.yaml.in" "$dir/p.yaml" 2 5 2 3 "$IDS" 30
    timeout -k 5 60 "$HEADROOM" run "$dir/p.yaml" -d 20s -t 1 -q --no-report --out "$dir/out" \
        >"$dir/stdout" 2>"$dir/stderr" || rc=$?
    cp "$dir/stderr" "$RAW/headroom-preflight.err"
    if ((rc != 0)); then
        HR_NOT_READY="headroom exited with status $rc on the XMPP scenario: $(why_not_ready "$dir/stderr")"
        return 1
    fi
    logins=$(jq -r '.scenario.protocol.xmpp.logins // empty' "$dir/out/summary.json" 2>/dev/null || true)
    if [[ -z $logins ]]; then
        logins=$(jq -r '.connects // 0' "$dir/out/summary.json" 2>/dev/null || echo 0)
    fi
    if ! [[ $logins =~ ^[0-9]+$ ]] || ((logins < 1)); then
        cp -r "$dir/out" "$RAW/headroom-preflight" 2>/dev/null || true
        HR_NOT_READY="headroom ran the XMPP scenario but logged nobody in (see $RAW/headroom-preflight/summary.json)"
        return 1
    fi
    return 0
}

# --- one measured run --------------------------------------------------------------------------

SAMPLER_PID=""
TOOL_PID=""
kill_tool() {
    if [[ -n $SAMPLER_PID ]]; then kill "$SAMPLER_PID" 2>/dev/null || true; fi
    if [[ -n $TOOL_PID ]] && kill -0 "$TOOL_PID" 2>/dev/null; then
        kill -TERM "$TOOL_PID" 2>/dev/null || true
        sleep 2
        kill -KILL -- "-$TOOL_PID" 2>/dev/null || kill -KILL "$TOOL_PID" 2>/dev/null || true
    fi
}
on_exit kill_tool

declare -A R # R[tool.key] = value

# measure TOOL CMD... — fresh ejabberd, then CMD pinned to the generator CPU under timeout and
# /usr/bin/time, sampled every second. Sets R[TOOL.status|cpu_s|user_s|sys_s|wall_s|...].
measure() {
    local tool=$1
    shift
    local samples=$RAW/$tool.samples timef=$WORK/$tool.time rc=0 srv
    log "$tool: fresh ejabberd (users 1..$IDS)"
    ej_fresh
    srv=$(ej_pid)
    echo "${GEN_PIN[*]} $*" >>"$OUT/$NAME.commands"
    log "$tool: $USERS users, Poisson $RATE/s, hold ${HOLD}s (about $(awk -v u="$USERS" -v r="$RATE" -v h="$HOLD" 'BEGIN { printf "%d", u / r + h }') s; stopped at $((LIMIT_S + 30)) s at most)"
    echo "t_s gen_cpu_s gen_rss_kb gen_procs conns srv_cpu_s srv_rss_kb" >"$samples"
    timeout -k 10 $((LIMIT_S + 30)) /usr/bin/time -o "$timef" -f '%U %S %M %e' \
        "${GEN_PIN[@]}" "$@" >"$RAW/$tool.stdout" 2>"$RAW/$tool.stderr" &
    TOOL_PID=$!
    "${SERVER_PIN[@]}" "$XDIR/sample-tree.sh" "$TOOL_PID" "$XMPP_PORT" "$srv" "$samples" 2>"$RAW/$tool.sampler.err" &
    SAMPLER_PID=$!
    wait "$TOOL_PID" || rc=$?
    TOOL_PID=""
    sleep 1.5 # one more sample after the end (connections gone), then stop the sampler
    kill "$SAMPLER_PID" 2>/dev/null || true
    wait "$SAMPLER_PID" 2>/dev/null || true
    SAMPLER_PID=""
    R[$tool.status]=$rc
    ((rc == 124 || rc == 137)) && R[$tool.status]="$rc (timeout)"
    local u s m e
    read -r u s m e < <(tail -n 1 "$timef" 2>/dev/null || echo "- - - -")
    R[$tool.user_s]=$u R[$tool.sys_s]=$s R[$tool.wall_s]=$e R[$tool.maxrss_one_kb]=$m
    R[$tool.cpu_s]=$(awk -v u="$u" -v s="$s" 'BEGIN { if (u == "-") print "-"; else printf "%.2f", u + s }')
    # From the samples: peak connections and tree RSS, last tree CPU, ejabberd's CPU over the run.
    local pc pr gc sc sr ns
    read -r pc pr gc sc sr ns < <(
        awk 'NR > 1 { if ($5 > pc) pc = $5; if ($3 > pr) pr = $3; if ($2 > gc) gc = $2
                      if (n == 0) s0 = $6; s1 = $6; if ($7 > sr) sr = $7; n++ }
             END { printf "%d %d %.2f %.2f %d %d\n", pc, pr, gc, s1 - s0, sr, n }' "$samples")
    R[$tool.peak_conns]=$pc R[$tool.peak_rss_kb]=$pr R[$tool.sampled_cpu_s]=$gc
    R[$tool.server_cpu_s]=$sc R[$tool.server_peak_rss_kb]=$sr R[$tool.samples]=$ns
    R[$tool.peak_conns_at_s]=$(awk -v p="${R[$tool.peak_conns]}" 'NR > 1 && $5 == p { print $1; exit }' "$samples")
    if ((rc != 0)); then
        log "$tool exited with status $rc; last lines of its stderr:"
        tail -n 15 "$RAW/$tool.stderr" >&2 || true
    fi
}

# --- what each tool says of itself -------------------------------------------------------------

# tsung_stats LOGDIR: the totals of its tsung.log (the last dump of each counter).
tsung_stats() {
    local log
    log=$(find "$1" -name tsung.log -print -quit 2>/dev/null) || true
    [[ -n $log && -s $log ]] || return 0
    cp "$log" "$RAW/tsung.tsung.log"
    cp "$(dirname "$log")"/tsung_controller*.log "$RAW/" 2>/dev/null || true
    # Lines are "stats: NAME ..." every 10 s: counters "NAME interval total", samples "NAME count
    # mean stddev max min mean_before count_before", users "users now max", connected "connected
    # delta now".
    awk '$1 == "stats:" {
            n = $2; last[n] = $0
            if (n == "connected" && $4 > cmax) cmax = $4
        }
        function f(line, i,   a) { split(line, a, " "); return a[i] }
        function total(n) { return (n in last) ? f(last[n], 4) : 0 }
        function scount(n) { return (n in last) ? f(last[n], 3) + f(last[n], 9) : 0 }
        function smean(n,   c, cb) { if (!(n in last)) return "-"; c = f(last[n], 3); cb = f(last[n], 9)
            return (c + cb) ? sprintf("%.2f", (c * f(last[n], 4) + cb * f(last[n], 8)) / (c + cb)) : "-" }
        function smax(n) { return (n in last) ? f(last[n], 6) : "-" }
        END {
            print "peak_users", (("users" in last) ? f(last["users"], 4) : "-")
            print "tool_connected_max", cmax + 0
            print "started", total("users_count")
            print "finished", total("finish_users_count")
            print "logins", scount("tr_login")
            print "login_mean_ms", smean("tr_login")
            print "login_max_ms", smax("tr_login")
            print "roster", scount("tr_roster")
            print "noack", total("request_noack")
            print "no_online", total("error_no_online")
            print "no_offline", total("error_no_offline")
            print "bytes_sent", total("size_sent")
            print "bytes_received", total("size_rcv")
            errs = 0; list = ""
            for (n in last) if (n ~ /^error_/ && n != "error_no_online" && n != "error_no_offline") {
                errs += total(n); list = list n "=" total(n) " " }
            print "errors", errs
            print "error_kinds", (list == "" ? "-" : list)
        }' "$log" >"$WORK/tsung.kv"
    local k v
    while read -r k v; do R[tsung.$k]=$v; done <"$WORK/tsung.kv"
    # Chats: no_ack requests are the initial presence (one per user) and the chats; a chat that
    # found no destination was counted too, though nothing was written.
    local attempted=$((${R[tsung.noack]:-0} - ${R[tsung.started]:-0}))
    R[tsung.chats_sent]=$((attempted - ${R[tsung.no_online]:-0} - ${R[tsung.no_offline]:-0}))
    R[tsung.no_destination]=$((${R[tsung.no_online]:-0} + ${R[tsung.no_offline]:-0}))
    R[tsung.chats_received]="-"
    R[tsung.logins_ok]=${R[tsung.logins]}
}

# headroom_stats DIR: the same figures from summary.json and intervals.jsonl.
headroom_stats() {
    local d=$1 s=$1/summary.json
    [[ -s $s ]] || return 0
    cp "$s" "$RAW/headroom.summary.json"
    cp "$d/intervals.jsonl" "$RAW/headroom.intervals.jsonl" 2>/dev/null || true
    local j
    j() { local v; v=$(jq -r "$1" "$s" 2>/dev/null) || v=""; [[ -z $v || $v == null ]] && v="-"; echo "$v"; }
    # The XMPP counters: scenario.protocol.xmpp (docs/summary-json.md).
    local x='(.scenario.protocol.xmpp // [.. | objects | select(has("chat_sent"))][0] // {})'
    R[headroom.peak_users]=$(j '.connections_peak')
    R[headroom.tool_connected_max]=$(jq -s '[.[].connections_open // 0] | max' "$d/intervals.jsonl" 2>/dev/null || echo -)
    R[headroom.started]=$(j '.users_started')
    R[headroom.users_dropped]=$(j '.scenario.sessions.users_dropped')
    R[headroom.finished]=$(j '.users_finished')
    R[headroom.logins_ok]=$(j "$x.logins")
    R[headroom.login_mean_ms]=$(j '(.scenario.by_request["xmpp:login"].latency_us.mean // empty) / 1000 | . * 100 | round / 100')
    R[headroom.login_max_ms]=$(j '(.scenario.by_request["xmpp:login"].latency_us.max // empty) / 1000 | . * 100 | round / 100')
    R[headroom.chats_sent]=$(j "$x.chat_sent")
    R[headroom.chats_received]=$(j "$x.chat_received")
    R[headroom.no_destination]=$(j "$x.no_destination")
    R[headroom.errors]=$(j '.errors_total')
    R[headroom.error_kinds]=$(j '[(.errors // {}) | to_entries[] | select(.value > 0) | "\(.key)=\(.value)"]
        + [('"$x"' | to_entries[] | select((.key == "stream_errors" or .key == "error_replies") and .value > 0) | "\(.key)=\(.value)")]
        + (if (.scenario.sessions.aborted // 0) > 0 then ["sessions_aborted=\(.scenario.sessions.aborted)"] else [] end)
        | if length == 0 then "-" else join(" ") end')
    R[headroom.bytes_sent]=$(j '.bytes_sent')
    R[headroom.bytes_received]=$(j '.bytes_received')
    R[headroom.self_cpu_s]=$(j '((.cpu_user_s // empty) + (.cpu_sys_s // 0)) * 100 | round / 100')
}

# --- the runs ----------------------------------------------------------------------------------

log "output: $OUT"
log "scenario: $USERS users (Poisson $RATE/s over at most ${ARRIVE_S}s), hold ${HOLD}s, ids 1..$IDS, ejabberd on 127.0.0.1:$XMPP_PORT"
FAILED=0

if want headroom; then
    if [[ ! -x $HEADROOM ]]; then
        echo "error: no headroom binary at $HEADROOM; build one with" >&2
        echo "  CARGO_TARGET_DIR=/work/target-bench cargo build --release -p headroom" >&2
        echo "and run with HEADROOM=/work/target-bench/release/headroom (or TOOLS=tsung for Tsung alone)" >&2
        exit 3
    fi
    snapshot_headroom "$WORK"
    HR_CMD[0]=$HEADROOM
    log "headroom: checking that it runs the XMPP scenario (2 users, a few seconds)"
    ej_fresh
    if ! headroom_preflight; then
        echo "error: headroom cannot run the XMPP scenario yet: $HR_NOT_READY" >&2
        echo "  (its stderr: $RAW/headroom-preflight.err). Until its XMPP engine lands, measure Tsung" >&2
        echo "  alone with TOOLS=tsung $0" >&2
        exit 3
    fi
fi

for tool in $TOOLS; do
    case $tool in
        tsung)
            measure tsung "${TSUNG_CMD[@]}"
            tsung_stats "$WORK/tsung-log"
            ;;
        headroom)
            measure headroom "${HR_CMD[@]}"
            headroom_stats "$WORK/headroom-out"
            if [[ ${R[headroom.status]} != 0 ]] && grep -q 'not run yet\|unknown step\|unknown key' "$RAW/headroom.stderr"; then
                HR_NOT_READY=$(why_not_ready "$RAW/headroom.stderr")
            fi
            ;;
    esac
    # Per connected user, with the peak of connections established at once (ss).
    if [[ ${R[$tool.cpu_s]} != - ]] && ((${R[$tool.peak_conns]:-0} > 0)); then
        R[$tool.cpu_ms_per_user]=$(awk -v c="${R[$tool.cpu_s]}" -v n="${R[$tool.peak_conns]}" 'BEGIN { printf "%.3f", c * 1000 / n }')
        R[$tool.rss_kb_per_user]=$(awk -v r="${R[$tool.peak_rss_kb]}" -v n="${R[$tool.peak_conns]}" 'BEGIN { printf "%.2f", r / n }')
    else
        R[$tool.cpu_ms_per_user]="-" R[$tool.rss_kb_per_user]="-"
    fi
    if [[ ${R[$tool.status]} != 0 ]]; then
        FAILED=1
        log "$tool: the run failed (status ${R[$tool.status]})"
    elif ((${R[$tool.peak_conns]:-0} < USERS)); then
        FAILED=1
        log "$tool: only ${R[$tool.peak_conns]} of $USERS users were connected at once"
    fi
done

# --- the table ---------------------------------------------------------------------------------

ratio() { # ratio A B: A/B with 2 decimals, "-" if either is missing
    awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'
}
verdict() { awk -v r="$1" -v g="$2" 'BEGIN { if (r == "-") print "n/a"; else if (r + 0 >= g + 0) print "PASS"; else print "FAIL" }'; }

CPU_RATIO="-" RSS_RATIO="-"
if want tsung && want headroom && [[ ${R[tsung.status]:-} == 0 && ${R[headroom.status]:-} == 0 ]]; then
    CPU_RATIO=$(ratio "${R[tsung.cpu_ms_per_user]}" "${R[headroom.cpu_ms_per_user]}")
    RSS_RATIO=$(ratio "${R[tsung.rss_kb_per_user]}" "${R[headroom.rss_kb_per_user]}")
fi
CPU_VERDICT=$(verdict "$CPU_RATIO" "$CPU_GOAL")
RSS_VERDICT=$(verdict "$RSS_RATIO" "$RSS_GOAL")

row() { # row LABEL KEY [SUFFIX-KEY]: one value per tool
    local label=$1 key=$2 t line
    line=$(printf '%-34s' "$label")
    for t in $TOOLS; do line+=$(printf ' %18s' "${R[$t.$key]:--}"); done
    echo "$line"
}
pair() { # pair LABEL KEY1 KEY2: "v1 / v2" per tool
    local label=$1 t line
    line=$(printf '%-34s' "$label")
    for t in $TOOLS; do line+=$(printf ' %18s' "${R[$t.$2]:--} / ${R[$t.$3]:--}"); done
    echo "$line"
}
mib() { for t in $TOOLS; do R[$t.$2]=$(awk -v k="${R[$t.$1]:--}" 'BEGIN { if (k == "-") print "-"; else printf "%.1f", k / 1024 }'); done; }
mib peak_rss_kb peak_rss_mib
mib server_peak_rss_kb server_peak_rss_mib
mib maxrss_one_kb maxrss_one_mib

{
    echo "xmpp-vs-tsung: $USERS users (Poisson $RATE/s, capped at $USERS), hold ${HOLD}s, ids 1..$IDS,"
    echo "  ejabberd $(dpkg-query -W -f '${Version}' ejabberd 2>/dev/null || echo '?') on 127.0.0.1:$XMPP_PORT" \
        "(pinned: ${SERVER_PIN[*]:-no}), generator pinned: ${GEN_PIN[*]:-no}; $(date -Is) on $(hostname -s)"
    echo
    header=$(printf '%-34s' "")
    for t in $TOOLS; do header+=$(printf ' %18s' "$t"); done
    echo "$header"
    row "exit status" status
    row "wall time (s)" wall_s
    row "users started" started
    row "users finished" finished
    pair "tool's peak users / connections" peak_users tool_connected_max
    row "peak connected (ss, 1 s)" peak_conns
    row "  reached at (s)" peak_conns_at_s
    row "logins" logins_ok
    pair "login mean / max (ms)" login_mean_ms login_max_ms
    row "chats sent" chats_sent
    row "chats received" chats_received
    row "chats with no destination" no_destination
    row "errors" errors
    pair "bytes sent / received" bytes_sent bytes_received
    row "generator CPU (s, user+sys)" cpu_s
    pair "  user / sys (s)" user_s sys_s
    pair "  sampled tree / tool's own" sampled_cpu_s self_cpu_s
    row "generator peak RSS (MiB, tree)" peak_rss_mib
    row "  largest process max RSS (MiB)" maxrss_one_mib
    row "CPU ms per connected user" cpu_ms_per_user
    row "RSS KiB per connected user" rss_kb_per_user
    pair "ejabberd CPU (s) / peak RSS (MiB)" server_cpu_s server_peak_rss_mib
    for t in $TOOLS; do
        [[ ${R[$t.error_kinds]:--} != - ]] && echo "$t errors: ${R[$t.error_kinds]}"
    done
    echo
    if [[ $CPU_RATIO != - ]]; then
        # One run of each tool is one round: paired_line says so ("over 1 round"), as every
        # bench states its comparison the same way.
        echo "ratio tsung/headroom, CPU per connected user:" \
            "$(paired_line <<<"${R[tsung.cpu_ms_per_user]} ${R[headroom.cpu_ms_per_user]}")" \
            "(goal >= $CPU_GOAL: $CPU_VERDICT)"
        echo "ratio tsung/headroom, RSS per connected user:" \
            "$(paired_line <<<"${R[tsung.rss_kb_per_user]} ${R[headroom.rss_kb_per_user]}")" \
            "(goal >= $RSS_GOAL: $RSS_VERDICT)"
    else
        echo "tsung/headroom ratios: n/a (needs a successful run of both tools; TOOLS=\"$TOOLS\")"
    fi
    echo "(per connected user = the figure / peak connections established at once, counted by ss;"
    echo " CPU = wait4 rusage of the tool's process tree over the whole run, Tsung's VM start/stop included)"
} | tee "$OUT/$NAME.txt"

# --- JSON ----------------------------------------------------------------------------------------

for k in "${!R[@]}"; do printf '%s\t%s\n' "$k" "${R[$k]}"; done | sort >"$WORK/r.tsv"
JSON=$(jq -R -s -c \
    --arg users "$USERS" --arg rate "$RATE" --arg hold "$HOLD" --arg ids "$IDS" --arg arrive "$ARRIVE_S" \
    --arg cpu_ratio "$CPU_RATIO" --arg rss_ratio "$RSS_RATIO" --arg cpu_goal "$CPU_GOAL" --arg rss_goal "$RSS_GOAL" \
    --arg cpu_v "$CPU_VERDICT" --arg rss_v "$RSS_VERDICT" --arg date "$(date -Is)" --arg host "$(hostname -s)" \
    --arg tools "$TOOLS" --arg port "$XMPP_PORT" --arg failed "$FAILED" --arg hr_not_ready "$HR_NOT_READY" '
    def num: if test("^-?[0-9]+(\\.[0-9]+)?$") then tonumber else . end;
    (split("\n") | map(select(length > 0) | split("\t"))
        | reduce .[] as $kv ({}; ($kv[0] | split(".")) as $p | .[$p[0]][$p[1:] | join(".")] = ($kv[1] | num))) as $tools
    | {bench: "xmpp-vs-tsung", date: $date, host: $host, port: ($port | tonumber),
       scenario: {users: ($users | tonumber), arrival_rate: ($rate | num), arrival: "poisson",
                  arrival_phase_s: ($arrive | tonumber), hold_s: ($hold | tonumber),
                  ids: {first: 1, last: ($ids | tonumber)}, mix: {inactive: 20, idle: 60, active: 20}},
       tools: $tools,
       ratio_tsung_over_headroom: {cpu_per_user: ($cpu_ratio | num), rss_per_user: ($rss_ratio | num)},
       goals: {cpu: ($cpu_goal | num), rss: ($rss_goal | num)},
       verdict: {cpu: $cpu_v, rss: $rss_v},
       valid: ($failed == "0"), headroom_not_ready: (if $hr_not_ready == "" then null else $hr_not_ready end)}' <"$WORK/r.tsv")
echo "$JSON" >"$OUT/$NAME.json"
echo
echo "run dir: $OUT"
echo "$JSON"

if [[ -n $HR_NOT_READY ]]; then
    echo "error: headroom cannot run the XMPP scenario yet: $HR_NOT_READY" >&2
    exit 3
fi
((FAILED)) && exit 1
if [[ $STRICT == 1 && ($CPU_VERDICT == FAIL || $RSS_VERDICT == FAIL) ]]; then exit 4; fi
exit 0
