#!/usr/bin/env bash
# bench/session-overhead.sh [DURATION=10s] [CONNS=50] — what running sessions costs the generator.
#
# What it measures: requests completed per generator CPU-second of a scenario whose users run a
# 3-step session with think time 0 (request, think 0s, request), against headroom's plain URL
# mode, on the same nginx (1 worker, `return 200`) on 127.0.0.1, same connections, one generator
# thread. Requests are counted from nginx's access-log delta; CPU from wait4's rusage. In the
# table, `url` is `headroom run URL` and `session` is `headroom run session.yaml`; the printed
# ratio is session/url (goal >= 0.8), the median of the paired per-round ratios with min and max.
#
# Cookies are on (COOKIES=1, the default): nginx sets a cookie on every reply (`Set-Cookie:
# sid=<connection>; Path=/`), so in both modes every user's jar stores a cookie per reply and
# sends it on every request: the cost of behaving like a browser, measured where it is paid
# most. COOKIES=0: nginx sets none (the jar stays empty).
#
# H2C=1: both modes over HTTP/2 in cleartext (nginx `listen ... http2`, headroom `--h2c`): the
# URL run keeps one stream per user in flight (`--streams 1`, as a closed HTTP/1.1 user keeps one
# request), the session sends each step's request as a stream made from the parts its encoder
# kept. What sessions cost over HTTP/2, and (with HEADROOM_BEFORE) what a change costs them.
#
# Output: a table on stdout; bench/runs/<YYYY-MM-DD>-<host>/session-overhead.{csv,txt,commands}.
# Environment: HEADROOM (binary, default target/release/headroom), ROUNDS (5), PIN (1), PORT,
# COOKIES (1), HEADROOM_BEFORE (another headroom binary, e.g. built from an earlier commit: both
# modes run with it too in every round, as `url-before` and `session-before`, and the paired
# ratios new/before of each mode are printed: a change's cost to sessions, and to URL mode).

# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"

DURATION=${1:-10s}
CONNS=${2:-50}
ROUNDS=${ROUNDS:-5}
COOKIES=${COOKIES:-1}
H2C=${H2C:-0}
DUR_S=$(dur_secs "$DURATION")
PORT=${PORT:-$(free_port)}
URL="http://127.0.0.1:$PORT/"

have_headroom || die "headroom binary not found at $HEADROOM (cargo build --release -p headroom)"

NAME=session-overhead
[[ ${H2C:-0} == 1 ]] && NAME=session-overhead-h2c
bench_init "$NAME" "$CSV_HEADER"

cat >"$WORK/session.yaml" <<YAML
# 3 steps, think 0: the interpreter's cost per request, nothing else.
load: {users: [{count: $CONNS}]}
sessions:
  - name: three
    steps:
      - request: {name: first, path: /}
      - think: 0s
      - request: {name: second, path: /}
YAML

if [[ $COOKIES == 1 ]]; then
    # shellcheck disable=SC2016 # nginx's variable, not the shell's
    NGINX_HTTP_EXTRA='add_header Set-Cookie "sid=$connection; Path=/" always;'
fi
PROTO=()
if [[ $H2C == 1 ]]; then
    # shellcheck disable=SC2034 # read by nginx_start
    NGINX_SERVERS="$(nginx_tls_server "$PORT" off h2c)"
    PROTO=(--h2c)
fi
nginx_start "$WORK/nginx" "$PORT" 1

URL_CMD=("$HEADROOM" run "$URL" -t 1 -c "$CONNS" -d "$DURATION" "${PROTO[@]}" --json)
[[ $H2C == 1 ]] && URL_CMD+=(--streams 1)
SES_CMD=("$HEADROOM" run "$WORK/session.yaml" --target "127.0.0.1:$PORT" -t 1 -d "$DURATION"
    "${PROTO[@]}" --json)
{
    echo "# nginx (pinned: ${SERVER_PIN[*]:-no}) with $WORK/nginx/nginx.conf"
    echo "# session.yaml:"
    sed 's/^/#   /' "$WORK/session.yaml"
    echo "${GEN_PIN[*]} ${URL_CMD[*]}"
    echo "${GEN_PIN[*]} ${SES_CMD[*]}"
} >>"$OUT/$NAME.commands"

one() { # TOOL ROUND CMD...
    headroom_row "$@"
    log "  $1: $(jget .http.cookies_stored) cookies stored, $(jget .requests) requests"
}

if [[ -n ${HEADROOM_BEFORE:-} ]]; then
    cp "$HEADROOM_BEFORE" "$WORK/headroom-before" || die "no binary at HEADROOM_BEFORE=$HEADROOM_BEFORE"
    echo "# before: $HEADROOM_BEFORE ($("$WORK/headroom-before" --version))" >>"$OUT/$NAME.commands"
fi

for round in $(seq 1 "$ROUNDS"); do
    one url "$round" "${URL_CMD[@]}"
    one session "$round" "${SES_CMD[@]}"
    if [[ -n ${HEADROOM_BEFORE:-} ]]; then
        one url-before "$round" "$WORK/headroom-before" "${URL_CMD[@]:1}"
        one session-before "$round" "$WORK/headroom-before" "${SES_CMD[@]:1}"
    fi
done

{
    cookies="off"
    [[ $COOKIES == 1 ]] && cookies="set on every reply and sent back"
    proto="HTTP/1.1"
    [[ $H2C == 1 ]] && proto="h2c (URL mode --streams 1)"
    echo "$NAME: 3-step session (think 0) vs URL mode over $proto, 1 generator thread, $CONNS users," \
        "$DURATION per run, $ROUNDS rounds, nginx 1 worker, cookies $cookies; $(date -Is) on $(hostname -s)"
    echo "(session = the session scenario; url = plain URL mode)"
    summarize "$CSV" url
    if [[ -n ${HEADROOM_BEFORE:-} ]]; then
        echo "ratio session/session-before (requests per generator CPU-second, paired by round):" \
            "$(paired_ratios "$CSV" session session-before)"
        echo "ratio url/url-before (requests per generator CPU-second, paired by round):" \
            "$(paired_ratios "$CSV" url url-before)"
    fi
} | tee "$OUT/$NAME.txt"
echo
echo "run dir: $OUT"
