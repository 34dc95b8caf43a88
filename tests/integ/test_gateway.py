"""The deployments' front, `lathe __gateway` (docs/gateway.md), standalone:
routes.json written here, fake replicas (gateway_replica.py) on unix sockets.
"""
import hashlib
import http.client
import json
import os
import pwd
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from test_tls import make_certs  # noqa: E402

REPLICA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gateway_replica.py")
SECRET = "c" * 64
KEY = "lathe_dk_k0123456789_" + SECRET
EXPIRED_KEY = "lathe_dk_k0000000000_" + "d" * 64
OTHER_USER = "lathe-gw-test"
PER_CLIENT = 512  # docs/gateway.md, "Limits"


def sha(s):
    return hashlib.sha256(s.encode()).hexdigest()


def wait_for(cond, what, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(self.path)


class Replica:
    def __init__(self, dir, rid, user=None, drop=False):
        self.rid = rid
        self.drop = drop
        self.socket = os.path.join(dir, rid + ".sock")
        self.user = user
        self.proc = None

    def start(self):
        cmd = [harness.PY, REPLICA, self.socket, self.rid, *(["drop"] if self.drop else [])]
        if self.user:
            cmd = ["setpriv", "--reuid", self.user, "--regid", self.user, "--clear-groups", *cmd]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
        assert self.proc.stdout.readline().strip() == b"ready"
        self.proc.stdout.close()
        return self

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def route(self, version="echo/1", uid=None, draining=False):
        return {"id": self.rid, "socket": self.socket,
                "uid": os.geteuid() if uid is None else uid,
                "version": version, "draining": draining}


class Gateway:
    def __init__(self, dir, *extra):
        self.dir = dir
        self.log = open(os.path.join(dir, "gateway.log"), "ab")
        self.proc = subprocess.Popen(
            [harness.LATHE, "__gateway", "--dir", dir, "--listen", "127.0.0.1:0",
             "--probe-interval", "100ms", *extra], stdout=self.log, stderr=self.log)
        info = wait_for(lambda: self.read_info(), "gateway.json")
        self.port = info["port"]
        self.admin = info["admin_socket"]
        assert info["pid"] == self.proc.pid, info

    def read_info(self):
        if self.proc.poll() is not None:
            raise AssertionError("gateway exited: " + self.log_text())
        try:
            with open(os.path.join(self.dir, "gateway.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def log_text(self):
        with open(os.path.join(self.dir, "gateway.log"), errors="replace") as f:
            return f.read()[-4000:]

    def request(self, method, path, body=None, headers=None, conn=None):
        c = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        if conn is None:
            c.close()
        try:
            parsed = json.loads(data) if data else None
        except ValueError:
            parsed = data
        return r.status, dict(r.getheaders()), parsed

    def admin_get(self, path):
        c = UnixHTTPConnection(self.admin)
        c.request("GET", path)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def status(self):
        code, data = self.admin_get("/status")
        assert code == 200, data
        return json.loads(data)

    def deployment(self, name):
        for d in self.status()["deployments"]:
            if d["name"] == name:
                return d
        return None

    def replica(self, name, rid):
        d = self.deployment(name) or {"replicas": []}
        for r in d["replicas"]:
            if r["id"] == rid:
                return r
        return None

    def wait_healthy(self, name, rid, healthy=True):
        return wait_for(lambda: (self.replica(name, rid) or {}).get("healthy") == healthy,
                        f"{name}/{rid} healthy={healthy}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def write_routes(dir, generation, deployments):
    tmp = os.path.join(dir, ".routes.json.tmp")
    with open(tmp, "w") as f:
        json.dump({"version": 1, "generation": generation, "deployments": deployments}, f)
    os.chmod(tmp, 0o644)
    os.rename(tmp, os.path.join(dir, "routes.json"))


class GatewayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="lathe-gw-")
        os.chmod(cls.dir, 0o755)
        cls.r1 = Replica(cls.dir, "r1").start()
        cls.r2 = Replica(cls.dir, "r2").start()
        cls.generation = 1
        cls.base = cls.routes()
        write_routes(cls.dir, cls.generation, cls.base)
        cls.gw = Gateway(cls.dir)
        cls.gw.wait_healthy("echo", "r1")
        cls.gw.wait_healthy("echo", "r2")

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        for r in (cls.r1, cls.r2):
            if r.proc.poll() is None:
                r.kill9()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def routes(cls, echo_replicas=None, held_replicas=(), extra=()):
        now_ms = int(time.time() * 1000)
        common = {"health_path": "/healthz", "replicas_wanted": 2}
        return [
            {"name": "echo", "uid": 0, "public": True, "traffic": {"echo/1": 100},
             "replicas": echo_replicas or [cls.r1.route(), cls.r2.route()], **common},
            {"name": "priv", "uid": 0, "keys": [
                {"id": "k0123456789", "sha256": sha(SECRET), "expires_ms": 0},
                {"id": "k0000000000", "sha256": sha("d" * 64), "expires_ms": now_ms - 1000}],
             "replicas": [cls.r1.route()], **common},
            {"name": "held", "uid": 0, "public": True, "hold": True, "hold_ms": 20000,
             "max_held": 2, "replicas": list(held_replicas), **common},
            {"name": "short", "uid": 0, "public": True, "hold": True, "hold_ms": 300,
             "replicas": [], **common},
            {"name": "nohold", "uid": 0, "public": True, "replicas": [], **common},
            *extra,
        ]

    def rewrite(self, deployments):
        GatewayTest.generation += 1
        write_routes(self.dir, self.generation, deployments)
        wait_for(lambda: self.gw.status()["generation"] == self.generation, "the new routes")

    def restore(self):
        self.rewrite(self.routes())
        self.gw.wait_healthy("echo", "r1")
        self.gw.wait_healthy("echo", "r2")

    def test_paths_redirect_and_unknown_names(self):
        code, h, body = self.gw.request("GET", "/d/echo?x=1")
        self.assertEqual(code, 308)
        self.assertEqual(h["Location"], "/d/echo/?x=1")
        code, _, body = self.gw.request("GET", "/elsewhere")
        self.assertEqual((code, body["msg_id"]), (404, "gateway.not_found"))
        code, _, body = self.gw.request("GET", "/d/nope/v2")
        self.assertEqual((code, body["msg_id"]), (404, "gateway.unknown_deployment"))
        self.assertIn("nope", body["error"])
        self.assertEqual(body["error"], body["en"])  # the one error shape: "error" is English
        self.assertIn("部署", body["zh"])
        self.assertEqual(body["code"], "not_found")

    def test_an_escaped_name_finds_its_deployment_and_the_replica_gets_the_rest(self):
        # "ech%6F" is "echo": the replica gets the target after /d/NAME as sent.
        code, _, body = self.gw.request("GET", "/d/ech%6F/v2/a%20b?q=%2F")
        self.assertEqual(code, 200, body)
        self.assertEqual(body["path"], "/v2/a%20b?q=%2F")
        code, _, body = self.gw.request("GET", "/d/echo/v2/a%20b?q=%2F")
        self.assertEqual((code, body["path"]), (200, "/v2/a%20b?q=%2F"))

    def test_requests_spread_over_both_replicas_with_their_headers(self):
        seen = set()
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=30)
        for i in range(20):
            code, h, body = self.gw.request("POST", f"/d/echo/v2/infer?i={i}", body="{}",
                                            conn=conn)
            self.assertEqual(code, 200, body)
            self.assertEqual(body["path"], f"/v2/infer?i={i}")
            self.assertEqual(body["prefix"], "/d/echo")
            self.assertEqual(h["Lathe-Replica"], body["replica"])
            self.assertEqual(h["Lathe-Model-Version"], "echo/1")
            seen.add(body["replica"])
        conn.close()
        self.assertEqual(seen, {"r1", "r2"})

    def test_a_replica_killed_under_load_loses_no_request_and_comes_back(self):
        results, stop = [], threading.Event()
        killed_at = []

        def load():
            conn = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=30)
            for i in range(300):
                try:
                    code, _, body = self.gw.request("POST", "/d/echo/infer", body='{"i":%d}' % i,
                                                    conn=conn)
                    results.append((code, body.get("replica") if isinstance(body, dict) else None))
                except Exception as e:  # noqa: BLE001 - any failure is counted
                    results.append((str(e), None))
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=30)
                if i == 100:
                    self.r2.kill9()
                    killed_at.append(i)
            conn.close()

        t = threading.Thread(target=load)
        t.start()
        t.join(120)
        failed = [r for r in results if r[0] != 200]
        self.assertEqual(len(results), 300)
        self.assertEqual(failed, [])
        self.assertIn("r2", {r for _, r in results[:100]})
        self.assertEqual({r for _, r in results[150:]}, {"r1"})
        self.gw.wait_healthy("echo", "r2", healthy=False)
        self.assertNotEqual(self.gw.replica("echo", "r2")["last_error"], "")
        # Back on the same socket: probed healthy, then used again.
        self.r2.start()
        self.gw.wait_healthy("echo", "r2")
        seen = {self.gw.request("GET", "/d/echo/x")[2]["replica"] for _ in range(10)}
        self.assertIn("r2", seen)
        self.assertGreater(self.gw.deployment("echo")["requests"], 300)

    def test_a_request_cut_before_its_answer_is_retried_on_another_replica_if_idempotent(self):
        dropper = Replica(self.dir, "rd", drop=True).start()
        flaky = {"uid": 0, "public": True, "health_path": "/healthz",
                 "replicas": [dropper.route(), self.r1.route()]}
        try:
            self.rewrite(self.routes(extra=[dict(flaky, name="flaky"),
                                            dict(flaky, name="once", idempotent=False,
                                                 replicas=[dropper.route()])]))
            self.gw.wait_healthy("flaky", "rd")
            self.gw.wait_healthy("flaky", "r1")
            self.gw.wait_healthy("once", "rd")
            # The first choice of a new deployment is its first replica: the dropper.
            code, h, body = self.gw.request("POST", "/d/flaky/infer", body="{}")
            self.assertEqual((code, body["replica"], h["Lathe-Replica"]), (200, "r1", "r1"))
            self.assertEqual(self.gw.replica("flaky", "rd")["errors"], 1)
            # Not idempotent: the failure is the answer.
            code, _, body = self.gw.request("POST", "/d/once/infer", body="{}")
            self.assertEqual((code, body["msg_id"]), (502, "gateway.replica_failed"))
            # The proxy's errors know no request's language: they carry both.
            self.assertEqual(body["en"], body["error"])
            self.assertTrue(body["zh"] and body["zh"] != body["en"], body)
        finally:
            self.restore()
            dropper.kill9()

    def test_a_failing_health_probe_takes_a_replica_out(self):
        sick = self.r2.socket + ".sick"
        open(sick, "w").close()
        try:
            self.gw.wait_healthy("echo", "r2", healthy=False)
            self.assertIn("503", self.gw.replica("echo", "r2")["last_error"])
            seen = {self.gw.request("GET", "/d/echo/x")[2]["replica"] for _ in range(10)}
            self.assertEqual(seen, {"r1"})
        finally:
            os.unlink(sick)
        self.gw.wait_healthy("echo", "r2")

    def test_keys(self):
        code, h, body = self.gw.request("GET", "/d/priv/x")
        self.assertEqual((code, body["msg_id"]), (401, "deploy_key.missing"))
        code, _, body = self.gw.request("GET", "/d/priv/x", headers={"Authorization": "Bearer x"})
        self.assertEqual((code, body["msg_id"]), (401, "deploy_key.malformed"))
        self.assertEqual(h.get("WWW-Authenticate"), "Bearer")
        wrong = "lathe_dk_k0123456789_" + "e" * 64
        code, _, body = self.gw.request("GET", "/d/priv/x", headers={"Authorization": "Bearer " + wrong})
        self.assertEqual((code, body["msg_id"]), (401, "deploy_key.invalid"))
        code, _, body = self.gw.request("GET", "/d/priv/x",
                                        headers={"Authorization": "Bearer " + EXPIRED_KEY})
        self.assertEqual((code, body["msg_id"]), (401, "deploy_key.expired"))
        code, _, body = self.gw.request("GET", "/d/priv/x", headers={"Authorization": "Bearer " + KEY})
        self.assertEqual(code, 200, body)
        self.assertIsNone(body["authorization"])  # the key never reaches the replica
        code, _, body = self.gw.request("GET", "/d/echo/x")  # public
        self.assertEqual(code, 200)

    def test_routes_rewrites_take_effect_and_a_bad_file_keeps_the_last_good(self):
        r3 = Replica(self.dir, "r3").start()
        try:
            self.rewrite(self.routes(echo_replicas=[self.r1.route(), self.r2.route(draining=True)]))
            wait_for(lambda: self.gw.replica("echo", "r2")["draining"], "r2 draining")
            seen = {self.gw.request("GET", "/d/echo/x")[2]["replica"] for _ in range(10)}
            self.assertEqual(seen, {"r1"})
            # A replica added (of another version, with half of the traffic) is used once healthy.
            routes = self.routes(echo_replicas=[self.r1.route(), r3.route(version="echo/2")])
            routes[0]["traffic"] = {"echo/1": 50, "echo/2": 50}
            self.rewrite(routes)
            self.gw.wait_healthy("echo", "r3")
            answers = [self.gw.request("GET", "/d/echo/x") for _ in range(40)]
            self.assertIn("r3", {b["replica"] for _, _, b in answers})
            self.assertEqual({h["Lathe-Model-Version"] for _, h, b in answers if b["replica"] == "r3"},
                             {"echo/2"})
            self.assertIsNone(self.gw.replica("echo", "r2"))
            # Not JSON: logged, the routes stay.
            with open(os.path.join(self.dir, ".bad.tmp"), "w") as f:
                f.write('{"version": 1, "deployments": [')
            os.rename(os.path.join(self.dir, ".bad.tmp"), os.path.join(self.dir, "routes.json"))
            wait_for(lambda: "not applied" in self.gw.log_text(), "the bad routes logged")
            self.assertEqual(self.gw.request("GET", "/d/echo/x")[0], 200)
            self.assertEqual(self.gw.status()["generation"], self.generation)
        finally:
            self.restore()
            r3.kill9()

    def test_a_listener_of_another_owner_is_refused(self):
        # The route says uid 4242 owns the socket; the listener is ours.
        wrong = dict(self.r1.route(), uid=4242)
        self.rewrite(self.routes(extra=[{"name": "owned", "uid": 4242, "public": True,
                                         "health_path": "/healthz", "replicas": [wrong]}]))
        try:
            wait_for(lambda: "belong" in ((self.gw.replica("owned", "r1") or {}).get("last_error")
                                          or ""), "the owner refused")
            self.assertFalse(self.gw.replica("owned", "r1")["healthy"])
            code, h, body = self.gw.request("GET", "/d/owned/x")
            self.assertEqual((code, body["msg_id"]), (503, "gateway.no_replica"))
            if os.geteuid() != 0:
                return
            # A replica run by another user, routed as root's: refused; as its own user's: served.
            user = harness.ensure_user(OTHER_USER)
            theirs_dir = os.path.join(self.dir, "theirs")
            os.makedirs(theirs_dir, exist_ok=True)
            os.chown(theirs_dir, user.pw_uid, user.pw_gid)
            theirs = Replica(theirs_dir, "r9", user=OTHER_USER).start()
            try:
                self.rewrite(self.routes(extra=[
                    {"name": "owned", "uid": 0, "public": True, "health_path": "/healthz",
                     "replicas": [theirs.route(uid=0)]}]))
                wait_for(lambda: "belong" in ((self.gw.replica("owned", "r9") or {})
                                              .get("last_error") or ""), "root's route refused")
                self.rewrite(self.routes(extra=[
                    {"name": "owned", "uid": user.pw_uid, "public": True,
                     "health_path": "/healthz", "replicas": [theirs.route(uid=user.pw_uid)]}]))
                self.gw.wait_healthy("owned", "r9")
                code, _, body = self.gw.request("GET", "/d/owned/x")
                self.assertEqual((code, body["replica"]), (200, "r9"))
            finally:
                theirs.kill9()
        finally:
            self.restore()

    def test_hold_until_a_replica_appears_bounded_by_max_held(self):
        code, h, body = self.gw.request("GET", "/d/nohold/x")
        self.assertEqual((code, body["msg_id"], h.get("Retry-After")), (503, "gateway.no_replica", "1"))
        code, h, body = self.gw.request("GET", "/d/short/x")
        self.assertEqual((code, body["msg_id"], h.get("Retry-After")),
                         (503, "gateway.hold_timeout", "1"))
        answers = []
        threads = [threading.Thread(target=lambda: answers.append(self.gw.request("GET", "/d/held/x")))
                   for _ in range(2)]
        for t in threads:
            t.start()
        wait_for(lambda: self.gw.deployment("held")["held"] == 2, "two requests held")
        code, h, body = self.gw.request("GET", "/d/held/x")  # a third: over max_held
        self.assertEqual((code, body["msg_id"], h.get("Retry-After")), (503, "gateway.hold_full", "1"))
        self.assertEqual(answers, [])
        try:
            self.rewrite(self.routes(held_replicas=[self.r1.route()]))
            for t in threads:
                t.join(20)
            self.assertEqual([(c, b["replica"]) for c, _, b in answers], [(200, "r1"), (200, "r1")])
            self.assertEqual(self.gw.deployment("held")["held"], 0)
        finally:
            self.restore()

    def test_status_and_metrics_pass_promtool(self):
        self.gw.request("GET", "/d/echo/x")
        self.gw.request("GET", "/d/nohold/x")
        st = self.gw.status()
        echo = [d for d in st["deployments"] if d["name"] == "echo"][0]
        for field in ("requests", "errors", "in_flight", "held", "rps", "p50_ms", "p99_ms"):
            self.assertIn(field, echo)
        self.assertGreater(echo["requests"], 0)
        self.assertGreater(st["started_ms"], 0)
        self.assertEqual({"id", "version", "healthy", "draining", "in_flight", "requests", "errors",
                          "last_probe_ms", "last_error"} - set(echo["replicas"][0]), set())
        code, text = self.gw.admin_get("/metrics")
        self.assertEqual(code, 200)
        text = text.decode()
        self.assertIn('lathe_deployment_requests_total{deployment="echo",code="200"}', text)
        self.assertIn('lathe_deployment_requests_total{deployment="nohold",code="503"}', text)
        self.assertIn('lathe_deployment_replicas{deployment="echo",state="wanted"} 2', text)
        self.assertIn('lathe_deployment_request_duration_seconds_bucket{deployment="echo",le="+Inf"}',
                      text)
        r = subprocess.run(["/usr/bin/promtool", "check", "metrics"], input=text, text=True,
                           capture_output=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(os.stat(self.gw.admin).st_mode & 0o777, 0o600)
        # The public listener does not serve the admin paths.
        self.assertEqual(self.gw.request("GET", "/status")[0], 404)


# An attacker without a key: opens `cap` TCP connections to the front from
# 127.0.0.1-8 in turn and sends nothing on them, then reopens each one the
# front closes (its header timeout, or a refusal), until a line comes on
# stdin; prints "holding N" once the first `cap` are open. Then it closes
# them and holds connections kept alive after one request each, until one
# is not answered 200 (one not answered at all, while the front still
# refuses too many, is tried again); prints "probe N STATUS BODY".
IDLE_HOLDER = r"""
import http.client, resource, select, socket, sys, threading, time
port, cap = int(sys.argv[1]), int(sys.argv[2])
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
n = [0]
def source():
    n[0] += 1
    return "127.0.0.%d" % (1 + n[0] % 8)
def connect():
    s = socket.socket()
    s.bind((source(), 0))
    try:
        s.connect(("127.0.0.1", port))
    except OSError:
        s.close()
        return None
    return s
held = {}
poller = select.poll()
def hold(s):
    if s:
        held[s.fileno()] = s
        poller.register(s, select.POLLIN)
for _ in range(cap):
    hold(connect())
print("holding", len(held), flush=True)
done = threading.Event()
def reopen():
    while not done.is_set():
        for fd, _ in poller.poll(200):
            poller.unregister(fd)
            held.pop(fd).close()
            hold(connect())
        time.sleep(0.01)
t = threading.Thread(target=reopen)
t.start()
sys.stdin.readline()
done.set()
t.join()
for s in held.values():
    s.close()
kept, tries = [], 0
while tries < 5000:
    tries += 1
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(source(), 0))
    try:
        c.request("GET", "/d/echo/x")
        r = c.getresponse()
        body = r.read()
    except (OSError, http.client.HTTPException):
        c.close()
        continue
    if r.status != 200:
        print("probe", len(kept), r.status, body.decode(errors="replace"), flush=True)
        break
    kept.append(c)
"""

# Another client: GETs /d/echo/x COUNT times, each on a new connection, and
# prints each status (or the error that came instead).
CLIENT = r"""
import http.client, sys
port, count, out = int(sys.argv[1]), int(sys.argv[2]), []
for i in range(count):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "/d/echo/x")
        out.append(str(c.getresponse().status))
        c.close()
    except (OSError, http.client.HTTPException) as e:
        out.append(type(e).__name__)
print(" ".join(out))
"""


def as_user(user, *cmd):
    return ["setpriv", "--reuid", user, "--regid", user, "--clear-groups", *cmd]


class GatewayProcessTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lathe-gw-p-")
        os.chmod(self.dir, 0o755)
        self.r1 = Replica(self.dir, "r1").start()

    def tearDown(self):
        if self.r1.proc.poll() is None:
            self.r1.kill9()
        shutil.rmtree(self.dir, ignore_errors=True)

    def routes(self, uid):
        write_routes(self.dir, 1, [{"name": "echo", "uid": uid, "public": True,
                                    "health_path": "/healthz",
                                    "replicas": [self.r1.route(uid=uid)]}])

    def test_sigterm_finishes_the_request_in_flight_and_exits_0(self):
        self.routes(os.geteuid())
        gw = Gateway(self.dir)
        gw.wait_healthy("echo", "r1")
        answer = []
        t = threading.Thread(target=lambda: answer.append(gw.request("GET", "/d/echo/slow?ms=1500")))
        t.start()
        wait_for(lambda: gw.deployment("echo")["in_flight"] == 1, "the slow request in flight")
        gw.proc.send_signal(signal.SIGTERM)
        t.join(30)
        self.assertEqual(gw.proc.wait(timeout=30), 0, gw.log_text())
        self.assertEqual(answer[0][0], 200)
        gw.stop()

    def test_exits_once_its_directory_is_gone(self):
        self.routes(os.geteuid())
        gw = Gateway(self.dir)
        moved = self.dir + ".old"
        try:
            gw.wait_healthy("echo", "r1")
            os.rename(self.dir, moved)  # its log stays readable there
            os.mkdir(self.dir)          # another directory in its place is not its own
            try:
                self.assertEqual(gw.proc.wait(timeout=30), 0)
            except subprocess.TimeoutExpired:
                self.fail("the gateway kept running without its directory")
            with open(os.path.join(moved, "gateway.log"), errors="replace") as f:
                self.assertIn("is gone; stopping", f.read())
        finally:
            gw.stop()
            if os.path.isdir(moved):
                os.rmdir(self.dir)
                os.rename(moved, self.dir)

    def test_io_threads(self):
        self.routes(os.geteuid())
        for bad in ("0", "65", "two"):
            r = subprocess.run([harness.LATHE, "__gateway", "--dir", self.dir, "--listen",
                                "127.0.0.1:0", "--io-threads", bad], capture_output=True,
                               text=True, timeout=30)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--io-threads", r.stderr)
        gw = Gateway(self.dir, "--io-threads", "1")
        try:
            gw.wait_healthy("echo", "r1")
            conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
            for i in range(5):
                code, _, body = gw.request("GET", f"/d/echo/x{i}", conn=conn)
                self.assertEqual((code, body["path"]), (200, f"/x{i}"))
            conn.close()
        finally:
            gw.stop()
        self.assertEqual(gw.proc.returncode, 0)

    @unittest.skipIf(shutil.which("openssl") is None, "needs the openssl command")
    def test_tls_listener(self):
        make_certs(self.dir)
        self.routes(os.geteuid())
        gw = Gateway(self.dir, "--tls-cert", os.path.join(self.dir, "server.pem"),
                     "--tls-key", os.path.join(self.dir, "server.key"))
        try:
            gw.wait_healthy("echo", "r1")
            ctx = ssl.create_default_context(cafile=os.path.join(self.dir, "ca.pem"))
            conn = http.client.HTTPSConnection("127.0.0.1", gw.port, context=ctx, timeout=30)
            code, _, body = gw.request("GET", "/d/echo/x", conn=conn)
            conn.close()
            self.assertEqual((code, body["replica"]), (200, "r1"))
            # Plain HTTP gets no answer from a TLS listener.
            with self.assertRaises((http.client.HTTPException, ConnectionError, OSError)):
                gw.request("GET", "/d/echo/x")
        finally:
            gw.stop()
        self.assertEqual(gw.proc.returncode, 0)

    def test_user_drops_to_the_given_uid(self):
        if os.geteuid() != 0:
            self.skipTest("needs root")
        user = harness.ensure_user(OTHER_USER)
        # The replica is root's: the front, now another user, still reaches it
        # (the socket is 0777) and checks that root owns it.
        self.routes(0)
        gw = Gateway(self.dir, "--user", f"{user.pw_uid}:{user.pw_gid}")
        try:
            def proc_status():
                with open(f"/proc/{gw.proc.pid}/status") as f:
                    return dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
            # gateway.json comes before the drop: wait for it.
            wait_for(lambda: proc_status()["Uid"].split()[0] == str(user.pw_uid), "the drop")
            status = proc_status()
            self.assertEqual(status["Uid"].split(), [str(user.pw_uid)] * 4)
            self.assertEqual(status["Gid"].split(), [str(user.pw_gid)] * 4)
            self.assertEqual(status["Groups"].split(), [])
            gw.wait_healthy("echo", "r1")
            code, _, body = gw.request("GET", "/d/echo/x")
            self.assertEqual((code, body["replica"]), (200, "r1"))
        finally:
            gw.stop()
        self.assertEqual(gw.proc.returncode, 0)

    def test_one_client_holding_idle_connections_does_not_stop_another(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to act as two other users")
        attacker = harness.ensure_user(OTHER_USER)
        harness.ensure_user(OTHER_USER + "2")
        self.routes(os.geteuid())
        gw = Gateway(self.dir)
        try:
            gw.wait_healthy("echo", "r1")
            # More idle connections than once took every client's place, from
            # eight loopback addresses, kept up as the front closes them.
            holder = subprocess.Popen(
                as_user(OTHER_USER, harness.PY, "-c", IDLE_HOLDER, str(gw.port), "1200"),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            self.addCleanup(holder.wait)
            self.addCleanup(holder.stdout.close)
            self.addCleanup(holder.stdin.close)
            self.assertEqual(holder.stdout.readline().split()[0], "holding")
            # Another local user is served all the while.
            r = subprocess.run(as_user(OTHER_USER + "2", harness.PY, "-c", CLIENT, str(gw.port),
                                       "5"), capture_output=True, text=True, timeout=300)
            self.assertEqual(r.stdout.split(), ["200"] * 5, r.stderr + gw.log_text())
            # The attacker's own connection over its limit is answered 503.
            holder.stdin.write("probe\n")
            holder.stdin.flush()
            probe = holder.stdout.readline().split(" ", 3)
            self.assertEqual(probe[0], "probe", probe)
            self.assertLessEqual(int(probe[1]), PER_CLIENT)
            self.assertEqual(probe[2], "503", probe)
            self.assertIn("too many connections from this user", probe[3])
            # The refusals are in the front's log, naming the client.
            self.assertIn(f"the latest from loopback uid {attacker.pw_uid}", gw.log_text())
        finally:
            gw.stop()


if __name__ == "__main__":
    unittest.main()
