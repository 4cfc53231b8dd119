# shellcheck shell=bash
# bench/lib.sh — shared helpers for the headroom benchmark scripts. Source it, don't run it.
#
# What it gives the scripts:
#   nginx_start DIR PORT [WORKERS]  a throw-away nginx on 127.0.0.1:PORT, everything under DIR;
#                                   NGINX_SERVERS (server blocks, e.g. from nginx_tls_server),
#                                   NGINX_HTTP_EXTRA and NGINX_LOG_FORMAT change its config
#   nginx_tls_server PORT RESUME [LISTEN_FLAGS]  a TLS (or h2c) `return 200` server block for
#                                   NGINX_SERVERS (RESUME on|off: session cache and tickets)
#   bench_pki                       the test PKI (scripts/pki.sh) in $WORK/pki; sets PKI
#   reused_count DIR / h2_count DIR lines of a TLS_LOG_FORMAT log on a resumed TLS session / over
#                                   HTTP/2 (measure sets M_REUSED and M_H2 from them)
#   paired_line                     THE figure of a comparison: per-round pairs "A B" on stdin
#                                   -> "median X (min A, max B) over N rounds" of the ratios A/B
#   paired_ratios CSV TOOL BASE     paired_line of TOOL/BASE requests per generator CPU-second,
#                                   paired by round from a CSV_HEADER csv
#   nginx_stop DIR                  stop it (also done automatically on exit)
#   access_count DIR                requests nginx has logged so far (the neutral request count)
#   cpu_of CMD...                   run CMD under /usr/bin/time; sets CPU_USER, CPU_SYS (seconds),
#                                   CPU_MAXRSS_KB and CPU_WALL (seconds); returns CMD's status
#   free_port                       an unused loopback port below the ephemeral range
#   dur_secs 10s|2m|15              a duration in whole seconds
#   run_dir                         bench/runs/<YYYY-MM-DD>-<host>/ (created)
#   record_versions FILE            tool versions and machine facts, written to FILE
#   on_exit 'CMD'                   register cleanup run when the script exits, however it exits
#   SERVER_PIN / GEN_PIN            arrays: `taskset -c 0` / `taskset -c 1` when nproc >= 2 and
#                                   PIN=1 (default), so nginx and the generator do not share a core;
#                                   with NICE=N, prefixed by `nice -n N`
#
# Invariants: all traffic goes to 127.0.0.1; nginx never outlives the script (EXIT trap);
# nginx writes nothing outside DIR (pid, logs, temp paths, and `-e` for the early error log).

set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$BENCH_DIR/.." && pwd)
HEADROOM=${HEADROOM:-$REPO_ROOT/target/release/headroom}
NGINX=${NGINX:-nginx}

# nginx buffers its access log (see nginx_start) and flushes it at least this often; counting the
# log sooner than this after a run would miss the tail of the run.
ACCESS_FLUSH_S=1
ACCESS_SETTLE_S=${ACCESS_SETTLE_S:-1.5}

# --- cleanup -----------------------------------------------------------------------------------

_CLEANUP=()
on_exit() { _CLEANUP+=("$1"); }
_run_cleanup() {
    local i
    # Last registered, first run (like defer).
    for ((i = ${#_CLEANUP[@]} - 1; i >= 0; i--)); do
        eval "${_CLEANUP[$i]}" || true
    done
    _CLEANUP=()
}
trap _run_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- CPU pinning -------------------------------------------------------------------------------

PIN=${PIN:-1}
SERVER_PIN=()
GEN_PIN=()
if [[ $PIN == 1 ]] && command -v taskset >/dev/null && (($(nproc) >= 2)); then
    SERVER_PIN=(taskset -c 0)
    GEN_PIN=(taskset -c 1)
fi
# NICE=-10 (as root): nginx and the generators run at that priority, so that on a machine busy
# with other work the server still answers as fast as it can and the generators stay the
# bottleneck (see "Is the generator the bottleneck?" in README.md). Off by default.
if [[ -n ${NICE:-} ]]; then
    SERVER_PIN=(nice -n "$NICE" "${SERVER_PIN[@]}")
    GEN_PIN=(nice -n "$NICE" "${GEN_PIN[@]}")
fi

# --- small utilities ---------------------------------------------------------------------------

die() { echo "error: $*" >&2; exit 1; }
log() { echo "# $*" >&2; }

# dur_secs 10s -> 10, 2m -> 120, 15 -> 15
dur_secs() {
    local d=$1
    case $d in
        *ms) die "durations below a second are not supported: $d" ;;
        *s) echo "${d%s}" ;;
        *m) echo $((${d%m} * 60)) ;;
        *h) echo $((${d%h} * 3600)) ;;
        *[0-9]) echo "$d" ;;
        *) die "bad duration: $d" ;;
    esac
}

