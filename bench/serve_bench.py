#!/usr/bin/python3
"""Serving benchmark: `lathe serve` next to a bare Boost.Beast server and FastAPI.

Starts everything it measures itself, on 127.0.0.1 only, in a fresh temporary
directory, and stops it by PID. wrk drives closed-loop load (-t1, keep-alive);
an asyncio client drives the open-loop overload of (d).

Measures, in one run:
  (a) lathe serve + the identity backend (v2 infer, JSON) vs bench/bare_beast.cc
      (the same POST, a fixed answer): requests/s and their ratio, with 1 and 2
      I/O threads on each side.
  (b) one TorchScript MLP (built here with torch) behind lathe's /predict vs
      FastAPI + uvicorn doing torch.jit.load + JSON (uvloop and httptools when
      installed), the same JSON request, 32 connections: req/s, p50, p99, the
      ratios; lathe without and with dynamic batching; uvicorn with 1 and 2
      workers. Two FastAPI apps: a lean one (raw Request, JSONResponse, async;
      keys "fastapi_*") and the idiomatic one (a Pydantic request model, a sync
      `def`, a returned dict; keys "fastapi_idiomatic_*").
  (c) dynamic batching on a compute-heavier MLP, 32 connections, with vs without.
  (d) overload: an identity model with a fixed 40 ms per batch (so its capacity
      C is known and small enough for a Python client to overload), 10x C
      offered open-loop (Poisson arrivals), 10% of it `X-Priority: high`, the
      rest `X-Priority: low`; and a second run with high-priority traffic at
      0.1 C: high-priority p50/p99 against the same traffic unloaded, 429s.

Torch runs with one intra-op thread everywhere (threads_per_instance: 1;
torch.set_num_threads(1) in the FastAPI app; OMP_NUM_THREADS=1).
Prints a markdown summary and writes every figure, the commands and the
machine's load average to --out. Needs wrk, a built lathe with its backends,
g++ and Boost headers, /usr/bin/python3 with torch, fastapi and uvicorn:

    bash scripts/deps.sh --bench        # wrk python3-fastapi python3-uvicorn
    apt-get install python3-uvloop python3-httptools   # optional, a faster baseline
    /usr/bin/python3 bench/serve_bench.py --lathe build/lathe --out bench/results/serve_bench.json
"""

import argparse
import asyncio
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from stats import pct  # bench/stats.py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = "/usr/bin/python3"  # Debian's: it sees python3-torch, fastapi, uvicorn
ENV = dict(os.environ, LANG="C.UTF-8", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
ENV.pop("LATHE_LANG", None)

MLP_IN, MLP_OUT = 64, 10          # (b): 64 -> 256 -> 256 -> 10
HEAVY_IN, HEAVY_OUT = 512, 512    # (c): 512 -> 2048 -> 2048 -> 512 (25 MB of weights)
OVERLOAD_DELAY_US = 40000         # (d): the identity model's time per batch
OVERLOAD_BATCH = 8                # (d): rows per batch, so C ~ 8 / 40 ms = 200 req/s
OVERLOAD_QUEUE = 32               # (d): requests waiting per priority level before 429

FASTAPI_APP = r"""
import os, torch
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

torch.set_num_threads(int(os.environ["TORCH_THREADS"]))
model = torch.jit.load(os.environ["MODEL_PATH"]).eval()
app = FastAPI()

@app.post("/predict")
async def predict(request: Request):
    body = await request.json()
    x = torch.tensor(body["instances"], dtype=torch.float32)
    with torch.inference_mode():
        y = model(x)
    return JSONResponse({"predictions": y.tolist()})
"""

# The same endpoint as a FastAPI user usually writes it: a Pydantic request
# model (validated and converted by FastAPI), a plain `def` (FastAPI's advice
# for blocking code such as a torch call: it runs in the thread pool) and a
# returned dict (serialised by FastAPI's jsonable_encoder).
FASTAPI_IDIOMATIC_APP = r"""
import os, torch
from fastapi import FastAPI
from pydantic import BaseModel

torch.set_num_threads(int(os.environ["TORCH_THREADS"]))
model = torch.jit.load(os.environ["MODEL_PATH"]).eval()
app = FastAPI()


class PredictRequest(BaseModel):
    instances: list[list[float]]


@app.post("/predict")
def predict(req: PredictRequest):
    x = torch.tensor(req.instances, dtype=torch.float32)
    with torch.inference_mode():
        y = model(x)
    return {"predictions": y.tolist()}
"""

WRK_LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = {body}
"""


# ---------------------------------------------------------------- helpers ----

def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def post(url, body, headers=None, timeout=60):
    req = urllib.request.Request(url, data=body.encode(), method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def wait_http(url, proc, what, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{what} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.1)
    sys.exit(f"{what} did not answer {url}")


class Proc:
    """A server process we started; stopped by its PID."""

    def __init__(self, name, argv, workdir, env=None, stdout=None):
        self.name = name
        self.log_path = os.path.join(workdir, name + ".log")
        self.log = open(self.log_path, "ab")
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdout=stdout or self.log, stderr=self.log,
                                     env=env or ENV, cwd=workdir)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def ready_port(proc, marker, what, timeout=120):
    """Reads proc's stdout until a line with `marker`; returns the port at its end."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            sys.exit(f"{what} exited before it was ready")
        if marker in line:
            return int(line.decode().strip().rsplit(":", 1)[-1].split()[-1])
    sys.exit(f"{what} did not become ready")


# -------------------------------------------------------------------- wrk ----

UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def parse_ms(text):
    m = re.match(r"([\d.]+)(us|ms|s)$", text)
    return float(m.group(1)) * UNITS[m.group(2)]


def parse_wrk(out):
    r = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
         "requests": int(re.search(r"(\d+) requests in", out).group(1))}
    for p in ("50", "75", "90", "99"):
        m = re.search(rf"^\s+{p}%\s+(\S+)", out, re.M)
        r[f"p{p}_ms"] = parse_ms(m.group(1)) if m else None
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    r["non2xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: (.*)", out)
    r["socket_errors"] = m.group(1).strip() if m else ""
    return r


