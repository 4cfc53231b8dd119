#!/usr/bin/env bash
# bench/vs-h2load.sh [DURATION=10s] [CONNS=4] [STREAMS=32] — generator CPU efficiency over
# HTTP/2, headroom against h2load (nghttp2's own load generator), in two modes:
#
#   h2   HTTP/2 over TLS (ALPN h2), nginx `listen ... ssl http2`
#   h2c  HTTP/2 in cleartext with prior knowledge, nginx `listen ... http2` (no TLS)
#   h1   HTTP/1.1 keep-alive in cleartext, CONNS_H1 (50) connections, one request in flight on
#        each (h2load --h1: the second anchor of bench/vs-wrk.sh's load)
#
# Both tools: CONNS connections, each with up to STREAMS concurrent streams, one thread, for
# DURATION (closed loop: a stream ends, the next starts):
#   h2load -t1 -c4 -m32 -D 10 URL
#   headroom run URL --http2 -c 4 --streams 32 -t 1 -d 10s -k --json    (h2c: --h2c)
#   h1: h2load --h1 -t1 -c50 -D 10 URL and headroom run URL -c 50 -t 1 -d 10s --json
# What it measures, and how, as bench/vs-wrk.sh: requests counted by nginx (access-log delta;
# 1 worker, `return 200`, http2_max_concurrent_streams 128; the log also says how many came
# over HTTP/2: the `h2` column, which must equal `requests`), generator CPU from wait4's rusage,
# nginx pinned to CPU 0 and the generator to CPU 1 (PIN=0 disables), ROUNDS rounds per mode,
# each running h2load then headroom. The result per mode is the median, min and max of the
# per-round ratios headroom/h2load of requests per generator CPU-second (paired_line), then how
# busy each generator was (CPU-seconds per wall-second): below 0.9 a generator waited on nginx,
# and the ratio then measures the machine's other load as much as the tools (NICE=-10 helps on a
# busy machine). bench/README.md says how an outside driver reproduces the figure. After the
# rounds, one more run per mode and tool under `perf stat` prints system calls and context
# switches per response (count_round in lib.sh): what explains a ratio, never part of it.
#
# Until headroom's HTTP/2 client lands, headroom fails here: the script says so once, keeps
# going with h2load alone and prints h2load's figures (TOOLS=h2load skips headroom).
#
# Output: a table on stdout; bench/runs/<YYYY-MM-DD>-<host>/vs-h2load.{csv,txt,commands,
# versions} and raw tool outputs in vs-h2load.raw/.
#
# Environment: HEADROOM (binary), ROUNDS (5), MODES ("h2 h2c"; "h1" too), CONNS_H1 (50), PORT_H1, TOOLS ("h2load headroom"),
# PIN (1), NICE (none), PORT, PORT_H2C, HEADROOM_BEFORE (another headroom binary, e.g. built
# from an earlier commit: it runs after headroom in every round as tool "before", and the paired
# ratio headroom/before per mode is printed: a change's cost). Needs h2load (Debian's nghttp2-client; installed here if missing).

# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"

DURATION=${1:-10s}
CONNS=${2:-4}
STREAMS=${3:-32}
ROUNDS=${ROUNDS:-5}
MODES=${MODES:-h2 h2c}
TOOLS=${TOOLS:-h2load headroom}
DUR_S=$(dur_secs "$DURATION")
PORT=${PORT:-$(free_port)}
PORT_H2C=${PORT_H2C:-$(free_port)}
PORT_H1=${PORT_H1:-$(free_port)}
CONNS_H1=${CONNS_H1:-50}
[[ $PORT != "$PORT_H2C" && $PORT != "$PORT_H1" && $PORT_H2C != "$PORT_H1" ]] ||
    die "PORT, PORT_H2C and PORT_H1 must differ"

for m in $MODES; do
    case $m in h2 | h2c | h1) ;; *) die "unknown mode '$m' (h2 h2c h1)" ;; esac
done
if ! command -v h2load >/dev/null; then
    log "h2load is not installed: installing Debian's nghttp2-client"
    sudo=""
    [[ $(id -u) == 0 ]] || sudo=sudo
    $sudo apt-get install -y -qq nghttp2-client >/dev/null ||
        die "could not install h2load (apt-get install -y nghttp2-client)"
fi

# The machine is shared: the load when the run started goes into the summary.
LOAD0=$(cut -d" " -f1-3 /proc/loadavg)
NAME=vs-h2load
bench_init "$NAME" "mode,$CSV_HEADER,h2"
bench_pki

