#!/bin/bash
# Instructions per request of `lathe serve` (all its threads) with the identity
# model, counted by callgrind after start-up and a warm-up: a noise-free measure
# of the server's own cost, for comparing two builds.
#   bench/serve_callgrind.sh [LATHE]      (default build/lathe; needs valgrind; wrk,
#   else a Python client with the same 8 keep-alive connections sends the load)
set -euo pipefail
LATHE=$(realpath "${1:-build/lathe}")
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/repo/echo/1"
touch "$W/repo/echo/1/READY"
cat > "$W/repo/echo/config.yaml" <<'YAML'
backend: identity
max_batch_size: 32
inputs: [{name: x, datatype: FP32, dims: [4]}]
outputs: [{name: y, datatype: FP32, dims: [4]}]
YAML
cat > "$W/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = "{\"inputs\": [{\"name\": \"x\", \"shape\": [1, 4], \"datatype\": \"FP32\", \"data\": [1, 2, 3, 4]}]}"
LUA
valgrind --tool=callgrind --callgrind-out-file="$W/cg.out" "$LATHE" serve --repository "$W/repo" --port 0 \
  --gpus none --http-threads 1 > "$W/log" 2>&1 &
PID=$!
PORT=
for _ in $(seq 3000); do
  PORT=$(grep -o 'http://[0-9.]*:[0-9]*' "$W/log" | head -1 | sed 's/.*://') || true
  [ -n "$PORT" ] && break
  sleep 0.1
done
URL=http://127.0.0.1:$PORT/v2/models/echo/infer
# load SECONDS: sends requests for that long and prints how many were answered.
load() {
  if command -v wrk > /dev/null; then
    wrk -t1 -c8 -d"$1"s -s "$W/post.lua" "$URL" | grep -o '[0-9]* requests in' | cut -d' ' -f1
    return
  fi
  /usr/bin/python3 - "$PORT" "$1" <<'PY'
import http.client, sys, threading, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
body = b'{"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}'
end, done = time.monotonic() + seconds, [0] * 8
def client(i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while time.monotonic() < end:
        c.request("POST", "/v2/models/echo/infer", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        done[i] += r.status == 200
threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(sum(done))
PY
}
load 2 > /dev/null
callgrind_control -z $PID > /dev/null 2>&1
N=$(load 6)
callgrind_control -d $PID > /dev/null 2>&1
sleep 0.5
kill -INT $PID
wait $PID 2> /dev/null || true
F=$(ls -t "$W"/cg.out.* | head -1)
IR=$(callgrind_annotate "$F" 2> /dev/null | grep -m1 "PROGRAM TOTALS" | awk '{gsub(",", "", $1); print $1}')
echo "requests $N  instructions $IR  per request $((IR / N))"
