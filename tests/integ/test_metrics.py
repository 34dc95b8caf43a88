"""The daemon's GET /metrics and `lathe top` on scripted simulated GPUs.

A run holds one of two simulated GPUs whose load file scripts their values; a
scrape over TCP needs a credential (401 without), passes `promtool check
metrics`, and labels the held GPU's gauges with the run and its user; another
user's scrape shows no spec or environment; with `metrics: {open_on_loopback:
true}` a loopback scrape without a token is answered. `lathe top` with stdout
not a terminal prints one plain snapshot in English and in Chinese; on a
terminal it redraws in place and gives the terminal back on Ctrl-C.
"""
import http.client
import json
import os
import pty
import re
import select
import signal
import shutil
import subprocess
import tempfile
import unittest

from harness import LATHE, Daemon, second_user

USER = "lathe-it-metrics"
MARK = "zebra-mark-9431"  # in the run's command and environment only
LOAD = {"gpus": [
    {"index": 0, "utilization_gpu_pct": 87, "memory_used_bytes": "20GB", "temperature_c": 71,
     "power_w": 250, "power_limit_w": 300, "throttle_reason_names": ["sw_thermal"]},
    {"index": 1, "utilization_gpu_pct": 13, "memory_used_bytes": "2GB", "temperature_c": 40}]}
PROMTOOL = "/usr/bin/promtool"
SAMPLE = re.compile(r'^([a-z_]+)(\{.*\})? (\S+)$')


def write_load(path, load):
    with open(path + ".tmp", "w") as f:
        json.dump(load, f)
    os.replace(path + ".tmp", path)


