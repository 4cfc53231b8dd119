#!/usr/bin/env bash
# bench/ldap-vs-tsung.sh — generator CPU per LDAP operation and memory per connected user,
# headroom against Tsung 1.7, both running Tsung's own examples/ldap.xml against the same slapd,
# one tool after the other, ROUNDS times (the method of bench/mqtt-vs-tsung.sh, shared with
# bench/mysql-vs-tsung.sh in bench/tsung-compare.sh).
#
# Usage: bench/ldap-vs-tsung.sh [-h|--help]      (everything else is environment, below)
#
# The workload is Tsung's stock /usr/share/doc/tsung/examples/ldap.xml (Debian's tsung 1.7),
# rendered by this script into ldap-vs-tsung.xml (its diff against the stock file:
# ldap-vs-tsung.xml.diff), which BOTH tools run:
#   tsung -n -i ID -f ldap-vs-tsung.xml -l LOGDIR start
#   headroom run ldap-vs-tsung.xml --target 127.0.0.1:PORT -d HR_DURATION -t 1 ...
# The session, per user: bind, search, search, think 1 s, search, add an entry, modify it,
# think HOLD s (added), end (both tools close the connection). The edits, each needed for the
# file to run at all or to do what it says against the bench's directory:
#   * the stock file names a directory that is not there (dc=pablo-desktop, a bind as
#     uid=nniclausse/XXX that slapd refuses, a modify of cn=u119843): the bind is the
#     directory's root DN (cn=admin,dc=headroom,dc=test / headroom: the add and the modify need
#     write access), the searches' base is ou=people,dc=headroom,dc=test (their filters as
#     shipped: they match no entry, a search that succeeds with 0 entries);
#   * the add's dn is %%_new_user_dn%% and its cn %%_new_user_cn%%, defined nowhere in the file
#     (headroom refuses it; Tsung would send them as they are): a <setdynvars
#     sourcetype="random_number" start="1" end="2000000000"> at the session's start defines
#     new_user_cn per user, and the dn becomes cn=%%_new_user_cn%%,ou=people,dc=headroom,
#     dc=test (no setdynvars source both tools share can build a DN, so new_user_dn is not a
#     variable: it is written out in the add). A duplicate draw (about 1 run in 250 at 4,000
#     users) shows as one entryAlreadyExists;
#   * the second search's filter calls %%cn:f%%, an Erlang function cn:f/1 that does not
#     exist: Tsung's user process crashes on it ('module could not be loaded', error_unknown;
#     headroom puts a random string in its place): it becomes %%_new_user_cn%%;
#   * the modify (subst="false") names cn=u119843: it modifies the entry the user just added
#     (its dn as the add's, subst="true"); its two empty <modification type="add"/> and
#     type="delete"/> (no attribute: headroom drops them, with a warning) are removed, so both
#     tools send the same replace of sn and mail;
#   * the load: Poisson arrivals at RATE/s, at most USERS, over ARRIVE_S (stock: one user every
#     2 s for 10 minutes), and a <thinktime value="HOLD"> at the session's end, so that all
#     USERS are connected at once for ~HOLD - USERS/RATE s; <clients> the controller VM with
#     maxusers, <server> the bench's slapd, <monitoring> (SNMP to "myserver") removed,
#     loglevel TSUNG_LOGLEVEL, <load duration> a safety stop.
#
# What it measures (bench/tsung-compare.sh): per run, generator CPU-seconds (wait4 rusage of
# the tool's process tree), peak RSS (summed VmRSS, sampled every second) and peak connections
# (ss); operations = LDAP requests answered, as each tool counts them (Tsung: tsung.log's
# `request` count; headroom: summary.json scenario.protocol.ldap.requests), beside slapd's own
# count (cn=Monitor: monitorOpCompleted of Bind + Search + Add + Modify over the run, less what
# one read of them costs: one bind and one search); the ratios Tsung/headroom of CPU per
# operation and of RSS per connected user, per round, and their median (min, max), PASS/FAIL
# against CPU_GOAL (5) and RSS_GOAL (4).
#
# The server: scripts/slapd.sh with a directory and ports of its own (LDAP_DIR, LDAP_PORT,
# LDAPS_PORT; not the tests' shared /tmp/headroom-ldap on 25389), removed and loaded afresh
# (1,000 users) before every run, so its counters start at 0 and the added entries go; pinned
# to CPU 0 (PIN=1, 2+ cores), the generator to CPU 1; its descriptor limit checked (USERS + 200).
#
# The floor (TOOLS holds `floor` by default): bench/floor/src/bin/ldap.rs runs the same session
# (bind, the three searches with the 1 s think between, the add and the modify of a fresh entry,
# the HOLD s think, close; Poisson arrivals at RATE/s until USERS arrived) with nothing else: each
# request encoded once per user, each reply read to the end of its BER message, no clock read
# per operation, no statistics. Its CPU per operation is what any client doing these system
# calls at least spends here, so Tsung/floor is the most any generator could reach against Tsung
# on this machine: when it is below CPU_GOAL, the goal is out of reach for every client.
#
# Environment (defaults):
#   USERS=4000  RATE=200  ARRIVE_S=ceil(USERS/RATE)+10  HOLD=ARRIVE_S+10  ROUNDS=5
#   TOOLS="tsung headroom floor"  (odd rounds in this order, even rounds reversed; TOOLS=tsung alone)
#   HEADROOM=$CARGO_TARGET_DIR/release/headroom or target/release/headroom
#   HR_THREADS=1 when pinned, else the number of cores    TSUNG_LOGLEVEL=error
#   EXAMPLE=/usr/share/doc/tsung/examples/ldap.xml
#   PIN=1  LDAP_PORT=25399  LDAPS_PORT=25646  LDAP_DIR=/tmp/headroom-ldap-bench
#   OUT_DIR=bench/runs/<YYYY-MM-DD>-<host>   (ldap-vs-tsung.{txt,json,commands,versions,xml,
#                                            xml.diff} and ldap-vs-tsung.raw/)
#   CPU_GOAL=5  RSS_GOAL=4  STRICT=0 (1: exit 4 when a median ratio misses its goal)
#   TSUNG_ERL_FLAGS=  extra flags for Tsung's Erlang VM (ERL_FLAGS)
#
# Exit status: 0 done (the ratios may still FAIL: see STRICT); 1 a run failed, fewer than USERS
# users were connected at once, a tool counted errors, or a tool's operations differ from
# slapd's; 2 bad settings or a missing tool; 3 headroom cannot run the file.

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
SLAPD=$REPO_ROOT/scripts/slapd.sh

