"""One local user holding connections to the daemon's socket or its loopback
port cannot lock the other users (nor root) out: connections are limited per
uid, on the socket and over loopback TCP whichever 127.x.y.z they come from."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import DaemonTest, PY, ensure_user

USERS = ("lathe-it-user", "lathe-it-user2")
PER_UID = 128  # docs/api.md, "Limits": on the socket, and again over loopback TCP

# What the holders below share: one request on a socket, its status and body.
COMMON = r"""
import resource, socket, sys

def hard_nofile():
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1]

def request(s, target=b"/api/v1/status", headers=b""):
    s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: localhost\r\n" + headers + b"\r\n")
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
    while len(body) < length:  # a stream (no length) is served once its head is in
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(head.split()[1]), body
"""

# Opens connections to the socket one by one, each answering one request and
# then kept open (idle, keep-alive), until one is refused or `cap` are held;
# prints "held N STATUS BODY" and holds them until stdin closes.
HOLDER = COMMON + r"""
path, cap = sys.argv[1], int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_NOFILE, (hard_nofile(), hard_nofile()))
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


# Holds followed run lists (GET /api/v1/runs?follow=1, a stream that never
# idles) with a token over TCP, from 127.0.0.1 to 127.0.0.5 in turn, each
# address until one is refused or `cap` are held; prints "held N BODY" (the
# last refusal's body) and holds them until stdin closes.
TCP_HOLDER = COMMON + r"""
port, token, cap = int(sys.argv[1]), sys.argv[2].encode(), int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_NOFILE, (hard_nofile(), hard_nofile()))
held, refusal = [], b""
for n in range(1, 6):
    for _ in range(cap):
        s = socket.socket()
        s.bind(("127.0.0.%d" % n, 0))
        s.connect(("127.0.0.1", port))
        status, body = request(s, b"/api/v1/runs?follow=1",
                               b"Authorization: Bearer " + token + b"\r\n")
        if status != 200:
            refusal = body
            s.close()
            break
        held.append(s)
print("held", len(held), refusal.decode(errors="replace"), flush=True)
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

    # --- over TCP ---

    def hold(self, script, user, *args):
        p = subprocess.Popen(
            ["setpriv", "--reuid", user, "--regid", user, "--init-groups", PY, "-c", script,
             *map(str, args)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(p.wait)
        self.addCleanup(p.stdin.close)
        self.addCleanup(p.stdout.close)
        return p.stdout.readline().split(" ", 2)

    def remote_env(self, user):
        """A user's CLI over TCP: no LATHE_HOME, a config dir of their own."""
        base = tempfile.mkdtemp(prefix="lathe-it-conn-")
        self.addCleanup(shutil.rmtree, base, True)
        os.chmod(base, 0o755)
        config = os.path.join(base, "config")
        os.mkdir(config, 0o700)
        pw = ensure_user(user)
        os.chown(config, pw.pw_uid, pw.pw_gid)
        e = self.d.env(HOME="/tmp", XDG_CONFIG_HOME=config)
        del e["LATHE_HOME"]
        return e, config, pw

    def login(self, user, token):
        env, config, pw = self.remote_env(user)
        path = os.path.join(config, "token")
        with open(path, "w") as f:
            f.write(token + "\n")
        os.chown(path, pw.pw_uid, pw.pw_gid)
        os.chmod(path, 0o600)
        with open(os.path.join(self.d.home, "endpoint.json")) as f:
            url = json.load(f)["url"]
        self.d.cli("login", url, "--token-file", path, user=user, env=env)
        return env

    def test_a_user_holding_streams_from_every_loopback_address_locks_out_no_one_else(self):
        env = self.d.env(HOME="/tmp")
        tokens = [json.loads(self.d.cli("token", "create", "--json", user=u, env=env).stdout)
                  ["token"] for u in USERS]
        remote_b = self.login(USERS[1], tokens[1])
        with open(os.path.join(self.d.home, "endpoint.json")) as f:
            endpoint = json.load(f)
        port = int(endpoint["tcp"].rsplit(":", 1)[1])
        # A holds every socket connection it may, then every stream it may
        # over TCP from five loopback addresses: 128, not 128 per address.
        held = self.hold(HOLDER, USERS[0], endpoint["socket"], 1100)
        self.assertEqual(held[:2], ["held", str(PER_UID)], held)
        held = self.hold(TCP_HOLDER, USERS[0], port, tokens[0], 300)
        self.assertEqual(held[:2], ["held", str(PER_UID)], held)
        self.assertIn("too many connections from this user", held[2])
        # While A holds them, B is served on the socket and over TCP, and so is root.
        self.assertEqual(self.d.cli("status", user=USERS[1], env=env).returncode, 0)
        r = self.d.cli("status", "--json", user=USERS[1], env=remote_b)
        self.assertEqual(json.loads(r.stdout)["caller"]["user"], USERS[1])
        self.assertEqual(self.d.cli("status").returncode, 0)


if __name__ == "__main__":
    unittest.main()
