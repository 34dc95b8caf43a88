"""`make install` end to end: `cmake --install` of the test's own build tree
(what `make install` runs) into a DESTDIR with PREFIX /usr/local, then the
installed binary: `lathe version`, the shared libraries it still needs, the
systemd unit naming it, and `lathe serve` of a `process` model answering a
request from the backends installed beside it (also through a symlink). A
binary hard-linked away from its backends says where they belong and finds
them through LATHE_BACKEND_DIR.
"""
import glob
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.request

from harness import LATHE

BUILD_DIR = os.path.dirname(os.path.realpath(LATHE))
PREFIX = "/usr/local"

HANDLER = r"""
def load(model_dir):
    return {"dir": model_dir}

def predict(batch, model):
    return [{"sum": sum(req.get("x", []))} for req in batch]
"""

# Libraries LATHE_STATIC_DEPS links from their archive when the archive is
# there: the installed binary must then not need the shared one.
STATIC_WHERE_ARCHIVED = {"sqlite3": "libsqlite3", "crypto": "libcrypto", "zstd": "libzstd",
                         "re2": "libre2", "yaml-cpp": "libyaml-cpp", "spdlog": "libspdlog",
                         "fmt": "libfmt", "simdjson": "libsimdjson"}


def has_archive(name):
    return bool(glob.glob(f"/usr/lib/*/lib{name}.a") + glob.glob(f"/usr/lib/lib{name}.a") +
                glob.glob(f"/usr/local/lib/lib{name}.a"))


def static_deps_on():
    with open(os.path.join(BUILD_DIR, "CMakeCache.txt")) as f:
        return "LATHE_STATIC_DEPS:BOOL=ON" in f.read()


def english_env(**extra):
    e = dict(os.environ, LANG="C.UTF-8", **extra)
    for k in ("LATHE_LANG", "LC_ALL", "LC_MESSAGES"):
        e.pop(k, None)
    if "LATHE_BACKEND_DIR" not in extra:
        e.pop("LATHE_BACKEND_DIR", None)
    return e


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


class InstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="lathe-install-integ-")
        cls.dest = os.path.join(cls.tmp, "dest")
        p = subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", PREFIX], capture_output=True,
                           text=True, env=dict(os.environ, DESTDIR=cls.dest), timeout=120)
        if p.returncode != 0:
            raise AssertionError(f"cmake --install failed:\n{p.stdout}\n{p.stderr}")
        cls.root = cls.dest + PREFIX
        cls.bin = os.path.join(cls.root, "bin", "lathe")
        cls.repo = os.path.join(cls.tmp, "repo")
        write(f"{cls.repo}/adder/1/handler.py", HANDLER)
        write(f"{cls.repo}/adder/config.yaml", "backend: process\nmax_batch_size: 4\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_layout_and_the_unit_names_the_installed_binary(self):
        self.assertTrue(os.access(self.bin, os.X_OK))
        backends = os.path.join(self.root, "lib", "lathe", "backends")
        for f in ("liblathe_backend_process.so", "liblathe_backend_identity.so", "lathe_handler.py"):
            self.assertTrue(os.path.isfile(os.path.join(backends, f)), f)
        with open(os.path.join(self.root, "lib", "systemd", "system", "lathe.service")) as f:
            unit = f.read()
        self.assertIn(f"ExecStart={PREFIX}/bin/lathe daemon", unit)

    def test_the_installed_binary_is_stripped_and_its_debug_info_kept_beside(self):
        def sections(path):
            out = subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True,
                                 check=True).stdout
            return {line.split("]", 1)[1].split()[0] for line in out.splitlines()
                    if line.strip().startswith("[") and "]" in line and line.split("]", 1)[1].split()}
        built = os.path.join(BUILD_DIR, "lathe")
        self.assertIn(".debug_info", sections(built))
        self.assertNotIn(".debug_info", sections(self.bin))
        self.assertIn(".gnu_debuglink", sections(self.bin))
        self.assertLess(os.path.getsize(self.bin) * 4, os.path.getsize(built))
        debug = os.path.join(self.root, "bin", ".debug", "lathe.debug")
        self.assertIn(".debug_info", sections(debug))

    def test_installed_binary_runs_and_needs_only_the_shared_libraries_without_archives(self):
        p = subprocess.run([self.bin, "version"], capture_output=True, text=True, env=english_env(),
                           timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"^lathe \d+\.\d+\.\d+")
        ldd = subprocess.run(["ldd", self.bin], capture_output=True, text=True, timeout=30).stdout
        self.assertNotIn("not found", ldd)
        if not static_deps_on():
            self.skipTest("configured with LATHE_STATIC_DEPS=OFF")
        needed = [line.split()[0] for line in ldd.splitlines() if line.strip()]
        for archive, soname in STATIC_WHERE_ARCHIVED.items():
            if has_archive(archive):
                self.assertFalse([n for n in needed if n.startswith(soname + ".so")],
                                 f"lib{archive}.a exists but lathe still needs {soname}.so:\n{ldd}")

    def serve(self, exe, env):
        log = open(os.path.join(self.tmp, "serve.log"), "wb")
        proc = subprocess.Popen([exe, "serve", "--port", "0", "--gpus", "none", "--repository", self.repo],
                                stdout=subprocess.PIPE, stderr=log, env=env)
        self.addCleanup(log.close)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(lambda: (proc.kill(), proc.wait()))
        deadline = time.time() + 60
        while time.time() < deadline and proc.poll() is None:
            if not select.select([proc.stdout], [], [], 0.2)[0]:
                continue
            line = proc.stdout.readline()
            if b"http://" in line:  # "lathe serve ready on http://HOST:PORT"
                return int(line.decode().strip().rsplit(":", 1)[1].split()[0])
        with open(os.path.join(self.tmp, "serve.log"), "rb") as f:
            raise AssertionError(f"lathe serve not ready (rc {proc.poll()}):\n{f.read().decode()[-4000:]}")

    def predict(self, port):
        req = urllib.request.Request(f"http://127.0.0.1:{port}/predict?model=adder",
                                     data=json.dumps({"x": [1, 2, 3.5]}).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())

    def test_installed_binary_serves_a_process_model_also_through_a_symlink(self):
        self.assertEqual(self.predict(self.serve(self.bin, english_env())), {"sum": 6.5})
        link_dir = os.path.join(self.tmp, "links")
        os.makedirs(link_dir, exist_ok=True)
        link = os.path.join(link_dir, "lathe")
        if not os.path.lexists(link):
            os.symlink(self.bin, link)
        self.assertEqual(self.predict(self.serve(link, english_env())), {"sum": 6.5})

    def test_a_binary_away_from_its_backends_says_where_they_belong(self):
        solo_dir = os.path.join(self.tmp, "solo")
        os.makedirs(solo_dir, exist_ok=True)
        solo = os.path.join(solo_dir, "lathe")
        if not os.path.exists(solo):
            try:
                os.link(self.bin, solo)  # a copy without copying 100+ MB: /proc/self/exe is this path
            except OSError:
                shutil.copy2(self.bin, solo)
        p = subprocess.run([solo, "serve", "--port", "0", "--gpus", "none", "--repository", self.repo],
                           capture_output=True, text=True, env=english_env(), timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("'process' is not installed, and no backend is", p.stderr)
        self.assertIn(f"{solo_dir}/backends", p.stderr)
        self.assertIn("lib/lathe/backends", p.stderr)
        self.assertIn("LATHE_BACKEND_DIR", p.stderr)
        env = english_env(LATHE_BACKEND_DIR=os.path.join(self.root, "lib", "lathe", "backends"))
        self.assertEqual(self.predict(self.serve(solo, env)), {"sum": 6.5})


if __name__ == "__main__":
    unittest.main(verbosity=2)