NAME=ldap-vs-tsung
EXAMPLE=${EXAMPLE:-/usr/share/doc/tsung/examples/ldap.xml}
SESSION_EXTRA_S=1 # the session's own think time
FLOOR=ldap        # bench/floor/src/bin/ldap.rs: the same session at the least cost
tc_settings
PORT=${LDAP_PORT:-25399}
LDAPS_PORT=${LDAPS_PORT:-25646}
LDAP_DIR=${LDAP_DIR:-/tmp/headroom-ldap-bench}
[[ $LDAP_DIR == /tmp/headroom-ldap || $PORT == 25389 || $LDAPS_PORT == 25636 ]] &&
    tc_usage_die "the bench removes and reloads its directory: give it a directory and ports of its own, not the shared instance's (/tmp/headroom-ldap, 25389/25636)"
command -v ldapsearch >/dev/null || tc_usage_die "ldapsearch is missing (apt-get install -y ldap-utils slapd)"
export HEADROOM_LDAP_DIR=$LDAP_DIR HEADROOM_LDAP_PORT=$PORT HEADROOM_LDAPS_PORT=$LDAPS_PORT
SERVER_CMD="HEADROOM_LDAP_DIR=$LDAP_DIR HEADROOM_LDAP_PORT=$PORT HEADROOM_LDAPS_PORT=$LDAPS_PORT scripts/slapd.sh stop; rm -rf DIR; ... start"
SUFFIX="dc=headroom,dc=test"
ADMIN="cn=admin,$SUFFIX"

