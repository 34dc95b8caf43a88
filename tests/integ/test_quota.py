"""Quotas and fair share: two unprivileged users against a root daemon.

A run over its user's quota waits (not fails) with the limit named in
`lathe inspect` and `lathe ps`, and starts when the blocking run ends; a
request beyond the limit is refused at submission; `lathe status` shows usage
against limits. Fair share: with one GPU, user B's single run starts before
the runs user A queued earlier, because A has used the GPU lately.
"""
import json
import os
import subprocess
import unittest

from harness import LATHE, Daemon, second_user

A = "lathe-it-qa"
B = "lathe-it-qb"


class QuotaTest(unittest.TestCase):
    gpus = "sim:4x24GB"
    config = ""

    def setUp(self):
        second_user(self, A)
        second_user(self, B)
        self.d = Daemon(gpus=self.gpus)
        with open(os.path.join(self.d.home, "config.yaml"), "w") as f:
            f.write(self.config)
        self.d.start()
        self.addCleanup(self.d.cleanup)
        self.env = self.d.env(HOME="/tmp")

    def run_as(self, user, *args, check=True):
        r = self.d.cli("run", "--workdir", "/tmp", *args, user=user, env=self.env, check=check)
        return r if not check else r.stdout.strip()

    def cli_as(self, user, *args, check=True, lang=None):
        env = self.env if lang is None else self.d.env(HOME="/tmp", LATHE_LANG=lang)
        return self.d.cli(*args, user=user, env=env, check=check)

    def inspect_as(self, user, run):
        return json.loads(self.cli_as(user, "inspect", "--json", run).stdout)


