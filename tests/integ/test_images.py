"""Runs in container images (issue: environments), against a root daemon, as an
unprivileged user: `lathe image import|ls|inspect|rm`, `lathe run --image`.

Real podman and runc; the image is busybox with a set-user-ID probe
(image_fixture.py). The simulated GPUs have no device nodes: a run sees
CUDA_VISIBLE_DEVICES as outside.
"""
import json
import os
import signal
import unittest

from harness import DaemonTest, second_user, shared_scratch
from image_fixture import busybox_tar, container_names, have_podman, reset_store

USER = "lathe-it-img"
OTHER = "lathe-it-img2"


@unittest.skipUnless(have_podman(), "podman, runc and busybox-static (scripts/deps.sh)")
class Images(DaemonTest):
    gpus = "sim:2x24GB"

    def setUp(self):
        self.pw = second_user(self, USER)
        self.pw2 = second_user(self, OTHER)
        super().setUp()
        self.scratch = shared_scratch(self, "lathe-img-")
        self.tar = busybox_tar(self.scratch)
        self.work = os.path.join(self.scratch, "work")
        os.mkdir(self.work)
        os.chown(self.work, self.pw.pw_uid, self.pw.pw_gid)
        self.env = self.d.env(HOME="/tmp")

    def tearDown(self):
        reset_store(self.d.home)  # before the daemon's home goes
        super().tearDown()

    def podman_ps(self):
        return container_names(self.d.home)

    def as_user(self, *args, check=True, user=USER, timeout=120):
        return self.d.cli(*args, user=user, env=self.env, check=check, timeout=timeout)

    def import_bb(self, name="bb"):
        r = self.as_user("image", "import", name, self.tar, "--json")
        return json.loads(r.stdout)

    def run_in_image(self, *cmd, extra=()):
        return self.as_user("run", "--image", "bb", "--workdir", self.work, *extra, "--",
                            *cmd).stdout.strip()

    def test_import_list_inspect_remove_are_each_users_own(self):
        v = self.import_bb()
        self.assertEqual(v["name"], "bb:latest")
        self.assertEqual(len(v["id"]), 64)
        self.assertGreater(v["size_bytes"], 0)
        mine = json.loads(self.as_user("image", "ls", "--json").stdout)
        self.assertEqual([i["name"] for i in mine], ["bb:latest"])
        # Another user has no such name, and cannot run it by name or by id.
        self.assertEqual(json.loads(self.as_user("image", "ls", "--json", user=OTHER).stdout), [])
        r = self.as_user("run", "--image", "bb", "--workdir", "/tmp", "--", "true", user=OTHER,
                         check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no image 'bb'", r.stderr)
        r = self.as_user("run", "--image", "x@sha256:" + v["id"], "--workdir", "/tmp", "--",
                         "true", user=OTHER, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("not one of yours", r.stderr)
        out = self.as_user("image", "inspect", "bb").stdout
        self.assertIn(v["id"], out)
        self.as_user("image", "rm", "bb")
        self.assertEqual(json.loads(self.as_user("image", "ls", "--json").stdout), [])
        r = self.as_user("image", "inspect", "bb", check=False)
        self.assertNotEqual(r.returncode, 0)

    def test_import_reads_the_file_as_the_user(self):
        secret = os.path.join(self.scratch, "root-only.tar")
        with open(self.tar, "rb") as src, open(secret, "wb") as dst:
            dst.write(src.read())
        os.chmod(secret, 0o600)
        r = self.as_user("image", "import", "stolen", secret, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Permission denied", r.stderr)
        self.assertEqual(json.loads(self.as_user("image", "ls", "--json").stdout), [])
        r = self.as_user("image", "import", "junk", "/etc/hostname", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot import", r.stderr)

    def test_job_runs_in_the_image_as_the_user(self):
        img = self.import_bb()
        run = self.run_in_image(
            "sh", "-c", "id -u; id -g; echo cuda=$CUDA_VISIBLE_DEVICES; pwd; touch made;"
            " ls /usr/bin/python3 2>&1; echo LATHE_RUN_ID=$LATHE_RUN_ID",
            extra=("--gpus", "1"))
        r = self.d.wait_state(run, ["succeeded", "failed"])
        log = self.d.logs(run)
        self.assertEqual(r["state"], "succeeded", log)
        lines = log.split("\n")
        self.assertEqual(lines[0], str(self.pw.pw_uid), log)
        self.assertEqual(lines[1], str(self.pw.pw_gid), log)
        self.assertRegex(log, r"cuda=\d")
        self.assertIn(self.work, log)
        self.assertIn("No such file", log)  # the host's python3 is not in the image
        self.assertIn("LATHE_RUN_ID=" + r["id"], log)
        st = os.stat(os.path.join(self.work, "made"))
        self.assertEqual((st.st_uid, st.st_gid), (self.pw.pw_uid, self.pw.pw_gid))
        self.assertEqual(r["spec"]["image_id"], img["id"])
        self.assertEqual(r["spec"]["image"], "bb")
        self.assertNotIn("lathe-" + r["id"] + "-1", self.podman_ps())
        # Used: `image ls` says when.
        mine = json.loads(self.as_user("image", "ls", "--json").stdout)
        self.assertGreater(mine[0]["last_used_at_ms"], 0)

    def test_escalation_through_the_image_fails(self):
        self.import_bb()
        root_file = os.path.join(self.work, "roots")
        with open(root_file, "w") as f:
            f.write("root's\n")
        os.chmod(root_file, 0o644)
        run = self.run_in_image("/bin/escalate", root_file)
        self.d.wait_state(run, ["succeeded", "failed"])
        log = self.d.logs(run)
        uid = self.pw.pw_uid
        self.assertIn(f"uid={uid} euid={uid} setuid0=-1", log)
        self.assertIn("write " + root_file + ": denied", log)
        with open(root_file) as f:
            self.assertEqual(f.read(), "root's\n")
        # Another user's private directory cannot be the run's workdir.
        private = os.path.join(self.scratch, "private")
        os.mkdir(private, 0o700)
        os.chown(private, self.pw2.pw_uid, self.pw2.pw_gid)
        r = self.as_user("run", "--image", "bb", "--workdir", private, "--", "ls", check=False)
        self.assertNotEqual(r.returncode, 0, r.stdout)

    def test_stop_kill_daemon_and_oom(self):
        self.import_bb()
        long = self.run_in_image("sleep", "600")
        r = self.d.wait_state(long, "running")
        self.d.wait_for(lambda: "lathe-%s-1" % r["id"] in self.podman_ps(), "the container")
        # `image ls` and `inspect` say which runs use the image, and its manifest digest.
        mine = json.loads(self.as_user("image", "ls", "--json").stdout)
        self.assertEqual(mine[0]["runs"], [r["id"]])
        self.assertTrue(mine[0]["digest"].startswith("sha256:"), mine)
        self.assertIn(r["id"], self.as_user("image", "inspect", "bb").stdout)
        # The daemon dies and comes back: the run is still held by its monitor.
        short = self.run_in_image("sh", "-c", "sleep 4; echo finished")
        self.d.wait_state(short, "running")
        self.d.kill9()
        self.d.start()
        done = self.d.wait_state(short, ["succeeded", "failed"])
        self.assertEqual(done["state"], "succeeded", self.d.logs(short))
        self.assertIn("finished", self.d.logs(short))
        # lathe stop ends the program in the image, and the container goes.
        self.as_user("stop", long)
        self.d.wait_state(long, "stopped")
        self.d.wait_for(lambda: "lathe-%s-1" % r["id"] not in self.podman_ps(), "removal")
        # The run's memory limit holds in the image, and its kill is an OOM.
        oom = self.run_in_image("dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1",
                                extra=("--memory", "64MB"))
        r = self.d.wait_state(oom, ["succeeded", "failed"])
        self.assertEqual(r["state"], "failed", self.d.logs(oom))
        self.assertTrue(r["oom_killed"], r)

    def test_prune_keeps_what_a_run_holds_and_the_others_images(self):
        self.import_bb("old")
        other_tar = busybox_tar(self.scratch, {"/other": "x\n"}, "other.tar")
        self.as_user("image", "import", "held", other_tar)
        self.as_user("image", "import", "theirs", self.tar, user=OTHER)
        held = self.as_user("run", "--image", "held", "--workdir", self.work, "--", "sleep",
                            "600").stdout.strip()
        self.d.wait_state(held, "running")
        dry = json.loads(self.as_user("image", "prune", "--unused-for", "0s", "--dry-run",
                                      "--json").stdout)
        self.assertEqual([p["name"] for p in dry["removed"]], ["old:latest"])
        self.assertEqual(len(json.loads(self.as_user("image", "ls", "--json").stdout)), 2)
        r = self.as_user("image", "prune", "--unused-for", "0s", "--all-users", check=False)
        self.assertNotEqual(r.returncode, 0)  # another user's names are not theirs to prune
        self.as_user("image", "prune", "--unused-for", "0s")
        self.assertEqual([i["name"] for i in json.loads(self.as_user("image", "ls", "--json").stdout)],
                         ["held:latest"])
        r = self.as_user("image", "prune", "--unused-for", "soon", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("unused_for", r.stderr)
        self.assertEqual(len(json.loads(self.as_user("image", "ls", "--json", user=OTHER).stdout)), 1)
        self.as_user("stop", held)
        self.d.wait_state(held, "stopped")

    def test_a_container_left_by_a_killed_monitor_is_removed_at_recovery(self):
        self.import_bb()
        run = self.run_in_image("sleep", "600")
        r = self.d.wait_state(run, "running")
        name = "lathe-%s-1" % r["id"]
        self.d.wait_for(lambda: name in self.podman_ps(), "the container")
        with open(os.path.join(r["run_dir"], "attempt-1", "monitor.json")) as f:
            mon = json.load(f)
        # The daemon and the run's monitor die; podman's conmon and the program live on.
        self.d.kill9()
        os.kill(mon["monitor_pid"], signal.SIGKILL)
        os.kill(mon["child_pid"], signal.SIGKILL)  # podman run itself
        self.assertIn(name, self.podman_ps())
        self.d.start()
        r = self.d.wait_state(run, ["lost", "failed"])
        self.d.wait_for(lambda: name not in self.podman_ps(), "the leftover container's removal")
        self.assertIn(r["state"], ("lost", "failed"))

    def test_doctor_image_explains_an_image_without_python(self):
        self.import_bb()
        r = self.as_user("doctor", "--image", "bb", "--json", check=False, timeout=300)
        checks = {c["id"]: c for c in json.loads(r.stdout)["checks"]}
        torch = [c for c in checks.values() if c["outcome"].startswith("gpu.torch.")]
        self.assertEqual(len(torch), 1, checks)
        self.assertEqual(torch[0]["outcome"], "gpu.torch.probe_failed", torch)
        self.assertIn("could not start the command", torch[0]["values"]["error"])
        self.assertEqual(torch[0]["values"]["python"], "python3 (image bb)")
        # An image that is not the user's: the daemon's refusal, named.
        r = self.as_user("doctor", "--image", "bb", "--json", check=False, user=OTHER)
        torch = [c for c in json.loads(r.stdout)["checks"] if c["outcome"].startswith("gpu.torch")]
        self.assertIn("no image 'bb'", torch[0]["values"]["error"])
        self.assertEqual(self.d.runs(all_runs=True), [])

    def test_a_size_cap_removes_the_least_recently_used_unpinned_images(self):
        tars = [busybox_tar(self.scratch, {"/etc/which": "image %d\n" % i}, name="t%d.tar" % i)
                for i in range(4)]
        size = os.path.getsize(tars[0])
        self.d.stop()
        with open(os.path.join(self.d.home, "config.yaml"), "w") as f:
            f.write("images:\n  max_size: %d\n" % int(2.5 * size))
        self.d.start()
        self.as_user("image", "import", "a", tars[0])
        pinned = self.as_user("run", "--image", "a", "--workdir", self.work, "--", "sleep",
                              "600").stdout.strip()
        self.d.wait_state(pinned, "running")
        self.as_user("image", "import", "b", tars[1])
        self.as_user("image", "import", "c", tars[2], user=OTHER)
        # Four images of about `size` each under a cap of 2.5: b and c (the least
        # recently used, whoever's) go; a (a running run holds it) and d (just
        # imported) stay.
        self.as_user("image", "import", "d", tars[3])
        mine = {i["name"] for i in json.loads(self.as_user("image", "ls", "--json").stdout)}
        self.assertEqual(mine, {"a:latest", "d:latest"})
        self.assertEqual(json.loads(self.as_user("image", "ls", "--json", user=OTHER).stdout), [])
        out = self.as_user("image", "ls").stdout
        self.assertIn("image store:", out)
        self.as_user("stop", pinned)
        # A bad cap is refused, naming the key.
        self.d.stop()
        with open(os.path.join(self.d.home, "config.yaml"), "w") as f:
            f.write("images:\n  max_size: lots\n")
        r = self.d.cli("daemon", "--home", self.d.home, check=False, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("images.max_size", r.stderr)
        os.remove(os.path.join(self.d.home, "config.yaml"))
        self.d.start()

    def test_bad_input_is_refused_clearly(self):
        self.import_bb()
        r = self.as_user("run", "--image", "nope:1", "--workdir", self.work, "--", "true",
                         check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no image 'nope:1'", r.stderr)
        r = self.as_user("run", "--image", "-x", "--workdir", self.work, "--", "true",
                         check=False)
        self.assertNotEqual(r.returncode, 0)
        run = self.run_in_image("no-such-command")
        r = self.d.wait_state(run, ["failed", "succeeded"])
        self.assertEqual(r["state"], "failed")
        self.assertIn("could not start the command", r["reason"], r)


if __name__ == "__main__":
    unittest.main()
