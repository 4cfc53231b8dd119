#!/usr/bin/env bash
# A minimal outside driver for bench/vs-h2load.sh's h2 and h2c figures, written by hand and
# sharing nothing with bench/lib.sh: its own nginx config (from scratch, own self-signed key),
# its own count (nginx's stub_status `requests`, not the access log), its own CPU accounting
# (bash's `times`: getrusage(RUSAGE_CHILDREN) of a subshell that runs only the tool).
# Usage: [MODES="h2 h2c"] [NICE=-10] hand-h2load.sh HEADROOM_BIN [ROUNDS=5] [SECONDS=10]
# (output: one line per run, then the median of the per-round ratios headroom/h2load per mode;
# NICE runs nginx and the tools at that priority, for a machine busy with other work)
set -eu
HR=$1 ROUNDS=${2:-5} SECS=${3:-10} MODES=${MODES:-h2 h2c}
PRIO=(); [[ -n ${NICE:-} ]] && PRIO=(nice -n "$NICE")
D=$(mktemp -d /tmp/hand-h2load.XXXXXX)
PA=$((29100 + RANDOM % 100)) PB=$((29300 + RANDOM % 100)) PS=$((29500 + RANDOM % 100))
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -keyout "$D/k.pem" -out "$D/c.pem" 2>/dev/null
cat >"$D/nginx.conf" <<CONF
daemon off; worker_processes 1; pid $D/pid; error_log $D/error.log;
events { worker_connections 1024; }
http {
  access_log off; keepalive_requests 1000000; keepalive_timeout 120s;
  http2_max_concurrent_streams 128;
  ssl_protocols TLSv1.2 TLSv1.3;
  server { listen 127.0.0.1:$PA ssl http2; ssl_certificate $D/c.pem; ssl_certificate_key $D/k.pem;
           location / { return 200 "hello\n"; } }
  server { listen 127.0.0.1:$PB http2; location / { return 200 "hello\n"; } }
  server { listen 127.0.0.1:$PS; location / { stub_status; } }
}
CONF
"${PRIO[@]}" taskset -c 0 nginx -p "$D/" -c "$D/nginx.conf" -e "$D/error.log" & NG=$!
trap 'kill $NG 2>/dev/null; wait $NG 2>/dev/null; rm -rf "$D"' EXIT
sleep 1
served() { curl -s "http://127.0.0.1:$PS/" | awk 'NR == 3 { print $3 }'; }
# cpu CMD... -> "user sys" seconds of CMD alone (the subshell's children: just CMD)
cpu() { ( "${PRIO[@]}" taskset -c 1 "$@" >"$D/out" 2>&1; times ) | tail -n 1 |
    awk '{ for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t[i] = a[1] * 60 + a[2] } print t[1], t[2] }'; }
for mode in $MODES; do
    if [[ $mode == h2 ]]; then url=https://127.0.0.1:$PA/ hf=(--http2 -k); else url=http://127.0.0.1:$PB/ hf=(--h2c); fi
    for r in $(seq 1 "$ROUNDS"); do
        for tool in h2load headroom; do
            if [[ $tool == h2load ]]; then c=(h2load -t1 -c4 -m32 -D "$SECS" "$url")
            else c=("$HR" run "$url" "${hf[@]}" -c 4 --streams 32 -t 1 -d "${SECS}s" --json -q); fi
            b=$(served); read -r u s < <(cpu "${c[@]}"); sleep 0.3; a=$(served)
            n=$((a - b - 1))
            own=$(if [[ $tool == h2load ]]; then awk '/^requests:/ { print $8 }' "$D/out"
                  else grep -o '"responses": *[0-9]*' "$D/out" | head -n 1 | tr -dc 0-9; fi)
            busy=$(awk -v u="$u" -v s="$s" -v w="$SECS" 'BEGIN { printf "%.2f", (u + s) / w }')
            echo "$mode $tool $r busy=$busy served=$n own=$own user=$u sys=$s per_cpu_s=$(awk -v n="$n" -v u="$u" -v s="$s" 'BEGIN { printf "%.0f", n / (u + s) }')"
        done
    done
done | tee "$D/runs.txt"
for mode in $MODES; do
    awk -v m="$mode" '$1 == m { split($NF, x, "="); v[$3 " " $2] = x[2]; rs[$3] = 1 }
        END { for (r in rs) print v[r " headroom"] / v[r " h2load"] }' "$D/runs.txt" | sort -g |
        awk -v m="$mode" '{ v[NR] = $1 } END { md = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            printf "hand driver %s: headroom/h2load per generator CPU-second, median of %d paired rounds %.3f (min %.3f, max %.3f)\n", m, NR, md, v[1], v[NR] }'
done
