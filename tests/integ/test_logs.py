"""Logs read in bounded memory: four clients reading a 100 MB log at once,
and tail / offset+limit / grep through the API and the CLI."""
import json
import os
import subprocess
import time
import unittest

from harness import LATHE, DaemonTest
from logs_load import TS, UnixConnection, get, memory_kb, read_concurrently, reset_peak, write_big_log

BIG_LOG_BYTES = int(os.environ.get("LATHE_BIG_LOG_MB", "100")) * 1000 * 1000
RSS_LIMIT_KB = 100 * 1024


def rec(stream, tag, text):
    return f"{TS} {stream} {tag} {text}\n"


class Logs(DaemonTest):
    def finished_run(self, log_text=None):
        """A run that has ended, its log replaced by log_text (CRI records)."""
        rid = self.d.submit("--", "true")
        run = self.d.wait_state(rid, "succeeded")
        if log_text is not None:
            with open(os.path.join(run["run_dir"], "log"), "w") as f:
                f.write(log_text)
        return rid, run

    def small_run(self):
        text = "".join(rec("stdout", "F", f"line {i}") for i in range(10))
        # line 10 is joined from pieces with a stderr line between them; line 11 is that stderr line
        text += rec("stdout", "P", "joined ") + rec("stderr", "F", "error: disk") + rec("stdout", "F", "end")
        text += "".join(rec("stdout", "F", f"tail {i}") for i in range(5))
        return self.finished_run(text)[0]

    def test_four_clients_read_a_big_log_in_bounded_memory(self):
        rid, run = self.finished_run()
        lines = write_big_log(os.path.join(run["run_dir"], "log"), BIG_LOG_BYTES)
        size = os.path.getsize(os.path.join(run["run_dir"], "log"))
        start = time.monotonic()
        peak, hwm, base, status_ms = read_concurrently(self, self.d, rid, 4, lines)
        print(f"\n{size / 1e6:.0f} MB log, {lines} lines, 4 clients at once: daemon RSS "
              f"{base / 1024:.1f} MiB before, peak sampled {peak / 1024:.1f} MiB, VmHWM {hwm / 1024:.1f} MiB; "
              f"all read in {time.monotonic() - start:.1f} s; slowest /status meanwhile {status_ms:.0f} ms")
        self.assertLess(peak, RSS_LIMIT_KB)
        self.assertLess(hwm, RSS_LIMIT_KB)
        # A tail of the big log is found from the end.
        status, _, body = get(self.d, f"/api/v1/runs/{rid}/logs?tail=2")
        self.assertEqual(status, 200)
        self.assertEqual(body.decode().splitlines()[-1][:9], f"{lines - 1:09d}")

    def test_a_failed_run_with_a_big_log_is_diagnosed_in_bounded_memory(self):
        go = os.path.join(self.d.home, "go")
        rid = self.d.submit("--", "sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done; exit 3")
        run = self.d.wait_state(rid, "running")
        log = os.path.join(run["run_dir"], "log")
        write_big_log(log + ".big", BIG_LOG_BYTES)
        with open(log, "ab") as out, open(log + ".big", "rb") as big:
            while True:
                block = big.read(1 << 20)
                if not block:
                    break
                out.write(block)
            out.write(f"{TS} stderr F RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n".encode())
        os.unlink(log + ".big")
        reset_peak(self.d.proc.pid)
        open(go, "w").close()
        self.d.wait_state(rid, "failed")
        diag = self.d.wait_for(lambda: [e for e in self.d.inspect(rid)["events"] if e["type"] == "diagnosis"],
                               "the diagnosis event")
        self.assertIn("cuda", json.dumps(diag).lower())
        self.assertLess(memory_kb(self.d.proc.pid)[1], RSS_LIMIT_KB)

    def test_tail_offset_limit_and_grep_through_the_cli(self):
        rid = self.small_run()
        self.assertEqual(self.d.cli("logs", rid, "--tail", "2").stdout, "tail 3\ntail 4\n")
        self.assertEqual(self.d.cli("logs", rid, "--tail", "7").stdout,
                         "error: disk\njoined end\n" + "".join(f"tail {i}\n" for i in range(5)))
        r = self.d.cli("logs", rid, "--offset", "8", "--limit", "4")
        self.assertEqual(r.stdout, "line 8\nline 9\nerror: disk\njoined end\n")
        self.assertIn("--offset 12", r.stderr)
        r = self.d.cli("logs", rid, "--offset", "15", "--limit", "10")
        self.assertEqual(r.stdout, "tail 3\ntail 4\n")
        self.assertIn("--offset 17", r.stderr)
        self.assertEqual(self.d.cli("logs", rid, "--grep", "^tail [13]$").stdout, "tail 1\ntail 3\n")
        self.assertEqual(self.d.cli("logs", rid, "--grep", "line|tail", "--tail", "3").stdout,
                         "tail 2\ntail 3\ntail 4\n")
        self.assertEqual(self.d.cli("logs", rid, "--grep", "e", "--offset", "9", "--limit", "2").stdout,
                         "line 9\nerror: disk\n")
        # Following a finished run from its tail prints the tail and ends.
        self.assertEqual(self.d.cli("logs", "-f", rid, "--tail", "1").stdout, "tail 4\n")
        self.assertEqual(self.d.cli("logs", "-f", rid, "--tail", "3", "--grep", "^(line|tail) [0-2]$").stdout,
                         "tail 0\ntail 1\ntail 2\n")
        ts = self.d.cli("logs", "-t", rid, "--tail", "1").stdout
        self.assertEqual(ts, f"{TS} tail 4\n")

    def test_bad_parameters_are_refused_naming_them(self):
        rid = self.small_run()
        for args, param in [(["--tail", "-1"], "tail"), (["--tail", "ten"], "tail"),
                            (["--limit", "100000000000"], "limit"), (["--offset", "1.5"], "offset"),
                            (["--grep", "(unclosed"], "grep")]:
            r = self.d.cli("logs", rid, *args, check=False)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertIn(f"'{param}'", r.stderr)
            self.assertEqual(r.stdout, "")
            zh = self.d.cli("logs", rid, *args, check=False, env=self.d.env(LATHE_LANG="zh"))
            self.assertEqual(zh.returncode, 2)
            self.assertIn(f"参数 “{param}”", zh.stderr)
        r = self.d.cli("logs", rid, "--tail", "3", "--offset", "2", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("'tail' and 'offset'", r.stderr)
        status, _, body = get(self.d, f"/api/v1/runs/{rid}/logs?limit=abc")
        self.assertEqual(status, 400)
        err = json.loads(body)
        self.assertEqual(err["msg_id"], "logs.bad_number")
        self.assertEqual(err["args"]["param"], "limit")
        status, _, body = get(self.d, f"/api/v1/runs/{rid}/logs?follow=1&limit=3")
        self.assertEqual(status, 400)
        self.assertEqual(json.loads(body)["msg_id"], "logs.conflict")

    def test_api_pages_say_where_the_next_one_starts(self):
        rid = self.small_run()
        status, headers, body = get(self.d, f"/api/v1/runs/{rid}/logs?offset=0&limit=3")
        self.assertEqual(status, 200)
        self.assertTrue(headers["content-type"].startswith("text/plain"))
        self.assertEqual(body, b"line 0\nline 1\nline 2\n")
        self.assertEqual(headers["x-lathe-next-offset"], "3")
        status, headers, body = get(self.d, f"/api/v1/runs/{rid}/logs?offset=3&limit=100&grep=disk")
        self.assertEqual(body, b"error: disk\n")
        self.assertEqual(headers["x-lathe-next-offset"], "17")
        status, headers, body = get(self.d, f"/api/v1/runs/{rid}/logs")
        self.assertNotIn("x-lathe-next-offset", headers)
        self.assertEqual(len(body.splitlines()), 17)

    def test_concurrent_log_readers_per_user_are_bounded(self):
        rid = self.d.submit("--", "sleep", "60")
        self.d.wait_state(rid, "running")
        sock = os.path.join(self.d.home, "lathe.sock")
        held = []
        for _ in range(16):
            c = UnixConnection(sock)
            c.request("GET", f"/api/v1/runs/{rid}/logs?follow=1")
            self.assertEqual(c.getresponse().status, 200)
            held.append(c)
        status, _, body = get(self.d, f"/api/v1/runs/{rid}/logs")
        self.assertEqual(status, 429)
        self.assertEqual(json.loads(body)["msg_id"], "logs.too_many_readers")
        for c in held:
            c.close()
        # The followers notice their clients are gone and free their places.
        self.d.wait_for(lambda: get(self.d, f"/api/v1/runs/{rid}/logs")[0] == 200, "a free log reader")
        self.d.cli("stop", rid)

    def test_follow_streams_a_growing_log_from_its_tail(self):
        go = os.path.join(self.d.home, "go")
        rid = self.d.submit("--", "sh", "-c", "for i in 1 2 3; do echo early $i; done; "
                            f"while [ ! -e {go} ]; do sleep 0.05; done; echo late; echo last")
        self.d.wait_for(lambda: "early 3" in self.d.logs(rid), "early lines")
        p = subprocess.Popen([LATHE, "logs", "-f", "--tail", "1", rid], stdout=subprocess.PIPE,
                             text=True, env=self.d.env())
        try:
            self.assertEqual(p.stdout.readline(), "early 3\n")
            open(go, "w").close()
            self.assertEqual(p.stdout.read(), "late\nlast\n")
            self.assertEqual(p.wait(timeout=60), 0)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()

    def test_a_silent_run_is_followed_without_timing_out(self):
        # A training that prints nothing for minutes: the stream says it is alive
        # (an SSE comment about every 15 s) so that clients' read timeouts hold.
        rid = self.d.submit("--", "sleep", "60")
        self.d.wait_state(rid, "running")
        c = UnixConnection(os.path.join(self.d.home, "lathe.sock"), timeout=45)
        c.request("GET", f"/api/v1/runs/{rid}/logs?follow=1")
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        self.assertEqual(r.readline(), b": keep-alive\n")
        c.close()
        self.d.cli("stop", rid)


if __name__ == "__main__":
    unittest.main()
