"""Deployments end to end: `lathe deploy` against the real daemon, real
`lathe serve` replicas (process handlers, no torch needed) and the real front.

A model version is deployed with two replicas; answers come through the
endpoint /d/NAME/ from both replicas, each carrying the version it came from.
A key is needed unless the deployment is public, and a revoked key stops
working. A replica killed with -9 under continuous load costs no request (the
front retries on the other one) and the deployment brings it back; the daemon
killed with -9 under load costs none either (the front serves from its last
routes) and the deployment is managed again after the restart. Moving the
alias the deployment follows rolls it out under load without a failed request;
a version that cannot load is rolled back while the old one keeps answering.
Another user can neither see the deployment nor call it without a key, nor
reach a replica's socket directly. Removing a deployment drains it.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from harness import PY, DaemonTest, second_user
from test_models import EXAMPLES, HAVE_TORCH, PREDICT
from test_serve import HAVE_TORCH as HAVE_TORCH_BACKEND

USER = "lathe-it-deploy"
NOHOME = "lathe-it-nohome"  # a system user without a home directory

HANDLER = r"""
import os, time
SCALE = int(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "scale")).read())

def load(model_dir):
    return {"scale": SCALE}

def predict(batch, model):
    time.sleep(float(os.environ.get("SLOW", "0")))
    return [{"y": [v * model["scale"] for v in req.get("x", [])], "pid": os.getpid()}
            for req in batch]
"""

SLOW = HANDLER.replace('float(os.environ.get("SLOW", "0"))', "0.3")

BATCHED = r"""
import os, time

def load(model_dir):
    return {}

def predict(batch, model):
    time.sleep(0.05)
    return [{"batch": len(batch)} for _ in batch]
"""

# Requests that ask to wait are held until the gate file exists: with one
# instance computing one of them, the others wait in the replica's queue.
GATED = r"""
import os, time

def load(model_dir):
    return {}

def predict(batch, model):
    for req in batch:
        while req.get("wait") and not os.path.exists(GATE):
            time.sleep(0.02)
    return [{"ok": True} for _ in batch]
"""

# A TorchScript model (python3-torch) whose signature only the model knows.
MAKE_MLP = r"""
import sys, torch
torch.manual_seed(0)
mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
torch.jit.script(mlp.eval()).save(sys.argv[1])
"""

BROKEN = r"""
def load(model_dir):
    raise RuntimeError("this version cannot load")

def predict(batch, model):
    return []
