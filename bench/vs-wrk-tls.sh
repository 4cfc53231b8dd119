#!/usr/bin/env bash
# bench/vs-wrk-tls.sh [DURATION=10s] [CONNS=50] — generator CPU efficiency over HTTPS
# (HTTP/1.1), headroom against wrk, in three modes:
#
#   keepalive  requests on kept-alive TLS connections (handshakes only at the start)
#   full       a new connection per request, every handshake a full one
#   resumed    a new connection per request, every handshake but each connection slot's first
#              one resumed (TLS 1.3 session tickets)
#
# What it measures: requests completed per CPU-second the *generator* spends (user + sys),
# counted by nginx (access-log delta; 1 worker, `return 200`), CPU from wait4's rusage
# (/usr/bin/time), as bench/vs-wrk.sh. nginx also logs whether each request's TLS session was
# resumed ($ssl_session_reused), so every run's resumed fraction is in the CSV (`reused`): a
# mode is what the server saw, not what a tool's flag promised.
#
# The anchor, and what wrk does about resumption (Debian's wrk 4.1.0, OpenSSL 3.0; measured
# with $ssl_session_reused): wrk re-uses its SSL object on reconnect (SSL_clear keeps the
# session), so every reconnect RESUMES: against a server that resumes, all but each connection
# slot's first handshake are resumed (e.g. 980 of 985 with -c5); wrk has no flag to turn this
# off. So:
#   - resumed: wrk -H 'Connection: close' against nginx with a session cache and tickets;
#   - full:    the same wrk against a second nginx server block with `ssl_session_cache off;
#              ssl_session_tickets off;`: the server refuses to resume, so every handshake wrk
#              makes is full (checked: 0 resumed). headroom gets --no-tls-resume and the same
#              server, so both do the same work. (h2load --h1 resumes on reconnect as well, and
#              `openssl s_time -new/-reuse` does one connection at a time: neither is a fairer
#              anchor than wrk against a server that decides.)
#   - keepalive: plain wrk, as vs-wrk.sh but over TLS.
# `Connection: close` makes nginx close after each response; wrk then reconnects. headroom's
# --no-keepalive does the same from its side. Neither tool verifies the certificate (wrk never
# does; headroom gets -k), so neither pays for chain verification; both still check the
# handshake's own signature. Certificates: scripts/pki.sh's ECDSA P-256 localhost leaf.
#
# How: nginx pinned to CPU 0, the generator to CPU 1 (PIN=0 disables); for each mode, ROUNDS
# rounds, each running wrk then headroom; the result per mode is the median, min and max of the
# per-round ratios headroom/wrk of requests per generator CPU-second (paired_ratios in lib.sh).
#
# Until headroom's TLS client lands, `headroom run https://...` fails: the script says so once,
# keeps going with wrk alone, and prints wrk's figures (TOOLS=wrk skips headroom).
#
# Output: a table on stdout; bench/runs/<YYYY-MM-DD>-<host>/vs-wrk-tls.{csv,txt,commands,
# versions} and raw tool outputs in vs-wrk-tls.raw/.
#
# Environment: HEADROOM (binary), ROUNDS (5), MODES ("keepalive full resumed"), TOOLS
# ("wrk headroom"), PIN (1), PORT, PORT_FULL, HEADROOM_BEFORE (another headroom binary, e.g.
# built from an earlier commit: it runs third in every round as tool "before", and the paired
# ratio headroom/before of each mode is printed: a change's cost, measured in one run). Needs
# wrk (Debian's; installed here if missing).

# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"

DURATION=${1:-10s}
CONNS=${2:-50}
ROUNDS=${ROUNDS:-5}
MODES=${MODES:-keepalive full resumed}
TOOLS=${TOOLS:-wrk headroom}
DUR_S=$(dur_secs "$DURATION")
PORT=${PORT:-$(free_port)}
PORT_FULL=${PORT_FULL:-$(free_port)}
[[ $PORT != "$PORT_FULL" ]] || die "PORT and PORT_FULL must differ"

for m in $MODES; do
    case $m in keepalive | full | resumed) ;; *) die "unknown mode '$m' (keepalive full resumed)" ;; esac
done
if ! command -v wrk >/dev/null; then
    log "wrk is not installed: installing Debian's wrk (a bench-only tool; scripts/test does not)"
    sudo=""
    [[ $(id -u) == 0 ]] || sudo=sudo
    $sudo apt-get install -y -qq wrk >/dev/null || die "could not install wrk (apt-get install -y wrk)"
fi

# The machine is shared: the load when the run started goes into the summary.
LOAD0=$(cut -d" " -f1-3 /proc/loadavg)
NAME=vs-wrk-tls
bench_init "$NAME" "mode,$CSV_HEADER,reused"
bench_pki

NGINX_LOG_FORMAT=$TLS_LOG_FORMAT NGINX_HTTP_EXTRA=$TLS_HTTP_EXTRA \
    NGINX_SERVERS="$(nginx_tls_server "$PORT" on; nginx_tls_server "$PORT_FULL" off)" \
    nginx_start "$WORK/nginx" "$PORT" 1

URL="https://127.0.0.1:$PORT/"
URL_FULL="https://127.0.0.1:$PORT_FULL/"

