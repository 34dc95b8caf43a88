"""What a Slurm pool survives, against a private Slurm 22.05 and the real daemon: the daemon killed
with SIGKILL while its runs are queued and running (re-adopted after the restart: none lost, none
submitted twice), slurmctld restarted mid-run, an squeue that fails or answers empty once (a
wrapper in the pool's bin_dir), an admin's scancel from outside (the run is stopped), and the
run's own --max-duration (it fails as past its limit; Slurm's TIMEOUT is not taken for a
preemption).

Skipped without root, Slurm and munge (`scripts/deps.sh`).
"""
import json
import os
import stat
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_slurm_pool import USER, PoolCase  # noqa: E402

# squeue through a wrapper: while FLAG exists, the next call fails (exit 1) or answers nothing
# (FLAG holds "fail" or "empty"), once; the flag goes with it. Every other command passes through.
WRAPPER = """#!/bin/sh
flag={flag}
if [ "$(basename "$0")" = squeue ] && [ -f "$flag" ]; then
  what=$(cat "$flag"); rm -f "$flag"
  echo "$what $(date +%s%N)" >> {seen}
  if [ "$what" = fail ]; then echo "squeue: error: Unable to contact slurm controller" >&2; exit 1; fi
  exit 0
fi
exec /usr/bin/$(basename "$0") "$@"
"""


class SlurmResilience(PoolCase):
    CLUSTER = {"cpus": 2, "gpus": 2}

    @classmethod
    def pool_config(cls):
        cls.bin = os.path.join(cls.base, "slurm-bin")
        cls.flag = os.path.join(cls.base, "squeue.flag")
        cls.seen = os.path.join(cls.base, "squeue.seen")
        os.makedirs(cls.bin)
        for name in ("sbatch", "squeue", "scancel", "sacct", "sinfo", "scontrol", "srun"):
            path = os.path.join(cls.bin, name)
            with open(path, "w") as f:
                f.write(WRAPPER.format(flag=cls.flag, seen=cls.seen))
            os.chmod(path, 0o755)
        return f"    bin_dir: {cls.bin}\n"

    def jobs_of(self, rid):
        """Slurm's jobs of a run, by its name, whatever their state."""
        out = self.cluster.run("/usr/bin/squeue", "--noheader", "--states=all",
                               f"--name=lathe-{rid}", "--format=%i").stdout
        return out.split()

    def inspect(self, rid):
        return json.loads(self.run_as(USER, "inspect", rid, "--json").stdout)

    def test_a_killed_daemon_readopts_its_runs_none_lost_or_doubled(self):
        marker = os.path.join(self.shared, "go-" + str(time.time_ns()))
        prog = f'echo started; while [ ! -e {marker} ]; do sleep 0.2; done; echo finished'
        running = [self.submit("--gpus", "1", "--", "sh", "-c", prog) for _ in range(2)]
        for rid in running:
            self.d.wait_state(rid, ["running"], timeout=90)
        queued = self.submit("--gpus", "2", "--", "sh", "-c", "echo third")  # no room yet
        self.d.wait_for(lambda: len(self.jobs_of(queued)) == 1, "the third run's job")
        self.d.kill9()
        self.d.start()
        for rid in running:
            self.assertEqual(self.inspect(rid)["state"], "running")
        # Still queued in Slurm: starting until Slurm starts it, not running.
        self.assertEqual(self.inspect(queued)["state"], "starting")
        with open(marker, "w"):
            pass
        for rid in running + [queued]:
            r = self.d.wait_state(rid, ["succeeded", "failed", "lost"], timeout=120)
            self.assertEqual(r["state"], "succeeded", self.d.daemon_log())
            self.assertEqual(len(self.jobs_of(rid)), 1, f"{rid}: one Slurm job, not two")
            self.assertEqual(self.inspect(rid).get("attempts", 1), 1)
        self.assertIn("finished", self.run_as(USER, "logs", running[0]).stdout)

    def test_a_restarted_controller_and_a_failed_or_empty_squeue_lose_nothing(self):
        marker = os.path.join(self.shared, "go-" + str(time.time_ns()))
        rid = self.submit("--", "sh", "-c",
                          f"echo started; while [ ! -e {marker} ]; do sleep 0.2; done; exit 4")
        self.d.wait_state(rid, ["running"], timeout=90)
        self.cluster.restart_controller(down_s=3)
        for what in ("fail", "empty"):
            with open(self.flag, "w") as f:
                f.write(what)
            self.d.wait_for(lambda: not os.path.exists(self.flag), f"an squeue that is {what}ed",
                            timeout=120)
            self.assertEqual(self.inspect(rid)["state"], "running", f"after an {what} squeue")
        with open(self.seen) as f:
            self.assertEqual([line.split()[0] for line in f], ["fail", "empty"])
        with open(marker, "w"):
            pass
        r = self.d.wait_state(rid, ["succeeded", "failed", "lost"], timeout=120)
        self.assertEqual(r["state"], "failed", self.d.daemon_log())
        self.assertEqual(self.inspect(rid)["exit_code"], 4)
        self.assertEqual(len(self.jobs_of(rid)), 1)

    def test_an_admins_scancel_stops_the_run(self):
        rid = self.submit("--", "sh", "-c", "echo started; exec sleep 300")
        self.d.wait_state(rid, ["running"], timeout=90)
        job = self.inspect(rid)["handle"]["job_id"]
        self.assertEqual(self.cluster.run("/usr/bin/scancel", job).returncode, 0)
        r = self.d.wait_state(rid, ["stopped", "failed", "lost"], timeout=120)
        self.assertEqual(r["state"], "stopped", self.d.daemon_log())
        self.assertIn("cancelled in its pool, not by Lathe", self.inspect(rid)["reason"])
        zh = self.d.cli("inspect", rid, user=USER, env=self.d.env(HOME="/tmp", LATHE_LANG="zh"))
        self.assertIn("在资源池中被取消", zh.stdout)

    def test_the_runs_own_max_duration_fails_it_and_is_no_preemption(self):
        rid = self.submit("--max-duration", "3s", "--", "sh", "-c", "echo started; exec sleep 300")
        r = self.d.wait_state(rid, ["succeeded", "failed", "stopped", "lost"], timeout=120)
        self.assertEqual(r["state"], "failed", self.d.daemon_log())
        got = self.inspect(rid)
        self.assertIn("max", json.dumps(got).lower())
        self.assertEqual(got.get("preemptions", 0), 0, got)


if __name__ == "__main__":
    unittest.main()
