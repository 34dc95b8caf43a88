"""`lathe serve` end to end: the real binary on loopback with real models.

Models are built in setUpClass with Debian's /usr/bin/python3 + torch: a
TorchScript MLP and a small CNN (outputs compared with PyTorch's within 1e-5),
process handlers (JSON /predict, v2 tensors, a crash, a hang), a state_dict
saved with torch.save (the clear error). Also: hot swap in watch mode under
load (a half-copied version is not loaded, a broken one keeps the old serving),
SIGTERM drain without failed requests, 429 on a full queue, 413, `promtool
check metrics` on a live scrape.
No test asserts a wall-clock bound; the server binds port 0.
"""
import atexit
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

from harness import LATHE, PY


class Server:
    def __init__(self, *args, env=None):
        self.args = list(args)
        self.dir = tempfile.mkdtemp(prefix="lathe-serve-integ-")
        # Removed when the test process ends: a test may read the log after stop().
        atexit.register(shutil.rmtree, self.dir, True)
        self.log_path = os.path.join(self.dir, "serve.log")
        self.env = english_env(env)
        self.proc = None
        self.port = None

    def start(self, timeout=120):
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([LATHE, "serve", "--port", "0", "--gpus", "none", *self.args],
                                     stdout=subprocess.PIPE, stderr=self.log, env=self.env)
        deadline = time.time() + timeout
        line = b""
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"lathe serve exited with {self.proc.returncode}:\n{self.read_log()}")
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if not r:
                continue
            line = self.proc.stdout.readline()
            if b"http://" in line:  # "lathe serve ready on http://HOST:PORT" (in either language)
                self.port = int(line.decode().strip().rsplit(":", 1)[1].split()[0])
                return self
        raise RuntimeError("lathe serve did not become ready:\n" + self.read_log())

    def read_log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-6000:]
        except OSError:
            return ""

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def request(self, method, path, body=None, headers=None, timeout=60):
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        req = urllib.request.Request(self.url(path), data=data, method=method, headers=headers or {})
        if data is not None and "Content-Type" not in (headers or {}):
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read(), dict(e.headers)

    def json(self, method, path, body=None, want=200, headers=None):
        status, data, _ = self.request(method, path, body, headers)
        if status != want:
            raise AssertionError(f"{method} {path} -> {status} (wanted {want}): {data[:2000]!r}\n"
                                 f"log:\n{self.read_log()}")
        return json.loads(data)

    def wait_for(self, pred, what, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if pred():
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}\n{self.read_log()}")

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        self.proc.stdout.close()
        return self.proc.returncode


def english_env(extra=None):
    e = dict(os.environ, LANG="C.UTF-8", **(extra or {}))
    for k in ("LATHE_LANG", "LC_ALL", "LC_MESSAGES"):
        e.pop(k, None)
    return e


def run_serve(*args, timeout=120):
    """Runs `lathe serve` expecting it to fail at start-up; returns (rc, stderr)."""
    p = subprocess.run([LATHE, "serve", "--port", "0", "--gpus", "none", *args], capture_output=True,
                       text=True, timeout=timeout, env=english_env())
    return p.returncode, p.stderr


# The TorchScript tests need Debian's python3-torch (to build the models) and the
# backend, which is built only where CMake found LibTorch.
HAVE_TORCH = (subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0 and
              os.path.exists(os.path.join(os.path.dirname(os.path.abspath(LATHE)), "backends",
                                          "liblathe_backend_torchscript.so")))
HAVE_PROMTOOL = shutil.which("promtool") is not None

BUILD_MODELS = r"""
import sys, torch
out = sys.argv[1]
torch.manual_seed(0)
mlp = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
torch.jit.script(mlp.eval()).save(out + "/mlp.pt")
class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 8 * 8, 5)
    def forward(self, image):
        return self.fc(torch.relu(self.conv(image)).flatten(1))
torch.jit.script(CNN().eval()).save(out + "/cnn.pt")
torch.save(mlp.state_dict(), out + "/state_dict.pt")
torch.manual_seed(1)
mlp2 = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
torch.jit.script(mlp2.eval()).save(out + "/mlp2.pt")
class Heads(torch.nn.Module):  # two outputs, as a tuple
    def forward(self, x):
        return x * 2, x.sum(1)
torch.jit.script(Heads()).save(out + "/heads.pt")
"""

