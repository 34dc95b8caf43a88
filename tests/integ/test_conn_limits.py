"""One local user holding connections to the daemon's socket cannot lock the
other users (nor root) out: connections are limited per uid."""
import json
import os
import subprocess
import unittest

from harness import DaemonTest, PY, ensure_user

USERS = ("lathe-it-user", "lathe-it-user2")
PER_UID = 128  # docs/api.md, "Limits"

# Opens connections to the socket one by one, each answering one request and
# then kept open (idle, keep-alive), until one is refused or `cap` are held;
# prints "held N STATUS BODY" and holds them until stdin closes.
HOLDER = r"""
import socket, sys
path, cap = sys.argv[1], int(sys.argv[2])

def request(s):
    s.sendall(b"GET /api/v1/status HTTP/1.1\r\nHost: lathe\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            return 0, b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(head.split()[1]), body

held, status, body = [], 200, b""
while len(held) < cap:
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    status, body = request(s)
    if status != 200:
        break
    held.append(s)
print("held", len(held), status, body.decode(errors="replace"), flush=True)
sys.stdin.read()
"""



class ConnectionLimits(DaemonTest):
    gpus = "none"

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to act as other users (CI runs as root)")
        for u in USERS:
            ensure_user(u)
        super().setUp()

    def test_a_user_holding_connections_locks_out_no_one_else(self):
        with open(os.path.join(self.d.home, "endpoint.json")) as f:
            sock = json.load(f)["socket"]
        holder = subprocess.Popen(
            ["setpriv", "--reuid", USERS[0], "--regid", USERS[0], "--init-groups",
             PY, "-c", HOLDER, sock, "1100"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(holder.wait)
        self.addCleanup(holder.stdin.close)
        self.addCleanup(holder.stdout.close)
        held = holder.stdout.readline().split(" ", 3)
        # Refused at its own limit, far below the ~1,030 that locked everyone out.
        self.assertEqual(held[:3], ["held", str(PER_UID), "503"], held)
        self.assertIn("too many connections from this user", held[3])
        env = self.d.env(HOME="/tmp")
        # While it holds them: root and another user are served ...
        self.assertEqual(self.d.cli("status").returncode, 0)
        self.assertEqual(self.d.cli("status", user=USERS[1], env=env).returncode, 0)
        # ... and the holder itself is refused, with the reason.
        r = self.d.cli("status", user=USERS[0], env=env, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("too many connections", r.stderr)


if __name__ == "__main__":
    unittest.main()
