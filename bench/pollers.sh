#!/usr/bin/env bash
# bench/pollers.sh [HOLD=20] — the kernel-poll factor of seed 000 (its Table 3: system CPU with
# and without kernel poll) on headroom's own reactor: select(2), poll(2) and epoll(7).
#
# What it measures: `headroom serve --arch reactor --poller P --workers 1` (pinned to CPU 0)
# holding N keep-alive connections of slow clients — `headroom run -c N --think 5s` (pinned to
# CPU 1): every user sends one small request (`GET /`), then thinks 5 s, on the same connection.
# Once all N connections are established (counted with ss on the server's port) and one more
# think period has passed, the server's utime and stime are read from /proc/PID/stat twice, HOLD
# seconds apart; the cell is their deltas / elapsed / CLK_TCK, as `sys% / user%` of one core.
# The server's /status gives the requests answered in the window (the cross-check that the
# clients really were sending: about N/5 per second).
#
# Cells: pollers select, poll, epoll x N in 1,000, 5,000, 15,000; select only at 1,000 (a
# descriptor above 1023 cannot be in an fd_set: the server would refuse those connections).
#
# What to expect (seed 000, Table 3): poll's system CPU grows with N, since every poll(2) call
# hands the kernel all N descriptors and the kernel looks at each (DESIGN.md measured ~1.6 ms per
# call over 9,000 idle sockets); epoll's stays nearly flat (a wait costs O(ready), ~0.2 µs).
# select is poll's cost over a bitmap, and capped at 1,024.
#
# Note on the load shape: by default (LOAD=rate) each connection sends one request every 5 s at
# its own offset (`--rate N/5 -c N`), so the requests arrive evenly, as independent slow clients
# do: many small poll rounds, each paying for all N descriptors. LOAD=think has every user start
# at once and think a constant 5 s, so the requests come in one burst every 5 s and poll's cost
# is paid far less often (pollers-think.*).
#
# Output: a table on stdout; bench/runs/<YYYY-MM-DD>-<host>/ gets pollers.csv (one row per
# cell), pollers.txt (the table), pollers.commands, pollers.versions and raw outputs
# (pollers-think.* with LOAD=think).
#
# Environment: HEADROOM (binary), PIN (1), CONNS ("1000 5000 15000"), POLLERS ("select poll
# epoll"), THINK (5s), LOAD (rate | think), SETTLE (seconds after the last connect; default:
# one think period).

# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"

HOLD=${1:-20}
CONNS=${CONNS:-"1000 5000 15000"}
POLLERS=${POLLERS:-"select poll epoll"}
THINK=${THINK:-5s}
LOAD=${LOAD:-rate}
THINK_S=$(dur_secs "$THINK")
SETTLE=${SETTLE:-$THINK_S}
CONNECT_WAIT=60 # seconds allowed for all N connections to be established
SELECT_MAX=1000 # select's cells stop here (FD_SETSIZE is 1024, and the server has a few fds)

((HOLD >= 5)) || die "HOLD must be at least 5 seconds"
[[ $LOAD == think || $LOAD == rate ]] || die "LOAD must be think or rate, not $LOAD"
ulimit -n 20000 || die "cannot raise the descriptor limit to 20000 (hard limit: $(ulimit -Hn))"
have_headroom || die "headroom binary not found at $HEADROOM (cargo build --release -p headroom)"
"$HEADROOM" serve --help >/dev/null 2>&1 || die "$HEADROOM has no 'serve' subcommand"
for n in $CONNS; do
    ((n + 64 <= 20000)) || die "N=$n: one client process holds at most ~19,900 connections"
done

TCK=$(getconf CLK_TCK)
NAME=pollers # LOAD=think writes pollers-think.* beside the default's files
[[ $LOAD == think ]] && NAME=pollers-think
bench_init "$NAME" "poller,connections,load,established,window_s,sys_pct,user_pct,stime_ticks,utime_ticks,requests,req_per_s,client_requests,client_errors,status"

server_cmd() { echo "$HEADROOM" serve --arch reactor --poller "$1" --workers 1 --listen "127.0.0.1:$2"; }
client_cmd() { # N PORT DURATION_S
    local load=(--think "$THINK")
    [[ $LOAD == rate ]] && load=(--rate "$(awk -v n="$1" -v t="$THINK_S" 'BEGIN { printf "%g", n / t }')")
    echo "$HEADROOM" run "http://127.0.0.1:$2/" -c "$1" "${load[@]}" -d "${3}s" --connect-timeout 10s -q --json
}

established() { ss -Htn state established "( sport = :$1 )" | wc -l; }

# utime and stime (ticks) of PID: fields 14 and 15 of /proc/PID/stat, counted after the ')'
# that ends the command name.
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12, $13 }'; }

# The server's request counter, from its /status (one extra short connection).
server_requests() {
    local port=$1 body
    body=$(exec 3<>"/dev/tcp/127.0.0.1/$port" &&
        printf 'GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' >&3 &&
        timeout 5 cat <&3) || { echo -; return; }
    sed -n 's/.*"requests":\([0-9]*\).*/\1/p' <<<"$body" | head -n 1
}

