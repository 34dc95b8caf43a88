"""Per-user API tokens and the remote CLI: two unprivileged users against a root daemon.

A user creates a token on the unix socket, logs in over TCP with it, and then
every command acts as that user, never as root; another user's runs stay out of
reach; expired and revoked tokens are refused at once; repeated bad tokens are
rate-limited; no token's secret reaches the daemon's log or a listing.
"""
import glob
import http.client
import json
import os
import subprocess
import time
import unittest

from harness import DaemonTest, LATHE, second_user, shared_scratch

USER_A = "lathe-it-tok-a"
USER_B = "lathe-it-tok-b"


class Tokens(DaemonTest):
    gpus = "none"

    def setUp(self):
        self.a = second_user(self, USER_A)
        self.b = second_user(self, USER_B)
        super().setUp()
        self.base = shared_scratch(self, "lathe-it-tok-")

    # --- helpers ---

    def port(self):
        with open(os.path.join(self.d.home, "endpoint.json")) as f:
            return int(json.load(f)["tcp"].rsplit(":", 1)[1])

    def url(self):
        return f"http://127.0.0.1:{self.port()}"

    def user_dir(self, pw, name):
        d = os.path.join(self.base, name)
        os.makedirs(d, exist_ok=True)
        os.chown(d, pw.pw_uid, pw.pw_gid)
        os.chmod(d, 0o700)
        return d

    def local(self, pw):
        """The CLI environment of a user on the daemon's machine: its socket."""
        return self.d.env(HOME="/tmp")

    def remote(self, pw):
        """The CLI environment of a user elsewhere: no LATHE_HOME, their own config dir."""
        e = self.d.env(HOME="/tmp", XDG_CONFIG_HOME=self.user_dir(pw, pw.pw_name + "-config"))
        del e["LATHE_HOME"]
        return e

    def create(self, pw, *args, env=None):
        r = self.d.cli("token", "create", "--json", *args, user=pw.pw_name,
                       env=env or self.local(pw))
        return json.loads(r.stdout)

    def token_file(self, pw, token):
        path = os.path.join(self.user_dir(pw, pw.pw_name + "-files"), "token")
        with open(path, "w") as f:
            f.write(token + "\n")
        os.chown(path, pw.pw_uid, pw.pw_gid)
        os.chmod(path, 0o600)
        return path

    def login(self, pw, token):
        return self.d.cli("login", self.url(), "--token-file", self.token_file(pw, token),
                          user=pw.pw_name, env=self.remote(pw), check=False)

    def http(self, method, path, token=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port(), timeout=30)
        c.request(method, path, headers={"Authorization": f"Bearer {token}"} if token else {})
        r = c.getresponse()
        body = r.read().decode()
        c.close()
        return r.status, dict(r.getheaders()), json.loads(body) if body.startswith("{") else body

    def daemon_log(self):
        with open(os.path.join(self.d.home, "daemon.test.log"), errors="replace") as f:
            return f.read()

    def assert_secret_nowhere(self, token):
        secret = token.rsplit("_", 1)[1]
        self.assertNotIn(secret, self.daemon_log())
        for listing in (self.d.cli("token", "ls", "--all").stdout,
                        self.d.cli("token", "ls", "--all", "--json").stdout):
            self.assertNotIn(secret, listing)
        for path in glob.glob(os.path.join(self.d.home, "lathe.db*")):
            with open(path, "rb") as f:
                self.assertNotIn(secret.encode(), f.read(), path)

    # --- tests ---

    def test_a_token_acts_as_its_user_over_tcp(self):
        a, b = self.a, self.b
        made = self.create(a, "--name", "laptop", "--expires", "1h")
        token = made["token"]
        self.assertTrue(token.startswith("lathe_" + made["id"] + "_"), made)
        self.assertEqual((made["uid"], made["user"]), (a.pw_uid, USER_A))

        r = self.login(a, token)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("as " + USER_A, r.stdout)
        self.assertNotIn("warning", r.stderr)  # loopback: no plain-http warning
        creds = os.path.join(self.remote(a)["XDG_CONFIG_HOME"], "lathe", "credentials")
        st = os.stat(creds)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (a.pw_uid, 0o600))
        self.assertEqual(os.stat(os.path.dirname(creds)).st_mode & 0o777, 0o700)
        ra = lambda *args, **kw: self.d.cli(*args, user=USER_A, env=self.remote(a), **kw)

        status = json.loads(ra("status", "--json").stdout)
        self.assertEqual(status["found_by"], "login")
        self.assertEqual(status["caller"], {"uid": a.pw_uid, "user": USER_A, "admin": False})

        # run / ps / logs / stop over TCP: the run is A's, executing as A.
        mine = ra("run", "--workdir", "/tmp", "--", "sh", "-c", "id -u; sleep 60").stdout.strip()
        rec = self.d.inspect(mine)
        self.assertEqual((rec["uid"], rec["user"]), (a.pw_uid, USER_A))
        self.d.wait_state(mine, "running")
        listed = {r["id"]: r for r in json.loads(ra("ps", "--json").stdout)}
        self.assertIn("spec", listed[mine])  # their own: not redacted
        out = self.d.wait_for(lambda: ra("logs", mine).stdout.strip(), "A's log")
        self.assertEqual(out, str(a.pw_uid))
        # Streams (server-sent events) work over TCP too, with the same exit codes.
        r = ra("run", "--follow", "--workdir", "/tmp", "--", "sh", "-c", "echo followed; exit 3",
               check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("followed", r.stdout)
        r = ra("logs", "no-such-run", check=False)
        self.assertEqual(r.returncode, 3, r.stderr)

        # B's run is out of A's reach over TCP as on the socket.
        theirs = self.d.cli("run", "--workdir", "/tmp", "--", "sh", "-c", "echo b-secret; sleep 60",
                            user=USER_B, env=self.local(b)).stdout.strip()
        self.d.wait_state(theirs, "running")
        for verb in ("stop", "logs", "inspect"):
            r = ra(verb, theirs, check=False)
            self.assertEqual(r.returncode, 1, (verb, r.stdout, r.stderr))
            self.assertIn("belongs to " + USER_B, r.stderr)
            self.assertNotIn("b-secret", r.stdout)
        code, _, body = self.http("GET", f"/api/v1/runs/{theirs}", token)
        self.assertEqual(code, 403, body)
        code, _, body = self.http("POST", f"/api/v1/runs/{theirs}/stop", token)
        self.assertEqual(code, 403, body)
        self.assertEqual(self.d.inspect(theirs)["state"], "running")
        listed = {r["id"]: r for r in json.loads(ra("ps", "--json").stdout)}
        self.assertTrue(listed[theirs]["redacted"])

        # Nor can A's token act as root: all tokens, tokens for others, admin routes.
        r = ra("token", "ls", "--all", check=False)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("only root", r.stderr)
        r = ra("token", "create", "--user", USER_B, check=False)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("unix socket", r.stderr)
        r = ra("token", "create", "--user", "root", check=False)
        self.assertEqual(r.returncode, 1, r.stdout)
        # (not on the socket either: A is not an admin)
        r = self.d.cli("token", "create", "--user", USER_B, user=USER_A, env=self.local(a),
                       check=False)
        self.assertEqual(r.returncode, 1, r.stdout)
        for method, path in (("GET", "/api/v1/events?follow=1"), ("POST", "/api/v1/shutdown"),
                             ("GET", "/api/v1/tokens?all=1")):
            code, _, body = self.http(method, path, token)
            self.assertEqual(code, 403, (path, body))
        self.assertIsNone(self.d.proc.poll())  # the daemon is still up

        # A token A makes with a token expires no later than it; it is A's.
        made2 = json.loads(ra("token", "create", "--expires", "30d", "--json").stdout)
        self.assertEqual(made2["uid"], a.pw_uid)
        self.assertEqual(made2["expires_at_ms"], made["expires_at_ms"])
        self.assertEqual(made2["created_by"], "token " + made["id"])
        # A lists and revokes only their own: B's token is "not found" to A.
        made_b = self.create(b)
        ids = {t["id"] for t in json.loads(ra("token", "ls", "--json").stdout)}
        self.assertEqual(ids, {made["id"], made2["id"]})
        r = ra("token", "rm", made_b["id"], check=False)
        self.assertEqual(r.returncode, 3, r.stderr)
        code, _, _ = self.http("GET", "/api/v1/status", made_b["token"])
        self.assertEqual(code, 200)
        # Root (on the socket) sees everyone's; never a secret.
        every = json.loads(self.d.cli("token", "ls", "--all", "--json").stdout)
        self.assertEqual({t["id"] for t in every}, {made["id"], made2["id"], made_b["id"]})
        self.assertTrue(all("token" not in t and "secret_hash" not in t for t in every))
        self.assertTrue(next(t for t in every if t["id"] == made["id"])["last_used_at_ms"])

        ra("stop", mine)
        self.d.wait_state(mine, "stopped")

        # The daemon's own token still acts as the daemon's user (root) alone.
        with open(os.path.join(self.d.home, "token")) as f:
            own = f.read().strip()
        code, _, body = self.http("GET", "/api/v1/status", own)
        self.assertEqual((code, body["caller"]["uid"]), (200, 0))
        code, _, body = self.http("GET", "/api/v1/status", token)
        self.assertEqual(body["caller"]["uid"], a.pw_uid)

        r = ra("logout")
        self.assertIn("logged out", r.stdout)
        self.assertFalse(os.path.exists(creds))
        for t in (token, made2["token"], made_b["token"]):
            self.assert_secret_nowhere(t)

    def post_token(self, body, token):
        c = http.client.HTTPConnection("127.0.0.1", self.port(), timeout=30)
        c.request("POST", "/api/v1/tokens", body=json.dumps(body),
                  headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        r = c.getresponse()
        out = r.status, json.loads(r.read())
        c.close()
        return out

    def test_an_empty_expiry_is_refused_not_taken_as_never(self):
        a = self.a
        r = self.d.cli("token", "create", "--expires", "", user=USER_A, env=self.local(a),
                       check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("'expires'", r.stderr)
        self.assertEqual(json.loads(self.d.cli("token", "ls", "--json", user=USER_A,
                                               env=self.local(a)).stdout), [])
        # Over TCP, with a token of an hour: "" neither makes a token that
        # never expires nor one of the hour; the field left out still does.
        hour = self.create(a, "--expires", "1h")
        code, body = self.post_token({"expires": ""}, hour["token"])
        self.assertEqual((code, body["msg_id"]), (400, "token.bad_expires"), body)
        code, body = self.post_token({"name": "x", "expires": ""}, hour["token"])
        self.assertEqual(code, 400, body)
        code, body = self.post_token({}, hour["token"])
        self.assertEqual(code, 201, body)
        self.assertEqual(body["expires_at_ms"], hour["expires_at_ms"])
        listed = json.loads(self.d.cli("token", "ls", "--json", user=USER_A,
                                       env=self.local(a)).stdout)
        self.assertEqual(sorted(t["id"] for t in listed if t.get("kind", "token") == "token"),
                         sorted([hour["id"], body["id"]]))
        self.assertTrue(all(t["expires_at_ms"] for t in listed))
        # "never" and no --expires still mean never.
        self.assertIsNone(self.create(a, "--expires", "never")["expires_at_ms"])
        self.assertIsNone(self.create(a)["expires_at_ms"])

    def test_expired_and_revoked_tokens_are_refused_at_once(self):
        a = self.a
        short = self.create(a, "--expires", "1s")
        self.assertEqual(short["expires_at_ms"] - short["created_at_ms"], 1000)
        # Wait for the expiry without asking the daemon (every refusal counts
        # against the failed-authentication limit).
        while time.time() * 1000 < short["expires_at_ms"] + 50:
            time.sleep(0.1)
        code, headers, body = self.http("GET", "/api/v1/status", short["token"])
        self.assertEqual(code, 401, body)
        self.assertEqual(body["msg_id"], "token.expired")
        self.assertIn(short["id"], body["error"])
        self.assertIn("invalid_token", headers.get("WWW-Authenticate", ""))
        r = self.login(a, short["token"])
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("expired", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.remote(a)["XDG_CONFIG_HOME"], "lathe",
                                                     "credentials")))
        ls = json.loads(self.d.cli("token", "ls", "--json", user=USER_A,
                                   env=self.local(a)).stdout)
        self.assertTrue(ls[0]["expired"])

        live = self.create(a)
        self.assertIsNone(live["expires_at_ms"])
        self.assertEqual(self.login(a, live["token"]).returncode, 0)
        ra = lambda *args, **kw: self.d.cli(*args, user=USER_A, env=self.remote(a), **kw)
        self.assertEqual(ra("ps").returncode, 0)
        r = self.d.cli("token", "rm", live["id"], user=USER_A, env=self.local(a))
        self.assertIn("revoked", r.stdout)
        r = ra("ps", check=False)  # the next request
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("is not valid", r.stderr)
        code, _, body = self.http("GET", "/api/v1/runs", live["token"])
        self.assertEqual((code, body["msg_id"]), (401, "token.invalid"))
        self.assert_secret_nowhere(live["token"])

    def test_revoking_a_token_ends_the_streams_it_opened(self):
        a = self.a
        tok = self.create(a)
        self.assertEqual(self.login(a, tok["token"]).returncode, 0)
        env = self.remote(a)
        run = self.d.cli("run", "--workdir", "/tmp", "--", "sh", "-c",
                         "while true; do echo tick; sleep 0.2; done",
                         user=USER_A, env=env).stdout.strip()
        self.d.wait_state(run, "running")
        cmd = ["setpriv", "--reuid", USER_A, "--regid", USER_A, "--init-groups",
               LATHE, "logs", "-f", run]
        follow = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                  text=True)
        self.addCleanup(follow.kill)
        self.assertEqual(follow.stdout.readline().strip(), "tick")
        self.d.cli("token", "rm", tok["id"], user=USER_A, env=self.local(a))
        # The daemon checks the stream's credential every few seconds.
        out, err = follow.communicate(timeout=60)
        self.assertEqual(follow.returncode, 1, err)
        self.assertIn("revoked or expired", err)
        self.d.cli("stop", run)

    def test_repeated_bad_tokens_are_rate_limited(self):
        a = self.a
        good = self.create(a)["token"]
        bad = "lathe_t0000000000_" + "ab" * 32
        junk = "not-a-lathe-token-" + "cd" * 16
        for i in range(10):
            code, _, body = self.http("GET", "/api/v1/status", bad if i % 2 else junk)
            self.assertEqual(code, 401, (i, body))
        code, headers, body = self.http("GET", "/api/v1/status", bad)
        self.assertEqual(code, 429, body)
        self.assertEqual(body["msg_id"], "api.auth_rate_limited")
        self.assertGreater(int(headers["Retry-After"]), 0)
        # A good token from that client waits too, or the answer would tell a
        # guesser which guess was right; the unix socket is not affected.
        code, _, _ = self.http("GET", "/api/v1/status", good)
        self.assertEqual(code, 429)
        self.assertEqual(self.d.cli("ps", user=USER_A, env=self.local(a)).returncode, 0)
        # On loopback the limit is per connecting user (every local and
        # ssh-tunnelled user shares loopback): A, who guessed nothing, logs in.
        self.assertEqual(self.login(a, good).returncode, 0)
        log = self.daemon_log()
        self.assertIn("refused a TCP request from loopback (uid 0)", log)
        self.assertIn("too many failed authentications from loopback (uid 0)", log)
        self.assertNotIn("ab" * 32, log)
        self.assertNotIn("cd" * 16, log)
        self.assert_secret_nowhere(good)


if __name__ == "__main__":
    unittest.main()
