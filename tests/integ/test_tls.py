"""TLS on the daemon's API listener, and `lathe login https://… --ca`.

A CA and a server certificate for 127.0.0.1 are made with the openssl command
in a temporary directory. A daemon serves TLS on loopback (configured: it must
work there too); an unprivileged user logs in with a token of their own and the
CA, then runs, lists and reads logs over TLS. Without the CA the login says the
certificate was not trusted and names --ca; plain HTTP to the TLS port gets no
answer; a listener off loopback without TLS refuses to start, naming tls.cert
and tls.key.
"""
import http.client
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from harness import Daemon, LATHE, second_user, shared_scratch

USER = "lathe-it-tls"


def make_certs(d):
    """ca.pem, server.pem/server.key (IP 127.0.0.1), and other.pem, a CA that signed nothing."""
    script = """
set -e
k() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
k ca.key; k other.key; k server.key
openssl req -x509 -new -key ca.key -subj /CN=LatheTestCA -days 2 -out ca.pem
openssl req -x509 -new -key other.key -subj /CN=Other -days 2 -out other.pem
openssl req -new -key server.key -subj /CN=lathe-test -out server.csr
printf 'subjectAltName=IP:127.0.0.1\\n' > ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -extfile ext -out server.pem 2>/dev/null
chmod 644 ca.pem other.pem
chmod 600 server.key
"""
    subprocess.run(["sh", "-c", script], cwd=d, check=True)


