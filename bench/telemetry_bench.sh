#!/bin/sh
# The daemon's CPU time and memory with telemetry on and off, sampling 8
# simulated GPUs with a few runs on them (docs/benchmarks.md, "Telemetry").
#
#   bench/telemetry_bench.sh [build/lathe]
#   DURATION=60 RUNS=4 INTERVAL=5s bench/telemetry_bench.sh
#
# For each mode a fresh daemon (its own LATHE_HOME) starts on
# sim:8x80GB@load.json, where all 8 GPUs are busy and each run's pid holds
# GPU memory; RUNS runs of one GPU each sleep; after a 5 s settle the
# daemon's utime+stime and RSS are read, again after DURATION seconds.
# Prints one line per mode: CPU seconds used in the window, CPU % of one
# core, RSS at the end and its high-water mark.
set -eu
LATHE=${1:-build/lathe}
LATHE=$(readlink -f "$LATHE")
DURATION=${DURATION:-60}
RUNS=${RUNS:-4}
INTERVAL=${INTERVAL:-5s}
TICKS=$(getconf CLK_TCK)

cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }

# Stops the runs of the daemon at $LATHE_HOME, then the daemon (also when a step fails).
finish() {
  for id in $("$LATHE" ps --json 2> /dev/null | /usr/bin/python3 -c 'import json, sys; print(" ".join(r["id"] for r in json.load(sys.stdin)))' 2> /dev/null); do
    "$LATHE" stop "$id" > /dev/null || true
  done
  sleep 1
  kill "$daemon" 2> /dev/null || true
  wait "$daemon" 2> /dev/null || true
  rm -rf "$home"
}

bench() {
  mode=$1
  home=$(mktemp -d /tmp/lathe-telemetry-bench-XXXXXX)
  chmod 755 "$home"
  if [ "$mode" = on ]; then
    printf 'telemetry: {enabled: true, interval: %s}\n' "$INTERVAL" > "$home/config.yaml"
  else
    printf 'telemetry: {enabled: false}\n' > "$home/config.yaml"
  fi
  export LATHE_HOME="$home"
  "$LATHE" daemon --home "$home" --gpus "sim:8x80GB@$home/load.json" --port 0 \
    --deployments-listen 127.0.0.1:0 > "$home/daemon.out" 2>&1 &
  daemon=$!
  trap finish EXIT
  until "$LATHE" status --json > /dev/null 2>&1; do sleep 0.1; done
  i=0
  while [ $i -lt "$RUNS" ]; do
    "$LATHE" run --gpus 1 -- sh -c "echo \$\$ > $home/pid.$i; exec sleep 3600" > /dev/null
    i=$((i + 1))
  done
  until [ "$(ls "$home"/pid.* 2>/dev/null | wc -l)" -eq "$RUNS" ]; do sleep 0.1; done
  # Every GPU busy; run i's pid holds 20GB on GPU i (runs are placed in order).
  {
    printf '{"gpus": ['
    g=0
    while [ $g -lt 8 ]; do
      procs=""
      [ -f "$home/pid.$g" ] && procs="{\"pid\": $(cat "$home/pid.$g"), \"used_memory_bytes\": \"20GB\"}"
      [ $g -gt 0 ] && printf ','
      printf '{"index": %d, "utilization_gpu_pct": 90, "temperature_c": 70, "power_w": 300, "sm_clock_mhz": 1400, "processes": [%s]}' "$g" "$procs"
      g=$((g + 1))
    done
    printf ']}\n'
  } > "$home/load.json"
  sleep 5
  t0=$(cpu_ticks $daemon)
  sleep "$DURATION"
  t1=$(cpu_ticks $daemon)
  rss=$(status_kb $daemon VmRSS)
  hwm=$(status_kb $daemon VmHWM)
  db=$(du -k "$home"/telemetry.db* 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
  awk -v m="$mode" -v a="$t0" -v b="$t1" -v hz="$TICKS" -v d="$DURATION" -v r="$rss" -v h="$hwm" -v db="$db" \
    'BEGIN { cpu = (b - a) / hz; printf "telemetry %-3s  cpu %.2f s in %d s (%.2f%% of a core)  rss %.1f MiB  peak %.1f MiB  telemetry.db %d KiB\n", m, cpu, d, 100 * cpu / d, r / 1024, h / 1024, db }'
  finish
  trap - EXIT
}

bench off
bench on
