"""scripts/check_modules.py, which .ci/run calls: the tree passes it; a table that differs from
CMake, a module missing from the table and an include of a module a module may not use each fail
it, named. No daemon needed."""
import os
import shutil
import subprocess
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "check_modules.py")

TABLE = """# Contributing

| module | holds | may use |
|---|---|---|
| `common/` | helpers | — |
| `net/` | HTTP | common |
| `gateway/` | the front | common, net |
"""


def check(root=None, *args):
    env = dict(os.environ)
    if root:
        env["LATHE_MODULES_ROOT"] = root
    return subprocess.run(["/usr/bin/python3", SCRIPT, *args], capture_output=True, text=True,
                          env=env, timeout=60)


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


class ModulesCheck(unittest.TestCase):
    def test_the_tree_passes(self):
        r = check()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("the table and CMake agree", r.stdout)

    def test_a_mismatch_a_missing_row_and_a_forbidden_include_fail(self):
        root = tempfile.mkdtemp(prefix="lathe-modules-")
        self.addCleanup(shutil.rmtree, root, True)
        write(root, "CONTRIBUTING.md", TABLE)
        write(root, "src/lathe/common/CMakeLists.txt", "lathe_module(common)\n")
        write(root, "src/lathe/net/CMakeLists.txt", "lathe_module(net DEPS common LIBS Boost::headers)\n")
        write(root, "src/lathe/gateway/CMakeLists.txt", "lathe_module(gateway DEPS common net)\n")
        write(root, "src/lathe/gateway/front.cc", '#include "lathe/net/http.h"\n')
        r = check(root)
        self.assertEqual(r.returncode, 0, r.stdout)
        # The data plane reaching into the daemon; a module the table does not name.
        write(root, "src/lathe/daemon/CMakeLists.txt", "lathe_module(daemon DEPS common)\n")
        write(root, "src/lathe/gateway/front_test.cc", '#include "lathe/daemon/daemon.h"\n')
        write(root, "src/lathe/net/CMakeLists.txt", "lathe_module(net DEPS common gateway)\n")
        r = check(root)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("no row for `daemon/`", r.stdout)
        self.assertIn("src/lathe/gateway/front_test.cc includes lathe/daemon/", r.stdout)
        self.assertIn("`net/` may use common in CONTRIBUTING.md but common, gateway", r.stdout)
        self.assertIn("`net/` depends on itself", r.stdout)
        # --fix writes the CMake side into the table (the cycle and the include stay).
        r = check(root, "--fix")
        with open(os.path.join(root, "CONTRIBUTING.md")) as f:
            table = f.read()
        self.assertIn("| `net/` | HTTP | common, gateway |", table)
        self.assertIn("| `daemon/` | (what it holds) | common |", table)


if __name__ == "__main__":
    unittest.main()
