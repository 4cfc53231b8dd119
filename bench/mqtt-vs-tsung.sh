#!/usr/bin/env bash
# bench/mqtt-vs-tsung.sh — generator CPU per MQTT operation and memory per connected user,
# headroom against Tsung 1.7, both running Tsung's own examples/mqtt.xml against the same
# mosquitto, one tool after the other, ROUNDS times; beside them the floor client, the same
# sessions with nothing but their system calls (how far any client could get below Tsung).
#
# Usage: bench/mqtt-vs-tsung.sh [-h|--help]      (everything else is environment, below)
#
# The workload is Tsung's stock /usr/share/doc/tsung/examples/mqtt.xml (Debian's tsung 1.7),
# rendered by this script with its load scaled and its server pointed at the bench's broker; its
# sessions are kept exactly, plus one think time. The rendered file (mqtt-vs-tsung.xml, and its
# diff against the stock file, mqtt-vs-tsung.xml.diff) is what BOTH tools run:
#   tsung -n -i ID -f mqtt-vs-tsung.xml -l LOGDIR start
#   headroom run mqtt-vs-tsung.xml --target 127.0.0.1:PORT -d HR_DURATION -t 1 ...
#   * publishers (session mqtt_publisher): Poisson arrivals at RATE/s, at most USERS started
#     (maxnumber), each: connect (keepalive 10, a will), 10 x publish QoS 1 retained
#     "test_message" to test_topic, think HOLD s (the one added step: a <thinktime> before the
#     disconnect, so that all USERS are connected at once for ~HOLD - USERS/RATE s), disconnect;
#   * one subscriber (the file's <user session="mqtt_subscriber">): connect, subscribe to
#     test_topic at QoS 1, wait 60 s (waitForMessages: a think time in both tools; the messages
#     arrive meanwhile, each acknowledged), unsubscribe, disconnect. Its start_time is set to
#     SUB_START (0) for both tools (headroom imports a <user> as Tsung runs it, a `once` user at
#     its start_time, since 2026-11-29; the runs of that day's bench/runs were made before, when
#     it was a closed user starting with the run, hence SUB_START). Every publish
#     (10 x USERS) reaches it while it waits, in both tools: the arrivals must end well within its
#     60 s (USERS/RATE <= 50 is required).
#   * the other edits: <clients> is the controller VM (use_controller_vm, maxusers), loglevel is
#     TSUNG_LOGLEVEL (stock: "debug"; headroom ignores it, and Tsung's per-packet log lines
#     would cost it CPU that is no load), <load duration> a safety stop.
#   * the floor client (bench/floor/src/bin/mqtt.rs, TOOLS holds `floor`), built with
#     `cargo build --release --manifest-path bench/floor/Cargo.toml --bin mqtt` and run as
#       mqtt 127.0.0.1:PORT USERS RATE HOLD
#     runs the same two sessions (MQTT 3.1.1 packets encoded by hand, once; every reply read to
#     its end; no clock per operation, no statistics): its subscriber first (always from 0 s,
#     whatever SUB_START), the publishers arriving from its SUBACK on; the same connects (a will
#     for the publishers), 10 publishes each after the previous one's PUBACK, the HOLD s think,
#     the 60 s wait, unsubscribe and disconnects, pings as headroom's. It ends when its
#     subscriber has (~60 s) or its last publisher has, whichever is later; it exits 1 unless
#     every user finished and it counted 10 x USERS publishes acknowledged and as many received.
#   What differs, by the tools' design (printed with the results): headroom's run is cut by -d
#   (HR_DURATION = ARRIVE_S + HOLD + 5 s: the end of the last publisher's session), its subscriber
#   with it (before 2026-11-29's import change, a closed user that started its session again at
#   ~60 s); Tsung ends when its last user has left. Keep-alive pings: Tsung sends a PINGREQ every 10 s of
#   every connection, headroom after 10 s (the keep-alive) without sending.
#
# What it measures, per run (same method for both tools):
#   * operations = publishes acknowledged + messages received, as each tool counts them:
#     Tsung's tsung.log counters mqtt_server_pubacked + mqtt_server_published, headroom's
#     summary.json scenario.protocol.mqtt publish_acked + received, the floor's last stdout line
#     ("floor-mqtt: N operations, ...; ... publish_acked, ... received, ...") (the other
#     counters beside: mqtt_connected / connects, mqtt_published / published, errors);
#   * the broker's own counts over the run ($SYS/broker/messages/received, .../messages/sent,
#     .../publish/messages/sent, .../publish/messages/received, .../bytes/received), read with
#     mosquitto_sub before and after, each read after a "poke" (mosquitto_rr: one message to
#     itself; mosquitto lets a $SYS value unchanged for 60 s expire), less what one read and one
#     poke add (measured on the idle broker just before): publish/messages/sent is the messages
#     the subscriber got, messages/received every packet the clients sent (pings included);
#     mosquitto 2.0 leaves retained (and QoS 2) publishes out of publish/messages/received, so
#     it stays 0 here;
#   * peak connected users: TCP connections established to the broker's port, counted with `ss`
#     every second (publishers + the subscriber);
#   * generator CPU-seconds: user + sys of the tool's process tree over the whole run (wait4's
#     rusage from /usr/bin/time; the /proc sample of the tree kept as a cross-check); peak RSS:
#     the tree's summed VmRSS sampled every second (bench/xmpp/sample-tree.sh);
#   * CPU µs per operation = CPU-s / operations; RSS KiB per connected user = peak RSS / peak
#     connected. Per round, the ratios Tsung/headroom of both; then the median (min, max) of the
#     per-round ratios (paired_line of lib.sh), PASS/FAIL against CPU_GOAL (5) and RSS_GOAL (4).
#     With the floor, the same paired ratios Tsung/floor (the most any client making these
#     system calls could reach against Tsung here) and headroom/floor (how far above the floor
#     headroom is), of both figures, no goal.
#
# The broker: scripts/mosquitto.sh with a directory and ports of its own (MQTT_DIR, MQTT_PORT,
# MQTT_TLS_PORT; not the shared 25883 one the tests use, because the bench restarts it). Before
# each run it is stopped and started afresh (persistence false: no retained message, no session
# left), its descriptor limit checked (USERS + 200 at least; the machine's hard limit per process
# is 20,000), and with PIN=1 (default, 2+ cores) pinned to CPU 0, the generator to CPU 1.
#
# Tsung (Debian 1.7.0): client inside the controller VM (use_controller_vm), so `tsung start`
# stays in the foreground and its one beam.smp is a descendant of /usr/bin/time (its figure
# includes the controller's statistics and the VM's start and stop); -n: no web GUI; -i: a node
# name of its own. It needs epmd; if this run starts it (on 127.0.0.1), it is stopped at exit.
#
# Environment (defaults):
#   USERS=2000        publishers started (peak connected = USERS + 1, the subscriber)
#   RATE=50           publisher arrivals per second (Poisson)
#   ARRIVE_S          arrival phase length: ceil(USERS/RATE) + 10 (the USERS cap ends arrivals)
#   HOLD=(ARRIVE_S+10) the think time before each publisher's disconnect; must exceed ARRIVE_S
#   SUB_START=0       Tsung's start_time of the subscriber (headroom's starts with the run)
#   ROUNDS=3          rounds; each runs the tools in TOOLS order, reversed every other round
#   TOOLS="tsung headroom floor"  which tools, in this order (TOOLS=tsung: Tsung alone, no
#                     ratios; a ratio needs both of its tools)
#   HEADROOM=$CARGO_TARGET_DIR/release/headroom or target/release/headroom
#   HR_THREADS=1 when pinned, else the number of cores: headroom's -t
#   FLOOR_BIN=bench/floor/target/release/mqtt  the floor client, built there by the script
#                     (cargo's --target-dir, whatever CARGO_TARGET_DIR says)
#   TSUNG_LOGLEVEL=error  the file's loglevel (the stock file says "debug")
#   EXAMPLE=/usr/share/doc/tsung/examples/mqtt.xml
#   PIN=1  MQTT_PORT=25893  MQTT_TLS_PORT=25894  MQTT_DIR=/tmp/headroom-mqtt-bench
#   KEEP_BROKER=0     1: leave mosquitto running (and its dir) at exit
#   OUT_DIR=bench/runs/<YYYY-MM-DD>-<host>   where mqtt-vs-tsung.{txt,json,commands,versions,
#                     xml,xml.diff} and mqtt-vs-tsung.raw/ go
#   CPU_GOAL=5  RSS_GOAL=4   STRICT=0 (1: exit 4 when a median ratio misses its goal)
#   TSUNG_ERL_FLAGS=  extra flags for Tsung's Erlang VM (ERL_FLAGS); empty: Tsung as shipped
#
# Exit status: 0 done (the ratios may still FAIL: see STRICT); 1 a run failed, fewer than
# USERS + 1 users were connected at once, a tool counted errors, or the floor fell short of
# 10 x USERS publishes acknowledged or received; 2 bad settings or a missing
# tool; 3 headroom cannot run the file (not built, or it refuses or cannot run it); 4 STRICT=1
# and a goal missed.
#
# Output: a table on stdout, then one line of JSON (the same as mqtt-vs-tsung.json).

