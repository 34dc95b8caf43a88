"""scripts/check_os_seam.py, which .ci/run calls: the tree passes it, and a raw OS call planted
outside src/lathe/os fails it, naming the file, the line and the call; a grant larger than
what a file needs is reported. No daemon needed."""
import os
import shutil
import subprocess
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "check_os_seam.py")


def check(root=None):
    env = dict(os.environ)
    if root:
        env["LATHE_SEAM_ROOT"] = root
    return subprocess.run(["/usr/bin/python3", SCRIPT], capture_output=True, text=True, env=env,
                          timeout=60)


class OsSeam(unittest.TestCase):
    def test_the_tree_passes(self):
        r = check()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("all allowed", r.stdout)

    def test_a_planted_call_fails_and_an_unused_grant_is_reported(self):
        root = tempfile.mkdtemp(prefix="lathe-seam-")
        self.addCleanup(shutil.rmtree, root, True)
        for d in ("scripts", "src/lathe/os", "src/lathe/daemon", "src/cmd"):
            os.makedirs(os.path.join(root, d))
        with open(os.path.join(root, "src/lathe/os/files.cc"), "w") as f:
            f.write("int F() { return ::chmod(\"x\", 0); }\n")  # os/ may
        with open(os.path.join(root, "src/lathe/daemon/home_test.cc"), "w") as f:
            f.write("int T() { return ::chmod(\"x\", 0); }\n")  # tests are not checked
        with open(os.path.join(root, "src/lathe/daemon/home.cc"), "w") as f:
            f.write("// ::chmod( in a comment is not a call\nint H() {\n  return ::chmod(\"x\", 0);\n}\n")
        allowed = os.path.join(root, "scripts", "os_seam_allowed.txt")
        with open(allowed, "w") as f:
            f.write("# none\n")
        r = check(root)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("src/lathe/daemon/home.cc:3 ::chmod(", r.stdout)
        self.assertNotIn("files.cc", r.stdout)
        self.assertNotIn("home_test.cc", r.stdout)
        with open(allowed, "w") as f:
            f.write("src/lathe/daemon/home.cc 1 to move behind os/\n"
                    "src/cmd/gone.cc 2 to move behind os/\n")
        r = check(root)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("src/cmd/gone.cc is allowed 2 raw OS call(s) and makes 0", r.stdout)


if __name__ == "__main__":
    unittest.main()