class Bench:
    def __init__(self, args, tmp):
        self.args = args
        self.tmp = tmp
        self.results = {}
        self.commands = []

    def wrk(self, name, url, body, conns=None):
        conns = conns or self.args.connections
        lua = os.path.join(self.tmp, f"{name}.lua")
        write(lua, WRK_LUA.format(body=json.dumps(body)))
        argv = ["wrk", "-t1", f"-c{conns}", f"-d{self.args.duration}s", "--latency", "-s", lua, url]
        before = loadavg()
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        r = parse_wrk(out)
        r.update(load_before=before, load_after=loadavg(), connections=conns,
                 command=" ".join(argv))
        if r["non2xx"] or r["socket_errors"]:
            log(f"  {name}: {r['non2xx']} non-2xx, socket errors: {r['socket_errors']}")
        log(f"  {name}: {r['rps']:.0f} req/s, p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, "
            f"load {before[0]:.2f}")
        self.results[name] = r
        return r

    # ------------------------------------------------------------ servers ----

    def lathe(self, repo, http_threads):
        argv = [self.args.lathe, "serve", "--repository", repo, "--port", "0", "--gpus", "none",
                "--http-threads", str(http_threads)]
        p = Proc("lathe-" + os.path.basename(repo), argv, self.tmp, stdout=subprocess.PIPE)
        port = ready_port(p.proc, b"http://", "lathe serve")
        self.commands.append(" ".join(argv))
        return p, port

    def bare(self, threads):
        argv = [os.path.join(self.tmp, "bare_beast"), "0", str(threads)]
        p = Proc("bare_beast", argv, self.tmp, stdout=subprocess.PIPE)
        port = ready_port(p.proc, b"ready", "bare_beast")
        return p, port

    def fastapi(self, model, workers, app="fastapi_app"):
        port = free_port()
        argv = [PY, "-m", "uvicorn", f"{app}:app", "--host", "127.0.0.1", "--port", str(port),
                "--workers", str(workers), "--no-access-log", "--log-level", "warning"]
        if self.args.uvloop:
            argv += ["--loop", "uvloop", "--http", "httptools"]
        env = dict(ENV, MODEL_PATH=model, TORCH_THREADS="1")
        p = Proc(f"uvicorn-{app}-{workers}", argv, self.tmp, env=env)
        wait_http(f"http://127.0.0.1:{port}/docs", p.proc, "uvicorn")
        self.commands.append(f"MODEL_PATH={model} TORCH_THREADS=1 OMP_NUM_THREADS=1 " + " ".join(argv))
        return p, port


