# shellcheck shell=bash
# bench/tsung-compare.sh — the method of bench/mqtt-vs-tsung.sh for any server, shared by
# bench/ldap-vs-tsung.sh, bench/mysql-vs-tsung.sh and bench/amqp-vs-tsung.sh. Source it (after
# lib.sh), don't run it.
#
# One Tsung example, rendered once into NAME.xml, run by Tsung 1.7 (`tsung -n -f NAME.xml
# start`, client in the controller VM) and by `headroom run NAME.xml --target ...`, one after
# the other against one private server started afresh before every run, ROUNDS times, the
# tools' order reversed every other round (tsung first in odd rounds, headroom first in even
# ones). Per run:
#   * generator CPU-seconds: user + sys of the tool's process tree over the whole run (wait4's
#     rusage from /usr/bin/time); peak RSS: the tree's summed VmRSS sampled every second
#     (bench/xmpp/sample-tree.sh), which also counts the TCP connections established to the
#     server's port (`ss`) and the server's own CPU and RSS;
#   * operations as each tool counts them (the protocol script's tsung_ops / headroom_ops),
#     beside the server's own counters over the run (server_read before and after, less what
#     one read costs, measured on the idle server just before);
#   * CPU µs per operation, RSS KiB per connected user (peak RSS / peak connections), and per
#     round the ratios Tsung/headroom of both; printed as the median (min, max) of the per-round
#     ratios (paired_line), PASS/FAIL against CPU_GOAL and RSS_GOAL.
#
# The protocol script sets, before calling tc_main:
#   NAME PROTO EXAMPLE PORT USERS RATE ARRIVE_S HOLD ROUNDS ... (see tc_settings)
#   server_fresh      stop and start the server afresh (its counters at zero), set SERVER_PID
#                     and SERVER_FDS, check it holds the port; pinning is done here
#   server_read FILE  "key value" lines of the server's counters (SERVER_KEYS, in that order)
#   server_version    one line
#   render OUT USERS RATE ARRIVE_S HOLD LIMIT_S  the file both tools run
#   tsung_ops RUN     from R[RUN.tsung.*] (tsung.log's totals) set R[RUN.ops] and the
#                     protocol's keys; headroom_ops RUN SUMMARY_JSON likewise
#   server_ops RUN    from R[RUN.server.*] set R[RUN.server_ops] (the same operations as the
#                     server counted them)
#   preflight_ok DIR  0 when headroom's summary in DIR shows the file really ran (ops > 0)
#   PROTO_ROWS        "label|key" lines for the table, after the common rows
#   OPS_NOTE          the sentence under the table saying what an operation is
#   FLOOR             (optional) the name of the protocol's floor client, bench/floor/src/bin/
#                     FLOOR.rs, run as `FLOOR 127.0.0.1:PORT USERS RATE HOLD`: the least any
#                     client can do for the same session (connect, the requests, each reply
#                     read to its end, the think times, close; nothing else). With it, TOOLS
#                     may hold `floor` (built with cargo, bench/floor's own workspace; its last
#                     stdout line: "floor-...: N operations, D of U users done, F sends failed,
#                     ...") and the report adds the paired ratios Tsung/floor and
#                     headroom/floor: the most any client doing these system calls could reach
#                     against Tsung on this machine, and how far above that floor headroom is.

tc_usage_die() { echo "error: $*" >&2; exit 2; }
tc_is_int() { [[ $1 =~ ^[0-9]+$ ]]; }

