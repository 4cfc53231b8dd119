#!/usr/bin/env bash
# bench/rate-cost.sh [DURATION=10s] [CONNS=50] — what pacing costs the generator.
#
# What it measures: headroom's CPU per response (user + sys, from wait4's rusage) at a constant
# rate (`--rate R -c CONNS`, each R of RATES) against the closed model over the same connections
# (`-c CONNS`, as fast as the server answers), on the same nginx (1 worker, `return 200`) on
# 127.0.0.1, one generator thread. Responses are counted by nginx (access-log delta).
#
# The figures, per rate:
#   cost        CPU per response at the rate ÷ the closed model's, the median of the paired
#               per-round ratios with min and max (issue 29's goal: <= 1.3)
#   held        responses nginx logged ÷ (R × duration): the rate held (goal: within 1%)
#   latency     the median over rounds of headroom's corrected p50 and p99 (what batching the
#               sends within the timer slack does to the server's queue)
# then, from one more run per mode under `perf stat` (count_round in lib.sh), system calls and
# context switches per response: a paced send that wakes the generator on its own costs a
# sleep and a wake, which is what --timer-slack saves.
#
# Why a pacing cost at all: a closed load keeps the generator and the server busy, so each wake
# finds many replies; at a rate the generator sleeps between sends, and each send can cost a
# wake of its own (and a wake of the server). Run with SLACKS="0 1ms" to see what the slack saves.
#
# How: nginx pinned to CPU 0, headroom to CPU 1 (PIN=0 disables); in each round the closed run
# and the rates alternate, their order reversed every other round.
#
# Output: a table on stdout; bench/runs/<YYYY-MM-DD>-<host>/rate-cost.{csv,txt,commands,versions}
# and raw outputs in rate-cost.raw/.
# Environment: HEADROOM (binary, default target/release/headroom), ROUNDS (5), PIN (1), PORT,
# RATES ("10000 30000"), SLACKS ("-": headroom's default --timer-slack; e.g. "0 1ms" runs each
# rate once per value, as tool rate-R@S).

# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"

DURATION=${1:-10s}
CONNS=${2:-50}
ROUNDS=${ROUNDS:-5}
RATES=${RATES:-10000 30000}
SLACKS=${SLACKS:--}
DUR_S=$(dur_secs "$DURATION")
PORT=${PORT:-$(free_port)}
URL="http://127.0.0.1:$PORT/"

have_headroom || die "headroom binary not found at $HEADROOM (cargo build --release -p headroom)"
for r in $RATES; do
    [[ $r =~ ^[1-9][0-9]*$ ]] || die "RATES: '$r' is not a whole number of requests per second"
done

bench_init rate-cost "$CSV_HEADER"
nginx_start "$WORK/nginx" "$PORT" 1

BASE=("$HEADROOM" run "$URL" -t 1 -c "$CONNS" -d "$DURATION" --json)
# The modes, as "tool|extra flags": the closed model first, then each rate at each slack.
MODES=("closed|")
for r in $RATES; do
    for s in $SLACKS; do
        if [[ $s == - ]]; then
            MODES+=("rate-$r|--rate $r")
        else
            MODES+=("rate-$r@$s|--rate $r --timer-slack $s")
        fi
    done
done
{
    echo "# nginx (pinned: ${SERVER_PIN[*]:-no}) with $WORK/nginx/nginx.conf:"
    sed 's/^/#   /' "$WORK/nginx/nginx.conf"
    for m in "${MODES[@]}"; do
        echo "${GEN_PIN[*]} ${BASE[*]} ${m#*|}   # ${m%%|*}"
    done
} >>"$OUT/rate-cost.commands"

one() { # ROUND MODE
    local round=$1 tool=${2%%|*} extra
    read -r -a extra <<<"${2#*|}"
    headroom_row "$tool" "$round" "${BASE[@]}" "${extra[@]}"
    echo "$tool $round $(jget .latency_us.p50) $(jget .latency_us.p99) $(jget .timer_slack_us)" \
        >>"$RAW/latency.txt"
}

for round in $(seq 1 "$ROUNDS"); do
    order=("${MODES[@]}")
    if ((round % 2 == 0)); then
        order=()
        for ((i = ${#MODES[@]} - 1; i >= 0; i--)); do order+=("${MODES[$i]}"); done
    fi
    for m in "${order[@]}"; do one "$round" "$m"; done
done

log "counting system calls and context switches (one more run per mode, under perf stat)"
COUNTS=$(
    for m in "${MODES[@]}"; do
        read -r -a extra <<<"${m#*|}"
        count_round "$WORK/nginx" "${m%%|*}" "${BASE[@]}" "${extra[@]}"
    done
)

{
    echo "rate-cost: CPU per response at a constant rate vs the closed model, 1 generator thread," \
        "$CONNS connections, $DURATION per run, $ROUNDS rounds, nginx 1 worker;" \
        "$(date -Is) on $(hostname -s)"
    summarize "$CSV" closed | grep -v '^ratio '
    echo
    for m in "${MODES[@]:1}"; do
        tool=${m%%|*}
        r=${tool#rate-}
        r=${r%@*}
        slack=$(awk -v t="$tool" '$1 == t && $5 != "-" { print $5; exit }' "$RAW/latency.txt")
        echo "$tool (timer slack ${slack:-?} µs):"
        # cost: closed's responses per CPU-second over the rate's = the rate's CPU per response
        # over closed's, paired by round.
        echo "  cost, CPU per response ÷ closed's: $(paired_ratios "$CSV" closed "$tool")"
        echo "  held, responses ÷ (rate × duration): $(awk -F, -v t="$tool" -v want=$((r * DUR_S)) \
            '$1 == t && $5 == 0 { print $6 / want, 1 }' "$CSV" | paired_line)"
        p50=$(awk -v t="$tool" '$1 == t { print $3 }' "$RAW/latency.txt" | median_max | cut -d' ' -f1)
        p99=$(awk -v t="$tool" '$1 == t { print $4 }' "$RAW/latency.txt" | median_max | cut -d' ' -f1)
        echo "  latency (corrected), median over rounds: p50 ${p50}µs, p99 ${p99}µs"
    done
    echo
    echo "$COUNTS"
} | tee "$OUT/rate-cost.txt"
echo
echo "run dir: $OUT"