RUN_MODEL = r"""
import json, sys, torch
m = torch.jit.load(sys.argv[1])
x = torch.tensor(json.loads(sys.stdin.read()), dtype=torch.float32)
with torch.no_grad():
    print(json.dumps(m(x).tolist()))
"""

HANDLER = r"""
import math, os, time

def load(model_dir):
    return {"dir": model_dir, "pid": os.getpid()}

def predict(batch, model):
    out = []
    for req in batch:
        if req.get("crash"):
            os._exit(3)
        if req.get("sleep"):
            time.sleep(req["sleep"])
        while os.path.exists(os.environ.get("HANG_FILE", "/nonexistent")):
            time.sleep(0.02)
        if req.get("nan"):
            out.append({"value": float("nan"), "inf": [math.inf, -math.inf]})
            continue
        out.append({"sum": sum(req.get("x", [])), "pid": model["pid"], "batch": len(batch)})
    return out

def infer(inputs):
    return {"doubled": inputs["x"] * 2, "label": [b"row%d" % i for i in range(inputs["x"].shape[0])]}
"""


def torch_outputs(model_path, rows):
    p = subprocess.run([PY, "-c", RUN_MODEL, model_path], input=json.dumps(rows), capture_output=True,
                       text=True, check=True)
    return json.loads(p.stdout)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


# An identity model (2 floats in, the same 2 out) with dynamic batching; runs
# inline on the I/O thread. Used by test_serve_prometheus and test_serve_inline.
ECHO_CONFIG = """
backend: identity
max_batch_size: 8
inputs: [{name: x, datatype: FP32, dims: [2]}]
outputs: [{name: y, datatype: FP32, dims: [2]}]
dynamic_batching: {max_queue_delay_us: 1000}
"""


class ServeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="lathe-serve-models-")
        cls.repo = os.path.join(cls.tmp, "repo")
        cls.hang = os.path.join(cls.tmp, "hang")
        if HAVE_TORCH:
            write(f"{cls.tmp}/build_models.py", BUILD_MODELS)  # torch.jit.script needs the source in a file
            subprocess.run([PY, f"{cls.tmp}/build_models.py", cls.tmp], check=True)
            os.makedirs(f"{cls.repo}/mlp/1")
            shutil.copy(f"{cls.tmp}/mlp.pt", f"{cls.repo}/mlp/1/model.pt")
            write(f"{cls.repo}/mlp/config.yaml", """
backend: torchscript
max_batch_size: 32
inputs: [{name: x, datatype: FP32, dims: [4]}]
outputs: [{name: y, datatype: FP32, dims: [3]}]
dynamic_batching: {max_queue_delay_us: 2000, preferred_batch_sizes: [8, 16]}
instances: [{count: 1, device: cpu}]
threads_per_instance: 1
""")
            os.makedirs(f"{cls.repo}/cnn/1")
            shutil.copy(f"{cls.tmp}/cnn.pt", f"{cls.repo}/cnn/1/model.pt")
            write(f"{cls.repo}/cnn/config.yaml", """
backend: torchscript
max_batch_size: 8
inputs: [{name: image, datatype: FP32, dims: [1, 8, 8]}]
outputs: [{name: logits, datatype: FP32, dims: [5]}]
dynamic_batching: {}
""")
        write(f"{cls.repo}/handler/1/handler.py", HANDLER)
        write(f"{cls.repo}/handler/config.yaml", f"""
backend: process
max_batch_size: 16
dynamic_batching: {{max_queue_delay_us: 1000}}
instances: [{{count: 2}}]
warmup: {{json: {{"x": [1]}}}}
health_probe_interval: 300ms
parameters: {{env: {{HANG_FILE: {cls.hang}}}}}
""")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.stop(signal.SIGKILL)
        if os.path.exists(self.hang):
            os.remove(self.hang)

    def serve(self, *args, **kw):
        s = Server(*args, **kw)
        self.servers.append(s)
        return s.start()

    def repo_server(self):
        return self.serve("--repository", self.repo)

    # --- TorchScript ---

    @unittest.skipUnless(HAVE_TORCH, "needs python3-torch")
    def test_mlp_matches_pytorch_json_binary_and_concurrent(self):
        s = self.repo_server()
        rows = [[0.1 * i, -0.2 * i, 0.3, 1.0 + i] for i in range(5)]
        want = torch_outputs(f"{self.repo}/mlp/1/model.pt", rows)
        out = s.json("POST", "/v2/models/mlp/infer",
                     {"inputs": [{"name": "x", "shape": [5, 4], "datatype": "FP32", "data": rows}]})
        self.assertEqual(out["outputs"][0]["shape"], [5, 3])
        got = out["outputs"][0]["data"]
        for g, w in zip(got, sum(want, [])):
            self.assertAlmostEqual(g, w, delta=1e-5)
        # The binary extension, both ways.
        header = json.dumps({"inputs": [{"name": "x", "shape": [5, 4], "datatype": "FP32",
                                         "parameters": {"binary_data_size": 80}}],
                             "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode()
        body = header + struct.pack("<20f", *sum(rows, []))
        status, data, headers = s.request("POST", "/v2/models/mlp/infer", body,
                                          {"Inference-Header-Content-Length": str(len(header))})
        self.assertEqual(status, 200, data)
        n = int(headers["Inference-Header-Content-Length"])
        vals = struct.unpack("<15f", data[n:])
        for g, w in zip(vals, sum(want, [])):
            self.assertAlmostEqual(g, w, delta=1e-5)
        # Many single-row requests at once: batched together, each gets its own row back.
        errors = []

        def one(i):
            try:
                r = s.json("POST", "/v2/models/mlp/infer",
                           {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": rows[i % 5]}]})
                for g, w in zip(r["outputs"][0]["data"], want[i % 5]):
                    if abs(g - w) > 1e-5:
                        errors.append((i, g, w))
            except Exception as e:  # noqa: BLE001 - collected and reported below
                errors.append(e)
        threads = [threading.Thread(target=one, args=(i,)) for i in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        # TF-Serving style /v1 :predict.
        p = s.json("POST", "/v1/models/mlp:predict", {"instances": rows[:2]})
        for g, w in zip(sum(p["predictions"], []), sum(want[:2], [])):
            self.assertAlmostEqual(g, w, delta=1e-5)
        meta = s.json("GET", "/v2/models/mlp")
        self.assertEqual(meta["inputs"], [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}])

    @unittest.skipUnless(HAVE_TORCH, "needs python3-torch")
    def test_cnn_matches_pytorch(self):
        s = self.repo_server()
        image = [[[[((r * 8 + c) % 7) / 7.0 - 0.5 for c in range(8)] for r in range(8)]] for _ in range(2)]
        want = torch_outputs(f"{self.repo}/cnn/1/model.pt", image)
        out = s.json("POST", "/v2/models/cnn/infer",
                     {"inputs": [{"name": "image", "shape": [2, 1, 8, 8], "datatype": "FP32", "data": image}]})
        for g, w in zip(out["outputs"][0]["data"], sum(want, [])):
            self.assertAlmostEqual(g, w, delta=1e-5)

    @unittest.skipUnless(HAVE_TORCH, "needs python3-torch")
    def test_model_flag_serves_a_file_with_defaults(self):
        s = self.serve("--model", f"m={self.tmp}/mlp.pt")
        meta = s.json("GET", "/v2/models/m")
        self.assertEqual(meta["platform"], "torchscript")
        self.assertEqual([i["name"] for i in meta["inputs"]], ["input"])  # forward()'s argument, from the model
        out = s.json("POST", "/v2/models/m/infer",
                     {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]})
        want = torch_outputs(f"{self.tmp}/mlp.pt", [[1, 2, 3, 4]])
        for g, w in zip(out["outputs"][0]["data"], want[0]):
            self.assertAlmostEqual(g, w, delta=1e-5)

    @unittest.skipUnless(HAVE_TORCH, "needs python3-torch")
    def test_a_bare_files_metadata_names_the_outputs_a_client_can_ask_for(self):
        # A KServe v2 client forms its request from the metadata alone.
        s = self.serve("--model", f"m={self.tmp}/mlp.pt", "--model", f"h={self.tmp}/heads.pt")
        want = {"m": (["output__0"], torch_outputs(f"{self.tmp}/mlp.pt", [[1, 2, 3, 4]])[0]),
                "h": (["output__0", "output__1"], [10.0])}  # heads: (x * 2, x.sum(1))
        for model, (names, last) in want.items():
            with self.subTest(model):
                meta = s.json("GET", f"/v2/models/{model}")
                self.assertEqual([o["name"] for o in meta["outputs"]], names)
                body = {"inputs": [{"name": meta["inputs"][0]["name"], "shape": [1, 4], "datatype": "FP32",
                                    "data": [1, 2, 3, 4]}],
                        "outputs": [{"name": meta["outputs"][-1]["name"]}]}
                out = s.json("POST", f"/v2/models/{model}/infer", body)
                self.assertEqual([o["name"] for o in out["outputs"]], names[-1:])
                for g, w in zip(out["outputs"][0]["data"], last):
                    self.assertAlmostEqual(g, w, delta=1e-5)
        # An output the model does not have is refused, naming those it has.
        status, data, _ = s.request("POST", "/v2/models/h/infer", {
            "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}],
            "outputs": [{"name": "output__2"}]})
        self.assertEqual(status, 400, data)
        self.assertIn("output__0, output__1", json.loads(data)["error"])

    @unittest.skipUnless(HAVE_TORCH, "needs python3-torch")
    def test_tensors_a_bare_model_cannot_take_are_400_without_a_traceback(self):
        # No config: nothing is known of the model's inputs before forward() runs.
        s = self.serve("--model", f"m={self.tmp}/mlp.pt")
        cases = {
            "FP64": ("/v2/models/m/infer",
                     {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP64", "data": [1, 2, 3, 4]}]},
                     "serve.wrong_datatype"),
            "wrong shape": ("/v2/models/m/infer",
                            {"inputs": [{"name": "input", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]},
                            "serve.wrong_shape"),
            "wrong shape, :predict": ("/v1/models/m:predict", {"instances": [[1.5, 2.5, 3.5]]},
                                      "serve.wrong_shape"),
            "wrong shape, /predict": ("/predict", {"instances": [[1.5, 2.5, 3.5]]}, "serve.wrong_shape"),
        }
        for what, (path, body, msg_id) in cases.items():
            with self.subTest(what):
                status, data, _ = s.request("POST", path, body)
                self.assertEqual(status, 400, data)
                err = json.loads(data)
                self.assertEqual(err["code"], "invalid_argument")
                self.assertEqual(err.get("msg_id"), msg_id, err)  # as with a config
                self.assertIn("forward()", err["error"])
                for leak in ("Traceback", ".py", "code/__torch__", "\n"):
                    self.assertNotIn(leak, err["error"])
                self.assertLess(len(err["error"]), 600)
        self.assertIn("Traceback of TorchScript", s.read_log())  # the whole error is in the server's log
        out = s.json("POST", "/v2/models/m/infer",
                     {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]})
        self.assertEqual(out["outputs"][0]["shape"], [1, 3])

    @unittest.skipUnless(HAVE_TORCH, "needs python3-torch")
    def test_state_dict_is_explained(self):
        rc, err = run_serve("--model", f"bad={self.tmp}/state_dict.pt")
        self.assertEqual(rc, 2, err)  # invalid input
        self.assertIn("torch.save", err)
        self.assertIn("torch.jit.script(model).save('model.pt')", err)
        rc, err = run_serve("--model", f"gone={self.tmp}/nothing.pt")
        self.assertEqual(rc, 3, err)

    @unittest.skipUnless(HAVE_TORCH, "needs python3-torch")
    def test_watch_hot_swaps_under_load_without_failed_requests(self):
        repo = f"{self.tmp}/watchrepo"
        os.makedirs(f"{repo}/mlp/1")
        shutil.copy(f"{self.tmp}/mlp.pt", f"{repo}/mlp/1/model.pt")
        write(f"{repo}/mlp/config.yaml", """
backend: torchscript
max_batch_size: 8
inputs: [{name: x, datatype: FP32, dims: [4]}]
outputs: [{name: y, datatype: FP32, dims: [3]}]
dynamic_batching: {max_queue_delay_us: 500}
""")
        s = self.serve("--repository", repo, "--model-control", "watch", "--watch-interval", "100ms")
        row = [0.5, -1, 2, 0.25]
        want = {"1": torch_outputs(f"{self.tmp}/mlp.pt", [row])[0],
                "2": torch_outputs(f"{self.tmp}/mlp2.pt", [row])[0]}
        stop, failures, seen = threading.Event(), [], []

        def load():
            while not stop.is_set():
                status, body, _ = s.request("POST", "/v2/models/mlp/infer", {
                    "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": row}]})
                if status != 200:
                    failures.append((status, body))
                    continue
                out = json.loads(body)
                v = out["model_version"]
                if any(abs(g - w) > 1e-5 for g, w in zip(out["outputs"][0]["data"], want.get(v, []))) or v not in want:
                    failures.append(("wrong output", v, out))
                seen.append(v)
        clients = [threading.Thread(target=load) for _ in range(4)]
        for t in clients:
            t.start()
        try:
            s.wait_for(lambda: len(seen) > 20, "answers from version 1")
            # Version 2 arrives half-copied first: it must not be loaded until whole.
            with open(f"{self.tmp}/mlp2.pt", "rb") as f:
                data = f.read()
            os.makedirs(f"{repo}/mlp/2")
            with open(f"{repo}/mlp/2/model.pt", "wb") as f:
                f.write(data[:len(data) // 2])
                f.flush()
                time.sleep(1.0)  # several scans see a stable but truncated archive
                self.assertNotIn("2", seen)
                f.write(data[len(data) // 2:])
            s.wait_for(lambda: seen[-1:] == ["2"], "answers from version 2")
            # A broken version 3 (a state_dict) fails to load; version 2 keeps serving.
            os.makedirs(f"{repo}/mlp/3")
            shutil.copy(f"{self.tmp}/state_dict.pt", f"{repo}/mlp/3/model.pt")
            s.wait_for(lambda: "failed to load" in s.read_log(), "the failed load of version 3")
            n = len(seen)
            s.wait_for(lambda: len(seen) > n + 20, "more answers")
        finally:
            stop.set()
            for t in clients:
                t.join()
        self.assertEqual(failures, [])
        self.assertNotIn("3", seen)
        first2 = seen.index("2")
        self.assertEqual(set(seen[:first2]), {"1"})
        self.assertEqual(set(seen[first2:]) - {"1"}, {"2"})
        self.assertEqual(seen[-1], "2")
        idx = s.json("POST", "/v2/repository/index")
        self.assertEqual([(m["name"], m["version"]) for m in idx if "version" in m], [("mlp", "2")])

    # --- process handlers ---

    def test_process_handler_json_tensors_and_nan_policy(self):
        s = self.repo_server()
        r = s.json("POST", "/v1/models/handler:predict", {"x": [1, 2, 3.5]})
        self.assertEqual(r["sum"], 6.5)
        self.assertEqual(s.json("POST", "/predict?model=handler", {"x": [1]})["sum"], 1)
        # Non-finite values come back as strings; a NaN literal in the request is a 400.
        self.assertEqual(s.json("POST", "/predict?model=handler", {"nan": True}),
                         {"value": "NaN", "inf": ["Infinity", "-Infinity"]})
        status, body, _ = s.request("POST", "/predict?model=handler", b'{"x": [NaN]}')
        self.assertEqual(status, 400)
        self.assertIn("NaN", json.loads(body)["error"])
        # v2 tensors reach infer() as numpy arrays.
        out = s.json("POST", "/v2/models/handler/infer",
                     {"inputs": [{"name": "x", "shape": [2, 2], "datatype": "INT32", "data": [1, 2, 3, 4]}]})
        by_name = {o["name"]: o for o in out["outputs"]}
        self.assertEqual(by_name["doubled"]["data"], [2, 4, 6, 8])
        self.assertEqual(by_name["doubled"]["datatype"], "INT32")
        self.assertEqual(by_name["label"]["data"], ["row0", "row1"])
        self.assertEqual(by_name["label"]["datatype"], "BYTES")
        # Concurrent JSON requests are batched into one predict() call.
        results = []

        def one():
            results.append(s.json("POST", "/predict?model=handler", {"x": [1], "sleep": 0.05}))
        threads = [threading.Thread(target=one) for _ in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(len(results), 24)
        self.assertGreater(max(r["batch"] for r in results), 1)
        self.assertEqual(len({r["pid"] for r in results}), 2)  # two instances, two workers

    def test_crashed_worker_fails_its_requests_with_503_then_recovers(self):
        s = self.repo_server()
        status, body, _ = s.request("POST", "/predict?model=handler", {"crash": True})
        self.assertEqual(status, 503, body)
        self.assertIn("exited with code 3", json.loads(body)["error"])
        for _ in range(4):  # both instances serve again (the crashed one restarted)
            self.assertEqual(s.json("POST", "/predict?model=handler", {"x": [2]})["sum"], 2)

    def test_hanging_handler_is_not_ready_within_a_probe_interval_then_recovers(self):
        s = self.repo_server()
        s.wait_for(lambda: s.request("GET", "/v2/models/handler/ready")[0] == 200, "ready")
        with open(self.hang, "w"):
            pass
        s.wait_for(lambda: s.request("GET", "/v2/models/handler/ready")[0] == 503, "not ready")
        self.assertEqual(s.request("GET", "/v2/health/ready")[0], 503)
        os.remove(self.hang)
        s.wait_for(lambda: s.request("GET", "/v2/models/handler/ready")[0] == 200, "ready again")

    def test_sigterm_drains_admitted_requests(self):
        s = self.repo_server()
        results, errors = [], []

        def one():
            try:
                results.append(s.json("POST", "/predict?model=handler", {"x": [1], "sleep": 0.3}))
            except Exception as e:  # noqa: BLE001
                errors.append(e)
        threads = [threading.Thread(target=one) for _ in range(6)]
        for t in threads:
            t.start()
        s.wait_for(lambda: b"lathe_serve_inflight_requests" in s.request("GET", "/metrics")[1] and
                   inflight(s) >= 6, "requests admitted")
        s.proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 6)
        self.assertEqual(s.proc.wait(timeout=60), 0)

    def test_full_queue_gets_429(self):
        write(f"{self.tmp}/small/config.yaml", f"""
backend: process
max_batch_size: 1
dynamic_batching: {{queue: {{max_size: 1}}}}
warmup: false
parameters: {{env: {{HANG_FILE: {self.hang}}}}}
""")
        write(f"{self.tmp}/small/1/handler.py", HANDLER)
        s = self.serve("--model", f"small={self.tmp}/small")
        with open(self.hang, "w"):
            pass
        codes = []
        threads = [threading.Thread(target=lambda: codes.append(
            s.request("POST", "/predict", {"x": [1]})[0])) for _ in range(2)]
        threads[0].start()
        s.wait_for(lambda: inflight(s) == 1 and metric_sum(s, "lathe_serve_queue_length") == 0, "one running")
        threads[1].start()
        s.wait_for(lambda: inflight(s) == 2, "one running, one queued")
        status, body, _ = s.request("POST", "/predict", {"x": [1]}, headers={"Content-Type": "application/json"})
        self.assertEqual(status, 429, body)
        os.remove(self.hang)
        for t in threads:
            t.join()
        self.assertEqual(codes, [200, 200])

    # --- configuration, limits, metrics ---

    def test_bad_config_names_file_field_and_allowed_values(self):
        write(f"{self.tmp}/badrepo/m/config.yaml", "backend: process\ndynamic_batching: {}\nmax_batch_size: 4\n"
                                                    "instances: [{device: gpu}]\n")
        rc, err = run_serve("--repository", f"{self.tmp}/badrepo")
        self.assertEqual(rc, 2, err)
        self.assertIn(f"{self.tmp}/badrepo/m/config.yaml", err)
        self.assertIn("instances[0].device", err)
        self.assertIn("cpu, cuda:N", err)

    def test_body_limit_gives_413(self):
        s = self.serve("--repository", self.repo, "--max-body", "1Ki")
        status, body, headers = s.request("POST", "/predict?model=handler", b'{"x": [' + b"1," * 2000 + b"1]}")
        self.assertEqual(status, 413)
        # The HTTP layer's own rejection has the v2 error shape too.
        self.assertEqual(headers["Content-Type"], "application/json")
        self.assertIsInstance(json.loads(body)["error"], str)

    @unittest.skipUnless(HAVE_PROMTOOL, "needs promtool (Debian package prometheus)")
    def test_metrics_pass_promtool(self):
        s = self.repo_server()
        s.json("POST", "/predict?model=handler", {"x": [1]})
        s.request("POST", "/predict?model=handler", b"{")
        status, body, headers = s.request("GET", "/metrics")
        self.assertEqual(status, 200)
        self.assertIn("text/plain", headers["Content-Type"])
        text = body.decode()
        self.assertIn('lathe_serve_requests_total{model="handler",version="1",outcome="success"}', text)
        self.assertIn("lathe_serve_request_duration_seconds_bucket", text)
        p = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


def metric_sum(s, name):
    total = 0
    for line in s.request("GET", "/metrics")[1].decode().splitlines():
        if line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def inflight(s):
    return metric_sum(s, "lathe_serve_inflight_requests")


if __name__ == "__main__":
    unittest.main()
