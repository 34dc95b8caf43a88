"""A real Prometheus scraping a live `lathe serve`.

`promtool check metrics` (test_serve.py) lints one scrape; this test runs the
Prometheus server itself (Debian package `prometheus`) against `lathe serve` on
loopback with a 1 s scrape interval and reads back, through Prometheus' HTTP
API, that the target is up and that the request counters hold exactly the
requests sent. Both processes bind free ports and are stopped by PID.
No test asserts a wall-clock bound: the polls have a generous overall deadline.
Skipped when /usr/bin/prometheus is absent.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

from harness import free_port
from test_serve import ECHO_CONFIG, Server, write

PROMETHEUS = "/usr/bin/prometheus"
HAVE_PROMETHEUS = os.access(PROMETHEUS, os.X_OK)
DEADLINE_S = 120  # generous: the machine is shared; scrapes come every second
START_ATTEMPTS = 5  # a free port found by bind(0) can be taken before Prometheus binds it


PROMETHEUS_CONFIG = """
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: lathe
    metrics_path: /metrics
    static_configs:
      - targets: ["127.0.0.1:{port}"]
"""



class Prometheus:
    def __init__(self, workdir, target_port):
        self.dir = workdir
        self.config = os.path.join(workdir, "prometheus.yml")
        write(self.config, PROMETHEUS_CONFIG.replace("{port}", str(target_port)))
        self.log_path = os.path.join(workdir, "prometheus.log")
        self.proc = None
        self.port = None

    def start(self):
        for _ in range(START_ATTEMPTS):
            self.port = free_port()
            self.log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(
                [PROMETHEUS, f"--config.file={self.config}",
                 f"--storage.tsdb.path={os.path.join(self.dir, 'tsdb')}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=self.log, stderr=self.log, cwd=self.dir)
            if self.wait_ready():
                return self
            self.stop()
        raise RuntimeError("prometheus did not start:\n" + self.read_log())

    def wait_ready(self):
        deadline = time.time() + DEADLINE_S
        while time.time() < deadline:
            if self.proc.poll() is not None:
                return False  # e.g. the port was taken in the meantime
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=5) as r:
                    if r.status == 200:
                        return True
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.1)
        return False

    def query(self, expr):
        """The instant vector of `expr` as [(labels, float value)]."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read())
        if body.get("status") != "success":
            raise AssertionError(f"query {expr!r}: {body}")
        return [(s["metric"], float(s["value"][1])) for s in body["data"]["result"]]

    def targets(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/targets", timeout=10) as r:
            return json.loads(r.read())["data"]["activeTargets"]

    def read_log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        self.proc = None


@unittest.skipUnless(HAVE_PROMETHEUS, "needs /usr/bin/prometheus (Debian package prometheus)")
class PrometheusScrapeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lathe-serve-prom-")
        self.repo = os.path.join(self.tmp, "repo")
        write(os.path.join(self.repo, "echo", "config.yaml"), ECHO_CONFIG)
        os.makedirs(os.path.join(self.repo, "echo", "1"))
        self.server = None
        self.prom = None

    def tearDown(self):
        if self.prom:
            self.prom.stop()
        if self.server:
            self.server.stop(signal.SIGKILL)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def poll(self, what, fn):
        """Polls fn() until it returns a true value; returns it. The last value is in the error."""
        deadline = time.time() + DEADLINE_S
        last = None
        while time.time() < deadline:
            last = fn()
            if last:
                return last
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}; last: {last!r}\n"
                             f"targets: {self.prom.targets()}\nprometheus log:\n{self.prom.read_log()}")

    def value(self, expr):
        series = self.prom.query(expr)
        return series[0][1] if len(series) == 1 else None

    def test_prometheus_scrapes_live_server_and_sees_request_counts(self):
        self.server = Server("--repository", self.repo).start()
        self.prom = Prometheus(self.tmp, self.server.port).start()

        # 1. The target is scraped and parsed (a text-format error makes up 0).
        self.poll("up == 1", lambda: self.value('up{job="lathe"}') == 1)
        target = self.prom.targets()[0]
        self.assertEqual(target["health"], "up", target)
        self.assertEqual(target["lastError"], "", target)
        self.assertEqual(target["scrapeUrl"], f"http://127.0.0.1:{self.server.port}/metrics")

        # 2. Inference requests: v2, /predict, and one malformed body.
        sent = 7
        infer = {"inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [1.5, -2]}]}
        for i in range(sent - 2):
            out = self.server.json("POST", "/v2/models/echo/infer", infer)
            self.assertEqual(out["outputs"][0]["data"], [1.5, -2])
        for _ in range(2):
            self.server.json("POST", "/predict", {"instances": [[1, 2]]})
        status, _, _ = self.server.request("POST", "/v2/models/echo/infer", b"{")
        self.assertEqual(status, 400)

        # 3. Prometheus' stored counters match what was sent (probes are not requests).
        ok = 'lathe_serve_requests_total{job="lathe",model="echo",version="1",outcome="success"}'
        bad = 'lathe_serve_requests_total{job="lathe",model="echo",outcome="invalid"}'
        self.poll(f"{ok} == {sent}", lambda: self.value(ok) == sent)
        self.assertEqual(self.value(ok), sent)
        self.poll(f"sum({bad}) == 1", lambda: self.value(f"sum({bad})") == 1)
        self.assertGreater(self.value('sum(lathe_serve_request_duration_seconds_count{model="echo"})'), 0)
        self.assertEqual(self.value('lathe_serve_model_ready{model="echo",version="1"}'), 1)


if __name__ == "__main__":
    unittest.main()