@unittest.skipIf(shutil.which("openssl") is None, "needs the openssl command")
class Tls(unittest.TestCase):
    def setUp(self):
        self.base = shared_scratch(self, "lathe-it-tls-")
        self.certs = os.path.join(self.base, "certs")
        os.mkdir(self.certs, 0o755)
        make_certs(self.certs)
        self.d = Daemon(gpus="none")
        self.addCleanup(self.d.cleanup)
        with open(os.path.join(self.d.home, "config.yaml"), "w") as f:
            f.write(f"tls:\n  cert: {self.cert('server.pem')}\n  key: {self.cert('server.key')}\n")
        self.d.start()

    def cert(self, name):
        return os.path.join(self.certs, name)

    def endpoint(self):
        with open(os.path.join(self.d.home, "endpoint.json")) as f:
            return json.load(f)

    def port(self):
        return int(self.endpoint()["tcp"].rsplit(":", 1)[1])

    def url(self):
        return f"https://127.0.0.1:{self.port()}"

    def user_dir(self, pw, name):
        d = os.path.join(self.base, name)
        os.makedirs(d, exist_ok=True)
        os.chown(d, pw.pw_uid, pw.pw_gid)
        os.chmod(d, 0o700)
        return d

    def remote(self, pw):
        """A user elsewhere: no LATHE_HOME, their own config directory."""
        e = self.d.env(HOME="/tmp", XDG_CONFIG_HOME=self.user_dir(pw, "config"))
        del e["LATHE_HOME"]
        return e

    def token_file(self, pw):
        """A token of `pw`'s own, made on the unix socket, in a file only they read."""
        made = json.loads(self.d.cli("token", "create", "--json", user=pw.pw_name,
                                     env=self.d.env(HOME="/tmp")).stdout)
        path = os.path.join(self.user_dir(pw, "files"), "token")
        with open(path, "w") as f:
            f.write(made["token"] + "\n")
        os.chown(path, pw.pw_uid, pw.pw_gid)
        os.chmod(path, 0o600)
        return path

    def login(self, pw, *args):
        return self.d.cli("login", self.url(), "--token-file", self.token_file(pw), *args,
                          user=pw.pw_name, env=self.remote(pw), check=False)

    def test_endpoint_and_status_say_https(self):
        ep = self.endpoint()
        self.assertTrue(ep["tls"], ep)
        self.assertEqual(ep["url"], f"https://127.0.0.1:{self.port()}")
        status = json.loads(self.d.cli("status", "--json").stdout)
        self.assertEqual((status["tls"], status["url"]), (True, ep["url"]))
        self.assertIn(ep["url"] + "/api/v1", self.d.cli("status").stdout)

    def test_login_with_the_ca_then_run_ps_logs_over_tls(self):
        pw = second_user(self, USER)
        r = self.login(pw, "--ca", self.cert("ca.pem"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("as " + USER, r.stdout)
        self.assertNotIn("warning", r.stderr)
        creds_path = os.path.join(self.remote(pw)["XDG_CONFIG_HOME"], "lathe", "credentials")
        with open(creds_path) as f:
            creds = json.load(f)
        self.assertEqual((creds["url"], creds["ca"]), (self.url(), self.cert("ca.pem")))

        ra = lambda *args, **kw: self.d.cli(*args, user=USER, env=self.remote(pw), **kw)
        status = json.loads(ra("status", "--json").stdout)
        self.assertEqual(status["found_by"], "login")
        self.assertEqual(status["caller"]["user"], USER)
        run = ra("run", "--workdir", "/tmp", "--", "sh", "-c", "echo over-tls; id -u").stdout.strip()
        self.d.wait_state(run, "succeeded")
        ids = [x["id"] for x in json.loads(ra("ps", "--all", "--json").stdout)]
        self.assertIn(run, ids)
        self.assertEqual(ra("logs", run).stdout.split(), ["over-tls", str(pw.pw_uid)])
        followed = ra("logs", "--follow", run).stdout  # a stream over TLS, ended by the run's end
        self.assertIn("over-tls", followed)

    def test_login_without_the_ca_says_the_certificate_was_not_trusted(self):
        pw = second_user(self, USER)
        creds_path = os.path.join(self.remote(pw)["XDG_CONFIG_HOME"], "lathe", "credentials")
        r = self.login(pw)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("not trusted", r.stderr)
        self.assertIn("--ca", r.stderr)
        self.assertFalse(os.path.exists(creds_path))
        other = self.login(pw, "--ca", self.cert("other.pem"))
        self.assertEqual(other.returncode, 1, other.stderr)
        self.assertIn("not trusted", other.stderr)
        self.assertIn(self.cert("other.pem"), other.stderr)
        missing = self.login(pw, "--ca", self.cert("nope.pem"))
        self.assertEqual(missing.returncode, 2, missing.stderr)
        self.assertIn(self.cert("nope.pem"), missing.stderr)
        self.assertFalse(os.path.exists(creds_path))
        zh = self.d.cli("login", self.url(), "--token-file", self.token_file(pw), user=USER,
                        env=dict(self.remote(pw), LATHE_LANG="zh"), check=False)
        self.assertEqual(zh.returncode, 1)
        self.assertIn("不受信任", zh.stderr)

    def test_plain_http_to_the_tls_port_gets_no_answer(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port(), timeout=30)
        with self.assertRaises((http.client.HTTPException, OSError)):
            c.request("GET", "/api/v1/status")
            c.getresponse()
        c.close()
        r = self.d.cli("login", f"http://127.0.0.1:{self.port()}", "--token-file",
                       self.token_file_for_root(), env=self.remote_root(), check=False)
        self.assertNotEqual(r.returncode, 0)

    def token_file_for_root(self):
        path = os.path.join(self.base, "root-token")
        with open(self.d.home + "/token") as src, open(path, "w") as dst:
            dst.write(src.read())
        os.chmod(path, 0o600)
        return path

    def remote_root(self):
        e = self.d.env(XDG_CONFIG_HOME=os.path.join(self.base, "root-config"))
        del e["LATHE_HOME"]
        return e


@unittest.skipIf(shutil.which("openssl") is None, "needs the openssl command")
class ListenerRules(unittest.TestCase):
    """Off loopback the API needs TLS; with it, the daemon starts."""

    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="lathe-it-tls-home-")
        self.addCleanup(shutil.rmtree, self.home, True)
        self.certs = os.path.join(self.home, "certs")
        os.mkdir(self.certs)
        make_certs(self.certs)

    def env(self, **extra):
        e = dict(os.environ, LATHE_HOME=self.home, LANG="C.UTF-8")
        e.pop("LATHE_LANG", None)
        e.pop("LC_ALL", None)
        e.update(extra)
        return e

    def daemon(self, *args, lang=None):
        env = self.env(**({"LATHE_LANG": lang} if lang else {}))
        return subprocess.run([LATHE, "daemon", "--home", self.home, "--gpus", "none",
                               "--port", "0", *args],
                              capture_output=True, text=True, env=env, timeout=60)

    def test_a_listener_off_loopback_without_tls_refuses_to_start(self):
        for lang, word in ((None, "not a loopback"), ("zh", "非回环")):
            r = self.daemon("--host", "0.0.0.0", lang=lang)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("tls.cert", r.stderr)
            self.assertIn("tls.key", r.stderr)
            self.assertIn(word, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.home, "endpoint.json")))
        with open(os.path.join(self.home, "config.yaml"), "w") as f:
            f.write("host: 0.0.0.0\n")
        r = self.daemon()
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("tls.cert", r.stderr)
        # Half of the setting is not TLS either.
        r = self.daemon("--tls-cert", os.path.join(self.certs, "server.pem"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("tls.key", r.stderr)
        # A file that is no certificate is named.
        r = self.daemon("--tls-cert", os.path.join(self.certs, "ext"),
                        "--tls-key", os.path.join(self.certs, "server.key"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(os.path.join(self.certs, "ext"), r.stderr)

    def test_a_listener_off_loopback_with_tls_starts(self):
        log = open(os.path.join(self.home, "daemon.log"), "wb")
        self.addCleanup(log.close)
        proc = subprocess.Popen(
            [LATHE, "daemon", "--home", self.home, "--gpus", "none", "--port", "0",
             "--host", "0.0.0.0", "--tls-cert", os.path.join(self.certs, "server.pem"),
             "--tls-key", os.path.join(self.certs, "server.key")],
            stdout=log, stderr=log, env=self.env())

        def stop():
            proc.terminate()
            proc.wait(timeout=30)
        self.addCleanup(stop)
        status = None
        deadline = time.time() + 60
        while time.time() < deadline and proc.poll() is None:
            r = subprocess.run([LATHE, "status", "--json"], capture_output=True, text=True,
                               env=self.env())
            if r.returncode == 0:
                status = json.loads(r.stdout)
                break
            time.sleep(0.05)
        self.assertIsNotNone(status, "the daemon did not come up")
        self.assertTrue(status["tls"])
        # A wildcard listener is given as loopback, where a client on this machine reaches it.
        self.assertTrue(status["url"].startswith("https://127.0.0.1:"), status["url"])


if __name__ == "__main__":
    unittest.main()
