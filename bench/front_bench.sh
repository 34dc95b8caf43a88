#!/bin/sh
# The deployments' front's own cost (docs/gateway.md): wrk against two
# upstreams that answer at once (nginx `return 200` on unix sockets, so the
# upstream is never the bottleneck), reached
#   direct  — the upstreams' own TCP listener,
#   front   — lathe __gateway, balancing over the two sockets,
#   nginx   — nginx as the proxy (least_conn, keep-alive upstreams, seed 004's
#             set-up), a process of its own with as many workers as the front
#             has I/O threads (2).
# The upstreams are one nginx process in all three cases, so that each proxy
# is measured against the same replicas.
# Usage: bench/front_bench.sh [LATHE_BIN] [SECONDS] [CONNECTIONS] [ROUNDS]
# ROUNDS (default 1) repeats the three, interleaved, to see the noise.
# FRONT_IO_THREADS=N runs the front with N I/O threads (its own default
# otherwise; PROXY_WORKERS, default 2, sets nginx's worker processes).
# BASELINE=OTHER_LATHE_BIN adds a fourth path, "base": the front of another
# build (e.g. the commit before a change), measured in the same rounds.
# Needs nginx and wrk. Everything runs on this machine: figures are relative.
set -eu
LATHE=${1:-build/lathe}
SECS=${2:-5}
CONNS=${3:-16}
ROUNDS=${4:-1}
PROXY_WORKERS=${PROXY_WORKERS:-2}
D=$(mktemp -d /tmp/lathe-front-bench.XXXXXX)
chmod 755 "$D"
DIRECT=18931
PROXY=18932
cat > "$D/upstreams.conf" <<CONF
daemon off; worker_processes 1; pid $D/upstreams.pid; error_log $D/upstreams.err;
events { worker_connections 4096; }
http { access_log off;
  server { listen unix:$D/a.sock; listen 127.0.0.1:$DIRECT; location / { return 200 "ok\n"; } }
  server { listen unix:$D/b.sock; location / { return 200 "ok\n"; } } }
CONF
cat > "$D/proxy.conf" <<CONF
daemon off; worker_processes $PROXY_WORKERS; pid $D/proxy.pid; error_log $D/proxy.err;
events { worker_connections 4096; }
http { access_log off;
  upstream two { least_conn; server unix:$D/a.sock; server unix:$D/b.sock; keepalive 64; }
  server { listen 127.0.0.1:$PROXY; location / { proxy_pass http://two;
           proxy_http_version 1.1; proxy_set_header Connection ""; } } }
CONF
nginx -c "$D/upstreams.conf" -p "$D" &
UPSTREAMS=$!
nginx -c "$D/proxy.conf" -p "$D" &
NGINX=$!
sleep 1
chmod 777 "$D"/*.sock
U=$(id -u)
cat > "$D/routes.json" <<ROUTES
{"version": 1, "generation": 1, "deployments": [{"name": "b", "uid": $U, "public": true,
  "health_path": "/", "replicas": [
  {"id": "a", "socket": "$D/a.sock", "uid": $U, "version": "v"},
  {"id": "b", "socket": "$D/b.sock", "uid": $U, "version": "v"}]}]}
ROUTES
"$LATHE" __gateway --dir "$D" --listen 127.0.0.1:0 ${FRONT_IO_THREADS:+--io-threads $FRONT_IO_THREADS} \
  2> "$D/gateway.log" &
GW=$!
BASE_GW=
if [ -n "${BASELINE:-}" ]; then
  mkdir -p "$D/base"
  cp "$D/routes.json" "$D/base/routes.json"
  "$BASELINE" __gateway --dir "$D/base" --listen 127.0.0.1:0 2> "$D/base/gateway.log" &
  BASE_GW=$!
fi
trap 'kill $GW $BASE_GW $NGINX $UPSTREAMS 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
port_of() {
  while [ ! -s "$1/gateway.json" ]; do sleep 0.1; done
  /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['port'])" "$1/gateway.json"
}
PORT=$(port_of "$D")
PATHS="direct|http://127.0.0.1:$DIRECT/x front|http://127.0.0.1:$PORT/d/b/x"
if [ -n "$BASE_GW" ]; then PATHS="$PATHS base|http://127.0.0.1:$(port_of "$D/base")/d/b/x"; fi
PATHS="$PATHS nginx|http://127.0.0.1:$PROXY/x"
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
round=0
while [ "$round" -lt "$ROUNDS" ]; do
  round=$((round + 1))
  for what in $PATHS; do
    set -- $(echo "$what" | tr '|' ' ')
    case $1 in front) who=$GW ;; base) who=$BASE_GW ;; nginx) who=$NGINX ;; *) who=$UPSTREAMS ;; esac
    before=$(ticks $who)
    printf '%-7s ' "$1"
    url=$2
    wrk -t1 -c"$CONNS" -d"${SECS}s" --latency "$url" > "$D/wrk.out"
    after=$(ticks $who)
    set -- $before $after
    awk -v u=$(($3 - $1)) -v k=$(($4 - $2)) -v hz="$HZ" -v who="$who" -v up="$UPSTREAMS" \
      '/requests in/ {n=$1} /Requests\/sec/ {rps=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2}
       /Non-2xx|Socket errors/ {err=err" "$0}
       END {printf "%10s req/s  p50 %8s  p99 %8s  %s CPU/request %5.1f us (user %4.1f, system %4.1f)%s\n",
            rps, p50, p99, who == up ? "upstream" : "proxy", n ? (u + k) * 1e6 / hz / n : 0,
            n ? u * 1e6 / hz / n : 0, n ? k * 1e6 / hz / n : 0, err}' "$D/wrk.out"
  done
done
