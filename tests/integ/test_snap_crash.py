"""kill -9 of `lathe snap create` (and `lathe snap gc`) at random points:
afterwards fsck is clean and every committed snapshot restores
byte-identical to the tree it captured. A short loop runs here; the long one
is tests/slow/test_snap_crash.py (same code, more kills).
"""
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import LATHE, snap_env as env  # noqa: E402


def digest_tree(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


class Loop:
    """One store, one source tree that changes before every capture."""

    def __init__(self, test, seed):
        self.t = test
        self.rng = random.Random(seed)
        self.tmp = tempfile.mkdtemp(prefix="lathe-snap-crash-")
        self.store = os.path.join(self.tmp, "store")
        self.src = os.path.join(self.tmp, "ckpt")
        self.expected = {}  # iteration -> digest_tree of the source at that capture
        os.makedirs(self.src)

    def run(self, *args, check=True):
        r = subprocess.run([LATHE, "snap", "--store", self.store, *args], capture_output=True,
                           text=True, env=env(), timeout=600)
        if check and r.returncode != 0:
            self.t.fail(f"snap {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def mutate(self, i):
        """Rewrites one or two files (new content, some shared with older ones)."""
        for _ in range(self.rng.randint(1, 2)):
            name = f"shard_{self.rng.randint(0, 5)}.bin"
            size = self.rng.randint(1, 6) * 700_000
            base = self.rng.randbytes(size)
            with open(os.path.join(self.src, name + ".tmp"), "wb") as f:
                f.write(base)
            os.replace(os.path.join(self.src, name + ".tmp"), os.path.join(self.src, name))
        with open(os.path.join(self.src, "iter.txt"), "w") as f:
            f.write(str(i))
        self.expected[i] = digest_tree(self.src)

    def timed_create(self, i):
        start = time.monotonic()
        self.run("create", self.src, "--tag", f"iter={i}")
        return time.monotonic() - start

    def killed(self, args, window):
        """Starts `lathe snap ARGS`, SIGKILLs it after a random delay (it may finish first)."""
        p = subprocess.Popen([LATHE, "snap", "--store", self.store, *args], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env())
        time.sleep(self.rng.uniform(0, window))
        p.kill()
        p.wait()

    def check(self, restore_all):
        fsck = self.run("fsck", "--json", check=False)
        report = json.loads(fsck.stdout) if fsck.stdout else {}
        self.t.assertEqual(fsck.returncode, 0, fsck.stdout + fsck.stderr)
        self.t.assertTrue(report.get("ok"), report)
        if not restore_all:
            return 0
        rows = json.loads(self.run("ls", "--json").stdout)
        for row in rows:
            i = int(row["tags"]["iter"])
            out = os.path.join(self.tmp, "out")
            self.run("restore", row["id"], "--to", out, "--force")
            self.t.assertEqual(digest_tree(out), self.expected[i], f"snapshot of iteration {i}")
        return len(rows)

    def loop(self, kills):
        self.mutate(0)
        window = max(0.05, self.timed_create(0)) * 1.3
        for i in range(1, kills + 1):
            self.mutate(i)
            self.killed(["create", self.src, "--tag", f"iter={i}"], window)
            if i % 4 == 0:
                self.killed(["gc"], window)  # a killed gc must be harmless too
            self.check(restore_all=i % 10 == 0)
        self.run("gc")
        restored = self.check(restore_all=True)
        self.t.assertGreaterEqual(restored, 1)

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def crash_loop(test, kills, seed=1):
    loop = Loop(test, seed)
    try:
        loop.loop(kills)
    finally:
        loop.cleanup()


class SnapCrash(unittest.TestCase):
    def test_kill_the_snapshotter(self):
        crash_loop(self, kills=int(os.environ.get("LATHE_SNAP_KILLS", "12")), seed=3)


if __name__ == "__main__":
    unittest.main()
