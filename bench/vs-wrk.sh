#!/usr/bin/env bash
# bench/vs-wrk.sh [DURATION=10s] [CONNS=50] — generator CPU efficiency, headroom against wrk.
#
# What it measures: requests completed per CPU-second the *generator* spends (user + sys), for a
# closed keep-alive HTTP/1.1 GET load on one thread, against the same nginx (1 worker, `return
# 200`) on 127.0.0.1. The request count is nginx's access-log delta over each run, so both tools
# are counted by the same neutral party; CPU comes from wait4's rusage via /usr/bin/time. Each
# tool's own claims (wrk's "N requests", headroom's summary.json) are kept as cross-check columns.
#
# How: nginx pinned to CPU 0, the generator to CPU 1 (when there are 2+ CPUs; PIN=0 disables).
# The tools alternate (wrk, headroom, wrk, headroom, ... ROUNDS=5 times) so that each round's two
# runs share the machine's weather; the figure is the median (min, max) of the per-round ratios
# headroom/wrk (paired_line in lib.sh), never a ratio of medians or the best round.
#
# Output: a table on stdout, and bench/runs/<YYYY-MM-DD>-<host>/ gets vs-wrk.csv, vs-wrk.txt
# (the table), vs-wrk.commands (exact commands), vs-wrk.versions, and raw tool outputs in vs-wrk.raw/.
# After the rounds, one more run per tool under `perf stat` gives system calls and context switches
# per response (count_round in lib.sh): what explains the ratio, never part of it.
#
# Environment: HEADROOM (binary, default target/release/headroom), ROUNDS (5), PIN (1), PORT,
# HEADROOM_BEFORE (another headroom binary, e.g. built from an earlier commit: it runs third in
# every round as tool "before", and the paired ratio headroom/before is printed: a change's cost
# measured in one run, never against a figure from another day).

# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"

DURATION=${1:-10s}
CONNS=${2:-50}
ROUNDS=${ROUNDS:-5}
DUR_S=$(dur_secs "$DURATION")
PORT=${PORT:-$(free_port)}
URL="http://127.0.0.1:$PORT/"

command -v wrk >/dev/null || die "wrk not installed (apt-get install -y wrk)"

bench_init vs-wrk "$CSV_HEADER"

nginx_start "$WORK/nginx" "$PORT" 1

WRK_CMD=(wrk -t1 -c"$CONNS" -d"$DURATION" "$URL")
HR_CMD=("$HEADROOM" run "$URL" -t 1 -c "$CONNS" -d "$DURATION" --json)
{
    echo "# nginx (pinned: ${SERVER_PIN[*]:-no}) with $WORK/nginx/nginx.conf:"
    sed 's/^/#   /' "$WORK/nginx/nginx.conf"
    echo "# $WORK/headroom is a copy of ${HEADROOM_ORIG:-$HEADROOM} (see vs-wrk.versions)"
    echo "${GEN_PIN[*]} ${WRK_CMD[*]}"
    echo "${GEN_PIN[*]} ${HR_CMD[*]}"
} >>"$OUT/vs-wrk.commands"

if [[ -n ${HEADROOM_BEFORE:-} ]]; then
    cp "$HEADROOM_BEFORE" "$WORK/headroom-before" || die "no binary at HEADROOM_BEFORE=$HEADROOM_BEFORE"
    echo "# before: $HEADROOM_BEFORE ($("$WORK/headroom-before" --version))" >>"$OUT/vs-wrk.commands"
fi
if ! have_headroom; then
    log "headroom binary not found at $HEADROOM (cargo build --release -p headroom); running wrk only"
fi

for round in $(seq 1 "$ROUNDS"); do
    log "round $round/$ROUNDS: wrk -c$CONNS -d$DURATION"
    measure "$WORK/nginx" "$RAW/wrk-$round.txt" "${WRK_CMD[@]}"
    wrk_req=$(awk '/requests in/ { print $1 }' "$RAW/wrk-$round.txt")
    csv_row wrk "$round" "$CONNS" "$DUR_S" "${wrk_req:--}" - - >>"$CSV"

    have_headroom && headroom_round "$round"
    if [[ -n ${HEADROOM_BEFORE:-} ]]; then
        log "round $round/$ROUNDS: headroom (before) -c $CONNS -d $DURATION"
        BEFORE_CMD=("$WORK/headroom-before" "${HR_CMD[@]:1}")
        measure "$WORK/nginx" "$RAW/before-$round.json" "${BEFORE_CMD[@]}"
        csv_row before "$round" "$CONNS" "$DUR_S" - - - >>"$CSV"
    fi
done

# Why the ratio is what it is: system calls and context switches per response, one counted run
# per tool (count_round: perf's tracepoint costs CPU, so this run is not one of the rounds).
log "counting system calls and context switches (one more run per tool, under perf stat)"
COUNTS=$(
    count_round "$WORK/nginx" wrk "${WRK_CMD[@]}"
    have_headroom && count_round "$WORK/nginx" headroom "${HR_CMD[@]}"
    [[ -n ${HEADROOM_BEFORE:-} ]] && count_round "$WORK/nginx" before "$WORK/headroom-before" "${HR_CMD[@]:1}"
    true
)

{
    echo "vs-wrk: closed keep-alive GET, 1 generator thread, $CONNS connections, $DURATION per run," \
        "$ROUNDS rounds, nginx 1 worker; $(date -Is) on $(hostname -s)"
    summarize "$CSV" wrk
    if [[ -n ${HEADROOM_BEFORE:-} ]]; then
        echo "ratio headroom/before (requests per generator CPU-second, paired by round):" \
            "$(paired_ratios "$CSV" headroom before)"
    fi
    echo
    echo "$COUNTS"
} | tee "$OUT/vs-wrk.txt"
echo
echo "run dir: $OUT"
