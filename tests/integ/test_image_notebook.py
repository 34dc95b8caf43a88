"""A notebook in an image, as an unprivileged user against a root daemon: the image's own
Jupyter (the Debian image of scripts/test-images.sh has jupyter-notebook) serves it through
the proxy exactly as on the host. A Python cell runs in the container (podman's
/run/.containerenv), as the user, in the directory the notebook was started from (same path),
with the run's GPU and without the notebook's token in its environment; a file it writes
there is the user's. A second user gets 403; the token is on no command line; `lathe stop`
leaves no container. An image without Jupyter ends the notebook with the bilingual reason in
its log, never a notebook left waiting.

The Debian image is skipped where it has not been built (scripts/deps.sh builds it); the
busybox case needs podman only.
"""
import glob
import json
import os
import subprocess
import unittest

import test_notebook
from harness import Daemon, second_user, shared_scratch
from image_fixture import busybox_tar, container_names, have_podman, reset_store

USER_A = "lathe-it-imgnb-a"
USER_B = "lathe-it-imgnb-b"
TARS = glob.glob("/var/cache/lathe-test-images/debian-torch-*.tar")


def image_has_jupyter(tar):
    r = subprocess.run(["tar", "-tf", tar, "./usr/bin/jupyter-notebook"], capture_output=True)
    return r.returncode == 0


@unittest.skipUnless(have_podman(), "needs podman, runc and busybox-static")
class NotebookInImage(unittest.TestCase):
    # The proxy and kernel helpers of the host notebooks' test, unchanged: the point is
    # that a notebook in an image is reached exactly the same way.
    port = test_notebook.Notebook.port
    host = test_notebook.Notebook.host
    sign_in = test_notebook.Notebook.sign_in
    request = test_notebook.Notebook.request
    kernel = test_notebook.Notebook.kernel
    channels = test_notebook.Notebook.channels
    execute = test_notebook.Notebook.execute
    output = test_notebook.Notebook.output

    def setUp(self):
        self.kernel_names = {}
        self.a = second_user(self, USER_A)
        self.b = second_user(self, USER_B)
        self.base = shared_scratch(self, "lathe-it-imgnb-")
        self.d = Daemon(gpus="sim:2x24GB")
        with open(os.path.join(self.d.home, "config.yaml"), "w") as f:
            f.write("notebooks: {poll: 200ms}\n")
        self.d.start()
        self.addCleanup(self.d.cleanup)
        self.addCleanup(reset_store, self.d.home)
        self.work = os.path.join(self.base, "work")
        os.makedirs(self.work)
        os.chown(self.work, self.a.pw_uid, self.a.pw_gid)
        self.env = self.d.env(HOME=self.work)
        self.tok_b = json.loads(self.d.cli("token", "create", "--json", user=USER_B,
                                           env=self.d.env(HOME="/tmp")).stdout)["token"]

    def as_a(self, *args):
        r = test_notebook.subprocess_cli(self.d, list(args), USER_A, self.env, self.work)
        self.assertEqual(r.returncode, 0, r.stderr + self.d.daemon_log())
        return r

    @unittest.skipUnless(TARS and image_has_jupyter(TARS[0]),
                         "the Debian image with jupyter-notebook (scripts/test-images.sh)")
    def test_the_images_jupyter_serves_through_the_proxy_as_the_user(self):
        os.chmod(TARS[0], 0o644)
        self.d.cli("image", "import", "nb", TARS[0], user=USER_A, env=self.env, timeout=900)
        r = self.as_a("notebook", "start", "--wait", "--image", "nb", "--gpus", "1")
        url = r.stdout.strip().splitlines()[-1]
        run = url.split("//", 1)[1].split(".", 1)[0]
        info = self.d.inspect(run)
        self.assertEqual(info["kind"], "notebook")
        self.assertTrue(info["notebook"]["ready"], info["notebook"])
        self.assertEqual(info["spec"]["image"], "nb")
        gpu = info["gpus"][0]
        self.assertIn(f"lathe-{run}-1", container_names(self.d.home))
        self.assertIn("starting the image's jupyter-notebook", self.d.logs(run))
        cookie = self.sign_in(url)
        k = self.kernel(run, cookie)
        ws = self.channels(run, cookie, k)
        out = self.execute(ws, "import os; open('from-cell.txt', 'w').write('x'); print("
                           "os.path.exists('/run/.containerenv'), os.getuid(), os.getcwd(), "
                           "os.environ.get('CUDA_VISIBLE_DEVICES'), 'JUPYTER_TOKEN' in os.environ)")
        ws.close()
        self.assertEqual(out.split(), ["True", str(self.a.pw_uid), self.work, str(gpu), "False"],
                         out)
        st = os.stat(os.path.join(self.work, "from-cell.txt"))
        self.assertEqual((st.st_uid, st.st_gid), (self.a.pw_uid, self.a.pw_gid))
        # Another user: 403 at the notebook's paths.
        for path in ["/", "/api/kernels", f"/api/kernels/{k}"]:
            status, _ = self.request(run, "GET", path, token=self.tok_b)
            self.assertEqual(status, 403, path)
        # The token is on no command line (podman's included).
        token = open(os.path.join(self.d.home, "runs", run, "notebook.token")).read()
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        self.assertNotIn(token.encode(), f.read(), pid)
                except OSError:
                    pass
        self.as_a("notebook", "stop", run)
        self.d.wait_state(run, ["stopped", "succeeded", "failed"], timeout=120)
        self.assertEqual(container_names(self.d.home), [])

    def test_an_image_without_jupyter_ends_the_notebook_saying_why(self):
        tar = busybox_tar(self.base)
        os.chmod(tar, 0o644)
        self.d.cli("image", "import", "bb", tar, user=USER_A, env=self.env)
        r = self.as_a("notebook", "start", "--image", "bb", "--json")
        run = json.loads(r.stdout)["id"]
        end = self.d.wait_state(run, ["failed", "succeeded", "stopped"], timeout=120)
        log = self.d.logs(run)
        self.assertEqual(end["state"], "failed", log)
        self.assertIn("image bb has no Jupyter on its PATH", log)
        self.assertIn("镜像 bb 的 PATH 中没有 Jupyter", log)
        self.assertEqual(container_names(self.d.home), [])
        # Another user's image name is not theirs.
        r = test_notebook.subprocess_cli(self.d, ["notebook", "start", "--image", "bb"], USER_B,
                                         self.d.env(HOME="/tmp"), "/tmp")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no image 'bb'", r.stderr)


if __name__ == "__main__":
    unittest.main()
