#!/usr/bin/env bash
# bench/mysql-vs-tsung.sh — generator CPU per MySQL operation and memory per connected user,
# headroom against Tsung 1.7, both running Tsung's own examples/mysql.xml against the same
# MariaDB, one tool after the other, ROUNDS times (the method of bench/mqtt-vs-tsung.sh, shared
# with bench/ldap-vs-tsung.sh in bench/tsung-compare.sh).
#
# Usage: bench/mysql-vs-tsung.sh [-h|--help]      (everything else is environment, below)
#
# The workload is Tsung's stock /usr/share/doc/tsung/examples/mysql.xml (Debian's tsung 1.7),
# rendered by this script into mysql-vs-tsung.xml (its diff against the stock file:
# mysql-vs-tsung.xml.diff), which BOTH tools run:
#   tsung -n -i ID -f mysql-vs-tsung.xml -l LOGDIR start
#   headroom run mysql-vs-tsung.xml --target 127.0.0.1:PORT -d HR_DURATION -t 1 ...
# The session as shipped, per user: connect, log in to database test as test/test, SHOW
# TABLES, SELECT * FROM gens, SELECT * FROM te (scripts/mariadb.sh makes both tables, 10 rows
# each), then (added) think HOLD s, then close. The edits:
#   * the load: Poisson arrivals at RATE/s, at most USERS, over ARRIVE_S (stock: one user every
#     3 s for a minute), and the <thinktime value="HOLD"> before the close, so that all USERS are
#     connected at once for ~HOLD - USERS/RATE s;
#   * <server> the bench's MariaDB; <clients> the controller VM with maxusers; <monitoring>
#     (Tsung's own sampling of localhost, which headroom does not do) removed; loglevel
#     TSUNG_LOGLEVEL and dumptraffic removed (stock: "debug" and "true": Tsung would write every
#     packet to its log, CPU that is no load); <load duration> a safety stop.
#
# What it measures (bench/tsung-compare.sh): per run, generator CPU-seconds (wait4 rusage of
# the tool's process tree), peak RSS (summed VmRSS, sampled every second) and peak connections
# (ss); operations = logins + statements answered, as each tool counts them (Tsung: tsung.log's
# `request` count less its connects and its closes — its requests are connect, authenticate,
# 3 x sql and close, each counted when answered; headroom: summary.json's mysql:login count +
# scenario.protocol.mysql.queries), beside the server's own count (SHOW GLOBAL STATUS over the
# run, less what one read costs: Connections - Aborted_connects + Com_show_tables + Com_select);
# the ratios Tsung/headroom of CPU per operation and of RSS per connected user, per round, and
# their median (min, max), PASS/FAIL against CPU_GOAL (5) and RSS_GOAL (4).
# Shown beside, not compared: Questions (MariaDB counts Tsung's COM_QUIT there), Aborted_clients
# (a connection closed without COM_QUIT), Aborted_connects (headroom's preflight: one TCP
# connect and close before the load, as wrk does), Max_used_connections.
#
# The server: scripts/mariadb.sh with a directory and port of its own (MYSQL_DIR, MYSQL_PORT;
# not the tests' shared /tmp/headroom-mysql on 25306), max_connections USERS + 100, restarted
# before every run (its counters start at 0; the data directory is kept); pinned to CPU 0
# (PIN=1, 2+ cores), the generator to CPU 1; its descriptor limit checked (USERS + 200).
# MariaDB runs a thread per connection (thread_handling one-thread-per-connection).
#
# The floor (TOOLS holds `floor` by default): bench/floor/src/bin/mysql.rs runs the same session
# (connect, the greeting, the login as test/test to database test with mysql_native_password,
# SHOW TABLES, SELECT * FROM gens, SELECT * FROM te, the HOLD s think, COM_QUIT, close; Poisson
# arrivals at RATE/s until USERS arrived) with nothing else: the statements encoded once, the
# login once per user, each reply read to the end of its result set (packet headers and first
# bytes only; no CLIENT_DEPRECATE_EOF, so a result set ends at its second EOF), no clock read per
# operation, no statistics. Its operations (logins + statements answered) are checked against
# the server's like the tools'. Its CPU per operation is what any client doing these system calls
# at least spends here, so Tsung/floor is the most any generator could reach against Tsung on
# this machine: when it is below CPU_GOAL, the goal is out of reach for every client.
#
# Environment (defaults):
#   USERS=4000  RATE=200  ARRIVE_S=ceil(USERS/RATE)+10  HOLD=ARRIVE_S+10  ROUNDS=5
#   TOOLS="tsung headroom floor"  (odd rounds in this order, even rounds reversed; TOOLS=tsung alone)
#   HEADROOM=$CARGO_TARGET_DIR/release/headroom or target/release/headroom
#   HR_THREADS=1 when pinned, else the number of cores    TSUNG_LOGLEVEL=error
#   EXAMPLE=/usr/share/doc/tsung/examples/mysql.xml
#   PIN=1  MYSQL_PORT=25316  MYSQL_DIR=/tmp/headroom-mysql-bench  KEEP_SERVER=0 (1: leave it
#   running and its data directory at exit)
#   OUT_DIR=bench/runs/<YYYY-MM-DD>-<host>   (mysql-vs-tsung.{txt,json,commands,versions,xml,
#                                            xml.diff} and mysql-vs-tsung.raw/)
#   CPU_GOAL=5  RSS_GOAL=4  STRICT=0 (1: exit 4 when a median ratio misses its goal)
#   TSUNG_ERL_FLAGS=  extra flags for Tsung's Erlang VM (ERL_FLAGS)
#
# Exit status: 0 done (the ratios may still FAIL: see STRICT); 1 a run failed, fewer than USERS
# users were connected at once, a tool counted errors, or a tool's operations differ from the
# server's; 2 bad settings or a missing tool; 3 headroom cannot run the file.

