"""Data-parallel training on two nodes: `lathe run --pool cluster --nodes 2 --torchrun` of
examples/train_digits.py against a private Slurm of two nodes on this host
(tests/integ/slurm_cluster.py, `nodes=2`), as an unprivileged user. One torchrun per node, one
rank each, gloo on CPU, DistributedDataParallel: each rank trains on its half of every global
batch of 32. Its final loss is compared with the same training in one process (same seed, same
global batch), run here without Lathe.

The two are the same mean gradient over the same samples, summed in another order (each rank's
mean over 16, then the mean of the two, against one mean over 32), so they agree to float rounding,
not bit for bit. Measured here (Debian 12, python3-torch 1.13, STEPS = 200): 0.0030144064 on two
nodes against 0.0030144101 in one process, 1.2e-6 relative, the same on every run. Other
surroundings move it a little (the same comparison under a local torchrun with
OPENBLAS_CORETYPE=Haswell in both: 2.5e-6), and training amplifies it with the steps (there: 6e-8
at 100 steps, 1e-5 at 300, 2.4e-4 at 600). TOLERANCE is 1e-4 relative: some 40 to 80 times what
was measured, and still far below what a wrong split gives (a global batch of 16 instead of 32
ends at 0.044, 14 times the loss). Bitwise difference is not asserted (after 60 steps the two are
still equal); that the ranks took disjoint halves is checked from what each prints.

Skipped without root, Slurm and munge, /usr/bin/torchrun, or torch and sklearn.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_checkpoints  # noqa: E402
from harness import PY  # noqa: E402
from test_slurm_pool import USER, PoolCase  # noqa: E402
from torchrun_fix import run_path  # noqa: E402

STEPS = 200  # a few seconds of training; the tolerance below was measured at this length
BATCH = 32  # the global batch, in both runs
TOLERANCE = 1e-4  # relative, on the final loss (see above)
RANK_LINE = re.compile(r"rank (\d+) of (\d+) on node (\S+): samples (\d+) to (\d+) "
                       r"of each batch of (\d+)")


def one_process(train):
    """The single-process run's --out result: the environment a Lathe run gets (RunEnv)."""
    d = tempfile.mkdtemp(prefix="lathe-ddp-base-")
    try:
        out = os.path.join(d, "result.json")
        env = {"PATH": os.environ["PATH"], "HOME": os.path.expanduser("~"),
               "LANG": "C.UTF-8", "CUDA_VISIBLE_DEVICES": ""}
        subprocess.run([PY, train, "--steps", str(STEPS), "--batch", str(BATCH),
                        "--ckpt-every", str(STEPS), "--ckpt-dir", os.path.join(d, "ckpt"),
                        "--out", out], check=True, capture_output=True, env=env, timeout=300)
        with open(out) as f:
            return json.load(f)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@unittest.skipUnless(test_checkpoints.have_torch(), "needs /usr/bin/python3 with torch and sklearn")
class SlurmDdp(PoolCase):
    CLUSTER = {"nodes": 2, "gpus": 1, "cpus": 2}

    @classmethod
    def setUpClass(cls):
        if not os.access("/usr/bin/torchrun", os.X_OK):
            raise unittest.SkipTest("no /usr/bin/torchrun (python3-torch)")
        super().setUpClass()

    def test_two_node_ddp_training_ends_at_the_single_process_loss(self):
        train = os.path.join(self.base, "train_digits.py")
        shutil.copy(test_checkpoints.TRAIN, train)
        os.chmod(train, 0o644)
        ckpt = os.path.join(self.shared, "ckpt-ddp")
        out = os.path.join(self.shared, "result-ddp.json")
        path = run_path(os.path.join(self.shared, "bin"))
        rid = self.submit("--nodes", "2", "--torchrun", "--env", "PATH=" + path,
                          "--", PY, train, "--steps", str(STEPS), "--batch", str(BATCH),
                          "--ckpt-every", str(STEPS // 2), "--ckpt-dir", ckpt, "--out", out)
        single = one_process(train)  # while the job runs
        try:
            r = self.d.wait_state(rid, ["succeeded", "failed"], timeout=240)
        except AssertionError as e:  # a hang: what the ranks printed, the steps, the slurmds
            log = self.run_as(USER, "logs", rid).stdout
            raise AssertionError(f"{e}\n--- the run's log:\n{log}"
                                 + self.cluster.run("/usr/bin/squeue", "-s").stdout
                                 + "".join(self.cluster.tail(f"slurm/slurmd-{n}.log", 3000)
                                           for n in self.cluster.node_names)) from None
        logs = self.run_as(USER, "logs", rid).stdout
        self.assertEqual(r["state"], "succeeded", logs + self.cluster.tail("slurm/slurmctld.log"))

        # Two ranks, one on each node, on disjoint halves of every global batch.
        ranks = sorted((tuple(int(g) if g.isdigit() else g for g in m.groups())
                        for m in RANK_LINE.finditer(logs)))
        self.assertEqual([x[:2] for x in ranks], [(0, 2), (1, 2)], logs)
        self.assertEqual(sorted(x[2] for x in ranks), sorted(self.cluster.node_names), logs)
        self.assertEqual([x[3:] for x in ranks], [(0, 15, BATCH), (16, 31, BATCH)], logs)

        with open(out) as f:
            ddp = json.load(f)
        self.assertEqual((ddp["step"], ddp["start_step"]), (STEPS, 0), ddp)
        self.assertEqual(single["step"], STEPS, single)
        diff = abs(ddp["loss"] - single["loss"]) / single["loss"]
        self.assertLess(diff, TOLERANCE, f"two nodes: {ddp}, one process: {single}")
        print(f"final loss: two nodes {ddp['loss']!r}, one process {single['loss']!r}, "
              f"relative difference {diff:.3g}", file=sys.stderr)
        # The checkpoints (rank 0 writes them) are where --ckpt-dir said, the user's.
        self.assertEqual(sorted(os.listdir(ckpt)), ["ckpt_000100.pt", "ckpt_000200.pt"])
        self.assertEqual(os.stat(ckpt).st_uid, self.pw.pw_uid)


if __name__ == "__main__":
    unittest.main()
