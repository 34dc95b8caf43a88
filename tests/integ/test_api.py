"""The API over TCP with the bearer token, server-sent events, and lathe up/down."""
import http.client
import json
import os
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
        self.assertEqual(json.loads(body)["error"]["id"], "api.unauthenticated")
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


if __name__ == "__main__":
    unittest.main()