# A loopback port nobody listens on, from 20000-31999 (below Linux's default ephemeral range, so a
# generator's outgoing connections never take it).
free_port() {
    local p i
    for i in $(seq 1 100); do
        p=$((20000 + RANDOM % 12000))
        if ! ss -Htln "sport = :$p" | grep -q .; then
            echo "$p"
            return 0
        fi
    done
    die "no free port found"
}

# --- nginx -------------------------------------------------------------------------------------

# nginx_start DIR PORT [WORKERS]
# `return 200` is the cheapest handler nginx has (no open/fstat/sendfile), so nearly all of
# nginx's core goes to the connection work a generator causes. The access log is buffered
# (one write per 256 KiB, flushed every ACCESS_FLUSH_S) so logging does not become the server's
# bottleneck, yet each request still leaves one line: the count both tools are judged by.
nginx_start() {
    local dir=$1 port=$2 workers=${3:-1}
    dir=$(mkdir -p "$dir" && cd "$dir" && pwd)
    mkdir -p "$dir/tmp"
    : >"$dir/access.log"
    cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes $workers;
worker_rlimit_nofile 20000;
pid $dir/nginx.pid;
error_log $dir/error.log warn;

events {
    worker_connections 20000;
}

http {
    log_format minimal '${NGINX_LOG_FORMAT:-\$status}';
    access_log $dir/access.log minimal buffer=256k flush=${ACCESS_FLUSH_S}s;
    error_log $dir/error.log warn;
${NGINX_HTTP_EXTRA:-}

    keepalive_requests 1000000;
    keepalive_timeout 120s;

    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;

${NGINX_SERVERS:-$(nginx_plain_server "$port")}
}
EOF
    # -e: nginx opens its compiled-in error log before reading the config; keep that in DIR too.
    "${SERVER_PIN[@]}" "$NGINX" -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" \
        >"$dir/nginx.out" 2>&1 &
    local pid=$!
    echo "$pid" >"$dir/master.pid"
    on_exit "nginx_stop '$dir'"

    local i
    for i in $(seq 1 100); do
        if ss -Htln "sport = :$port" | grep -q "127.0.0.1:$port"; then
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    cat "$dir/nginx.out" "$dir/error.log" >&2 || true
    die "nginx did not start on 127.0.0.1:$port"
}

nginx_plain_server() {
    cat <<EOF
    server {
        listen 127.0.0.1:$1 backlog=4096;
        location / {
            default_type text/plain;
            return 200 "hello\n";
        }
    }
EOF
}

# The access-log format of the TLS benches: status, "r" for a resumed TLS session ("." for a full
# handshake), protocol. Counted by reused_count and h2_count.
# shellcheck disable=SC2016,SC2034 # nginx variables, not shell ones; used by the scripts
TLS_LOG_FORMAT='$status $ssl_session_reused $server_protocol'

# The http-level directives of the TLS benches: nginx 1.22's default ssl_protocols lack TLSv1.3
# (added to the default in 1.23.4).
# shellcheck disable=SC2034 # used by the scripts that source this file
TLS_HTTP_EXTRA='    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_timeout 1h;
    http2_max_concurrent_streams 128;'

