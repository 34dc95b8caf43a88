"""Pools in the web UI, with no Slurm at all: a daemon whose config names two Slurm pools,

- `cluster`, whose bin_dir holds small fake Slurm commands: sinfo prints fixed lines in sinfo's
  format (a `debug` partition, up, with one mixed node and one of its 2 GPUs used, no MaxTime;
  a `long` one, down, MaxTime 2 days), sbatch accepts every job as job 4242 and squeue says it
  is PENDING (Resources), so a run there stays starting, held in its cluster's queue;
- `broken`, whose slurm_conf names a file that does not exist, so its sinfo fails (a fake one that
  says so at once: a real sinfo without its config may wait for the command timeout, 30 s).

Always: the API has a local run's pool (`backend` "local") and the pool run's pool, Slurm job id
(`handle.job_id`) and what its cluster last said (`waiting`), in GET /runs/{run} and in the list.
In the browser (skipped without /usr/bin/chromium or web/node_modules), tests/web/pools.spec.mjs:
the Overview's pools and partitions as the API gives them, the broken pool's error in English and
中文, a loading state while the clusters are asked that holds up nothing else, the run page's and
the runs list's pool and job id, axe on each page. Screenshots go to build/test-artifacts/web/.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from test_web import ARTIFACTS, CHROMIUM, NODE_MODULES, SOURCE, catalog  # noqa: E402

USER = "lathe-it-webpool"
JOB_ID = "4242"
# sinfo --noheader --Node --Format=…: one line per node and partition (slurm_sinfo.cc).
SINFO = ("debug|debug*|vm|mixed|1/1/0/2|gpu:fake:2|gpu:fake:1(IDX:0)|4000|infinite|up\n"
         "long|long|vm|mixed|1/1/0/2|gpu:fake:2|gpu:fake:1(IDX:0)|4000|2-00:00:00|down\n")


def write_script(path, body):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)


class WebPools(unittest.TestCase):
    def setUp(self):
        harness.second_user(self, USER)
        base = harness.shared_scratch(self, "lathe-web-pools-")
        self.shared = os.path.join(base, "shared")
        os.makedirs(self.shared)
        os.chmod(self.shared, 0o1777)
        fake = os.path.join(base, "bin")
        os.makedirs(fake)
        os.chmod(fake, 0o755)
        # While the file `hold` exists, sinfo waits (at most 30 s): the UI's loading state.
        self.hold = os.path.join(base, "hold")
        write_script(os.path.join(fake, "sinfo"),
                     f"i=0; while [ -e {self.hold} ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\n"
                     f"cat <<'EOF'\n{SINFO}EOF\n")
        write_script(os.path.join(fake, "sbatch"), f"echo {JOB_ID}\n")
        write_script(os.path.join(fake, "squeue"), f"echo '{JOB_ID}|PENDING|Resources'\n")
        write_script(os.path.join(fake, "scancel"), "exit 0\n")
        write_script(os.path.join(fake, "sacct"), "exit 1\n")
        broken = os.path.join(base, "broken-bin")
        os.makedirs(broken)
        os.chmod(broken, 0o755)
        write_script(os.path.join(broken, "sinfo"),
                     'echo "sinfo: error: s_p_parse_file: unable to read \"$SLURM_CONF\": '
                     'No such file or directory" >&2\nexit 1\n')
        self.d = harness.Daemon(gpus="sim:1x24GB")
        with open(os.path.join(self.d.home, "config.yaml"), "w") as f:
            f.write("pools:\n"
                    "  cluster:\n    type: slurm\n    partition: debug\n    account: lab\n"
                    f"    shared_dir: {self.shared}\n    bin_dir: {fake}\n"
                    "  broken:\n    type: slurm\n"
                    f"    shared_dir: {self.shared}\n"
                    f"    slurm_conf: {os.path.join(base, 'no-such-slurm.conf')}\n"
                    f"    bin_dir: {broken}\n")
        self.d.start()
        self.addCleanup(self.d.cleanup)
        self.env = self.d.env(HOME="/tmp")

    def api_runs(self):
        out = json.loads(self.d.cli("ps", "--json", user=USER, env=self.env).stdout)
        return {r["id"]: r for r in (out["runs"] if isinstance(out, dict) else out)}

    def test_pools_and_a_runs_pool_in_the_ui(self):
        d = self.d
        local = d.submit("--name", "here", "--pool", "local", "--workdir", "/tmp", "--", "sleep", "300",
                         user=USER, env=self.env)
        d.wait_state(local, "running")
        pooled = d.submit("--name", "there", "--pool", "cluster", "--workdir", self.shared, "--",
                          "sleep", "300", user=USER, env=self.env)

        def held():
            r = d.inspect(pooled)
            return r if r["state"] == "starting" and "PENDING (Resources)" in r.get("waiting", "") else None
        run = d.wait_for(held, "the pool run held in its cluster's queue")
        self.assertEqual(run["backend"], "cluster")
        self.assertEqual(run["spec"]["pool"], "cluster")
        # Nothing else of the handle than the job and how it was submitted.
        self.assertEqual(run["handle"], {"job_id": JOB_ID, "submitted_with": "sbatch"})
        self.assertEqual(run["waiting_on"], "pool")
        self.assertIn("PENDING (Resources)", run["waiting_text"]["zh"])
        here = d.inspect(local)
        self.assertEqual(here["backend"], "local")
        self.assertNotIn("handle", here)
        listed = self.api_runs()
        self.assertEqual(listed[pooled]["backend"], "cluster")
        self.assertEqual(listed[pooled]["handle"], {"job_id": JOB_ID, "submitted_with": "sbatch"})
        self.assertEqual(listed[local]["backend"], "local")

        pools = json.loads(d.cli("pools", "--json", user=USER, env=self.env).stdout)
        by_name = {p["name"]: p for p in pools["pools"]}
        self.assertEqual(list(by_name), ["local", "broken", "cluster"])
        self.assertEqual(by_name["broken"]["error"]["msg_id"], "slurm.sinfo_failed", by_name["broken"])
        self.assertIn("no-such-slurm.conf", by_name["broken"]["error"]["en"])  # the pool's SLURM_CONF
        self.assertEqual([p["name"] for p in by_name["cluster"]["partitions"]], ["debug", "long"])
        self.assertEqual(by_name["cluster"]["runs"]["starting"]["ids"], [pooled])

        if not os.access(CHROMIUM, os.X_OK):
            self.skipTest("needs Debian's chromium (scripts/deps.sh)")
        if not os.path.isdir(os.path.join(NODE_MODULES, "playwright-core")):
            self.skipTest("needs web/node_modules (scripts/web-deps.sh)")
        url = d.cli("ui", "--print", user=USER, env=self.env).stdout.strip()
        config = {
            "login_url": url, "user": USER, "artifacts": ARTIFACTS, "chromium": CHROMIUM,
            "node_modules": NODE_MODULES, "catalog": catalog(), "hold": self.hold,
            "local_run": local, "pool_run": pooled, "job_id": JOB_ID,
        }
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(config, f)
        self.addCleanup(os.unlink, f.name)
        spec = os.path.join(SOURCE, "tests", "web", "pools.spec.mjs")
        r = subprocess.run(["node", spec, f.name], capture_output=True, text=True, timeout=180, env=self.env)
        print(r.stdout, file=sys.stderr)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr + "\n" + d.daemon_log())
        for name in ("pools-loading-en", "pools-en", "pools-zh", "run-pool-en", "run-local-zh"):
            self.assertTrue(os.path.getsize(os.path.join(ARTIFACTS, name + ".png")) > 0, name)


if __name__ == "__main__":
    unittest.main()