def repo_with(tmp, name, config, model_file=None):
    repo = os.path.join(tmp, "repo-" + name)
    os.makedirs(os.path.join(repo, name, "1"))
    write(os.path.join(repo, name, "config.yaml"), config)
    if model_file:
        shutil.copy(model_file, os.path.join(repo, name, "1", "model.pt"))
    return repo


def tensor_config(dims_in, dims_out, batching, max_batch=32):
    c = (f"backend: torchscript\nmax_batch_size: {max_batch}\n"
         f"inputs: [{{name: x, datatype: FP32, dims: [{dims_in}]}}]\n"
         f"outputs: [{{name: y, datatype: FP32, dims: [{dims_out}]}}]\n"
         "instances: [{count: 1, device: cpu}]\nthreads_per_instance: 1\n")
    if batching:
        c += "dynamic_batching: {max_queue_delay_us: 1000}\n"
    return c


IDENTITY = """backend: identity
max_batch_size: 32
inputs: [{name: x, datatype: FP32, dims: [4]}]
outputs: [{name: y, datatype: FP32, dims: [4]}]
"""


# ------------------------------------------------------------------ (a) -----

def bench_identity(b):
    log("(a) identity vs bare Beast")
    repo = repo_with(b.tmp, "echo", IDENTITY)
    body = json.dumps({"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32",
                                   "data": [1, 2, 3, 4]}]})
    # The same model with dynamic batching: one hand-off between threads per
    # batch instead of per request.
    repo_batch = repo_with(b.tmp, "echo_batch", IDENTITY + "dynamic_batching: {}\n")
    out = {}
    for threads in (1, 2):
        p, port = b.bare(threads)
        bare = b.wrk(f"a_bare_t{threads}", f"http://127.0.0.1:{port}/v2/models/echo/infer", body)
        p.stop()
        row = {"bare_rps": bare["rps"], "bare_p99_ms": bare["p99_ms"]}
        for key, rp, model in (("lathe", repo, "echo"), ("lathe_batching", repo_batch, "echo_batch")):
            p, port = b.lathe(rp, threads)
            url = f"http://127.0.0.1:{port}/v2/models/{model}/infer"
            assert post(url, body)["outputs"][0]["data"] == [1, 2, 3, 4]
            r = b.wrk(f"a_{key}_t{threads}", url, body)
            p.stop()
            row.update({f"{key}_rps": r["rps"], f"{key}_p99_ms": r["p99_ms"],
                        f"{key}_ratio": r["rps"] / bare["rps"]})
        out[f"io_threads_{threads}"] = row
    return out


# ------------------------------------------------------------------ (b) -----

def check_same(a, b_, what):
    worst = max(abs(x - y) for x, y in zip(a, b_))
    if worst > 1e-4:
        sys.exit(f"{what}: lathe and FastAPI disagree by {worst}")


# The FastAPI apps of (b): JSON key prefix -> module written into the work dir.
# The keys without "idiomatic" are the lean app's, as in earlier result files.
FASTAPI_VARIANTS = (("fastapi", "fastapi_app"), ("fastapi_idiomatic", "fastapi_idiomatic_app"))


def bench_mlp(b, models):
    log("(b) MLP: lathe vs FastAPI (lean and idiomatic)")
    rnd = random.Random(1)
    row = [round(rnd.uniform(-1, 1), 4) for _ in range(MLP_IN)]
    body = json.dumps({"instances": [row]})
    model = os.path.join(models, "mlp.pt")
    out = {}
    fast = {}  # "fastapi_1_worker" ... -> wrk result
    for prefix, app in FASTAPI_VARIANTS:
        for workers in (1, 2):
            key = f"{prefix}_{workers}_worker" + ("s" if workers > 1 else "")
            p, port = b.fastapi(model, workers, app)
            url = f"http://127.0.0.1:{port}/predict"
            fast_pred = post(url, body)["predictions"][0]
            fast[key] = b.wrk(f"b_{prefix}_w{workers}", url, body)
            p.stop()
    for batching in (False, True):
        name = "mlp"
        repo = repo_with(b.tmp, name + ("_batch" if batching else "_nobatch"),
                         tensor_config(MLP_IN, MLP_OUT, batching), model)
        p, port = b.lathe(repo, 1)
        url = f"http://127.0.0.1:{port}/predict"
        check_same(post(url, body)["predictions"][0], fast_pred, "MLP")
        r = b.wrk(f"b_lathe_{'batch' if batching else 'nobatch'}", url, body)
        p.stop()
        key = "batching" if batching else "no_batching"
        out[key] = {"lathe": pick(r)}
        for k, f in fast.items():
            out[key]["vs_" + k] = ratios(r, f)
    for k, f in fast.items():
        out[k] = pick(f)
    return out