# nginx_tls_server PORT RESUME [LISTEN_FLAGS] — a `return 200` server block with the test PKI's
# localhost certificate (call bench_pki first). RESUME=on: a shared session cache and session
# tickets (both kinds of resumption); off: neither, so every handshake is a full one whatever
# the client offers. LISTEN_FLAGS e.g. "http2". LISTEN_FLAGS=h2c: no TLS, HTTP/2 in cleartext
# (prior knowledge only, in nginx 1.22).
nginx_tls_server() {
    local port=$1 resume=$2 flags=${3:-} listen tls cache
    if [[ $flags == h2c ]]; then
        listen="listen 127.0.0.1:$port backlog=4096 http2;"
        tls=""
    else
        listen="listen 127.0.0.1:$port backlog=4096 ssl $flags;"
        if [[ $resume == on ]]; then
            cache="ssl_session_cache shared:SSL:16m; ssl_session_tickets on;"
        else
            cache="ssl_session_cache off; ssl_session_tickets off;"
        fi
        tls="ssl_certificate $PKI/localhost.pem; ssl_certificate_key $PKI/localhost.key; $cache"
    fi
    cat <<EOF
    server {
        $listen
        $tls
        location / {
            default_type text/plain;
            return 200 "hello\n";
        }
    }
EOF
}

# bench_pki — the test CA and its localhost certificate (ECDSA P-256) in $WORK/pki; sets PKI.
bench_pki() {
    PKI=$WORK/pki
    "$REPO_ROOT/scripts/pki.sh" "$PKI" >/dev/null || die "scripts/pki.sh failed"
}

# nginx_stop DIR — fast shutdown (TERM; QUIT would wait for held keep-alive connections), then
# KILL if it lingers. Idempotent.
nginx_stop() {
    local dir=$1 pid i
    [[ -f $dir/master.pid ]] || return 0
    pid=$(cat "$dir/master.pid")
    rm -f "$dir/master.pid"
    kill -TERM "$pid" 2>/dev/null || return 0
    for i in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# access_count DIR — lines in the access log, after waiting for nginx's buffered log to flush.
access_count() {
    sleep "$ACCESS_SETTLE_S"
    wc -l <"$1/access.log"
}

# reused_count DIR / h2_count DIR — lines of a TLS_LOG_FORMAT log on a resumed session / over
# HTTP/2 (no settling of their own: call right after access_count). 0 with other formats.
reused_count() { awk '$2 == "r"' "$1/access.log" | wc -l; }
h2_count() { awk '$3 == "HTTP/2.0"' "$1/access.log" | wc -l; }

# --- measuring a generator ---------------------------------------------------------------------

# cpu_of CMD... — run CMD (its stdout/stderr pass through) under GNU time. wait4's rusage covers
# CMD and every descendant it reaped, so a tool that forks workers is measured whole — but a
# process that daemonizes (double-forks) escapes it. CPU_USER and CPU_SYS come from bash's
# `times` in a subshell that runs only CMD (getrusage(RUSAGE_CHILDREN): the same rusage, in
# milliseconds; GNU time prints hundredths, ±5% of a 0.2 CPU-second run on a starved machine);
# GNU time gives the max RSS and the wall time.
cpu_of() {
    local tf rc
    tf=$(mktemp)
    (
        r=0
        /usr/bin/time -o "$tf" -f '%M %e' "$@" || r=$?
        times >"$tf.times"
        exit "$r"
    ) && rc=0 || rc=$?
    # On failure GNU time writes a "Command exited with non-zero status" line first.
    read -r CPU_MAXRSS_KB CPU_WALL < <(tail -n 1 "$tf")
    # `times`: the subshell's own "0m0.001s 0m0.002s", then its children's.
    read -r CPU_USER CPU_SYS < <(tail -n 1 "$tf.times" | awk '{
        for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t[i] = a[1] * 60 + a[2] }
        printf "%.3f %.3f\n", t[1], t[2] }')
    rm -f "$tf" "$tf.times"
    return "$rc"
}

