"""Idempotent submissions: `POST /api/v1/runs` with an `Idempotency-Key`
creates one run however often it is sent, per user; `lathe run` sends a fresh
key and retries once with it when the daemon goes away mid-call."""
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from harness import LATHE, PY, DaemonTest, second_user

USER = "lathe-it-user"

# POSTs a spec to the daemon's socket with an optional key and prints
# {"status", "replayed", "body"}: run as a child so that it can run as
# another user (setpriv) and connect with that user's credentials.
POST = r"""
import http.client, json, socket, sys
class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(sys.argv[1])
c = Unix("lathe", timeout=60)
headers = {"Content-Type": "application/json"}
if sys.argv[3] != "-":
    headers["Idempotency-Key"] = sys.argv[3]
c.request("POST", "/api/v1/runs", body=sys.argv[2], headers=headers)
r = c.getresponse()
print(json.dumps({"status": r.status, "replayed": r.getheader("Idempotent-Replayed"),
                  "body": json.loads(r.read())}))
"""



def spec(*command, **extra):
    s = {"command": list(command), "workdir": "/tmp"}
    s.update(extra)
    return s


class Idempotency(DaemonTest):
    gpus = "none"

    def post(self, body, key=None, user=None):
        cmd = [PY, "-c", POST, os.path.join(self.d.home, "lathe.sock"),
               json.dumps(body), "-" if key is None else key]
        if user is not None:
            cmd = ["setpriv", "--reuid", user, "--regid", user, "--init-groups", *cmd]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def all_runs(self):
        return self.d.runs(all_runs=True)

    def test_the_same_key_and_body_give_one_run(self):
        first = self.post(spec("true"), key="submit-1")
        self.assertEqual(first["status"], 201, first)
        self.assertIsNone(first["replayed"])
        again = self.post(spec("true"), key="submit-1")
        self.assertEqual(again["status"], 201, again)
        self.assertEqual(again["replayed"], "true")
        self.assertEqual(again["body"]["id"], first["body"]["id"])
        # The same request written differently (another key order, a default
        # spelled out) is the same request: the spec is compared canonically.
        same = self.post({"workdir": "/tmp", "gpus": 0, "command": ["true"]}, key="submit-1")
        self.assertEqual((same["status"], same["body"].get("id")), (201, first["body"]["id"]), same)
        # The IETF draft's quoted form names the same key.
        quoted = self.post(spec("true"), key='"submit-1"')
        self.assertEqual(quoted["body"].get("id"), first["body"]["id"], quoted)
        self.assertEqual([r["id"] for r in self.all_runs()], [first["body"]["id"]])
        # Without a key, each request is a run of its own.
        self.assertEqual(self.post(spec("true"))["status"], 201)
        self.assertEqual(self.post(spec("true"))["status"], 201)
        self.assertEqual(len(self.all_runs()), 3)

    def test_a_named_run_replays_although_its_name_is_taken(self):
        body = spec("sleep", "60", name="named-once")
        first = self.post(body, key="named")
        self.assertEqual(first["status"], 201, first)
        again = self.post(body, key="named")  # the name is in use: by this very run
        self.assertEqual((again["status"], again["body"].get("id")), (201, first["body"]["id"]), again)
        self.d.cli("stop", first["body"]["id"])

    def test_the_same_key_with_another_body_is_422(self):
        first = self.post(spec("true"), key="k-422")
        self.assertEqual(first["status"], 201, first)
        other = self.post(spec("false"), key="k-422")
        self.assertEqual(other["status"], 422, other)
        err = other["body"]
        self.assertEqual(err["msg_id"], "run.idempotency_key_reused")
        self.assertIn("k-422", err["error"])
        self.assertTrue(err["zh"])
        self.assertEqual(len(self.all_runs()), 1)

    def test_a_malformed_key_is_400_naming_the_header(self):
        for bad in ["has space", "x" * 256, '""', "caf\u00e9"]:
            r = self.post(spec("true"), key=bad)
            self.assertEqual(r["status"], 400, (bad, r))
            self.assertEqual(r["body"]["msg_id"], "api.bad_idempotency_key")
            self.assertIn("Idempotency-Key", r["body"]["error"])
        ok = self.post(spec("true"), key="A-z_0.9:~+/=" + "k" * 243)  # 255 characters
        self.assertEqual(ok["status"], 201, ok)
        self.assertEqual(len(self.all_runs()), 1)

    def test_users_keys_are_their_own(self):
        pw = second_user(self, USER)
        mine = self.post(spec("true"), key="shared-key")
        theirs = self.post(spec("true"), key="shared-key", user=USER)
        self.assertEqual(theirs["status"], 201, theirs)
        self.assertIsNone(theirs["replayed"])
        self.assertNotEqual(theirs["body"]["id"], mine["body"]["id"])
        self.assertEqual(theirs["body"]["uid"], pw.pw_uid)
        # Each replays their own, and a different body is not a conflict
        # with the other user's request.
        self.assertEqual(self.post(spec("true"), key="shared-key", user=USER)["body"]["id"],
                         theirs["body"]["id"])
        self.assertEqual(self.post(spec("true"), key="shared-key")["body"]["id"], mine["body"]["id"])
        other_body = self.post(spec("false"), key="only-root-used-this")
        self.assertEqual(other_body["status"], 201)
        self.assertEqual(self.post(spec("true"), key="only-root-used-this", user=USER)["status"], 201)
        self.assertEqual(len(self.all_runs()), 4)

    def test_a_key_survives_a_kill_between_commit_and_answer(self):
        """The client sends, the daemon commits, and dies before the client
        has read an answer; after the restart the retry gets the same run."""
        body = json.dumps(spec("true")).encode()
        s = socket.socket(socket.AF_UNIX)
        s.connect(os.path.join(self.d.home, "lathe.sock"))
        s.sendall(b"POST /api/v1/runs HTTP/1.1\r\nHost: lathe\r\nIdempotency-Key: crash-1\r\n"
                  b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() +
                  b"\r\n\r\n" + body)
        runs = self.d.wait_for(lambda: self.all_runs(), "the submission to be committed")
        self.d.kill9()  # the answer, if written at all, is never read
        s.close()
        self.d.start()
        again = self.post(spec("true"), key="crash-1")
        self.assertEqual(again["status"], 201, again)
        self.assertEqual(again["replayed"], "true")
        self.assertEqual(again["body"]["id"], runs[0]["id"])
        ps = self.d.cli("ps", "-a", "--json")
        self.assertEqual([r["id"] for r in json.loads(ps.stdout)], [runs[0]["id"]])


