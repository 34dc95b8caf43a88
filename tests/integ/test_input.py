"""Bad input gets a clear error naming the field; bad commands end `failed`."""
import json
import os
import shutil
import socket
import tempfile
import unittest

import test_users
from harness import DaemonTest, second_user

# 397 bytes of aliases of aliases: 9^9 strings once expanded.
BILLION_LAUGHS = (
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
    "h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n"
    "type: job\ncommand: [echo, hi]\n")


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
        self.assertIn("JSON", json.loads(body)["en"])
        self.assertIn("zh", json.loads(body))

    def test_bad_spec_fields_are_400_naming_the_field(self):
        sock = os.path.join(self.d.home, "lathe.sock")
        for body, field in [(b'{"command": ["true"], "gpus": -1}', "gpus"),
                            (b'{"command": ["true"], "memory": "16X"}', "memory"),
                            (b'{"command": ["true"], "colour": "red"}', "colour"),
                            (b'{"gpus": 1}', "command"),
                            (b'{"command": ["true"], "priority": "urgent"}', "priority")]:
            code, out = raw_request(sock, body)
            self.assertEqual(code, 400, out)
            self.assertIn(field, json.loads(out)["en"], out)

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

    def spec_file(self, name, text):
        d = tempfile.mkdtemp(dir=self.d.home)
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_yaml_duplicate_key_is_refused_naming_it(self):
        path = self.spec_file("dup.yaml", "type: job\ncommand: [echo, one]\ncommand: [echo, two]\n")
        r = self.d.cli("run", "-f", path, check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("'command'", r.stderr)
        self.assertIn("line 3", r.stderr)
        self.assertEqual(self.d.runs(all_runs=True), [])

    def test_billion_laughs_and_endless_files_are_refused(self):
        path = self.spec_file("laughs.yaml", BILLION_LAUGHS)
        r = self.d.cli("run", "-f", path, check=False, timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("more than 100000 values", r.stderr)
        r = self.d.cli("run", "-f", "/dev/zero", check=False, timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("at most 1MiB", r.stderr)
        self.assertEqual(self.d.runs(all_runs=True), [])

    def test_nul_bytes_and_huge_numbers_name_the_field(self):
        sock = os.path.join(self.d.home, "lathe.sock")
        for body, field in [(b'{"command": ["echo", "a\\u0000b"]}', "command[1]"),
                            (b'{"command": ["true"], "env": {"FOO": "x\\u0000y"}}', "env.FOO"),
                            (b'{"command": ["true"], "workdir": "/tmp/a\\u0000b"}', "workdir"),
                            (b'{"command": ["true"], "checkpoints": {"dir": "/tmp/c\\u0000d"}}',
                             "checkpoints.dir")]:
            code, out = raw_request(sock, body)
            self.assertEqual(code, 400, out)
            err = json.loads(out)
            self.assertEqual(err["msg_id"], "input.nul_byte", out)
            self.assertIn(f"'{field}'", err["en"], out)
        # A byte that is not UTF-8, from argv: refused by name, not a crash
        # when the CLI writes the request.
        r = self.d.cli("run", "--", "echo", os.fsdecode(b"a\xff"), check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("'command[1]'", r.stderr)
        self.assertIn("UTF-8", r.stderr)
        # The same in any other request the CLI sends (a restore target).
        r = self.d.cli("snap", "restore", "latest", "--to", os.fsdecode(b"/tmp/out\xff"), check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("'to'", r.stderr)
        self.assertIn("UTF-8", r.stderr)
        code, out = raw_request(sock, b'{"command": ["true"], "gpus": 1e400}')
        self.assertEqual(code, 400, out)
        err = json.loads(out)
        self.assertIn("'gpus'", err["en"])
        self.assertIn("0 to 1024", err["en"])
        self.assertEqual(self.d.runs(all_runs=True), [])

    def test_shm_beyond_the_machine_is_refused(self):
        r = self.d.cli("run", "--shm", "1000PB", "--", "true", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("field 'shm'", r.stderr)
        self.assertIn("this machine has", r.stderr)

    def test_oversized_spec_says_413_and_the_limit(self):
        # 3.9 MB of tabs (the aliases' budget is 4 MiB) that JSON writes as
        # "\t": a 7.8 MB request body, over the daemon's 4 MiB.
        tabs = "\t" * 300_000
        path = self.spec_file("big.yaml", 'env: {A: &a "' + tabs + '"}\ncommand: [echo' + ", *a" * 12 + "]\n")
        r = self.d.cli("run", "-f", path, check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("413", r.stderr)
        self.assertIn("at most 4MiB", r.stderr)
        self.assertNotIn("cannot reach", r.stderr)

    def test_env_as_the_last_flag_before_the_command(self):
        i = self.d.submit("--env", "A=1", "--", "sh", "-c", "echo A=$A")
        self.d.wait_state(i, "succeeded")
        self.assertEqual(self.d.logs(i), "A=1\n")
        i = self.d.submit("--env", "A=1", "--env", "B=2", "--", "sh", "-c", "echo $A$B")
        self.d.wait_state(i, "succeeded")
        self.assertEqual(self.d.logs(i), "12\n")

    def test_restore_target_with_nul_or_too_long_is_400(self):
        sock = os.path.join(self.d.home, "lathe.sock")
        data = tempfile.mkdtemp(dir=self.d.home)
        with open(os.path.join(data, "a.bin"), "w") as f:
            f.write("x")
        self.d.cli("snap", "--store", os.path.join(self.d.home, "store"), "create", data)
        long_target = "/tmp/" + "a" * 5000
        for to, msg_id in [("/tmp/a\0b", "input.nul_byte"), (long_target, "path.too_long"),
                           ("/tmp/" + "b" * 300 + "/c", "path.name_too_long"),
                           ("relative/dir", "snap.restore_needs_absolute")]:
            body = json.dumps({"to": to}).encode()
            for path in ("/api/v1/snapshots/latest/restore", "/api/v1/snapshots/latest/restore?progress=1"):
                code, out = raw_request(sock, body, path=path)
                if "progress" in path:  # a stream: the error event carries the status
                    self.assertEqual(code, 200, out)
                    data = json.loads(out.split("event: error\ndata: ", 1)[1].split("\n", 1)[0])
                    self.assertEqual(data["http"], 400, out)
                    self.assertEqual(data["msg_id"], msg_id, out)
                else:
                    self.assertEqual(code, 400, out)
                    err = json.loads(out)
                    self.assertEqual(err["msg_id"], msg_id, out)
                    self.assertLess(len(err["en"]), 400)
        self.assertFalse(os.path.exists("/tmp/a"))

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

    def test_unreadable_snapshot_store_says_so(self):
        second_user(self, test_users.USER)
        base = tempfile.mkdtemp(prefix="lathe-it-store-")
        self.addCleanup(shutil.rmtree, base, True)
        os.chmod(base, 0o755)
        store, data = os.path.join(base, "store"), os.path.join(base, "data")
        os.makedirs(data)
        with open(os.path.join(data, "a.bin"), "w") as f:
            f.write("x")
        self.d.cli("snap", "--store", store, "create", data)
        os.chmod(store, 0o700)  # root's, closed to others
        env = self.d.env(HOME="/tmp")
        for verb in ("ls", "fsck"):
            r = self.d.cli("snap", "--store", store, verb, user=test_users.USER, env=env, check=False)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("not readable", r.stderr)
            self.assertIn(store, r.stderr)
            self.assertNotIn("no snapshot store", r.stderr)
        # A store that is not there is still "not found".
        r = self.d.cli("snap", "--store", os.path.join(base, "none"), "fsck", user=test_users.USER, env=env,
                       check=False)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("no snapshot store", r.stderr)

    def test_no_daemon_is_exit_4(self):
        self.d.stop()
        r = self.d.cli("ps", check=False)
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn("lathe up", r.stderr)


if __name__ == "__main__":
    unittest.main()
