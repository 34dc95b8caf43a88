#!/usr/bin/python3
"""Deployments under the events that matter to a client (docs/deployments.md).

One run, on a daemon of its own (simulated GPUs, replicas are real `lathe serve`
processes with a process handler):
  (b) requests failed during a rollout and during a replica's kill -9, under a
      continuous load of 4 client threads;
  (c) autoscaling: from a load step to the extra replica serving (with an
      upscale delay of 1 s, reported apart), and the cold start from zero to the
      first answer, split into schedule (submitted -> running), process start
      and model load (running -> the replica's "READY" in its log) and the rest
      (warm-up probe, the front's health probe, the answer);
  (d) the daemon's and the front's RSS with 10 deployments of one replica idle.

Usage: bench/deploy_bench.py [--repeat N] [--json FILE]
"""
import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integ"))
from harness import Daemon  # noqa: E402
from test_deployments import HANDLER, Load  # noqa: E402


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Bench:
    def __init__(self):
        self.d = Daemon(gpus="sim:4x24GB").start()
        self.work = tempfile.mkdtemp(prefix="lathe-deploy-bench-")
        os.chmod(self.work, 0o755)
        self.n = 0

    def model(self, scale, name="m"):
        self.n += 1
        p = os.path.join(self.work, f"v{self.n}")
        os.makedirs(p)
        with open(os.path.join(p, "handler.py"), "w") as f:
            f.write(HANDLER)
        with open(os.path.join(p, "scale"), "w") as f:
            f.write(str(scale))
        out = self.d.cli("model", "create", name, "--from-dir", p, "--handler", "handler.py",
                         "--json").stdout
        return json.loads(out)["ref"]

    def show(self, name):
        return json.loads(self.d.cli("deploy", "show", name, "--json").stdout)

    def port(self, name):
        return int(self.show(name)["url"].split(":")[2].split("/")[0])

    def deploy(self, text):
        path = os.path.join(self.work, f"d{self.n}.yaml")
        with open(path, "w") as f:
            f.write(text)
        self.d.cli("deploy", "create", "-f", path)

    def ready(self, name):
        return [r for r in self.show(name)["replicas"]["list"]
                if r["state"] == "running" and r["healthy"]]

    def failures_during_rollout_and_kill(self):
        v1 = self.model(3, "roll")
        self.d.cli("model", "alias", "roll", "prod", v1.split("/")[1])
        self.d.cli("deploy", "create", "roll", "--model", "roll@prod", "--replicas", "2",
                   "--public", "--wait")
        port = self.port("roll")
        v2 = self.model(5, "roll")
        out = {}
        with Load(port, "/d/roll/predict", b'{"x": [1]}', threads=4) as load:
            load.wait_ok(200)
            self.d.cli("model", "alias", "roll", "prod", v2.split("/")[1])
            self.d.wait_for(lambda: all(r["version"] == v2 for r in self.ready("roll")) and
                            len(self.ready("roll")) == 2, "rollout", 120)
            load.wait_ok(200)
            out["rollout"] = {"ok": load.ok, "failed": len(load.failures)}
        with Load(port, "/d/roll/predict", b'{"x": [1]}', threads=4) as load:
            load.wait_ok(200)
            victim = self.ready("roll")[0]["run"]
            sock = self.d.inspect(victim)["spec"]["deployment"]["socket"]
            pid = int(os.popen(f"pgrep -f -- '--socket {sock}'").read().split()[0])
            os.kill(pid, signal.SIGKILL)
            self.d.wait_for(lambda: len(self.ready("roll")) == 2 and
                            victim not in [r["run"] for r in self.ready("roll")],
                            "replacement", 120)
            load.wait_ok(200)
            out["replica_kill"] = {"ok": load.ok, "failed": len(load.failures)}
        self.d.cli("deploy", "rm", "roll")
        return out

    def scale_up(self):
        ref = self.model(3, "up")
        slow = HANDLER.replace('float(os.environ.get("SLOW", "0"))', "0.2")
        p = os.path.join(self.work, ref.replace("/", "-") + "-slow")
        os.makedirs(p)
        open(os.path.join(p, "handler.py"), "w").write(slow)
        open(os.path.join(p, "scale"), "w").write("3")
        ref = json.loads(self.d.cli("model", "create", "up", "--from-dir", p, "--handler",
                                    "handler.py", "--json").stdout)["ref"]
        self.deploy(f"name: up\nmodel: {ref}\npublic: true\n"
                    "autoscale: {min: 1, max: 2, target: 1, upscale_delay: 1s, "
                    "downscale_delay: 10m}\n")
        self.d.wait_for(lambda: len(self.ready("up")) == 1, "one replica", 120)
        port = self.port("up")
        t0 = time.time()
        with Load(port, "/d/up/predict", b'{"x": [1]}', threads=4) as load:
            self.d.wait_for(lambda: len(self.ready("up")) == 2, "the second replica", 120)
            t1 = time.time()
            load.wait_ok(10)
        self.d.cli("deploy", "rm", "up")
        return {"load_step_to_serving_s": t1 - t0, "of_which_upscale_delay_s": 1.0,
                "failed": len(load.failures)}

    def cold_start(self):
        ref = self.model(3, "zero")
        self.deploy(f"name: zero\nmodel: {ref}\npublic: true\n"
                    "autoscale: {min: 0, max: 1, zero_grace: 1s}\n")
        self.d.wait_for(lambda: self.show("zero")["health"] == "scaled_to_zero" and
                        self.show("zero")["routed"], "zero", 120)
        port = self.port("zero")
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        t0 = time.time()
        c.request("POST", "/d/zero/predict", body=b'{"x": [1]}',
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read()
        total = time.time() - t0
        assert r.status == 200, (r.status, body, port)
        run = self.show("zero")["replicas"]["list"][-1]["run"]
        info = self.d.inspect(run)
        created = info["created_at_ms"] / 1000
        started = info["started_at_ms"] / 1000
        ready = None
        for line in self.d.logs(run).splitlines():
            if "-> READY" in line:
                # 2026-12-01T19:34:50.615 info serve: ... (the run's log, local time of the machine)
                stamp = line.split()[0]
                ready = time.mktime(time.strptime(stamp.split(".")[0], "%Y-%m-%dT%H:%M:%S")) + \
                    float("0." + stamp.split(".")[1])
        self.d.cli("deploy", "rm", "zero")
        out = {"total_s": total, "schedule_s": started - created}
        if ready:
            out["process_start_and_model_load_s"] = ready - started
            out["warmup_probe_and_answer_s"] = t0 + total - ready
        return out

    def idle_rss(self, n=10):
        ref = self.model(3, "idle")
        for i in range(n):
            self.d.cli("deploy", "create", f"idle{i}", "--model", ref, "--public")
        self.d.wait_for(lambda: all(len(self.ready(f"idle{i}")) == 1 for i in range(n)),
                        "ten deployments ready", 300)
        time.sleep(3)
        gw = json.load(open(os.path.join(self.d.home, "deployments", "gateway", "gateway.json")))
        return {"deployments": n, "daemon_rss_kb": rss_kb(self.d.proc.pid),
                "front_rss_kb": rss_kb(gw["pid"])}

    def close(self):
        self.d.cleanup()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    results = {"cold_start": [], "scale_up": [], "failures": []}
    for i in range(a.repeat):
        b = Bench()
        try:
            results["failures"].append(b.failures_during_rollout_and_kill())
            results["scale_up"].append(b.scale_up())
            results["cold_start"].append(b.cold_start())
            if i == 0:
                results["idle"] = b.idle_rss()
        except Exception:
            log = os.path.join(b.d.home, "deployments", "gateway", "gateway.log")
            if os.path.exists(log):
                print(open(log).read()[-3000:], file=sys.stderr)
            print(b.d.daemon_log(), file=sys.stderr)
            raise
        finally:
            b.close()
    med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
    summary = {
        "rollout_failed": sum(f["rollout"]["failed"] for f in results["failures"]),
        "rollout_requests": sum(f["rollout"]["ok"] for f in results["failures"]),
        "kill_failed": sum(f["replica_kill"]["failed"] for f in results["failures"]),
        "kill_requests": sum(f["replica_kill"]["ok"] for f in results["failures"]),
        "scale_up_median_s": med([s["load_step_to_serving_s"] for s in results["scale_up"]]),
        "cold_start_median_s": med([c["total_s"] for c in results["cold_start"]]),
        "cold_schedule_median_s": med([c["schedule_s"] for c in results["cold_start"]]),
        "cold_load_median_s": med([c.get("process_start_and_model_load_s", 0)
                                   for c in results["cold_start"]]),
        "cold_rest_median_s": med([c.get("warmup_probe_and_answer_s", 0)
                                   for c in results["cold_start"]]),
        "idle": results.get("idle"),
    }
    print(json.dumps(summary, indent=2))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": results, "summary": summary}, f, indent=2)


if __name__ == "__main__":
    main()
