"""GET /api/v1/runs with filters, orders and pages; GET /runs?follow=1 (every
run's state changes as server-sent events); a log's line numbers and stats —
what a browser's run table and log viewer page with."""
import json
import os
import subprocess
import threading
import time
import unittest
import urllib.parse

from harness import DaemonTest, second_user
from logs_load import TS, UnixConnection, get


def curl(d, path, user):
    """(HTTP status, JSON body) of a GET on the daemon's unix socket made as `user`."""
    cmd = ["setpriv", "--reuid", user, "--regid", user, "--init-groups", "curl", "-sS",
           "--unix-socket", os.path.join(d.home, "lathe.sock"), "-w", "\n%{http_code}",
           "http://lathe" + path]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True)
    body, _, status = r.stdout.rpartition("\n")
    return int(status), json.loads(body or "{}")


def runs(d, **q):
    status, _, body = get(d, "/api/v1/runs?" + urllib.parse.urlencode(q))
    return status, json.loads(body)


class RunLists(DaemonTest):
    def test_filters_sorts_and_pages(self):
        names = ["alpha", "beta", "gamma", "delta", "epsilon"]
        ids = [self.d.submit("--name", n, "--", "true") for n in names]
        for rid in ids:
            self.d.wait_state(rid, "succeeded")
        held = self.d.submit("--name", "zeta_1", "--", "sleep", "60")
        self.d.wait_state(held, "running")

        st, body = runs(self.d, all=1, state="running")
        self.assertEqual(st, 200)
        self.assertEqual([r["id"] for r in body["runs"]], [held])
        self.assertEqual(body["total"], 1)
        self.assertEqual(body["total_all"], 6)

        st, body = runs(self.d, all=1, state="succeeded,running", sort="name", limit=2, offset=1)
        self.assertEqual([r["name"] for r in body["runs"]], ["beta", "delta"])
        self.assertEqual(body["total"], 6)
        st, body = runs(self.d, all=1, sort="-name", limit=1)
        self.assertEqual(body["runs"][0]["name"], "zeta_1")
        # Newest first by default; a page past the end is empty.
        st, body = runs(self.d, all=1, limit=2)
        self.assertEqual([r["id"] for r in body["runs"]], [held, ids[-1]])
        st, body = runs(self.d, all=1, offset=100)
        self.assertEqual(body["runs"], [])
        self.assertEqual(body["total"], 6)

        # q: an id prefix or part of a name, its LIKE wildcards taken literally.
        st, body = runs(self.d, all=1, q="ta_1")
        self.assertEqual([r["id"] for r in body["runs"]], [held])
        st, body = runs(self.d, all=1, q="%")
        self.assertEqual(body["runs"], [])
        st, body = runs(self.d, all=1, q="_")
        self.assertEqual([r["id"] for r in body["runs"]], [held])
        st, body = runs(self.d, all=1, q=ids[2][:8])
        self.assertIn(ids[2], [r["id"] for r in body["runs"]])
        st, body = runs(self.d, all=1, kind="notebook")
        self.assertEqual(body["total"], 0)
        st, body = runs(self.d, all=1, user="root")
        self.assertEqual(body["total"], 6)
        st, body = runs(self.d, all=1, user="nobody-here")
        self.assertEqual(body["total"], 0)

        # Bad values name the parameter and what it takes, in both languages.
        for q, param in [({"state": "runing"}, "state"), ({"kind": "batch"}, "kind"),
                         ({"sort": "size"}, "sort"), ({"offset": "-1"}, "offset"),
                         ({"state": ""}, "state"), ({"state": ",,"}, "state"),
                         ({"state": "running,"}, "state")]:
            st, body = runs(self.d, all=1, **q)
            self.assertEqual(st, 400, q)
            self.assertEqual(body["args"]["param"], param, body)
            self.assertTrue(body["zh"], body)
        self.d.cli("stop", held)

    def test_follow_sends_every_state_change_and_removals(self):
        got = []
        conn = UnixConnection(os.path.join(self.d.home, "lathe.sock"), timeout=30)
        conn.request("GET", "/api/v1/runs?follow=1")
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        self.assertIn("text/event-stream", resp.getheader("Content-Type"))

        def read():
            event = None
            try:
                while True:
                    line = resp.fp.readline().decode()
                    if not line:
                        return
                    if line.startswith("event: "):
                        event = line[7:].strip()
                    elif line.startswith("data: "):
                        got.append((event, json.loads(line[6:])))
            except (OSError, ValueError, AttributeError):  # closed at the end of the test
                return

        t = threading.Thread(target=read, daemon=True)
        t.start()
        time.sleep(0.3)
        rid = self.d.submit("--", "true")
        self.d.wait_state(rid, "succeeded")
        self.d.wait_for(lambda: ("run", {"id": rid, "state": "succeeded"}) in got,
                        "the stream to say the run succeeded", timeout=20)
        states = [e[1]["state"] for e in got if e[0] == "run" and e[1]["id"] == rid]
        self.assertEqual(states[0], "queued")
        self.assertIn("running", states)
        self.d.cli("rm", rid)
        self.d.wait_for(lambda: any(e[0] == "removed" for e in got), "a removed event", timeout=20)
        conn.close()

    def test_another_user_lists_redacted_and_filters_the_same(self):
        other = second_user(self, "lathe-it-lists").pw_name
        rid = self.d.submit("--name", "mine", "--env", "TOKEN=hidden", "--", "sleep", "30")
        self.d.wait_state(rid, "running")
        st, body = curl(self.d, f"/api/v1/runs?all=1&state=running&q=min", other)
        self.assertEqual(st, 200)
        self.assertEqual([r["id"] for r in body["runs"]], [rid])
        self.assertTrue(body["runs"][0]["redacted"])
        self.assertNotIn("hidden", json.dumps(body))
        st, _ = curl(self.d, f"/api/v1/runs/{rid}/logs/stats", other)
        self.assertEqual(st, 403)
        # The change stream shows another user ids and states, never a spec.
        stream = subprocess.Popen(
            ["setpriv", "--reuid", other, "--regid", other, "--init-groups", "curl", "-sSN",
             "--max-time", "4", "--unix-socket", os.path.join(self.d.home, "lathe.sock"),
             "http://lathe/api/v1/runs?follow=1"], stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        later = self.d.submit("--name", "later", "--env", "TOKEN=hidden-too", "--", "true")
        out, _ = stream.communicate(timeout=30)
        self.assertIn(f'"id":"{later}"', out.replace(" ", ""))
        self.assertNotIn("hidden", out)
        self.assertNotIn("TOKEN", out)
        self.d.cli("stop", rid)


class Texts(DaemonTest):
    def test_events_reasons_and_waits_carry_both_languages(self):
        rid = self.d.submit("--", "sh", "-c", "exit 3")
        self.d.wait_state(rid, "failed")
        st, _, body = get(self.d, f"/api/v1/runs/{rid}")
        run = json.loads(body)
        self.assertEqual(run["reason_text"]["en"], run["reason"])
        self.assertNotEqual(run["reason_text"]["zh"], run["reason"])
        self.assertIn("3", run["reason_text"]["zh"])
        for e in run["events"]:
            self.assertTrue(e["text"]["en"] and e["text"]["zh"], e)
        ended = [e for e in run["events"] if e["type"] == "state" and e["data"].get("to") == "failed"][0]
        self.assertNotEqual(ended["text"]["zh"], ended["text"]["en"])
        # A run that waits for GPUs says why in both languages.
        held = self.d.submit("--gpus", "4", "--", "sleep", "60")
        self.d.wait_state(held, "running")
        queued = self.d.submit("--gpus", "1", "--", "true")
        w = self.d.wait_for(lambda: (lambda r: r if r.get("waiting") else None)(
            json.loads(get(self.d, f"/api/v1/runs/{queued}")[2])), "a waiting reason")
        self.assertEqual(w["waiting_text"]["en"], w["waiting"])
        self.assertNotEqual(w["waiting_text"]["zh"], w["waiting"], w["waiting_text"])
        self.d.cli("stop", held)


class LogPages(DaemonTest):
    def test_numbers_and_stats(self):
        rid = self.d.submit("--", "true")
        run = self.d.wait_state(rid, "succeeded")
        with open(os.path.join(run["run_dir"], "log"), "w") as f:
            for i in range(50):
                f.write(f"{TS} stdout F line {i}{' needle' if i in (7, 42) else ''}\n")
            f.write(f"{TS} stdout P not yet ended")
        st, _, body = get(self.d, f"/api/v1/runs/{rid}/logs/stats")
        self.assertEqual(st, 200)
        stats = json.loads(body)
        self.assertEqual(stats["lines"], 50)
        self.assertTrue(stats["finished"])
        self.assertEqual(stats["bytes"], os.path.getsize(os.path.join(run["run_dir"], "log")))

        st, hdr, body = get(self.d, f"/api/v1/runs/{rid}/logs?numbers=1&grep=needle&limit=10")
        self.assertEqual(st, 200)
        self.assertEqual(body.decode().splitlines(), ["7\tline 7 needle", "42\tline 42 needle"])
        st, hdr, body = get(self.d, f"/api/v1/runs/{rid}/logs?numbers=1&offset=45&limit=2")
        self.assertEqual(body.decode().splitlines(), ["45\tline 45", "46\tline 46"])
        self.assertEqual(hdr["x-lathe-next-offset"], "47")
        st, _, body = get(self.d, f"/api/v1/runs/{rid}/logs?numbers=1&tail=3")
        self.assertEqual(st, 400)
        self.assertEqual(json.loads(body)["msg_id"], "logs.numbers_with_tail")


class DoctorApi(DaemonTest):
    def test_the_daemons_checks_in_both_languages_cached(self):
        st, _, body = get(self.d, "/api/v1/doctor")
        self.assertEqual(st, 200)
        first = json.loads(body)
        self.assertEqual(first["en"]["lang"], "en")
        self.assertEqual(first["zh"]["lang"], "zh")
        self.assertEqual(first["en"]["summary"], first["zh"]["summary"])
        ids = [c["id"] for c in first["en"]["checks"]]
        self.assertIn("gpu.driver", ids)
        # The daemon answers for itself: its own check is not "not checked".
        daemon = [c for c in first["en"]["checks"] if c["id"] == "lathe.daemon"]
        self.assertEqual(daemon[0]["severity"], "ok", daemon)
        st, _, body = get(self.d, "/api/v1/doctor")
        self.assertEqual(json.loads(body)["at_ms"], first["at_ms"])
        time.sleep(0.01)
        st, _, body = get(self.d, "/api/v1/doctor?refresh=1")
        self.assertGreater(json.loads(body)["at_ms"], first["at_ms"])
        # Every user reads the machine's checks; the daemon's own secrets are not in them.
        other = second_user(self, "lathe-it-lists").pw_name
        st, report = curl(self.d, "/api/v1/doctor", other)
        self.assertEqual(st, 200)
        with open(os.path.join(self.d.home, "token")) as f:
            self.assertNotIn(f.read().strip(), json.dumps(report))


if __name__ == "__main__":
    unittest.main()
