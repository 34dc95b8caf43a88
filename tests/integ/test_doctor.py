"""`lathe doctor`, `lathe explain` and `lathe term` through the real binary.

The doctor runs against this machine (no daemon unless a test starts one);
explain reads excerpts from tests/data/explain and, for `lathe explain RUN`,
the log of a real failed run. No test asserts a wall-clock bound.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import LATHE, Daemon  # noqa: E402

SRC = os.environ.get("LATHE_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
EXCERPTS = os.path.join(SRC, "tests", "data", "explain")
GROUPS = {"gpu", "system", "network", "lathe", "cluster"}
SEVERITIES = {"ok", "warn", "fail", "skipped"}


class Cli:
    """Runs the binary with a private LATHE_HOME, so no real daemon answers."""

    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="lathe-doctor-integ-")

    def tearDown(self):
        shutil.rmtree(self.home, ignore_errors=True)

    def env(self, **extra):
        e = {k: v for k, v in os.environ.items()
             if not k.lower().endswith("_proxy") and not k.startswith("NCCL_")}
        e.update({"LATHE_HOME": self.home, "LANG": "C.UTF-8"})
        e.pop("LATHE_LANG", None)
        e.pop("LC_ALL", None)
        e.pop("TMPDIR", None)
        e.update(extra)
        return e

    def lathe(self, *args, env=None, stdin=None, timeout=180):
        return subprocess.run([LATHE, *args], capture_output=True, text=True, timeout=timeout,
                              env=env or self.env(), input=stdin,
                              stdin=None if stdin is not None else subprocess.DEVNULL)


class Doctor(Cli, unittest.TestCase):
    def doctor_json(self, *args, env=None):
        r = self.lathe("doctor", "--json", *args, env=env)
        self.assertIn(r.returncode, (0, 1), r.stderr)
        report = json.loads(r.stdout)
        self.assertEqual(report["exit_code"], r.returncode)
        return report, r

    def test_table_on_this_machine_is_sane(self):
        r = self.lathe("doctor", "--fast")
        self.assertIn(r.returncode, (0, 1), r.stderr)
        out = r.stdout
        for heading in ("GPU and driver", "System", "Network and environment", "Lathe"):
            self.assertIn(heading, out)
        self.assertIn("✓ sys.nofile", out)
        self.assertIn("lathe.daemon", out)       # no daemon here: a warning with its fix
        self.assertIn("lathe up", out)
        self.assertNotIn("\x1b[", out)           # stdout is not a terminal: no colour
        self.assertRegex(out, r"\d+ ok, \d+ warnings, \d+ failed, \d+ skipped")
        self.assertNotRegex(out, r"\{[a-z_]+\}")  # every placeholder filled
        if r.returncode == 1:
            self.assertIn("check(s) failed", r.stderr)

    def test_json_has_every_check_with_texts_for_problems(self):
        report, _ = self.doctor_json("--fast")
        ids = [c["id"] for c in report["checks"]]
        self.assertEqual(len(ids), len(set(ids)))
        self.assertGreaterEqual(len(ids), 25)
        for c in report["checks"]:
            self.assertIn(c["group"], GROUPS)
            self.assertIn(c["severity"], SEVERITIES)
            self.assertTrue(c["finding"], c)
            if c["severity"] in ("warn", "fail"):
                for k in ("scenario", "cause", "verify", "fix"):
                    self.assertTrue(c[k], (c["id"], k))
        by_id = {c["id"]: c for c in report["checks"]}
        self.assertEqual(by_id["gpu.torch"]["outcome"], "gpu.torch.fast")
        self.assertEqual(by_id["net.dns"]["severity"], "skipped")
        self.assertEqual(by_id["lathe.daemon"]["outcome"], "lathe.daemon.down")
        self.assertEqual(by_id["lathe.home"]["severity"], "ok")

    def test_full_run_with_slow_probes_finishes(self):
        report, _ = self.doctor_json()
        by_id = {c["id"]: c for c in report["checks"]}
        self.assertNotEqual(by_id["gpu.torch"]["outcome"], "gpu.torch.fast")
        self.assertNotEqual(by_id["net.dns"]["outcome"], "net.dns.fast")

    def test_chinese(self):
        r = self.lathe("doctor", "--fast", "--lang", "zh")
        self.assertIn("项正常", r.stdout)
        self.assertIn("系统", r.stdout)
        r2 = self.lathe("--lang", "zh", "doctor", "--fast", "--only", "lathe")
        self.assertIn("Lathe 自身", r2.stdout)
        self.assertIn("无法连接", r2.stdout)
        report, _ = self.doctor_json("--fast", env=self.env(LANG="zh_CN.UTF-8"))
        self.assertEqual(report["lang"], "zh")

    def test_capture_round_trip_and_store_fsck_with_a_daemon(self):
        d = Daemon(gpus="none", home=self.home).start()
        try:
            report, r = self.doctor_json("--only", "lathe")
            by_id = {c["id"]: c for c in report["checks"]}
            self.assertEqual(by_id["lathe.daemon"]["outcome"], "lathe.daemon.ok")
            self.assertEqual(by_id["lathe.capture"]["outcome"], "lathe.capture.ok", by_id["lathe.capture"])
            # The doctor removed what it made: no snapshot in the store (asked
            # of the daemon and of the store itself), no run in lathe ps.
            self.assertEqual(json.loads(d.cli("snap", "ls", "--json").stdout), [])
            store_dir = os.path.join(self.home, "store")
            self.assertEqual(json.loads(d.cli("snap", "--store", store_dir, "ls", "--json").stdout), [])
            self.assertEqual(d.runs(all_runs=True), [])
            self.assertEqual(d.runs(), [])
            # So `restore latest` is the user's own newest snapshot, not the doctor's.
            work = tempfile.mkdtemp(prefix="lathe-doctor-integ-work-")
            self.addCleanup(shutil.rmtree, work, True)
            ckpt = os.path.join(work, "ckpt")
            run = d.submit("--checkpoint-dir", ckpt, "--", "sh", "-c", f"echo mine > {ckpt}/w.bin")
            d.wait_state(run, "succeeded")
            d.wait_for(lambda: json.loads(d.cli("snap", "ls", "--json").stdout), "the run's snapshot")
            self.doctor_json("--only", "lathe")
            out = os.path.join(work, "restored")
            d.cli("snap", "restore", "latest", "--to", out)
            self.assertEqual(os.listdir(out), ["w.bin"])
            self.assertEqual([r["id"] for r in d.runs(all_runs=True)], [run])
            # The store exists now: the next doctor verifies it.
            report, _ = self.doctor_json("--only", "lathe")
            store = {c["id"]: c for c in report["checks"]}["lathe.store"]
            self.assertEqual(store["outcome"], "lathe.store.ok", store)
            # Damage one pack: fsck names it and the check fails.
            packs = glob.glob(os.path.join(self.home, "store", "packs", "*.pack"))
            self.assertTrue(packs)
            with open(packs[0], "r+b") as f:
                f.seek(os.path.getsize(packs[0]) // 2)
                b = f.read(1)
                f.seek(-1, 1)
                f.write(bytes([b[0] ^ 0xFF]))
            report, r = self.doctor_json("--only", "lathe", "--fast")
            self.assertEqual({c["id"]: c for c in report["checks"]}["lathe.store"]["outcome"], "lathe.store.fast")
            report, r = self.doctor_json("--only", "lathe")
            store = {c["id"]: c for c in report["checks"]}["lathe.store"]
            self.assertEqual(store["outcome"], "lathe.store.damaged", store)
            self.assertEqual(r.returncode, 1)
        finally:
            d.cleanup()

    def test_only_one_group_and_bad_group(self):
        report, _ = self.doctor_json("--fast", "--only", "system")
        self.assertEqual({c["group"] for c in report["checks"]}, {"system"})
        r = self.lathe("doctor", "--only", "disks")
        self.assertEqual(r.returncode, 2)
        self.assertIn("gpu, system, network, lathe", r.stderr)

    def test_fail_paths_through_the_environment(self):
        env = self.env(http_proxy="http://proxy.invalid:3128", TMPDIR="/nonexistent/lathe-tmp",
                       NCCL_SOCKET_IFNAME="nosuchif0")
        report, r = self.doctor_json("--fast", env=env)
        self.assertEqual(r.returncode, 1)
        by_id = {c["id"]: c for c in report["checks"]}
        self.assertEqual(by_id["net.proxy"]["outcome"], "net.proxy.captures_localhost")
        self.assertEqual(by_id["sys.tmp"]["outcome"], "sys.tmp.tmpdir_bad")
        self.assertEqual(by_id["net.nccl"]["outcome"], "net.nccl.bad_ifname")
        self.assertIn("no_proxy", by_id["net.proxy"]["fix"])
        env["no_proxy"] = "localhost,127.0.0.1"
        report, _ = self.doctor_json("--fast", "--only", "network", env=env)
        self.assertEqual({c["id"]: c for c in report["checks"]}["net.proxy"]["severity"], "ok")

    def test_strict_counts_warnings(self):
        # The daemon is not running: at least one warning.
        r = self.lathe("doctor", "--fast", "--only", "lathe", "--strict")
        self.assertEqual(r.returncode, 1)
        self.assertIn("--strict", r.stderr)
        self.assertEqual(self.lathe("doctor", "--fast", "--only", "lathe").returncode, 0)

    def test_fix_script_is_valid_shell_and_is_not_run(self):
        env = self.env(http_proxy="http://proxy.invalid:3128", TMPDIR="/nonexistent/it's here")
        r = self.lathe("doctor", "--fast", "--fix-script", env=env)
        # The unusable TMPDIR fails sys.tmp: the exit code is the doctor's, as without the flag.
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("check(s) failed", r.stderr)
        script = r.stdout
        self.assertTrue(script.startswith("#!/bin/sh\n"))
        self.assertIn("export no_proxy=", script)
        self.assertIn("mkdir -p '/nonexistent/it'\\''s here'", script)
        self.assertFalse(os.path.exists("/nonexistent"))
        check = subprocess.run(["sh", "-n"], input=script, text=True, capture_output=True)
        self.assertEqual(check.returncode, 0, check.stderr)

    def test_fix_script_exits_with_the_doctors_code(self):
        # Only the lathe group: the daemon is down, a warning and no failure.
        r = self.lathe("doctor", "--fast", "--only", "lathe", "--fix-script")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("#!/bin/sh\n"))
        r = self.lathe("doctor", "--fast", "--only", "lathe", "--fix-script", "--strict")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertTrue(r.stdout.startswith("#!/bin/sh\n"))
        zh = self.lathe("doctor", "--fast", "--fix-script", env=self.env(TMPDIR="/nonexistent",
                                                                          LANG="zh_CN.UTF-8"))
        self.assertEqual(zh.returncode, 1, zh.stderr)
        self.assertIn("项检查失败", zh.stderr)


class Explain(Cli, unittest.TestCase):
    def test_text_argument_in_both_languages(self):
        r = self.lathe("explain", "RuntimeError: CUDA error: no kernel image is available for "
                       "execution on the device")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("[cuda.no_kernel_image]", r.stdout)
        self.assertIn("verify:", r.stdout)
        self.assertIn("get_arch_list", r.stdout)
        zh = self.lathe("explain", "--lang", "zh", "Torch not compiled with CUDA enabled")
        self.assertEqual(zh.returncode, 0, zh.stderr)
        self.assertIn("安装的是纯 CPU 版 torch", zh.stdout)
        self.assertIn("场景：", zh.stdout)

    def test_log_files_rank_their_entry_first(self):
        files = sorted(glob.glob(os.path.join(EXCERPTS, "*", "*.log")))
        files = [f for f in files if os.path.basename(os.path.dirname(f)) != "clean"]
        self.assertGreaterEqual(len(files), 40)
        for f in files[::5]:  # a sample: the unit test covers them all
            want = os.path.basename(os.path.dirname(f))
            r = self.lathe("explain", "--json", "--log", f)
            self.assertEqual(r.returncode, 0, (f, r.stderr))
            self.assertEqual(json.loads(r.stdout)[0]["id"], want, f)

    def test_stdin_and_clean_logs(self):
        with open(os.path.join(EXCERPTS, "nccl.watchdog_timeout", "1.log")) as f:
            text = f.read()
        r = self.lathe("explain", "--log", "-", stdin=text)
        self.assertIn("[nccl.watchdog_timeout]", r.stdout)
        piped = self.lathe("explain", stdin=text)
        self.assertIn("[nccl.watchdog_timeout]", piped.stdout)
        for f in glob.glob(os.path.join(EXCERPTS, "clean", "*.log")):
            r = self.lathe("explain", "--log", f)
            self.assertEqual(r.returncode, 1, (f, r.stdout))
            self.assertIn("no entry of the knowledge base", r.stderr)

    def test_no_input_and_missing_file(self):
        r = self.lathe("explain", "--log", "/nonexistent/train.log")
        self.assertEqual(r.returncode, 3, r.stderr)
        r = self.lathe("explain", "--max", "0", "x")
        self.assertEqual(r.returncode, 2)


class ExplainRun(unittest.TestCase):
    def test_explains_a_failed_run_from_its_log(self):
        d = Daemon(gpus="sim:1x24GB").start()
        try:
            run = d.submit("--", "sh", "-c",
                           "echo 'epoch 1 ok'; echo 'RuntimeError: DataLoader worker (pid 42) is "
                           "killed by signal: Bus error.' >&2; exit 1")
            d.wait_state(run, ["failed"])
            r = d.cli("explain", run, check=False)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("[dataloader.shm_exhausted]", r.stdout)
            r = d.cli("explain", "--run", run, "--json")
            self.assertEqual(json.loads(r.stdout)[0]["id"], "dataloader.shm_exhausted")
        finally:
            d.cleanup()


class Term(Cli, unittest.TestCase):
    def test_both_directions(self):
        r = self.lathe("term", "spot", "instance")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("spot instance ↔ 抢占式实例", r.stdout)
        zh = self.lathe("term", "抢占式实例", "--lang", "zh")
        self.assertIn("spot instance ↔ 抢占式实例", zh.stdout)
        self.assertIn("精确匹配", zh.stdout)
        p = self.lathe("term", "禁用 InfiniBand", "--json")
        self.assertEqual(json.loads(p.stdout)["terms"][0]["en"], "NCCL_IB_DISABLE")

    def test_fuzzy_prefix_and_scenario(self):
        f = json.loads(self.lathe("term", "persistance", "mode", "--json").stdout)
        self.assertEqual(f["terms"][0]["id"], "persistence_mode")
        self.assertEqual(f["terms"][0]["match"], "fuzzy")
        s = json.loads(self.lathe("term", "多节点训练中断", "--json").stdout)
        self.assertIn("nccl.watchdog_timeout", [k["id"] for k in s["kb"]])

    def test_not_found_and_usage(self):
        r = self.lathe("term", "xyzzyqwv")
        self.assertEqual(r.returncode, 3)
        self.assertIn("xyzzyqwv", r.stderr)
        self.assertEqual(self.lathe("term").returncode, 2)


class Plan(Cli, unittest.TestCase):
    def test_zero_paper_figure_1(self):
        # Rajbhandari et al. 2020, Figure 1: 7.5B parameters, mixed-precision
        # Adam, 64 GPUs: model states 120 / 31.4 / 16.6 / 1.9 GB per GPU.
        want = [120.0, 31.4, 16.6, 1.9]
        for stage, gb in enumerate(want):
            r = self.lathe("plan", "--params", "7.5B", "--precision", "fp16", "--gpus", "64",
                           "--zero", str(stage), "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            b = json.loads(r.stdout)["bytes_per_gpu"]
            states = (b["weights"] + b["gradients"] + b["optimizer"]) / 1e9
            self.assertAlmostEqual(states, gb, delta=0.05)

    def test_breakdown_and_gpus_in_both_languages(self):
        args = ["plan", "--params", "7B", "--layers", "32", "--hidden", "4096", "--heads", "32",
                "--batch", "4", "--checkpointing", "on"]
        r = self.lathe(*args)
        self.assertEqual(r.returncode, 0, r.stderr)
        for text in ("weights", "optimizer states", "12·Ψ", "Korthikanti", "NVIDIA H100 SXM 80GB",
                     "MFU"):
            self.assertIn(text, r.stdout)
        zh = self.lathe(*args, "--lang", "zh")
        self.assertIn("优化器状态", zh.stdout)
        self.assertIn("激活重计算 开启", zh.stdout)

    def test_catalog_override_from_the_config_directory(self):
        cfg = os.path.join(self.home, "config")
        path = os.path.join(cfg, "lathe", "gpu_catalog.yaml")
        args = ["plan", "--params", "7B"]
        # No file yet: the hint names where to create it, not the source tree's data/.
        r = self.lathe(*args, env=self.env(XDG_CONFIG_HOME=cfg))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(path, r.stdout)
        self.assertNotIn("data/gpu_catalog.yaml", r.stdout)
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as f:
            f.write("- id: lab-card\n  name: Lab Card 192GB\n  memory: 192GiB\n  bf16_tflops: '400'\n"
                    "  price_usd_hour: '1.00'\n")
        r = self.lathe(*args, "--json", env=self.env(XDG_CONFIG_HOME=cfg))
        self.assertEqual(r.returncode, 0, r.stderr)
        lab = [g for g in json.loads(r.stdout)["gpus"] if g["name"] == "Lab Card 192GB"]
        self.assertEqual(len(lab), 1)
        self.assertTrue(lab[0]["fits"])
        self.assertIsNotNone(lab[0]["usd_per_mtok"])
        zh = self.lathe(*args, env=self.env(XDG_CONFIG_HOME=cfg, LANG="zh_CN.UTF-8"))
        self.assertIn("GPU 型号：内置目录，并合并了 " + path, zh.stdout)
        self.assertIn("Lab Card 192GB", zh.stdout)
        with open(path, "w") as f:
            f.write("- id: lab-card\n  name: Lab Card\n  memory: lots\n  bf16_tflops: '400'\n")
        r = self.lathe(*args, env=self.env(XDG_CONFIG_HOME=cfg))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(path, r.stderr)
        self.assertIn("memory", r.stderr)

    def test_prices_and_bad_input(self):
        prices = os.path.join(self.home, "prices.yaml")
        with open(prices, "w") as f:
            f.write("- id: h100-sxm\n  price_usd_hour: '1.00'\n")
        r = self.lathe("plan", "--params", "1B", "--prices", prices, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        gpus = {g["name"]: g for g in json.loads(r.stdout)["gpus"]}
        tps = 0.4 * 989e12 / (6 * 1e9)
        self.assertAlmostEqual(gpus["NVIDIA H100 SXM 80GB"]["usd_per_mtok"],
                               1.0 / 3600 / tps * 1e6, places=6)
        self.assertEqual(self.lathe("plan").returncode, 2)
        self.assertEqual(self.lathe("plan", "--params", "lots").returncode, 2)
        self.assertEqual(self.lathe("plan", "--params", "1B", "--zero", "5").returncode, 2)


if __name__ == "__main__":
    unittest.main()
