"""`lathe image build` (issue: environments), against a root daemon, as
unprivileged users: every step of a Containerfile runs as the user (rootless
podman in the user's own build store), FROM names the user's own images, the
context is read as the user, the log is streamed and kept, and the built image
runs like any other.

Real podman and runc; the base is busybox (image_fixture.py).
"""
import io
import json
import os
import subprocess
import tarfile
import threading
import unittest

from harness import DaemonTest, second_user, shared_scratch
from image_fixture import busybox_tar, have_podman, reset_store

USER = "lathe-it-bld"
OTHER = "lathe-it-bld2"


@unittest.skipUnless(have_podman(), "podman, runc and busybox-static (scripts/deps.sh)")
class ImageBuild(DaemonTest):

    def setUp(self):
        self.pw = second_user(self, USER)
        self.pw2 = second_user(self, OTHER)
        super().setUp()
        self.scratch = shared_scratch(self, "lathe-bld-")
        self.tar = busybox_tar(self.scratch)
        self.env = self.d.env(HOME="/tmp")

    def tearDown(self):
        reset_store(self.d.home)  # before the daemon's home goes
        super().tearDown()

    def as_user(self, *args, check=True, user=USER):
        return self.d.cli(*args, user=user, env=self.env, check=check)

    def context(self, containerfile, files=None, owner=None):
        """A build context owned by `owner` (default USER), 0700."""
        pw = owner or self.pw
        ctx = os.path.join(self.scratch, "ctx-%d-%d" % (pw.pw_uid, len(os.listdir(self.scratch))))
        os.mkdir(ctx, 0o700)
        with open(os.path.join(ctx, "Containerfile"), "w") as f:
            f.write(containerfile)
        for name, text in (files or {}).items():
            with open(os.path.join(ctx, name), "w") as f:
                f.write(text)
        for root, dirs, names in os.walk(ctx):
            for n in [root] + [os.path.join(root, x) for x in names]:
                os.chown(n, pw.pw_uid, pw.pw_gid)
        return ctx

    def test_build_runs_as_the_user_and_the_image_runs(self):
        # A base with a file of another owner (as /etc/gshadow is in Debian): the user's
        # one-id build store takes it as its own rather than fail to load the base.
        with tarfile.open(self.tar, "a") as t:
            info = tarfile.TarInfo("./etc/other-owner")
            info.uid = info.gid = 42
            info.size = 6
            t.addfile(info, io.BytesIO(b"theirs"))
        self.as_user("image", "import", "base", self.tar)
        ctx = self.context(
            "# a comment\nFROM base\n"
            "RUN id -u > /build-uid && cat /proc/self/uid_map > /build-map\n"
            "COPY hello.txt /hello.txt\n",
            {"hello.txt": "hello from the context\n"})
        r = self.as_user("image", "build", "app:1", ctx, "--json")
        built = json.loads(r.stdout)
        self.assertEqual(built["name"], "app:1")
        self.assertEqual(len(built["id"]), 64)
        self.assertTrue(built["source"].startswith("build "), built)
        # The log came as it went, on stderr.
        self.assertIn("STEP 2/3: RUN", r.stderr)
        self.assertIn("COMMIT", r.stderr)
        # Kept in the user's build directory, theirs.
        log = os.path.join(self.d.home, "image-builds", str(self.pw.pw_uid), "logs",
                           "app_1.log")
        self.assertEqual(os.stat(log).st_uid, self.pw.pw_uid)
        with open(log) as f:
            self.assertIn("STEP 3/3: COPY", f.read())
        # The build's root was the user on the host: a one-id user namespace
        # mapping 0 to the user's uid, nothing else.
        work = os.path.join(self.scratch, "w")
        os.mkdir(work)
        os.chown(work, self.pw.pw_uid, self.pw.pw_gid)
        run = self.as_user("run", "--image", "app:1", "--workdir", work, "--", "sh", "-c",
                           "cat /hello.txt /build-uid /build-map").stdout.strip()
        st = self.d.wait_state(run, ["succeeded", "failed"])
        out = self.d.logs(run)
        self.assertEqual(st["state"], "succeeded", out)
        self.assertIn("hello from the context", out)
        fields = out.split("\n")[2].split()
        self.assertEqual(fields, ["0", str(self.pw.pw_uid), "1"], out)
        self.assertEqual(st["spec"]["image_id"], built["id"])
        # Rootless podman's pause process does not outlive the build.
        self.d.wait_for(lambda: subprocess.run(["pgrep", "-u", USER], capture_output=True)
                        .returncode == 1, "no process of the user left")
        # A rebuild uses the user's layer cache.
        again = self.as_user("image", "build", "app:1", ctx)
        self.assertIn("Using cache", again.stderr)
        mine = {i["name"] for i in json.loads(self.as_user("image", "ls", "--json").stdout)}
        self.assertEqual(mine, {"base:latest", "app:1"})
        # `image prune` empties a build cache not used for that long, with its user's podman.
        layers = os.path.join(self.d.home, "image-builds", str(self.pw.pw_uid), "graph", "vfs",
                              "dir")
        self.assertTrue(os.listdir(layers))
        r = self.as_user("image", "prune", "--unused-for", "0s")
        self.assertIn("emptied 1 build cache", r.stdout)
        self.assertFalse(os.path.isdir(layers) and os.listdir(layers))
        self.d.wait_for(lambda: subprocess.run(["pgrep", "-u", USER], capture_output=True)
                        .returncode == 1, "no process of the user left after the prune")

    def test_from_names_only_the_users_images(self):
        self.as_user("image", "import", "base", self.tar)
        ctx = self.context("FROM base\nRUN true\n", owner=self.pw2)
        r = self.as_user("image", "build", "mine", ctx, user=OTHER, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no image 'base'", r.stderr)
        self.assertEqual(json.loads(self.as_user("image", "ls", "--json", user=OTHER).stdout), [])

    def test_the_context_is_read_as_the_user(self):
        self.as_user("image", "import", "base", self.tar)
        # Another user's private context: the Containerfile cannot be read.
        theirs = self.context("FROM base\n", owner=self.pw2)
        r = self.as_user("image", "build", "x", theirs, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Permission denied", r.stderr)
        # A file in the user's context they cannot read (root's, 0600): the
        # build's COPY fails, as it would for them.
        ctx = self.context("FROM base\nCOPY secret /secret\n")
        secret = os.path.join(ctx, "secret")
        with open(secret, "w") as f:
            f.write("root's secret\n")
        os.chmod(secret, 0o600)
        r = self.as_user("image", "build", "y", ctx, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("the build of y failed", r.stderr)
        self.assertNotIn("root's secret", r.stderr)
        names = {i["name"] for i in json.loads(self.as_user("image", "ls", "--json").stdout)}
        self.assertEqual(names, {"base:latest"})

    def test_a_containerfile_swapped_for_a_symlink_in_a_loop_is_read_as_the_user(self):
        self.as_user("image", "import", "base", self.tar)
        # Root's Containerfile, 0600: were the daemon to read it (or podman as root), its
        # RUN would print the marker into the build's output.
        secret = os.path.join(self.scratch, "root-containerfile")
        with open(secret, "w") as f:
            f.write("FROM base\nRUN echo ROOT-ONLY-MARKER\n")
        os.chmod(secret, 0o600)
        ctx = self.context("FROM base\nRUN echo users-own\n")
        mine = os.path.join(ctx, "Containerfile")
        real = os.path.join(ctx, "real")
        os.rename(mine, real)
        link = os.path.join(ctx, "link")
        os.symlink(secret, link)
        os.lchown(link, self.pw.pw_uid, self.pw.pw_gid)
        stop = threading.Event()

        def swap():  # Containerfile is the user's file, then a link to root's, again and again
            while not stop.is_set():
                for src in (real, link):
                    tmp = mine + ".tmp"
                    try:
                        os.link(src, tmp, follow_symlinks=False)
                        os.rename(tmp, mine)
                    except OSError:
                        pass
        t = threading.Thread(target=swap)
        t.start()
        try:
            for i in range(4):
                r = self.as_user("image", "build", "swapped:%d" % i, ctx, check=False)
                self.assertNotIn("ROOT-ONLY-MARKER", r.stdout + r.stderr)
        finally:
            stop.set()
            t.join()
        names = {i["name"] for i in json.loads(self.as_user("image", "ls", "--json").stdout)}
        self.assertTrue(names <= {"base:latest"} | {"swapped:%d" % i for i in range(4)}, names)

    def test_a_failing_step_keeps_its_log(self):
        self.as_user("image", "import", "base", self.tar)
        ctx = self.context("FROM base\nRUN echo about to fail && exit 3\n")
        r = self.as_user("image", "build", "bad", ctx, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("about to fail", r.stderr)
        self.assertIn("the build of bad failed", r.stderr)
        log = os.path.join(self.d.home, "image-builds", str(self.pw.pw_uid), "logs",
                           "bad_latest.log")
        self.assertIn(log, r.stderr)
        with open(log) as f:
            self.assertIn("about to fail", f.read())
        # Bad input: no Containerfile, a FROM without an image.
        empty = self.context("")
        os.remove(os.path.join(empty, "Containerfile"))
        r = self.as_user("image", "build", "e", empty, check=False)
        self.assertIn("has no Containerfile or Dockerfile", r.stderr)
        r = self.as_user("image", "build", "e", self.context("RUN x\nFROM\n"), check=False)
        self.assertIn("line 2", r.stderr)
        r = self.as_user("image", "build", "BAD NAME", ctx, check=False)
        self.assertNotEqual(r.returncode, 0)


if __name__ == "__main__":
    unittest.main()