# --- recording runs ----------------------------------------------------------------------------

run_dir() {
    local d
    d="$BENCH_DIR/runs/$(date +%F)-$(hostname -s)"
    mkdir -p "$d"
    echo "$d"
}

record_versions() {
    local f=$1
    {
        echo "date: $(date -Is)"
        echo "host: $(hostname -s)"
        echo "kernel: $(uname -srm)"
        echo "cpus: $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'))"
        echo "pinning: server=${SERVER_PIN[*]:-none} generator=${GEN_PIN[*]:-none}"
        echo "load average: $(cut -d" " -f1-3 /proc/loadavg)"
        echo "nginx: $("$NGINX" -v 2>&1)"
        command -v wrk >/dev/null && echo "wrk: $(wrk -v 2>&1 | head -n 1)"
        command -v tsung >/dev/null && echo "tsung: $(tsung -v 2>&1 | head -n 1)"
        command -v h2load >/dev/null && echo "h2load: $(h2load --version 2>&1 | head -n 1)"
        command -v openssl >/dev/null && echo "openssl: $(openssl version 2>&1)"
        command -v erl >/dev/null && echo "erlang: $(erl -noshell -eval \
            'io:format("~s~n",[erlang:system_info(otp_release)]),halt().' 2>/dev/null || echo '?')"
        if [[ -x $HEADROOM ]]; then
            echo "headroom: $("$HEADROOM" --version 2>&1 | head -n 1)" \
                "(${HEADROOM_ORIG:-$HEADROOM}, sha256 $(sha256sum "$HEADROOM" | cut -c1-16))"
        else
            echo "headroom: (not built: $HEADROOM)"
        fi
        echo "headroom git: $(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(
            git -C "$REPO_ROOT" diff --quiet HEAD 2>/dev/null || echo ' (dirty)')"
    } >"$f"
}

# paired_line — the one way every bench script states how two tools (or two builds) compare.
# Reads one line per round, "A B" (the figure of the tool and of the baseline in that round,
# e.g. requests per generator CPU-second), and prints
#     median X (min A, max B) over N rounds
# of the per-round ratios A/B; "n/a (no round where both succeeded)" without a usable pair.
# The tools alternate within a round, so a pair shares the machine's weather and its ratio is
# steadier than either figure. Never a ratio of medians (median(A)/median(B) mixes rounds: it
# printed 1.01 for a run whose paired ratios had median 1.05) and never the best round.
paired_line() {
    awk 'NF >= 2 && $1 > 0 && $2 > 0 { print $1 / $2 }' | sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "n/a (no round where both succeeded)"; exit }
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "median %.3f (min %.3f, max %.3f) over %d round%s\n", m, v[1], v[NR], NR,
            (NR == 1 ? "" : "s") }'
}

# paired_ratios CSV TOOL BASE — paired_line of TOOL's requests per generator CPU-second over
# BASE's, paired by round, for every round in which both succeeded (status 0, requests > 0;
# columns as CSV_HEADER).
paired_ratios() {
    awk -F, -v t="$2" -v b="$3" '
        NR > 1 && $5 == 0 && $6 > 0 && $13 > 0 {
            if ($1 == t) tv[$2] = $13
            if ($1 == b) bv[$2] = $13
        }
        END { for (r in tv) if (r in bv) print tv[r], bv[r] }' "$1" | paired_line
}

# median and max of numbers on stdin, printed as "median max"
median_max() {
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "- -"; exit }
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        print m, v[NR] }'
}

have_headroom() { [[ -x $HEADROOM ]]; }

# snapshot_headroom DIR — copy the binary into DIR and use the copy, so a concurrent
# `cargo build` cannot swap it between the runs of one benchmark.
snapshot_headroom() {
    have_headroom || return 0
    cp "$HEADROOM" "$1/headroom"
    HEADROOM_ORIG=$HEADROOM
    HEADROOM=$1/headroom
}

