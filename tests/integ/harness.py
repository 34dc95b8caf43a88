"""Starts a real `lathe daemon` on a temporary LATHE_HOME and drives the CLI.

Used by the integration tests (ctest label `integ`). Every server binds port 0;
no test asserts a wall-clock bound: waits poll with generous limits.
"""
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

LATHE = os.environ.get("LATHE_BIN") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "lathe")
PY = "/usr/bin/python3"


def free_port():
    """A loopback TCP port nothing listens on now (bound, read back, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def snap_env():
    """This environment for `lathe snap` runs: messages in English, no store preset."""
    e = dict(os.environ)
    e["LANG"] = "C.UTF-8"
    for k in ("LATHE_LANG", "LC_ALL", "LATHE_SNAP_STORE"):
        e.pop(k, None)
    return e


def ensure_user(name):
    """The passwd entry of a local system user for tests of a second user, made when missing."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/sh", name],
                       check=True)
        return pwd.getpwnam(name)


def second_user(test, name):
    """ensure_user for a test case: skips `test` where users cannot be made (not root)."""
    if os.geteuid() != 0:
        test.skipTest("needs root to create a second user (CI runs as root)")
    return ensure_user(name)


def shared_scratch(test, prefix):
    """A scratch directory other users may enter (0755), removed after `test`."""
    base = tempfile.mkdtemp(prefix=prefix)
    test.addCleanup(shutil.rmtree, base, True)
    os.chmod(base, 0o755)
    return base


class Daemon:
    def __init__(self, gpus="sim:4x24GB", grace="2s", home=None, port="0"):
        self.home = home or tempfile.mkdtemp(prefix="lathe-integ-")
        self.port = port  # None: no --port (the daemon keeps the port it chose first)
        os.chmod(self.home, 0o755)
        self.gpus = gpus
        self.grace = grace
        self.proc = None

    def env(self, **extra):
        e = dict(os.environ)
        e["LATHE_HOME"] = self.home
        e["LANG"] = "C.UTF-8"
        e.pop("LATHE_LANG", None)
        e.pop("LC_ALL", None)
        e.update(extra)
        return e

    def start(self):
        if getattr(self, "log", None):
            self.log.close()
        self.log = open(os.path.join(self.home, "daemon.test.log"), "ab")
        self.proc = subprocess.Popen(
            [LATHE, "daemon", "--home", self.home, "--gpus", self.gpus,
             *(["--port", self.port] if self.port is not None else []),
             "--grace", self.grace, "--deployments-listen", "127.0.0.1:0"],
            stdout=self.log, stderr=self.log, env=self.env())
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("daemon exited: " + self.daemon_log())
            r = self.cli("status", "--json", check=False)
            if r.returncode == 0:
                return self
            time.sleep(0.05)
        raise RuntimeError("daemon did not come up: " + self.daemon_log())

    def daemon_log(self):
        try:
            with open(os.path.join(self.home, "daemon.test.log")) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if getattr(self, "log", None):
            self.log.close()
            self.log = None
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def cleanup(self):
        self.stop()
        # End whatever runs are left (their monitors are in other sessions).
        subprocess.run(["pkill", "-USR2", "-f", "__monitor " + self.home], check=False)
        time.sleep(0.5)
        subprocess.run(["pkill", "-9", "-f", "__monitor " + self.home], check=False)
        # The deployments' front outlives the daemon by design.
        subprocess.run(["pkill", "-9", "-f", "__gateway --dir " + self.home + "/"], check=False)
        shutil.rmtree(self.home, ignore_errors=True)

    def cli(self, *args, check=True, user=None, env=None, timeout=120):
        cmd = [LATHE, *args]
        if user is not None:
            cmd = ["setpriv", "--reuid", user, "--regid", user, "--init-groups", *cmd]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env or self.env(),
                           timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"lathe {' '.join(args)} -> {r.returncode}\n"
                                 f"stdout: {r.stdout}\nstderr: {r.stderr}\n"
                                 f"daemon: {self.daemon_log()}")
        return r

    def submit(self, *args, **kw):
        return self.cli("run", *args, **kw).stdout.strip()

    def inspect(self, ref):
        return json.loads(self.cli("inspect", "--json", ref).stdout)

    def runs(self, all_runs=False, check=True):
        r = self.cli("ps", "--json", *(["--all"] if all_runs else []), check=check)
        return json.loads(r.stdout) if r.returncode == 0 else []

    def logs(self, ref):
        return self.cli("logs", ref).stdout

    def wait_state(self, ref, states, timeout=90):
        if isinstance(states, str):
            states = [states]
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            last = self.inspect(ref)
            if last["state"] in states:
                return last
            time.sleep(0.1)
        raise AssertionError(f"run {ref} never reached {states}; last: {json.dumps(last)[:2000]}\n"
                             f"daemon: {self.daemon_log()}")

    def wait_for(self, pred, what, timeout=90):
        deadline = time.time() + timeout
        while time.time() < deadline:
            v = pred()
            if v:
                return v
            time.sleep(0.1)
        raise AssertionError("timed out waiting for " + what + "\n" + self.daemon_log())


class DaemonTest(unittest.TestCase):
    gpus = "sim:4x24GB"

    def setUp(self):
        self.d = Daemon(gpus=self.gpus).start()

    def tearDown(self):
        self.d.cleanup()


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False
