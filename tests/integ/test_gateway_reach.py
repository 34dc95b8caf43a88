"""A root daemon whose home the front's user cannot enter (a home in a 0700
directory, as `mktemp -d` makes): the deployment says so at once, naming the
path, instead of starting forever while the front fails on every read."""
import json
import os
import shutil
import tempfile
import unittest

from harness import PY, Daemon


@unittest.skipUnless(os.geteuid() == 0, "the front drops to its own user only under a root daemon")
class GatewayReach(unittest.TestCase):
    def setUp(self):
        self.parent = tempfile.mkdtemp(prefix="lathe-closed-")  # 0700, root's
        self.addCleanup(shutil.rmtree, self.parent, True)
        home = os.path.join(self.parent, "home")
        os.makedirs(home)
        self.d = Daemon(gpus="none", home=home)
        self.d.start()
        self.addCleanup(self.d.cleanup)

    def test_a_front_that_cannot_reach_its_files_is_the_deployments_health(self):
        r = self.d.cli("deploy", "create", "closed", "--port", "8000", "--wait", "--timeout", "120s",
                       "--", PY, "-m", "http.server", "8000", check=False)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("cannot enter", r.stderr)
        self.assertIn(self.d.home, r.stderr)
        # It ended on the reason, not on its timeout.
        self.assertIn("deployment 'closed' failed", r.stderr)
        self.assertNotIn("replicas ready after", r.stderr)
        shown = json.loads(self.d.cli("deploy", "show", "closed", "--json").stdout)
        self.assertEqual(shown["health"], "failed", shown)
        self.assertEqual(shown["reason_id"], "deploy.gateway_cannot_reach", shown)


if __name__ == "__main__":
    unittest.main()
