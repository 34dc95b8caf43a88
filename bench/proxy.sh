#!/bin/bash
# Lathe's reverse proxy for run ports against direct access and nginx as a
# reverse proxy, in one run. A `lathe daemon` on a temporary home (loopback
# only); the upstream is a Lathe run serving a small and a large static body
# on a loopback port: nginx when it is installed, else bench/bare_beast.cc in
# its static mode. Same wrk load on every path:
#   direct      http://127.0.0.1:P/                      (the upstream itself)
#   direct_close  the same with "Connection: close": a new connection per
#               request, what the upstream and the client pay for one alone
#   lathe       http://127.0.0.1:DAEMON/, Host: RUN.localhost:DAEMON, Bearer token
#   api_run     GET /api/v1/runs/RUN on the daemon with the same token (small
#               only): what authenticating and reading the run cost without a
#               proxied exchange, for the reading of the lathe figures
#   nginx       a second nginx, proxy_pass http://127.0.0.1:P (HTTP/1.0, a new
#               upstream connection per request, as Lathe does)
#   nginx_ka    the same nginx, upstream keepalive 32 (HTTP/1.1 to the upstream)
# (the nginx paths only where nginx is installed), then a websocket echo
# (tests/integ/proxy_upstream.py as a second run) direct and through Lathe.
#
#   bench/proxy.sh [LATHE]        (default build/lathe; as root or not)
# Environment: DURATION (s per wrk run, 10), THREADS (2), CONNS (16), REPS (3),
# SMALL and LARGE (bytes, 1024 and 1048576), WS_N (round trips, 2000),
# UPSTREAM (nginx|bare_beast; nginx when installed), OUT (JSON file,
# bench/results/proxy_bench.json), KEEP=1 (keep the temporary directory).
# Prints a markdown table; the JSON has every wrk run (its command, req/s, p50,
# p99, errors, the load average before it) and the medians.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
LATHE=$(realpath "${1:-$ROOT/build/lathe}")
DURATION=${DURATION:-10} THREADS=${THREADS:-2} CONNS=${CONNS:-16} REPS=${REPS:-3}
SMALL=${SMALL:-1024} LARGE=${LARGE:-1048576} WS_N=${WS_N:-2000}
OUT=${OUT:-$ROOT/bench/results/proxy_bench.json}
PY=/usr/bin/python3
if [ -z "${UPSTREAM:-}" ]; then
  if command -v nginx > /dev/null; then UPSTREAM=nginx; else UPSTREAM=bare_beast; fi
fi
command -v wrk > /dev/null || { echo "wrk is not installed (bash scripts/deps.sh --bench)" >&2; exit 1; }
HAVE_NGINX=0
command -v nginx > /dev/null && HAVE_NGINX=1
[ "$UPSTREAM" = nginx ] && [ $HAVE_NGINX = 0 ] && { echo "UPSTREAM=nginx: nginx is not installed" >&2; exit 1; }
[ $HAVE_NGINX = 0 ] && echo "nginx is not installed: no nginx paths (bash scripts/deps.sh --bench)" >&2

W=$(mktemp -d /var/tmp/proxy-bench-XXXXXX)
chmod 755 "$W"
export LATHE_HOME=$W/home LANG=C.UTF-8
unset LATHE_LANG LC_ALL
mkdir -p "$LATHE_HOME"
PIDS=() RUNS=()
cleanup() {
  set +e
  for r in "${RUNS[@]}"; do "$LATHE" stop "$r" > /dev/null 2>&1; done
  for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2> /dev/null; done
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $W" >&2; else rm -rf "$W"; fi
}
trap cleanup EXIT

