"""`lathe pools` against a private Slurm 22.05 on loopback (tests/integ/slurm_cluster.py): the
cluster pool's partition `debug` with its idle node and 2 GPUs as sinfo reports them, a user's
one-GPU job among their runs there while the GPUs used go up, a second user seeing none of the
first one's runs, the text output in English and Chinese, and a pool whose sinfo fails named with
why, beside the pools that answer.

Skipped without root or without Slurm and munge (`scripts/deps.sh` installs them). Every process
started is stopped by pid at the end: the test process becomes a child subreaper, so that what
slurmd and the jobs leave behind is re-parented to it.
"""
import json
import os
import sys
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_slurm_pool import OTHER, USER, PoolCase  # noqa: E402


class SlurmPoolsCommand(PoolCase):
    @classmethod
    def pool_config(cls):
        # The cluster pool on partition debug, and a pool whose cluster does not answer: its
        # sinfo says why and fails.
        broken_bin = os.path.join(cls.base, "broken-bin")
        os.makedirs(broken_bin)
        with open(os.path.join(broken_bin, "sinfo"), "w") as f:
            f.write("#!/bin/sh\necho 'sinfo: error: Unable to contact slurm controller"
                    " (connect failure)' >&2\nexit 1\n")
        os.chmod(os.path.join(broken_bin, "sinfo"), 0o755)
        return ("    partition: debug\n"
                "  broken:\n    type: slurm\n"
                f"    shared_dir: {cls.shared}\n    slurm_conf: {cls.cluster.conf}\n"
                f"    bin_dir: {broken_bin}\n")

    def run_as(self, user, *args, check=True, lang=None):
        extra = {"HOME": "/tmp"}
        if lang:
            extra["LATHE_LANG"] = lang
        return self.d.cli(*args, user=user, env=self.d.env(**extra), check=check)

    def pools(self, user):
        out = json.loads(self.run_as(user, "pools", "--json").stdout)
        return {p["name"]: p for p in out["pools"]}, out

    def test_a_users_gpu_job_shows_in_their_pool_and_in_the_partitions_gpus(self):
        pools, out = self.pools(USER)
        self.assertEqual(list(pools), ["local", "broken", "cluster"], out)  # then by name
        self.assertEqual(out["default_pool"], "local")
        cluster = pools["cluster"]
        self.assertEqual(cluster["type"], "slurm")
        self.assertTrue(cluster["capabilities"]["places_runs"])
        self.assertEqual(cluster["partition"], "debug")
        self.assertIsNone(cluster["error"], cluster)
        parts = {p["name"]: p for p in cluster["partitions"]}
        self.assertIn("debug", parts, cluster)
        debug = parts["debug"]
        self.assertTrue(debug["default"])
        self.assertEqual(debug["state"], "up")
        self.assertEqual(debug["max_time_ms"], -1)  # MaxTime=INFINITE
        self.assertEqual(debug["gpus"]["total"], 2, debug)
        self.assertEqual(debug["gpus"]["used"], 0, debug)
        self.assertEqual(debug["gpus"]["types"], ["fake"])
        self.assertEqual(debug["nodes"], {"total": 1, "idle": 1, "allocated": 0, "down": 0})
        self.assertEqual(cluster["runs"]["running"], {"count": 0, "ids": []})
        self.assertEqual(pools["local"]["partitions"], [])

        rid = self.run_as(USER, "run", "--pool", "cluster", "--gpus", "1", "--workdir",
                          self.shared, "--", "sleep", "300").stdout.strip()
        try:
            self.d.wait_state(rid, ["running"], timeout=90)

            def seen():  # a pool's answer is reused for 2 s
                p, _ = self.pools(USER)
                d = {x["name"]: x for x in p["cluster"]["partitions"]}["debug"]
                return p if d["gpus"]["used"] == 1 and p["cluster"]["runs"]["running"]["ids"] \
                    else None
            pools = self.d.wait_for(seen, "the job's GPU in sinfo", timeout=30)
            cluster = pools["cluster"]
            self.assertEqual(cluster["runs"]["running"], {"count": 1, "ids": [rid]})
            self.assertEqual(cluster["runs"]["queued"]["count"], 0)
            debug = {x["name"]: x for x in cluster["partitions"]}["debug"]
            self.assertEqual(debug["nodes"]["allocated"], 1, debug)
            self.assertEqual(debug["nodes"]["idle"], 0, debug)
            self.assertEqual(pools["local"]["runs"]["running"]["count"], 0)

            # The second user sees the cluster's load, none of the first one's runs.
            raw = self.run_as(OTHER, "pools", "--json").stdout
            self.assertNotIn(rid, raw)
            for p in json.loads(raw)["pools"]:
                for state in ("queued", "starting", "running"):
                    self.assertEqual(p["runs"][state], {"count": 0, "ids": []}, p)
            self.assertNotIn(rid, self.run_as(OTHER, "pools").stdout)

            text = self.run_as(USER, "pools").stdout
            self.assertIn("POOL", text)
            self.assertIn("cluster", text)
            self.assertIn("partition debug", text)
            self.assertIn("debug (default)", text)
            self.assertIn("1/2 (fake)", text)
            self.assertIn("0/0/1", text)  # queued/starting/running
            self.assertIn(f"your runs in cluster: running: {rid}", text)
            zh = self.run_as(USER, "pools", lang="zh").stdout
            self.assertIn("资源池", zh)
            self.assertIn("分区", zh)
            self.assertIn("你在 cluster 中的运行", zh)
        finally:
            self.run_as(USER, "stop", rid, check=False)
        self.d.wait_state(rid, ["stopped"], timeout=60)

    def test_a_pool_whose_sinfo_fails_is_named_with_why(self):
        pools, out = self.pools(USER)
        broken = pools["broken"]
        self.assertEqual(broken["partitions"], [])
        self.assertIsNotNone(broken["error"], out)
        self.assertEqual(broken["error"]["msg_id"], "slurm.sinfo_failed", broken)
        self.assertIn("pool broken: sinfo failed: ", broken["error"]["error"])
        self.assertIn("Unable to contact slurm controller", broken["error"]["error"])
        self.assertIsNone(pools["cluster"]["error"])  # the others still answer
        r = self.run_as(USER, "pools")
        self.assertEqual(r.returncode, 0)
        self.assertIn("pool broken: sinfo failed: sinfo: error: Unable to contact slurm controller",
                      r.stdout)
        zh = self.run_as(USER, "pools", lang="zh").stdout
        self.assertIn("资源池 broken：sinfo 失败", zh)

    def test_the_list_needs_a_credential(self):
        url = json.loads(self.d.cli("status", "--json").stdout)["url"]
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url + "/api/v1/pools", timeout=30)
        self.assertEqual(e.exception.code, 401)


if __name__ == "__main__":
    unittest.main()