# --- the server --------------------------------------------------------------------------------

SERVER_STARTED=0
server_cleanup() {
    ((SERVER_STARTED)) || return 0
    "$SLAPD" stop >/dev/null 2>&1 || true
    rm -rf "$LDAP_DIR"
}
on_exit server_cleanup

server_fresh() {
    "$SLAPD" stop >/dev/null 2>&1 || true
    rm -rf "$LDAP_DIR"
    SERVER_STARTED=1
    "$SLAPD" start >/dev/null 2>"$WORK/server-start.err" || { cat "$WORK/server-start.err" >&2; die "slapd did not start"; }
    SERVER_PID=$(cat "$LDAP_DIR/slapd.pid") || die "slapd runs but its pid is unknown"
    tc_server_check "$SERVER_PID"
}

# slapd's counters (cn=Monitor, root DN only): operations completed, connections.
SERVER_KEYS=(Bind Search Add Modify Delete Unbind Extended connections_total)
server_read() {
    timeout 20 ldapsearch -x -LLL -o ldif-wrap=no -H "ldap://127.0.0.1:$PORT" -D "$ADMIN" -w headroom \
        -b cn=Monitor '(|(objectClass=monitorOperation)(cn=Total))' monitorOpCompleted monitorCounter \
        >"$1.ldif" 2>/dev/null || true
    awk -v keys="${SERVER_KEYS[*]}" '
        /^dn: cn=Total,cn=Connections,/ { k = "connections_total"; next }
        /^dn: cn=[A-Za-z]+,cn=Operations,/ { k = $2; sub(/^cn=/, "", k); sub(/,.*/, "", k); next }
        /^(monitorOpCompleted|monitorCounter): / && k != "" { v[k] = $2; k = "" }
        END { n = split(keys, a, " "); for (i = 1; i <= n; i++) print a[i], ((a[i] in v) ? v[a[i]] : "-") }' \
        "$1.ldif" >"$1"
}
server_version() { echo "slapd $(dpkg-query -W -f '${Version}' slapd 2>/dev/null || echo '?')"; }

# What an operation is: an LDAP request answered (bind, search, add, modify).
server_ops() {
    local run=$1
    R[$run.server_ops]=$(awk -v b="${R[$run.server.Bind]:--}" -v s="${R[$run.server.Search]:--}" \
        -v a="${R[$run.server.Add]:--}" -v m="${R[$run.server.Modify]:--}" \
        'BEGIN { if (b == "-" || s == "-" || a == "-" || m == "-") print "-"; else print b + s + a + m }')
}
tsung_ops() {
    local run=$1
    R[$run.ops]=${R[$run.tsung.request]:--}
    R[$run.binds_ok]=${R[$run.tsung.ldap_bind_ok]:--}
}
headroom_ops() {
    local run=$1 s=$2 l='(.scenario.protocol.ldap // {})'
    R[$run.ops]=$(tc_j "$s" "$l.requests")
    R[$run.binds_ok]=$(tc_j "$s" '.scenario.by_request["ldap:bind"] | .count - .errors')
    R[$run.ldap_success]=$(tc_j "$s" "$l.success")
    R[$run.ldap_entries]=$(tc_j "$s" "$l.entries")
    R[$run.ldap_not_success]=$(tc_j "$s" "$l | [.no_such_object, .invalid_credentials, .entry_already_exists, .insufficient_access_rights, .size_limit_exceeded, .busy, .unwilling_to_perform, .other_results] | add")
}
preflight_ok() { (($(tc_j "$1/summary.json" '.scenario.protocol.ldap.success // 0') > 0)); }

PROTO_ROWS="binds accepted (tool)|binds_ok
headroom: results success|ldap_success
headroom: results not success|ldap_not_success
slapd: Bind|server.Bind
slapd: Search|server.Search
slapd: Add|server.Add
slapd: Modify|server.Modify
slapd: Unbind|server.Unbind
slapd: connections|server.connections_total
  bench's read: Bind / Search|server_read.Bind"