# bench_init NAME CSV_HEADER_LINE — the setup every benchmark shares: a scratch WORK dir (removed
# on exit, and the cwd, so a headroom run directory never lands in the repo) holding a snapshot of
# the headroom binary; the day's run dir OUT with a fresh NAME.raw/ (RAW), NAME.csv (CSV, started
# with the header line), an empty NAME.commands and NAME.versions. Call it from the top level.
bench_init() {
    local name=$1 header=$2
    WORK=$(mktemp -d /tmp/headroom-bench.XXXXXX)
    on_exit "rm -rf '$WORK'"
    cd "$WORK" || exit
    snapshot_headroom "$WORK"
    OUT=$(run_dir)
    RAW=$OUT/$name.raw
    rm -rf "$RAW" && mkdir -p "$RAW"
    CSV=$OUT/$name.csv
    echo "$header" >"$CSV"
    : >"$OUT/$name.commands"
    record_versions "$OUT/$name.versions"
}

# --- one generator run, counted by nginx -------------------------------------------------------

# measure NGINX_DIR OUT CMD... — run CMD pinned to the generator core under cpu_of, stdout to OUT
# and stderr to OUT.err. Sets M_REQUESTS (nginx access-log delta over the run) and M_STATUS
# (CMD's exit status), plus cpu_of's CPU_* variables. Never fails: a failing tool is a result.
measure() {
    local ngdir=$1 out=$2 before after
    shift 2
    before=$(access_count "$ngdir")
    local r0 h0
    r0=$(reused_count "$ngdir")
    h0=$(h2_count "$ngdir")
    M_STATUS=0
    cpu_of "${GEN_PIN[@]}" "$@" >"$out" 2>"$out.err" || M_STATUS=$?
    after=$(access_count "$ngdir")
    M_REQUESTS=$((after - before))
    M_REUSED=$(($(reused_count "$ngdir") - r0))
    M_H2=$(($(h2_count "$ngdir") - h0))
}

# count_round NGINX_DIR LABEL CMD... — one more run of CMD (pinned like the measured ones) under
# `perf stat`, counting its system calls (tracepoint raw_syscalls:sys_enter) and context switches,
# threads included, against the responses nginx logged over it; prints one line
#     LABEL: X system calls, Y context switches per response (N responses; perf stat)
# Kept apart from the timed rounds: a counted tracepoint costs the counted tool CPU, so these
# figures explain a ratio and never enter one. Needs perf (Debian's linux-perf; "n/a" without).
count_round() {
    local ngdir=$1 label=$2 f before after
    shift 2
    if ! command -v perf >/dev/null || ! perf stat -e raw_syscalls:sys_enter true >/dev/null 2>&1; then
        echo "$label: n/a (perf with tracepoints not available: apt-get install linux-perf)"
        return 0
    fi
    f=$(mktemp)
    before=$(access_count "$ngdir")
    perf stat -x, -o "$f" -e raw_syscalls:sys_enter,context-switches -- \
        "${GEN_PIN[@]}" "$@" >/dev/null 2>&1 || true
    after=$(access_count "$ngdir")
    awk -F, -v l="$label" -v n=$((after - before)) '
        $3 == "raw_syscalls:sys_enter" { sc = $1 } $3 == "context-switches" { cs = $1 }
        END {
            if (n <= 0 || sc == "" || cs == "") { printf "%s: n/a (no responses or no counts)\n", l; exit }
            printf "%s: %.2f system calls, %.4f context switches per response (%d responses; perf stat)\n",
                l, sc / n, cs / n, n }' "$f"
    rm -f "$f"
}

# The CSV every comparison script writes; one row per generator run.
# shellcheck disable=SC2034 # used by the scripts that source this file
CSV_HEADER=tool,round,connections,duration_s,status,requests,user_s,sys_s,cpu_s,max_rss_kb,wall_s,req_per_s,req_per_cpu_s,tool_requests,tool_cpu_user_s,tool_cpu_sys_s

