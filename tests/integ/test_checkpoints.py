"""Checkpoint capture and resume, end to end, with a real training job.

examples/train_digits.py trains a small CNN with Debian's python3-torch and
saves a checkpoint every few steps. Lathe snapshots its checkpoint directory
while it runs; the test kills the job (or preempts it), wipes the checkpoint
directory so that only Lathe's snapshot can bring it back, and checks that
the restarted job resumes (its step counter continues) and ends with a loss
bitwise equal to an uninterrupted run's.

LATHE_CKPT_STEPS sets the length (the `slow` variant runs longer).
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from harness import PY, Daemon, DaemonTest

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "..", "..", "examples", "train_digits.py")
STEPS = int(os.environ.get("LATHE_CKPT_STEPS", "200"))
EVERY = 20
SLEEP = "0.03"  # per step: long enough to interrupt the job mid-way


def have_torch():
    return subprocess.run([PY, "-c", "import torch, sklearn"], capture_output=True).returncode == 0


_baseline = {}


def baseline():
    """The uninterrupted run's result (computed once, without Lathe)."""
    if "r" not in _baseline:
        d = tempfile.mkdtemp(prefix="lathe-base-")
        try:
            out = os.path.join(d, "result.json")
            # The environment a Lathe run gets (RunEnv): nothing inherited but
            # PATH. Inherited OPENBLAS_CORETYPE, say, picks other BLAS kernels
            # and changes the last bits of the loss.
            env = {"PATH": os.environ["PATH"], "HOME": os.path.expanduser("~"),
                   "LANG": "C.UTF-8", "CUDA_VISIBLE_DEVICES": ""}
            subprocess.run([PY, TRAIN, "--steps", str(STEPS), "--ckpt-every", str(EVERY),
                            "--ckpt-dir", os.path.join(d, "ckpt"), "--out", out],
                           check=True, capture_output=True, env=env, timeout=600)
            with open(out) as f:
                _baseline["r"] = json.load(f)
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return _baseline["r"]


