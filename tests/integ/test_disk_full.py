"""A full disk under the daemon's home: clear errors, nothing stored is lost,
and everything catches up once space is freed."""
import http.client
import json
import os
import re
import shutil
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
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3M,mode=755", "tmpfs", self.mnt], check=True)
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
        # The filler leaves less room than the run's 1.2 MB of output, and frees
        # more than it: the rest of the 3 MB holds the home (database, WAL, runs)
        # with room to spare once it is gone.
        filler = os.path.join(self.mnt, "filler")
        with open(filler, "wb") as f:
            f.write(b"\0" * (2200 * 1024))
        # The run's own output fills what is left, then it exits 0; what did
        # not fit is held until space is freed (it fits then).
        big = self.d.submit("--", PY, "-c", "import sys\nfor i in range(300): print('y' * 4096)\n")
        self.d.wait_for(lambda: os.statvfs(self.mnt).f_bavail == 0, "the disk to fill")
        time.sleep(1)
        r = self.d.cli("run", "--", "true", check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("disk is full", r.stderr)
        # The API says so with 507 Insufficient Storage, not 429 (a rate limit).
        status, err = self.post_run()
        self.assertEqual(status, 507, err)
        self.assertEqual(err["msg_id"], "state.disk_full")
        # Nothing already stored is lost while full.
        self.assertEqual(self.d.inspect(first)["state"], "succeeded")
        os.unlink(filler)
        r = self.d.wait_state(big, "succeeded")
        self.assertEqual(r["exit_code"], 0)
        self.assertEqual(self.d.logs(big), ("y" * 4096 + "\n") * 300)
        self.assertEqual(self.d.wait_state(self.d.submit("--", "true"), "succeeded")["exit_code"], 0)

    def fill(self):
        """Fills the tmpfs to the last block; returns the filler's path."""
        filler = os.path.join(self.mnt, "filler")
        subprocess.run(["dd", "if=/dev/zero", "of=" + filler, "bs=4k"], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.assertEqual(os.statvfs(self.mnt).f_bavail, 0)
        return filler

    def test_output_printed_on_a_full_disk_is_kept_or_marked_never_dropped_silently(self):
        side = tempfile.mkdtemp(prefix="lathe-full-side-")  # not on the small disk
        self.addCleanup(shutil.rmtree, side, True)
        go, done = os.path.join(side, "go"), os.path.join(side, "done")
        n = 600
        script = (f"import os, time\nwhile not os.path.exists({go!r}): time.sleep(0.02)\n"
                  f"for i in range({n}): print('line %04d ' % i + 'x' * 40, flush=True)\n"
                  f"open({done!r}, 'w').close()\n")
        run = self.d.submit("--", PY, "-c", script)
        self.d.wait_state(run, "running")
        filler = self.fill()
        open(go, "w").close()
        self.d.wait_for(lambda: os.path.exists(done), "the run to print its lines")
        os.unlink(filler)
        r = self.d.wait_state(run, "succeeded")
        with open(os.path.join(r["run_dir"], "log"), "rb") as f:
            text = f.read().decode()
        self.assertTrue(text.endswith("\n"), "torn last record")
        record = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z (stdout|stderr) ([FP]) (.*)$")
        numbers, lost = [], 0
        for line in text.splitlines():
            m = record.match(line)
            self.assertIsNotNone(m, "malformed record: " + line)
            stream, tag, content = m.groups()
            self.assertEqual(tag, "F", line)
            if stream == "stderr":
                gap = re.fullmatch(r"\[lathe: (\d+) bytes of output lost: (.+)\]", content)
                self.assertIsNotNone(gap, "unexpected stderr: " + line)
                lost += int(gap.group(1))
                continue
            # A record merged into another would not match exactly.
            self.assertRegex(content, r"^line \d{4} x{40}$")
            numbers.append(int(content.split()[1]))
        self.assertEqual(numbers, sorted(set(numbers)), "lines out of order or repeated")
        missing = n - len(numbers)
        warnings = [e for e in self.d.inspect(run)["events"] if e["type"] == "warning"]
        if lost == 0:
            self.assertEqual(numbers, list(range(n)), "lines dropped without a gap marker")
            self.assertEqual(warnings, [])
        else:
            # Each lost line is 51 bytes with its newline; the warning names the count.
            self.assertEqual(lost, missing * 51)
            self.assertTrue(any(e["data"].get("lost_bytes") == lost for e in warnings), warnings)


if __name__ == "__main__":
    unittest.main()