class RestartingDaemon(DaemonTest):
    """A second user's `lathe run` and `lathe token create`, started while the
    root daemon is down — stopped (its socket gone) or killed (its socket left,
    refusing) — wait for it and happen exactly once when it is back."""
    gpus = "none"

    def setUp(self):
        self.pw = second_user(self, USER)
        super().setUp()

    def start_waiting(self, *args):
        """`lathe ARGS` as the second user, returned once it says it waits."""
        p = subprocess.Popen(["setpriv", "--reuid", USER, "--regid", USER, "--init-groups",
                              LATHE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=self.d.env(HOME="/tmp"))
        self.addCleanup(lambda: p.poll() is None and p.kill())
        first = p.stderr.readline()
        self.assertIn("waiting up to 15 s", first, p.stderr.read() if p.poll() is not None else "")
        return p

    def finish(self, p):
        out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 0, err)
        return out

    def test_submissions_wait_for_the_daemon_to_come_back_and_happen_once(self):
        runs, tokens = [], []
        for down in (self.d.stop, self.d.kill9):
            down()
            submit = self.start_waiting("run", "--workdir", "/tmp", "--", "true")
            token = self.start_waiting("token", "create", "--json")
            self.d.start()
            runs.append(self.finish(submit).strip())
            tokens.append(json.loads(self.finish(token))["id"])
        self.assertEqual(sorted(r["id"] for r in self.d.runs(all_runs=True)), sorted(runs))
        for r in runs:
            self.assertEqual(self.d.inspect(r)["uid"], self.pw.pw_uid)
        listed = json.loads(self.d.cli("token", "ls", "--all", "--json").stdout)
        self.assertEqual(sorted(t["id"] for t in listed if t.get("kind", "token") == "token"),
                         sorted(tokens))

    def test_other_commands_and_a_home_no_daemon_ran_in_do_not_wait(self):
        self.d.stop()
        r = self.d.cli("ps", check=False)
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertNotIn("waiting", r.stderr)
        empty = tempfile.mkdtemp(prefix="lathe-it-nodaemon-")
        self.addCleanup(subprocess.run, ["rm", "-rf", empty])
        r = self.d.cli("run", "--", "true", env=self.d.env(LATHE_HOME=empty), check=False)
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertNotIn("waiting", r.stderr)


