"""A run's ports: where the daemon tells the program to listen, and why a
port does not answer (docs/ports.md).

An unprivileged user against a root daemon. A run declaring port 8000 is told
a free loopback port the daemon chose ($LATHE_PORT_8000, $PORT); a real
python3 http.server listening there is reachable through the proxy on the
run's origin with a bearer token, and a websocket client echoes through it.
A run that listens on the declared port on every interface instead gets the
layered explanation naming what it listens on, in the proxy's page, in
`lathe inspect --json` and in `lathe inspect`; a run without a listener gets
"nothing listens"; `lathe ps` prints the main port's URL.
"""
import http.client
import json
import os
import shutil
import unittest

from harness import DaemonTest, PY, free_port, second_user, shared_scratch

USER = "lathe-it-ports"
UPSTREAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "proxy_upstream.py")


class Ports(DaemonTest):
    gpus = "none"

    def setUp(self):
        self.pw = second_user(self, USER)
        super().setUp()
        self.base = shared_scratch(self, "lathe-it-ports-")
        self.script = os.path.join(self.base, "upstream.py")
        shutil.copy(UPSTREAM, self.script)
        os.chmod(self.script, 0o644)
        r = self.d.cli("token", "create", "--json", user=USER, env=self.env())
        self.token = json.loads(r.stdout)["token"]

    def env(self, **kw):
        return self.d.env(HOME="/tmp", **kw)

    def api_port(self):
        with open(os.path.join(self.d.home, "endpoint.json")) as f:
            return int(json.load(f)["tcp"].rsplit(":", 1)[1])

    def submit(self, *args):
        return self.d.submit(*args, user=USER, env=self.env())

    def request(self, run, path="/"):
        c = http.client.HTTPConnection("127.0.0.1", self.api_port(), timeout=30)
        c.request("GET", path, headers={"Host": f"{run}.localhost:{self.api_port()}",
                                        "Authorization": f"Bearer {self.token}"})
        r = c.getresponse()
        data = r.read()
        c.close()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, data

    def port_of(self, run):
        [p] = self.d.inspect(run)["ports"]
        return p

    def test_a_run_serving_on_its_lathe_port_is_reached_through_the_proxy(self):
        site = os.path.join(self.base, "site")
        os.makedirs(site)
        with open(os.path.join(site, "hello.txt"), "w") as f:
            f.write("hello from the run\n")
        os.chmod(site, 0o755)
        run = self.submit(
            "--port", "8000", "--workdir", site, "--", "sh", "-c",
            'echo "env $LATHE_PORT_8000 $PORT"; '
            f'exec {PY} -m http.server --bind 127.0.0.1 "$LATHE_PORT_8000"')
        self.d.wait_state(run, "running")
        self.d.wait_for(lambda: self.port_of(run)["state"] == "listening", "the server to listen")
        p = self.port_of(run)
        chosen = int(p["address"].rsplit(":", 1)[1])
        self.assertNotEqual(chosen, 8000)
        self.assertEqual((p["name"], p["env"], p["declared_port"]), ("p8000", "LATHE_PORT_8000", 8000))
        self.assertEqual(p["url"], f"http://{run}.localhost:{self.api_port()}/")
        self.assertEqual(p["listening"], [f"127.0.0.1:{chosen}"])
        self.assertNotIn("error", p)
        self.assertIn(f"env {chosen} {chosen}", self.d.logs(run))  # $LATHE_PORT_8000 = $PORT
        status, body = self.request(run, "/hello.txt")
        self.assertEqual((status, body), (200, b"hello from the run\n"))
        # The proxy remembers an admission a moment (run_origin_cache.h); a
        # token revoked stops opening the port all the same.
        other = json.loads(self.d.cli("token", "create", "--json", user=USER,
                                      env=self.env()).stdout)
        good = self.token
        self.token = other["token"]
        self.assertEqual(self.request(run, "/hello.txt")[0], 200)
        self.d.cli("token", "rm", other["id"], user=USER, env=self.env())
        self.d.wait_for(lambda: self.request(run, "/hello.txt")[0] == 401,
                        "the revoked token to be refused")
        self.token = good
        # The printed forms: the URL in `lathe ps`, the port and the loopback
        # warning in `lathe inspect`.
        ps = self.d.cli("ps", user=USER, env=self.env()).stdout
        self.assertIn("URL", ps)
        self.assertIn(p["url"], ps)
        text = self.d.cli("inspect", run, user=USER, env=self.env()).stdout
        self.assertIn(f"p8000  {p['url']}  127.0.0.1:{chosen} ($LATHE_PORT_8000)  listening", text)
        self.assertIn("every local user can connect to a loopback port", text)
        self.assertIn("--network isolated", text)
        zh = self.d.cli("inspect", run, user=USER, env=self.env(LATHE_LANG="zh")).stdout
        self.assertIn("正在监听", zh)
        # Once the run has ended, its port is not running.
        self.d.cli("stop", run, user=USER, env=self.env())
        self.d.wait_state(run, ["stopped", "failed", "succeeded"])
        p = self.port_of(run)
        self.assertEqual((p["state"], p["error"]["msg_id"]), ("not_running", "ports.not_running"))

    def test_a_websocket_client_echoes_through_the_proxy(self):
        import websocket  # python3-websocket
        run = self.submit("--port", "8000", "--workdir", "/tmp", "--",
                          PY, self.script, "tcp", "env:LATHE_PORT_8000")
        self.d.wait_state(run, "running")
        self.d.wait_for(lambda: "listening" in self.d.logs(run), "the upstream to listen")
        origin = f"{run}.localhost:{self.api_port()}"
        ws = websocket.create_connection(
            f"ws://127.0.0.1:{self.api_port()}/ws", host=origin, origin=f"http://{origin}",
            header=[f"Authorization: Bearer {self.token}"], timeout=30)
        try:
            for text in ("hello", "x" * 70000):
                ws.send(text)
                self.assertEqual(ws.recv(), "echo:" + text)
        finally:
            ws.close()

    def test_a_run_listening_on_the_wrong_port_is_told_what_it_listens_on(self):
        declared = free_port()
        # It ignores $LATHE_PORT_<declared> and binds the declared port on
        # every interface.
        run = self.submit("--port", str(declared), "--workdir", "/tmp", "--",
                          PY, "-c",
                          "import socket, time\n"
                          "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                          f"s.bind(('0.0.0.0', {declared})); s.listen()\n"
                          "print('bound', flush=True); time.sleep(300)\n")
        self.d.wait_state(run, "running")
        self.d.wait_for(lambda: "bound" in self.d.logs(run), "the program to bind")
        p = self.port_of(run)
        env = f"LATHE_PORT_{declared}"
        self.assertEqual(p["state"], "elsewhere")
        self.assertEqual(p["listening"], [f"0.0.0.0:{declared}"])
        # The proxy's page says which layer failed.
        status, err = self.request(run)
        self.assertEqual(status, 503, err)
        self.assertEqual(err["msg_id"], "ports.elsewhere")
        self.assertEqual(err["args"]["layer"], "elsewhere")
        self.assertEqual(err["args"]["listening"], f"0.0.0.0:{declared}")
        self.assertEqual(err["args"]["env"], env)
        self.assertIn(f"listens on 0.0.0.0:{declared}, not on {p['address']} (${env})", err["en"])
        self.assertIn(f"listen on ${env}", err["en"])
        self.assertIn("lathe doctor --only network", err["en"])  # a client's proxy variables
        self.assertIn(f"0.0.0.0:{declared}", err["zh"])
        # `lathe inspect` gives the same explanation.
        text = self.d.cli("inspect", run, user=USER, env=self.env()).stdout
        self.assertIn(f"elsewhere: the run listens on 0.0.0.0:{declared}", text)
        self.assertIn(f"not on {p['address']} (${env})", text)

    def test_a_run_without_a_listener_yet_is_told_nothing_listens(self):
        run = self.submit("--port", "8000", "--workdir", "/tmp", "--", "sleep", "300")
        self.d.wait_state(run, "running")
        p = self.port_of(run)
        self.assertEqual((p["state"], p["listening"]), ("not_listening", []))
        status, body = self.request(run)
        self.assertEqual(status, 503, body)
        self.assertEqual(body["msg_id"], "ports.not_listening")
        self.assertIn(f"nothing listens on {p['address']} yet", body["en"])
        self.assertIn("$LATHE_PORT_8000", body["en"])
        text = self.d.cli("inspect", run, user=USER, env=self.env()).stdout
        self.assertIn("not yet: nothing listens", text)
        # A client whose proxy variables capture localhost is told so.
        text = self.d.cli("inspect", run, user=USER,
                          env=self.env(http_proxy="http://proxy.example:3128")).stdout
        self.assertIn("your environment sets http_proxy", text)
        self.assertIn("lathe doctor --only network", text)


if __name__ == "__main__":
    unittest.main()
