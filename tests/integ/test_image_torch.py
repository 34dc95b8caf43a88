"""A training job in a Debian image with python3-torch (scripts/test-images.sh builds
it once, outside the clone): as an unprivileged user, checkpoint capture and resume
inside the image after a kill -9 of the trainer mid-training end with a loss
bitwise equal to an uninterrupted run's in the same image.

Skipped where the image has not been built (scripts/deps.sh builds it).
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import unittest

from harness import PY, DaemonTest, second_user, shared_scratch
from image_fixture import have_podman, reset_store
from torchrun_fix import run_path

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "..", "..", "examples", "train_digits.py")
USER = "lathe-it-img"
STEPS = 160
EVERY = 20
TARS = glob.glob("/var/cache/lathe-test-images/debian-torch-*.tar")


def trainer_pid(uid):
    """The pid of the user's train_digits.py (inside the container, seen from the host)."""
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            if os.stat(f"/proc/{p}").st_uid == uid and any(b"train_digits.py" in c for c in cmd):
                return int(p)
        except OSError:
            continue
    return None


@unittest.skipUnless(have_podman() and TARS, "the Debian+torch image (scripts/test-images.sh)")
class TorchInImage(DaemonTest):
    gpus = "none"

    def setUp(self):
        self.pw = second_user(self, USER)
        super().setUp()
        self.scratch = shared_scratch(self, "lathe-torch-img-")
        self.work = os.path.join(self.scratch, "work")
        os.mkdir(self.work)
        shutil.copy(TRAIN, self.work)
        # The digits as arrays: the image has torch and numpy, not sklearn.
        subprocess.run([PY, "-c", "import numpy, sys; from sklearn.datasets import load_digits;"
                        " d = load_digits(); numpy.savez(sys.argv[1], images=d.images,"
                        " target=d.target)", os.path.join(self.work, "digits.npz")], check=True)
        for root, dirs, files in os.walk(self.work):
            for n in dirs + files:
                os.chown(os.path.join(root, n), self.pw.pw_uid, self.pw.pw_gid)
        os.chown(self.work, self.pw.pw_uid, self.pw.pw_gid)
        self.env = self.d.env(HOME="/tmp")
        os.chmod(TARS[0], 0o644)
        self.as_user("image", "import", "torch", TARS[0], timeout=900)

    def tearDown(self):
        reset_store(self.d.home)
        super().tearDown()

    def as_user(self, *args, check=True, timeout=120):
        return self.d.cli(*args, user=USER, env=self.env, check=check, timeout=timeout)

    def train(self, out, *extra, sleep="0", script=()):
        return self.as_user("run", "--image", "torch", "--workdir", self.work, *extra, "--",
                            "python3", "train_digits.py", "--data", "digits.npz", "--steps",
                            str(STEPS), "--ckpt-every", str(EVERY), "--step-sleep", sleep,
                            "--out", out, *script).stdout.strip()

    def doctor_torch(self, image):
        r = self.as_user("doctor", "--image", image, "--json", check=False, timeout=300)
        report = json.loads(r.stdout)
        return {c["id"]: c for c in report["checks"]}

    def test_doctor_checks_torch_in_the_image(self):
        checks = self.doctor_torch("torch")
        self.assertTrue(all(c["group"] == "gpu" for c in checks.values()), checks.keys())
        torch = [c for c in checks.values() if c["outcome"].startswith("gpu.torch.")]
        self.assertEqual(len(torch), 1, checks)
        # Debian's torch, found in the image (the host's Pythons are not looked at).
        self.assertEqual(torch[0]["values"].get("python"), "python3 (image torch)", torch)
        self.assertTrue(torch[0]["values"].get("version", "").startswith("1.13"), torch)
        # The doctor's test run does not stay.
        self.assertEqual(self.d.runs(all_runs=True), [])

    def test_torchrun_in_the_image(self):
        # The image's own torchrun (Lathe's binary is not in the image), one node,
        # one process without GPUs; the program sees torchrun's and Lathe's variables.
        # Debian's torchrun under Python 3.11 needs the mended one (torchrun_fix.py),
        # written into the mounted working directory, first on the run's PATH.
        path = run_path(os.path.join(self.work, "shim"))
        run = self.as_user("run", "--image", "torch", "--torchrun", "--workdir", self.work,
                           "--env", "PATH=" + path, "--",
                           "python3", "-c",
                           "import os; print('world', os.environ['WORLD_SIZE'],"
                           " os.environ['LOCAL_RANK'], os.environ['LATHE_NNODES'],"
                           " os.environ['LATHE_NODE_RANK'])").stdout.strip()
        r = self.d.wait_state(run, ["succeeded", "failed"], timeout=300)
        log = self.d.logs(run)
        self.assertEqual(r["state"], "succeeded", log)
        self.assertIn("world 1 0 1 0", log)

    def test_killed_trainer_resumes_bitwise_in_the_image(self):
        base = self.train("base.json", script=("--ckpt-dir", "base-ckpt"))
        r = self.d.wait_state(base, ["succeeded", "failed"], timeout=600)
        self.assertEqual(r["state"], "succeeded", self.d.logs(base))
        with open(os.path.join(self.work, "base.json")) as f:
            expected = json.load(f)
        ckpt = os.path.join(self.work, "ckpt")
        os.mkdir(ckpt)
        os.chown(ckpt, self.pw.pw_uid, self.pw.pw_gid)
        run = self.train("resumed.json", "--retry", "2", "--checkpoint-dir", ckpt, sleep="0.05")
        self.d.wait_state(run, "running")

        def captured():
            for e in self.d.inspect(run)["events"]:
                if e["type"] == "checkpoint" and e["data"].get("step", -1) >= STEPS // 2:
                    return e
            return None
        self.d.wait_for(captured, "a snapshot of the second half", timeout=300)
        pid = self.d.wait_for(lambda: trainer_pid(self.pw.pw_uid), "the trainer's pid")
        os.kill(pid, signal.SIGKILL)
        r = self.d.wait_state(run, ["succeeded", "failed"], timeout=600)
        self.assertEqual(r["state"], "succeeded", self.d.logs(run))
        self.assertEqual(r["attempt"], 2)
        with open(os.path.join(self.work, "resumed.json")) as f:
            got = json.load(f)
        self.assertGreater(got["start_step"], 0, self.d.logs(run))
        self.assertEqual(got["step"], STEPS)
        self.assertEqual(got["loss_hex"], expected["loss_hex"],
                         "the resumed run's final loss differs from an uninterrupted run's")
        st = os.stat(os.path.join(self.work, "resumed.json"))
        self.assertEqual(st.st_uid, self.pw.pw_uid)


if __name__ == "__main__":
    unittest.main()