free_port() { $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# wait_http URL [CURL ARGS...]: until URL answers 200 (30 s at most).
wait_http() {
  local url=$1
  shift
  for _ in $(seq 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$@" "$url")" = 200 ] && return 0
    sleep 0.1
  done
  echo "no 200 from $url" >&2
  return 1
}

# 1. The daemon, on loopback, no GPUs.
"$LATHE" daemon --home "$LATHE_HOME" --gpus none --port 0 > "$W/daemon.log" 2>&1 &
PIDS+=($!)
DAEMON_PID=$!
for _ in $(seq 300); do "$LATHE" status --json > /dev/null 2>&1 && break; sleep 0.1; done
DPORT=$($PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["tcp"].rsplit(":", 1)[1])' \
  "$LATHE_HOME/endpoint.json")
TOKEN=$("$LATHE" token create --json | $PY -c 'import json, sys; print(json.load(sys.stdin)["token"])')

# 2. The upstream, as a Lathe run. It listens where the daemon tells it
# ($PORT, a loopback port the daemon chose); the direct paths use that port.
# served_port RUN: that port, from `lathe inspect`.
served_port() {
  "$LATHE" inspect --json "$1" |
    $PY -c 'import json, sys; print(json.load(sys.stdin)["endpoints"][0]["address"].rsplit(":", 1)[1])'
}
# nginx_conf DIR BODY: a minimal nginx.conf under DIR (pid, logs, temp paths
# there), one worker, with BODY inside http {}.
nginx_conf() {
  mkdir -p "$1/logs" "$1/tmp"
  {
    [ "$(id -u)" = 0 ] && echo "user root;"
    cat << EOF
worker_processes 1;
pid $1/nginx.pid;
error_log $1/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  default_type text/plain;
  sendfile on;
  tcp_nodelay on;
  keepalive_requests 1000000;
  client_body_temp_path $1/tmp/body;
  proxy_temp_path $1/tmp/proxy;
  fastcgi_temp_path $1/tmp/fastcgi;
  uwsgi_temp_path $1/tmp/uwsgi;
  scgi_temp_path $1/tmp/scgi;
$2
}
EOF
  } > "$1/nginx.conf"
}
if [ "$UPSTREAM" = nginx ]; then
  mkdir -p "$W/up/html"
  head -c "$SMALL" /dev/zero | tr '\0' x > "$W/up/html/small"
  head -c "$LARGE" /dev/zero | tr '\0' x > "$W/up/html/large"
  chmod -R a+rX "$W/up"
  nginx_conf "$W/up" "  server { listen 127.0.0.1:@PORT@; root $W/up/html; }"
  mv "$W/up/nginx.conf" "$W/up/nginx.conf.in"
  UP_CMD=(sh -c "sed \"s/@PORT@/\$PORT/\" $W/up/nginx.conf.in > $W/up/nginx.conf &&
    exec nginx -p $W/up -c $W/up/nginx.conf -g 'daemon off;'")
  UP_VERSION=$(nginx -v 2>&1)
else
  g++ -O2 -std=c++20 "$HERE/bare_beast.cc" -o "$W/bare_beast" -pthread
  UP_CMD=(sh -c "exec $W/bare_beast \"\$PORT\" 1 $SMALL $LARGE")
  UP_VERSION="bare_beast (bench/bare_beast.cc, g++ -O2, 1 I/O thread)"
fi
RUNS+=("$("$LATHE" run --port 8080 --workdir "$W" -- "${UP_CMD[@]}")")
RUN=${RUNS[0]}
for _ in $(seq 100); do [ "$("$LATHE" inspect --json "$RUN" | $PY -c 'import json, sys; print(json.load(sys.stdin)["state"])')" = running ] && break; sleep 0.1; done
UP=$(served_port "$RUN")
wait_http "http://127.0.0.1:$UP/small"
LHOST="$RUN.localhost:$DPORT"
wait_http "http://127.0.0.1:$DPORT/small" -H "Host: $LHOST" -H "Authorization: Bearer $TOKEN"

# 3. nginx as the reverse proxy (not a Lathe run: it is the peer, not the upstream).
PATHS=(direct direct_close lathe api_run)
if [ $HAVE_NGINX = 1 ]; then
  NX=$(free_port) NXKA=$(free_port)
  nginx_conf "$W/peer" "  upstream up_ka { server 127.0.0.1:$UP; keepalive 32; }
  proxy_max_temp_file_size 0;
  server { listen 127.0.0.1:$NX; location / { proxy_pass http://127.0.0.1:$UP; } }
  server { listen 127.0.0.1:$NXKA; location / { proxy_pass http://up_ka;
    proxy_http_version 1.1; proxy_set_header Connection \"\"; } }"
  nginx -p "$W/peer" -c "$W/peer/nginx.conf" -g 'daemon off;' > "$W/peer/logs/stdout" 2>&1 &
  PIDS+=($!)
  NGINX_PID=$!
  wait_http "http://127.0.0.1:$NX/small"
  wait_http "http://127.0.0.1:$NXKA/small"
  PATHS+=(nginx nginx_ka)
fi

# 4. The load. The Lua script adds the Host and Authorization headers for the
# lathe path and prints one RESULT line (latencies in µs).
cat > "$W/bench.lua" << 'LUA'
local host, auth, conn = os.getenv("WRK_HOST"), os.getenv("WRK_AUTH"), os.getenv("WRK_CONN")
if host and host ~= "" then wrk.headers["Host"] = host end
if auth and auth ~= "" then wrk.headers["Authorization"] = auth end
if conn and conn ~= "" then wrk.headers["Connection"] = conn end
done = function(s, latency, requests)
  local e = s.errors
  io.write(string.format("RESULT %.1f %d %d %d %d %d\n", s.requests / (s.duration / 1e6),
    latency:percentile(50), latency:percentile(99), e.connect + e.read + e.write + e.timeout,
    e.status, s.requests))
end
LUA
# url_of PATH SIZE
url_of() {
  case $1 in
    direct | direct_close) echo "http://127.0.0.1:$UP/$2" ;;
    lathe) echo "http://127.0.0.1:$DPORT/$2" ;;
    api_run) echo "http://127.0.0.1:$DPORT/api/v1/runs/$RUN" ;;
    nginx) echo "http://127.0.0.1:$NX/$2" ;;
    nginx_ka) echo "http://127.0.0.1:$NXKA/$2" ;;
  esac
}
# cpu_us PID...: user + system CPU of these processes so far, µs (a process's
# figure includes its threads that have ended).
cpu_us() {
  local t=0 p
  for p in "$@"; do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo $((t * 1000000 / $(getconf CLK_TCK)))
}
# The proxy's processes for a path, whose CPU per request is recorded: the
# daemon (not its runs' monitors), nginx's master and worker.
proxy_pids_of() {
  case $1 in
    lathe | api_run) echo "$DAEMON_PID" ;;
    nginx | nginx_ka) echo "$NGINX_PID" $(pgrep -P "$NGINX_PID") ;;
  esac
}
WRK=(wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --latency -s "$W/bench.lua")
echo "wrk: ${WRK[*]} URL; upstream: $UP_VERSION" >&2
: > "$W/results.tsv"
for rep in $(seq "$REPS"); do
  # The order of the paths rotates every repetition.
  n=${#PATHS[@]}
  order=()
  for i in $(seq 0 $((n - 1))); do order+=("${PATHS[$(((i + rep - 1) % n))]}"); done
  for size in small large; do
    for path in "${order[@]}"; do
      [ "$path" = api_run ] && [ "$size" = large ] && continue
      host="" auth="" conn=""
      [ "$path" = lathe ] && host=$LHOST auth="Bearer $TOKEN"
      [ "$path" = api_run ] && auth="Bearer $TOKEN"
      [ "$path" = direct_close ] && conn=close
      load=$(cut -d' ' -f1 /proc/loadavg)
      pp=$(proxy_pids_of "$path")
      cpu0=$([ -n "$pp" ] && cpu_us $pp || echo 0)
      out=$(WRK_HOST=$host WRK_AUTH=$auth WRK_CONN=$conn "${WRK[@]}" "$(url_of "$path" "$size")")
      cpu=$([ -n "$pp" ] && echo $(($(cpu_us $pp) - cpu0)) || echo -1)
      echo "$out" > "$W/wrk-$rep-$size-$path.txt"
      res=$(echo "$out" | grep '^RESULT' | cut -d' ' -f2-)
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$size" "$path" "$res" "$load" "$cpu" >> "$W/results.tsv"
      echo "rep $rep $size $path: $res (load $load, proxy CPU ${cpu} µs)" >&2
    done
  done
done

# 5. Websocket echo: direct and through Lathe (32-byte frames, one at a time).
cp "$ROOT/tests/integ/proxy_upstream.py" "$W/ws_upstream.py"
RUNS+=("$("$LATHE" run --port 8081 --workdir "$W" -- $PY "$W/ws_upstream.py" tcp env:PORT)")
WSRUN=${RUNS[1]}
for _ in $(seq 100); do [ "$("$LATHE" inspect --json "$WSRUN" | $PY -c 'import json, sys; print(json.load(sys.stdin)["state"])')" = running ] && break; sleep 0.1; done
WSP=$(served_port "$WSRUN")
wait_http "http://127.0.0.1:$WSP/"
: > "$W/ws.tsv"
for rep in $(seq "$REPS"); do
  for path in direct lathe; do
    if [ $path = direct ]; then
      res=$($PY "$HERE/proxy_ws.py" "$WSP" "$WS_N" 32)
    else
      res=$($PY "$HERE/proxy_ws.py" "$DPORT" "$WS_N" 32 "$WSRUN.localhost:$DPORT" "Bearer $TOKEN")
    fi
    printf '%s\t%s\t%s\n' "$rep" "$path" "$(echo "$res" | cut -d' ' -f2-)" >> "$W/ws.tsv"
    echo "ws rep $rep $path: $res" >&2
  done
done

# 6. Medians, ratios (within each repetition, then their median), the JSON.
mkdir -p "$(dirname "$OUT")"
$PY - "$W" "$OUT" "$UP_VERSION" "${WRK[*]}" "$("$LATHE" version 2>&1 | head -1)" \
  "$(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo unknown)" "$SMALL" "$LARGE" << 'PY'
import json, statistics, sys, time
w, out, upstream, wrk, version, commit, small, large = sys.argv[1:9]
runs = []
for line in open(f"{w}/results.tsv"):
    rep, size, path, res, load, cpu = line.rstrip("\n").split("\t")
    rps, p50, p99, sockerr, non2xx, n = res.split()
    runs.append(dict(rep=int(rep), size=size, path=path, rps=float(rps), p50_us=int(p50),
                     p99_us=int(p99), socket_errors=int(sockerr), non_2xx=int(non2xx),
                     requests=int(n), load_before=float(load),
                     proxy_cpu_us_per_request=int(cpu) / int(n) if int(cpu) >= 0 else None))
ws = []
for line in open(f"{w}/ws.tsv"):
    rep, path, res = line.rstrip("\n").split("\t")
    p50, p99, mx, n, rate = res.split()
    ws.append(dict(rep=int(rep), path=path, p50_us=int(p50), p99_us=int(p99), max_us=int(mx),
                   n=int(n), msgs_per_s=float(rate)))
paths_of = lambda size: list(dict.fromkeys(r["path"] for r in runs if r["size"] == size))
ratio_to = lambda size: [p for p in paths_of(size) if p not in ("lathe", "api_run")]
med = lambda xs: statistics.median(xs)
summary = {}
for size in ("small", "large"):
    for path in paths_of(size):
        rs = [r for r in runs if r["size"] == size and r["path"] == path]
        summary[f"{size}/{path}"] = {k: med([r[k] for r in rs]) for k in ("rps", "p50_us", "p99_us")}
        cpu = [r["proxy_cpu_us_per_request"] for r in rs if r["proxy_cpu_us_per_request"] is not None]
        summary[f"{size}/{path}"]["proxy_cpu_us_per_request"] = med(cpu) if cpu else None
    for other in ratio_to(size):
        ratios = []
        for rep in sorted({r["rep"] for r in runs}):
            a = {r["path"]: r["rps"] for r in runs if r["size"] == size and r["rep"] == rep}
            ratios.append(a["lathe"] / a[other])
        summary[f"{size}/lathe_over_{other}"] = {"rps_ratios": ratios, "median": med(ratios)}
for path in ("direct", "lathe"):
    xs = [x for x in ws if x["path"] == path]
    summary[f"ws/{path}"] = {k: med([x[k] for x in xs]) for k in ("p50_us", "p99_us", "msgs_per_s")}
# Proxied against direct, the target being at least 0.80 of direct's rate.
for size in ("small", "large"):
    d, l = summary[f"{size}/direct"], summary[f"{size}/lathe"]
    summary[f"{size}/lathe_vs_direct"] = {"rps": l["rps"] / d["rps"],
                                          "p99_direct_over_lathe": d["p99_us"] / l["p99_us"]}
wd, wl = summary["ws/direct"], summary["ws/lathe"]
summary["ws/lathe_vs_direct"] = {"msgs_per_s": wl["msgs_per_s"] / wd["msgs_per_s"],
                                 "p99_direct_over_lathe": wd["p99_us"] / wl["p99_us"]}
bad = [r for r in runs if r["socket_errors"] or r["non_2xx"]]
json.dump({"when": time.strftime("%Y-%m-%d %H:%M:%S"), "lathe": version, "commit": commit,
           "upstream": upstream, "wrk": wrk + " URL/{small,large}", "small_bytes": int(small),
           "large_bytes": int(large), "runs": runs, "websocket": ws, "summary": summary,
           "runs_with_errors": bad}, open(out, "w"), indent=1)
label = {"small": f"{int(small):,} B", "large": f"{int(large):,} B"}
print(f"| body | path | req/s | p50 ms | p99 ms | proxy CPU µs/req |\n|---|---|---:|---:|---:|---:|")
for size in ("small", "large"):
    for path in paths_of(size):
        s = summary[f"{size}/{path}"]
        cpu = s["proxy_cpu_us_per_request"]
        print(f"| {label[size]} | {path} | {s['rps']:,.0f} | {s['p50_us'] / 1000:.2f} | "
              f"{s['p99_us'] / 1000:.2f} | {'' if cpu is None else f'{cpu:.0f}'} |")
for size in ("small", "large"):
    for other in ratio_to(size):
        s = summary[f"{size}/lathe_over_{other}"]
        print(f"lathe/{other} req/s, {label[size]}: median {s['median']:.2f} "
              f"({', '.join(f'{x:.2f}' for x in s['rps_ratios'])})")
for path in ("direct", "lathe"):
    s = summary[f"ws/{path}"]
    print(f"websocket echo {path}: p50 {s['p50_us']} µs, p99 {s['p99_us']} µs, "
          f"{s['msgs_per_s']:,.0f} msgs/s")
for key, what in (("small", "req/s"), ("large", "req/s"), ("ws", "msgs/s")):
    s = summary[f"{key}/lathe_vs_direct"]
    rate = s["rps"] if key != "ws" else s["msgs_per_s"]
    print(f"proxied/direct {key} {what}: {rate:.2f} (target 0.80: "
          f"{'met' if rate >= 0.8 else 'not met'}); p99 direct/proxied {s['p99_direct_over_lathe']:.2f}")
if bad:
    print(f"{len(bad)} wrk runs had errors or non-2xx answers: see runs_with_errors in {out}")
PY