class FakeDaemon:
    """Answers on <home>/lathe.sock like a daemon that is killed and restarted
    while it handles the first POST: that connection closes without an answer
    and the socket is gone for `down_s` seconds. Records each POST's key."""

    def __init__(self, home, down_s=0.5):
        self.path = os.path.join(home, "lathe.sock")
        self.down_s = down_s
        self.keys = []
        self.drop_next_post = True
        self.stopping = False
        self.listener = self.listen()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def listen(self):
        s = socket.socket(socket.AF_UNIX)
        s.bind(self.path)
        s.listen(16)
        s.settimeout(0.1)
        return s

    def serve(self):
        while not self.stopping:
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            with conn:
                self.handle(conn)

    def handle(self, conn):
        conn.settimeout(10)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, body = data.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
        while len(body) < int(headers.get("content-length", "0")):
            body += conn.recv(65536)
        if lines[0].startswith("POST /api/v1/runs"):
            self.keys.append(headers.get("idempotency-key"))
            if self.drop_next_post:
                self.drop_next_post = False
                # Killed mid-call: the socket goes, the connection closes
                # without an answer, and the socket is back a moment later.
                self.listener.close()
                os.unlink(self.path)
                conn.shutdown(socket.SHUT_RDWR)
                time.sleep(self.down_s)
                self.listener = self.listen()
                return
            self.answer(conn, 201, {"id": "r-fake-%d" % len(self.keys), "state": "queued"})
        else:
            self.answer(conn, 200, {"version": "fake"})

    @staticmethod
    def answer(conn, status, obj):
        body = json.dumps(obj).encode()
        conn.sendall(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nConnection: close\r\n"
                     b"Content-Length: %d\r\n\r\n" % (status, len(body)) + body)

    def stop(self):
        self.stopping = True
        self.thread.join()
        self.listener.close()


class CliRetry(unittest.TestCase):
    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="lathe-fake-")
        self.fake = FakeDaemon(self.home)

    def tearDown(self):
        self.fake.stop()
        subprocess.run(["rm", "-rf", self.home], check=False)

    def lathe_run(self):
        env = dict(os.environ, LATHE_HOME=self.home, LANG="C.UTF-8")
        env.pop("LATHE_LANG", None)
        return subprocess.run([LATHE, "run", "--", "true"], capture_output=True, text=True,
                              env=env, timeout=120)

    def test_lathe_run_retries_once_with_the_same_key(self):
        r = self.lathe_run()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "r-fake-2")
        self.assertIn("same idempotency key", r.stderr)
        self.assertEqual(len(self.fake.keys), 2, self.fake.keys)
        key = self.fake.keys[0]
        self.assertTrue(key and len(key) >= 32, key)
        self.assertEqual(self.fake.keys[1], key)
        # The next submission is another request: a fresh key, no retry.
        r = self.lathe_run()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(self.fake.keys), 3)
        self.assertNotEqual(self.fake.keys[2], key)
        self.assertNotIn("idempotency", r.stderr)


if __name__ == "__main__":
    unittest.main()
