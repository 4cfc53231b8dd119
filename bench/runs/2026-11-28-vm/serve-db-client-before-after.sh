#!/usr/bin/env bash
# Run by hand on 2026-11-28 (issue 27): "before" = target/release/headroom of 75d30cf (tokio-postgres client, thin LTO), "after" ($1) = b3bd4da built by scripts/demo; the load generator is the after binary. Output: serve-db-client-before-after.txt.
# before/after: serve's /db/read/20 over PostgreSQL; server CPU per request, alternating.
set -u
PG=$(cd /work/main && scripts/postgres.sh start 2>/dev/null)
LOAD=/tmp/hr-after
declare -A BIN=([before]=/tmp/fresh-before/target/release/headroom [after]=$1)
port=23510
for round in 1 2 3 4 5; do
  for v in before after; do
    port=$((port+1))
    taskset -c 0 ${BIN[$v]} serve --arch pool --handlers 8 --db "$PG" --db-pool 8 --listen 127.0.0.1:$port > /tmp/dbserve-$v.log 2>&1 &
    spid=$!
    for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:$port/status && break; sleep 0.2; done
    t0=$(awk '{print $14+$15}' /proc/$spid/stat)
    out=$(taskset -c 1 $LOAD run http://127.0.0.1:$port/db/read/20 -c 8 -d 5s --json 2>/dev/null)
    t1=$(awk '{print $14+$15}' /proc/$spid/stat)
    kill $spid; wait $spid 2>/dev/null
    req=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])')
    tck=$(getconf CLK_TCK)
    echo "$round $v req=$req server_cpu_s=$(echo "($t1-$t0)/$tck" | bc -l | cut -c1-6) us_per_req=$(echo "($t1-$t0)/$tck*1000000/$req" | bc -l | cut -c1-7)"
  done
done
