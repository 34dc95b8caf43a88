"""GPU telemetry per run on simulated GPUs: the scripted load comes back per
run through the API, another user may not read it, it stays after the run
ends and across a daemon restart, and goes when the run is removed."""
import json
import os
import time
import unittest

from harness import Daemon, second_user

USER = "lathe-it-telemetry"


class Telemetry(unittest.TestCase):
    def setUp(self):
        self.pw = second_user(self, USER)
        self.d = Daemon(gpus="sim:4x24GB")
        self.load = os.path.join(self.d.home, "load.json")
        self.d.gpus = "sim:4x24GB@" + self.load
        with open(os.path.join(self.d.home, "config.yaml"), "w") as f:
            f.write("telemetry: {interval: 200ms, throttle_after: 1s}\n")
        self.d.start()

    def tearDown(self):
        self.d.cleanup()

    def metrics(self, run, user=None, check=True):
        env = self.d.env(HOME="/tmp") if user else None
        r = self.d.cli("inspect", run, "--metrics", "--json", user=user, env=env, check=check)
        return json.loads(r.stdout) if r.returncode == 0 else r

    def start_run(self, name):
        pid_file = os.path.join(self.d.home, name + ".pid")
        run = self.d.submit("--gpus", "1", "--", "sh", "-c", f"echo $$ > {pid_file}; exec sleep 600")
        self.d.wait_state(run, "running")
        pid = int(self.d.wait_for(lambda: os.path.exists(pid_file) and open(pid_file).read().strip(),
                                  "the pid of " + name))
        return run, pid, self.d.inspect(run)["gpus"][0]

    def test_series_per_run(self):
        a, pid_a, gpu_a = self.start_run("a")
        b, pid_b, gpu_b = self.start_run("b")
        self.assertNotEqual(gpu_a, gpu_b)
        load = {"gpus": [
            {"index": gpu_a, "utilization_gpu_pct": 87, "temperature_c": 71, "power_w": 250.5,
             "sm_clock_mhz": 1410, "processes": [{"pid": pid_a, "used_memory_bytes": "10GB"}]},
            {"index": gpu_b, "utilization_gpu_pct": 33, "memory_used_bytes": "8GB",
             "throttle_reason_names": ["hw_slowdown"],
             "processes": [{"pid": pid_b, "used_memory_bytes": "3GB"}]},
        ]}
        with open(self.load + ".tmp", "w") as f:
            json.dump(load, f)
        os.rename(self.load + ".tmp", self.load)

        def scripted(run, util):
            m = self.metrics(run)
            g = m["gpus"]
            return m if g and util in g[0]["utilization_pct"][-3:] and g[0]["utilization_pct"][-1] == util else None

        ma = self.d.wait_for(lambda: scripted(a, 87), "run a's scripted load")
        mb = self.d.wait_for(lambda: scripted(b, 33), "run b's scripted load")
        self.assertTrue(ma["simulated"])
        self.assertEqual(ma["interval_ms"], 200)
        # The store is the daemon's alone, its journal files too: another user reads it through the API.
        for side in ("", "-wal", "-shm"):
            path = os.path.join(self.d.home, "telemetry.db" + side)
            if side == "" or os.path.exists(path):
                self.assertEqual(os.stat(path).st_mode & 0o077, 0, path)
        [ga] = ma["gpus"]  # only the GPU it holds
        self.assertEqual(ga["index"], gpu_a)
        self.assertEqual(ga["uuid"], f"GPU-sim-{gpu_a:04d}")
        self.assertEqual(ga["process_memory_bytes"][-1], 10_000_000_000)
        self.assertEqual(ga["memory_used_bytes"][-1], 10_000_000_000)
        self.assertEqual(ga["temperature_c"][-1], 71)
        self.assertEqual(ga["power_w"][-1], 250.5)
        self.assertEqual(ga["sm_clock_mhz"][-1], 1410)
        self.assertEqual(ga["throttled"][-1], 0)
        self.assertEqual(len(ga["t"]), len(ga["utilization_pct"]))
        self.assertEqual(ma["summary"]["max_utilization_pct"], 87)
        self.assertEqual(ma["summary"]["peak_process_memory_bytes"], 10_000_000_000)
        self.assertGreater(len(ma["memory"]["bytes"]), 0)  # the run's RAM, from its cgroup or /proc
        [gb] = mb["gpus"]
        self.assertEqual(gb["index"], gpu_b)
        self.assertEqual(gb["process_memory_bytes"][-1], 3_000_000_000)  # its own, not the GPU's
        self.assertEqual(gb["memory_used_bytes"][-1], 8_000_000_000)
        self.assertEqual(gb["throttled"][-1], 1)
        self.assertEqual(gb["throttle_reasons"][-1], ["hw_slowdown"])
        self.assertGreater(mb["summary"]["throttle_reasons"]["hw_slowdown"], 0)
        # b, throttled since the load file, is told so once (throttle_after: 1s here), naming the reason.
        def throttle_events(run):
            return [e for e in self.d.inspect(run)["events"]
                    if e["type"] == "warning" and "throttled" in e["message"]]
        [warned] = self.d.wait_for(lambda: throttle_events(b), "b's throttling warning")
        self.assertIn("hw_slowdown", warned["message"])
        self.assertEqual(throttle_events(a), [])

        # since= gives only the newer points.
        last = ga["t"][-1]
        since = self.api_since(a, last)["gpus"][0]["t"]
        self.assertTrue(since and all(t >= last for t in since), since)
        self.assertLess(len(since), len(self.metrics(a)["gpus"][0]["t"]))

        # The human form says simulated.
        text = self.d.cli("inspect", a, "--metrics").stdout
        self.assertIn("simulated", text)
        self.assertIn("87%", text)

        # Another user gets 403 (exit 1, the access message), root reads it.
        r = self.metrics(a, user=USER, check=False)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("belongs to root", r.stderr)

        # After the run ends its series stay; across a restart too.
        self.d.cli("stop", a)
        self.d.wait_state(a, "stopped")
        finished_ms = self.d.inspect(a)["finished_at_ms"]
        # Three ticks: a tick that began before the run ended may land after it stopped, but no
        # later tick samples it. Its points end where the run did (one interval of slack, for a
        # tick that read the clock just before the run's end was recorded).
        time.sleep(0.6)
        ended = self.metrics(a)
        self.assertLessEqual(ended["gpus"][0]["t"][-1], finished_ms + 200, ended["gpus"][0]["t"])
        time.sleep(0.6)
        self.assertEqual(self.metrics(a)["gpus"][0]["t"], ended["gpus"][0]["t"])
        self.d.stop()
        self.d.start()
        again = self.metrics(a)
        self.assertEqual(again["gpus"][0]["t"], ended["gpus"][0]["t"])
        self.assertEqual(again["gpus"][0]["utilization_pct"][-1], 87)
        self.assertEqual(again["summary"], ended["summary"])
        # b, still running, is sampled by the new daemon.
        before = len(self.metrics(b)["gpus"][0]["t"])
        self.d.wait_for(lambda: len(self.metrics(b)["gpus"][0]["t"]) > before, "b sampled again")

        # Removing the run removes its telemetry.
        self.d.cli("rm", a)
        r = self.d.cli("inspect", a, "--metrics", "--json", check=False)
        self.assertEqual(r.returncode, 3, r.stderr)
        import sqlite3
        db = sqlite3.connect(os.path.join(self.d.home, "telemetry.db"))
        self.assertEqual(db.execute("SELECT count(*) FROM points WHERE run_id = ?", (a,)).fetchone()[0], 0)
        self.assertGreater(db.execute("SELECT count(*) FROM points WHERE run_id = ?", (b,)).fetchone()[0], 0)
        db.close()

    def api_since(self, run, since):
        """GET /api/v1/runs/{run}/metrics?since= over the unix socket."""
        import http.client
        import socket

        class Unix(http.client.HTTPConnection):
            def connect(s):
                s.sock = socket.socket(socket.AF_UNIX)
                s.sock.connect(os.path.join(self.d.home, "lathe.sock"))
        c = Unix("localhost")
        c.request("GET", f"/api/v1/runs/{run}/metrics?since={since}")
        r = c.getresponse()
        body = r.read()
        c.close()
        self.assertEqual(r.status, 200, body)
        return json.loads(body)


if __name__ == "__main__":
    unittest.main()
