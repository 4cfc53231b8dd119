#!/usr/bin/env bash
# bench/vs-tsung.sh [DURATION=10s] [CONNS=50] — generator CPU efficiency, headroom against Tsung.
#
# What it measures: requests completed per CPU-second of the generator (user + sys), for the same
# closed keep-alive load as vs-wrk.sh — CONNS users, each sending GET / back to back on one
# persistent connection with no think time — against nginx (1 worker, `return 200`) on 127.0.0.1.
# Requests are nginx's access-log delta over each run; CPU is wait4's rusage via /usr/bin/time.
# The product goal is headroom/Tsung >= 5.
#
# Tsung, as measured here (Debian tsung 1.7.0, Erlang/OTP 25):
#   * The client runs inside the controller VM (`use_controller_vm="true"`). `tsung start` then
#     stays in the foreground and the one beam.smp is a descendant of /usr/bin/time, so its
#     rusage covers all of Tsung's work (load generation *and* the controller's statistics).
#     A separate client VM would not be measurable this way: with host="localhost" Tsung tries
#     ssh and aborts after 30 s ("Can't start newbeam on host localhost (reason: timeout)"); with
#     host=<hostname> the client beam is started detached (reparented to init), /usr/bin/time
#     sees only the idle controller, and the result is a bogus ~150k req/CPU-s.
#   * Tsung's figure includes starting and stopping an Erlang VM (~0.3 CPU-s, measured by a
#     calibration run of 1 user and 1 request, reported separately below). The test lasts
#     DURATION via <load duration=...>; Tsung also waits 1 s (warm time) before starting users.
#   * Pinned to one CPU, the VM schedules on 1 scheduler: Tsung is then CPU-bound and nginx idles.
#   * `-n` turns off the web GUI (which would listen on :8091); `-i` gives a unique node name and
#     cookie so a concurrent Tsung does not clash. Tsung needs epmd (Erlang distribution), which
#     the first node starts as a daemon; if this script started it (bound to 127.0.0.1), it is
#     stopped at exit unless other nodes have registered with it.
#
# Output: a table on stdout; bench/runs/<YYYY-MM-DD>-<host>/ gets vs-tsung.csv, vs-tsung.txt,
# vs-tsung.commands, vs-tsung.versions, vs-tsung.xml and raw outputs in vs-tsung.raw/.
#
# Environment: HEADROOM (binary), ROUNDS (2: tsung and headroom alternate), PIN (1), PORT.

# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"

DURATION=${1:-10s}
CONNS=${2:-50}
ROUNDS=${ROUNDS:-2}
DUR_S=$(dur_secs "$DURATION")
PORT=${PORT:-$(free_port)}
URL="http://127.0.0.1:$PORT/"

command -v tsung >/dev/null || die "tsung not installed (apt-get install -y tsung)"
export ERL_EPMD_ADDRESS=127.0.0.1 # only matters if this run is the one that starts epmd

# The first Erlang node starts epmd as a daemon that outlives Tsung. If this script is what
# started it, stop it at exit — unless some other Erlang node has registered with it meanwhile.
if ! pgrep -x epmd >/dev/null; then
    on_exit 'stop_our_epmd'
fi
stop_our_epmd() {
    local pid
    pid=$(pgrep -x epmd | head -n 1) || return 0
    if epmd -names 2>/dev/null | grep -q '^name '; then
        log "epmd ($pid) has other nodes registered; leaving it running"
    else
        kill "$pid"
    fi
}

bench_init vs-tsung "$CSV_HEADER"

nginx_start "$WORK/nginx" "$PORT" 1

# tsung_xml USERS LOOP_COUNT DURATION_S — CONNS users arrive within about half a second (rate
# 2*USERS/s, capped at USERS), each loops over GET / on one keep-alive connection; the load
# section ends the test after DURATION_S whether or not the loop is done.
tsung_xml() {
    local users=$1 loops=$2 dur=$3
    cat <<EOF
<?xml version="1.0"?>
<!DOCTYPE tsung SYSTEM "/usr/share/tsung/tsung-1.0.dtd">
<tsung loglevel="error" dumptraffic="false">
  <clients>
    <client host="localhost" use_controller_vm="true" maxusers="30000"/>
  </clients>
  <servers>
    <server host="127.0.0.1" port="$PORT" type="tcp"/>
  </servers>
  <load duration="$dur" unit="second">
    <arrivalphase phase="1" duration="1" unit="second">
      <users maxnumber="$users" arrivalrate="$((users * 2))" unit="second"/>
    </arrivalphase>
  </load>
  <sessions>
    <session name="keepalive-loop" probability="100" type="ts_http">
      <for from="1" to="$loops" incr="1" var="i">
        <request><http url="/" method="GET" version="1.1"/></request>
      </for>
    </session>
  </sessions>
</tsung>
EOF
}

