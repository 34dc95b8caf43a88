"""Command deployments end to end: `lathe deploy create NAME --port P -- CMD`
runs a program of the user's (here a small Python HTTP server) as the replicas,
behind the same front as a model: answers come from both replicas through
/d/NAME/, readiness is the --ready path, a new command rolls out as revision 2
without a failed request, and nobody reaches the program but through the front
(on a root daemon its port is inside the run's own network namespace; its
socket's directory keeps other users out). Bad input is refused naming the
field, in English and Chinese.
"""
import http.client
import json
import os
import socket
import subprocess
import unittest

from harness import PY, DaemonTest, second_user
from test_deployments import Load

USER = "lathe-it-deploy"

# Answers /health with 200, / with 404 (so only --ready /health makes it
# ready), anything else with its pid, its tag (argv[1]) and where it listens.
APP = r"""
import http.server, json, os, sys
TAG = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        code = 404 if self.path == "/" else 200
        body = json.dumps({"pid": os.getpid(), "tag": TAG, "path": self.path,
                           "port": os.environ["PORT"],
                           "lathe_port": os.environ.get("LATHE_PORT")}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        # A long head, written in one piece by end_headers(): more than a
        # status line in the probe's first read (once seen as "not HTTP").
        self.send_header("X-Pad", "p" * 300)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = answer
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
"""

# A declared port unlikely to be in use on the host.
DECLARED = 18457


