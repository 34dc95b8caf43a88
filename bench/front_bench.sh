#!/bin/sh
# The deployments' front's own cost (docs/gateway.md): wrk against two
# replicas reached
#   direct  — the replicas' own TCP listeners,
#   front   — lathe __gateway, balancing over the replicas' unix sockets,
#   nginx   — nginx as the proxy (least_conn, keep-alive upstreams, seed 004's
#             set-up), a process of its own with as many workers as the front
#             has I/O threads (2).
# The replicas are the same processes for all three paths. Two kinds:
#   REPLICAS=null (default): nginx `return 200` on unix sockets, one worker —
#     an upstream that costs almost nothing, so that what is measured is the
#     proxy itself;
#   REPLICAS=mlp: two `lathe serve` processes (one I/O thread each) serving a
#     TorchScript MLP (64 -> 256 -> 256 -> 10, made here with python3-torch,
#     one intra-op thread), POST /predict with one row — replicas that do real
#     work, as a deployment's do. wrk runs two threads in this mode, so that
#     the direct path reaches both replicas (one thread each).
#   REPLICAS=mlp-large: the same with a larger MLP (512 -> 2048 -> 2048 ->
#     512, 25 MB of weights), whose inference outweighs the HTTP around it.
# Usage: bench/front_bench.sh [LATHE_BIN] [SECONDS] [CONNECTIONS] [ROUNDS]
# ROUNDS (default 1) repeats the paths, interleaved, to see the noise; an
# unmeasured pass of WARMUP seconds (default 2) over every path comes first.
# FRONT_IO_THREADS=N runs the front with N I/O threads (its own default
# otherwise; PROXY_WORKERS, default 2, sets nginx's worker processes).
# BASELINE=OTHER_LATHE_BIN adds a fourth path, "base": the front of another
# build (e.g. the commit before a change), measured in the same rounds.
# Each path's line is followed by its latency percentiles (p50 … p99.9, max).
# A lathe binary copied out of its build finds the serving backends of
# REPLICAS=mlp through LATHE_BACKEND_DIR (e.g. build/backends).
# REPLICA_CPUS, PROXY_CPUS and CLIENT_CPUS (taskset lists, e.g. 0, 1 and 1)
# put the replicas, the proxies (the front, the baseline front, nginx as the
# proxy) and wrk on CPUs of their own: a node where neither the front nor the
# clients take their cores from the replicas, as on a GPU server with cores
# to spare and clients on other machines. Unset (the default), everything
# shares all the CPUs.
# Needs nginx and wrk (scripts/deps.sh --bench). Everything runs on this
# machine: figures are relative.
set -eu
LATHE=${1:-build/lathe}
SECS=${2:-5}
CONNS=${3:-16}
ROUNDS=${4:-1}
PROXY_WORKERS=${PROXY_WORKERS:-2}
D=$(mktemp -d /tmp/lathe-front-bench.XXXXXX)
chmod 755 "$D"
GW= BASE_GW= NGINX=
trap 'kill $GW $BASE_GW $NGINX $(cat "$D/replicas.pids" 2>/dev/null) 2>/dev/null; wait 2>/dev/null
      rm -rf "$D"' EXIT
DIRECT=18931
PROXY=18932
REPLICAS=${REPLICAS:-null}
ON_REPLICA=${REPLICA_CPUS:+taskset -c $REPLICA_CPUS}
ON_PROXY=${PROXY_CPUS:+taskset -c $PROXY_CPUS}
ON_CLIENT=${CLIENT_CPUS:+taskset -c $CLIENT_CPUS}
U=$(id -u)
case $REPLICAS in
  mlp) DIMS="64 256 256 10" ;;
  mlp-large) DIMS="512 2048 2048 512" ;;
  null) DIMS= ;;
  *) echo "REPLICAS: null, mlp or mlp-large, not $REPLICAS" >&2; exit 2 ;;
esac
if [ -n "$DIMS" ]; then
  # Two lathe serve replicas, each on a unix socket (the proxies') and a TCP
  # port (direct).
  mkdir -p "$D/repo/mlp/1"
  /usr/bin/python3 "$(dirname "$0")/mlp_model.py" "$D/repo/mlp/1/model.pt=$(echo $DIMS | tr ' ' ,)"
  cat > "$D/repo/mlp/config.yaml" <<CONF