class Quotas(QuotaTest):
    config = f"quotas:\n  default: {{runs: 10}}\n  {A}: {{gpus: 1}}\n"

    def test_a_run_over_quota_waits_with_the_reason_and_starts_when_usage_drops(self):
        first = self.run_as(A, "--gpus", "1", "--", "sleep", "600")
        self.d.wait_state(first, "running")
        second = self.run_as(A, "--gpus", "1", "--", "true")
        why = f"{A} holds 1 of their 1 GPUs; this run needs 1"
        r = self.d.wait_for(lambda: (lambda x: x if x.get("waiting") == why else None)(
            self.inspect_as(A, second)), "the quota reason")
        self.assertEqual(r["state"], "queued")
        self.assertEqual(r["waiting_on"], "quota")
        # Not for lack of GPUs: 3 of the 4 are free, and B's run starts at once.
        theirs = self.run_as(B, "--gpus", "2", "--", "true")
        self.d.wait_state(theirs, "succeeded")
        self.assertEqual(self.d.inspect(second)["state"], "queued")
        # Shown by inspect and ps, in both languages; an event says it once.
        text = self.cli_as(A, "inspect", second).stdout
        self.assertIn(why, text)
        zh = self.cli_as(A, "inspect", second, lang="zh").stdout
        self.assertIn(f"{A} 已占用其 1 块 GPU 配额中的 1 块", zh)
        ps = self.cli_as(A, "ps").stdout
        line = next(l for l in ps.splitlines() if l.startswith(second))
        self.assertIn("queued (quota)", line)
        self.assertIn("（配额）", self.cli_as(A, "ps", lang="zh").stdout)
        events = [e for e in r["events"] if "waiting for quota" in e["message"]]
        self.assertEqual(len(events), 1, r["events"])
        self.assertIn("等待配额", zh)
        # Usage against limits: A sees their own only.
        status = json.loads(self.cli_as(A, "status", "--json").stdout)["quotas"]
        self.assertEqual([u["user"] for u in status["users"]], [A])
        mine = status["users"][0]
        self.assertEqual(mine["limits"]["gpus"], 1)
        self.assertEqual(mine["limits"]["runs"], 10)
        self.assertEqual(mine["sources"], {"gpus": A, "runs": "default"})
        self.assertEqual(mine["usage"]["gpus"], 1)
        self.assertEqual(mine["usage"]["runs"], 1)
        self.assertEqual(mine["queued"], 1)
        self.assertEqual(mine["waiting_on_quota"], 1)
        self.assertGreater(mine["usage"]["gpu_hours"], 0)
        self.assertIn(f"{A}: GPUs 1 of 1, runs 1 of 10", self.cli_as(A, "status").stdout)
        # Root sees everyone.
        every = json.loads(self.d.cli("status", "--json").stdout)["quotas"]["users"]
        self.assertTrue({A, B} <= {u["user"] for u in every}, every)
        # The blocking run ends: the waiting one starts.
        self.cli_as(A, "stop", first)
        done = self.d.wait_state(second, "succeeded")
        self.assertNotIn("waiting", done)

    def test_a_request_beyond_the_limit_is_refused_at_submission(self):
        r = self.run_as(A, "--gpus", "2", "--", "true", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("gpus: this run asks for 2 GPUs, but the quota of " + A +
                      " allows 1 at once (config.yaml quotas." + A + ".gpus)", r.stderr)
        zh = self.d.cli("run", "--workdir", "/tmp", "--gpus", "2", "--", "true", user=A,
                        env=self.d.env(HOME="/tmp", LATHE_LANG="zh"), check=False)
        self.assertIn("配额只允许", zh.stderr)
        self.assertEqual(self.d.runs(all_runs=True), [])


class FairShare(QuotaTest):
    gpus = "sim:1x24GB"

    def test_the_lighter_user_starts_before_the_heavier_users_earlier_runs(self):
        first = self.run_as(A, "--gpus", "1", "--", "sleep", "600")
        self.d.wait_state(first, "running")
        queued_a = [self.run_as(A, "--gpus", "1", "--", "true") for _ in range(3)]
        b = self.run_as(B, "--gpus", "1", "--", "true")
        self.cli_as(A, "stop", first)
        for run in queued_a + [b]:
            self.d.wait_state(run, "succeeded")
        started = {run: self.d.inspect(run)["started_at_ms"] for run in queued_a + [b]}
        self.assertLess(started[b], min(started[a] for a in queued_a), started)
        # A's usage is what orders them: it is in the status, B's is 0 until it ran.
        users = {u["user"]: u for u in
                 json.loads(self.d.cli("status", "--json").stdout)["quotas"]["users"]}
        self.assertGreater(users[A]["usage"]["fair_share_gpu_hours"],
                           users[B]["usage"]["fair_share_gpu_hours"])
        self.assertEqual(json.loads(self.d.cli("status", "--json").stdout)["quotas"]
                         ["fair_share"]["half_life_ms"], 7 * 24 * 3600 * 1000)


class DiskShare(QuotaTest):
    gpus = "none"
    config = f"quotas:\n  {A}: {{disk: 2MiB}}\n"

    def disk_of(self, user, who):
        d = json.loads(self.cli_as(user, "status", "--json").stdout)["disk"]
        return {u["user"]: u["bytes"] for u in d["users"]}.get(who), d

    def test_runs_files_count_against_their_user_and_a_full_share_refuses_new_runs(self):
        # A's run writes 3 MiB of log; B's writes a little. Each is counted as its owner's.
        a = self.run_as(A, "--", "sh", "-c", "head -c 3145728 /dev/zero | tr '\\0' x")
        b = self.run_as(B, "--", "echo", "hello")
        for run in (a, b):
            self.d.wait_state(run, "succeeded")
        self.d.wait_for(lambda: (self.disk_of(A, A)[0] or 0) >= 3 << 20, "A's share counted")
        used, d = self.disk_of(A, A)
        self.assertEqual(set(u["user"] for u in d["users"]), {A})  # B's share is not A's business
        self.assertGreater(d["size_bytes"], 0)
        self.assertGreater(d["available_bytes"], 0)
        every = {u["user"]: u["bytes"] for u in
                 json.loads(self.d.cli("status", "--json").stdout)["disk"]["users"]}
        self.assertGreater(every[B], 0)
        self.assertLess(every[B], 1 << 20)
        text = self.cli_as(A, "status").stdout
        self.assertIn(A + ": runs' files 3", text)
        self.assertIn("disk 3", text)  # the quota line: used of 2 MiB
        # Over the share: a new run of A's is refused, naming the quota; B's is not.
        r = self.run_as(A, "--", "true", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("the runs of " + A + " take 3", r.stderr)
        self.assertIn("(config.yaml quotas." + A + ".disk)", r.stderr)
        zh = self.cli_as(A, "run", "--workdir", "/tmp", "--", "true", check=False, lang="zh")
        self.assertIn("已占用守护进程磁盘", zh.stderr)
        self.d.wait_state(self.run_as(B, "--", "true"), "succeeded")
        # Removing the finished run frees the share: A submits again.
        self.cli_as(A, "rm", a)
        self.d.wait_for(lambda: (self.disk_of(A, A)[0] or 0) < 1 << 20, "A's share freed")
        self.d.wait_state(self.run_as(A, "--", "true"), "succeeded")


class ProjectQuotas(QuotaTest):
    config = "quotas:\n  projects:\n    vision: {gpus: 1, runs: 3}\n"

    def write(self, text):
        with open(os.path.join(self.d.home, "config.yaml"), "w") as f:
            f.write(text)

    def show(self, user):
        return json.loads(self.cli_as(user, "project", "show", "vision", "--json").stdout)

    def test_a_projects_limit_holds_its_members_runs_together_and_reload_changes_it(self):
        self.cli_as(A, "project", "create", "vision", "--member", B + ":use")
        first = self.run_as(A, "--project", "vision", "--gpus", "1", "--", "sleep", "600")
        self.d.wait_state(first, "running")
        # B's own quota has room, the project's does not: B's run of the project waits.
        second = self.run_as(B, "--project", "vision", "--gpus", "1", "--", "true")
        why = "project vision holds 1 of its 1 GPUs; this run needs 1"
        r = self.d.wait_for(lambda: (lambda x: x if x.get("waiting") == why else None)(
            self.inspect_as(B, second)), "the project's quota reason")
        self.assertEqual(r["state"], "queued")
        self.assertEqual(r["waiting_on"], "quota")
        zh = self.cli_as(B, "inspect", second, lang="zh").stdout
        self.assertIn("项目 vision 已占用其 1 块 GPU 配额中的 1 块", zh)
        self.assertIn("queued (quota)",
                      next(l for l in self.cli_as(B, "ps").stdout.splitlines()
                           if l.startswith(second)))
        # A run of no project is B's alone: it starts on the free GPUs.
        self.d.wait_state(self.run_as(B, "--gpus", "1", "--", "true"), "succeeded")
        self.assertEqual(self.d.inspect(second)["state"], "queued")
        # More than the project allows at once: refused at submission, in both languages.
        big = self.run_as(B, "--project", "vision", "--gpus", "2", "--", "true", check=False)
        self.assertEqual(big.returncode, 2, big.stderr)
        self.assertIn("gpus: this run asks for 2 GPUs, but the quota of project vision allows 1 "
                      "at once (config.yaml quotas.projects.vision.gpus)", big.stderr)
        big_zh = self.cli_as(B, "run", "--workdir", "/tmp", "--project", "vision", "--gpus", "2",
                             "--", "true", check=False, lang="zh")
        self.assertIn("但项目 vision 的配额只允许", big_zh.stderr)
        # The limits next to the usage: project show, GET /projects/vision, status.
        shown = self.show(B)
        self.assertEqual(shown["limits"]["gpus"], 1)
        self.assertEqual(shown["limits"]["runs"], 3)
        self.assertIsNone(shown["limits"]["gpu_hours"])
        self.assertEqual(shown["usage"]["gpus_held"], 1)
        self.assertEqual(shown["usage"]["runs_active"], 1)
        self.assertIn("limits: GPUs 1 of 1, runs 1 of 3, notebooks 0 (no limit)",
                      self.cli_as(B, "project", "show", "vision").stdout)
        self.assertIn("限额：GPU 1/1",
                      self.cli_as(B, "project", "show", "vision", lang="zh").stdout)
        status = json.loads(self.cli_as(B, "status", "--json").stdout)
        mine = next(p for p in status["projects"] if p["name"] == "vision")
        self.assertEqual(mine["limits"]["gpus"], 1)
        self.assertEqual(mine["usage"]["gpus_held"], 1)
        self.assertIn("limits: GPUs 1 of 1", self.cli_as(B, "status").stdout)
        # A bad file is refused naming the project's key; the limits in force stay.
        self.write("quotas:\n  projects:\n    vision: {gpus: two}\n")
        bad = self.d.cli("reload", check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("quotas.projects.vision.gpus", bad.stderr)
        self.assertEqual(self.show(B)["limits"]["gpus"], 1)
        self.assertEqual(self.d.inspect(second)["state"], "queued")
        # Raised by reload: the waiting run starts, no restart.
        self.write("quotas:\n  projects:\n    vision: {gpus: 2, gpu_hours: 50, period: 1d}\n")
        self.d.cli("reload")
        self.d.wait_state(second, "succeeded")
        shown = self.show(B)
        self.assertEqual(shown["limits"]["gpus"], 2)
        self.assertIsNone(shown["limits"]["runs"])
        self.assertEqual(shown["limits"]["gpu_hours"], 50)
        self.assertEqual(shown["limits"]["period_ms"], 24 * 3600 * 1000)
        self.assertGreater(shown["usage"]["period_gpu_hours"], 0)
        self.assertIn("GPU-hours 0.0 of 50 per 1d",
                      self.cli_as(A, "project", "show", "vision").stdout)
        self.cli_as(A, "stop", first)

    def test_a_deployment_whose_replica_the_project_holds_says_why(self):
        self.cli_as(A, "project", "create", "vision", "--member", B + ":use")
        first = self.run_as(A, "--project", "vision", "--gpus", "1", "--", "sleep", "600")
        self.d.wait_state(first, "running")
        spec = os.path.join(self.d.home, "web.yaml")
        with open(spec, "w") as f:
            f.write("name: web\nproject: vision\ngpus: 1\nworkdir: /tmp\nport: 8000\n"
                    "command: [sleep, '600']\n")
        os.chmod(spec, 0o644)
        self.cli_as(B, "deploy", "create", "-f", spec)
        why = "project vision holds 1 of its 1 GPUs; this run needs 1"

        def held():
            d = json.loads(self.cli_as(B, "deploy", "show", "web", "--json").stdout)
            return d if d.get("reason_id") == "deploy.health.queued" else None
        d = self.d.wait_for(held, "the deployment's reason naming the project's quota")
        self.assertEqual(d["health"], "progressing")
        self.assertIn(why, d["reason"])
        self.assertIn("项目 vision 已占用其 1 块 GPU 配额中的 1 块", d["reason_text"]["zh"])
        self.assertIn("项目 vision 已占用其 1 块 GPU 配额中的 1 块",
                      self.cli_as(B, "deploy", "show", "web", lang="zh").stdout)
        self.cli_as(B, "deploy", "rm", "web")
        self.cli_as(A, "stop", first)


class BadConfig(unittest.TestCase):
    def test_the_daemon_refuses_to_start_naming_the_field(self):
        d = Daemon(gpus="none")
        self.addCleanup(d.cleanup)
        with open(os.path.join(d.home, "config.yaml"), "w") as f:
            f.write("quotas:\n  default: {gpus: lots}\n")
        for lang, text in (("en", "'quotas.default.gpus' must be a whole number"),
                           ("zh", "“quotas.default.gpus” 必须是 0 或更大的整数")):
            r = subprocess.run([LATHE, "daemon", "--home", d.home, "--gpus", "none", "--port", "0"],
                               capture_output=True, text=True, timeout=30,
                               env=d.env(LATHE_LANG=lang))
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(text, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