NGINX_LOG_FORMAT=$TLS_LOG_FORMAT NGINX_HTTP_EXTRA=$TLS_HTTP_EXTRA \
    NGINX_SERVERS="$(nginx_tls_server "$PORT" on http2; nginx_tls_server "$PORT_H2C" on h2c
        nginx_plain_server "$PORT_H1")" \
    nginx_start "$WORK/nginx" "$PORT" 1

# mode_cmds MODE — sets H2LOAD_CMD, HR_CMD and MC (the mode's connections) for MODE.
mode_cmds() {
    local url flag
    case $1 in
        h2) url="https://127.0.0.1:$PORT/" flag=--http2 ;;
        h2c) url="http://127.0.0.1:$PORT_H2C/" flag=--h2c ;;
        h1)
            MC=$CONNS_H1
            H2LOAD_CMD=(h2load --h1 -t1 -c"$MC" -D "$DUR_S" "http://127.0.0.1:$PORT_H1/")
            HR_CMD=("$HEADROOM" run "http://127.0.0.1:$PORT_H1/" -c "$MC" -t 1 -d "$DURATION" --json)
            return 0
            ;;
    esac
    MC=$CONNS
    H2LOAD_CMD=(h2load -t1 -c"$CONNS" -m"$STREAMS" -D "$DUR_S" "$url")
    HR_CMD=("$HEADROOM" run "$url" "$flag" -c "$CONNS" --streams "$STREAMS" -t 1 -d "$DURATION"
        --json)
    [[ $1 == h2 ]] && HR_CMD+=(-k)
    return 0
}

{
    echo "# nginx (pinned: ${SERVER_PIN[*]:-no}) with $WORK/nginx/nginx.conf:"
    sed 's/^/#   /' "$WORK/nginx/nginx.conf"
    echo "# $WORK/headroom is a copy of ${HEADROOM_ORIG:-$HEADROOM} (see $NAME.versions)"
    for m in $MODES; do
        mode_cmds "$m"
        echo "# mode $m"
        printf '%q ' "${GEN_PIN[@]}" "${H2LOAD_CMD[@]}"
        echo
        printf '%q ' "${GEN_PIN[@]}" "${HR_CMD[@]}"
        echo
    done
} >>"$OUT/$NAME.commands"

if [[ -n ${HEADROOM_BEFORE:-} ]]; then
    cp "$HEADROOM_BEFORE" "$WORK/headroom-before" || die "no binary at HEADROOM_BEFORE=$HEADROOM_BEFORE"
    echo "# before: $HEADROOM_BEFORE ($("$WORK/headroom-before" --version))" >>"$OUT/$NAME.commands"
    TOOLS="$TOOLS before"
fi

want() { [[ " $TOOLS " == *" $1 "* ]]; }
HR_OK=true
if want headroom && ! have_headroom; then
    log "headroom binary not found at $HEADROOM (cargo build --release -p headroom); running h2load only"
    HR_OK=false
fi

# row MODE TOOL ROUND TOOL_REQUESTS TOOL_CPU_USER TOOL_CPU_SYS
row() {
    echo "$1,$(csv_row "$2" "$3" "$MC" "$DUR_S" "$4" "$5" "$6"),$M_H2" >>"$CSV"
}

for m in $MODES; do
    mode_cmds "$m"
    for round in $(seq 1 "$ROUNDS"); do
        if want h2load; then
            log "$m round $round/$ROUNDS: ${H2LOAD_CMD[*]:0:5}"
            measure "$WORK/nginx" "$RAW/$m-h2load-$round.txt" "${H2LOAD_CMD[@]}"
            h2_req=$(awk '/^requests:/ { print $8 }' "$RAW/$m-h2load-$round.txt")
            row "$m" h2load "$round" "${h2_req:--}" - -
        fi
        if want headroom && $HR_OK; then
            log "$m round $round/$ROUNDS: headroom ${HR_CMD[*]:2}"
            j=$RAW/$m-headroom-$round.json
            measure "$WORK/nginx" "$j" "${HR_CMD[@]}"
            jget() { local v; v=$(jq -r "$1 // \"-\"" "$j" 2>/dev/null) || true; echo "${v:--}"; }
            row "$m" headroom "$round" "$(jget .requests)" "$(jget .cpu_user_s)" "$(jget .cpu_sys_s)"
            if ((M_STATUS != 0 || M_REQUESTS == 0)); then
                log "headroom cannot run this mode (exit $M_STATUS, $M_REQUESTS requests at nginx):"
                tail -n 5 "$j.err" >&2
                if ((M_REQUESTS == 0)); then
                    log "skipping headroom from here on (its HTTP/2 client has not landed?); h2load's figures follow"
                    HR_OK=false
                fi
            fi
        fi
        if want before; then
            log "$m round $round/$ROUNDS: headroom (before) ${HR_CMD[*]:2}"
            j=$RAW/$m-before-$round.json
            measure "$WORK/nginx" "$j" "$WORK/headroom-before" "${HR_CMD[@]:1}"
            jget() { local v; v=$(jq -r "$1 // \"-\"" "$j" 2>/dev/null) || true; echo "${v:--}"; }
            row "$m" before "$round" "$(jget .requests)" "$(jget .cpu_user_s)" "$(jget .cpu_sys_s)"
        fi
    done
