"""Browser sessions against a root daemon, with two unprivileged users.

`lathe ui` prints a one-time sign-in link; opening it sets the session cookie
(HttpOnly, SameSite=Strict, Path=/), and the cookie then acts as its user on
the API — reading freely, changing state only with the session's CSRF token
and from the daemon's own origin. A code works once; a Host the daemon does not
know is refused; a second user neither makes codes for the first nor sees or
ends their sessions; a revoked session ends at the next request; failed codes
are rate-limited like bad tokens; no code, cookie or CSRF token reaches the
daemon's log or its database.
"""
import glob
import http.client
import json
import os
import unittest
import urllib.parse

from harness import DaemonTest, second_user

USER_A = "lathe-it-ses-a"
USER_B = "lathe-it-ses-b"


class Sessions(DaemonTest):
    gpus = "none"

    def setUp(self):
        self.a = second_user(self, USER_A)
        self.b = second_user(self, USER_B)
        super().setUp()

    # --- helpers ---

    def port(self):
        with open(os.path.join(self.d.home, "endpoint.json")) as f:
            return int(json.load(f)["tcp"].rsplit(":", 1)[1])

    def local(self):
        return self.d.env(HOME="/tmp")

    def ui(self, user=None, *args, check=True):
        return self.d.cli("ui", *args, user=user, env=self.local(), check=check)

    def http(self, method, path, cookie=None, headers=None, host=None, body=None):
        h = {"Host": host or f"localhost:{self.port()}"}
        if cookie:
            h["Cookie"] = f"lathe_session={cookie}"
        h.update(headers or {})
        c = http.client.HTTPConnection("127.0.0.1", self.port(), timeout=30)
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
        r = c.getresponse()
        text = r.read().decode(errors="replace")
        c.close()
        parsed = json.loads(text) if text.startswith("{") else text
        return r.status, r.headers, parsed

    def login(self, user):
        """Opens `lathe ui`'s link as a browser would: (cookie value, Set-Cookie, code)."""
        url = self.ui(user).stdout.strip()
        u = urllib.parse.urlsplit(url)
        code = urllib.parse.parse_qs(u.query)["code"][0]
        status, headers, body = self.http("GET", u.path + "?" + u.query, host=u.netloc)
        self.assertEqual(status, 303, body)
        self.assertEqual(headers["Location"], "/ui/")
        set_cookie = headers["Set-Cookie"]
        value = set_cookie.split(";", 1)[0].split("=", 1)[1]
        return value, set_cookie, code, url

    def daemon_token(self):
        with open(os.path.join(self.d.home, "token")) as f:
            return f.read().strip()

    def csrf(self, cookie):
        status, _, body = self.http("GET", "/api/v1/session", cookie)
        self.assertEqual(status, 200, body)
        return body["csrf"]

    def logs(self):
        text = ""
        for path in glob.glob(os.path.join(self.d.home, "daemon*.log")):
            with open(path, errors="replace") as f:
                text += f.read()
        return text

    def db_bytes(self):
        data = b""
        for path in glob.glob(os.path.join(self.d.home, "lathe.db*")):
            with open(path, "rb") as f:
                data += f.read()
        return data

    # --- tests ---

    def test_a_link_signs_in_once_and_the_cookie_acts_as_its_user(self):
        a = self.a
        cookie, set_cookie, code, url = self.login(USER_A)
        self.assertTrue(url.startswith(f"http://localhost:{self.port()}/ui/login?code="), url)
        attrs = [p.strip() for p in set_cookie.split(";")]
        self.assertTrue(attrs[0].startswith("lathe_session=s"), set_cookie)
        for attr in ("HttpOnly", "SameSite=Strict", "Path=/"):
            self.assertIn(attr, attrs, set_cookie)
        self.assertNotIn("Secure", attrs)  # a plain-http listener
        # The code works once.
        u = urllib.parse.urlsplit(url)
        status, headers, page = self.http("GET", u.path + "?" + u.query)
        self.assertEqual(status, 401)
        self.assertIn("text/html", headers["Content-Type"])
        self.assertNotIn("Set-Cookie", headers)
        self.assertIn("not valid", page)
        self.assertIn("无效", page)

        # The cookie reads the API as A (the web UI asks GET /session who that is).
        status, _, runs = self.http("GET", "/api/v1/runs", cookie)
        self.assertEqual(status, 200, runs)
        status, _, me = self.http("GET", "/api/v1/session", cookie)
        self.assertEqual(status, 200, me)
        self.assertEqual((me["uid"], me["user"], me["scope"]), (a.pw_uid, USER_A, "ui"))
        self.assertEqual(me["id"], cookie.split("_")[0])
        self.assertGreater(me["expires_at_ms"], me["created_at_ms"])
        csrf = me["csrf"]
        # The UI's page is the same static index.html with or without a cookie.
        status, headers, page = self.http("GET", "/ui/", cookie)
        self.assertEqual(status, 200, page)
        self.assertIn('<script type="module" src="/ui/assets/app-', page)
        self.assertEqual(headers["Cache-Control"], "no-store")
        status, _, page_without = self.http("GET", "/ui/")
        self.assertEqual((status, page_without), (200, page))
        status, _, body = self.http("GET", "/api/v1/session", headers={
            "Authorization": "Bearer " + self.daemon_token()})
        self.assertEqual(status, 404, body)  # a bearer token has no session

        # Changing state needs the CSRF token, and the daemon's own origin.
        made = {"name": "from-browser"}
        status, _, body = self.http("POST", "/api/v1/tokens", cookie, body=made)
        self.assertEqual(status, 403, body)
        self.assertEqual(body["msg_id"], "session.csrf_missing")
        status, _, body = self.http("POST", "/api/v1/tokens", cookie, body=made,
                                    headers={"X-Lathe-CSRF": "0" * 64})
        self.assertEqual((status, body["msg_id"]), (403, "session.csrf_invalid"))
        status, _, body = self.http("POST", "/api/v1/tokens", cookie, body=made,
                                    headers={"X-Lathe-CSRF": csrf,
                                             "Origin": "http://evil.example"})
        self.assertEqual((status, body["msg_id"]), (403, "session.bad_origin"))
        status, _, token = self.http("POST", "/api/v1/tokens", cookie, body=made,
                                     headers={"X-Lathe-CSRF": csrf,
                                              "Origin": f"http://localhost:{self.port()}"})
        self.assertEqual(status, 201, token)
        self.assertEqual((token["uid"], token["created_by"]), (a.pw_uid, "session " + me["id"]))
        self.assertIsNotNone(token["expires_at_ms"])  # no longer than the session
        self.assertLessEqual(token["expires_at_ms"], me["expires_at_ms"])
        # A state change without an Origin header (a non-browser client) needs the token only.
        status, _, body = self.http("DELETE", "/api/v1/tokens/" + token["id"], cookie,
                                    headers={"X-Lathe-CSRF": csrf})
        self.assertEqual(status, 200, body)

        # Nothing of the code, the cookie or the CSRF token is in the log or the database.
        secret = cookie.split("_", 1)[1]
        log = self.logs()
        self.assertIn(me["id"], log)  # the session is logged, by its public id
        for value in (code, secret, csrf):
            self.assertNotIn(value, log)
        db = self.db_bytes()
        for value in (code, secret, csrf):
            self.assertNotIn(value.encode(), db)

    def test_a_session_ends_with_the_credential_that_made_it(self):
        made = json.loads(self.d.cli("token", "create", "--json", "--expires", "1h", user=USER_A,
                                     env=self.local()).stdout)
        bearer = {"Authorization": "Bearer " + made["token"]}

        def redeem(url):
            u = urllib.parse.urlsplit(url)
            status, headers, body = self.http("GET", u.path + "?" + u.query)
            self.assertEqual(status, 303, body)
            return headers["Set-Cookie"].split(";", 1)[0].split("=", 1)[1]

        status, _, code = self.http("POST", "/api/v1/sessions/code", headers=bearer, body={})
        self.assertEqual(status, 201, code)
        first = redeem(code["url"])
        status, _, me = self.http("GET", "/api/v1/session", first)
        self.assertEqual(status, 200, me)
        # A token good for an hour makes a session good for that hour at most, not 7 days.
        self.assertLessEqual(me["expires_at_ms"], made["expires_at_ms"])
        # The session cannot renew itself past it either.
        status, _, code = self.http("POST", "/api/v1/sessions/code", first,
                                    headers={"X-Lathe-CSRF": me["csrf"]}, body={})
        self.assertEqual(status, 201, code)
        second = redeem(code["url"])
        status, _, me2 = self.http("GET", "/api/v1/session", second)
        self.assertEqual(status, 200, me2)
        self.assertLessEqual(me2["expires_at_ms"], made["expires_at_ms"])
        # Revoking the token ends both.
        self.d.cli("token", "rm", made["id"], user=USER_A, env=self.local())
        for cookie in (first, second):
            status, _, body = self.http("GET", "/api/v1/session", cookie)
            self.assertEqual(status, 401, body)

    def test_hosts_the_daemon_does_not_know_are_refused(self):
        cookie, _, _, _ = self.login(USER_A)
        token = self.daemon_token()
        bearer = {"Authorization": "Bearer " + token}
        for host in ("evil.example", f"evil.example:{self.port()}", "localhost.evil.example",
                     f"r1.localhost.evil.example:{self.port()}"):
            for kw in ({"cookie": cookie}, {"headers": bearer}, {}):
                status, _, body = self.http("GET", "/api/v1/status", host=host, **kw)
                self.assertEqual(status, 421, (host, body))
                self.assertEqual(body["msg_id"], "api.host_not_allowed")
                self.assertIn("allowed_hosts", body["error"])
            status, _, _ = self.http("GET", "/ui/", cookie, host=host)
            self.assertEqual(status, 421, host)
        # A run's origin (<run>.localhost) is the proxy's: the API's session
        # cookie and the API itself are not served there (test_proxy.py).
        for kw in ({"cookie": cookie}, {}):
            status, _, body = self.http("GET", "/api/v1/status", host=f"r1.localhost:{self.port()}",
                                        **kw)
            self.assertEqual((status, body["msg_id"]), (401, "proxy.login_needed"), body)
        for host in (f"localhost:{self.port()}", f"127.0.0.1:{self.port()}", "LOCALHOST.",
                     f"[::1]:{self.port()}"):
            status, _, body = self.http("GET", "/api/v1/status", headers=bearer, host=host)
            self.assertEqual(status, 200, (host, body))
        # The CLI over the socket is not concerned.
        self.d.cli("status")

    def test_configured_hosts_are_allowed(self):
        self.d.stop()
        with open(os.path.join(self.d.home, "config.yaml"), "w") as f:
            f.write("allowed_hosts: [lab.example.org]\n")
        self.d.start()
        token = self.daemon_token()
        bearer = {"Authorization": "Bearer " + token}
        status, _, body = self.http("GET", "/api/v1/status", headers=bearer,
                                    host=f"Lab.Example.org:{self.port()}")
        self.assertEqual(status, 200, body)
        status, _, _ = self.http("GET", "/api/v1/status", headers=bearer, host="other.example.org")
        self.assertEqual(status, 421)

    def test_users_see_and_end_only_their_own_sessions(self):
        a, b = self.a, self.b
        cookie_a, _, _, _ = self.login(USER_A)
        sid_a = cookie_a.split("_")[0]
        cookie_b, _, _, _ = self.login(USER_B)
        sid_b = cookie_b.split("_")[0]
        # B cannot make a code for A; B's own code signs B in, as B.
        r = self.ui(USER_B, "--user", USER_A, check=False)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("unix socket", r.stderr)
        status, _, me = self.http("GET", "/api/v1/session", cookie_b)
        self.assertEqual((me["uid"], me["user"]), (b.pw_uid, USER_B))
        status, _, body = self.http("GET", "/api/v1/sessions?all=1", cookie_b)
        self.assertEqual(status, 403, body)
        # Root, on the socket, may sign A in.
        url = json.loads(self.ui(None, "--user", USER_A, "--json").stdout)
        self.assertEqual((url["uid"], url["user"]), (a.pw_uid, USER_A))

        # Listings: each user's own sessions, with the kind and the scope.
        ls_b = json.loads(self.d.cli("token", "ls", "--json", user=USER_B, env=self.local()).stdout)
        self.assertEqual([(s["id"], s["kind"], s["scope"]) for s in ls_b],
                         [(sid_b, "session", "ui")])
        table = self.d.cli("token", "ls", user=USER_A, env=self.local()).stdout
        self.assertIn(sid_a, table)
        self.assertIn("session", table)
        self.assertNotIn(sid_b, table)
        every = json.loads(self.d.cli("token", "ls", "--all", "--json").stdout)
        self.assertEqual({s["id"] for s in every if s["kind"] == "session"}, {sid_a, sid_b})
        self.assertTrue(all("secret_hash" not in s and "csrf" not in s for s in every))

        # B cannot end A's session: not by the CLI, nor with B's cookie.
        r = self.d.cli("token", "rm", sid_a, user=USER_B, env=self.local(), check=False)
        self.assertEqual(r.returncode, 3, r.stderr)
        status, _, body = self.http("DELETE", "/api/v1/sessions/" + sid_a, cookie_b,
                                    headers={"X-Lathe-CSRF": self.csrf(cookie_b)})
        self.assertEqual(status, 404, body)
        status, _, _ = self.http("GET", "/api/v1/runs", cookie_a)
        self.assertEqual(status, 200)

        # A revokes their own: the next request with it is refused.
        r = self.d.cli("token", "rm", sid_a, user=USER_A, env=self.local())
        self.assertIn(sid_a, r.stdout)
        status, _, body = self.http("GET", "/api/v1/runs", cookie_a)
        self.assertEqual(status, 401, body)
        self.assertEqual(body["msg_id"], "session.invalid")
        status, _, _ = self.http("GET", "/api/v1/runs", cookie_b)
        self.assertEqual(status, 200)

    def test_bad_codes_are_rate_limited(self):
        token = self.daemon_token()
        for i in range(10):
            status, _, _ = self.http("GET", "/ui/login?code=" + "%02d" % i * 32)
            self.assertEqual(status, 401, i)
        good = urllib.parse.urlsplit(self.ui(USER_A).stdout.strip())
        status, headers, _ = self.http("GET", good.path + "?" + good.query)
        self.assertEqual(status, 429)
        self.assertIn("Retry-After", headers)
        self.assertNotIn("Set-Cookie", headers)
        status, _, _ = self.http("GET", "/api/v1/status",
                                 headers={"Authorization": "Bearer " + token})
        self.assertEqual(status, 429)
        self.assertNotIn(good.query.split("=", 1)[1], self.logs())


if __name__ == "__main__":
    unittest.main()