class CommandDeployments(DaemonTest):
    gpus = "sim:2x24GB"

    def show(self, name, user=None, check=True):
        r = self.d.cli("deploy", "show", name, "--json", user=user, check=check)
        return json.loads(r.stdout) if r.returncode == 0 else r

    def port(self, name):
        return int(self.show(name)["url"].split(":")[2].split("/")[0])

    def wait_ready(self, name, n, timeout=90):
        return self.d.wait_for(
            lambda: (lambda s: s if s["replicas"]["ready"] >= n and s["health"] == "healthy"
                     else None)(self.show(name)),
            f"{name}: {n} replicas ready", timeout)

    def call(self, port, path, method="GET"):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request(method, path, body=b"{}" if method == "POST" else None)
        r = c.getresponse()
        out = r.status, r.read(), dict(r.getheaders())
        c.close()
        return out

    def create(self, name, tag, *extra):
        return self.d.cli("deploy", "create", name, "--port", str(DECLARED), "--ready", "/health",
                          "--public", *extra, "--wait", "--", PY, "-c", APP, tag)

    def isolated(self, run):
        return self.d.inspect(run)["spec"].get("network") == "isolated"

    def test_two_replicas_of_a_command_answer_through_the_front(self):
        out = self.create("web", "v1", "--replicas", "2").stdout
        self.assertIn("/d/root/web/", out)
        self.assertIn("http.server", out, "the summary shows the command")
        s = self.wait_ready("web", 2)
        self.assertEqual(s["version"], "rev-1")
        self.assertEqual(s["model"], "")
        self.assertEqual(s["command"][0], PY)
        self.assertIn("/health", s["curl"])
        text = self.d.cli("deploy", "show", "web").stdout
        self.assertIn("http.server", text)
        self.assertIn("rev-1", text)
        port = self.port("web")
        pids, ports = set(), set()
        for _ in range(40):
            status, body, headers = self.call(port, "/d/web/echo")
            self.assertEqual(status, 200, body)
            answer = json.loads(body)
            self.assertEqual(answer["path"], "/echo", "the front strips /d/NAME")
            self.assertEqual(answer["tag"], "v1")
            self.assertEqual(answer["lathe_port"], answer["port"])
            self.assertEqual(headers.get("Lathe-Model-Version"), "rev-1")
            pids.add(answer["pid"])
            ports.add(answer["port"])
        self.assertEqual(len(pids), 2, "both replicas answer")
        # / is the app's 404, passed through: readiness came from /health.
        self.assertEqual(self.call(port, "/d/web/")[0], 404)
        runs = [r["run"] for r in s["replicas"]["list"]]
        if self.isolated(runs[0]):
            self.assertEqual(ports, {str(DECLARED)}, "isolated: $PORT is the declared port")
        else:
            self.assertNotIn(str(DECLARED), ports, "host network: a free loopback port")

    def test_nobody_reaches_the_program_but_through_the_front(self):
        second_user(self, USER)
        self.d.cli("deploy", "create", "mine", "--port", str(DECLARED), "--ready", "/health",
                   "--wait", "--", PY, "-c", APP, "v1")
        port = self.port("mine")
        self.assertEqual(self.call(port, "/d/mine/echo")[0], 401, "a key is needed")
        run = self.show("mine")["replicas"]["list"][0]["run"]
        if not self.isolated(run):
            self.skipTest("the daemon cannot isolate networks: the app's port is local")
        sock = self.d.inspect(run)["spec"]["deployment"]["socket"]
        probe = ("import socket, sys\n"
                 "for fam, addr in ((socket.AF_INET, ('127.0.0.1', int(sys.argv[1]))),"
                 " (socket.AF_UNIX, sys.argv[2])):\n"
                 "    s = socket.socket(fam)\n"
                 "    try:\n"
                 "        s.connect(addr); print('connected', addr)\n"
                 "    except OSError as e:\n"
                 "        print('refused', addr, e.strerror)\n")
        out = subprocess.run(["setpriv", "--reuid", USER, "--regid", USER, "--init-groups", PY,
                              "-c", probe, str(DECLARED), sock],
                             capture_output=True, text=True, timeout=30).stdout
        self.assertNotIn("connected", out)
        self.assertIn("Connection refused", out, "the port is not on the host's loopback")
        self.assertIn("Permission denied", out, "the socket's directory keeps others out")
        # Not even root reaches the app on the host's loopback.
        with socket.socket() as s:
            self.assertNotEqual(s.connect_ex(("127.0.0.1", DECLARED)), 0)

    def test_a_new_command_rolls_out_as_rev_2_without_a_failed_request(self):
        self.create("web", "v1", "--replicas", "2")
        self.wait_ready("web", 2)
        port = self.port("web")
        with Load(port, "/d/web/echo", b"{}") as load:
            self.assertTrue(load.wait_ok(30))
            self.d.cli("deploy", "update", "web", "--", PY, "-c", APP, "v2")
            self.d.wait_for(lambda: self.show("web")["version"] == "rev-2" and
                            all(r["version"] == "rev-2" for r in self.show("web")["replicas"]["list"]
                                if r["state"] == "running"),
                            "the rollout to rev-2", 120)
            self.assertTrue(load.wait_ok(30))
        self.assertEqual(load.failures, [])
        self.assertIn("rev-1", load.versions)
        self.assertEqual(load.versions[-1], "rev-2")
        status, body, headers = self.call(port, "/d/web/echo")
        self.assertEqual(json.loads(body)["tag"], "v2")
        # Scaling is no new revision.
        self.d.cli("deploy", "scale", "web", "1")
        self.d.wait_for(lambda: len([r for r in self.show("web")["replicas"]["list"]
                                     if r["state"] == "running"]) == 1, "scaled to 1", 90)
        self.assertEqual(self.show("web")["version"], "rev-2")

    def test_bad_input_is_refused_naming_the_field(self):
        cmd = ("--", PY, "-c", APP, "v1")
        cases = [
            (("--model", "tri/1", "--port", "8000", *cmd), "'command'"),
            (cmd, "'port'"),
            (("--port", "70000", *cmd), "'port'"),
            (("--port", "8000", "--ready", "health", *cmd), "'ready'"),
            (("--port", "8000"), "'command'"),
            # What `lathe run` refuses for a run is refused for a replica at once.
            (("--port", "8000", "--memory", "10PB", *cmd), "'memory'"),
            (("--port", "8000", "--cpus", "1000", *cmd), "'cpus'"),
        ]
        for args, word in cases:
            r = self.d.cli("deploy", "create", "bad", *args, check=False)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(word, r.stderr, args)
            zh = self.d.cli("deploy", "create", "bad", *args, check=False,
                            env=self.d.env(LATHE_LANG="zh"))
            self.assertRegex(zh.stderr, "[\u4e00-\u9fff]", args)
            self.assertIn(word.strip("'"), zh.stderr, args)
        self.assertEqual(json.loads(self.d.cli("deploy", "ls", "--json").stdout), [])

    def test_a_refused_start_waits_longer_each_time(self):
        # A workdir in the daemon's own home: each replica's start is refused.
        self.d.cli("deploy", "create", "refused", "--port", "8000", "--workdir", self.d.home,
                   "--", PY, "-c", APP, "v1")

        def refused():
            ev = [e for e in self.show("refused")["events"] if e["msg_id"] == "deploy.start_refused"]
            return ev if len(ev) >= 3 else None
        ev = self.d.wait_for(refused, "three refused starts", 120)[:3]
        self.assertEqual([e["args"]["delay"] for e in ev], ["1s", "2s", "4s"], ev)
        for before, after in zip(ev, ev[1:]):
            waited = after["ts_ms"] - before["ts_ms"]
            self.assertGreaterEqual(waited, self.delay_ms(before["args"]["delay"]) - 50, ev)
        self.assertIn(self.d.home, ev[0]["args"]["detail"])

    def test_a_replica_stopped_by_hand_is_replaced_as_no_failure(self):
        self.create("stopped", "v1")
        first = self.wait_ready("stopped", 1)["replicas"]["list"][0]["run"]
        self.d.cli("stop", first)

        def replaced():
            s = self.show("stopped")
            live = [r["run"] for r in s["replicas"]["list"]
                    if r["state"] not in ("stopped", "failed", "lost", "preempted", "succeeded")]
            return s if live and first not in live and s["health"] == "healthy" else None
        s = self.d.wait_for(replaced, "the stopped replica replaced", 90)
        ids = [e["msg_id"] for e in s["events"]]
        self.assertIn("deploy.replica_ended", ids)
        self.assertNotIn("deploy.replica_crashed", ids, s["events"])
        # Removing: it says so at once, not the last pass's "healthy".
        gone = json.loads(self.d.cli("deploy", "rm", "stopped", "--json").stdout)
        self.assertTrue(gone["removing"])
        for d in json.loads(self.d.cli("deploy", "ls", "--json").stdout):
            self.assertEqual(d["health"], "removing", d)
            self.assertEqual(d["replicas"]["wanted"], 0, d)
            self.assertIn("删除", d["reason_text"]["zh"], d)

    def test_an_unknown_model_is_said_in_the_readers_language(self):
        zh = self.d.cli("deploy", "create", "x", "--model", "nosuch@prod", check=False,
                        env=self.d.env(LATHE_LANG="zh"))
        self.assertEqual(zh.returncode, 2, zh.stderr)
        self.assertIn("nosuch", zh.stderr)
        self.assertNotIn("not found", zh.stderr)
        en = self.d.cli("deploy", "create", "x", "--model", "nosuch@prod", check=False)
        self.assertIn("nosuch", en.stderr)
        self.assertNotRegex(en.stderr, "[\u4e00-\u9fff]")

    def test_down_all_stops_the_front_too(self):
        self.create("down", "v1")
        port = self.port("down")
        self.assertEqual(self.call(port, "/d/down/x")[0], 200)
        with open(os.path.join(self.d.home, "deployments", "gateway", "gateway.json")) as f:
            pid = json.load(f)["pid"]
        r = self.d.cli("down", "--all")
        self.assertIn("front stopped", r.stdout)
        self.d.proc.wait(timeout=60)
        self.d.wait_for(lambda: not os.path.exists(f"/proc/{pid}"), "the front to exit")
        with self.assertRaises(OSError):
            self.call(port, "/d/down/x")

    @staticmethod
    def delay_ms(text):
        return int(text.rstrip("s")) * 1000


if __name__ == "__main__":
    unittest.main()
