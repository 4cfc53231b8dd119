#!/usr/bin/env bash
# What sampling a server costs the lab (issue 31: < 1% of a core at one sample a second): the
# sampler's own CPU per sample of (1) `headroom serve --arch pool --handlers 2000`, 2,000
# threads, and (2) `headroom serve --arch reactor` holding N idle keep-alive connections (N
# descriptors), each read whole as the lab reads it (the tree's CPU, memory, threads by state,
# descriptors and their limit, the busiest thread, the machine's CPU, the kernel's TCP counters
# and the listener's accept queue), SAMPLES times
# back to back. Prints ms of CPU per sample and that in percent of a core at 1 sample/s.
#   bash bench/monitor-cost.sh            N=10000 SAMPLES=200
# Needs: cargo build --release -p headroom --example sample_cost -p headroom-monitor
source "$(dirname "$0")/lib.sh"

N=${N:-10000}
SAMPLES=${SAMPLES:-200}
COST=${COST:-$REPO_ROOT/target/release/examples/sample_cost}
((N >= 1 && N <= 19000)) || die "N must be 1-19000 (one process's descriptors)"
ulimit -n 20000 || die "cannot raise the descriptor limit to 20000 (hard limit: $(ulimit -Hn))"
have_headroom || die "headroom binary not found at $HEADROOM (cargo build --release -p headroom)"
[[ -x $COST ]] || die "$COST not found (cargo build --release -p headroom-monitor --example sample_cost)"

bench_init monitor-cost "server,processes_threads_fds,ms_cpu_per_sample,pct_core_at_1hz"

run_one() {
    local label=$1 pid=$2 line
    line=$("$COST" "$pid" "$SAMPLES" "$PORT") || die "$label: sample_cost failed"
    echo "$label: $line" | tee -a "$OUT/monitor-cost.txt"
    local ms pct
    ms=$(sed -n 's/.*samples: \([0-9.]*\) ms CPU.*/\1/p' <<<"$line")
    pct=$(sed -n 's/.* = \([0-9.]*\)% of a core.*/\1/p' <<<"$line")
    echo "$label,$(sed -n 's/^pid [0-9]*: \([^;]*\);.*/\1/p' <<<"$line" | tr -d ,),$ms,$pct" >>"$CSV"
}

: >"$OUT/monitor-cost.txt"
{
    echo "$HEADROOM serve --arch pool --handlers 2000 --listen 127.0.0.1:PORT"
    echo "$HEADROOM serve --arch reactor --listen 127.0.0.1:PORT --backlog 4096"
    echo "$HEADROOM run http://127.0.0.1:PORT/ -c $N --think 1h -d 120s --connect-timeout 10s -q"
    echo "$COST PID $SAMPLES PORT   (against each server)"
} >"$OUT/monitor-cost.commands"
PORT=$(free_port)
"$HEADROOM" serve --arch pool --handlers 2000 --listen "127.0.0.1:$PORT" >"$WORK/pool.log" 2>&1 &
POOL=$!
on_exit "kill $POOL 2>/dev/null"
sleep 2
run_one "pool-2000-handlers" "$POOL"
kill "$POOL"

PORT=$(free_port)
"$HEADROOM" serve --arch reactor --listen "127.0.0.1:$PORT" --backlog 4096 >"$WORK/reactor.log" 2>&1 &
REACTOR=$!
on_exit "kill $REACTOR 2>/dev/null"
sleep 1
"$HEADROOM" run "http://127.0.0.1:$PORT/" -c "$N" --think 1h -d 120s --connect-timeout 10s -q \
    >"$WORK/load.log" 2>&1 &
LOAD=$!
on_exit "kill $LOAD 2>/dev/null"
for _ in $(seq 1 60); do
    (($(ls "/proc/$REACTOR/fd" | wc -l) >= N)) && break
    sleep 0.5
done
run_one "reactor-$N-connections" "$REACTOR"
kill "$LOAD" "$REACTOR" 2>/dev/null
echo "written: $OUT/monitor-cost.txt"
