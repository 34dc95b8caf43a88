"""`lathe image pull` from a real registry on loopback (docker-registry with
htpasswd credentials), as unprivileged users against a root daemon: credentials
from the user's secrets, clear errors, one copy of the layers for two users, and
a run pinned to the image id it was submitted with while its tag moves on.
"""
import json
import os
import subprocess
import unittest

from harness import LATHE, DaemonTest, free_port, second_user, shared_scratch
from image_fixture import Registry, busybox_tar, have_podman, reset_store

USER = "lathe-it-img"
OTHER = "lathe-it-img2"


def du(path):
    out = subprocess.run(["du", "-sb", path], check=True, capture_output=True, text=True).stdout
    return int(out.split()[0])


@unittest.skipUnless(have_podman() and os.path.exists("/usr/bin/docker-registry"),
                     "podman, runc, busybox-static, docker-registry (scripts/deps.sh)")
class ImagePull(DaemonTest):
    gpus = "none"

    def setUp(self):
        self.pw = second_user(self, USER)
        self.pw2 = second_user(self, OTHER)
        super().setUp()
        self.scratch = shared_scratch(self, "lathe-pull-")
        self.reg = Registry(self.scratch, free_port())
        self.v1 = busybox_tar(self.scratch, {"/version": "1\n"}, "v1.tar")
        self.id1 = self.reg.push(self.v1, "team/bb:1")
        self.env = self.d.env(HOME="/tmp")
        self.ref = self.reg.host + "/team/bb:1"
        for user in (USER, OTHER):
            subprocess.run(["setpriv", "--reuid", user, "--regid", user, "--init-groups",
                            LATHE, "secret", "set", "reg"],
                           input="u:p\n", text=True, env=self.env, check=True,
                           capture_output=True)

    def tearDown(self):
        reset_store(self.d.home)
        self.reg.stop()
        super().tearDown()

    def as_user(self, *args, user=USER, check=True):
        return self.d.cli(*args, user=user, env=self.env, check=check)

    def pull(self, *extra, user=USER, check=True):
        return self.as_user("image", "pull", self.ref, "--insecure", "--json", *extra, user=user,
                            check=check)

    def test_credentials_and_errors(self):
        r = self.pull(check=False)  # no credentials
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot pull", r.stderr)
        self.assertIn("unauthorized", r.stderr.lower())
        r = self.as_user("image", "pull", self.reg.host + "/team/nope:1", "--insecure",
                         "--secret", "reg", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot pull", r.stderr)
        r = self.as_user("image", "pull", "127.0.0.1:%d/x:1" % free_port(), "--insecure",
                         check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot pull", r.stderr)
        r = self.pull("--secret", "missing", check=False)
        self.assertNotEqual(r.returncode, 0)
        v = json.loads(self.pull("--secret", "reg", "--name", "bb").stdout)
        self.assertEqual(v["name"], "bb:latest")
        self.assertEqual(v["id"], self.id1)
        # The credentials never reach a file that stays, nor the log.
        tmp = os.path.join(self.d.home, "images", "tmp")
        self.assertEqual([f for f in os.listdir(tmp) if f.startswith("auth-")], [])
        self.assertNotIn("u:p", self.d.daemon_log())

    def test_second_user_stores_nothing_new(self):
        r = self.pull("--secret", "reg")
        json.loads(r.stdout)
        # podman's progress came as it went, as plain lines (stderr is not a terminal).
        self.assertIn("Copying blob", r.stderr)
        self.assertNotIn("\x1b[", r.stderr)
        graph = os.path.join(self.d.home, "images", "graph")
        before = du(graph)
        v = json.loads(self.pull("--secret", "reg", user=OTHER).stdout)
        self.assertEqual(v["id"], self.id1)
        grown = du(graph) - before
        self.assertLess(grown, 256 * 1024, "a second pull of the same image stored %d bytes" % grown)
        # Both have their own name for it.
        for user in (USER, OTHER):
            mine = json.loads(self.as_user("image", "ls", "--json", user=user).stdout)
            self.assertEqual([i["id"] for i in mine], [self.id1])

    def test_a_queued_run_pulls_its_image_while_it_waits(self):
        work = os.path.join(self.scratch, "w")
        os.mkdir(work)
        os.chown(work, self.pw.pw_uid, self.pw.pw_gid)
        run = self.as_user("run", "--image", self.ref, "--image-secret", "reg", "--workdir", work,
                           "--", "cat", "/version").stdout.strip()
        r = self.d.wait_state(run, ["succeeded", "failed", "stopped"], timeout=300)
        self.assertEqual(r["state"], "succeeded", r)
        self.assertEqual(self.d.logs(run).strip(), "1")
        self.assertEqual(r["spec"]["image_id"], self.id1)
        self.assertTrue(any("pulled " + self.ref in e.get("message", "") for e in r["events"]),
                        r["events"])
        mine = {i["name"] for i in json.loads(self.as_user("image", "ls", "--json").stdout)}
        self.assertEqual(mine, {self.ref})
        # A reference the registry does not have: the run ends, saying why.
        bad = self.as_user("run", "--image", self.reg.host + "/team/nope:1", "--image-secret",
                           "reg", "--workdir", work, "--", "true").stdout.strip()
        r = self.d.wait_state(bad, ["stopped", "failed", "succeeded"], timeout=300)
        self.assertEqual(r["state"], "stopped", r)
        self.assertIn("cannot pull its image", r["reason"])
        # A bare name is never pulled: it must be one of the user's images.
        r = self.as_user("run", "--image", "nothere", "--workdir", work, "--", "true",
                         check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no image 'nothere'", r.stderr)

    def test_a_run_keeps_its_image_when_the_tag_moves(self):
        self.pull("--secret", "reg", "--name", "bb")
        work = os.path.join(self.scratch, "work")
        os.mkdir(work)
        os.chown(work, self.pw.pw_uid, self.pw.pw_gid)
        marker = os.path.join(work, "go")
        # Attempt 1 waits for the marker and fails; attempt 2 prints the image's version.
        run = self.as_user("run", "--image", "bb", "--workdir", work, "--retry", "1", "--",
                           "sh", "-c", "if [ -f tried ]; then cat /version; exit 0; fi;"
                           " touch tried; while [ ! -f go ]; do sleep 0.1; done; exit 1"
                           ).stdout.strip()
        self.d.wait_for(lambda: os.path.exists(os.path.join(work, "tried")), "attempt 1")
        v2 = busybox_tar(self.scratch, {"/version": "2\n"}, "v2.tar")
        id2 = self.reg.push(v2, "team/bb:1")
        self.assertNotEqual(id2, self.id1)
        moved = json.loads(self.pull("--secret", "reg", "--name", "bb").stdout)
        self.assertEqual(moved["id"], id2)
        open(marker, "w").close()
        r = self.d.wait_state(run, ["succeeded", "failed"])
        self.assertEqual(r["state"], "succeeded", self.d.logs(run))
        self.assertEqual(r["attempt"], 2)
        self.assertEqual(self.d.logs(run).strip(), "1")
        self.assertEqual(r["spec"]["image_id"], self.id1)
        # `lathe run --like` that run: the same bytes, though the name has moved on.
        again = self.as_user("run", "--like", run, "--retry", "0", "--", "cat",
                             "/version").stdout.strip()
        r = self.d.wait_state(again, ["succeeded", "failed"])
        self.assertEqual(self.d.logs(again).strip(), "1", r)
        self.assertEqual(r["spec"]["image_id"], self.id1)
        # A new run of the name gets the new bytes.
        new = self.as_user("run", "--image", "bb", "--workdir", work, "--", "cat",
                           "/version").stdout.strip()
        self.d.wait_state(new, "succeeded")
        self.assertEqual(self.d.logs(new).strip(), "2")


if __name__ == "__main__":
    unittest.main()
