"""A command deployment whose replicas run in an image, as an unprivileged user against a
root daemon: busybox's httpd in the user's busybox image answers through the front at
/d/NAME/ like any command deployment, as the user, inside the image; the image's id is
pinned on the deployment and its replicas; a new image is a new revision; removing the
deployment leaves no container and no relay. A model deployment cannot name an image, and
another user's image name is not the owner's.
"""
import http.client
import json
import os
import subprocess
import unittest

from harness import DaemonTest, second_user, shared_scratch
from image_fixture import busybox_tar, container_names, have_podman, reset_store

USER = "lathe-it-imgdep"
OTHER = "lathe-it-imgdep-b"
DECLARED = 18458
# The page says who serves it and from where: the busybox image has no
# /etc/debian_version, the host has.
SERVE = ("mkdir -p /tmp/www && echo \"uid=$(id -u) tag=$0 where=$(test -e /etc/debian_version"
         " && echo host || echo image)\" > /tmp/www/index.html && exec httpd -f -p $PORT -h /tmp/www")


@unittest.skipUnless(have_podman(), "needs podman, runc and busybox-static")
class CommandDeploymentInImage(DaemonTest):
    gpus = "sim:1x24GB"

    def setUp(self):
        self.pw = second_user(self, USER)
        second_user(self, OTHER)
        super().setUp()
        self.addCleanup(reset_store, self.d.home)
        self.scratch = shared_scratch(self, "lathe-imgdep-")
        self.env = self.d.env(HOME="/tmp")
        tar = busybox_tar(self.scratch)
        os.chmod(tar, 0o644)
        self.as_user("image", "import", "bb", tar)
        tar2 = busybox_tar(self.scratch, files={"/etc/motd": "two"}, name="bb2.tar")
        os.chmod(tar2, 0o644)
        self.as_user("image", "import", "bb2", tar2)

    def as_user(self, *args, user=USER, check=True):
        return self.d.cli(*args, user=user, env=self.env, check=check, timeout=180)

    def show(self, name):
        return json.loads(self.as_user("deploy", "show", name, "--json").stdout)

    def get(self, name):
        port = int(self.show(name)["url"].split(":")[2].split("/")[0])
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", f"/d/{name}/")
        r = c.getresponse()
        out = r.status, r.read().decode()
        c.close()
        return out

    def test_replicas_run_in_the_image_as_the_user_behind_the_front(self):
        self.as_user("deploy", "create", "web", "--image", "bb", "--port", str(DECLARED),
                     "--public", "--wait", "--", "sh", "-c", SERVE, "v1")
        s = self.show("web")
        self.assertEqual(s["version"], "rev-1")
        status, body = self.get("web")
        self.assertEqual(status, 200, body)
        self.assertEqual(body.split(), [f"uid={self.pw.pw_uid}", "tag=v1", "where=image"])
        run = s["replicas"]["list"][0]["run"]
        spec = self.d.inspect(run)["spec"]
        self.assertEqual(spec["image"], "bb")
        self.assertEqual(len(spec["image_id"]), 64)
        self.assertIn(f"lathe-{run}-1", container_names(self.d.home))
        # Another image: a new revision, rolled out; its replica runs the new image's id.
        self.as_user("deploy", "update", "web", "--image", "bb2", "--", "sh", "-c",
                     SERVE, "v2")
        self.d.wait_for(lambda: self.get("web")[1].split()[1:2] == ["tag=v2"] or None,
                        "revision 2 answers", 120)
        self.assertEqual(self.show("web")["version"], "rev-2")
        live = [x["run"] for x in self.show("web")["replicas"]["list"]
                if x["state"] == "running" and x["version"] == "rev-2"]
        self.assertNotEqual(self.d.inspect(live[0])["spec"]["image_id"], spec["image_id"])
        # Removed: no container and no relay stays.
        self.as_user("deploy", "rm", "web")
        self.d.wait_for(lambda: container_names(self.d.home) == [] or None, "no container", 120)
        self.d.wait_for(lambda: subprocess.run(["pgrep", "-u", USER, "-f", "__relay"],
                                               capture_output=True).returncode == 1 or None,
                        "no relay", 60)

    def test_an_image_only_for_a_command_and_only_the_owners(self):
        r = self.as_user("deploy", "create", "m", "--model", "digits/1", "--image", "bb",
                         check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("image", r.stderr)
        r = self.as_user("deploy", "create", "web", "--image", "bb", "--port", str(DECLARED),
                         "--", "sh", "-c", SERVE, user=OTHER, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no image 'bb'", r.stderr)


if __name__ == "__main__":
    unittest.main()