# shellcheck disable=SC2317 # the cleanup functions run from lib.sh's EXIT trap
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n '2,/^$/{s/^# \{0,1\}//;p}' "$0"
    exit 0
fi
if [[ $# -gt 0 ]]; then
    echo "error: no arguments besides --help; settings are environment variables (see --help)" >&2
    exit 2
fi

BENCH_ROOT=$(cd "$(dirname "$0")/.." && pwd)
HEADROOM=${HEADROOM:-${CARGO_TARGET_DIR:-$BENCH_ROOT/target}/release/headroom}
# shellcheck source-path=SCRIPTDIR disable=SC1091 # followed with shellcheck -x
source "$(dirname "$0")/lib.sh"
SAMPLER=$BENCH_DIR/xmpp/sample-tree.sh
MOSQ=$REPO_ROOT/scripts/mosquitto.sh

usage_die() { echo "error: $*" >&2; exit 2; }
is_int() { [[ $1 =~ ^[0-9]+$ ]]; }

# --- settings ----------------------------------------------------------------------------------

USERS=${USERS:-2000}
RATE=${RATE:-50}
if ! is_int "$USERS" || ((USERS < 1)); then usage_die "USERS must be a positive integer: $USERS"; fi
if ! [[ $RATE =~ ^[0-9]+(\.[0-9]+)?$ ]] || ! awk -v r="$RATE" 'BEGIN { exit !(r > 0) }'; then
    usage_die "RATE must be a positive number: $RATE"
fi
awk -v u="$USERS" -v r="$RATE" 'BEGIN { exit !(u / r <= 50) }' ||
    usage_die "USERS/RATE = $(awk -v u="$USERS" -v r="$RATE" 'BEGIN { print u / r }') s: the file's subscriber waits 60 s from the start, so the arrivals (each publishes at once) must end within ~50 s; raise RATE"
ARRIVE_S=${ARRIVE_S:-$(awk -v u="$USERS" -v r="$RATE" 'BEGIN { a = u / r; c = int(a); if (c < a) c++; print c + 10 }')}
HOLD=${HOLD:-$((ARRIVE_S + 10))}
SUB_START=${SUB_START:-0}
ROUNDS=${ROUNDS:-3}
for v in ARRIVE_S HOLD SUB_START ROUNDS; do is_int "${!v}" || usage_die "$v must be a whole number: ${!v}"; done
((ROUNDS >= 1)) || usage_die "ROUNDS must be at least 1"
((HOLD > ARRIVE_S)) || usage_die "HOLD ($HOLD s) must exceed the arrival phase ARRIVE_S ($ARRIVE_S s): every publisher must still be connected when the last one arrives (and headroom's max_users, which caps users alive, then equals Tsung's maxnumber, which caps users started)"
# headroom's run: its closed subscriber keeps it going until -d, so -d ends it just after the
# last publisher's session (arrivals stop at ARRIVE_S; a session is HOLD s plus milliseconds).
HR_DURATION=${HR_DURATION:-$((ARRIVE_S + HOLD + 5))}
is_int "$HR_DURATION" || usage_die "HR_DURATION must be a whole number of seconds: $HR_DURATION"
# A safety stop for both tools: the runs end by themselves at about USERS/RATE + HOLD.
LIMIT_S=$((ARRIVE_S + HOLD + 60))
TOOLS=${TOOLS:-tsung headroom floor}
for t in $TOOLS; do [[ $t == tsung || $t == headroom || $t == floor ]] || usage_die "TOOLS: unknown tool '$t' (tsung, headroom, floor)"; done
MQTT_PORT=${MQTT_PORT:-25893}
MQTT_TLS_PORT=${MQTT_TLS_PORT:-25894}
MQTT_DIR=${MQTT_DIR:-/tmp/headroom-mqtt-bench}
[[ $MQTT_DIR == /tmp/headroom-mqtt || $MQTT_PORT == 25883 || $MQTT_TLS_PORT == 25884 ]] &&
    usage_die "the bench restarts its broker: give it a directory and ports of its own, not the shared instance's (/tmp/headroom-mqtt, 25883/25884)"
KEEP_BROKER=${KEEP_BROKER:-0}
EXAMPLE=${EXAMPLE:-/usr/share/doc/tsung/examples/mqtt.xml}
TSUNG_LOGLEVEL=${TSUNG_LOGLEVEL:-error}
CPU_GOAL=${CPU_GOAL:-5}
RSS_GOAL=${RSS_GOAL:-4}
STRICT=${STRICT:-0}
TSUNG_ERL_FLAGS=${TSUNG_ERL_FLAGS:-}
if ((${#GEN_PIN[@]})); then HR_THREADS=${HR_THREADS:-1}; else HR_THREADS=${HR_THREADS:-$(nproc)}; fi

export HEADROOM_MQTT_DIR=$MQTT_DIR HEADROOM_MQTT_PORT=$MQTT_PORT HEADROOM_MQTT_TLS_PORT=$MQTT_TLS_PORT
export ERL_EPMD_ADDRESS=127.0.0.1 # only matters if Tsung is what starts epmd

want() { [[ " $TOOLS " == *" $1 "* ]]; }

for c in erl ss jq timeout awk ps getconf diff mosquitto_sub; do
    command -v "$c" >/dev/null || usage_die "$c is missing (Debian: apt-get install -y tsung jq iproute2 procps time diffutils mosquitto-clients)"
done
if want tsung; then command -v tsung >/dev/null || usage_die "tsung is missing (apt-get install -y tsung)"; fi
if want floor; then command -v cargo >/dev/null || usage_die "cargo is missing: it builds the floor client (or leave floor out of TOOLS)"; fi
[[ -x /usr/bin/time ]] || usage_die "/usr/bin/time is missing (apt-get install -y time)"
[[ -r $EXAMPLE ]] || usage_die "no $EXAMPLE (Debian's tsung package ships it)"

# Descriptors: each generator holds USERS + 1 sockets, the broker as many plus its own files.
ulimit -Sn "$(ulimit -Hn)" 2>/dev/null || true
FD_LIMIT=$(ulimit -Sn)
[[ $FD_LIMIT == unlimited ]] && FD_LIMIT=1048576
((FD_LIMIT >= USERS + 1000)) ||
    usage_die "the descriptor limit is $FD_LIMIT: $USERS users need at least $((USERS + 1000)) (ulimit -Hn)"
BROKER_MIN_FDS=$((USERS + 200))
# Tsung starts another client VM when a VM would exceed maxusers, and warns when maxusers exceeds
# the descriptors it has: room for every user, below the limit.
TSUNG_MAXUSERS=$((FD_LIMIT - 500 < 2 * USERS ? FD_LIMIT - 500 : 2 * USERS))

# --- run directory -----------------------------------------------------------------------------

WORK=$(mktemp -d /tmp/headroom-mqtt-bench.XXXXXX)
on_exit "rm -rf '$WORK'"
cd "$WORK" || exit 1
OUT=${OUT_DIR:-$(run_dir)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
NAME=mqtt-vs-tsung
RAW=$OUT/$NAME.raw
rm -rf "$RAW" && mkdir -p "$RAW"
{
    echo "# the file both tools run is $NAME.xml (in $WORK during the run), rendered from $EXAMPLE"
    echo "# (the edits: $NAME.xml.diff); each command ran under:"
    echo "#   timeout -k 10 LIMIT /usr/bin/time -f '%U %S %M %e', sampled by bench/xmpp/sample-tree.sh"
    echo "# broker: HEADROOM_MQTT_DIR=$MQTT_DIR HEADROOM_MQTT_PORT=$MQTT_PORT HEADROOM_MQTT_TLS_PORT=$MQTT_TLS_PORT scripts/mosquitto.sh stop; ... start (before every run)"
} >"$OUT/$NAME.commands"

# --- the broker --------------------------------------------------------------------------------

BROKER_STARTED=0
broker_pid() { cat "$MQTT_DIR/mosquitto.pid" 2>/dev/null; }

broker_cleanup() {
    ((BROKER_STARTED)) || return 0
    if [[ $KEEP_BROKER == 1 ]]; then
        log "leaving mosquitto running on 127.0.0.1:$MQTT_PORT (KEEP_BROKER=1; stop: HEADROOM_MQTT_DIR=$MQTT_DIR HEADROOM_MQTT_PORT=$MQTT_PORT HEADROOM_MQTT_TLS_PORT=$MQTT_TLS_PORT $MOSQ stop)"
        return 0
    fi
    "$MOSQ" stop >/dev/null 2>&1 || true
    rm -rf "$MQTT_DIR"
}
on_exit broker_cleanup

# broker_fresh: mosquitto stopped and started again (no retained message, no client, no count),
# its log emptied, pinned, its descriptor limit checked, no client connection left on its port.
broker_fresh() {
    "$MOSQ" stop >/dev/null 2>&1 || true
    rm -f "$MQTT_DIR/mosquitto.log"
    BROKER_STARTED=1
    "$MOSQ" start >/dev/null 2>"$WORK/broker-start.err" || { cat "$WORK/broker-start.err" >&2; die "mosquitto did not start"; }
    local pid lim
    pid=$(broker_pid) || die "mosquitto runs but its pid is unknown"
    # Another process on the port would pass mosquitto.sh's "listening" check while ours exits.
    if ! kill -0 "$pid" 2>/dev/null || ! ss -Htlnp "sport = :$MQTT_PORT" | grep -q "pid=$pid,"; then
        die "127.0.0.1:$MQTT_PORT is not held by the mosquitto just started (pid $pid): $(ss -Htlnp "sport = :$MQTT_PORT" | head -n 1)"
    fi
    lim=$(awk '/Max open files/ { print $4 }' "/proc/$pid/limits")
    [[ $lim == unlimited ]] || ((lim >= BROKER_MIN_FDS)) ||
        die "mosquitto (pid $pid) may open $lim descriptors; $USERS users need at least $BROKER_MIN_FDS"
    BROKER_FDS=$lim
    if ((${#SERVER_PIN[@]})); then taskset -a -p -c 0 "$pid" >/dev/null; fi
    local n
    for _ in $(seq 1 30); do
        n=$(ss -Htn state established "( dport = :$MQTT_PORT )" | wc -l)
        ((n == 0)) && return 0
        sleep 1
    done
    die "$n connections to 127.0.0.1:$MQTT_PORT remain after restarting mosquitto"
}

# The broker's own counters read by the bench ($SYS, published every second: sys_interval 1).
# mosquitto publishes them retained with a 60 s expiry, and again only when they change: a
# counter left unchanged for 60 s (publish/messages/sent once the last message went out, a
# maximum, a count that stays 0) is no longer there to read. sys_poke makes every one of these
# change just before a read.
SYS_KEYS=(messages/received messages/sent publish/messages/sent publish/messages/received
    bytes/received bytes/sent)
# sys_snapshot FILE: "key value" per SYS_KEYS entry ("-" when the broker holds no value), from
# one mosquitto_sub that takes the retained values (-C: one per key) and leaves. The broker
# counts the reader's own packets too (its CONNECT, SUBSCRIBE and DISCONNECT, the PUBLISHes it
# gets): measure() measures one read and one poke on the idle broker and subtracts them.
sys_snapshot() {
    local args=() k
    for k in "${SYS_KEYS[@]}"; do args+=(-t "\$SYS/broker/$k"); done
    timeout 10 mosquitto_sub -h 127.0.0.1 -p "$MQTT_PORT" -i "bench-sys-$$" -v --retained-only \
        -C "${#SYS_KEYS[@]}" -W 5 "${args[@]}" >"$1.sub" 2>/dev/null || true
    for k in "${SYS_KEYS[@]}"; do
        awk -v t="\$SYS/broker/$k" -v k="$k" '$1 == t { v = $2 } END { print k, (v == "" ? "-" : v) }' "$1.sub"
    done >"$1"
}
# sys_poke: one client that subscribes to a topic of its own, publishes one message (QoS 0, not
# retained) to it, gets it back and leaves (mosquitto_rr): every counter of SYS_KEYS moves, so
# the broker publishes all of them again at its next tick.
sys_poke() {
    timeout 10 mosquitto_rr -h 127.0.0.1 -p "$MQTT_PORT" -i "bench-poke-$$" -t "bench/poke/$$" -e "bench/poke/$$" \
        -m poke -W 5 >/dev/null 2>&1 || log "mosquitto_rr (the \$SYS poke) failed: the broker's counts may be missing"
}
# sys_delta A B: "key (B - A)" per key ("-" if either is missing).
sys_delta() { awk 'NR == FNR { a[$1] = $2; next } { print $1, (($2 == "-" || a[$1] == "-") ? "-" : $2 - a[$1]) }' "$1" "$2"; }

# --- Tsung's epmd ------------------------------------------------------------------------------

if want tsung && ! pgrep -x epmd >/dev/null; then
    on_exit stop_our_epmd
fi
stop_our_epmd() {
    local pid
    pid=$(pgrep -x epmd | head -n 1) || return 0
    if epmd -names 2>/dev/null | grep -q '^name '; then
        log "epmd ($pid) has other nodes registered; leaving it running"
    else
        kill "$pid" 2>/dev/null || true
    fi
}

# --- the file both tools run ---------------------------------------------------------------------

# render OUT USERS RATE ARRIVE_S HOLD_S SUB_START LIMIT_S — the stock example with its load
# scaled, its server, clients and loglevel set and the publisher's think time added; every edit
# must apply exactly once, or the stock file is not the one this script knows.
render() {
    awk -v users="$2" -v rate="$3" -v arrive="$4" -v hold="$5" -v sub_start="$6" -v limit="$7" \
        -v port="$MQTT_PORT" -v maxusers="$TSUNG_MAXUSERS" -v loglevel="$TSUNG_LOGLEVEL" '
        function once(what) { n[what]++ }
        /<tsung / && sub(/loglevel="[^"]*"/, "loglevel=\"" loglevel "\"") { once("loglevel") }
        /<client / { match($0, /^[ \t]*/); $0 = substr($0, 1, RLENGTH) \
            "<client host=\"localhost\" use_controller_vm=\"true\" maxusers=\"" maxusers "\"></client>"; once("client") }
        /<server / && sub(/port="[0-9]+"/, "port=\"" port "\"") { once("server") }
        /<load>/ && sub(/<load>/, "<load duration=\"" limit "\" unit=\"second\">") { once("load") }
        /<user session="mqtt_subscriber"/ && sub(/start_time="[^"]*"/, "start_time=\"" sub_start "\"") { once("start_time") }
        /<arrivalphase / && sub(/duration="[^"]*"/, "duration=\"" arrive "\"") { once("phase") }
        /<users / && sub(/maxnumber="[^"]*"/, "maxnumber=\"" users "\"") && sub(/arrivalrate="[^"]*"/, "arrivalrate=\"" rate "\"") { once("users") }
        /<session / { s = $0; sub(/.*name="/, "", s); sub(/".*/, "", s); session = s }
        # The publisher think time: before the <request> that holds its disconnect.
        held != "" {
            if ($0 ~ /<mqtt type="disconnect"/ && session == "mqtt_publisher" && !n["think"]) {
                match(held, /^[ \t]*/)
                print substr(held, 1, RLENGTH) "<thinktime value=\"" hold "\" random=\"false\"/>"
                once("think")
            }
            print held; held = ""
        }
        session == "mqtt_publisher" && /^[ \t]*<request>[ \t]*$/ { held = $0; next }
        { print }
        END {
            split("loglevel client server load start_time phase users think", w, " ")
            for (i in w) if (n[w[i]] != 1) { printf "edit %s applied %d times\n", w[i], n[w[i]] > "/dev/stderr"; bad = 1 }
            exit bad
        }' "$EXAMPLE" >"$1" || die "$EXAMPLE is not the stock mqtt.xml this script knows how to edit"
}

render "$WORK/$NAME.xml" "$USERS" "$RATE" "$ARRIVE_S" "$HOLD" "$SUB_START" "$LIMIT_S"
cp "$WORK/$NAME.xml" "$OUT/$NAME.xml"
diff -u --label "stock $EXAMPLE" --label "$NAME.xml" "$EXAMPLE" "$WORK/$NAME.xml" >"$OUT/$NAME.xml.diff" || true

TSUNG_ID=hm$$
TSUNG_CMD=(tsung -n -i "$TSUNG_ID" -f "$WORK/$NAME.xml" -l "$WORK/tsung-log" start)
if [[ -n $TSUNG_ERL_FLAGS ]]; then TSUNG_CMD=(env "ERL_FLAGS=$TSUNG_ERL_FLAGS" "${TSUNG_CMD[@]}"); fi
HR_CMD=("$HEADROOM" run "$WORK/$NAME.xml" --target "127.0.0.1:$MQTT_PORT" -d "${HR_DURATION}s"
    -t "$HR_THREADS" -q --no-report --out "$WORK/headroom-out")
FLOOR_BIN=${FLOOR_BIN:-$BENCH_DIR/floor/target/release/mqtt}
FLOOR_CMD=("$FLOOR_BIN" "127.0.0.1:$MQTT_PORT" "$USERS" "$RATE" "$HOLD")

# --- versions ----------------------------------------------------------------------------------

write_versions() {
    {
        echo "date: $(date -Is)"
        echo "host: $(hostname -s)"
        echo "kernel: $(uname -srm)"
        echo "cpus: $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'))"
        echo "load average at the start: $(cut -d" " -f1-3 /proc/loadavg)"
        echo "pinning: mosquitto=${SERVER_PIN[*]:-none} generator=${GEN_PIN[*]:-none}"
        echo "tsung: $(tsung -v 2>&1 | head -n 1) ($(dpkg-query -W -f '${Version}' tsung 2>/dev/null || echo '?'))"
        echo "erlang: $(erl -noshell -eval 'io:format("~s~n",[erlang:system_info(otp_release)]),halt().' 2>/dev/null || echo '?')"
        echo "mosquitto: $(dpkg-query -W -f '${Version}' mosquitto 2>/dev/null || echo '?')"
        echo "example: $EXAMPLE (sha256 $(sha256sum "$EXAMPLE" | cut -c1-16))"
        if want floor; then
            echo "floor: $FLOOR_BIN (bench/floor/src/bin/mqtt.rs, sha256 $(sha256sum "$FLOOR_BIN" | cut -c1-16))"
        fi
        if [[ -x $HEADROOM ]]; then
            echo "headroom: $("$HEADROOM" --version 2>&1 | head -n 1) (${HEADROOM_ORIG:-$HEADROOM}, sha256 $(sha256sum "$HEADROOM" | cut -c1-16))"
        else
            echo "headroom: (not built: $HEADROOM)"
        fi
        echo "headroom git: $(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(
            git -C "$REPO_ROOT" diff --quiet HEAD 2>/dev/null || echo ' (dirty)')"
    } >"$OUT/$NAME.versions"
}

# --- headroom: can it run the file? ------------------------------------------------------------

HR_NOT_READY=""
# A short run of the same file, rendered for 3 publishers and 1 s of hold: it must import, run,
# connect, and get publishes acknowledged and received. Fails fast, before minutes of Tsung.
headroom_preflight() {
    local dir=$WORK/preflight rc=0 acked received
    mkdir -p "$dir"
    render "$dir/p.xml" 3 10 2 3 0 30
    timeout -k 5 60 "$HEADROOM" run "$dir/p.xml" --target "127.0.0.1:$MQTT_PORT" -d 6s -t 1 -q --no-report \
        --out "$dir/out" >"$dir/stdout" 2>"$dir/stderr" || rc=$?
    cp "$dir/stderr" "$RAW/headroom-preflight.err"
    if ((rc != 0)); then
        HR_NOT_READY="headroom exited with status $rc on the file: $(grep -v 'warning:' "$dir/stderr" | head -n 3 | tr '\n' ' ')"
        return 1
    fi
    acked=$(jq -r '.scenario.protocol.mqtt.publish_acked // 0' "$dir/out/summary.json" 2>/dev/null || echo 0)
    received=$(jq -r '.scenario.protocol.mqtt.received // 0' "$dir/out/summary.json" 2>/dev/null || echo 0)
    if ! ((acked > 0 && received > 0)); then
        cp -r "$dir/out" "$RAW/headroom-preflight" 2>/dev/null || true
        HR_NOT_READY="headroom ran the file but had $acked publishes acknowledged and $received messages received (see $RAW/headroom-preflight/summary.json)"
        return 1
    fi
    return 0
}

# --- one measured run --------------------------------------------------------------------------

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
on_exit kill_tool

declare -A R # R[tool.round.key] = value
RUNS=()      # "tool.round", in the order run

# measure RUN CMD... — fresh broker, its counts read, then CMD pinned to the generator CPU under
# timeout and /usr/bin/time, sampled every second; the broker's counts read again. Sets
# R[RUN.status|cpu_s|user_s|sys_s|wall_s|peak_conns|peak_rss_kb|broker_*|...].
measure() {
    local run=$1
    shift
    local tag=${run/./-} samples timef rc=0 srv
    samples=$RAW/$tag.samples
    timef=$WORK/$tag.time
    log "$run: fresh mosquitto on 127.0.0.1:$MQTT_PORT"
    broker_fresh
    srv=$(broker_pid)
    # The broker's counts: a first read after the first $SYS tick; then a read, a poke and a
    # read on the idle broker: their difference is what one read and one poke add themselves.
    # (The broker's $SYS tick is not exactly a second when idle: 2.5 s between reads.)
    sleep 1.2
    sys_snapshot "$WORK/$tag.sysw"
    sleep 2.5
    sys_snapshot "$WORK/$tag.sys0"
    sys_poke
    sleep 2.5
    sys_snapshot "$WORK/$tag.sys1"
    echo "${GEN_PIN[*]} $*" >>"$OUT/$NAME.commands"
    log "$run: $USERS publishers, Poisson $RATE/s, hold ${HOLD}s, 1 subscriber (about $(awk -v u="$USERS" -v r="$RATE" -v h="$HOLD" 'BEGIN { printf "%d", u / r + h }') s; stopped at $((LIMIT_S + 30)) s at most)"
    echo "t_s gen_cpu_s gen_rss_kb gen_procs conns srv_cpu_s srv_rss_kb" >"$samples"
    rm -rf "$WORK/tsung-log" "$WORK/headroom-out"
    timeout -k 10 $((LIMIT_S + 30)) /usr/bin/time -o "$timef" -f '%U %S %M %e' \
        "${GEN_PIN[@]}" "$@" >"$RAW/$tag.stdout" 2>"$RAW/$tag.stderr" &
    TOOL_PID=$!
    "${SERVER_PIN[@]}" "$SAMPLER" "$TOOL_PID" "$MQTT_PORT" "$srv" "$samples" 2>"$RAW/$tag.sampler.err" &
    SAMPLER_PID=$!
    wait "$TOOL_PID" || rc=$?
    TOOL_PID=""
    sleep 1.5 # one more sample after the end (connections gone), then stop the sampler
    kill "$SAMPLER_PID" 2>/dev/null || true
    wait "$SAMPLER_PID" 2>/dev/null || true
    SAMPLER_PID=""
    sys_poke
    sleep 2.5 # the broker publishes its counts every second or so
    sys_snapshot "$WORK/$tag.sys2"
    R[$run.status]=$rc
    ((rc == 124 || rc == 137)) && R[$run.status]="$rc (timeout)"
    local u s m e
    read -r u s m e < <(tail -n 1 "$timef" 2>/dev/null || echo "- - - -")
    R[$run.user_s]=$u R[$run.sys_s]=$s R[$run.wall_s]=$e R[$run.maxrss_one_kb]=$m
    R[$run.cpu_s]=$(awk -v u="$u" -v s="$s" 'BEGIN { if (u == "-") print "-"; else printf "%.2f", u + s }')
    # From the samples: peak connections and tree RSS, last tree CPU, the broker's CPU and RSS.
    local pc pr gc sc sr ns
    read -r pc pr gc sc sr ns < <(
        awk 'NR > 1 { if ($5 > pc) pc = $5; if ($3 > pr) pr = $3; if ($2 > gc) gc = $2
                      if (n == 0) s0 = $6; s1 = $6; if ($7 > sr) sr = $7; n++ }
             END { printf "%d %d %.2f %.2f %d %d\n", pc, pr, gc, s1 - s0, sr, n }' "$samples")
    R[$run.peak_conns]=$pc R[$run.peak_rss_kb]=$pr R[$run.sampled_cpu_s]=$gc
    R[$run.server_cpu_s]=$sc R[$run.server_peak_rss_kb]=$sr R[$run.samples]=$ns
    R[$run.peak_conns_at_s]=$(awk -v p="${R[$run.peak_conns]}" 'NR > 1 && $5 == p { print $1; exit }' "$samples")
    R[$run.connected_s]=$(awk -v p="${R[$run.peak_conns]}" 'NR > 1 && $5 == p { n++ } END { print n + 0 }' "$samples")
    # The broker over the run: (after - before) less one read and one poke (before - idle).
    sys_delta "$WORK/$tag.sys0" "$WORK/$tag.sys1" >"$WORK/$tag.footprint"
    sys_delta "$WORK/$tag.sys1" "$WORK/$tag.sys2" >"$WORK/$tag.delta"
    local k v f
    while read -r k v; do
        f=$(awk -v k="$k" '$1 == k { print $2 }' "$WORK/$tag.footprint")
        if [[ $v == - || $f == - ]]; then R[$run.broker.$k]="-"; else R[$run.broker.$k]=$((v - f)); fi
        R[$run.broker_read.$k]=$f
    done <"$WORK/$tag.delta"
    for k in sys0 sys1 sys2; do echo "$k: $(paste -sd' ' "$WORK/$tag.$k.sub")"; done >"$RAW/$tag.broker-sys"
    # The broker's log: how the clients left (cleanly, by a closed socket, by keep-alive timeout).
    local blog=$MQTT_DIR/mosquitto.log
    R[$run.broker_log]=$(awk '/New client connected/ { c++ } / disconnected\.$/ { d++ } /closed its connection/ { cl++ }
        /exceeded timeout/ { to++ } /[Ss]ocket error/ { se++ } /[Ee]rror|[Ww]arning/ { e++ }
        END { printf "connected=%d disconnected=%d closed=%d keepalive_timeout=%d socket_error=%d errors_warnings=%d", c, d, cl, to, se, e }' "$blog" 2>/dev/null || echo -)
    grep -i 'error\|warning\|exceeded timeout\|closed its connection' "$blog" 2>/dev/null | head -n 50 >"$RAW/$tag.broker-log-errors" || true
    [[ -s $RAW/$tag.broker-log-errors ]] || rm -f "$RAW/$tag.broker-log-errors"
    if ((rc != 0)); then
        log "$run exited with status $rc; last lines of its stderr:"
        tail -n 15 "$RAW/$tag.stderr" >&2 || true
    fi
}

# --- what each tool says of itself -------------------------------------------------------------

# tsung_stats RUN LOGDIR: the totals of its tsung.log (the last dump of each counter).
tsung_stats() {
    local run=$1 log tag=${1/./-}
    log=$(find "$2" -name tsung.log -print -quit 2>/dev/null) || true
    [[ -n $log && -s $log ]] || return 0
    cp "$log" "$RAW/$tag.tsung.log"
    # Lines are "stats: NAME ..." every 10 s: counters "NAME interval total", samples "NAME count
    # mean stddev max min mean_before count_before", users "users now max", connected "connected
    # delta now".
    awk '$1 == "stats:" {
            n = $2; last[n] = $0
            if (n == "connected" && $4 > cmax) cmax = $4
        }
        function f(line, i,   a) { split(line, a, " "); return a[i] }
        function total(n) { return (n in last) ? f(last[n], 4) : 0 }
        function scount(n) { return (n in last) ? f(last[n], 3) + f(last[n], 9) : 0 }
        END {
            print "peak_users", (("users" in last) ? f(last["users"], 4) : "-")
            print "tool_connected_max", cmax + 0
            print "started", total("users_count")
            print "finished", total("finish_users_count")
            print "connects", total("mqtt_connected")
            print "published", total("mqtt_published")
            print "publish_acked", total("mqtt_server_pubacked")
            print "received", total("mqtt_server_published")
            print "acks_sent", total("mqtt_pubacked")
            print "disconnects", total("mqtt_disconnected")
            print "requests", scount("request")
            print "bytes_sent", total("size_sent")
            print "bytes_received", total("size_rcv")
            errs = 0; list = ""
            for (n in last) if (n ~ /^error_/) { errs += total(n); list = list n "=" total(n) " " }
            print "errors", errs
            print "error_kinds", (list == "" ? "-" : list)
        }' "$log" >"$WORK/tsung.kv"
    local k v
    while read -r k v; do R[$run.$k]=$v; done <"$WORK/tsung.kv"
    # Errors Tsung logs rather than counts (its controller's log, at loglevel error and above).
    local clog n
    clog=$(find "$2" -name 'tsung_controller*.log' -print -quit 2>/dev/null) || true
    n=0
    if [[ -n $clog ]]; then
        n=$(grep -c -i 'error\|crash' "$clog" || true)
        grep -i 'error\|crash' "$clog" | head -n 50 >"$RAW/$tag.controller-errors" || true
        [[ -s $RAW/$tag.controller-errors ]] || rm -f "$RAW/$tag.controller-errors"
    fi
    R[$run.log_errors]=$n
}

# headroom_stats RUN DIR: the same figures from summary.json.
headroom_stats() {
    local run=$1 tag=${1/./-} s=$2/summary.json
    [[ -s $s ]] || return 0
    cp "$s" "$RAW/$tag.summary.json"
    j() { local v; v=$(jq -r "$1" "$s" 2>/dev/null) || v=""; [[ -z $v || $v == null ]] && v="-"; echo "$v"; }
    local m='(.scenario.protocol.mqtt // {})'
    R[$run.peak_users]=$(j '.connections_peak')
    R[$run.tool_connected_max]=$(jq -s '[.[].connections_open // 0] | max' "$2/intervals.jsonl" 2>/dev/null || echo -)
    R[$run.started]=$(j '.users_started')
    R[$run.users_dropped]=$(j '.scenario.sessions.users_dropped')
    R[$run.finished]=$(j '.users_finished')
    R[$run.connects]=$(j "$m.connects")
    R[$run.published]=$(j "$m.published")
    R[$run.publish_acked]=$(j "$m.publish_acked")
    R[$run.received]=$(j "$m.received")
    R[$run.pings]=$(j "$m.pings")
    R[$run.subscribed]=$(j "$m.subscribed")
    R[$run.disconnects]=$(j '.scenario.by_request["mqtt:disconnect"].count')
    R[$run.errors]=$(j '.errors_total')
    R[$run.error_kinds]=$(j '[(.errors // {}) | to_entries[] | select(.value > 0) | "\(.key)=\(.value)"]
        + [('"$m"' | to_entries[] | select((.key == "publish_refused" or .key == "subscribe_refused" or .key == "server_disconnects") and .value > 0) | "\(.key)=\(.value)")]
        + (if (.scenario.sessions.aborted // 0) > 0 then ["sessions_aborted=\(.scenario.sessions.aborted)"] else [] end)
        | if length == 0 then "-" else join(" ") end')
    R[$run.in_flight]=$(j '.in_flight')
    R[$run.bytes_sent]=$(j '.bytes_sent')
    R[$run.bytes_received]=$(j '.bytes_received')
    R[$run.self_cpu_s]=$(j '((.cpu_user_s // empty) + (.cpu_sys_s // 0)) * 100 | round / 100')
}

# floor_stats RUN: the floor client's last stdout line, "floor-mqtt: N operations, D of U users
# done, F sends failed, user .. sys .., X us CPU per operation, T s; C connects, P published, A
# publish_acked, S subscribed, M received, G pings, H pongs, K peak connections" (U: the
# publishers and the subscriber; F: failures of any kind).
floor_stats() {
    local run=$1 tag=${1/./-} line
    line=$(tail -n 1 "$RAW/$tag.stdout" 2>/dev/null) || line=""
    [[ $line == floor-mqtt:* ]] || return 0
    awk '{
        sub(/^floor-mqtt: /, ""); n = split($0, part, /; /)
        split(part[1], a, /, /)
        split(a[1], w, " "); print "ops", w[1]
        split(a[2], w, " "); print "finished", w[1]; print "started", w[3]
        split(a[3], w, " "); print "errors", w[1]
        split(a[4], w, " "); printf "self_cpu_s %.2f\n", w[2] + w[4]
        m = split(part[2], b, /, /)
        for (i = 1; i <= m; i++) { split(b[i], w, " "); print w[2], w[1] }
    }' <<<"$line" >"$WORK/floor.kv"
    local k v
    while read -r k v; do
        case $k in
            peak) k=peak_users ;;
        esac
        R[$run.$k]=$v
    done <"$WORK/floor.kv"
    R[$run.disconnects]=${R[$run.finished]:--} R[$run.log_errors]=0
    if [[ ${R[$run.errors]:-0} == 0 ]]; then R[$run.error_kinds]="-"; else R[$run.error_kinds]="failures=${R[$run.errors]}"; fi
}

# --- the runs ----------------------------------------------------------------------------------

log "output: $OUT"
log "workload: $EXAMPLE, $USERS publishers (Poisson $RATE/s over at most ${ARRIVE_S}s), hold ${HOLD}s, 1 subscriber from ${SUB_START}s; mosquitto on 127.0.0.1:$MQTT_PORT; $ROUNDS round(s) of: $TOOLS"
FAILED=0

if want headroom; then
    if [[ ! -x $HEADROOM ]]; then
        echo "error: no headroom binary at $HEADROOM; build one with" >&2
        echo "  cargo build --release -p headroom" >&2
        echo "and run with HEADROOM=/path/to/headroom (or TOOLS=tsung for Tsung alone)" >&2
        exit 3
    fi
    snapshot_headroom "$WORK"
    HR_CMD[0]=$HEADROOM
fi
if want floor; then
    log "floor: building bench/floor's mqtt client"
    cargo build -q --release --manifest-path "$BENCH_DIR/floor/Cargo.toml" --target-dir "$BENCH_DIR/floor/target" --bin mqtt >&2 ||
        die "bench/floor did not build"
    [[ -x $FLOOR_BIN ]] || die "no floor client at $FLOOR_BIN after building it (FLOOR_BIN)"
fi
write_versions
if want headroom; then
    log "headroom: checking that it runs the file (3 publishers, a few seconds)"
    broker_fresh
    if ! headroom_preflight; then
        echo "error: headroom cannot run the file: $HR_NOT_READY" >&2
        echo "  (its stderr: $RAW/headroom-preflight.err). Measure Tsung alone with TOOLS=tsung $0" >&2
        exit 3
    fi
fi

for round in $(seq 1 "$ROUNDS"); do
    # Order reversed every other round (tsung headroom floor, floor headroom tsung, ...): no
    # tool always runs first, on a broker just started, or after the same neighbour.
    order=$TOOLS
    if ((round % 2 == 0)); then order=$(echo "$TOOLS" | tr " " "\n" | tac | tr "\n" " "); fi
    for tool in $order; do
        run=$tool.$round
        RUNS+=("$run")
        case $tool in
            tsung)
                measure "$run" "${TSUNG_CMD[@]}"
                tsung_stats "$run" "$WORK/tsung-log"
                ;;
            headroom)
                measure "$run" "${HR_CMD[@]}"
                headroom_stats "$run" "$WORK/headroom-out"
                ;;
            floor)
                measure "$run" "${FLOOR_CMD[@]}"
                floor_stats "$run"
                ;;
        esac
        # Operations: publishes acknowledged + messages received, as the tool counts them.
        R[$run.ops]=$(awk -v a="${R[$run.publish_acked]:--}" -v r="${R[$run.received]:--}" \
            'BEGIN { if (a == "-" || r == "-") print "-"; else print a + r }')
        if [[ ${R[$run.cpu_s]} != - && ${R[$run.ops]} != - ]] && ((${R[$run.ops]} > 0 && ${R[$run.peak_conns]:-0} > 0)); then
            R[$run.cpu_us_per_op]=$(awk -v c="${R[$run.cpu_s]}" -v n="${R[$run.ops]}" 'BEGIN { printf "%.2f", c * 1e6 / n }')
            R[$run.rss_kb_per_user]=$(awk -v r="${R[$run.peak_rss_kb]}" -v n="${R[$run.peak_conns]}" 'BEGIN { printf "%.2f", r / n }')
        else
            R[$run.cpu_us_per_op]="-" R[$run.rss_kb_per_user]="-"
        fi
        if [[ ${R[$run.status]} != 0 ]]; then
            FAILED=1
            log "$run: the run failed (status ${R[$run.status]})"
        elif ((${R[$run.peak_conns]:-0} < USERS + 1)); then
            FAILED=1
            log "$run: only ${R[$run.peak_conns]} of $USERS publishers + 1 subscriber were connected at once"
        elif [[ ${R[$run.errors]:-0} != 0 || ${R[$run.error_kinds]:--} != - || ${R[$run.log_errors]:-0} != 0 ]]; then
            FAILED=1
            log "$run: the tool counted errors: ${R[$run.error_kinds]:--} (logged: ${R[$run.log_errors]:-0})"
        elif [[ $tool == floor && (${R[$run.publish_acked]:--} != $((10 * USERS)) || ${R[$run.received]:--} != $((10 * USERS))) ]]; then
            FAILED=1
            log "$run: the floor did less than the sessions: ${R[$run.publish_acked]:--} publishes acknowledged and ${R[$run.received]:--} received of $((10 * USERS))"
        else
            log "$run: ${R[$run.ops]} operations, ${R[$run.cpu_s]} CPU-s, peak ${R[$run.peak_conns]} connected, ${R[$run.peak_rss_kb]} KiB"
        fi
    done
done

# --- the table ---------------------------------------------------------------------------------

verdict() { awk -v r="$1" -v g="$2" 'BEGIN { if (r == "" || r == "-") print "n/a"; else if (r + 0 >= g + 0) print "PASS"; else print "FAIL" }'; }
ok_run() { [[ ${R[$1.status]:-} == 0 && ${R[$1.cpu_us_per_op]:--} != - ]]; }

# Per round: "A B" figures (KEY) of tools A and B (default tsung, headroom), in the rounds
# where both ran and succeeded.
pairs() { # pairs KEY [A B]
    local r a=${2:-tsung} b=${3:-headroom}
    for r in $(seq 1 "$ROUNDS"); do
        if ok_run "$a.$r" && ok_run "$b.$r"; then echo "${R[$a.$r.$1]} ${R[$b.$r.$1]}"; fi
    done
}
CPU_LINE="n/a" RSS_LINE="n/a" CPU_MED="-" RSS_MED="-"
if want tsung && want headroom; then
    CPU_LINE=$(pairs cpu_us_per_op | paired_line)
    RSS_LINE=$(pairs rss_kb_per_user | paired_line)
    CPU_MED=$(awk '/^median/ { print $2 }' <<<"$CPU_LINE")
    RSS_MED=$(awk '/^median/ { print $2 }' <<<"$RSS_LINE")
fi
# Against the floor: Tsung/floor and headroom/floor, CPU and RSS ("n/a" without both tools).
declare -A FL
for a in tsung headroom; do
    for k in cpu_us_per_op rss_kb_per_user; do
        FL[$a.$k]="n/a"
        if want "$a" && want floor; then FL[$a.$k]=$(pairs "$k" "$a" floor | paired_line); fi
    done
done
CPU_VERDICT=$(verdict "$CPU_MED" "$CPU_GOAL")
RSS_VERDICT=$(verdict "$RSS_MED" "$RSS_GOAL")

W=13
row() { # row LABEL KEY: one value per run
    local label=$1 key=$2 run line
    line=$(printf '%-36s' "$label")
    for run in "${RUNS[@]}"; do line+=$(printf " %${W}s" "${R[$run.$key]:--}"); done
    echo "$line"
}
pair() { # pair LABEL KEY1 KEY2: "v1/v2" per run
    local label=$1 run line
    line=$(printf '%-36s' "$label")
    for run in "${RUNS[@]}"; do line+=$(printf " %${W}s" "${R[$run.$2]:--}/${R[$run.$3]:--}"); done
    echo "$line"
}
for run in "${RUNS[@]}"; do
    for k in peak_rss_kb server_peak_rss_kb; do
        R[$run.${k%_kb}_mib]=$(awk -v k="${R[$run.$k]:--}" 'BEGIN { if (k == "-") print "-"; else printf "%.1f", k / 1024 }')
    done
done
BROKER_VERSION=$(dpkg-query -W -f '${Version}' mosquitto 2>/dev/null || echo '?')

{
    echo "mqtt-vs-tsung: Tsung's $(basename "$EXAMPLE") (sessions as shipped + a ${HOLD}s think before the publisher's disconnect):"
    echo "  $USERS publishers (Poisson $RATE/s, capped at $USERS), 1 subscriber from ${SUB_START}s; mosquitto $BROKER_VERSION"
    echo "  on 127.0.0.1:$MQTT_PORT (pinned: ${SERVER_PIN[*]:-no}, ${BROKER_FDS:-?} descriptors), generator pinned: ${GEN_PIN[*]:-no};"
    echo "  headroom -d ${HR_DURATION}s -t $HR_THREADS; $(date -Is) on $(hostname -s), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    header=$(printf '%-36s' "")
    for run in "${RUNS[@]}"; do header+=$(printf " %${W}s" "${run%.*} ${run#*.}"); done
    echo "$header"
    row "exit status" status
    row "wall time (s)" wall_s
    row "users started (subscriber incl.)" started
    row "users finished" finished
    row "peak connected (ss, 1 s)" peak_conns
    pair "  reached at (s) / seconds held" peak_conns_at_s connected_s
    row "tool's peak connections" peak_users
    row "connects (CONNACKs)" connects
    row "publishes sent" published
    row "publishes acknowledged (PUBACK)" publish_acked
    row "messages received" received
    row "operations (acked + received)" ops
    row "errors" errors
    row "pings sent (headroom, floor)" pings
    row "tsung: logged errors" log_errors
    row "broker: messages/received" "broker.messages/received"
    row "broker: messages/sent" "broker.messages/sent"
    row "broker: publish/messages/sent" "broker.publish/messages/sent"
    row "broker: publish/messages/received" "broker.publish/messages/received"
    row "broker: bytes received" "broker.bytes/received"
    pair "  bench's read+poke: recv/pub sent" "broker_read.messages/received" "broker_read.publish/messages/sent"
    row "generator CPU (s, user+sys)" cpu_s
    pair "  user / sys (s)" user_s sys_s
    pair "  sampled tree / tool's own" sampled_cpu_s self_cpu_s
    row "generator peak RSS (MiB, tree)" peak_rss_mib
    row "CPU µs per operation" cpu_us_per_op
    row "RSS KiB per connected user" rss_kb_per_user
    pair "broker CPU (s) / peak RSS (MiB)" server_cpu_s server_peak_rss_mib
    for run in "${RUNS[@]}"; do
        [[ ${R[$run.error_kinds]:--} != - ]] && echo "$run errors: ${R[$run.error_kinds]}"
        echo "$run broker log: ${R[$run.broker_log]:--}"
    done
    echo
    if want tsung && want headroom; then
        echo "per round, Tsung/headroom:"
        for r in $(seq 1 "$ROUNDS"); do
            if ok_run "tsung.$r" && ok_run "headroom.$r"; then
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
    else
        echo "tsung/headroom ratios: n/a (needs both tools; TOOLS=\"$TOOLS\")"
    fi
    if want floor; then
        echo "ratio tsung/floor, CPU per operation: ${FL[tsung.cpu_us_per_op]} (the most any client making"
        echo "  these system calls could reach against Tsung here; the CPU goal is $CPU_GOAL)"
        echo "ratio tsung/floor, RSS per connected user: ${FL[tsung.rss_kb_per_user]}"
        echo "ratio headroom/floor, CPU per operation: ${FL[headroom.cpu_us_per_op]} (how far above the floor headroom is)"
        echo "ratio headroom/floor, RSS per connected user: ${FL[headroom.rss_kb_per_user]}"
    fi
    echo "(operations: Tsung mqtt_server_pubacked + mqtt_server_published, headroom and the floor publish_acked"
    echo " + received; the floor: the same sessions, its subscriber from 0 s and for its full 60 s, publishers from"
    echo " its SUBACK, nothing but the system calls;"
    echo " per connected user = peak RSS / peak connections established at once, counted by ss; CPU = wait4"
    echo " rusage of the tool's process tree over the whole run, Tsung's VM start/stop included; broker counts:"
    echo " \$SYS after - before the run, less the bench's own read and poke; headroom's subscriber (Tsung's <user>,"
    echo " a once user since 2026-11-29) runs its session once, as Tsung's does; Tsung pings every 10 s,"
    echo " headroom after 10 s without sending)"
} | tee "$OUT/$NAME.txt"

# --- JSON ----------------------------------------------------------------------------------------

for k in "${!R[@]}"; do printf '%s\t%s\n' "$k" "${R[$k]}"; done | sort >"$WORK/r.tsv"
pairs_json() { pairs "$@" | awk 'BEGIN { printf "[" } { printf "%s%.4f", (NR > 1 ? "," : ""), $1 / $2 } END { printf "]" }'; }
# floor_json A: {cpu_per_operation: {per_round, median, min, max}, rss_per_connected_user: ...} of
# A/floor, null when the run had not both.
floor_json() {
    if ! want "$1" || ! want floor; then echo null; return; fi
    jq -n -c --arg cpu "${FL[$1.cpu_us_per_op]}" --arg rss "${FL[$1.rss_kb_per_user]}" \
        --argjson cpu_rounds "$(pairs_json cpu_us_per_op "$1" floor)" --argjson rss_rounds "$(pairs_json rss_kb_per_user "$1" floor)" '
        def spread($line): ($line | capture("median (?<median>[0-9.]+) \\(min (?<min>[0-9.]+), max (?<max>[0-9.]+)\\)")
            | map_values(tonumber)) // null;
        {cpu_per_operation: ({per_round: $cpu_rounds} + (spread($cpu) // {})),
         rss_per_connected_user: ({per_round: $rss_rounds} + (spread($rss) // {}))}'
}
JSON=$(jq -R -s -c \
    --arg users "$USERS" --arg rate "$RATE" --arg hold "$HOLD" --arg arrive "$ARRIVE_S" --arg sub "$SUB_START" \
    --arg rounds "$ROUNDS" --arg hr_d "$HR_DURATION" --arg example "$EXAMPLE" \
    --arg cpu_line "$CPU_LINE" --arg rss_line "$RSS_LINE" --arg cpu_med "$CPU_MED" --arg rss_med "$RSS_MED" \
    --argjson cpu_rounds "$(pairs_json cpu_us_per_op)" --argjson rss_rounds "$(pairs_json rss_kb_per_user)" \
    --arg cpu_goal "$CPU_GOAL" --arg rss_goal "$RSS_GOAL" \
    --arg cpu_v "$CPU_VERDICT" --arg rss_v "$RSS_VERDICT" --arg date "$(date -Is)" --arg host "$(hostname -s)" \
    --argjson tsung_floor "$(floor_json tsung)" --argjson headroom_floor "$(floor_json headroom)" \
    --arg tools "$TOOLS" --arg port "$MQTT_PORT" --arg failed "$FAILED" --arg hr_not_ready "$HR_NOT_READY" '
    def num: if test("^-?[0-9]+(\\.[0-9]+)?$") then tonumber else . end;
    def spread($line): ($line | capture("median (?<median>[0-9.]+) \\(min (?<min>[0-9.]+), max (?<max>[0-9.]+)\\)")
        | map_values(tonumber)) // null;
    (split("\n") | map(select(length > 0) | split("\t"))
        | reduce .[] as $kv ({}; ($kv[0] | split(".")) as $p
            | .[$p[0]][$p[1]][$p[2:] | join(".")] = ($kv[1] | num))) as $runs
    | {bench: "mqtt-vs-tsung", date: $date, host: $host, port: ($port | tonumber),
       workload: {file: $example, publishers: ($users | tonumber), arrival_rate: ($rate | num), arrival: "poisson",
                  arrival_phase_s: ($arrive | tonumber), hold_s: ($hold | tonumber),
                  subscriber_start_s: ($sub | tonumber), headroom_duration_s: ($hr_d | tonumber)},
       rounds: ($rounds | tonumber), tools: ($tools | split(" ")),
       runs: ($runs | map_values(to_entries | sort_by(.key | tonumber) | map(.value + {round: (.key | tonumber)}))),
       ratio_tsung_over_headroom: {
           cpu_per_operation: ({per_round: $cpu_rounds} + (spread($cpu_line) // {})),
           rss_per_connected_user: ({per_round: $rss_rounds} + (spread($rss_line) // {}))},
       ratio_tsung_over_floor: $tsung_floor, ratio_headroom_over_floor: $headroom_floor,
       goals: {cpu: ($cpu_goal | num), rss: ($rss_goal | num)},
       verdict: {cpu: $cpu_v, rss: $rss_v},
       valid: ($failed == "0"), headroom_not_ready: (if $hr_not_ready == "" then null else $hr_not_ready end)}' <"$WORK/r.tsv")
echo "$JSON" >"$OUT/$NAME.json"
echo
echo "run dir: $OUT"
echo "$JSON"

((FAILED)) && exit 1
if [[ $STRICT == 1 && ($CPU_VERDICT == FAIL || $RSS_VERDICT == FAIL) ]]; then exit 4; fi
exit 0