# mode_cmds MODE — sets WRK_CMD and HR_CMD for MODE.
mode_cmds() {
    local hr=("$HEADROOM" run)
    case $1 in
        keepalive)
            WRK_CMD=(wrk -t1 -c"$CONNS" -d"$DURATION" "$URL")
            HR_CMD=("${hr[@]}" "$URL" -t 1 -c "$CONNS" -d "$DURATION" -k --json)
            ;;
        full)
            WRK_CMD=(wrk -t1 -c"$CONNS" -d"$DURATION" -H "Connection: close" "$URL_FULL")
            HR_CMD=("${hr[@]}" "$URL_FULL" -t 1 -c "$CONNS" -d "$DURATION" -k --no-keepalive
                --no-tls-resume --json)
            ;;
        resumed)
            WRK_CMD=(wrk -t1 -c"$CONNS" -d"$DURATION" -H "Connection: close" "$URL")
            HR_CMD=("${hr[@]}" "$URL" -t 1 -c "$CONNS" -d "$DURATION" -k --no-keepalive --json)
            ;;
    esac
}

{
    echo "# nginx (pinned: ${SERVER_PIN[*]:-no}) with $WORK/nginx/nginx.conf:"
    sed 's/^/#   /' "$WORK/nginx/nginx.conf"
    echo "# $WORK/headroom is a copy of ${HEADROOM_ORIG:-$HEADROOM} (see $NAME.versions)"
    for m in $MODES; do
        mode_cmds "$m"
        echo "# mode $m"
        printf '%q ' "${GEN_PIN[@]}" "${WRK_CMD[@]}"
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
    log "headroom binary not found at $HEADROOM (cargo build --release -p headroom); running wrk only"
    HR_OK=false
fi

# row MODE TOOL ROUND TOOL_REQUESTS TOOL_CPU_USER TOOL_CPU_SYS
row() {
    echo "$1,$(csv_row "$2" "$3" "$CONNS" "$DUR_S" "$4" "$5" "$6"),$M_REUSED" >>"$CSV"
}

for m in $MODES; do
    mode_cmds "$m"
    for round in $(seq 1 "$ROUNDS"); do
        if want wrk; then
            log "$m round $round/$ROUNDS: wrk -c$CONNS -d$DURATION"
            measure "$WORK/nginx" "$RAW/$m-wrk-$round.txt" "${WRK_CMD[@]}"
            wrk_req=$(awk '/requests in/ { print $1 }' "$RAW/$m-wrk-$round.txt")
            row "$m" wrk "$round" "${wrk_req:--}" - -
        fi
        if want headroom && $HR_OK; then
            log "$m round $round/$ROUNDS: headroom -c $CONNS -d $DURATION"
            j=$RAW/$m-headroom-$round.json
            measure "$WORK/nginx" "$j" "${HR_CMD[@]}"
            jget() { local v; v=$(jq -r "$1 // \"-\"" "$j" 2>/dev/null) || true; echo "${v:--}"; }
            row "$m" headroom "$round" "$(jget .requests)" "$(jget .cpu_user_s)" "$(jget .cpu_sys_s)"
            if ((M_STATUS != 0 || M_REQUESTS == 0)); then
                log "headroom cannot run this mode (exit $M_STATUS, $M_REQUESTS requests at nginx):"
                tail -n 5 "$j.err" >&2
                if ((M_REQUESTS == 0)); then
                    log "skipping headroom from here on (its TLS client has not landed?); wrk's figures follow"
                    HR_OK=false
                fi
            fi
        fi
        if want before; then
            log "$m round $round/$ROUNDS: headroom (before) -c $CONNS -d $DURATION"
            measure "$WORK/nginx" "$RAW/$m-before-$round.json" "$WORK/headroom-before" "${HR_CMD[@]:1}"
            row "$m" before "$round" - - -
        fi
    done
done

{
    echo "$NAME: HTTPS GET (HTTP/1.1), 1 generator thread, $CONNS connections, $DURATION per run," \
        "$ROUNDS rounds per mode, nginx 1 worker, ECDSA P-256; $(date -Is) on $(hostname -s)," \
        "load average at start $LOAD0"
    echo
    echo "Per run (requests = nginx access-log delta; CPU = generator user+sys; reused = requests" \
        "on a resumed TLS session, by nginx):"
    column -s, -t <(cut -d, -f1,2,3,6,7,8,9,13,14,18 "$CSV")
    echo
    printf '%-10s %-9s %5s %16s %16s %14s %9s\n' mode tool runs median_req/cpu_s max_req/cpu_s \
        median_req/s reused
    for m in $MODES; do
        for tool in $TOOLS; do
            ok=$(awk -F, -v m="$m" -v t="$tool" '$1 == m && $2 == t && $6 == 0 && $7 > 0' "$CSV")
            [[ -n $ok ]] || { printf '%-10s %-9s %5s %16s\n' "$m" "$tool" 0 "(no successful run)"; continue; }
            read -r med max < <(echo "$ok" | cut -d, -f14 | median_max)
            read -r rps _ < <(echo "$ok" | cut -d, -f13 | median_max)
            reused=$(echo "$ok" | awk -F, '{ r += $18; q += $7 } END { printf "%.1f%%", q ? 100 * r / q : 0 }')
            printf '%-10s %-9s %5s %16s %16s %14s %9s\n' "$m" "$tool" "$(echo "$ok" | wc -l)" \
                "$med" "$max" "$rps" "$reused"
        done
    done
    echo
    for m in $MODES; do
        awk -F, -v m="$m" 'NR == 1 || $1 == m' "$CSV" | cut -d, -f2- >"$WORK/mode.csv"
        echo "ratio headroom/wrk, $m (requests per generator CPU-second, paired by round):" \
            "$(paired_ratios "$WORK/mode.csv" headroom wrk)"
        if want before; then
            echo "ratio headroom/before, $m (requests per generator CPU-second, paired by round):" \
                "$(paired_ratios "$WORK/mode.csv" headroom before)"
        fi
    done
} | tee "$OUT/$NAME.txt"
echo
echo "run dir: $OUT"
