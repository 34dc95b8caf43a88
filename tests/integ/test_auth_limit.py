"""The failed-authentication limit over TCP (docs/security.md, "Credentials"),
with unprivileged users against a root daemon: a request that brings no
credential is no failed login, and on loopback the limit is the connecting
user's whichever 127.x.y.z they come from."""
import json
import os
import subprocess
import unittest

from harness import DaemonTest, PY, second_user

USER_A = "lathe-it-al-a"
USER_B = "lathe-it-al-b"

# Sends one GET /api/v1/status per argument "SOURCE_ADDRESS TOKEN" (TOKEN "-":
# no Authorization header) to 127.0.0.1:PORT and prints the statuses.
CLIENT = r"""
import http.client, sys
port, statuses = int(sys.argv[1]), []
for arg in sys.argv[2:]:
    source, token = arg.split(" ")
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(source, 0))
    c.request("GET", "/api/v1/status",
              headers={} if token == "-" else {"Authorization": "Bearer " + token})
    statuses.append(c.getresponse().status)
    c.close()
print(" ".join(map(str, statuses)))
"""


class AuthLimit(DaemonTest):
    gpus = "none"

    def setUp(self):
        self.a = second_user(self, USER_A)
        self.b = second_user(self, USER_B)
        super().setUp()
        env = self.d.env(HOME="/tmp")
        self.tok_a = json.loads(
            self.d.cli("token", "create", "--json", user=USER_A, env=env).stdout)["token"]

    def port(self):
        with open(os.path.join(self.d.home, "endpoint.json")) as f:
            return int(json.load(f)["tcp"].rsplit(":", 1)[1])

    def send(self, user, *requests):
        r = subprocess.run(
            ["setpriv", "--reuid", user, "--regid", user, "--init-groups", PY, "-c", CLIENT,
             str(self.port()), *requests],
            capture_output=True, text=True, timeout=120, check=True)
        return [int(s) for s in r.stdout.split()]

    def test_requests_without_a_credential_lock_no_one_out(self):
        # A page A's browser visits makes it send requests that carry nothing.
        self.assertEqual(self.send(USER_A, *["127.0.0.1 -"] * 15), [401] * 15)
        self.assertEqual(self.send(USER_A, "127.0.0.1 " + self.tok_a), [200])

    def test_another_loopback_address_does_not_escape_the_limit(self):
        bad = "lathe_t0000000000_" + "0" * 64
        # B guesses from ten loopback addresses, then from an eleventh.
        guesses = [f"127.0.0.{n} {bad}" for n in range(2, 12)]
        self.assertEqual(self.send(USER_B, *guesses), [401] * 10)
        self.assertEqual(self.send(USER_B, f"127.0.0.50 {bad}", f"127.0.0.51 {self.tok_a}"),
                         [429, 429])
        # A, another user on the same addresses, is not B's guesses' victim.
        self.assertEqual(self.send(USER_A, "127.0.0.2 " + self.tok_a), [200])
        with open(os.path.join(self.d.home, "daemon.test.log"), errors="replace") as f:
            self.assertIn(f"loopback (uid {self.b.pw_uid})", f.read())


if __name__ == "__main__":
    unittest.main()
