#!/bin/bash
# usage: dashboard-rss.sh BIN DURATION PORT OUT
# Issue 18: the memory of a long --dashboard run. headroom serve on CPU 0, a --rate 5000 run with
# --dashboard on CPU 1 (127.0.0.1 only, bounded by DURATION), its VmRSS in KiB every 10 s into OUT.
BIN=$1; D=$2; P=$3; OUT=$4
taskset -c 0 $BIN serve --listen 127.0.0.1:$P >/dev/null 2>&1 & S=$!
sleep 0.5
taskset -c 1 $BIN run http://127.0.0.1:$P/ --rate 5000 -c 50 -d $D --dashboard 127.0.0.1:0 -q >/tmp/dash-run-$P.out 2>&1 & R=$!
: > $OUT
while kill -0 $R 2>/dev/null; do
  rss=$(awk '/VmRSS/{print $2}' /proc/$R/status 2>/dev/null); [ -n "$rss" ] && echo "$(date +%s) $rss" >> $OUT
  sleep 10
done
kill $S