tsung_xml "$CONNS" 1000000000 "$DUR_S" >"$WORK/load.xml"
tsung_xml 1 1 1 >"$WORK/calibrate.xml"
cp "$WORK/load.xml" "$OUT/vs-tsung.xml"

TSUNG_ID=hb$$
tsung_cmd() { echo tsung -n -i "$TSUNG_ID" -f "$1" -l "$2" start; }
HR_CMD=("$HEADROOM" run "$URL" -t 1 -c "$CONNS" -d "$DURATION" --json)
{
    echo "# nginx (pinned: ${SERVER_PIN[*]:-no}) with $WORK/nginx/nginx.conf:"
    sed 's/^/#   /' "$WORK/nginx/nginx.conf"
    echo "# load.xml is vs-tsung.xml; $WORK/headroom is a copy of ${HEADROOM_ORIG:-$HEADROOM}"
    echo "# Tsung config: vs-tsung.xml"
    echo "${GEN_PIN[*]} $(tsung_cmd "$WORK/load.xml" "$WORK/tsung-log-N")"
    echo "${GEN_PIN[*]} ${HR_CMD[*]}"
} >>"$OUT/vs-tsung.commands"

have_headroom || log "headroom binary not found at $HEADROOM; running Tsung only"

# Tsung's own count of 200 responses (its stats lag; the nginx count is the one that matters).
tsung_200s() { awk '$1 == "stats:" && $2 == "200" { n = $4 } END { print (n == "" ? "-" : n) }' \
    "$1"/*/tsung.log 2>/dev/null || echo -; }

for round in $(seq 1 "$ROUNDS"); do
    log "round $round/$ROUNDS: tsung $CONNS users, ${DUR_S}s"
    # shellcheck disable=SC2046
    measure "$WORK/nginx" "$RAW/tsung-$round.txt" $(tsung_cmd "$WORK/load.xml" "$WORK/tsung-log-$round")
    cp "$WORK/tsung-log-$round"/*/tsung.log "$RAW/tsung-$round.tsung.log" 2>/dev/null || true
    csv_row tsung "$round" "$CONNS" "$DUR_S" "$(tsung_200s "$WORK/tsung-log-$round")" - - >>"$CSV"
    if ((M_STATUS != 0)) || ((M_REQUESTS == 0)); then
        log "tsung: status $M_STATUS, $M_REQUESTS requests; output:"
        tail -n 20 "$RAW/tsung-$round.txt" "$RAW/tsung-$round.txt.err" >&2
    fi

    have_headroom && headroom_round "$round"
done

# Tsung's fixed cost: boot the VM, run 1 user doing 1 request for a 1 s test, stop.
log "calibration: tsung 1 user, 1 request"
# shellcheck disable=SC2046
measure "$WORK/nginx" "$RAW/tsung-calibrate.txt" $(tsung_cmd "$WORK/calibrate.xml" "$WORK/tsung-log-cal")
CAL_CPU=$(awk -v u="$CPU_USER" -v s="$CPU_SYS" 'BEGIN { printf "%.2f", u + s }')

{
    echo "vs-tsung: closed keep-alive GET, $CONNS connections, $DURATION per run, $ROUNDS rounds," \
        "nginx 1 worker; $(date -Is) on $(hostname -s)"
    summarize "$CSV" tsung
    echo "tsung fixed cost (VM start/stop, 1 user, 1 request): $CAL_CPU CPU-s, wall $CPU_WALL s;" \
        "included above. Without it, tsung's median req/CPU-s would be" \
        "$(awk -F, -v c="$CAL_CPU" '$1 == "tsung" && $5 == 0 && $9 > c { print $6 / ($9 - c) }' "$CSV" |
            median_max | cut -d' ' -f1)"
} | tee "$OUT/vs-tsung.txt"
echo
echo "run dir: $OUT"