# shellcheck disable=SC2317 # hooks called from tsung-compare.sh
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
# shellcheck source-path=SCRIPTDIR disable=SC1091
source "$(dirname "$0")/tsung-compare.sh"
SAMPLER=$BENCH_DIR/xmpp/sample-tree.sh
MARIADB=$REPO_ROOT/scripts/mariadb.sh

NAME=mysql-vs-tsung
EXAMPLE=${EXAMPLE:-/usr/share/doc/tsung/examples/mysql.xml}
SESSION_EXTRA_S=0
FLOOR=mysql       # bench/floor/src/bin/mysql.rs: the same session at the least cost
tc_settings
PORT=${MYSQL_PORT:-25316}
MYSQL_DIR=${MYSQL_DIR:-/tmp/headroom-mysql-bench}
KEEP_SERVER=${KEEP_SERVER:-0}
[[ $MYSQL_DIR == /tmp/headroom-mysql || $PORT == 25306 ]] &&
    tc_usage_die "the bench restarts its server: give it a directory and port of its own, not the shared instance's (/tmp/headroom-mysql, 25306)"
export HEADROOM_MYSQL_DIR=$MYSQL_DIR HEADROOM_MYSQL_PORT=$PORT HEADROOM_MYSQL_MAX_CONNECTIONS=$((USERS + 100))
SERVER_CMD="HEADROOM_MYSQL_DIR=$MYSQL_DIR HEADROOM_MYSQL_PORT=$PORT HEADROOM_MYSQL_MAX_CONNECTIONS=$((USERS + 100)) scripts/mariadb.sh stop; ... start"

# --- the server --------------------------------------------------------------------------------

SERVER_STARTED=0
server_cleanup() {
    ((SERVER_STARTED)) || return 0
    if [[ $KEEP_SERVER == 1 ]]; then
        log "leaving MariaDB running on 127.0.0.1:$PORT (KEEP_SERVER=1; stop: $SERVER_CMD)"
        return 0
    fi
    "$MARIADB" stop >/dev/null 2>&1 || true
    rm -rf "$MYSQL_DIR"
}
on_exit server_cleanup

server_fresh() {
    "$MARIADB" stop >/dev/null 2>&1 || true
    SERVER_STARTED=1
    rm -f "$MYSQL_DIR/error.log"
    "$MARIADB" start >/dev/null 2>"$WORK/server-start.err" || { cat "$WORK/server-start.err" >&2; die "MariaDB did not start"; }
    SERVER_PID=$(cat "$MYSQL_DIR/mysqld.pid") || die "MariaDB runs but its pid is unknown"
    local mc
    mc=$("$MARIADB" sql -N -e "SELECT @@max_connections")
    ((mc >= USERS + 1)) || die "MariaDB's max_connections is $mc; $USERS users need more"
    tc_server_check "$SERVER_PID"
}

SERVER_KEYS=(Connections Aborted_connects Aborted_clients Questions Com_select Com_show_tables
    Max_used_connections Threads_connected)
server_read() {
    local list
    list=$(printf "'%s'," "${SERVER_KEYS[@]}")
    timeout 20 "$MARIADB" sql -N -e "SHOW GLOBAL STATUS WHERE Variable_name IN (${list%,})" \
        >"$1.raw" 2>/dev/null || true
    awk -v keys="${SERVER_KEYS[*]}" '{ v[$1] = $2 }
        END { n = split(keys, a, " "); for (i = 1; i <= n; i++) print a[i], ((a[i] in v) ? v[a[i]] : "-") }' \
        "$1.raw" >"$1"
}
server_version() { echo "MariaDB $(dpkg-query -W -f '${Version}' mariadb-server 2>/dev/null || echo '?')"; }