def labels_of(text):
    """{"a": "x", ...} of a rendered label set (values without escapes)."""
    return dict(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', text or ""))


def samples(text, name):
    out = []
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m and m.group(1) == name:
            out.append((labels_of(m.group(2)), float(m.group(3))))
    return out


class Metrics(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="lathe-it-metrics-")
        os.chmod(cls.dir, 0o755)
        cls.load = os.path.join(cls.dir, "load.json")
        write_load(cls.load, LOAD)
        cls.d = Daemon(gpus=f"sim:2x24GB@{cls.load}").start()
        cls.run_id = cls.d.submit("--name", "metrics-run", "--gpus", "1", "--env", f"MARK={MARK}",
                               "--", "sh", "-c", f"echo {MARK}; sleep 120")
        cls.gpu = cls.d.wait_state(cls.run_id, "running")["gpus"][0]
        with open(os.path.join(cls.d.home, "endpoint.json")) as f:
            cls.port = int(json.load(f)["tcp"].rsplit(":", 1)[1])
        with open(os.path.join(cls.d.home, "token")) as f:
            cls.token = f.read().strip()

    @classmethod
    def tearDownClass(cls):
        cls.d.cleanup()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def get(self, path, token=None, port=None):
        c = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=30)
        c.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
        r = c.getresponse()
        body = r.read().decode()
        c.close()
        return r.status, r.getheader("Content-Type"), body

    def assertPromtoolClean(self, text):
        if not os.path.exists(PROMTOOL):
            self.skipTest("needs promtool (Debian package prometheus)")
        p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                           text=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(p.stdout + p.stderr, "")  # no lint warning either

    def test_tcp_without_a_token_is_401(self):
        status, _, body = self.get("/metrics")
        self.assertEqual(status, 401, body)
        status, _, _ = self.get("/metrics", token="lathe_nope_nope")
        self.assertEqual(status, 401)

    def test_scrape_maps_the_gpu_to_its_run_and_passes_promtool(self):
        status, ctype, text = self.get("/metrics", token=self.token)
        self.assertEqual(status, 200, text)
        self.assertEqual(ctype, "text/plain; version=0.0.4; charset=utf-8")
        self.assertPromtoolClean(text)
        util = {int(l["gpu"]): (l, v) for l, v in samples(text, "lathe_gpu_utilization_ratio")}
        self.assertEqual(set(util), {0, 1})
        held, value = util[self.gpu]
        self.assertEqual(held["run"], self.run_id)
        self.assertEqual(held["run_name"], "metrics-run")
        self.assertEqual(held["user"], "root")
        self.assertEqual(held["simulated"], "true")
        self.assertAlmostEqual(value, LOAD["gpus"][self.gpu]["utilization_gpu_pct"] / 100)
        free, _ = util[1 - self.gpu]
        self.assertEqual((free["run"], free["user"]), ("", ""))
        throttled = {int(l["gpu"]): v for l, v in samples(text, "lathe_gpu_throttled")}
        self.assertEqual(throttled, {0: 1.0, 1: 0.0})
        runs = {l["state"]: v for l, v in samples(text, "lathe_runs")}
        self.assertEqual(set(runs), {"queued", "starting", "running", "stopping", "succeeded",
                                     "failed", "stopped", "preempted", "lost"})
        self.assertGreaterEqual(runs["running"], 1)
        queue = {l["priority"]: v for l, v in samples(text, "lathe_queue_length")}
        self.assertEqual(set(queue), {"low", "normal", "high"})
        count = samples(text, "lathe_scheduling_latency_seconds_count")
        self.assertGreaterEqual(count[0][1], 1)  # this run's placement at least
        buckets = [v for _, v in samples(text, "lathe_scheduling_latency_seconds_bucket")]
        self.assertEqual(buckets, sorted(buckets))
        # The unix socket serves it too.
        sock = os.path.join(self.d.home, "lathe.sock")
        r = subprocess.run(["curl", "-sS", "--unix-socket", sock, "http://lathe/metrics"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f'run="{self.run_id}"', r.stdout)

    def test_another_user_sees_who_holds_the_gpu_but_no_spec_or_env(self):
        second_user(self, USER)
        made = self.d.cli("token", "create", "--json", user=USER, env=self.d.env(HOME="/tmp"))
        token = json.loads(made.stdout)["token"]
        status, _, text = self.get("/metrics", token=token)
        self.assertEqual(status, 200, text)
        self.assertIn(f'run="{self.run_id}"', text)
        self.assertNotIn(MARK, text)
        self.assertNotIn("sleep", text)
        self.assertNotIn("MARK", text)

    def test_top_prints_one_plain_snapshot_in_english_and_chinese(self):
        util = f'{LOAD["gpus"][self.gpu]["utilization_gpu_pct"]}%'
        out = self.d.cli("top").stdout
        self.assertNotIn("\x1b", out)
        self.assertIn("simulated GPUs", out)
        held = [l for l in out.splitlines() if f"{self.run_id} metrics-run (root)" in l]
        self.assertEqual(len(held), 1, out)
        self.assertIn(util, held[0])
        self.assertIn("sw_thermal" if self.gpu == 0 else "-", held[0])
        self.assertTrue(any(l.startswith(self.run_id) and "running" in l for l in out.splitlines()),
                        out)
        zh = self.d.cli("top", "--once", env=self.d.env(LANG="zh_CN.UTF-8")).stdout
        self.assertNotIn("\x1b", zh)
        self.assertIn("模拟 GPU", zh)
        self.assertIn("占用者", zh)
        held = [l for l in zh.splitlines() if f"{self.run_id} metrics-run（root）" in l]
        self.assertEqual(len(held), 1, zh)
        self.assertIn(util, held[0])
        self.assertIn("运行中", zh)
        self.assertNotIn("running", zh)
        r = self.d.cli("top", "--interval", "0s", check=False)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--interval", r.stderr)

    def test_top_on_a_terminal_redraws_in_place_and_gives_the_terminal_back(self):
        master, slave = pty.openpty()
        p = subprocess.Popen([LATHE, "top", "--interval", "100ms"], stdout=slave, stderr=slave,
                             stdin=subprocess.DEVNULL, env=self.d.env(TERM="xterm"))
        os.close(slave)
        out = b""
        try:
            # Two frames: the first and one redrawn after the interval.
            while out.count(b"\x1b[H") < 2:
                ready, _, _ = select.select([master], [], [], 30)
                self.assertTrue(ready, out)
                out += os.read(master, 65536)
            p.send_signal(signal.SIGINT)
            self.assertEqual(p.wait(timeout=30), 0)
            while True:
                ready, _, _ = select.select([master], [], [], 1)
                if not ready:
                    break
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the other end closed
                    break
                if not chunk:
                    break
                out += chunk
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            os.close(master)
        text = out.decode(errors="replace")
        self.assertTrue(text.startswith("\x1b[?1049h\x1b[?25l"), repr(text[:40]))
        self.assertIn(f"{self.run_id} metrics-run (root)", text)
        self.assertIn("Ctrl-C", text)
        self.assertTrue(text.endswith("\x1b[?25h\x1b[?1049l"), repr(text[-40:]))


class OpenOnLoopback(unittest.TestCase):
    def setUp(self):
        home = tempfile.mkdtemp(prefix="lathe-it-metrics-open-")
        with open(os.path.join(home, "config.yaml"), "w") as f:
            f.write("metrics: {open_on_loopback: true}\n")
        self.d = Daemon(gpus="sim:2x24GB", home=home).start()
        self.addCleanup(self.d.cleanup)
        with open(os.path.join(self.d.home, "endpoint.json")) as f:
            self.port = int(json.load(f)["tcp"].rsplit(":", 1)[1])

    def get(self, path, token=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
        r = c.getresponse()
        body = r.read().decode()
        c.close()
        return r.status, body

    def test_an_unauthenticated_loopback_scrape_is_answered_and_nothing_else(self):
        status, text = self.get("/metrics")
        self.assertEqual(status, 200, text)
        self.assertIn('lathe_gpus{source="simulated",simulated="true"} 2', text)
        self.assertEqual(self.get("/api/v1/status")[0], 401)  # the API stays closed
        self.assertEqual(self.get("/metrics", token="lathe_bad_token")[0], 401)


if __name__ == "__main__":
    unittest.main()
