"""Bad input gets a clear error naming the field; bad commands end `failed`."""
import json
import os
import shutil
import socket
import tempfile
import unittest

from harness import DaemonTest


def raw_request(sock_path, body, path="/api/v1/runs"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    req = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    s.sendall(req)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, payload = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), payload.decode()


class Input(DaemonTest):
    def test_malformed_json_is_400(self):
        code, body = raw_request(os.path.join(self.d.home, "lathe.sock"), b'{"command": [')
        self.assertEqual(code, 400)
        self.assertIn("JSON", json.loads(body)["error"]["en"])
        self.assertIn("zh", json.loads(body)["error"])

    def test_bad_spec_fields_are_400_naming_the_field(self):
        sock = os.path.join(self.d.home, "lathe.sock")
        for body, field in [(b'{"command": ["true"], "gpus": -1}', "gpus"),
                            (b'{"command": ["true"], "memory": "16X"}', "memory"),
                            (b'{"command": ["true"], "colour": "red"}', "colour"),
                            (b'{"gpus": 1}', "command"),
                            (b'{"command": ["true"], "priority": "urgent"}', "priority")]:
            code, out = raw_request(sock, body)
            self.assertEqual(code, 400, out)
            self.assertIn(field, json.loads(out)["error"]["en"], out)

    def test_cli_exit_code_2_and_message_in_both_languages(self):
        r = self.d.cli("run", "--memory", "16X", "--", "true", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("memory", r.stderr)
        self.assertIn("16X", r.stderr)
        r = self.d.cli("--lang", "zh", "run", "--memory", "16X", "--", "true", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("字段", r.stderr)
        r = self.d.cli("run", "--gpus", "1", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("command", r.stderr)

    def test_yaml_spec_unknown_field_and_relative_workdir(self):
        d = tempfile.mkdtemp(prefix="lathe-it-input-")
        self.addCleanup(shutil.rmtree, d, True)
        os.makedirs(os.path.join(d, "work"))
        with open(os.path.join(d, "bad.yaml"), "w") as f:
            f.write("type: job\ncommand: [true]\ngpu: 1\n")
        r = self.d.cli("run", "-f", os.path.join(d, "bad.yaml"), check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("gpu", r.stderr)
        with open(os.path.join(d, "job.yaml"), "w") as f:
            f.write("type: job\nname: yjob\ngpus: 1\nworkdir: work\nenv: {GREETING: hi}\n"
                    "command: echo $GREETING from $(pwd)\n")
        i = self.d.submit("-f", os.path.join(d, "job.yaml"))
        self.d.wait_state(i, "succeeded")
        self.assertEqual(self.d.logs("yjob"), f"hi from {d}/work\n")
        # No run works inside the daemon's own home.
        r = self.d.cli("run", "--workdir", os.path.join(self.d.home, "runs"), "--", "true", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Lathe daemon's own directory", r.stderr)

    def test_missing_command_or_workdir_fails_with_reason(self):
        i = self.d.submit("--", "no-such-command-xyz")
        r = self.d.wait_state(i, ["failed", "starting", "running"])
        r = self.d.wait_state(i, "failed")
        self.assertIn("command not found: no-such-command-xyz", r["reason"])
        i = self.d.submit("--workdir", "/nonexistent/dir", "--", "true")
        r = self.d.wait_state(i, "failed")
        self.assertIn("/nonexistent/dir", r["reason"])

    def test_failed_run_gets_a_diagnosis(self):
        i = self.d.submit("--", "sh", "-c",
                          "echo 'RuntimeError: CUDA error: no kernel image is available for execution "
                          "on the device' >&2; exit 1")
        r = self.d.wait_state(i, "failed")
        diag = [e for e in r["events"] if e["type"] == "diagnosis"]
        self.d.wait_for(lambda: [e for e in self.d.inspect(i)["events"] if e["type"] == "diagnosis"],
                        "diagnosis event")
        diag = [e for e in self.d.inspect(i)["events"] if e["type"] == "diagnosis"]
        self.assertEqual(diag[0]["data"]["matches"][0]["id"], "cuda.no_kernel_image")
        self.assertIn("diagnosis:", self.d.cli("inspect", i).stdout)
        self.assertIn("诊断", self.d.cli("--lang", "zh", "inspect", i).stdout)
        ok = self.d.submit("--", "true")
        r = self.d.wait_state(ok, "succeeded")
        self.assertFalse([e for e in r["events"] if e["type"] == "diagnosis"])
        # `run --follow` of a failing run ends by pointing at what went wrong.
        r = self.d.cli("run", "--follow", "--", "sh", "-c",
                       "echo 'RuntimeError: CUDA error: no kernel image is available for execution "
                       "on the device' >&2; exit 1", check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("no kernel image", r.stdout)  # the log
        self.assertIn("diagnosis:", r.stderr)
        self.assertIn("lathe inspect r", r.stderr)

    def test_unknown_run_is_exit_3(self):
        r = self.d.cli("logs", "nope", check=False)
        self.assertEqual(r.returncode, 3)

    def test_logs_are_complete_and_followable(self):
        i = self.d.submit("--", "/usr/bin/python3", "-c",
                          "import sys\nfor n in range(3000): print('line', n); sys.stderr.write('e%d\\n' % n) if n % 1000 == 0 else None\n"
                          "print('x' * 40000)")
        r = self.d.cli("logs", "-f", i)
        lines = r.stdout.splitlines()
        self.assertEqual([l for l in lines if l.startswith("line")], [f"line {n}" for n in range(3000)])
        raw = open(self.d.inspect(i)["run_dir"] + "/log").read()
        self.assertEqual([l for l in lines if l.startswith("e")], ["e0", "e1000", "e2000"],
                         "follow output differs; plain log: %r; raw has %d stderr records" %
                         ([l for l in self.d.logs(i).splitlines() if l.startswith("e")],
                          raw.count(" stderr ")))
        self.assertIn("x" * 40000, lines)
        self.assertEqual(self.d.inspect(i)["state"], "succeeded")

    def test_no_daemon_is_exit_4(self):
        self.d.stop()
        r = self.d.cli("ps", check=False)
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn("lathe up", r.stderr)


if __name__ == "__main__":
    unittest.main()