stop_pid() { # PID — SIGTERM, then SIGKILL after 15 s
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || return 0
    for i in $(seq 1 150); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

LIVE_PIDS= # killed on exit if still running
# shellcheck disable=SC2016 # expanded when the cleanup runs
on_exit 'for p in $LIVE_PIDS; do kill -KILL "$p" 2>/dev/null; done'

# cell POLLER N — one measurement; appends a CSV row and sets CELL (the table text).
cell() {
    local poller=$1 n=$2 label="$1-$2" port spid cpid i est status=ok
    port=$(free_port)
    # shellcheck disable=SC2046
    "${SERVER_PIN[@]}" $(server_cmd "$poller" "$port") >"$RAW/$label.server.out" 2>"$RAW/$label.server.err" &
    spid=$! # taskset execs the server: same pid
    LIVE_PIDS="$spid"
    for i in $(seq 1 100); do
        grep -q "listening on" "$RAW/$label.server.out" 2>/dev/null && break
        kill -0 "$spid" 2>/dev/null || break
        sleep 0.05
    done
    grep -q "listening on" "$RAW/$label.server.out" ||
        { cat "$RAW/$label.server.err" >&2; die "$label: the server did not start"; }

    local dur=$((CONNECT_WAIT + SETTLE + HOLD + 10))
    # shellcheck disable=SC2046
    "${GEN_PIN[@]}" $(client_cmd "$n" "$port" "$dur") >"$RAW/$label.client.json" 2>"$RAW/$label.client.err" &
    cpid=$!
    LIVE_PIDS="$spid $cpid"
    {
        echo "${SERVER_PIN[*]} $(server_cmd "$poller" "$port")"
        echo "${GEN_PIN[*]} $(client_cmd "$n" "$port" "$dur")"
    } >>"$OUT/$NAME.commands"

    local t0=$SECONDS
    est=$(established "$port")
    while ((est < n && SECONDS - t0 < CONNECT_WAIT)); do
        kill -0 "$cpid" 2>/dev/null || break
        sleep 0.5
        est=$(established "$port")
    done
    if ((est < n)); then
        log "$label: only $est of $n connections established after $((SECONDS - t0)) s"
        status=short
    fi
    log "$label: $est connections after $((SECONDS - t0)) s; settling ${SETTLE}s, measuring ${HOLD}s"
    sleep "$SETTLE"

    local r0 r1 u0 s0 u1 s1 w0 w1
    r0=$(server_requests "$port")
    read -r u0 s0 < <(cpu_ticks "$spid")
    w0=$(date +%s.%N)
    sleep "$HOLD"
    read -r u1 s1 < <(cpu_ticks "$spid")
    w1=$(date +%s.%N)
    r1=$(server_requests "$port")
    est=$(established "$port")

    kill -INT "$cpid" 2>/dev/null || true # the client stops and prints its summary
    wait "$cpid" || true
    stop_pid "$spid"
    # shellcheck disable=SC2034 # read by the cleanup registered with on_exit
    LIVE_PIDS=

    local creq cerr
    creq=$(jq -r '.requests // "-"' "$RAW/$label.client.json" 2>/dev/null || echo -)
    cerr=$(jq -r '[.errors // {} | .[] | numbers] | add // 0' "$RAW/$label.client.json" 2>/dev/null || echo -)
    local row
    row=$(awk -v p="$poller" -v n="$n" -v load="$LOAD" -v est="$est" -v w0="$w0" -v w1="$w1" \
        -v u0="$u0" -v s0="$s0" -v u1="$u1" -v s1="$s1" -v tck="$TCK" -v r0="$r0" -v r1="$r1" \
        -v creq="$creq" -v cerr="$cerr" -v st="$status" 'BEGIN {
        w = w1 - w0; ds = s1 - s0; du = u1 - u0
        req = (r0 ~ /^[0-9]+$/ && r1 ~ /^[0-9]+$/) ? r1 - r0 - 1 : "-"
        printf "%s,%d,%s,%d,%.2f,%.1f,%.1f,%d,%d,%s,%s,%s,%s,%s\n", p, n, load, est, w,
            100 * ds / tck / w, 100 * du / tck / w, ds, du, req,
            (req == "-" ? "-" : sprintf("%.0f", req / w)), creq, cerr, st }')
    echo "$row" >>"$CSV"
    CELL=$(awk -F, '{ printf "%.1f / %.1f", $6, $7 }' <<<"$row")
    log "$label: sys/user % = $CELL ($(cut -d, -f11 <<<"$row") req/s; client errors $cerr)"
}

declare -A TABLE
for poller in $POLLERS; do
    for n in $CONNS; do
        if [[ $poller == select ]] && ((n > SELECT_MAX)); then
            TABLE[$poller,$n]="- (FD_SETSIZE)"
            continue
        fi
        cell "$poller" "$n"
        TABLE[$poller,$n]=$CELL
    done
done

{
    echo "pollers: headroom reactor, 1 worker, N slow keep-alive clients (LOAD=$LOAD, one request" \
        "per user every ${THINK}); server CPU over ${HOLD}s as sys% / user% of one core;" \
        "$(date -Is) on $(hostname -s)"
    echo
    printf '%-8s' poller
    for n in $CONNS; do printf ' | %16s' "$n conns"; done
    echo
    printf '%-8s' --------
    for n in $CONNS; do printf ' | %16s' ----------------; done
    echo
    for poller in $POLLERS; do
        printf '%-8s' "$poller"
        for n in $CONNS; do printf ' | %16s' "${TABLE[$poller,$n]}"; done
        echo
    done
    echo
    echo "Per cell (requests = server /status delta over the window):"
    column -s, -t <(cut -d, -f1,2,4,5,6,7,10,11,13,14 "$CSV")
} | tee "$OUT/$NAME.txt"
echo
echo "run dir: $OUT"
