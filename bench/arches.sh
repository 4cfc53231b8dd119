#!/usr/bin/env bash
# bench/arches.sh — seed 002 (rudy) redone: a pool of H handler threads, each blocking in accept
# and serving one connection at a time, against C clients doing N sequential requests each
# (C x N = 100), every request answered after SLEEP_MS=40 ms of "work" (`/sleep/40`).
#
# What it measures: the total time of the C x N run (headroom's `duration_s`), for H in
# HANDLERS={1,2,5,10,20} (rows) and (C,N) in CELLS={(1,100),(2,50),(5,20),(10,10),(20,5),(100,1)}
# (columns). The shape to expect: ~4 s with 1 handler whatever (C,N); with H handlers and
# C >= H, ~4/H s — the pool serves H requests at a time and the rest wait in the listen backlog;
# with C < H, ~4/C s (the clients, not the handlers, are the limit). Rudy's table had the same
# shape, plus errors at (100,1) that came from Erlang's default backlog, not from the model.
#
# How: like rudy's test client, every request opens its own connection (`--no-keepalive`), so a
# handler is free again after each request. KEEPALIVE=1 keeps each client's connection instead:
# then a handler is held by one client for all its N requests and (C,N) with C not a multiple of
# H takes ceil(C/H) rounds — the pool-exhaustion effect of keep-alive. One fresh server per cell
# (`headroom serve --arch pool --handlers H`), pinned to CPU 0 and the generator to CPU 1 when
# there are two CPUs (PIN=0 disables); stopped with SIGTERM after the cell.
#
# Output: the table on stdout (and the expected one for comparison), and
# bench/runs/<YYYY-MM-DD>-<host>/ gets arches.csv, arches.txt (the tables), arches.commands,
# arches.versions and the raw JSON summaries in arches.raw/ (arches-keepalive.* with
# KEEPALIVE=1).
#
# Environment: HEADROOM (binary, default target/release/headroom), HANDLERS, CELLS ("CxN ..."),
# SLEEP_MS (40), KEEPALIVE (0), PIN (1), PORT.

# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"

HANDLERS=${HANDLERS:-"1 2 5 10 20"}
CELLS=${CELLS:-"1x100 2x50 5x20 10x10 20x5 100x1"}
SLEEP_MS=${SLEEP_MS:-40}
KEEPALIVE=${KEEPALIVE:-0}
PORT=${PORT:-$(free_port)}
URL="http://127.0.0.1:$PORT/sleep/$SLEEP_MS"

have_headroom || die "headroom binary not found at $HEADROOM (cargo build --release -p headroom)"
command -v jq >/dev/null || die "jq not installed (apt-get install -y jq)"

NAME=arches
[[ $KEEPALIVE == 1 ]] && NAME=arches-keepalive
bench_init "$NAME" "handlers,clients,per_user,keepalive,sleep_ms,requests,duration_s,errors,status,expected_s"

KA_FLAG=(--no-keepalive)
[[ $KEEPALIVE == 1 ]] && KA_FLAG=()

SERVER_PID=
server_stop() {
    [[ -n $SERVER_PID ]] || return 0
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    local i
    for i in $(seq 1 100); do
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.05
    done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
}
on_exit server_stop

# server_start H — a pool of H handlers on 127.0.0.1:PORT; returns once its readiness line says
# it listens.
server_start() {
    local h=$1 log=$RAW/serve-h$1.log i
    "${SERVER_PIN[@]}" "$HEADROOM" serve --arch pool --handlers "$h" \
        --listen "127.0.0.1:$PORT" >"$log" 2>&1 &
    SERVER_PID=$!
    for i in $(seq 1 200); do
        grep -q "listening on" "$log" && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.025
    done
    cat "$log" >&2
    die "headroom serve --handlers $h did not start on 127.0.0.1:$PORT"
}

# expected H C N — seconds if the pool served min(H, C) requests at a time, back to back.
expected() {
    awk -v h="$1" -v c="$2" -v n="$3" -v ms="$SLEEP_MS" -v ka="$KEEPALIVE" 'BEGIN {
        p = (h < c) ? h : c
        if (ka == 1) rounds = int((c + p - 1) / p) * n   # a handler is held for a whole client
        else rounds = (c * n) / p
        printf "%.3f", rounds * ms / 1000 }'
}

{
    echo "# server (pinned: ${SERVER_PIN[*]:-no}), one per cell:"
    echo "${SERVER_PIN[*]} $HEADROOM serve --arch pool --handlers H --listen 127.0.0.1:$PORT"
    echo "# generator, per cell (C x N):"
    echo "${GEN_PIN[*]} $HEADROOM run $URL -c C --per-user N ${KA_FLAG[*]} --json -q"
    echo "# $WORK/headroom is a copy of ${HEADROOM_ORIG:-$HEADROOM} (see $NAME.versions)"
} >>"$OUT/$NAME.commands"

for h in $HANDLERS; do
    for cell in $CELLS; do
        c=${cell%x*} n=${cell#*x}
        log "handlers $h, C=$c x N=$n"
        server_start "$h"
        j=$RAW/h$h-c$c-n$n.json
        st=0
        "${GEN_PIN[@]}" "$HEADROOM" run "$URL" -c "$c" --per-user "$n" "${KA_FLAG[@]}" \
            --json -q >"$j" 2>"$j.err" || st=$?
        server_stop
        jget() { local v; v=$(jq -r "$1 // \"-\"" "$j" 2>/dev/null) || true; echo "${v:--}"; }
        echo "$h,$c,$n,$KEEPALIVE,$SLEEP_MS,$(jget .requests),$(jget .duration_s),$(jget .errors_total),$st,$(expected "$h" "$c" "$n")" >>"$CSV"
        if ((st != 0)); then
            log "headroom run exited with status $st; stderr:"
            tail -n 5 "$j.err" >&2
        fi
    done
done

# table COLUMN — rows handlers, columns (C,N), from the CSV.
table() {
    local col=$1
    awk -F, -v col="$col" -v cells="$CELLS" '
        NR == 1 { for (i = 1; i <= NF; i++) idx[$i] = i; next }
        { v[$1 "," $2 "," $3] = $idx[col]; if (!($1 in seen)) { seen[$1] = 1; rows[++nr] = $1 } }
        END {
            m = split(cells, cs, " ")
            printf "%-9s", "handlers"
            for (k = 1; k <= m; k++) { split(cs[k], cn, "x"); printf " %10s", "(" cn[1] "," cn[2] ")" }
            printf "\n"
            for (r = 1; r <= nr; r++) {
                printf "%-9s", rows[r]
                for (k = 1; k <= m; k++) {
                    split(cs[k], cn, "x"); x = v[rows[r] "," cn[1] "," cn[2]]
                    printf " %10s", (x == "" ? "-" : x)
                }
                printf "\n"
            }
        }' "$CSV"
}

{
    echo "seed 002 redone: total time (s) of C x N requests to /sleep/$SLEEP_MS," \
        "pool of H handlers ($([[ $KEEPALIVE == 1 ]] && echo keep-alive || echo 'a connection per request'))"
    echo
    table duration_s
    echo
    echo "expected if the pool served min(H, C) requests at a time, back to back:"
    echo
    table expected_s
    errs=$(awk -F, 'NR > 1 && ($8 != 0 || $9 != 0) { n++ } END { print n + 0 }' "$CSV")
    echo
    echo "cells with errors or a failed run: $errs (see $NAME.csv)"
} | tee "$OUT/$NAME.txt"