# csv_row TOOL ROUND CONNS DURATION_S TOOL_REQUESTS TOOL_CPU_USER TOOL_CPU_SYS — from the last
# measure; the tool_* columns are what the tool says of itself ("-" if it does not say).
csv_row() {
    awk -v tool="$1" -v round="$2" -v conns="$3" -v dur="$4" -v st="$M_STATUS" \
        -v req="$M_REQUESTS" -v u="$CPU_USER" -v s="$CPU_SYS" -v rss="$CPU_MAXRSS_KB" \
        -v wall="$CPU_WALL" -v treq="$5" -v tu="$6" -v ts="$7" 'BEGIN {
        cpu = u + s
        printf "%s,%s,%s,%s,%s,%d,%.3f,%.3f,%.3f,%d,%.2f,%.0f,%.0f,%s,%s,%s\n",
            tool, round, conns, dur, st, req, u, s, cpu, rss, wall,
            (dur > 0 ? req / dur : 0), (cpu > 0 ? req / cpu : 0), treq, tu, ts }'
}

# summarize CSV BASELINE — per-run table, each tool's median requests per generator CPU-second
# (its own spread, for reading; not a comparison), then the comparison: paired_ratios of
# headroom and of every other tool against BASELINE. Runs that failed are listed, not ranked.
summarize() {
    local csv=$1 base=$2
    echo
    echo "Per run (requests = nginx access-log delta; CPU = generator user+sys from wait4 rusage):"
    column -s, -t <(cut -d, -f1,2,5,6,7,8,10,12,13 "$csv")
    echo
    printf '%-10s %6s %16s %16s %14s\n' tool runs median_req/cpu_s max_req/cpu_s median_req/s
    local tool bm rm
    for tool in $(tail -n +2 "$csv" | cut -d, -f1 | awk '!seen[$0]++'); do
        bm=$(awk -F, -v t="$tool" '$1 == t && $5 == 0 { print $13 }' "$csv" | median_max)
        rm=$(awk -F, -v t="$tool" '$1 == t && $5 == 0 { print $12 }' "$csv" | median_max)
        printf '%-10s %6s %16s %16s %14s\n' "$tool" \
            "$(awk -F, -v t="$tool" '$1 == t && $5 == 0' "$csv" | wc -l)" \
            "${bm% *}" "${bm#* }" "${rm% *}"
    done
    echo
    for tool in $(tail -n +2 "$csv" | cut -d, -f1 | awk -v b="$base" '$0 != b && !seen[$0]++'); do
        echo "ratio $tool/$base (requests per generator CPU-second, paired by round):" \
            "$(paired_ratios "$csv" "$tool" "$base")"
    done
}

# headroom_row TOOL ROUND CMD...: one measured headroom run (any build or mode, named TOOL in the
# CSV) against the nginx in $WORK/nginx, its --json summary in $RAW/TOOL-ROUND.json (path in J),
# appended to $CSV as a row with headroom's own counts; its stderr shown if it failed. Uses WORK,
# RAW, CONNS, DUR_S, ROUNDS and CSV from the calling script. `jget PATH` reads the summary.
headroom_row() {
    local tool=$1 round=$2
    shift 2
    J=$RAW/$tool-$round.json
    log "round $round/$ROUNDS: $tool"
    measure "$WORK/nginx" "$J" "$@"
    csv_row "$tool" "$round" "$CONNS" "$DUR_S" \
        "$(jget .requests)" "$(jget .cpu_user_s)" "$(jget .cpu_sys_s)" >>"$CSV"
    if ((M_STATUS != 0)); then
        log "$tool exited with status $M_STATUS; stderr:"
        tail -n 20 "$J.err" >&2
    fi
    return 0
}

# jget PATH: a field of the last headroom_row's summary ("-" when absent or unreadable).
jget() { local v; v=$(jq -r "$1 // \"-\"" "$J" 2>/dev/null) || true; echo "${v:--}"; }

# headroom_round ROUND: headroom_row of HR_CMD, as tool "headroom" (a side-by-side benchmark).
headroom_round() { headroom_row headroom "$1" "${HR_CMD[@]}"; }
