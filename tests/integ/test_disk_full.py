"""A full disk under the daemon's home: clear errors, nothing stored is lost,
and everything catches up once space is freed."""
import http.client
import json
import os
import socket
import subprocess
import tempfile
import time
import unittest

from harness import Daemon, PY


class DiskFull(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to mount a small tmpfs (CI runs as root)")
        self.mnt = tempfile.mkdtemp(prefix="lathe-full-")
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2M,mode=755", "tmpfs", self.mnt], check=True)
        self.d = Daemon(gpus="none", home=self.mnt).start()

    def tearDown(self):
        self.d.stop()
        subprocess.run(["pkill", "-9", "-f", "__monitor " + self.mnt], check=False)
        subprocess.run(["umount", "-l", self.mnt], check=False)
        os.rmdir(self.mnt)

    def post_run(self):
        class Unix(http.client.HTTPConnection):
            def connect(conn):
                conn.sock = socket.socket(socket.AF_UNIX)
                conn.sock.connect(os.path.join(self.mnt, "lathe.sock"))
        c = Unix("lathe", timeout=60)
        c.request("POST", "/api/v1/runs", body=json.dumps({"command": ["true"], "workdir": "/tmp"}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        out = r.status, json.loads(r.read())
        c.close()
        return out

    def test_full_disk_then_recovery(self):
        first = self.d.submit("--", "true")
        self.d.wait_state(first, "succeeded")
        filler = os.path.join(self.mnt, "filler")
        with open(filler, "wb") as f:
            f.write(b"\0" * (1200 * 1024))
        # The run's own output fills what is left, then it exits 0.
        big = self.d.submit("--", PY, "-c", "import sys\nfor i in range(400): print('y' * 4096)\n")
        self.d.wait_for(lambda: os.statvfs(self.mnt).f_bavail == 0, "the disk to fill")
        time.sleep(1)
        r = self.d.cli("run", "--", "true", check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("disk is full", r.stderr)
        # The API says so with 507 Insufficient Storage, not 429 (a rate limit).
        status, err = self.post_run()
        self.assertEqual(status, 507, err)
        self.assertEqual(err["error"]["id"], "state.disk_full")
        # Nothing already stored is lost while full.
        self.assertEqual(self.d.inspect(first)["state"], "succeeded")
        os.unlink(filler)
        r = self.d.wait_state(big, "succeeded")
        self.assertEqual(r["exit_code"], 0)
        self.assertEqual(self.d.wait_state(self.d.submit("--", "true"), "succeeded")["exit_code"], 0)


if __name__ == "__main__":
    unittest.main()
