#!/usr/bin/env bash
# bench/idle-conns.sh [N=15000] [HOLD=20] — headroom's user-space memory per idle connection.
#
# What it measures: the resident memory (VmRSS) of a `headroom run` whose N users each connect to
# nginx on 127.0.0.1, make one request, then think for 600 s — i.e. hold an idle keep-alive
# connection — until the run ends after HOLD seconds. RSS is sampled from /proc/PID/status at
# HOLD/2 and near the end, together with the number of established client sockets (ss) and of
# open descriptors (/proc/PID/fd). The same is done for a 1-connection run (the baseline), and
# the report gives RSS/N and (RSS - baseline)/N. The goal is <= 2 KiB per connection, and
# (RSS - baseline)/N <= 512 B (issue 29; 2026-11-22: 209 B; 2026-11-28: 829 B, then 421 B once a
# user's capture box was made only when a reply has a field to capture and its in-flight table
# held room for its batch, not for 4).
#
# Not counted: the kernel's memory for each socket (~4.7 KB per idle loopback socket here, per
# end) — RSS is user memory only.
#
# Output: a table on stdout; bench/runs/<YYYY-MM-DD>-<host>/ gets idle-conns.csv (one row per
# sample), idle-conns.txt, idle-conns.commands, idle-conns.versions and raw outputs.
#
# Environment: HEADROOM (binary), PIN (1), PORT.

# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"

N=${1:-15000}
HOLD=${2:-20}
PORT=${PORT:-$(free_port)}
URL="http://127.0.0.1:$PORT/"

((HOLD >= 6)) || die "HOLD must be at least 6 seconds"
ulimit -n 20000 || die "cannot raise the descriptor limit to 20000 (hard limit: $(ulimit -Hn))"
have_headroom || die "headroom binary not found at $HEADROOM (cargo build --release -p headroom)"

bench_init idle-conns "label,connections,sample_at_s,established,fds,vmrss_kb,vmhwm_kb,status,nginx_requests,max_rss_kb"

nginx_start "$WORK/nginx" "$PORT" 1

hr_cmd() { echo "$HEADROOM" run "$URL" -c "$1" --think 600s -d "${HOLD}s" --connect-timeout 10s --json; }
{
    echo "# ulimit -n 20000; nginx (pinned: ${SERVER_PIN[*]:-no}) with $WORK/nginx/nginx.conf:"
    sed 's/^/#   /' "$WORK/nginx/nginx.conf"
    echo "# $WORK/headroom is a copy of ${HEADROOM_ORIG:-$HEADROOM} (see idle-conns.versions)"
    echo "${GEN_PIN[*]} $(hr_cmd 1)"
    echo "${GEN_PIN[*]} $(hr_cmd "$N")"
} >>"$OUT/idle-conns.commands"

status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
established() { ss -Htn state established "( dport = :$PORT )" | wc -l; }

# hold LABEL CONNS — run headroom in the background, sample it twice, wait for it to end.
# Leaves the last sample in S_RSS_KB, S_EST; appends both samples to the CSV.
hold() {
    local label=$1 conns=$2 pid gpid rc=0 before after
    before=$(access_count "$WORK/nginx")
    # shellcheck disable=SC2046
    /usr/bin/time -o "$RAW/$label.time" -f '%U %S %M %e' "${GEN_PIN[@]}" $(hr_cmd "$conns") \
        >"$RAW/$label.json" 2>"$RAW/$label.err" &
    gpid=$!
    # time forks headroom (taskset execs it, so the pid is the same); find it.
    for _ in $(seq 1 50); do
        pid=$(pgrep -P "$gpid" | head -n 1) && [[ -n $pid ]] && break
        sleep 0.02
    done
    if [[ -z ${pid:-} ]]; then
        wait "$gpid" || rc=$?
        log "$label: headroom exited at once (status $rc); stdout/stderr:"
        cat "$RAW/$label.json" "$RAW/$label.err" >&2
        die "headroom did not hold its connections"
    fi
    LIVE_PIDS="$pid $gpid" # killed on exit if still running (cleared once reaped)

    local -a at=($((HOLD / 2)) $((HOLD - 2)))
    local elapsed=0 s est fds rss hwm
    for s in "${at[@]}"; do
        sleep $((s - elapsed))
        elapsed=$s
        est=$(established)
        fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
        rss=$(status_kb "$pid" VmRSS)
        hwm=$(status_kb "$pid" VmHWM)
        log "$label at ${s}s: $est established, $fds fds, VmRSS $rss KiB (peak $hwm KiB)"
        SAMPLES+=("$label,$conns,$s,$est,$fds,$rss,$hwm")
        S_RSS_KB=$rss S_EST=$est
    done

    # The run ends by itself after HOLD s; allow 30 s for it to close N connections and report.
    for _ in $(seq 1 300); do
        kill -0 "$gpid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$gpid" 2>/dev/null; then
        log "$label: headroom still running 30 s after the end of the run; killing $pid"
        kill "$pid" 2>/dev/null || true
    fi
    wait "$gpid" || rc=$?
    LIVE_PIDS=
    after=$(access_count "$WORK/nginx")
    local maxrss
    maxrss=$(tail -n 1 "$RAW/$label.time" | cut -d' ' -f3)
    local row
    for row in "${SAMPLES[@]}"; do
        [[ $row == "$label,"* ]] && echo "$row,$rc,$((after - before)),$maxrss" >>"$CSV"
    done
    if ((rc != 0)); then
        log "$label: headroom exited with status $rc; stderr:"
        tail -n 20 "$RAW/$label.err" >&2
    fi
    H_REQUESTS=$((after - before))
}

SAMPLES=()
# shellcheck disable=SC2034 # read by the cleanup below
LIVE_PIDS= # set and cleared by hold
# shellcheck disable=SC2016 # expanded when the cleanup runs
on_exit 'for p in $LIVE_PIDS; do kill "$p" 2>/dev/null; done'
log "baseline: 1 connection held for ${HOLD}s"
hold baseline 1
BASE_KB=$S_RSS_KB
log "$N connections held for ${HOLD}s"
hold idle "$N"
TOTAL_KB=$S_RSS_KB HELD=$S_EST

jget() { local v; v=$(jq -r "$1 // \"-\"" "$RAW/idle.json" 2>/dev/null) || true; echo "${v:--}"; }
{
    echo "idle-conns: $N users, 1 request each then 600 s think, run of ${HOLD}s, nginx 1 worker;" \
        "$(date -Is) on $(hostname -s)"
    echo
    column -s, -t "$CSV"
    echo
    echo "connections held (established at the last sample): $HELD of $N" \
        "(headroom says connections_peak=$(jget .connections_peak); nginx logged $H_REQUESTS requests)"
    echo "RSS total: $TOTAL_KB KiB; baseline (1 connection): $BASE_KB KiB"
    awk -v t="$TOTAL_KB" -v b="$BASE_KB" -v n="$N" 'BEGIN {
        printf "RSS per connection: total/N = %.0f B (%.2f KiB); (total - baseline)/N = %.0f B (%.2f KiB)\n",
            t * 1024 / n, t / n, (t - b) * 1024 / n, (t - b) / n
        printf "goal <= 2 KiB per connection: %s\n", ((t - b) / n <= 2 ? "met" : "NOT met")
        printf "goal <= 512 B per connection over the baseline (issue 29): %s\n",
            ((t - b) * 1024 / n <= 512 ? "met" : "NOT met") }'
} | tee "$OUT/idle-conns.txt"
echo
echo "run dir: $OUT"