backend: torchscript
max_batch_size: 32
inputs: [{name: x, datatype: FP32, dims: [$(echo $DIMS | cut -d' ' -f1)]}]
outputs: [{name: y, datatype: FP32, dims: [$(echo $DIMS | cut -d' ' -f4)]}]
instances: [{count: 1, device: cpu}]
threads_per_instance: 1
CONF
  for r in a b; do
    port=$((DIRECT + $(printf '%d' "'$r") - 97 + 10))
    OMP_NUM_THREADS=1 $ON_REPLICA "$LATHE" serve --repository "$D/repo" --socket "$D/$r.sock" --port "$port" \
      --gpus none --http-threads 1 > "$D/$r.log" 2>&1 &
    echo $! >> "$D/replicas.pids"
  done
  DIRECT_PORTS="$((DIRECT + 10)) $((DIRECT + 11))"
  HEALTH=/v2/health/ready
  TARGET=/predict
  WRK_THREADS=2
  for r in a b; do
    pid=$(sed -n "$(( $(printf '%d' "'$r") - 96 ))p" "$D/replicas.pids")
    while ! grep -q 'http://' "$D/$r.log" 2>/dev/null; do
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "replica $r did not start:" >&2
        cat "$D/$r.log" >&2
        exit 1
      fi
      sleep 0.2
    done
  done
  ROW=$(/usr/bin/python3 -c "import random, sys; r = random.Random(1); print([round(r.uniform(-1, 1), 4) for _ in range(int(sys.argv[1]))])" "$(echo $DIMS | cut -d' ' -f1)")
  BODY="{\"instances\": [$ROW]}"
else
  cat > "$D/upstreams.conf" <<CONF
daemon off; worker_processes 1; pid $D/upstreams.pid; error_log $D/upstreams.err;
events { worker_connections 4096; }
http { access_log off;
  server { listen unix:$D/a.sock; listen 127.0.0.1:$DIRECT; location / { return 200 "ok\\n"; } }
  server { listen unix:$D/b.sock; location / { return 200 "ok\\n"; } } }
CONF
  $ON_REPLICA nginx -c "$D/upstreams.conf" -p "$D" &
  echo $! > "$D/replicas.pids"
  DIRECT_PORTS=$DIRECT
  HEALTH=/
  TARGET=/x
  WRK_THREADS=1
  BODY=
fi
UPSTREAMS=$(tr '\n' ' ' < "$D/replicas.pids")
cat > "$D/proxy.conf" <<CONF
daemon off; worker_processes $PROXY_WORKERS; pid $D/proxy.pid; error_log $D/proxy.err;
events { worker_connections 4096; }
http { access_log off;
  upstream two { least_conn; server unix:$D/a.sock; server unix:$D/b.sock; keepalive 64; }
  server { listen 127.0.0.1:$PROXY; location / { proxy_pass http://two;
           proxy_http_version 1.1; proxy_set_header Connection ""; } } }
CONF
$ON_PROXY nginx -c "$D/proxy.conf" -p "$D" &
NGINX=$!
sleep 1
chmod 777 "$D"/*.sock
# The request: GET, or the POST of REPLICAS=mlp; the direct path's threads
# each go to one replica (wrk's setup hook), and every path prints its
# percentiles.
cat > "$D/req.lua" <<'LUA'
local body = os.getenv("BENCH_BODY") or ""
if body ~= "" then
  wrk.method = "POST"
  wrk.body = body
  wrk.headers["Content-Type"] = "application/json"
end
local ports, n = {}, 0
for p in string.gmatch(os.getenv("BENCH_PORTS") or "", "%d+") do ports[#ports + 1] = p end
function setup(thread)
  if #ports > 0 then
    thread.addr = wrk.lookup("127.0.0.1", ports[n % #ports + 1])[1]
    n = n + 1
  end
end
function done(summary, latency, requests)
  local out = ""
  for _, p in ipairs({50, 90, 95, 99, 99.9}) do
    out = out .. string.format("p%s %.2f ms  ", p, latency:percentile(p) / 1000)
  end
  io.write(out .. string.format("max %.2f ms\n", latency.max / 1000))
end
LUA
U=$(id -u)
cat > "$D/routes.json" <<ROUTES
{"version": 1, "generation": 1, "deployments": [{"name": "b", "uid": $U, "public": true,
  "health_path": "$HEALTH", "replicas": [
  {"id": "a", "socket": "$D/a.sock", "uid": $U, "version": "v"},
  {"id": "b", "socket": "$D/b.sock", "uid": $U, "version": "v"}]}]}
ROUTES
$ON_PROXY "$LATHE" __gateway --dir "$D" --listen 127.0.0.1:0 ${FRONT_IO_THREADS:+--io-threads $FRONT_IO_THREADS} \
  2> "$D/gateway.log" &
GW=$!
BASE_GW=
if [ -n "${BASELINE:-}" ]; then
  mkdir -p "$D/base"
  cp "$D/routes.json" "$D/base/routes.json"
  $ON_PROXY "$BASELINE" __gateway --dir "$D/base" --listen 127.0.0.1:0 2> "$D/base/gateway.log" &
  BASE_GW=$!
fi
port_of() {
  while [ ! -s "$1/gateway.json" ]; do sleep 0.1; done
  /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['port'])" "$1/gateway.json"
}
PORT=$(port_of "$D")
PATHS="direct|http://127.0.0.1:${DIRECT_PORTS%% *}$TARGET front|http://127.0.0.1:$PORT/d/b$TARGET"
if [ -n "$BASE_GW" ]; then PATHS="$PATHS base|http://127.0.0.1:$(port_of "$D/base")/d/b$TARGET"; fi
PATHS="$PATHS nginx|http://127.0.0.1:$PROXY$TARGET"
sleep 1  # the first probes
# CPU time (clock ticks, user and system) of a process and of its children
# (nginx's workers): utime and stime in /proc, so a busy machine blurs it less
# than it blurs the throughput.
ticks() {
  u=0 k=0
  for p in "$@" $(for q in "$@"; do pgrep -P "$q"; done); do
    set -- $(cut -d' ' -f14,15 "/proc/$p/stat")
    u=$((u + $1)) k=$((k + $2))
  done
  echo "$u $k"
}
HZ=$(getconf CLK_TCK)
# Each CPU's busy and total ticks from /proc/stat ("cpu0 BUSY TOTAL ..."),
# to see whether the replicas' CPUs were saturated.
cpu_ticks() {
  awk '/^cpu[0-9]/ {t = 0; for (i = 2; i <= 9; i++) t += $i; printf "%s %d %d ", $1, t - $5 - $6, t}' /proc/stat
}
# wrk on one path: load NAME URL SECONDS [WRK OPTIONS]; on the direct path
# each thread goes to one replica.
load() {
  name=$1 url=$2 secs=$3
  shift 3
  ports=
  if [ "$name" = direct ]; then ports=$DIRECT_PORTS; fi
  BENCH_BODY=$BODY BENCH_PORTS=$ports \
    $ON_CLIENT wrk -t"$WRK_THREADS" -c"$CONNS" -d"${secs}s" "$@" -s "$D/req.lua" "$url"
}
# A short unmeasured pass over every path first (WARMUP seconds, default 2):
# the proxies' kept connections and the replicas' first requests on them.
for what in $PATHS; do
  load $(echo "$what" | tr '|' ' ') "${WARMUP:-2}" > /dev/null
done
round=0
while [ "$round" -lt "$ROUNDS" ]; do
  round=$((round + 1))
  for what in $PATHS; do
    set -- $(echo "$what" | tr '|' ' ')
    case $1 in front) who=$GW ;; base) who=$BASE_GW ;; nginx) who=$NGINX ;; *) who=$UPSTREAMS ;; esac
    before=$(ticks $who) up_before=$(ticks $UPSTREAMS) cpus_before=$(cpu_ticks)
    printf '%-7s ' "$1"
    load "$1" "$2" "$SECS" --latency > "$D/wrk.out"
    after=$(ticks $who) up_after=$(ticks $UPSTREAMS)
    set -- $up_before $up_after
    up_ticks=$(($3 - $1 + $4 - $2))
    set -- $before $after
    awk -v u=$(($3 - $1)) -v k=$(($4 - $2)) -v hz="$HZ" -v who="$who" -v up="$UPSTREAMS" -v upt="$up_ticks" \
      '/requests in/ {n=$1} /Requests\/sec/ {rps=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2}
       /Non-2xx|Socket errors/ {err=err" "$0}
       END {printf "%10s req/s  p50 %8s  p99 %8s  %s CPU/request %5.1f us (user %4.1f, system %4.1f)%s%s\n",
            rps, p50, p99, who == up ? "upstream" : "proxy", n ? (u + k) * 1e6 / hz / n : 0,
            n ? u * 1e6 / hz / n : 0, n ? k * 1e6 / hz / n : 0,
            who == up || !n ? "" : sprintf("  upstream %5.1f us", upt * 1e6 / hz / n), err}' "$D/wrk.out"
    grep '^p50 ' "$D/wrk.out" | sed 's/^/        /' || true
    echo "$cpus_before" "$(cpu_ticks)" | awk '{n = NF / 6; out = "       "
      for (i = 0; i < n; i++) out = out sprintf(" %s busy %3.0f%%", $(3 * i + 1),
        100 * ($(3 * (i + n) + 2) - $(3 * i + 2)) / ($(3 * (i + n) + 3) - $(3 * i + 3) + 1e-9))
      print out}'
  done
done