OPS_NOTE="(operations: LDAP requests answered: Tsung's request count, headroom's ldap.requests; slapd's:
 monitorOpCompleted of Bind + Search + Add + Modify)"
EDITS_NOTE="DNs pointed at the bench's directory, new_user_cn defined per user, %%cn:f%% replaced, empty modifications removed, a ${HOLD}s think at the end"

# --- the file both tools run ---------------------------------------------------------------------

# render OUT USERS RATE ARRIVE_S HOLD LIMIT_S — every edit must apply exactly as often as the
# stock file calls for, or the stock file is not the one this script knows.
render() {
    local base="ou=people,$SUFFIX"
    tc_example_text | awk -v users="$2" -v rate="$3" -v arrive="$4" -v hold="$5" -v limit="$6" \
        -v port="$PORT" -v maxusers="$TSUNG_MAXUSERS" -v loglevel="$TSUNG_LOGLEVEL" \
        -v base="$base" -v admin="$ADMIN" '
        function once(what) { n[what]++ }
        function lead() { match($0, /^[ \t]*/); return substr($0, 1, RLENGTH) }
        /<tsung / && sub(/loglevel="[^"]*"/, "loglevel=\"" loglevel "\"") { once("loglevel") }
        /<client / { $0 = lead() "<client host=\"localhost\" use_controller_vm=\"true\" maxusers=\"" maxusers "\"></client>"; once("client") }
        /<server / && sub(/host="[^"]*"/, "host=\"127.0.0.1\"") && sub(/port="[0-9]+"/, "port=\"" port "\"") { once("server") }
        /<monitoring>/ { skip = 1; once("monitoring") }
        skip { if (/<\/monitoring>/) skip = 0; next }
        /<load>/ && sub(/<load>/, "<load duration=\"" limit "\" unit=\"second\">") { once("load") }
        /<arrivalphase / && sub(/duration="[^"]*" unit="[^"]*"/, "duration=\"" arrive "\" unit=\"second\"") { once("phase") }
        /<users / && sub(/interarrival="[^"]*"/, "maxnumber=\"" users "\" arrivalrate=\"" rate "\"") { once("users") }
        /<session / {
            print
            print lead() "  <setdynvars sourcetype=\"random_number\" start=\"1\" end=\"2000000000\"><var name=\"new_user_cn\"/></setdynvars>"
            once("setdynvars"); next
        }
        /<ldap type="bind"/ && sub(/user="uid=nniclausse" password="XXX"/, "user=\"" admin "\" password=\"headroom\"") { once("bind") }
        /<ldap type="search"/ && sub(/base="dc=pablo-desktop"/, "base=\"" base "\"") { once("base") }
        /%%cn:f%%/ && sub(/%%cn:f%%/, "%%_new_user_cn%%") { once("cn:f") }
        /<ldap type="add"/ && sub(/dn="%%_new_user_dn%%"/, "dn=\"cn=%%_new_user_cn%%," base "\"") { once("add") }
        # The modify: its <request subst="false"> is held until the <ldap type="modify"> line.
        held != "" {
            if ($0 ~ /<ldap type="modify"/ && sub(/dn="[^"]*"/, "dn=\"cn=%%_new_user_cn%%," base "\"")) {
                sub(/subst="false"/, "subst=\"true\"", held); once("modify")
            }
            print held; held = ""
        }
        /<request subst="false">/ { held = $0; next }
        /<modification type="(add|delete)"\/>/ { once("empty"); next }
        /<\/session>/ { print lead() "  <thinktime value=\"" hold "\" random=\"false\"></thinktime>"; once("hold") }
        { print }
        END {
            split("loglevel client server monitoring load phase users setdynvars bind base cn:f add modify empty hold", w, " ")
            want["base"] = 3; want["empty"] = 2
            for (i in w) {
                k = w[i]; e = (k in want) ? want[k] : 1
                if (n[k] != e) { printf "edit %s applied %d times, not %d\n", k, n[k], e > "/dev/stderr"; bad = 1 }
            }
            exit bad
        }' >"$1" || die "$EXAMPLE is not the stock ldap.xml this script knows how to edit"
}

tc_main
