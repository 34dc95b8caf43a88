"""Run ports behind the daemon's reverse proxy, on each run's own origin.

Two unprivileged users against a root daemon. User A's run serves a port
(a loopback TCP port the daemon chose and handed over as $LATHE_PORT_<port>,
or a unix socket); the proxy serves it at
http://<run>.localhost:PORT/ to A (and root), never to B; A's credentials
never reach the upstream; a websocket echoes through it; a unix socket
swapped for a symlink to the daemon's own socket, and the loopback port
chosen for A's run that B bound first, are refused; a port bound on loopback is reachable by B directly
(what docs/security.md warns about).
"""
import base64
import http.client
import json
import os
import shutil
import socket
import time
import unittest

from harness import DaemonTest, PY, second_user, shared_scratch

USER_A = "lathe-it-px-a"
USER_B = "lathe-it-px-b"
UPSTREAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "proxy_upstream.py")



class Proxy(DaemonTest):
    gpus = "none"

    def setUp(self):
        self.a = second_user(self, USER_A)
        self.b = second_user(self, USER_B)
        super().setUp()
        self.base = shared_scratch(self, "lathe-it-px-")
        self.script = os.path.join(self.base, "upstream.py")
        shutil.copy(UPSTREAM, self.script)
        os.chmod(self.script, 0o644)
        self.tok_a = self.token(self.a)
        self.tok_b = self.token(self.b)

    # --- helpers ---

    def token(self, pw):
        r = self.d.cli("token", "create", "--json", user=pw.pw_name, env=self.d.env(HOME="/tmp"))
        return json.loads(r.stdout)["token"]

    def user_dir(self, pw):
        d = os.path.join(self.base, pw.pw_name)
        os.makedirs(d, exist_ok=True)
        os.chown(d, pw.pw_uid, pw.pw_gid)
        os.chmod(d, 0o700)
        return d

    def port(self):
        with open(os.path.join(self.d.home, "endpoint.json")) as f:
            return int(json.load(f)["tcp"].rsplit(":", 1)[1])

    def start_server(self, pw, kind, where, port_flag, label="upstream"):
        run = self.d.submit("--port", port_flag, "--workdir", "/tmp", "--",
                            PY, self.script, kind, str(where), label,
                            user=pw.pw_name, env=self.d.env(HOME="/tmp"))
        self.d.wait_state(run, "running")
        self.d.wait_for(lambda: "listening" in self.d.logs(run), "the upstream to listen")
        return run

    def served_at(self, run, name=None):
        """The loopback port the daemon chose for the run's port `name` (the first)."""
        eps = self.d.inspect(run)["endpoints"]
        ep = next(e for e in eps if name is None or e["name"] == name)
        self.assertEqual(ep["kind"], "tcp")
        return int(ep["address"].rsplit(":", 1)[1])

    def request(self, run, path="/hello", token=None, headers=None, method="GET", body=None,
                port_name=""):
        host = f"{port_name + '.' if port_name else ''}{run}.localhost:{self.port()}"
        h = {"Host": host}
        if token:
            h["Authorization"] = f"Bearer {token}"
        h.update(headers or {})
        c = http.client.HTTPConnection("127.0.0.1", self.port(), timeout=30)
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        try:
            return r.status, json.loads(data), r
        except ValueError:
            return r.status, data, r

    def error_id(self, body):
        return body.get("msg_id") if isinstance(body, dict) else None

    # --- tests ---

    def test_the_owner_reaches_the_port_and_the_upstream_gets_no_credentials(self):
        run = self.start_server(self.a, "tcp", "env:LATHE_PORT_8000", "8000")
        port = self.served_at(run)
        self.assertNotEqual(port, 8000)  # the one the daemon chose, told as $LATHE_PORT_8000
        status, body, resp = self.request(
            run, token=self.tok_a,
            headers={"Cookie": "lathe_session=s3cret-cookie; app=1", "X-Forwarded-For": "6.6.6.6"})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["uid"], self.a.pw_uid)
        self.assertEqual(body["port"], port)
        headers = {k.lower(): v for k, v in body["headers"]}
        self.assertNotIn("authorization", headers)
        self.assertEqual(headers["cookie"], "app=1")
        self.assertEqual(headers["host"], f"127.0.0.1:{port}")
        self.assertEqual(headers["x-forwarded-for"], "127.0.0.1")
        raw = json.dumps(body)
        for secret in (self.tok_a, "s3cret-cookie", "6.6.6.6"):
            self.assertNotIn(secret, raw)
        # The upstream's cookie stays on the run's origin.
        self.assertEqual(resp.getheader("Set-Cookie"), "app=1; Path=/")
        # A POST with a body goes through; the same Origin is fine.
        status, body, _ = self.request(run, "/form", token=self.tok_a, method="POST", body="x=1",
                                       headers={"Origin": f"http://{run}.localhost:{self.port()}"})
        self.assertEqual((status, body["method"], body["body"]), (200, "POST", "x=1"))
    def test_a_login_link_signs_a_browser_in_on_that_runs_origin_only(self):
        run = self.start_server(self.a, "tcp", "env:PORT", "8000")
        other = self.start_server(self.a, "tcp", "env:LATHE_PORT_8080", "8080")
        origin = f"http://{run}.localhost:{self.port()}/"
        url = self.d.cli("open", run, user=USER_A, env=self.d.env(HOME="/tmp")).stdout.strip()
        self.assertTrue(url.startswith(origin + "_lathe/login?code="), url)
        path = url[len(origin) - 1:]
        status, body, resp = self.request(run, path + "&next=/tree")
        self.assertEqual(status, 303, body)
        self.assertEqual(resp.getheader("Location"), "/tree")
        cookie = resp.getheader("Set-Cookie")
        self.assertIn("HttpOnly", cookie)
        self.assertIn("SameSite=Strict", cookie)
        self.assertNotIn("Domain", cookie)  # host-only: this run's origin alone
        value = cookie.split(";", 1)[0]
        self.assertTrue(value.startswith("lathe_run="), cookie)
        # The cookie opens the run's page as A; the upstream never sees it.
        status, body, _ = self.request(run, headers={"Cookie": value + "; app=1"})
        self.assertEqual(status, 200, body)
        self.assertNotIn(value.split("=", 1)[1], json.dumps(body))
        self.assertEqual({k.lower(): v for k, v in body["headers"]}["cookie"], "app=1")
        # The code was single use.
        status, body, _ = self.request(run, path)
        self.assertEqual((status, self.error_id(body)), (401, "proxy.code_invalid"))
        # Another run's origin does not take it, nor does the API.
        status, body, _ = self.request(other, headers={"Cookie": value})
        self.assertEqual(status, 401, body)
        c = http.client.HTTPConnection("127.0.0.1", self.port(), timeout=30)
        c.request("GET", "/api/v1/runs", headers={"Cookie": value.replace("lathe_run", "lathe_session")})
        r = c.getresponse()
        r.read()
        self.assertEqual(r.status, 401)
        # A navigation another site started (the web UI's Open) gets a page of this origin that moves on
        # by itself: the browser sends the SameSite=Strict cookie only on a request this site started.
        url = self.d.cli("open", run, user=USER_A, env=self.d.env(HOME="/tmp")).stdout.strip()
        status, body, resp = self.request(run, url[len(origin) - 1:] + "&next=/a%22b",
                                          headers={"Sec-Fetch-Site": "cross-site"})
        self.assertEqual(status, 200, body)
        self.assertIsNone(resp.getheader("Location"))
        self.assertTrue(resp.getheader("Set-Cookie").startswith("lathe_run="))
        self.assertIn(b'http-equiv="refresh" content="0; url=/a&quot;b"', body)
        self.assertEqual(resp.getheader("Content-Security-Policy"), "default-src 'none'")
        # A code for a run B may not open is not issued.
        r = self.d.cli("open", run, user=USER_B, env=self.d.env(HOME="/tmp"), check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertNotIn("_lathe/login", r.stdout)

    def test_a_login_never_redirects_off_the_runs_origin(self):
        run = self.start_server(self.a, "tcp", "env:PORT", "8000")
        origin = f"http://{run}.localhost:{self.port()}/"
        # A browser drops a tab or a newline from a URL: "/\t/host" would become "//host".
        for nxt in ("/%09/127.0.0.1:5555/x", "/%0A/evil.example/", "/%5Cevil.example", "//evil.example/",
                    "/%7F/x"):
            url = self.d.cli("open", run, user=USER_A, env=self.d.env(HOME="/tmp")).stdout.strip()
            status, body, resp = self.request(run, url[len(origin) - 1:] + "&next=" + nxt)
            self.assertEqual(status, 303, body)
            self.assertEqual(resp.getheader("Location"), "/", nxt)

    def test_everyone_else_is_refused_at_every_path(self):
        run = self.start_server(self.a, "tcp", "env:LATHE_PORT_WEB", "web=8000")
        port = self.served_at(run, "web")
        status, body, _ = self.request(run, "/_lathe/login?code=x", token=self.tok_b)
        self.assertEqual((status, self.error_id(body)), (401, "proxy.code_invalid"))
        for path in ("/", "/hello", "/api/v1/runs", "/_lathe/other"):
            status, body, _ = self.request(run, path, token=self.tok_b)
            if path.startswith("/_lathe/"):  # the daemon's own, never forwarded
                self.assertEqual((status, self.error_id(body)), (404, "api.no_route"))
                continue
            self.assertEqual(status, 403, (path, body))
            self.assertEqual(self.error_id(body), "run.forbidden")
            status, body, _ = self.request(run, path)
            self.assertEqual(status, 401, (path, body))
            self.assertEqual(self.error_id(body), "proxy.login_needed")
        # Another origin's page may not act on the run's page.
        status, body, _ = self.request(run, token=self.tok_a, method="POST", body="",
                                       headers={"Origin": "http://evil.example"})
        self.assertEqual((status, self.error_id(body)), (403, "proxy.bad_origin"))
        # The port by name; an unknown name is a clear error.
        status, body, _ = self.request(run, token=self.tok_a, port_name="web")
        self.assertEqual(status, 200, body)
        status, body, _ = self.request(run, token=self.tok_a, port_name="nope")
        self.assertEqual((status, self.error_id(body)), (404, "proxy.no_port"))
        # A second user connects to the loopback port directly: the kernel lets
        # them (docs/security.md says so); only the proxy checks who asks.
        direct = self.d.cli("run", "--workdir", "/tmp", "--follow", "--", PY, "-c",
                            f"import socket; socket.create_connection(('127.0.0.1', {port})); "
                            "print('direct connect ok')", user=USER_B,
                            env=self.d.env(HOME="/tmp"))
        self.assertIn("direct connect ok", direct.stdout)
        # Once the run ends, its origin serves nothing.
        self.d.cli("stop", run, user=USER_A, env=self.d.env(HOME="/tmp"))
        self.d.wait_state(run, ["stopped", "failed", "succeeded"])
        status, body, _ = self.request(run, token=self.tok_a)
        self.assertEqual((status, self.error_id(body)), (503, "proxy.not_running"))

    def test_a_unix_socket_upstream_and_a_symlink_to_the_daemons_socket(self):
        d = self.user_dir(self.a)
        sock = os.path.join(d, "web.sock")
        run = self.start_server(self.a, "unix", sock, f"web={sock}")
        status, body, _ = self.request(run, token=self.tok_a)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["uid"], self.a.pw_uid)
        # A swaps their socket for a symlink to the daemon's own socket: the
        # root proxy would reach the API as root. It checks the listener's
        # SO_PEERCRED and refuses.
        os.unlink(sock)
        os.symlink(os.path.join(self.d.home, "lathe.sock"), sock)
        self.assertTrue(os.path.exists(sock))
        status, body, _ = self.request(run, "/api/v1/status", token=self.tok_a)
        self.assertEqual((status, self.error_id(body)), (403, "proxy.wrong_owner"), body)
        self.assertNotIn("backend", json.dumps(body))  # no answer of the API's came back

    def test_a_port_another_user_bound_first_is_refused(self):
        # A's run declares a port but never listens on the one chosen for it.
        run = self.d.submit("--port", "8000", "--workdir", "/tmp", "--", "sleep", "300",
                            user=USER_A, env=self.d.env(HOME="/tmp"))
        self.d.wait_state(run, "running")
        port = self.served_at(run)
        # B binds it first, from a run of B's own (a port is found by trying,
        # or read from /proc/net/tcp once the program bound it).
        squatter = self.start_server(self.b, "tcp", port, "9000", label="squatter")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            self.assertIn(b"squatter", s.makefile("rb").read())  # B's server holds A's port
        status, body, _ = self.request(run, token=self.tok_a)
        self.assertEqual((status, self.error_id(body)), (403, "proxy.wrong_owner"), body)
        self.assertNotIn("squatter", json.dumps(body))
        # `lathe inspect` tells A which layer: another user holds the port.
        [p] = self.d.inspect(run)["ports"]
        self.assertEqual(p["state"], "wrong_owner")
        self.assertEqual(p["error"]["args"]["uid"], str(self.b.pw_uid))
        self.assertIsNotNone(squatter)

    def test_a_port_another_user_bound_first_serves_root_nothing_either(self):
        # Root's run declares a port but never listens on the one chosen for it.
        run = self.d.submit("--port", "8000", "--workdir", "/tmp", "--", "sleep", "300")
        self.d.wait_state(run, "running")
        port = self.served_at(run)
        # B binds it first and would serve root's browser on root's run origin.
        self.start_server(self.b, "tcp", port, "9000", label="squatter")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            self.assertIn(b"squatter", s.makefile("rb").read())
        root_token = json.loads(self.d.cli("token", "create", "--json").stdout)["token"]
        status, body, _ = self.request(run, token=root_token)
        self.assertEqual((status, self.error_id(body)), (403, "proxy.wrong_owner"), body)
        self.assertNotIn("squatter", json.dumps(body))
        [p] = self.d.inspect(run)["ports"]
        self.assertEqual(p["state"], "wrong_owner")
        self.assertEqual(p["error"]["args"]["uid"], str(self.b.pw_uid))

    def open_ws(self, run, token):
        s = socket.create_connection(("127.0.0.1", self.port()), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall((f"GET /ws HTTP/1.1\r\nHost: {run}.localhost:{self.port()}\r\n"
                   f"Authorization: Bearer {token}\r\nUpgrade: websocket\r\n"
                   f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                   f"Sec-WebSocket-Version: 13\r\n"
                   f"Origin: http://{run}.localhost:{self.port()}\r\n\r\n").encode())
        f = s.makefile("rb")
        status = f.readline().decode()
        self.assertIn(" 101 ", status)
        while f.readline() not in (b"\r\n", b""):
            pass
        return s, f

    def echo(self, s, f, text):
        """Sends `text` as one masked text frame; the payload of the frame that comes back."""
        mask = os.urandom(4)
        n = len(text)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                                bytes([0x80 | 126]) + n.to_bytes(2, "big") if n < 65536 else
                                bytes([0x80 | 127]) + n.to_bytes(8, "big"))
        s.sendall(head + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(text)))
        b1, b2 = f.read(2)
        m = b2 & 0x7F
        if m == 126:
            m = int.from_bytes(f.read(2), "big")
        elif m == 127:
            m = int.from_bytes(f.read(8), "big")
        return f.read(m)

    def test_a_websocket_opened_through_a_share_closes_when_it_is_taken_back(self):
        run = self.start_server(self.a, "tcp", "env:PORT", "8000")
        self.d.cli("share", run, "--user", USER_B, "--role", "use", user=USER_A)
        s, f = self.open_ws(run, self.tok_b)
        self.assertEqual(self.echo(s, f, b"hi"), b"echo:hi")
        owner_s, owner_f = self.open_ws(run, self.tok_a)
        self.d.cli("unshare", run, "--user", USER_B, user=USER_A)
        # Bob's tunnel is closed by the daemon: his next read sees the end.
        s.settimeout(30)
        self.assertEqual(f.read(1), b"")
        s.close()
        status, body, _ = self.request(run, token=self.tok_b)
        self.assertEqual(status, 403, body)
        # The owner's stays open.
        self.assertEqual(self.echo(owner_s, owner_f, b"still"), b"echo:still")
        owner_s.close()

    def test_a_websocket_echoes_through_the_proxy(self):
        run = self.start_server(self.a, "tcp", "env:PORT", "8000")
        s, f = self.open_ws(run, self.tok_a)
        for text in (b"hello", b"x" * 70000):
            self.assertEqual(self.echo(s, f, text), b"echo:" + text)
        s.close()


if __name__ == "__main__":
    unittest.main()
