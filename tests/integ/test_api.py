"""The API over TCP with the bearer token, server-sent events, and lathe up/down."""
import http.client
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from harness import LATHE, Daemon, DaemonTest


class Api(DaemonTest):
    def endpoint(self):
        with open(os.path.join(self.d.home, "endpoint.json")) as f:
            host, port = json.load(f)["tcp"].rsplit(":", 1)
        with open(os.path.join(self.d.home, "token")) as f:
            token = f.read().strip()
        return host, int(port), token

    def test_status_and_inspect_print_for_people(self):
        out = self.d.cli("status").stdout
        self.assertIn("runs: none queued or active", out)
        self.assertIn("backend: local (", out)  # the execution backend and what it honours
        status = json.loads(self.d.cli("status", "--json").stdout)
        self.assertEqual(status["backend"]["name"], "local")
        self.assertFalse(status["backend"]["capabilities"]["places_runs"])
        run = self.d.submit("--name", "fmt", "--", "sh", "-c", "sleep 30")
        self.d.wait_state(run, "running")
        self.assertIn("runs: 1 running", self.d.cli("status").stdout)
        shown = self.d.cli("inspect", run).stdout
        self.assertIn("  command:      sh -c 'sleep 30'", shown)
        self.assertRegex(shown, r"PATH=\(\d+ entries\)")
        self.assertNotIn('{"', shown)  # no JSON for people
        self.d.cli("stop", run)

    def test_ps_shows_a_run_that_just_ended(self):
        run = self.d.submit("--name", "quick-fail", "--", "sh", "-c", "exit 3")
        self.d.wait_state(run, "failed")
        table = self.d.cli("ps").stdout
        self.assertIn(run, table)
        self.assertIn("failed (3)", table)
        # The API lists it only when asked for recent ones, and says how many runs there are.
        _, token = self.endpoint()[1:], self.endpoint()[2]
        status, body = self.request("GET", "/api/v1/runs", token=token)
        listed = json.loads(body)
        self.assertEqual(status, 200)
        self.assertNotIn(run, [r["id"] for r in listed["runs"]])
        self.assertGreaterEqual(listed["total_all"], 1)
        status, body = self.request("GET", "/api/v1/runs?recent=60", token=token)
        self.assertIn(run, [r["id"] for r in json.loads(body)["runs"]])
        status, body = self.request("GET", "/api/v1/runs?recent=soon", token=token)
        self.assertEqual(status, 400)
        self.assertIn("recent", body)

    def test_ps_after_a_burst_shows_the_ten_newest_that_ended_and_counts_the_rest(self):
        runs = [self.d.submit("--", "true") for _ in range(13)]
        for r in runs:
            self.d.wait_state(r, "succeeded")
        out = self.d.cli("ps")
        shown = [r for r in runs if r in out.stdout]
        self.assertEqual(shown, runs[3:])  # the ten newest
        self.assertIn("3 finished runs are not shown", out.stderr)
        _, token = self.endpoint()[1:], self.endpoint()[2]
        status, body = self.request("GET", "/api/v1/runs?recent=300&recent_limit=4", token=token)
        listed = json.loads(body)
        self.assertEqual([r["id"] for r in listed["runs"]], list(reversed(runs[-4:])))
        self.assertEqual(listed["total"], 4)
        self.assertGreaterEqual(listed["total_all"], 13)

    def test_a_fresh_daemon_has_a_snapshot_store(self):
        # Right after start, before any run captured a checkpoint.
        src = tempfile.mkdtemp(prefix="lathe-it-fresh-")
        self.addCleanup(shutil.rmtree, src, True)
        with open(os.path.join(src, "w.bin"), "wb") as f:
            f.write(b"x" * 1000)
        self.assertTrue(os.path.exists(os.path.join(self.d.home, "store", "config.json")))
        r = self.d.cli("snap", "create", src, "--json")
        self.assertTrue(json.loads(r.stdout)["id"])

    def request(self, method, path, token=None, body=None):
        host, port, _ = self.endpoint()
        c = http.client.HTTPConnection(host, port, timeout=30)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if body is not None:
            headers["Content-Type"] = "application/json"
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        return r.status, r.read().decode()

    def test_tcp_needs_the_token(self):
        host, port, token = self.endpoint()
        self.assertEqual(host, "127.0.0.1")
        self.assertEqual(os.stat(os.path.join(self.d.home, "token")).st_mode & 0o777, 0o600)
        status, body = self.request("GET", "/api/v1/status")
        self.assertEqual(status, 401)
        self.assertEqual(json.loads(body)["msg_id"], "api.unauthenticated")
        status, _ = self.request("GET", "/api/v1/status", token="0" * 64)
        self.assertEqual(status, 401)
        status, body = self.request("GET", "/api/v1/status", token=token)
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["gpus"]["count"], 4)
        status, body = self.request("POST", "/api/v1/runs", token=token,
                                    body=json.dumps({"command": ["true"], "workdir": "/tmp"}))
        self.assertEqual(status, 201, body)
        run = json.loads(body)["id"]
        self.assertEqual(self.d.wait_state(run, "succeeded")["exit_code"], 0)
        status, _ = self.request("GET", "/api/v1/nothing", token=token)
        self.assertEqual(status, 404)

    def call(self, method, path, token):
        host, port, _ = self.endpoint()
        c = http.client.HTTPConnection(host, port, timeout=30)
        c.request(method, path, headers={"Authorization": f"Bearer {token}"} if token else {})
        r = c.getresponse()
        return r.status, r.getheader("Allow"), json.loads(r.read() or b"{}")

    def test_a_wrong_method_is_405_with_allow(self):
        _, _, token = self.endpoint()
        run = self.d.submit("--", "true")
        for method, path, allow in (("DELETE", "/api/v1/runs", "GET, POST"),
                                    ("GET", "/api/v1/shutdown", "POST"),
                                    ("PUT", f"/api/v1/runs/{run}", "GET, DELETE"),
                                    ("GET", f"/api/v1/runs/{run}/stop", "POST"),
                                    ("GET", "/api/v1/snapshots/latest/restore", "POST")):
            with self.subTest(method=method, path=path):
                status, allowed, body = self.call(method, path, token)
                self.assertEqual(status, 405, body)
                self.assertEqual(allowed, allow)
                self.assertEqual(body["msg_id"], "api.bad_method")
                self.assertIn(allow, body["zh"])
        status, allowed, body = self.call("GET", f"/api/v1/runs/{run}/nothing", token)
        self.assertEqual((status, allowed, body["msg_id"]), (404, None, "api.no_route"))
        # Authentication comes first: no token, no list of methods.
        status, allowed, _ = self.call("DELETE", "/api/v1/runs", None)
        self.assertEqual((status, allowed), (401, None))

    def test_numbers_in_the_query_are_checked(self):
        _, _, token = self.endpoint()
        run = self.d.submit("--", "true")
        for path, param in (("/api/v1/runs?limit=abc", "limit"), ("/api/v1/runs?limit=-1", "limit"),
                            ("/api/v1/runs?all=1&limit=1e3", "limit"), ("/api/v1/runs?limit=", "limit"),
                            (f"/api/v1/runs/{run}/events?after=abc", "after"),
                            ("/api/v1/events?follow=1&after=1x", "after")):
            with self.subTest(path):
                status, _, body = self.call("GET", path, token)
                self.assertEqual(status, 400, body)
                self.assertEqual(body["msg_id"], "api.bad_number")
                self.assertEqual(body["args"]["param"], param)
                self.assertIn(param, body["error"])
                self.assertIn(param, body["zh"])
        status, _, body = self.call("GET", "/api/v1/runs?all=1&limit=0", token)  # 0: the default
        self.assertEqual(status, 200)
        self.assertEqual(len(body["runs"]), 1)
        status, _, body = self.call("GET", f"/api/v1/runs/{run}/events?after=0", token)
        self.assertEqual(status, 200)
        self.assertTrue(body["events"])

    def test_events_stream_ends_when_the_run_ends(self):
        host, port, token = self.endpoint()
        run = self.d.submit("--", "sh", "-c", "sleep 1")
        c = http.client.HTTPConnection(host, port, timeout=60)
        c.request("GET", f"/api/v1/runs/{run}/events?follow=1",
                  headers={"Authorization": f"Bearer {token}"})
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        self.assertTrue(r.getheader("Content-Type").startswith("text/event-stream"))
        text = r.read().decode()  # returns when the server ends the stream
        events = [l[len("event: "):] for l in text.splitlines() if l.startswith("event: ")]
        self.assertEqual(events[-1], "end")
        tos = [json.loads(l[len("data: "):])["data"].get("to")
               for l in text.splitlines() if l.startswith("data: ") and '"state"' in l]
        self.assertEqual(tos, ["queued", "starting", "running", "succeeded"])

    def sse(self, method, path, body):
        host, port, token = self.endpoint()
        c = http.client.HTTPConnection(host, port, timeout=60)
        c.request(method, path, body=json.dumps(body),
                  headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        self.assertTrue(r.getheader("Content-Type").startswith("text/event-stream"))
        text = r.read().decode()
        c.close()
        out, event = [], None
        for line in text.splitlines():
            if line.startswith("event: "):
                event = line[len("event: "):]
            elif line.startswith("data: "):
                out.append((event, json.loads(line[len("data: "):])))
        return out

    def test_restore_streams_its_progress(self):
        base = tempfile.mkdtemp(prefix="lathe-it-restore-")
        self.addCleanup(shutil.rmtree, base, True)
        ckpt = os.path.join(base, "ckpt")
        run = self.d.submit("--checkpoint-dir", ckpt, "--", "sh", "-c",
                            f"head -c 25165824 /dev/urandom > {ckpt}/w.bin; sleep 1")
        self.d.wait_state(run, "succeeded")
        self.d.wait_for(lambda: any(e["type"] == "checkpoint" for e in self.d.inspect(run)["events"]),
                        "a snapshot of " + run)
        snap = json.loads(self.d.cli("snap", "ls", run, "--json").stdout)[0]["id"]
        out = os.path.join(base, "out")
        events = self.sse("POST", f"/api/v1/snapshots/{snap}/restore?progress=1", {"to": out})
        kinds = [e for e, _ in events]
        self.assertEqual(kinds[-1], "result", kinds)
        # The restorer reports from a thread on a timer, and once at the end:
        # how many events come depends on the machine's speed, not fewer than one.
        progress = [d for e, d in events if e == "progress"]
        self.assertGreaterEqual(len(progress), 1, kinds)
        done = [p["done_bytes"] for p in progress]
        self.assertEqual(done, sorted(done))
        self.assertEqual(progress[-1]["done_bytes"], 25165824)
        self.assertEqual(progress[-1]["total_bytes"], 25165824)
        self.assertEqual(events[-1][1]["bytes"], 25165824)
        with open(os.path.join(ckpt, "w.bin"), "rb") as a, open(os.path.join(out, "w.bin"), "rb") as b:
            self.assertEqual(a.read(), b.read())
        # A failure inside the stream comes as an "error" event carrying the
        # error body and its HTTP status: the target is not empty now.
        events = self.sse("POST", f"/api/v1/snapshots/{snap}/restore?progress=1", {"to": out})
        self.assertEqual([e for e, _ in events][-1], "error")
        err = events[-1][1]
        self.assertEqual(err["http"], 409, err)
        self.assertIn("--force", err["en"])
        self.assertIn("--force", err["zh"])


class UpDown(unittest.TestCase):
    def test_up_is_idempotent_and_down_keeps_runs(self):
        d = Daemon(gpus="none")
        env = d.env()
        try:
            r = subprocess.run([LATHE, "up", "--gpus", "none"], env=env, capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("lathe.sock", r.stdout)
            r = subprocess.run([LATHE, "up"], env=env, capture_output=True, text=True, timeout=60)
            self.assertIn("already running", r.stdout)
            run = d.submit("--", "sh", "-c", "sleep 3; echo done")
            d.wait_state(run, "running")
            r = subprocess.run([LATHE, "down"], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = subprocess.run([LATHE, "ps"], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 4)
            subprocess.run([LATHE, "up", "--gpus", "none"], env=env, check=True,
                           capture_output=True, timeout=60)
            self.assertEqual(d.wait_state(run, "succeeded")["exit_code"], 0)
            self.assertEqual(d.logs(run), "done\n")
        finally:
            subprocess.run([LATHE, "down"], env=env, capture_output=True, timeout=60)
            d.cleanup()

    def test_up_starts_the_daemon_detached_without_the_callers_descriptors(self):
        d = Daemon(gpus="none")
        env = d.env()
        r_fd, w_fd = os.pipe()  # left open to `lathe up`, as a shell or a CI runner leaves fds
        try:
            r = subprocess.run([LATHE, "up", "--gpus", "none"], env=env, capture_output=True,
                               text=True, timeout=60, pass_fds=(w_fd,))
            self.assertEqual(r.returncode, 0, r.stderr)
            status = json.loads(subprocess.run([LATHE, "status", "--json"], env=env, check=True,
                                               capture_output=True, text=True).stdout)
            pid = status["pid"]
            self.assertEqual(os.getsid(pid), pid)  # its own session, away from our terminal
            links = {}
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    links[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
                except FileNotFoundError:
                    pass  # one the daemon closed meanwhile (a file it read at start)
            self.assertEqual(links["0"], "/dev/null")
            self.assertEqual(links["1"], os.path.join(d.home, "daemon.log"))
            self.assertEqual(links["2"], links["1"])
            pipe = f"pipe:[{os.fstat(w_fd).st_ino}]"
            self.assertNotIn(pipe, links.values(), links)
        finally:
            os.close(r_fd)
            os.close(w_fd)
            subprocess.run([LATHE, "down"], env=env, capture_output=True, timeout=60)
            d.cleanup()

    def test_up_says_which_flags_the_running_daemon_does_not_have(self):
        d = Daemon(gpus="none")
        env = d.env()
        try:
            r = subprocess.run([LATHE, "up", "--gpus", "none"], env=env, capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            status = json.loads(subprocess.run([LATHE, "status", "--json"], env=env, check=True,
                                               capture_output=True, text=True).stdout)
            self.assertEqual(status["gpus"]["spec"], "none")
            # The same flags again: nothing to say.
            r = subprocess.run([LATHE, "up", "--gpus", "none"], env=env, capture_output=True,
                               text=True, timeout=60)
            self.assertEqual((r.returncode, r.stderr), (0, ""))
            self.assertIn("already running", r.stdout)
            r = subprocess.run([LATHE, "up", "--gpus", "sim:4x24GB", "--grace", "3s"], env=env,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("already running", r.stdout)
            self.assertIn("--gpus sim:4x24GB is not applied: the running daemon has none", r.stderr)
            self.assertIn("--grace 3s is not applied: the running daemon has 10s", r.stderr)
            self.assertIn("lathe down && lathe up --gpus sim:4x24GB --grace 3s", r.stderr)
            zh = subprocess.run([LATHE, "up", "--gpus", "sim:4x24GB"], env=d.env(LANG="zh_CN.UTF-8"),
                                capture_output=True, text=True, timeout=60)
            self.assertEqual(zh.returncode, 1, zh.stderr)
            self.assertIn("--gpus sim:4x24GB 未生效：正在运行的守护进程用的是 none", zh.stderr)
            self.assertIn("lathe down && lathe up --gpus sim:4x24GB", zh.stderr)
            # The daemon was left as it was.
            status = json.loads(subprocess.run([LATHE, "status", "--json"], env=env, check=True,
                                               capture_output=True, text=True).stdout)
            self.assertEqual(status["gpus"]["count"], 0)
        finally:
            subprocess.run([LATHE, "down"], env=env, capture_output=True, timeout=60)
            d.cleanup()


if __name__ == "__main__":
    unittest.main()