done

# Why each ratio is what it is: one counted run per mode and tool (count_round).
log "counting system calls and context switches (one more run per mode and tool, under perf stat)"
COUNTS=$(
    for m in $MODES; do
        mode_cmds "$m"
        want h2load && count_round "$WORK/nginx" "$m h2load" "${H2LOAD_CMD[@]}"
        want headroom && $HR_OK && count_round "$WORK/nginx" "$m headroom" "${HR_CMD[@]}"
        want before && count_round "$WORK/nginx" "$m before" "$WORK/headroom-before" "${HR_CMD[@]:1}"
    done
    true
)

{
    echo "$NAME: GET, 1 generator thread; HTTP/2: $CONNS connections x $STREAMS streams; HTTP/1.1: $CONNS_H1 connections;" \
        "$DURATION per run, $ROUNDS rounds per mode, nginx 1 worker; $(date -Is) on $(hostname -s)," \
        "load average at start $LOAD0"
    echo
    echo "Per run (requests = nginx access-log delta; h2 = of them over HTTP/2; CPU = generator" \
        "user+sys):"
    column -s, -t <(cut -d, -f1,2,3,6,7,8,9,13,14,15,18 "$CSV")
    echo
    printf '%-5s %-9s %5s %16s %16s %14s\n' mode tool runs median_req/cpu_s max_req/cpu_s median_req/s
    for m in $MODES; do
        for tool in $TOOLS; do
            ok=$(awk -F, -v m="$m" -v t="$tool" '$1 == m && $2 == t && $6 == 0 && $7 > 0' "$CSV")
            [[ -n $ok ]] || { printf '%-5s %-9s %5s %16s\n' "$m" "$tool" 0 "(no successful run)"; continue; }
            read -r med max < <(echo "$ok" | cut -d, -f14 | median_max)
            read -r rps _ < <(echo "$ok" | cut -d, -f13 | median_max)
            printf '%-5s %-9s %5s %16s %16s %14s\n' "$m" "$tool" "$(echo "$ok" | wc -l)" \
                "$med" "$max" "$rps"
        done
    done
    echo
    for m in $MODES; do
        awk -F, -v m="$m" 'NR == 1 || $1 == m' "$CSV" | cut -d, -f2- >"$WORK/mode.csv"
        echo "ratio headroom/h2load, $m (requests per generator CPU-second, paired by round):" \
            "$(paired_ratios "$WORK/mode.csv" headroom h2load)"
        if want before; then
            echo "ratio headroom/before, $m (requests per generator CPU-second, paired by round):" \
                "$(paired_ratios "$WORK/mode.csv" headroom before)"
        fi
        # How busy each generator was (CPU-s per wall-s, median): below ~0.9 it waited on nginx,
        # and a generator that waits finds more replies per wake-up, so its requests per
        # CPU-second grow with the server's slowness (on a shared machine: with other load).
        busy=""
        for tool in $TOOLS; do
            b=$(awk -F, -v t="$tool" '$1 == t && $5 == 0 && $11 > 0 { print $9 / $11 }' \
                "$WORK/mode.csv" | median_max | cut -d' ' -f1)
            busy+=" $tool $(awk -v b="$b" 'BEGIN { printf (b == "-" ? "-" : "%.2f"), b }')"
        done
        echo "  generator busy (CPU-s per wall-s, median):$busy"
        if awk -v l="$busy" 'BEGIN { n = split(l, w, " "); for (i = 2; i <= n; i += 2)
            if (w[i] != "-" && w[i] < 0.9) exit 0; exit 1 }'; then
            echo "  warning: a generator was below 0.9 busy: it waited on nginx, so this ratio" \
                "depends on how fast nginx answered (the machine's other load), not on the tools alone"
        fi
    done
    echo
    echo "$COUNTS"
} | tee "$OUT/$NAME.txt"
echo
echo "run dir: $OUT"