# What an operation is: a login or a statement answered.
server_ops() {
    local run=$1 tag=${1/./-}
    R[$run.server.logins]=$(awk -v c="${R[$run.server.Connections]:--}" -v a="${R[$run.server.Aborted_connects]:--}" \
        'BEGIN { if (c == "-" || a == "-") print "-"; else print c - a }')
    R[$run.server_ops]=$(awk -v l="${R[$run.server.logins]}" -v s="${R[$run.server.Com_select]:--}" \
        -v t="${R[$run.server.Com_show_tables]:--}" \
        'BEGIN { if (l == "-" || s == "-" || t == "-") print "-"; else print l + s + t }')
    # A maximum, not a count: its value after the run (the bench's own read connection is one).
    R[$run.server_max_used]=$(awk '$1 == "Max_used_connections" { print $2 }' "$WORK/$tag.s2")
}
tsung_ops() {
    local run=$1
    R[$run.ops]=$(awk -v r="${R[$run.tsung.request]:--}" -v c="${R[$run.tsung.connect]:--}" \
        -v f="${R[$run.tsung.finish_users_count]:--}" \
        'BEGIN { if (r == "-" || c == "-" || f == "-") print "-"; else print r - c - f }')
    R[$run.logins]="-"
    R[$run.statements]="-"
}
headroom_ops() {
    local run=$1 s=$2
    R[$run.logins]=$(tc_j "$s" '.scenario.by_request["mysql:login"].count')
    R[$run.statements]=$(tc_j "$s" '.scenario.protocol.mysql.queries')
    R[$run.rows]=$(tc_j "$s" '.scenario.protocol.mysql.rows')
    R[$run.sql_errors]=$(tc_j "$s" '.scenario.protocol.mysql.sql_errors')
    R[$run.ops]=$(awk -v l="${R[$run.logins]}" -v q="${R[$run.statements]}" \
        'BEGIN { if (l == "-" || q == "-") print "-"; else print l + q }')
}
preflight_ok() { (($(tc_j "$1/summary.json" '.scenario.protocol.mysql.queries // 0') > 0)); }

PROTO_ROWS="tsung: requests answered|tsung.request
headroom: logins|logins
headroom: statements|statements
headroom: rows|rows
server: Connections|server.Connections
server: Aborted_connects|server.Aborted_connects
server: logins (Connections - Aborted)|server.logins
server: Com_show_tables|server.Com_show_tables
server: Com_select|server.Com_select
server: Questions|server.Questions
server: Aborted_clients|server.Aborted_clients
server: Max_used_connections (after)|server_max_used
  bench's read: Connections / Questions|server_read.Connections"
OPS_NOTE="(operations: logins + statements answered: Tsung's request count less its connects and closes,
 headroom's mysql:login count + mysql.queries, the floor's own count; the server's: Connections -
 Aborted_connects + Com_show_tables + Com_select)"
EDITS_NOTE="sessions as shipped + a ${HOLD}s think before the close; load scaled, dumptraffic and monitoring off"

# --- the file both tools run ---------------------------------------------------------------------

# render OUT USERS RATE ARRIVE_S HOLD LIMIT_S — every edit must apply exactly once, or the
# stock file is not the one this script knows.
render() {
    tc_example_text | awk -v users="$2" -v rate="$3" -v arrive="$4" -v hold="$5" -v limit="$6" \
        -v port="$PORT" -v maxusers="$TSUNG_MAXUSERS" -v loglevel="$TSUNG_LOGLEVEL" '
        function once(what) { n[what]++ }
        function lead() { match($0, /^[ \t]*/); return substr($0, 1, RLENGTH) }
        /<tsung / && sub(/loglevel="[^"]*"/, "loglevel=\"" loglevel "\"") && sub(/ dumptraffic="true"/, "") { once("loglevel") }
        /<client / { $0 = lead() "<client host=\"localhost\" use_controller_vm=\"true\" maxusers=\"" maxusers "\"></client>"; once("client") }
        /<server / && sub(/host="[^"]*"/, "host=\"127.0.0.1\"") && sub(/port="[0-9]+"/, "port=\"" port "\"") { once("server") }
        /<monitoring>/ { skip = 1; once("monitoring") }
        skip { if (/<\/monitoring>/) skip = 0; next }
        /<load>/ && sub(/<load>/, "<load duration=\"" limit "\" unit=\"second\">") { once("load") }
        /<arrivalphase / && sub(/duration="[^"]*" unit="[^"]*"/, "duration=\"" arrive "\" unit=\"second\"") { once("phase") }
        /<users / && sub(/interarrival="[^"]*"/, "maxnumber=\"" users "\" arrivalrate=\"" rate "\"") { once("users") }
        # The hold: before the <request> that holds the close.
        held != "" {
            if ($0 ~ /<mysql type="close"/) {
                match(held, /^[ \t]*/)
                print substr(held, 1, RLENGTH) "<thinktime value=\"" hold "\" random=\"false\"></thinktime>"
                once("hold")
            }
            print held; held = ""
        }
        /^[ \t]*<request>[ \t]*$/ { held = $0; next }
        { print }
        END {
            split("loglevel client server monitoring load phase users hold", w, " ")
            for (i in w) if (n[w[i]] != 1) { printf "edit %s applied %d times\n", w[i], n[w[i]] > "/dev/stderr"; bad = 1 }
            exit bad
        }' >"$1" || die "$EXAMPLE is not the stock mysql.xml this script knows how to edit"
}

tc_main