def pick(r):
    return {k: r[k] for k in ("rps", "p50_ms", "p99_ms", "non2xx")}


def ratios(lathe, other):
    return {"rps": lathe["rps"] / other["rps"], "p50": lathe["p50_ms"] / other["p50_ms"],
            "p99": lathe["p99_ms"] / other["p99_ms"]}


# ------------------------------------------------------------------ (c) -----

def bench_heavy(b, models):
    log("(c) heavy MLP: batching on vs off")
    rnd = random.Random(2)
    body = json.dumps({"instances": [[round(rnd.uniform(-1, 1), 4) for _ in range(HEAVY_IN)]]})
    model = os.path.join(models, "heavy.pt")
    out = {}
    for batching in (False, True):
        repo = repo_with(b.tmp, "heavy" + ("_batch" if batching else "_nobatch"),
                         tensor_config(HEAVY_IN, HEAVY_OUT, batching), model)
        p, port = b.lathe(repo, 1)
        url = f"http://127.0.0.1:{port}/predict"
        assert len(post(url, body)["predictions"][0]) == HEAVY_OUT
        r = b.wrk(f"c_heavy_{'batch' if batching else 'nobatch'}", url, body)
        r["batch_size_mean"] = mean_batch(port, "heavy" + ("_batch" if batching else "_nobatch"))
        p.stop()
        out["batching" if batching else "no_batching"] = dict(pick(r), batch_size_mean=r["batch_size_mean"])
    out["speedup_rps"] = out["batching"]["rps"] / out["no_batching"]["rps"]
    return out