# tc_settings: the common environment (defaults as documented in each script).
tc_settings() {
    USERS=${USERS:-4000}
    RATE=${RATE:-200}
    if ! tc_is_int "$USERS" || ((USERS < 1)); then tc_usage_die "USERS must be a positive integer: $USERS"; fi
    if ! [[ $RATE =~ ^[0-9]+(\.[0-9]+)?$ ]] || ! awk -v r="$RATE" 'BEGIN { exit !(r > 0) }'; then
        tc_usage_die "RATE must be a positive number: $RATE"
    fi
    ARRIVE_S=${ARRIVE_S:-$(awk -v u="$USERS" -v r="$RATE" 'BEGIN { a = u / r; c = int(a); if (c < a) c++; print c + 10 }')}
    HOLD=${HOLD:-$((ARRIVE_S + 10))}
    ROUNDS=${ROUNDS:-5}
    local v
    for v in ARRIVE_S HOLD ROUNDS; do tc_is_int "${!v}" || tc_usage_die "$v must be a whole number: ${!v}"; done
    ((ROUNDS >= 1)) || tc_usage_die "ROUNDS must be at least 1"
    ((HOLD > ARRIVE_S)) || tc_usage_die "HOLD ($HOLD s) must exceed ARRIVE_S ($ARRIVE_S s): every user must still be connected when the last one arrives"
    # headroom's -d: past the end of the last user's session (arrivals end by ARRIVE_S; a
    # session is HOLD s plus its own think times and operations).
    HR_DURATION=${HR_DURATION:-$((ARRIVE_S + HOLD + SESSION_EXTRA_S + 5))}
    tc_is_int "$HR_DURATION" || tc_usage_die "HR_DURATION must be a whole number of seconds: $HR_DURATION"
    LIMIT_S=$((ARRIVE_S + HOLD + SESSION_EXTRA_S + 60))
    TOOLS=${TOOLS:-tsung headroom${FLOOR:+ floor}}
    local t
    for t in $TOOLS; do
        [[ $t == tsung || $t == headroom || ($t == floor && -n ${FLOOR:-}) ]] ||
            tc_usage_die "TOOLS: unknown tool '$t' (tsung, headroom${FLOOR:+, floor})"
    done
    TSUNG_LOGLEVEL=${TSUNG_LOGLEVEL:-error}
    CPU_GOAL=${CPU_GOAL:-5}
    RSS_GOAL=${RSS_GOAL:-4}
    STRICT=${STRICT:-0}
    TSUNG_ERL_FLAGS=${TSUNG_ERL_FLAGS:-}
    if ((${#GEN_PIN[@]})); then HR_THREADS=${HR_THREADS:-1}; else HR_THREADS=${HR_THREADS:-$(nproc)}; fi
    export ERL_EPMD_ADDRESS=127.0.0.1 # only matters if Tsung is what starts epmd
    local c
    for c in erl ss jq timeout awk ps getconf diff taskset; do
        command -v "$c" >/dev/null || tc_usage_die "$c is missing (Debian: apt-get install -y tsung jq iproute2 procps time diffutils util-linux)"
    done
    if tc_want tsung; then command -v tsung >/dev/null || tc_usage_die "tsung is missing (apt-get install -y tsung)"; fi
    [[ -x /usr/bin/time ]] || tc_usage_die "/usr/bin/time is missing (apt-get install -y time)"
    [[ -r $EXAMPLE ]] || tc_usage_die "no $EXAMPLE (Debian's tsung package ships it)"
    # Descriptors: each generator holds USERS sockets, the server as many plus its own files.
    ulimit -Sn "$(ulimit -Hn)" 2>/dev/null || true
    FD_LIMIT=$(ulimit -Sn)
    [[ $FD_LIMIT == unlimited ]] && FD_LIMIT=1048576
    ((FD_LIMIT >= USERS + 1000)) ||
        tc_usage_die "the descriptor limit is $FD_LIMIT: $USERS users need at least $((USERS + 1000)) (ulimit -Hn)"
    SERVER_MIN_FDS=$((USERS + 200))
    # Tsung starts another client VM when one would exceed maxusers: room for every user (the
    # protocol script's render writes it into <client>).
    # shellcheck disable=SC2034
    TSUNG_MAXUSERS=$((FD_LIMIT - 500 < 2 * USERS ? FD_LIMIT - 500 : 2 * USERS))
}

tc_want() { [[ " $TOOLS " == *" $1 "* ]]; }

# tc_server_check PID MINFDS: the server we started holds PORT and may open enough descriptors;
# pinned to CPU 0 (all its threads) when pinning.
tc_server_check() {
    local pid=$1 lim
    if ! kill -0 "$pid" 2>/dev/null || ! ss -Htlnp "sport = :$PORT" | grep -q "pid=$pid,"; then
        die "127.0.0.1:$PORT is not held by the server just started (pid $pid): $(ss -Htlnp "sport = :$PORT" | head -n 1)"
    fi
    lim=$(awk '/Max open files/ { print $4 }' "/proc/$pid/limits")
    [[ $lim == unlimited ]] || ((lim >= SERVER_MIN_FDS)) ||
        die "the server (pid $pid) may open $lim descriptors; $USERS users need at least $SERVER_MIN_FDS"
    SERVER_FDS=$lim
    if ((${#SERVER_PIN[@]})); then taskset -a -p -c 0 "$pid" >/dev/null; fi
    local n
    for _ in $(seq 1 30); do
        n=$(ss -Htn state established "( dport = :$PORT )" | wc -l)
        ((n == 0)) && return 0
        sleep 1
    done
    die "$n connections to 127.0.0.1:$PORT remain after restarting the server"
}

# tc_delta A B: "key (B - A)" per key ("-" if either is missing).
tc_delta() { awk 'NR == FNR { a[$1] = $2; next } { print $1, (($2 == "-" || a[$1] == "-") ? "-" : $2 - a[$1]) }' "$1" "$2"; }

# The epmd Tsung uses: the one on the default port, 4369 (another epmd may run on a port of its
# own: scripts/rabbitmq.sh starts one for its node).
tsung_epmd_pid() { ss -Htlnp 'sport = :4369' 2>/dev/null | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2 || true; }
stop_our_epmd() {
    local pid
    pid=$(tsung_epmd_pid)
    [[ -n $pid ]] || return 0
    if epmd -names 2>/dev/null | grep -q '^name '; then
        log "epmd ($pid) has other nodes registered; leaving it running"
    else
        kill "$pid" 2>/dev/null || true
    fi
}

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

declare -A R # R[tool.round.key] = value
RUNS=()      # "tool.round", in the order run

# tc_measure RUN CMD... — fresh server, its counters read twice (the cost of a read), then CMD
# pinned to the generator CPU under timeout and /usr/bin/time, sampled every second; the
# server's counters read again. Sets R[RUN.status|cpu_s|user_s|sys_s|wall_s|peak_conns|
# peak_rss_kb|server.*|server_read.*|...].
tc_measure() {
    local run=$1
    shift
    local tag=${run/./-} samples timef rc=0
    samples=$RAW/$tag.samples
    timef=$WORK/$tag.time
    log "$run: fresh server on 127.0.0.1:$PORT"
    server_fresh
    server_read "$WORK/$tag.s0"
    server_read "$WORK/$tag.s1"
    echo "${GEN_PIN[*]} $*" >>"$OUT/$NAME.commands"
    log "$run: $USERS users, Poisson $RATE/s, hold ${HOLD}s (about $(awk -v u="$USERS" -v r="$RATE" -v h="$HOLD" -v x="$SESSION_EXTRA_S" 'BEGIN { printf "%d", u / r + h + x }') s; stopped at $((LIMIT_S + 30)) s at most)"
    echo "t_s gen_cpu_s gen_rss_kb gen_procs conns srv_cpu_s srv_rss_kb" >"$samples"
    rm -rf "$WORK/tsung-log" "$WORK/headroom-out"
    timeout -k 10 $((LIMIT_S + 30)) /usr/bin/time -o "$timef" -f '%U %S %M %e' \
        "${GEN_PIN[@]}" "$@" >"$RAW/$tag.stdout" 2>"$RAW/$tag.stderr" &
    TOOL_PID=$!
    "${SERVER_PIN[@]}" "$SAMPLER" "$TOOL_PID" "$PORT" "$SERVER_PID" "$samples" 2>"$RAW/$tag.sampler.err" &
    SAMPLER_PID=$!
    wait "$TOOL_PID" || rc=$?
    TOOL_PID=""
    sleep 1.5 # one more sample after the end (connections gone), then stop the sampler
    kill "$SAMPLER_PID" 2>/dev/null || true
    wait "$SAMPLER_PID" 2>/dev/null || true
    SAMPLER_PID=""
    server_read "$WORK/$tag.s2"
    R[$run.status]=$rc
    ((rc == 124 || rc == 137)) && R[$run.status]="$rc (timeout)"
    local u s m e
    read -r u s m e < <(tail -n 1 "$timef" 2>/dev/null || echo "- - - -")
    R[$run.user_s]=$u R[$run.sys_s]=$s R[$run.wall_s]=$e R[$run.maxrss_one_kb]=$m
    R[$run.cpu_s]=$(awk -v u="$u" -v s="$s" 'BEGIN { if (u == "-") print "-"; else printf "%.2f", u + s }')
    local pc pr gc sc sr ns
    read -r pc pr gc sc sr ns < <(
        awk 'NR > 1 { if ($5 > pc) pc = $5; if ($3 > pr) pr = $3; if ($2 > gc) gc = $2
                      if (n == 0) s0 = $6; s1 = $6; if ($7 > sr) sr = $7; n++ }
             END { printf "%d %d %.2f %.2f %d %d\n", pc, pr, gc, s1 - s0, sr, n }' "$samples")
    R[$run.peak_conns]=$pc R[$run.peak_rss_kb]=$pr R[$run.sampled_cpu_s]=$gc
    R[$run.server_cpu_s]=$sc R[$run.server_peak_rss_kb]=$sr R[$run.samples]=$ns
    R[$run.peak_conns_at_s]=$(awk -v p="$pc" 'NR > 1 && $5 == p { print $1; exit }' "$samples")
    R[$run.connected_s]=$(awk -v p="$pc" 'NR > 1 && $5 == p { n++ } END { print n + 0 }' "$samples")
    # The server over the run: (after - before) less one read (s1 - s0, on the idle server).
    tc_delta "$WORK/$tag.s0" "$WORK/$tag.s1" >"$WORK/$tag.footprint"
    tc_delta "$WORK/$tag.s1" "$WORK/$tag.s2" >"$WORK/$tag.delta"
    local k v f
    while read -r k v; do
        f=$(awk -v k="$k" '$1 == k { print $2 }' "$WORK/$tag.footprint")
        if [[ $v == - || $f == - ]]; then R[$run.server.$k]="-"; else R[$run.server.$k]=$((v - f)); fi
        R[$run.server_read.$k]=$f
    done <"$WORK/$tag.delta"
    for k in s0 s1 s2; do echo "$k: $(paste -sd' ' "$WORK/$tag.$k")"; done >"$RAW/$tag.server-counters"
    if ((rc != 0)); then
        log "$run exited with status $rc; last lines of its stderr:"
        tail -n 15 "$RAW/$tag.stderr" >&2 || true
    fi
}

# tc_tsung_stats RUN LOGDIR: the totals of tsung.log into R[RUN.tsung.NAME] (counters: their
# total; samples such as request, connect, page, session: their count), then tsung_ops.
tc_tsung_stats() {
    local run=$1 log tag=${1/./-}
    log=$(find "$2" -name tsung.log -print -quit 2>/dev/null) || true
    [[ -n $log && -s $log ]] || return 0
    cp "$log" "$RAW/$tag.tsung.log"
    # Lines are "stats: NAME ..." every 10 s: counters "NAME interval total", samples "NAME
    # count mean stddev max min mean_before count_before", users "users now max".
    awk '$1 == "stats:" && $2 !~ /^\{/ { last[$2] = $0 }
        function f(line, i,   a) { split(line, a, " "); return a[i] }
        END {
            for (n in last) {
                if (n == "users") { print "peak_users", f(last[n], 4); continue }
                if (split(last[n], a, " ") == 4) print n, f(last[n], 4)
                else print n, f(last[n], 3) + f(last[n], 9)
            }
        }' "$log" >"$WORK/tsung.kv"
    local k v errs=0 kinds=""
    while read -r k v; do
        R[$run.tsung.$k]=$v
        if [[ $k == error_* || $k == *_error || $k == ldap_unexpected_msg_resp ]]; then
            errs=$((errs + v))
            kinds+="$k=$v "
        fi
    done <"$WORK/tsung.kv"
    R[$run.peak_users]=${R[$run.tsung.peak_users]:--}
    R[$run.started]=${R[$run.tsung.users_count]:--}
    R[$run.finished]=${R[$run.tsung.finish_users_count]:--}
    R[$run.connects]=${R[$run.tsung.connect]:--}
    R[$run.errors]=$errs
    R[$run.error_kinds]=${kinds:--}
    R[$run.error_kinds]=${R[$run.error_kinds]% }
    # Errors Tsung logs rather than counts (its controller's log, at loglevel error and above:
    # a user's process that crashed, for one).
    local clog n=0
    clog=$(find "$2" -name 'tsung_controller*.log' -print -quit 2>/dev/null) || true
    if [[ -n $clog ]]; then
        n=$(grep -c -i 'error\|crash' "$clog" || true)
        grep -i -A12 'error\|crash' "$clog" | head -n 80 >"$RAW/$tag.controller-errors" || true
        [[ -s $RAW/$tag.controller-errors ]] || rm -f "$RAW/$tag.controller-errors"
    fi
    R[$run.log_errors]=$n
    tsung_ops "$run"
}

# tc_headroom_stats RUN DIR: the common figures of summary.json, then headroom_ops.
tc_headroom_stats() {
    local run=$1 tag=${1/./-} s=$2/summary.json
    [[ -s $s ]] || return 0
    cp "$s" "$RAW/$tag.summary.json"
    R[$run.peak_users]=$(tc_j "$s" '.connections_peak')
    R[$run.started]=$(tc_j "$s" '.users_started')
    R[$run.finished]=$(tc_j "$s" '.users_finished')
    R[$run.errors]=$(tc_j "$s" '.errors_total')
    R[$run.error_kinds]=$(tc_j "$s" '[(.errors // {}) | to_entries[] | select(.value > 0) | "\(.key)=\(.value)"]
        + (if (.scenario.sessions.aborted // 0) > 0 then ["sessions_aborted=\(.scenario.sessions.aborted)"] else [] end)
        | if length == 0 then "-" else join(" ") end')
    R[$run.log_errors]=0
    # Arrivals past the cap of users alive (max_users, from maxnumber): not started, as Tsung
    # starts no user past maxnumber.
    R[$run.arrivals_dropped]=$(tc_j "$s" '.scenario.sessions.users_dropped')
    R[$run.connects]=$(tc_j "$s" '.connects')
    R[$run.self_cpu_s]=$(tc_j "$s" '((.cpu_user_s // empty) + (.cpu_sys_s // 0)) * 100 | round / 100')
    headroom_ops "$run" "$s"
}

# tc_floor_stats RUN: the floor client's last stdout line ("floor-...: N operations, D of U users
# done, F sends failed, ...").
tc_floor_stats() {
    local run=$1 tag=${1/./-} line ops finished users failed
    line=$(tail -n 1 "$RAW/$tag.stdout" 2>/dev/null) || line=""
    read -r ops finished users failed < <(sed -n 's/^floor-[a-z]*: \([0-9]*\) operations, \([0-9]*\) of \([0-9]*\) users done, \([0-9]*\) sends failed.*/\1 \2 \3 \4/p' <<<"$line")
    R[$run.ops]=${ops:--} R[$run.started]=${users:--} R[$run.finished]=${finished:--}
    R[$run.peak_users]=${users:--} R[$run.connects]=${users:--}
    R[$run.errors]=${failed:--} R[$run.log_errors]=0
    [[ ${failed:-0} == 0 ]] && R[$run.error_kinds]="-" || R[$run.error_kinds]="sends_failed=$failed"
}

# tc_j FILE JQ: a value of a JSON file, "-" when absent.
tc_j() { local v; v=$(jq -r "$2" "$1" 2>/dev/null) || v=""; [[ -z $v || $v == null ]] && v="-"; echo "$v"; }

# tc_preflight: a short run of the same file rendered for 3 users and 1 s of hold; it must
# import, run and do operations. Fails fast, before minutes of Tsung.
HR_NOT_READY=""
tc_preflight() {
    local dir=$WORK/preflight rc=0
    mkdir -p "$dir"
    render "$dir/p.xml" 3 10 2 3 40
    timeout -k 5 60 "$HEADROOM" run "$dir/p.xml" --target "127.0.0.1:$PORT" -d $((8 + SESSION_EXTRA_S))s -t 1 -q --no-report \
        --out "$dir/out" >"$dir/stdout" 2>"$dir/stderr" || rc=$?
    cp "$dir/stderr" "$RAW/headroom-preflight.err"
    if ((rc != 0)); then
        HR_NOT_READY="headroom exited with status $rc on the file: $(grep -v 'warning:' "$dir/stderr" | head -n 3 | tr '\n' ' ')"
        return 1
    fi
    if ! preflight_ok "$dir/out"; then
        cp -r "$dir/out" "$RAW/headroom-preflight" 2>/dev/null || true
        HR_NOT_READY="headroom ran the file but did no operation (see $RAW/headroom-preflight/summary.json)"
        return 1
    fi
    return 0
}

tc_write_versions() {
    {
        echo "date: $(date -Is)"
        echo "host: $(hostname -s)"
        echo "kernel: $(uname -srm)"
        echo "cpus: $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'))"
        echo "load average at the start: $(cut -d" " -f1-3 /proc/loadavg)"
        echo "pinning: server=${SERVER_PIN[*]:-none} generator=${GEN_PIN[*]:-none}"
        echo "tsung: $(tsung -v 2>&1 | head -n 1) ($(dpkg-query -W -f '${Version}' tsung 2>/dev/null || echo '?'))"
        echo "erlang: $(erl -noshell -eval 'io:format("~s~n",[erlang:system_info(otp_release)]),halt().' 2>/dev/null || echo '?')"
        echo "server: $(server_version)"
        echo "example: $EXAMPLE (sha256 $(sha256sum "$EXAMPLE" | cut -c1-16))"
        if [[ -x $HEADROOM ]]; then
            echo "headroom: $("$HEADROOM" --version 2>&1 | head -n 1) (${HEADROOM_ORIG:-$HEADROOM}, sha256 $(sha256sum "$HEADROOM" | cut -c1-16))"
        else
            echo "headroom: (not built: $HEADROOM)"
        fi
        echo "headroom git: $(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(
            git -C "$REPO_ROOT" diff --quiet HEAD 2>/dev/null || echo ' (dirty)')"
    } >"$OUT/$NAME.versions"
}

# tc_main: everything after the protocol script's settings and hooks.
tc_main() {
    # OUT_DIR relative to where the script was started (before the cd into WORK, which goes).
    OUT=${OUT_DIR:-$(run_dir)}
    mkdir -p "$OUT"
    OUT=$(cd "$OUT" && pwd)
    WORK=$(mktemp -d "/tmp/headroom-$NAME.XXXXXX")
    on_exit "rm -rf '$WORK'"
    cd "$WORK" || exit 1
    RAW=$OUT/$NAME.raw
    rm -rf "$RAW" && mkdir -p "$RAW"
    {
        echo "# the file both tools run is $NAME.xml (in $WORK during the run), rendered from $EXAMPLE"
        echo "# (the edits: $NAME.xml.diff); each command ran under:"
        echo "#   timeout -k 10 LIMIT /usr/bin/time -f '%U %S %M %e', sampled by bench/xmpp/sample-tree.sh"
        echo "# server: $SERVER_CMD (stopped and started afresh before every run)"
    } >"$OUT/$NAME.commands"
    if tc_want tsung && [[ -z $(tsung_epmd_pid) ]]; then on_exit stop_our_epmd; fi
    on_exit kill_tool

    render "$WORK/$NAME.xml" "$USERS" "$RATE" "$ARRIVE_S" "$HOLD" "$LIMIT_S"
    cp "$WORK/$NAME.xml" "$OUT/$NAME.xml"
    diff -u --label "stock $EXAMPLE" --label "$NAME.xml" <(tc_example_text) "$WORK/$NAME.xml" >"$OUT/$NAME.xml.diff" || true

    TSUNG_CMD=(tsung -n -i "hc$$" -f "$WORK/$NAME.xml" -l "$WORK/tsung-log" start)
    if [[ -n $TSUNG_ERL_FLAGS ]]; then TSUNG_CMD=(env "ERL_FLAGS=$TSUNG_ERL_FLAGS" "${TSUNG_CMD[@]}"); fi

    log "output: $OUT"
    log "workload: $EXAMPLE, $USERS users (Poisson $RATE/s over at most ${ARRIVE_S}s), hold ${HOLD}s; server on 127.0.0.1:$PORT; $ROUNDS round(s) of: $TOOLS (order reversed every other round)"
    FAILED=0
    if tc_want headroom; then
        if [[ ! -x $HEADROOM ]]; then
            echo "error: no headroom binary at $HEADROOM; build one with" >&2
            echo "  cargo build --release -p headroom" >&2
            echo "and run with HEADROOM=/path/to/headroom (or TOOLS=tsung for Tsung alone)" >&2
            exit 3
        fi
        snapshot_headroom "$WORK"
    fi
    if tc_want floor; then
        log "floor: building bench/floor's $FLOOR client"
        # Its own target directory, whatever CARGO_TARGET_DIR says: the binary run is that one.
        cargo build -q --release --manifest-path "$BENCH_DIR/floor/Cargo.toml" \
            --target-dir "$BENCH_DIR/floor/target" --bin "$FLOOR" >&2 ||
            die "bench/floor did not build"
        FLOOR_CMD=("$BENCH_DIR/floor/target/release/$FLOOR" "127.0.0.1:$PORT" "$USERS" "$RATE" "$HOLD")
    fi
    HR_CMD=("$HEADROOM" run "$WORK/$NAME.xml" --target "127.0.0.1:$PORT" -d "${HR_DURATION}s"
        -t "$HR_THREADS" -q --no-report --out "$WORK/headroom-out")
    tc_write_versions
    if tc_want headroom; then
        log "headroom: checking that it runs the file (3 users, a few seconds)"
        server_fresh
        if ! tc_preflight; then
            echo "error: headroom cannot run the file: $HR_NOT_READY" >&2
            echo "  (its stderr: $RAW/headroom-preflight.err). Measure Tsung alone with TOOLS=tsung $0" >&2
            exit 3
        fi
    fi

    local round tool run order
    for round in $(seq 1 "$ROUNDS"); do
        order=$TOOLS
        if ((round % 2 == 0)); then order=$(echo "$TOOLS" | awk '{ for (i = NF; i > 0; i--) printf "%s%s", $i, (i > 1 ? " " : "\n") }'); fi
        for tool in $order; do
            run=$tool.$round
            RUNS+=("$run")
            case $tool in
                tsung)
                    tc_measure "$run" "${TSUNG_CMD[@]}"
                    tc_tsung_stats "$run" "$WORK/tsung-log"
                    ;;
                headroom)
                    tc_measure "$run" "${HR_CMD[@]}"
                    tc_headroom_stats "$run" "$WORK/headroom-out"
                    ;;
                floor)
                    tc_measure "$run" "${FLOOR_CMD[@]}"
                    tc_floor_stats "$run"
                    ;;
            esac
            server_ops "$run"
            if [[ ${R[$run.cpu_s]} != - && ${R[$run.ops]:--} != - ]] && ((${R[$run.ops]} > 0 && ${R[$run.peak_conns]:-0} > 0)); then
                R[$run.cpu_us_per_op]=$(awk -v c="${R[$run.cpu_s]}" -v n="${R[$run.ops]}" 'BEGIN { printf "%.2f", c * 1e6 / n }')
                R[$run.rss_kb_per_user]=$(awk -v r="${R[$run.peak_rss_kb]}" -v n="${R[$run.peak_conns]}" 'BEGIN { printf "%.2f", r / n }')
            else
                R[$run.cpu_us_per_op]="-" R[$run.rss_kb_per_user]="-"
            fi
            if [[ ${R[$run.status]} != 0 ]]; then
                FAILED=1
                log "$run: the run failed (status ${R[$run.status]})"
            elif ((${R[$run.peak_conns]:-0} < USERS)); then
                FAILED=1
                log "$run: only ${R[$run.peak_conns]} of $USERS users were connected at once"
            elif [[ ${R[$run.errors]:-0} != 0 || ${R[$run.error_kinds]:--} != - || ${R[$run.log_errors]:-0} != 0 ]]; then
                FAILED=1
                log "$run: the tool counted errors: ${R[$run.error_kinds]:--} (logged: ${R[$run.log_errors]:-0})"
            elif [[ ${R[$run.ops]:--} != "${R[$run.server_ops]:--}" ]]; then
                FAILED=1
                log "$run: the tool counted ${R[$run.ops]:--} operations, the server ${R[$run.server_ops]:--}"
            else
                log "$run: ${R[$run.ops]} operations (server: ${R[$run.server_ops]}), ${R[$run.cpu_s]} CPU-s, peak ${R[$run.peak_conns]} connected, ${R[$run.peak_rss_kb]} KiB"
            fi
        done
    done
    tc_report
}

tc_verdict() { awk -v r="$1" -v g="$2" 'BEGIN { if (r == "" || r == "-") print "n/a"; else if (r + 0 >= g + 0) print "PASS"; else print "FAIL" }'; }
tc_ok_run() { [[ ${R[$1.status]:-} == 0 && ${R[$1.cpu_us_per_op]:--} != - ]]; }
# tc_pairs KEY [A B]: "A B" figures (default tsung, headroom) of the rounds where both ran and
# succeeded.
tc_pairs() {
    local r a=${2:-tsung} b=${3:-headroom}
    for r in $(seq 1 "$ROUNDS"); do
        if tc_ok_run "$a.$r" && tc_ok_run "$b.$r"; then echo "${R[$a.$r.$1]} ${R[$b.$r.$1]}"; fi
    done
}

tc_report() {
    local CPU_LINE="n/a" RSS_LINE="n/a" CPU_MED="-" RSS_MED="-"
    if tc_want tsung && tc_want headroom; then
        CPU_LINE=$(tc_pairs cpu_us_per_op | paired_line)
        RSS_LINE=$(tc_pairs rss_kb_per_user | paired_line)
        CPU_MED=$(awk '/^median/ { print $2 }' <<<"$CPU_LINE")
        RSS_MED=$(awk '/^median/ { print $2 }' <<<"$RSS_LINE")
    fi
    local CPU_VERDICT RSS_VERDICT
    CPU_VERDICT=$(tc_verdict "$CPU_MED" "$CPU_GOAL")
    RSS_VERDICT=$(tc_verdict "$RSS_MED" "$RSS_GOAL")
    local W=13 run k
    row() { # row LABEL KEY: one value per run
        local label=$1 key=$2 run line
        line=$(printf '%-38s' "$label")
        for run in "${RUNS[@]}"; do line+=$(printf " %${W}s" "${R[$run.$key]:--}"); done
        echo "$line"
    }
    pair() { # pair LABEL KEY1 KEY2: "v1/v2" per run
        local label=$1 run line
        line=$(printf '%-38s' "$label")
        for run in "${RUNS[@]}"; do line+=$(printf " %${W}s" "${R[$run.$2]:--}/${R[$run.$3]:--}"); done
        echo "$line"
    }
    for run in "${RUNS[@]}"; do
        for k in peak_rss_kb server_peak_rss_kb; do
            R[$run.${k%_kb}_mib]=$(awk -v k="${R[$run.$k]:--}" 'BEGIN { if (k == "-") print "-"; else printf "%.1f", k / 1024 }')
        done
    done
    {
        echo "$NAME: Tsung's $(basename "$EXAMPLE") ($EDITS_NOTE):"
        echo "  $USERS users (Poisson $RATE/s over at most ${ARRIVE_S}s, capped at $USERS), each holding ${HOLD}s; $(server_version)"
        echo "  on 127.0.0.1:$PORT (pinned: ${SERVER_PIN[*]:-no}, ${SERVER_FDS:-?} descriptors), generator pinned: ${GEN_PIN[*]:-no};"
        echo "  headroom -d ${HR_DURATION}s -t $HR_THREADS; $(date -Is) on $(hostname -s), load average $(cut -d' ' -f1-3 /proc/loadavg)"
        echo
        local header
        header=$(printf '%-38s' "")
        for run in "${RUNS[@]}"; do header+=$(printf " %${W}s" "${run%.*} ${run#*.}"); done
        echo "$header"
        row "exit status" status
        row "wall time (s)" wall_s
        row "users started" started
        row "users finished" finished
        row "peak connected (ss, 1 s)" peak_conns
        pair "  reached at (s) / seconds held" peak_conns_at_s connected_s
        row "tool's peak users" peak_users
        row "headroom: arrivals dropped (cap)" arrivals_dropped
        row "TCP connects (the tool's count)" connects
        local l
        while IFS='|' read -r l k; do
            [[ -n $l ]] && row "$l" "$k"
        done <<<"$PROTO_ROWS"
        row "operations (the tool's count)" ops
        row "operations (the server's count)" server_ops
        row "errors (the tool's count)" errors
        row "tsung: logged errors" log_errors
        row "generator CPU (s, user+sys)" cpu_s
        pair "  user / sys (s)" user_s sys_s
        pair "  sampled tree / tool's own" sampled_cpu_s self_cpu_s
        row "generator peak RSS (MiB, tree)" peak_rss_mib
        row "CPU µs per operation" cpu_us_per_op
        row "RSS KiB per connected user" rss_kb_per_user
        pair "server CPU (s) / peak RSS (MiB)" server_cpu_s server_peak_rss_mib
        for run in "${RUNS[@]}"; do
            if [[ ${R[$run.error_kinds]:--} != - ]]; then echo "$run errors: ${R[$run.error_kinds]}"; fi
        done
        echo
        if tc_want tsung && tc_want headroom; then
            echo "per round, Tsung/headroom:"
            local r
            for r in $(seq 1 "$ROUNDS"); do
                if tc_ok_run "tsung.$r" && tc_ok_run "headroom.$r"; then
                    awk -v r="$r" -v tc="${R[tsung.$r.cpu_us_per_op]}" -v hc="${R[headroom.$r.cpu_us_per_op]}" \
                        -v tm="${R[tsung.$r.rss_kb_per_user]}" -v hm="${R[headroom.$r.rss_kb_per_user]}" 'BEGIN {
                        printf "  round %d: CPU per operation %.2f / %.2f µs = %.3f; RSS per connected user %.2f / %.2f KiB = %.3f\n",
                            r, tc, hc, tc / hc, tm, hm, tm / hm }'
                else
                    echo "  round $r: n/a (a run failed)"
                fi
            done
            echo "ratio tsung/headroom, CPU per operation: $CPU_LINE (goal >= $CPU_GOAL: $CPU_VERDICT)"
            echo "ratio tsung/headroom, RSS per connected user: $RSS_LINE (goal >= $RSS_GOAL: $RSS_VERDICT)"
            if tc_want floor; then
                local FT FH
                FT=$(tc_pairs cpu_us_per_op tsung floor | paired_line)
                FH=$(tc_pairs cpu_us_per_op headroom floor | paired_line)
                echo "ratio tsung/floor, CPU per operation: $FT (the most any client doing these system calls"
                echo "  could reach against Tsung here: the CPU goal is $CPU_GOAL)"
                echo "ratio headroom/floor, CPU per operation: $FH (how far above the floor headroom is)"
            fi
        else
            echo "tsung/headroom ratios: n/a (needs both tools; TOOLS=\"$TOOLS\")"
        fi
        echo "$OPS_NOTE"
        echo "(per connected user = peak RSS / peak connections established at once, counted by ss; CPU = wait4"
        echo " rusage of the tool's process tree over the whole run, Tsung's VM start and stop included; the server's"
        echo " counts: after - before the run, less one read of them; runs alternate, order reversed every other round)"
    } | tee "$OUT/$NAME.txt"

    for k in "${!R[@]}"; do printf '%s\t%s\n' "$k" "${R[$k]}"; done | sort >"$WORK/r.tsv"
    pairs_json() { tc_pairs "$1" | awk 'BEGIN { printf "[" } { printf "%s%.4f", (NR > 1 ? "," : ""), $1 / $2 } END { printf "]" }'; }
    local JSON
    JSON=$(jq -R -s -c \
        --arg name "$NAME" --arg users "$USERS" --arg rate "$RATE" --arg hold "$HOLD" --arg arrive "$ARRIVE_S" \
        --arg rounds "$ROUNDS" --arg hr_d "$HR_DURATION" --arg example "$EXAMPLE" \
        --arg cpu_line "$CPU_LINE" --arg rss_line "$RSS_LINE" \
        --argjson cpu_rounds "$(pairs_json cpu_us_per_op)" --argjson rss_rounds "$(pairs_json rss_kb_per_user)" \
        --arg cpu_goal "$CPU_GOAL" --arg rss_goal "$RSS_GOAL" \
        --arg cpu_v "$CPU_VERDICT" --arg rss_v "$RSS_VERDICT" --arg date "$(date -Is)" --arg host "$(hostname -s)" \
        --arg tools "$TOOLS" --arg port "$PORT" --arg failed "$FAILED" '
        def num: if test("^-?[0-9]+(\\.[0-9]+)?$") then tonumber else . end;
        def spread($line): ($line | capture("median (?<median>[0-9.]+) \\(min (?<min>[0-9.]+), max (?<max>[0-9.]+)\\)")
            | map_values(tonumber)) // null;
        (split("\n") | map(select(length > 0) | split("\t"))
            | reduce .[] as $kv ({}; ($kv[0] | split(".")) as $p
                | .[$p[0]][$p[1]][$p[2:] | join(".")] = ($kv[1] | num))) as $runs
        | {bench: $name, date: $date, host: $host, port: ($port | tonumber),
           workload: {file: $example, users: ($users | tonumber), arrival_rate: ($rate | num), arrival: "poisson",
                      arrival_phase_s: ($arrive | tonumber), hold_s: ($hold | tonumber),
                      headroom_duration_s: ($hr_d | tonumber)},
           rounds: ($rounds | tonumber), tools: ($tools | split(" ")),
           runs: ($runs | map_values(to_entries | sort_by(.key | tonumber) | map(.value + {round: (.key | tonumber)}))),
           ratio_tsung_over_headroom: {
               cpu_per_operation: ({per_round: $cpu_rounds} + (spread($cpu_line) // {})),
               rss_per_connected_user: ({per_round: $rss_rounds} + (spread($rss_line) // {}))},
           goals: {cpu: ($cpu_goal | num), rss: ($rss_goal | num)},
           verdict: {cpu: $cpu_v, rss: $rss_v},
           valid: ($failed == "0")}' <"$WORK/r.tsv")
    echo "$JSON" >"$OUT/$NAME.json"
    echo
    echo "run dir: $OUT"
    ((FAILED)) && exit 1
    if [[ $STRICT == 1 && ($CPU_VERDICT == FAIL || $RSS_VERDICT == FAIL) ]]; then exit 4; fi
    exit 0
}

# tc_example_text: the stock example's text (gunzipped when it ends in .gz).
tc_example_text() { if [[ $EXAMPLE == *.gz ]]; then gzip -dc "$EXAMPLE"; else cat "$EXAMPLE"; fi; }