@unittest.skipUnless(have_torch(), "needs /usr/bin/python3 with torch and sklearn")
class Checkpoints(DaemonTest):
    def setUp(self):
        super().setUp()
        self.work = tempfile.mkdtemp(prefix="lathe-ckpt-")
        self.ckpt = os.path.join(self.work, "ckpt")
        self.out = os.path.join(self.work, "result.json")

    def tearDown(self):
        super().tearDown()
        shutil.rmtree(self.work, ignore_errors=True)

    def train_args(self):
        return ["--", PY, TRAIN, "--steps", str(STEPS), "--ckpt-every", str(EVERY),
                "--step-sleep", SLEEP, "--out", self.out]

    def events(self, ref, kind=None):
        return [e for e in self.d.inspect(ref)["events"] if kind is None or e["type"] == kind]

    def wait_captured(self, ref, min_step):
        """Until a snapshot holding a checkpoint of at least `min_step` is committed."""
        def captured():
            for e in self.events(ref, "checkpoint"):
                if e["data"].get("step", -1) >= min_step:
                    return e
            return None
        return self.d.wait_for(captured, f"a snapshot of step >= {min_step}", timeout=180)

    def child_pid(self, run):
        with open(f"{run['run_dir']}/attempt-{run['attempt']}/monitor.json") as f:
            return json.load(f)["child_pid"]

    def wipe(self):
        shutil.rmtree(self.ckpt)
        os.makedirs(self.ckpt)

    def assert_resumed_bitwise(self, ref):
        r = self.d.wait_state(ref, ["succeeded", "failed", "stopped"], timeout=600)
        self.assertEqual(r["state"], "succeeded", self.d.logs(ref))
        with open(self.out) as f:
            got = json.load(f)
        log = self.d.logs(ref)
        self.assertIn("resumed from " + self.ckpt + "/ckpt_", log)
        self.assertGreater(got["start_step"], 0, "the restarted job began again at step 0")
        self.assertEqual(got["step"], STEPS)
        self.assertEqual(got["loss_hex"], baseline()["loss_hex"],
                         "the resumed run's final loss differs from an uninterrupted run's")
        restored = [e for e in self.events(ref, "checkpoint") if e["message"].startswith("restored snapshot")]
        self.assertTrue(restored, "the wiped checkpoint directory was not restored")
        return r, got

    def test_killed_job_resumes_from_the_snapshot_after_its_directory_is_wiped(self):
        i = self.d.submit("--retry", "2", "--checkpoint-dir", self.ckpt, "--keep-checkpoints", "3",
                          *self.train_args())
        run = self.d.wait_state(i, "running")
        self.assertEqual(self.d.inspect(i)["spec"]["checkpoints"]["dir"], self.ckpt)
        self.wait_captured(i, STEPS // 2)
        pid = self.child_pid(self.d.inspect(i))
        # Freeze the job, wipe its checkpoints, then kill it: the restart can
        # only get them back from Lathe's store.
        os.kill(pid, signal.SIGSTOP)
        self.wipe()
        os.kill(pid, signal.SIGKILL)
        r, got = self.assert_resumed_bitwise(i)
        self.assertEqual(r["attempt"], 2)
        self.assertGreaterEqual(got["start_step"], STEPS // 2)
        # LATHE_RESUME_FROM named a file in the checkpoint directory.
        self.assertTrue(any(e["data"].get("resume_from", "").startswith(self.ckpt + "/ckpt_")
                            for e in self.events(i, "checkpoint")))
        # keep 3: older snapshots of the run were pruned.
        snaps = json.loads(self.d.cli("snap", "ls", i, "--json").stdout)
        self.assertTrue(0 < len([s for s in snaps if s.get("status") != "skipped"]) <= 3, snaps)

    def test_preempted_job_resumes_bitwise(self):
        i = self.d.submit("--gpus", "4", "--checkpoint-dir", self.ckpt, *self.train_args())
        self.d.wait_state(i, "running")
        self.wait_captured(i, STEPS // 3)
        # A high-priority run takes the GPUs; the job is stopped and requeued.
        hi = self.d.submit("--gpus", "2", "--priority", "high", "--", "sleep", "4")
        self.d.wait_state(hi, "running", timeout=120)
        self.d.wait_state(i, "queued")
        self.wipe()  # while the high-priority run holds the GPUs
        r, got = self.assert_resumed_bitwise(i)
        self.assertEqual(r["preemptions"], 1)

    def test_resume_from_another_run(self):
        first = self.d.submit("--name", "first", "--checkpoint-dir", self.ckpt,
                              "--", PY, TRAIN, "--steps", str(EVERY * 2), "--ckpt-every", str(EVERY))
        self.d.wait_state(first, "succeeded", timeout=300)
        self.wipe()
        second = self.d.submit("--resume-from", "first", *self.train_args())
        r, got = self.assert_resumed_bitwise(second)
        self.assertEqual(got["start_step"], EVERY * 2)
        self.assertEqual(r["spec"]["checkpoints"]["dir"], self.ckpt)

    def test_resume_from_needs_a_checkpoint_dir(self):
        plain = self.d.submit("--", "true")
        self.d.wait_state(plain, "succeeded")
        r = self.d.cli("run", "--resume-from", plain, "--", "true", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("checkpoint", r.stderr)


class CheckpointsOnAFullStore(unittest.TestCase):
    """The store fills up: the snapshot is skipped and says why, the run goes on."""

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to mount a small tmpfs (CI runs as root)")
        self.mnt = tempfile.mkdtemp(prefix="lathe-ckfull-")
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48M,mode=755", "tmpfs", self.mnt], check=True)
        self.d = Daemon(gpus="none", home=self.mnt).start()
        self.work = tempfile.mkdtemp(prefix="lathe-ckfull-src-")

    def tearDown(self):
        self.d.stop()
        subprocess.run(["pkill", "-9", "-f", "__monitor " + self.mnt], check=False)
        subprocess.run(["umount", "-l", self.mnt], check=False)
        os.rmdir(self.mnt)
        shutil.rmtree(self.work, ignore_errors=True)

    def test_snapshot_is_skipped_with_the_reason_and_the_run_is_undisturbed(self):
        ckpt = os.path.join(self.work, "ckpt")
        # Three incompressible 16 MB files, one per second: the store (48 MB,
        # reserve 10%) takes two, the third would cross the reserve.
        script = ("import os, time\n"
                  "for i in range(3):\n"
                  f"    p = os.path.join({ckpt!r}, f'weights_{{i}}.bin')\n"
                  "    with open(p + '.tmp', 'wb') as f: f.write(os.urandom(16 << 20))\n"
                  "    os.replace(p + '.tmp', p)\n"
                  "    time.sleep(1.5)\n"
                  "print('done')\n")
        i = self.d.submit("--checkpoint-dir", ckpt, "--", PY, "-c", script)
        r = self.d.wait_state(i, ["succeeded", "failed"], timeout=180)
        self.assertEqual(r["state"], "succeeded", self.d.logs(i))
        self.assertEqual(self.d.logs(i), "done\n")
        warnings = self.d.wait_for(
            lambda: [e for e in self.d.inspect(i)["events"] if e["type"] == "warning"], "the skip event")
        self.assertIn("skipped", warnings[0]["message"])
        self.assertIn("reserve", warnings[0]["message"])
        rows = json.loads(self.d.cli("snap", "ls", i, "--json").stdout)
        self.assertIn("skipped", [x["status"] for x in rows])
        fsck = json.loads(self.d.cli("snap", "fsck", "--json").stdout)
        self.assertTrue(fsck["ok"], fsck)
        # The snapshots taken before the store filled restore intact.
        taken = [x for x in rows if x["status"] == "complete"]
        self.assertTrue(taken, rows)
        out = os.path.join(self.work, "out")
        self.d.cli("snap", "restore", taken[-1]["id"], "--to", out)
        with open(os.path.join(out, "weights_0.bin"), "rb") as a, open(os.path.join(ckpt, "weights_0.bin"), "rb") as b:
            self.assertEqual(a.read(), b.read())


if __name__ == "__main__":
    unittest.main()