"""


class Load:
    """Requests in a loop from `threads` threads until stopped; counts failures."""

    def __init__(self, port, path, body, headers=None, threads=2):
        self.port, self.path, self.body = port, path, body
        self.headers = dict(headers or {}, **{"Content-Type": "application/json"})
        self.ok = 0
        self.failures = []
        self.versions = []
        self.stop_flag = False
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(threads)]

    def run(self):
        c = None
        while not self.stop_flag:
            try:
                if c is None:
                    c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                c.request("POST", self.path, body=self.body, headers=self.headers)
                r = c.getresponse()
                data = r.read()
                with self.lock:
                    if r.status == 200:
                        self.ok += 1
                        self.versions.append(r.getheader("Lathe-Model-Version"))
                    else:
                        self.failures.append((r.status, data[:200]))
            except (OSError, http.client.HTTPException) as e:
                with self.lock:
                    self.failures.append(("exception", repr(e)))
                c = None

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop_flag = True
        for t in self.threads:
            t.join(timeout=60)

    def wait_ok(self, n, timeout=60):
        deadline = time.time() + timeout
        start = self.ok
        while self.ok < start + n and time.time() < deadline:
            time.sleep(0.05)
        return self.ok >= start + n


class Deployments(DaemonTest):
    gpus = "sim:2x24GB"

    def setUp(self):
        super().setUp()
        self.work = tempfile.mkdtemp(prefix="lathe-deploy-")
        os.chmod(self.work, 0o755)

    def tearDown(self):
        super().tearDown()
        shutil.rmtree(self.work, ignore_errors=True)

    def version_dir(self, name, scale, handler=HANDLER):
        d = os.path.join(self.work, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "handler.py"), "w") as f:
            f.write(handler)
        with open(os.path.join(d, "scale"), "w") as f:
            f.write(str(scale))
        return d

    def model(self, scale, handler=HANDLER, name="tri"):
        d = self.version_dir(f"v{scale}-{len(os.listdir(self.work))}", scale, handler)
        out = self.d.cli("model", "create", name, "--from-dir", d, "--handler", "handler.py",
                         "--json").stdout
        return json.loads(out)["ref"]

    def show(self, name, user=None, check=True):
        r = self.d.cli("deploy", "show", name, "--json", user=user, check=check,
                       env=self.d.env(HOME="/tmp") if user else None)
        return json.loads(r.stdout) if r.returncode == 0 else r

    def port(self, name):
        url = self.show(name)["url"]
        return int(url.split(":")[2].split("/")[0])

    def wait_ready(self, name, n, timeout=90):
        return self.d.wait_for(
            lambda: (lambda s: s if s["replicas"]["ready"] >= n and s["health"] == "healthy"
                     else None)(self.show(name)),
            f"{name}: {n} replicas ready", timeout)

    def call(self, port, path, body=b'{"x": [1, 2]}', headers=None):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("POST", path, body=body,
                  headers=dict(headers or {}, **{"Content-Type": "application/json"}))
        r = c.getresponse()
        out = r.status, r.read(), dict(r.getheaders())
        c.close()
        return out

    def api(self, method, path, user=None, body=None):
        """A request to the daemon's socket, as root or as `user` (a name); `body` (JSON) as root."""
        if user:
            code = (f"import http.client, socket, sys\n"
                    f"c = http.client.HTTPConnection('x')\n"
                    f"c.sock = socket.socket(socket.AF_UNIX); c.sock.connect({self.d.home + '/lathe.sock'!r})\n"
                    f"c.request({method!r}, {path!r}); r = c.getresponse()\n"
                    f"print(r.status); sys.stdout.write(r.read().decode())\n")
            out = subprocess.run(["setpriv", "--reuid", user, "--regid", user, "--init-groups",
                                  PY, "-c", code], capture_output=True, text=True).stdout
            first, _, rest = out.partition("\n")
            return int(first), rest
        c = http.client.HTTPConnection("x")
        c.sock = socket.socket(socket.AF_UNIX)
        c.sock.connect(os.path.join(self.d.home, "lathe.sock"))
        if body is None:
            c.request(method, path)
        else:
            c.request(method, path, body=json.dumps(body),
                      headers={"Content-Type": "application/json"})
        r = c.getresponse()
        out = r.status, r.read().decode()
        c.close()
        return out

    def events(self, name):
        return [e["msg_id"] for e in self.show(name)["events"]]

    def replica_pid(self, run):
        sock = self.d.inspect(run)["spec"]["deployment"]["socket"]
        out = os.popen(f"pgrep -f -- '--socket {sock}'").read().split()
        self.assertTrue(out, "no serve process for " + sock)
        return int(out[0])

    # -- the path a user takes ---------------------------------------------

    def test_two_replicas_answer_through_the_endpoint(self):
        ref = self.model(3)
        out = self.d.cli("deploy", "create", "tri", "--model", ref, "--replicas", "2", "--public",
                         "--wait").stdout
        self.assertIn("/d/root/tri/", out)
        s = self.wait_ready("tri", 2)
        self.assertEqual(s["version"], "root/tri/1")
        port = self.port("tri")
        pids = set()
        for _ in range(40):
            status, body, headers = self.call(port, "/d/tri/predict")
            self.assertEqual(status, 200, body)
            answer = json.loads(body)
            self.assertEqual(answer["y"], [3, 6])
            self.assertEqual(headers.get("Lathe-Model-Version"), "root/tri/1")
            pids.add(answer["pid"])
        self.assertEqual(len(pids), 2, "both replicas answer")
        # The v2 paths: the model's metadata and readiness.
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "/d/tri/v2/models/tri")
        r = c.getresponse()
        meta = json.loads(r.read())
        self.assertEqual(r.status, 200, meta)
        self.assertEqual(meta["name"], "tri")
        c.request("GET", "/d/tri/v2/health/ready")
        r = c.getresponse()
        r.read()
        self.assertEqual(r.status, 200)
        c.close()
        # The front's metrics, through the API, for an admin; promtool-clean.
        status, text = self.api("GET", "/api/v1/metrics/deployments")
        self.assertEqual(status, 200)
        self.assertIn('lathe_deployment_requests_total{deployment="root/tri",code="200"}', text)
        self.assertIn('lathe_deployment_replicas{deployment="root/tri",state="healthy"} 2', text)
        check = subprocess.run(["promtool", "check", "metrics"], input=text, text=True,
                               capture_output=True)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        # In the reader's language: health, its reason, replica states.
        zh = self.d.cli("deploy", "show", "tri", env=self.d.env(LATHE_LANG="zh")).stdout
        self.assertIn("健康", zh)
        self.assertIn("运行中", zh)
        self.assertNotIn("healthy", zh)
        # Names are unique per owner; the deployment is in the list.
        listed = json.loads(self.d.cli("deploy", "ls", "--json").stdout)
        self.assertEqual([d["name"] for d in listed], ["tri"])
        again = self.d.cli("deploy", "create", "tri", "--model", ref, check=False)
        self.assertNotEqual(again.returncode, 0)
        self.assertIn("already", again.stderr)

    @unittest.skipUnless(HAVE_TORCH, "needs /usr/bin/python3 with torch and sklearn")
    def test_train_digits_to_a_served_endpoint(self):
        """The bundled example's whole path: train a few steps, register the raw
        checkpoint with its process handler, deploy two replicas; the answers
        through the endpoint are PyTorch's for the same checkpoint."""
        ckpt = os.path.join(self.work, "ckpt")
        run = self.d.submit("--checkpoint-dir", ckpt, "--", PY,
                            os.path.join(EXAMPLES, "train_digits.py"), "--steps", "40",
                            "--ckpt-every", "20",
                            "--handler", os.path.join(EXAMPLES, "digits_inference.py"))
        self.d.wait_state(run, "succeeded", timeout=240)
        self.d.cli("model", "create", "digits", "--from", run, "--handler", "digits_inference.py")
        self.d.cli("deploy", "create", "digits", "--model", "digits/1", "--replicas", "2",
                   "--public", "--wait", timeout=300)
        want = json.loads(subprocess.run(
            [PY, "-c", PREDICT, EXAMPLES, os.path.join(ckpt, "ckpt_000040.pt")],
            check=True, capture_output=True, text=True, timeout=120).stdout)
        port = self.port("digits")
        for image, digit, p in zip(want["images"], want["digits"], want["p"]):
            status, body, headers = self.call(port, "/d/digits/predict",
                                              body=json.dumps({"image": image}).encode())
            self.assertEqual(status, 200, body)
            got = json.loads(body)
            self.assertEqual(got["digit"], digit)
            for a, b in zip(got["probabilities"], p):
                self.assertAlmostEqual(a, b, places=5)
            self.assertEqual(headers.get("Lathe-Model-Version"), "root/digits/1")

    def test_bad_input_is_refused_naming_the_field(self):
        ref = self.model(3)
        cases = [
            (("--model", "nosuch/1"), "model"),
            (("--model", "tri"), "NAME/N"),
            (("--model", ref, "--replicas", "0"), "replicas"),
            (("--model", ref, "--autoscale", "3..1"), "autoscale"),
            (("--model", ref, "--gpus", "1", "--replicas", "3"), "can never fit"),
            (("--model", ref, "--canary", "150%"), "canary"),
        ]
        for args, word in cases:
            r = self.d.cli("deploy", "create", "bad", *args, check=False)
            self.assertNotEqual(r.returncode, 0, args)
            self.assertIn(word, r.stderr, args)
            zh = self.d.cli("deploy", "create", "bad", *args, check=False,
                            env=self.d.env(LATHE_LANG="zh"))
            self.assertRegex(zh.stderr, "[\u4e00-\u9fff]", args)
        # A cuda device the replicas could never have, on this machine of two GPUs.
        for args, en, zh_text in [
            (("--device", "cuda:3", "--gpus", "2"), "field 'device': no GPU for cuda:3",
             "字段 “device”：没有可用于 cuda:3 的 GPU"),
            (("--device", "cuda:0", "--gpus", "0"), "field 'device': cuda:0 needs a GPU",
             "字段 “device”：cuda:0 需要 GPU"),
        ]:
            r = self.d.cli("deploy", "create", "bad", "--model", ref, *args, check=False)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(en, r.stderr)
            zh = self.d.cli("deploy", "create", "bad", "--model", ref, *args, check=False,
                            env=self.d.env(LATHE_LANG="zh"))
            self.assertIn(zh_text, zh.stderr)
        self.assertEqual(json.loads(self.d.cli("deploy", "ls", "--json").stdout), [])

    def test_patches_and_key_requests_are_strict(self):
        ref = self.model(3)
        self.d.cli("deploy", "create", "strict", "--model", ref, "--replicas", "1")
        before = self.show("strict")["spec"]
        for patch, word in (({"promote": "yes"}, "promote"), ({"name": "other"}, "name"),
                            ({"replica": 2}, "replica")):
            st, out = self.api("PATCH", "/api/v1/deployments/strict", body=patch)
            self.assertEqual(st, 400, (patch, out))
            self.assertIn(word, json.loads(out)["en"], out)
        st, out = self.api("PATCH", "/api/v1/deployments/strict", body={"name": "strict"})
        self.assertEqual(st, 200, out)
        self.assertEqual(self.show("strict")["spec"], before)
        st, out = self.api("POST", "/api/v1/deployments/strict/keys", body={"x": 1})
        self.assertEqual(st, 400, out)
        self.assertEqual(json.loads(out)["msg_id"], "deploy.key_unknown_field")
        st, out = self.api("POST", "/api/v1/deployments/strict/keys", body={"expires": ""})
        self.assertEqual(st, 400, out)
        self.assertEqual(json.loads(out)["msg_id"], "token.bad_expires")
        st, out = self.api("GET", "/api/v1/deployments/strict/keys")
        self.assertEqual(json.loads(out)["keys"], [])

    def test_an_update_or_scale_that_could_never_fit_is_refused(self):
        ref = self.model(3)
        self.d.cli("deploy", "create", "fit", "--model", ref, "--gpus", "1", "--replicas", "1")
        for args in (("scale", "fit", "3"), ("update", "fit", "--gpus", "3")):
            r = self.d.cli("deploy", *args, check=False)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("can never fit", r.stderr)
            zh = self.d.cli("deploy", *args, check=False, env=self.d.env(LATHE_LANG="zh"))
            self.assertRegex(zh.stderr, "[\u4e00-\u9fff]")
        spec = self.show("fit")["spec"]  # nothing of it changed
        self.assertEqual(spec["replicas"], 1)
        self.assertEqual(spec["gpus"], 1)
        self.d.cli("deploy", "rm", "fit")

    def test_batching_is_the_deployments_own(self):
        ref = self.model(1, handler=BATCHED)
        bad = self.d.cli("deploy", "create", "b", "--model", ref, "--batching",
                         "max_batch_size=99999", check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("batching.max_batch_size", bad.stderr)
        self.d.cli("deploy", "create", "b", "--model", ref, "--public", "--wait", "--batching",
                   "max_batch_size=4,max_queue_delay=100ms")
        port = self.port("b")
        sizes = []
        lock = threading.Lock()

        def one():
            status, body, _ = self.call(port, "/d/b/predict")
            with lock:
                sizes.append((status, json.loads(body).get("batch") if status == 200 else body))

        threads = [threading.Thread(target=one) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertTrue(all(s == 200 for s, _ in sizes), sizes)
        self.assertGreater(max(b for _, b in sizes), 1, "requests were batched")
        self.assertLessEqual(max(b for _, b in sizes), 4)
        self.assertEqual(self.show("b")["spec"]["batching"]["max_batch_size"], 4)

    def test_a_replicas_own_queue_reaches_the_deployments_view(self):
        gate = os.path.join(self.work, "gate")
        ref = self.model(1, handler=f"GATE = {gate!r}\n" + GATED)
        self.d.cli("deploy", "create", "q", "--model", ref, "--public", "--wait")
        port = self.port("q")
        # Before any load the replica reports an empty queue (lathe serve's
        # /metrics, read by the front with each probe).
        self.d.wait_for(lambda: self.show("q")["replicas"]["list"][0].get("queued") == 0,
                        "the replica's queue figure")
        results = []

        def one():
            results.append(self.call(port, "/d/q/predict", body=b'{"wait": true}')[0])

        threads = [threading.Thread(target=one) for _ in range(6)]
        for t in threads:
            t.start()
        try:
            # At most a few instances compute; the rest wait in its queue.
            seen = self.d.wait_for(
                lambda: (lambda r: r if r.get("queued", 0) >= 1 else None)(
                    self.show("q")["replicas"]["list"][0]),
                "requests queued in the replica", 60)
            self.assertLessEqual(seen["queued"], 6)
            text = self.d.cli("deploy", "show", "q").stdout
            self.assertIn("QUEUED", text)
        finally:
            with open(gate, "w"):
                pass
            for t in threads:
                t.join(timeout=60)
        self.assertEqual(results, [200] * 6)
        self.d.wait_for(lambda: self.show("q")["replicas"]["list"][0].get("queued") == 0,
                        "the queue to empty")

    @unittest.skipUnless(HAVE_TORCH_BACKEND, "needs python3-torch and the torchscript backend")
    def test_a_versions_signature_comes_from_its_first_ready_replica(self):
        d = os.path.join(self.work, "mlp")
        os.makedirs(d)
        script = os.path.join(self.work, "make_mlp.py")  # torch.jit.script wants a file
        with open(script, "w") as f:
            f.write(MAKE_MLP)
        subprocess.run([PY, script, os.path.join(d, "mlp.pt")], check=True, timeout=120)
        ref = json.loads(self.d.cli("model", "create", "mlp", "--from-dir", d,
                                    "--json").stdout)["ref"]
        version = lambda: json.loads(self.d.cli("model", "show", ref, "--json").stdout)
        self.assertIsNone(version()["inputs"])
        self.d.cli("deploy", "create", "sig", "--model", ref, "--public", "--wait", timeout=300)
        # What the replica says of the model, through the endpoint.
        c = http.client.HTTPConnection("127.0.0.1", self.port("sig"), timeout=30)
        c.request("GET", "/d/sig/v2/models/mlp")
        r = c.getresponse()
        meta = json.loads(r.read())
        c.close()
        self.assertEqual(r.status, 200, meta)
        self.assertTrue(meta["inputs"])
        v = self.d.wait_for(lambda: (lambda v: v if v["inputs"] is not None else None)(version()),
                            "the version's signature")
        self.assertEqual(v["inputs"], meta["inputs"])
        self.assertEqual(v["outputs"], meta["outputs"])
        self.assertEqual(v["snapshot"], json.loads(self.d.cli("model", "show", ref,
                                                              "--json").stdout)["snapshot"])
        # The API's view is the CLI's; the human view names the tensors.
        status, body = self.api("GET", "/api/v1/models/mlp/versions/1")
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["inputs"], meta["inputs"])
        text = self.d.cli("model", "show", ref).stdout
        self.assertIn(meta["inputs"][0]["name"], text)

    def test_a_key_is_needed_unless_public(self):
        ref = self.model(2)
        self.d.cli("deploy", "create", "keyed", "--model", ref, "--wait")
        self.d.cli("deploy", "create", "other", "--model", ref, "--wait")
        port = self.port("keyed")
        status, body, _ = self.call(port, "/d/keyed/predict")
        self.assertEqual(status, 401, body)
        self.assertEqual(json.loads(body)["msg_id"], "deploy_key.missing")
        # Three keys in a row, the third refused (two live at most); each works at its
        # first request, the moment it is printed.
        keys = []
        for i in range(3):
            r = self.d.cli("deploy", "key", "create", "keyed", check=False)
            if i == 2:
                self.assertNotEqual(r.returncode, 0)
                self.assertIn("revoke one of them first", r.stderr)
                break
            key = r.stdout.strip()
            self.assertTrue(key.startswith("lathe_dk_"), key)
            status, body, _ = self.call(port, "/d/keyed/predict",
                                        headers={"Authorization": "Bearer " + key})
            self.assertEqual(status, 200, body)
            keys.append(key)
        key = keys[0]
        auth = {"Authorization": "Bearer " + key}
        wrong = {"Authorization": "Bearer " + key[:-4] + "0000"}
        status, body, _ = self.call(port, "/d/keyed/predict", headers=wrong)
        self.assertEqual((status, json.loads(body)["msg_id"]), (401, "deploy_key.invalid"))
        # Another deployment's key says whose it is; an API token says it is one.
        status, body, _ = self.call(self.port("other"), "/d/other/predict", headers=auth)
        self.assertEqual((status, json.loads(body)["msg_id"]), (401, "deploy_key.wrong_deployment"))
        self.assertIn("keyed", json.loads(body)["en"])
        token = json.loads(self.d.cli("token", "create", "--json").stdout)["token"]
        status, body, _ = self.call(port, "/d/keyed/predict",
                                    headers={"Authorization": "Bearer " + token})
        self.assertEqual((status, json.loads(body)["msg_id"]), (401, "deploy_key.api_token"))
        kid = json.loads(self.d.cli("deploy", "key", "ls", "keyed", "--json").stdout)[-1]["id"]
        self.assertIn(kid, self.d.cli("deploy", "key", "ls", "keyed").stdout)  # never expires: "-"
        self.assertTrue(key.startswith("lathe_dk_" + kid + "_"), (kid, key))
        self.d.cli("deploy", "key", "rm", "keyed", kid)
        # Revoked: refused at the very next request, saying so.
        status, body, _ = self.call(port, "/d/keyed/predict", headers=auth)
        self.assertEqual((status, json.loads(body)["msg_id"]), (401, "deploy_key.revoked"), body)

    # -- failures under load -------------------------------------------------

    def test_replica_killed_under_load_costs_no_request(self):
        ref = self.model(3)
        self.d.cli("deploy", "create", "tri", "--model", ref, "--replicas", "2", "--public",
                   "--wait")
        self.wait_ready("tri", 2)
        port = self.port("tri")
        before = {r["run"] for r in self.show("tri")["replicas"]["list"]}
        victim = sorted(before)[0]
        with Load(port, "/d/tri/predict", b'{"x": [1]}') as load:
            self.assertTrue(load.wait_ok(50))
            os.kill(self.replica_pid(victim), signal.SIGKILL)
            self.assertTrue(load.wait_ok(200))
            # A replacement comes, and the deployment is whole again.
            s = self.d.wait_for(
                lambda: (lambda s: s if s["replicas"]["ready"] == 2 and
                         {r["run"] for r in s["replicas"]["list"] if r["healthy"]} != before
                         else None)(self.show("tri")),
                "a replacement replica", 90)
            self.assertTrue(load.wait_ok(50))
        self.assertEqual(load.failures, [], "no request failed")
        self.assertTrue({"deploy.replica_crashed", "deploy.replica_ended"} & set(self.events("tri")),
                        self.events("tri"))
        self.assertNotIn(victim, {r["run"] for r in s["replicas"]["list"] if r["healthy"]})

    def test_daemon_killed_under_load_costs_no_request(self):
        ref = self.model(3)
        self.d.cli("deploy", "create", "tri", "--model", ref, "--replicas", "2", "--public",
                   "--wait")
        self.wait_ready("tri", 2)
        port = self.port("tri")
        with Load(port, "/d/tri/predict", b'{"x": [1]}') as load:
            self.assertTrue(load.wait_ok(50))
            self.d.kill9()
            self.assertTrue(load.wait_ok(200), "the front answers while the daemon is down")
            self.d.start()
            self.assertTrue(load.wait_ok(50))
        self.assertEqual(load.failures, [])
        # Managed again: scaling it takes effect.
        self.d.cli("deploy", "scale", "tri", "1")
        self.d.wait_for(lambda: len([r for r in self.show("tri")["replicas"]["list"]
                                     if r["state"] == "running"]) == 1,
                        "the deployment to scale to 1 after the restart", 90)
        self.assertEqual(self.port("tri"), port, "the endpoint kept its port")

    def test_moving_the_alias_rolls_out_without_a_failed_request(self):
        v1 = self.model(3)
        self.d.cli("model", "alias", "tri", "prod", v1.rsplit("/", 1)[1])
        self.d.cli("deploy", "create", "tri", "--model", "tri@prod", "--replicas", "2",
                   "--public", "--wait")
        port = self.port("tri")
        v2 = self.model(5)
        with Load(port, "/d/tri/predict", b'{"x": [1]}') as load:
            self.assertTrue(load.wait_ok(30))
            self.d.cli("model", "alias", "tri", "prod", v2.rsplit("/", 1)[1])
            self.d.wait_for(lambda: self.show("tri")["version"] == v2 and
                            all(r["version"] == v2 for r in self.show("tri")["replicas"]["list"]
                                if r["state"] == "running"),
                            "the rollout to " + v2, 120)
            self.assertTrue(load.wait_ok(30))
        self.assertEqual(load.failures, [])
        self.assertIn(v1, load.versions)
        self.assertEqual(load.versions[-1], v2)
        self.assertIn("deploy.rolled_out", self.events("tri"))

    def test_a_canary_keeps_its_share_until_promoted(self):
        v1 = self.model(3)
        self.d.cli("deploy", "create", "tri", "--model", v1, "--replicas", "2", "--public",
                   "--wait")
        port = self.port("tri")
        v2 = self.model(5)
        self.d.cli("deploy", "update", "tri", "--model", v2, "--canary", "50%")
        self.d.wait_for(lambda: self.show("tri")["traffic"] == {v1: 50, v2: 50},
                        "the canary's split", 90)
        # The daemon's split is written before the front has read it and
        # probed the new replicas: wait until 20 requests in a row reach both.
        def both_answer():
            seen = [self.call(port, "/d/tri/predict")[2].get("Lathe-Model-Version")
                    for _ in range(20)]
            return v1 in seen and v2 in seen and set(seen) <= {v1, v2}
        self.d.wait_for(both_answer, "both versions answering during the canary", 60)
        self.assertEqual(len([r for r in self.show("tri")["replicas"]["list"]
                              if r["state"] == "running" and r["version"] == v1]), 2,
                         "the old replicas stay during the canary")
        self.d.cli("deploy", "promote", "tri")
        self.d.wait_for(lambda: self.show("tri")["traffic"] == {v2: 100} and
                        all(r["version"] == v2 for r in self.show("tri")["replicas"]["list"]
                            if r["state"] == "running"),
                        "the promoted rollout", 120)
        self.assertIn("deploy.canary_promoted", self.events("tri"))

    def test_a_version_that_cannot_load_is_rolled_back(self):
        v1 = self.model(3)
        self.d.cli("model", "alias", "tri", "prod", v1.rsplit("/", 1)[1])
        self.d.cli("deploy", "create", "tri", "--model", "tri@prod", "--replicas", "1",
                   "--public", "--wait")
        port = self.port("tri")
        bad = self.model(0, handler=BROKEN)
        # The alias moves to the broken version: the deployment follows, and rolls back.
        self.d.cli("model", "alias", "tri", "prod", bad.rsplit("/", 1)[1])
        self.d.wait_for(lambda: "deploy.rolled_back" in self.events("tri"), "the rollback", 120)
        s = self.show("tri")
        self.assertEqual(s["version"], v1)
        self.assertEqual(s["health"], "degraded")
        self.assertIn(bad, s["reason"])
        # What serves and what the alias says, and why they differ: the handler's own error.
        self.assertEqual(s["wanted"], bad)
        self.assertEqual(s["rolled_back"]["version"], bad)
        self.assertIn("this version cannot load", s["rolled_back"]["reason"])
        rollback = [e for e in s["events"] if e["msg_id"] == "deploy.rolled_back"][0]
        self.assertIn("this version cannot load", json.dumps(rollback))
        text = self.d.cli("deploy", "show", "tri").stdout
        self.assertIn(f"serving:    {v1}", text)
        self.assertIn(f"{bad}, which tri@prod names now, was rolled back", text)
        status, body, headers = self.call(port, "/d/tri/predict")
        self.assertEqual(status, 200, body)
        self.assertEqual(headers.get("Lathe-Model-Version"), v1)

    # -- scaling -------------------------------------------------------------

    def deploy_file(self, text):
        path = os.path.join(self.work, "deploy.yaml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def running(self, name):
        return [r for r in self.show(name)["replicas"]["list"] if r["state"] == "running"]

    def test_autoscale_up_under_load_and_down_when_idle(self):
        ref = self.model(3, handler=SLOW)
        self.d.cli("deploy", "create", "-f", self.deploy_file(
            f"name: auto\nmodel: {ref}\npublic: true\n"
            "autoscale: {min: 1, max: 3, target: 1, upscale_delay: 1s, downscale_delay: 3s}\n"),
            "--wait")
        self.assertEqual(len(self.running("auto")), 1)
        port = self.port("auto")
        with Load(port, "/d/auto/predict", b'{"x": [1]}', threads=6) as load:
            self.d.wait_for(lambda: len([r for r in self.running("auto") if r["healthy"]]) == 3,
                            "three ready replicas under load", 120)
            self.assertTrue(load.wait_ok(20))
        self.assertEqual(load.failures, [])
        self.assertIn("deploy.scaled_up", self.events("auto"))
        self.d.wait_for(lambda: len(self.running("auto")) == 1, "back to one replica", 120)
        self.assertIn("deploy.scaled_down", self.events("auto"))
        up = [e for e in self.show("auto")["events"] if e["msg_id"] == "deploy.scaled_up"][0]
        self.assertIn("target", up["message"])  # the figures that caused it

    def test_scale_to_zero_and_the_first_request_after_it(self):
        ref = self.model(3)
        self.d.cli("deploy", "create", "-f", self.deploy_file(
            f"name: zero\nmodel: {ref}\npublic: true\n"
            "autoscale: {min: 0, max: 1, zero_grace: 2s}\n"))
        self.d.wait_for(lambda: self.show("zero")["health"] == "scaled_to_zero" and
                        self.show("zero")["routed"], "the deployment at zero", 90)
        self.assertEqual(self.running("zero"), [])
        port = self.port("zero")
        status, body, headers = self.call(port, "/d/zero/predict")  # held while one starts
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["y"], [3, 6])
        self.assertIn("deploy.scaling_from_zero", self.events("zero"))
        self.d.wait_for(lambda: self.running("zero") == [] and
                        self.events("zero").count("deploy.scaled_to_zero") >= 1,
                        "back to zero when idle", 90)

    def test_a_high_priority_job_preempts_a_low_priority_replica(self):
        ref = self.model(3)
        self.d.cli("deploy", "create", "pre", "--model", ref, "--replicas", "2", "--gpus", "1",
                   "--priority", "low", "--public", "--wait")
        job = self.d.submit("--gpus", "1", "--priority", "high", "--", "sleep", "4")
        self.d.wait_for(lambda: self.show("pre")["health"] == "degraded",
                        "the deployment to say it is short", 60)
        s = self.show("pre")
        self.assertIn("preempted", s["reason"])
        self.assertIn("deploy.replica_preempted", self.events("pre"))
        # Serving goes on from the other replica meanwhile.
        self.assertEqual(self.call(self.port("pre"), "/d/pre/predict")[0], 200)
        self.d.wait_state(job, "succeeded")
        self.wait_ready("pre", 2)

    # -- another user -----------------------------------------------------

    def test_another_user_can_neither_see_nor_call_nor_bypass(self):
        second_user(self, USER)
        ref = self.model(3)
        self.d.cli("deploy", "create", "mine", "--model", ref, "--wait")
        port = self.port("mine")
        # Another user's deployment is as unknown to them as a name nobody holds: not whose it is.
        r = self.show("mine", user=USER, check=False)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("no deployment named 'mine'", r.stderr)
        self.assertNotIn("root", r.stderr)
        r = self.d.cli("deploy", "rm", "mine", user=USER, check=False,
                       env=self.d.env(HOME="/tmp"))
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(json.loads(self.d.cli("deploy", "ls", "--json", user=USER,
                                               env=self.d.env(HOME="/tmp")).stdout), [])
        self.assertEqual(self.call(port, "/d/mine/predict")[0], 401)
        self.assertEqual(self.api("GET", "/api/v1/deployments/mine", user=USER)[0], 404)
        self.assertEqual(self.api("GET", "/api/v1/deployments/nope", user=USER)[0], 404)
        self.assertEqual(self.api("GET", "/api/v1/metrics/deployments", user=USER)[0], 403)
        self.assertEqual(self.api("GET", "/api/v1/deployments/mine/events", user=USER)[0], 404)
        self.assertEqual(self.api("GET", "/api/v1/deployments/mine/keys", user=USER)[0], 404)
        self.assertEqual(self.api("POST", "/api/v1/deployments/mine/keys", user=USER)[0], 404)
        # The replica's socket directly, as the other user: refused by the
        # directory's permissions.
        run = self.show("mine")["replicas"]["list"][0]["run"]
        sock = self.d.inspect(run)["spec"]["deployment"]["socket"]
        probe = (f"import socket; s = socket.socket(socket.AF_UNIX); "
                 f"s.connect({sock!r}); print('connected')")
        out = os.popen(f"setpriv --reuid {USER} --regid {USER} --init-groups {PY} -c "
                       f"\"{probe}\" 2>&1").read()
        self.assertNotIn("connected", out)
        self.assertIn("Permission denied", out)

    def test_a_user_without_a_home_deploys_from_a_cache_of_their_own(self):
        pw = second_user(self, NOHOME)
        second_user(self, USER)
        if os.path.isdir(pw.pw_dir):
            self.skipTest(f"{NOHOME} has a home directory here ({pw.pw_dir})")
        env = self.d.env(HOME="/tmp")
        d = self.version_dir("nohome", 5)
        for p in [d] + [os.path.join(d, n) for n in os.listdir(d)]:
            os.chown(p, pw.pw_uid, pw.pw_gid)
        self.d.cli("model", "create", "nohome", "--from-dir", d, "--handler", "handler.py",
                   user=NOHOME, env=env)
        self.d.cli("deploy", "create", "nh", "--model", "nohome/1", "--public", "--wait",
                   user=NOHOME, env=env)
        status, body, headers = self.call(self.port("nh"), "/d/nh/predict")
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["y"], [5, 10])
        # The version's files, restored as the user into their directory under
        # the daemon's home: theirs, and nobody else's to read.
        cache = os.path.join(self.d.home, "deployments", "users", str(pw.pw_uid))
        st = os.lstat(cache)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (pw.pw_uid, 0o700))
        files = []
        for root, dirs, names in os.walk(cache):
            for n in dirs + names:
                p = os.path.join(root, n)
                self.assertEqual(os.lstat(p).st_uid, pw.pw_uid, p)
                files.append(p)
        handler = [p for p in files if p.endswith("/1/handler.py")]
        self.assertEqual(len(handler), 1, files)
        other = subprocess.run(["setpriv", "--reuid", USER, "--regid", USER, "--init-groups",
                                "cat", handler[0]], capture_output=True, text=True)
        self.assertNotEqual(other.returncode, 0)
        self.assertIn("Permission denied", other.stderr)
        self.assertNotIn("SCALE", other.stdout)
        # Removing the deployment takes the version's cache with it, as the user.
        self.d.cli("deploy", "rm", "nh", user=NOHOME, env=env)
        self.d.wait_for(lambda: not os.path.exists(os.path.dirname(os.path.dirname(handler[0]))),
                        "the version's cache to go", 90)

    def test_rm_drains_and_removes(self):
        ref = self.model(3)
        self.d.cli("deploy", "create", "tri", "--model", ref, "--replicas", "2", "--public",
                   "--wait")
        self.d.cli("deploy", "key", "create", "tri")
        runs = [r["run"] for r in self.show("tri")["replicas"]["list"]]
        refused = self.d.cli("model", "rm", ref, check=False)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("tri", refused.stderr)
        self.d.cli("deploy", "rm", "tri")
        self.d.wait_for(lambda: json.loads(self.d.cli("deploy", "ls", "--json").stdout) == [],
                        "the deployment to go", 90)
        for run in runs:
            self.assertIn(self.d.inspect(run)["state"], ("stopped", "succeeded"))
        cache = os.path.expanduser("~root/.lathe/deployments/models")
        snap = json.loads(self.d.cli("model", "show", ref, "--json").stdout)["snapshot"][:12]
        self.assertFalse(os.path.exists(os.path.join(cache, f"tri-1-{snap}")),
                         "the version's cache goes with its last deployment")
        self.d.cli("model", "rm", ref)


if __name__ == "__main__":
    unittest.main()
