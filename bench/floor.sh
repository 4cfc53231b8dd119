#!/usr/bin/env bash
# bench/floor.sh [DURATION=10s] [CONNS=50] — how far above the kernel's floor each generator is.
#
# What it measures: requests per generator CPU-second (nginx's access-log count over wait4's
# rusage, as bench/vs-wrk.sh) for a closed keep-alive HTTP/1.1 GET load on one thread, for wrk,
# headroom, and the floor client (bench/floor/): the least such a generator can do — recv, find
# the reply's end, send the next request; no clock read, no histogram, no parsing — over epoll
# (`floor-epoll`, headroom's own pattern) and over io_uring (`floor-uring`: one recv and one send
# per reply, one io_uring_enter per loop turn, DEFER_TASKRUN; `floor-multi`: one multishot recv
# per connection from a provided-buffer ring, armed once, and one send per reply). The floor's figure bounds what any
# user-space work could win: if it is only 1.1x wrk's, no generator doing the same system calls
# reaches 1.3x (issue 29's goal) on this kernel, and the gain must come from doing fewer.
#
# How: as bench/vs-wrk.sh (nginx 1 worker pinned to CPU 0, generators to CPU 1, the tools
# alternating within each of ROUNDS rounds); the figures are paired per-round ratios against wrk
# and headroom/floor-epoll (paired_line), never ratios of medians.
#
# Output: a table on stdout; bench/runs/<YYYY-MM-DD>-<host>/floor.{csv,txt,commands,versions}.
# With h2load installed, `h2load --h1` runs in each round too (tool h2load-h1, the other anchor
# of issue 29's HTTP/1.1 goal), and floor-epoll/h2load-h1 is printed.
# Environment: HEADROOM, ROUNDS (5), PIN (1), PORT, FLOOR_IOS ("epoll uring multi": the floor
# variants to run), H2LOAD (1 when h2load is installed; 0 skips it), FLOOR_SPIN (0: polls without sleeping that
# floor-epoll makes before a wait that may sleep; 2026-11-28, 3 s runs: FLOOR_SPIN=32 cut its
# context switches 6-10x, 0.3 to 0.03-0.05 per response, and its requests per CPU-second did not
# rise: 153-163k against 157-172k). Builds bench/floor with cargo (its own
# workspace, never part of the project's build).

# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"

DURATION=${1:-10s}
CONNS=${2:-50}
ROUNDS=${ROUNDS:-5}
FLOOR_IOS=${FLOOR_IOS:-epoll uring multi}
H2LOAD=${H2LOAD:-$(command -v h2load >/dev/null && echo 1 || echo 0)}
DUR_S=$(dur_secs "$DURATION")
PORT=${PORT:-$(free_port)}
URL="http://127.0.0.1:$PORT/"

command -v wrk >/dev/null || die "wrk not installed (apt-get install -y wrk)"
cargo build --release --quiet --manifest-path "$BENCH_DIR/floor/Cargo.toml" ||
    die "could not build bench/floor (cargo build --release --manifest-path bench/floor/Cargo.toml)"

bench_init floor "$CSV_HEADER"
cp "$BENCH_DIR/floor/target/release/floor" "$WORK/floor"
nginx_start "$WORK/nginx" "$PORT" 1

WRK_CMD=(wrk -t1 -c"$CONNS" -d"$DURATION" "$URL")
HR_CMD=("$HEADROOM" run "$URL" -t 1 -c "$CONNS" -d "$DURATION" --json)
H2L_CMD=(h2load --h1 -t1 -c"$CONNS" -D "$DUR_S" "$URL")
{
    echo "# nginx (pinned: ${SERVER_PIN[*]:-no}) with $WORK/nginx/nginx.conf"
    echo "${GEN_PIN[*]} ${WRK_CMD[*]}"
    echo "${GEN_PIN[*]} ${HR_CMD[*]}"
    [[ $H2LOAD == 1 ]] && echo "${GEN_PIN[*]} ${H2L_CMD[*]}"
    echo "${GEN_PIN[*]} $WORK/floor epoll|uring|multi 127.0.0.1:$PORT $CONNS $DUR_S"
} >>"$OUT/floor.commands"

for round in $(seq 1 "$ROUNDS"); do
    log "round $round/$ROUNDS: wrk"
    measure "$WORK/nginx" "$RAW/wrk-$round.txt" "${WRK_CMD[@]}"
    csv_row wrk "$round" "$CONNS" "$DUR_S" - - - >>"$CSV"
    if [[ $H2LOAD == 1 ]]; then
        log "round $round/$ROUNDS: h2load --h1"
        measure "$WORK/nginx" "$RAW/h2load-h1-$round.txt" "${H2L_CMD[@]}"
        csv_row h2load-h1 "$round" "$CONNS" "$DUR_S" - - - >>"$CSV"
    fi
    for io in $FLOOR_IOS; do
        log "round $round/$ROUNDS: floor-$io"
        measure "$WORK/nginx" "$RAW/floor-$io-$round.txt" "$WORK/floor" "$io" "127.0.0.1:$PORT" \
            "$CONNS" "$DUR_S"
        csv_row "floor-$io" "$round" "$CONNS" "$DUR_S" - - - >>"$CSV"
    done
    have_headroom && headroom_round "$round"
done

{
    echo "floor: closed keep-alive GET, 1 generator thread, $CONNS connections, $DURATION per run," \
        "$ROUNDS rounds, nginx 1 worker; $(date -Is) on $(hostname -s)"
    summarize "$CSV" wrk
    echo "ratio headroom/floor-epoll (requests per generator CPU-second, paired by round):" \
        "$(paired_ratios "$CSV" headroom floor-epoll)"
    [[ " $FLOOR_IOS " == *" multi "* && " $FLOOR_IOS " == *" epoll "* ]] &&
        echo "ratio floor-multi/floor-epoll (requests per generator CPU-second, paired by round):" \
            "$(paired_ratios "$CSV" floor-multi floor-epoll)"
    if [[ $H2LOAD == 1 ]]; then
        echo "ratio floor-epoll/h2load-h1 (requests per generator CPU-second, paired by round):" \
            "$(paired_ratios "$CSV" floor-epoll h2load-h1)"
        echo "ratio headroom/h2load-h1 (requests per generator CPU-second, paired by round):" \
            "$(paired_ratios "$CSV" headroom h2load-h1)"
    fi
} | tee "$OUT/floor.txt"
rm -rf "$RAW"
echo
echo "run dir: $OUT"