def mean_batch(port, model):
    """Mean rows per executed batch from lathe's own histogram."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    def one(metric):
        m = re.search(rf'^{metric}{{model="{model}",version="1"}} ([\d.e+]+)$', text, re.M)
        return float(m.group(1)) if m else None
    s, n = one("lathe_serve_batch_size_sum"), one("lathe_serve_batch_size_count")
    return s / n if s is not None and n else None


# ------------------------------------------------------------------ (d) -----

class OpenLoop:
    """Poisson arrivals per class over keep-alive connections (a pool per class).

    Latency runs from the scheduled arrival, so a slow client or a full pool
    shows up as latency rather than hiding it (no coordinated omission)."""

    MAX_CONNS = 900  # lathe's default limit is 1024

    def __init__(self, port, path, body):
        self.port, self.path, self.body = port, path, body.encode()
        self.pools = {}
        self.conns = 0
        self.samples = []  # (class, status, latency_ms)
        self.dropped = {}  # class -> arrivals with no connection available

    def request_bytes(self, prio):
        return (f"POST {self.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"X-Priority: {prio}\r\nContent-Length: {len(self.body)}\r\n\r\n").encode() + self.body

    async def one(self, cls, t_sched):
        pool = self.pools.setdefault(cls, [])
        if pool:
            reader, writer = pool.pop()
        elif self.conns < self.MAX_CONNS:
            self.conns += 1
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        else:
            self.dropped[cls] = self.dropped.get(cls, 0) + 1
            return
        try:
            writer.write(self.request_bytes(cls))
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            n = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))
            await reader.readexactly(n)
        except (OSError, asyncio.IncompleteReadError):
            self.conns -= 1
            self.samples.append((cls, -1, (time.monotonic() - t_sched) * 1e3))
            return
        self.samples.append((cls, status, (time.monotonic() - t_sched) * 1e3))
        if re.search(rb"(?i)connection:\s*close", head):
            writer.close()
            self.conns -= 1
        else:
            pool.append((reader, writer))

    async def run(self, rates, duration):
        rnd = random.Random(3)
        t0 = time.monotonic()
        nxt = {cls: t0 + rnd.expovariate(r) for cls, r in rates.items() if r > 0}
        tasks = set()
        while nxt:
            cls, t = min(nxt.items(), key=lambda kv: kv[1])
            if t - t0 > duration:
                break
            delay = t - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(self.one(cls, t))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            nxt[cls] = t + rnd.expovariate(rates[cls])
        if tasks:
            await asyncio.wait(tasks, timeout=60)
        for pool in self.pools.values():
            for _, w in pool:
                w.close()
        return time.monotonic() - t0


def summarize(samples, cls, duration):
    lat = [l for c, s, l in samples if c == cls and s == 200]
    statuses = {}
    for c, s, _ in samples:
        if c == cls:
            statuses[str(s)] = statuses.get(str(s), 0) + 1
    return {"sent": sum(statuses.values()), "statuses": statuses,
            "ok_per_s": len(lat) / duration,
            "p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99), "max_ms": max(lat) if lat else None}


def open_loop(port, path, body, rates, duration):
    client = OpenLoop(port, path, body)
    before = loadavg()
    elapsed = asyncio.run(client.run(rates, duration))
    out = {"rates_per_s": rates, "duration_s": duration, "elapsed_s": elapsed,
           "client_dropped": client.dropped, "load_before": before, "load_after": loadavg()}
    for cls in rates:
        out[cls] = summarize(client.samples, cls, duration)
    return out


def bench_overload(b):
    log("(d) overload with priorities")
    config = (f"backend: identity\nmax_batch_size: {OVERLOAD_BATCH}\n"
              "inputs: [{name: x, datatype: FP32, dims: [4]}]\n"
              "outputs: [{name: y, datatype: FP32, dims: [4]}]\n"
              f"parameters: {{delay_us: {OVERLOAD_DELAY_US}}}\n"
              "dynamic_batching:\n  max_queue_delay_us: 1000\n"
              f"  queue: {{max_size: {OVERLOAD_QUEUE}}}\n")
    repo = repo_with(b.tmp, "slow", config)
    body = json.dumps({"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32",
                                   "data": [1, 2, 3, 4]}]})
    path = "/v2/models/slow/infer"
    p, port = b.lathe(repo, 1)
    url = f"http://127.0.0.1:{port}{path}"
    cap = b.wrk("d_capacity", url, body)["rps"]
    d = b.args.overload_duration
    out = {"capacity_rps": cap, "model": {"delay_us_per_batch": OVERLOAD_DELAY_US,
                                          "max_batch_size": OVERLOAD_BATCH,
                                          "queue_max_size_per_level": OVERLOAD_QUEUE}}
    log(f"  capacity {cap:.0f} req/s; open loop for {d} s per run")
    # The same high-priority traffic alone, then under 10x overload.
    out["alone_high_0.1C"] = open_loop(port, path, body, {"high": 0.1 * cap}, d)
    out["alone_high_1C"] = open_loop(port, path, body, {"high": cap}, d)
    out["overload_10x_high_10pct"] = open_loop(port, path, body, {"high": cap, "low": 9 * cap}, d)
    out["overload_10x_high_0.1C"] = open_loop(port, path, body, {"high": 0.1 * cap, "low": 10 * cap}, d)
    p.stop()
    for k, v in out.items():
        if isinstance(v, dict) and "high" in v:
            h, lo = v["high"], v.get("low", {})
            log(f"  {k}: high p50 {fmt(h['p50_ms'])} p99 {fmt(h['p99_ms'])} ms {h['statuses']}; "
                f"low {lo.get('statuses')}")
    return out


def fmt(x):
    return "-" if x is None else f"{x:.1f}"


# ------------------------------------------------------------------ main -----

def versions(args):
    def first(argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True).stdout.strip().splitlines()[0]
        except (OSError, IndexError):
            return None
    mods = subprocess.run([PY, "-c", "import fastapi, uvicorn, torch; "
                           "print(fastapi.__version__, uvicorn.__version__, torch.__version__)"],
                          capture_output=True, text=True).stdout.split()
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {"lathe": first([args.lathe, "version"]), "commit": commit,
            "wrk": first(["wrk", "--version"]), "fastapi": mods[0] if mods else None,
            "uvicorn": mods[1] if len(mods) > 1 else None, "torch": mods[2] if len(mods) > 2 else None,
            "uvloop_httptools": args.uvloop, "python": platform.python_version()}


def machine():
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpus": os.cpu_count(), "cpu_model": model, "kernel": platform.release()}


def print_summary(res):
    a, b_, c = res.get("identity"), res.get("mlp"), res.get("heavy")
    if a:
        print("\n(a) identity vs bare Beast (req/s)")
        for k, v in a.items():
            print(f"  {k}: bare {v['bare_rps']:.0f}; lathe {v['lathe_rps']:.0f} "
                  f"(ratio {v['lathe_ratio']:.2f}); with batching {v['lathe_batching_rps']:.0f} "
                  f"(ratio {v['lathe_batching_ratio']:.2f})")
    if b_:
        print("\n(b) MLP, 32 connections: req/s, p50 ms, p99 ms")
        fast = [k for k in b_ if k.startswith("fastapi")]
        for k in fast:
            v = b_[k]
            print(f"  {k}: {v['rps']:.0f}, {v['p50_ms']:.2f}, {v['p99_ms']:.2f}")
        for k in ("no_batching", "batching"):
            v = b_[k]["lathe"]
            print(f"  lathe {k}: {v['rps']:.0f}, {v['p50_ms']:.2f}, {v['p99_ms']:.2f}")
            for f in fast:
                r = b_[k]["vs_" + f]
                print(f"    vs {f}: x{r['rps']:.1f} req/s, p99 x{r['p99']:.2f}")
    if c:
        print("\n(c) heavy MLP, 32 connections")
        for k in ("no_batching", "batching"):
            v = c[k]
            print(f"  {k}: {v['rps']:.0f} req/s, p50 {v['p50_ms']:.2f}, p99 {v['p99_ms']:.2f}, "
                  f"mean batch {v['batch_size_mean']}")
        print(f"  speedup x{c['speedup_rps']:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lathe", default=os.path.join(REPO, "build", "lathe"))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "serve_bench.json"))
    ap.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--overload-duration", type=int, default=15, help="seconds per open-loop run")
    ap.add_argument("--only", default="abcd", help="which parts, e.g. 'ab'")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (logs)")
    args = ap.parse_args()
    args.lathe = os.path.abspath(args.lathe)
    if not shutil.which("wrk"):
        sys.exit("wrk is missing: bash scripts/deps.sh --bench")
    args.uvloop = subprocess.run([PY, "-c", "import uvloop, httptools"], capture_output=True).returncode == 0

    tmp = tempfile.mkdtemp(prefix="serve-bench-")
    b = Bench(args, tmp)
    log(f"work dir {tmp}; load {loadavg()}")
    build = ["g++", "-O2", "-std=c++20", os.path.join(HERE, "bare_beast.cc"), "-o",
             os.path.join(tmp, "bare_beast"), "-pthread"]
    subprocess.run(build, check=True)
    subprocess.run([PY, os.path.join(HERE, "mlp_model.py"), f"{tmp}/mlp.pt=64,256,256,10",
                    f"{tmp}/heavy.pt=512,2048,2048,512"], check=True, env=ENV)
    write(os.path.join(tmp, "fastapi_app.py"), FASTAPI_APP)
    write(os.path.join(tmp, "fastapi_idiomatic_app.py"), FASTAPI_IDIOMATIC_APP)

    res = {"machine": machine(), "versions": versions(args), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
           "load_start": loadavg(), "settings": {"duration_s": args.duration, "connections": args.connections,
                                                 "wrk": "-t1 --latency, keep-alive",
                                                 "bare_beast_build": " ".join(build[:4]) + " -pthread"}}
    try:
        if "a" in args.only:
            res["identity"] = bench_identity(b)
        if "b" in args.only:
            res["mlp"] = bench_mlp(b, tmp)
        if "c" in args.only:
            res["heavy"] = bench_heavy(b, tmp)
        if "d" in args.only:
            res["overload"] = bench_overload(b)
    finally:
        res["load_end"] = loadavg()
        res["wrk_runs"] = b.results
        res["server_commands"] = b.commands
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print_summary(res)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
