"""scripts/check_thread_safety.sh, which .ci/run calls (make thread-safety-check): the Batcher's
translation unit passes it, and the same unit with a GUARDED_BY member read without its mutex
fails it, naming the member and the mutex; without clang++ it passes, saying it skipped. Checks
one unit (the whole set is .ci/run's); skipped without clang++. No daemon needed."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "check_thread_safety.sh")
# The build the tests run from (its compile_commands.json has each unit's flags).
BUILD = os.path.dirname(os.environ["LATHE_BIN"]) if os.environ.get("LATHE_BIN") else os.path.join(
    REPO, "build")
UNIT = "src/lathe/serve/batcher.cc"


def check(*args, root=None, build=BUILD, clangxx=None):
    env = dict(os.environ, BUILD_DIR=build, JOBS="1")
    if root:
        env["LATHE_THREAD_SAFETY_ROOT"] = root
    if clangxx:
        env["CLANGXX"] = clangxx
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, env=env,
                          timeout=240)


@unittest.skipIf(shutil.which("clang++") is None, "clang++ is not installed")
@unittest.skipIf(not os.path.exists(os.path.join(BUILD, "compile_commands.json")),
                 "no compile_commands.json: build first")
class ThreadSafetyCheck(unittest.TestCase):
    def test_the_batcher_passes(self):
        r = check(UNIT)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("1 translation units clean", r.stdout)

    def test_a_guarded_member_read_without_its_mutex_fails(self):
        root = tempfile.mkdtemp(prefix="lathe-tsa-")
        self.addCleanup(shutil.rmtree, root, True)
        shutil.copytree(os.path.join(REPO, "src"), os.path.join(root, "src"))
        # The build's flags, pointed at the copy's sources and headers.
        with open(os.path.join(BUILD, "compile_commands.json")) as f:
            text = f.read()
        os.makedirs(os.path.join(root, "build"))
        with open(os.path.join(root, "build", "compile_commands.json"), "w") as f:
            f.write(text.replace(json.dumps(os.path.join(REPO, "src"))[1:-1],
                                 json.dumps(os.path.join(root, "src"))[1:-1]))
        path = os.path.join(root, UNIT)
        with open(path) as f:
            source = f.read()
        locked = "size_t Batcher::delayed_size() const {\n  MutexLock l(&mu_);\n"
        self.assertIn(locked, source)
        with open(path, "w") as f:
            f.write(source.replace(locked, "size_t Batcher::delayed_size() const {\n"))
        r = check(UNIT, root=root, build=os.path.join(root, "build"))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("reading variable 'queues_' requires holding mutex 'mu_'", r.stdout)
        self.assertIn("thread-safety: FAILED", r.stdout)


class WithoutClang(unittest.TestCase):
    def test_it_skips(self):
        r = check(clangxx="/nonexistent/clang++")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("thread-safety: /nonexistent/clang++ not found, skipped", r.stdout)


if __name__ == "__main__":
    unittest.main()
