"""A run's ports isolated in a network namespace of its own (network: isolated).

Two unprivileged users against a root daemon. A port bound on 127.0.0.1 in
the machine's namespace is reachable by every local user (test_proxy.py shows
B connecting to A's port directly). User A's isolated run serves a port in
its own namespace, where only loopback exists: the daemon's proxy enters the
namespace and serves it to A, while B, connecting to 127.0.0.1:PORT from B's
own run or from the host, is refused — nothing listens on that port outside
A's run; B's listener on the same port takes nothing over; a restarted
daemon still finds the namespace. The isolated run has no network beyond its
own loopback, and a daemon not running as root refuses the spec.
"""
import json
import os
import shutil
import socket
import subprocess
import time
import unittest

from harness import Daemon, DaemonTest, LATHE, PY, free_port, second_user, shared_scratch

USER_A = "lathe-it-pxn-a"
USER_B = "lathe-it-pxn-b"
UPSTREAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "proxy_upstream.py")



class ProxyNetns(DaemonTest):
    gpus = "none"

    def setUp(self):
        self.a = second_user(self, USER_A)
        self.b = second_user(self, USER_B)
        super().setUp()
        self.base = shared_scratch(self, "lathe-it-pxn-")
        self.script = os.path.join(self.base, "upstream.py")
        shutil.copy(UPSTREAM, self.script)
        os.chmod(self.script, 0o644)
        r = self.d.cli("token", "create", "--json", user=USER_A, env=self.d.env(HOME="/tmp"))
        self.tok_a = json.loads(r.stdout)["token"]

    def api_port(self):
        with open(os.path.join(self.d.home, "endpoint.json")) as f:
            return int(json.load(f)["tcp"].rsplit(":", 1)[1])

    def request(self, run, token):
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.api_port(), timeout=30)
        c.request("GET", "/hello", headers={"Host": f"{run}.localhost:{self.api_port()}",
                                            "Authorization": f"Bearer {token}"})
        r = c.getresponse()
        data = r.read()
        c.close()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, data

    def as_b(self, code):
        """Runs `code` in a run of B's own (on the host's network) and returns its output."""
        return self.d.cli("run", "--workdir", "/tmp", "--follow", "--", PY, "-c", code,
                          user=USER_B, env=self.d.env(HOME="/tmp"), check=False).stdout

    def test_an_isolated_port_is_served_by_the_proxy_and_refused_to_everyone_directly(self):
        port = free_port()
        run = self.d.submit("--network", "isolated", "--port", str(port), "--workdir", "/tmp",
                            "--", PY, self.script, "tcp", str(port), "isolated",
                            user=USER_A, env=self.d.env(HOME="/tmp"))
        self.d.wait_state(run, "running")
        self.d.wait_for(lambda: "listening" in self.d.logs(run), "the upstream to listen")
        status = json.loads(self.d.cli("status", "--json").stdout)
        self.assertTrue(status["backend"]["capabilities"]["isolated_network"])
        self.assertIn("isolated network", self.d.cli("status").stdout)
        info = self.d.inspect(run)
        self.assertEqual(info["spec"]["network"], "isolated")
        [ep] = info["endpoints"]
        self.assertEqual((ep["kind"], ep["address"]), ("tcp", f"127.0.0.1:{port}"))
        self.assertGreater(ep["netns_pid"], 0)
        # The proxy enters the run's namespace: A gets the page, served as A.
        status, body = self.request(run, self.tok_a)
        self.assertEqual(status, 200, body)
        self.assertEqual((body["label"], body["uid"]), ("isolated", self.a.pw_uid))
        # B connects to 127.0.0.1:PORT directly, from a run of B's own and
        # from the host: refused, nothing listens there outside A's run.
        code = ("import socket\n"
                "try:\n"
                f"    socket.create_connection(('127.0.0.1', {port}), timeout=10)\n"
                "    print('direct connect ok')\n"
                "except OSError as e:\n"
                "    print('direct connect failed:', type(e).__name__)\n")
        out = self.as_b(code)
        self.assertIn("direct connect failed: ConnectionRefusedError", out)
        self.assertNotIn("direct connect ok", out)
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=10)
        # B binding the same port in the host's namespace does not take A's
        # page over: the proxy still reaches A's listener in A's namespace.
        squatter = self.d.submit("--port", str(port), "--workdir", "/tmp", "--",
                                 PY, self.script, "tcp", str(port), "squatter",
                                 user=USER_B, env=self.d.env(HOME="/tmp"))
        self.d.wait_for(lambda: "listening" in self.d.logs(squatter), "B's server to listen")
        status, body = self.request(run, self.tok_a)
        self.assertEqual((status, body["label"]), (200, "isolated"), body)
        # A restarted daemon re-adopts the run and still finds its namespace.
        self.d.stop()
        self.d.start()
        self.d.wait_state(run, "running")
        status, body = self.request(run, self.tok_a)
        self.assertEqual((status, body["label"]), (200, "isolated"), body)

    def test_an_isolated_run_has_only_its_own_loopback(self):
        out = self.d.cli(
            "run", "--network", "isolated", "--workdir", "/tmp", "--follow", "--", PY, "-c",
            "import socket\n"
            "print('interfaces', sorted(n for _, n in socket.if_nameindex()))\n"
            "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
            "socket.create_connection(s.getsockname(), timeout=10); print('own loopback ok')\n"
            "try:\n"
            "    socket.create_connection(('192.0.2.1', 80), timeout=5)\n"
            "except OSError as e:\n"
            "    print('outside:', type(e).__name__, e.errno)\n",
            user=USER_A, env=self.d.env(HOME="/tmp")).stdout
        self.assertIn("interfaces ['lo']", out)
        self.assertIn("own loopback ok", out)
        self.assertIn("outside: OSError 101", out)  # ENETUNREACH: no route leaves it

    def test_a_bad_network_value_names_the_field(self):
        r = self.d.cli("run", "--network", "none", "--", "true", user=USER_A,
                       env=self.d.env(HOME="/tmp"), check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("network", r.stderr)
        self.assertIn("isolated", r.stderr)


class UserModeDaemon(unittest.TestCase):
    def test_a_daemon_not_running_as_root_refuses_an_isolated_run_at_submission(self):
        pw = second_user(self, USER_A)
        d = Daemon(gpus="none")
        self.addCleanup(d.cleanup)
        os.chown(d.home, pw.pw_uid, pw.pw_gid)
        env = d.env(HOME="/tmp")
        d.proc = subprocess.Popen(
            ["setpriv", "--reuid", USER_A, "--regid", USER_A, "--init-groups",
             LATHE, "daemon", "--home", d.home, "--gpus", "none", "--port", "0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.time() + 60
        while d.cli("status", "--json", user=USER_A, env=env, check=False).returncode != 0:
            self.assertIsNone(d.proc.poll(), "the daemon exited")
            self.assertLess(time.time(), deadline, "the daemon did not come up")
            time.sleep(0.05)
        caps = json.loads(d.cli("status", "--json", user=USER_A, env=env).stdout)
        self.assertFalse(caps["backend"]["capabilities"]["isolated_network"])
        for lang, text in (("en", "'network': isolated needs a daemon running as root"),
                           ("zh", "isolated 需要以 root 运行的守护进程")):
            r = d.cli("run", "--network", "isolated", "--", "true", user=USER_A,
                      env=d.env(HOME="/tmp", LATHE_LANG=lang), check=False)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(text, r.stderr)
        self.assertEqual(json.loads(d.cli("ps", "--json", user=USER_A, env=env).stdout), [])


if __name__ == "__main__":
    unittest.main()
