"""The web UI: how the daemon serves it, its catalog, and the UI in a real browser.

Serving (always): every /ui/<page> is the same index.html (no-store, a CSP that
allows only the origin's own script, never framed) with no inline script; the
hashed assets are cached for a year and gzip-encoded when asked; none needs a
credential; an unknown asset is 404; the first load stays under 250 KB
compressed. The catalog: every web.* text is in both languages.

Browser (skipped without /usr/bin/chromium or web/node_modules): a second user
signs in with a one-time code and tests/web/ui.spec.mjs drives the pages —
see that file for the steps. Screenshots go to build/test-artifacts/web/.
Made here for it, as that user: a finished run whose log is replaced by
BIG_LINES lines (CRI records, one of them the needle a search finds), a run
that wrote a checkpoint (captured when it ended) and a directory of the
user's to restore it into, and a run that failed with a CUDA out-of-memory
line (the daemon's diagnosis), a model registered from the checkpoint and a command deployment; and a
model of three versions with a process handler (SERVED: 1 and 2 load, BROKEN: 3 does not), which the
browser deploys from the Deployments page's form, rolls out and back, and sees rolled back with its
failed replica's reason. A third user (USER2, unprivileged too) signs in from the spec in a second browser
context to see what the browser's user shares with it (a deployment, a model, a run) and a project it
is made a member of, exactly as its role says; root signs in too, an admin with the owner's controls on
that project, whose limits (quotas.projects) the Overview shows beside its usage.
"""
import gzip
import http.client
import json
import os
import pwd
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
import image_fixture  # noqa: E402
import yaml  # noqa: E402
from test_deploy_command import APP  # noqa: E402

SOURCE = os.environ.get("LATHE_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
NODE_MODULES = os.path.join(SOURCE, "web", "node_modules")
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = os.path.join(os.path.dirname(os.path.abspath(harness.LATHE)), "test-artifacts", "web")
USER = "lathe-it-web"
USER2 = "lathe-it-web2"
FIRST_LOAD_LIMIT = 250_000
BIG_LINES = 1_000_000
# The limits of the project the browser creates (webproj), shown beside its usage.
PROJECT_LIMITS = {"gpus": 2, "gpu_hours": 100, "period": "7d"}
NEEDLE_LINE = 777_777
TS = "2026-11-29T18:30:00.123456789Z"
# A process handler (docs/serving.md) that answers which version it is, and one that cannot load.
SERVED = "def load(model_dir):\n    return {}\n\n\ndef predict(batch, model):\n    return [{'v': V} for _ in batch]\n"
BROKEN = "def load(model_dir):\n    raise RuntimeError('this version cannot load')\n\n\ndef predict(batch, model):\n    return []\n"


def catalog():
    with open(os.path.join(SOURCE, "data", "messages_ui.yaml")) as f:
        entries = yaml.safe_load(f)
    return {e["id"]: e["text"] for e in entries if e["id"].startswith("web.")}


def big_line(i):
    return "NEEDLE in the haystack" if i == NEEDLE_LINE else f"line {i:07d} of the big log"


def write_big_log(path, lines):
    """BIG_LINES CRI records, written in blocks (about 55 MB in a second or two)."""
    with open(path, "w") as f:
        block = 50_000
        for start in range(0, lines, block):
            f.write("".join(f"{TS} stdout F {big_line(i)}\n" for i in range(start, min(lines, start + block))))


def port(d):
    with open(os.path.join(d.home, "endpoint.json")) as f:
        return int(json.load(f)["tcp"].rsplit(":", 1)[1])


def get(d, path, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port(d), timeout=30)
    c.request("GET", path, headers={"Host": f"localhost:{port(d)}", **(headers or {})})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, r.headers, body


class Catalog(unittest.TestCase):
    def test_every_text_is_in_both_languages(self):
        holes = re.compile(r"\{(\w+)\}")
        texts = catalog()
        self.assertGreater(len(texts), 50)
        for id_, text in texts.items():
            self.assertTrue(text.get("en") and text.get("zh"), f"{id_} is in one language only")
            self.assertEqual(sorted(holes.findall(text["en"])), sorted(holes.findall(text["zh"])),
                             f"{id_}: placeholders differ")

    def test_every_id_the_sources_name_is_in_the_catalog(self):
        texts = catalog()
        named = set()
        for root, _, files in os.walk(os.path.join(SOURCE, "web", "src")):
            for name in files:
                with open(os.path.join(root, name)) as f:
                    named |= set(re.findall(r'"(web\.[a-z_]+(?:\.[a-z_]+)+)"', f.read()))
        self.assertTrue(named)
        self.assertEqual(sorted(named - texts.keys()), [])


class Serving(harness.DaemonTest):
    gpus = "none"

    def test_pages_assets_and_headers(self):
        status, h, index = get(self.d, "/ui/")
        self.assertEqual(status, 200)
        self.assertEqual(h["Content-Type"], "text/html; charset=utf-8")
        self.assertEqual(h["Cache-Control"], "no-store")
        csp = h["Content-Security-Policy"]
        for directive in ("default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"):
            self.assertIn(directive, csp)
        self.assertNotIn("unsafe-inline", csp)
        self.assertEqual((h["X-Frame-Options"], h["X-Content-Type-Options"]), ("DENY", "nosniff"))
        html = index.decode()
        scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S)
        self.assertEqual(len(scripts), 1, html)
        self.assertIn('src="/ui/assets/app-', scripts[0][0])
        self.assertEqual(scripts[0][1].strip(), "")  # no inline script
        # Every page of the client's router is the same file, with no credential.
        for page in ("/ui/runs", "/ui/runs/r0123456789", "/ui/overview/x?y=1"):
            status, _, body = get(self.d, page)
            self.assertEqual((status, body), (200, index), page)
        status, h, _ = get(self.d, "/ui")
        self.assertEqual((status, h["Location"]), (303, "/ui/"))

        first_load = len(gzip.compress(index))
        assets = re.findall(r'(?:src|href)="(/ui/assets/[^"]+)"', html)
        self.assertEqual(sorted(a.rsplit(".", 1)[1] for a in assets), ["css", "js"])
        for a in assets:
            self.assertRegex(a, r"^/ui/assets/app-[A-Z0-9]{8}\.(js|css)$")
            status, h, plain = get(self.d, a)
            self.assertEqual(status, 200, a)
            self.assertNotIn("Content-Encoding", h)
            self.assertEqual(h["Cache-Control"], "public, max-age=31536000, immutable")
            self.assertEqual(h["X-Content-Type-Options"], "nosniff")
            want = "text/javascript" if a.endswith(".js") else "text/css"
            self.assertEqual(h["Content-Type"], want + "; charset=utf-8")
            status, h, packed = get(self.d, a, {"Accept-Encoding": "gzip, deflate, br"})
            self.assertEqual((status, h["Content-Encoding"], h["Vary"]), (200, "gzip", "Accept-Encoding"))
            self.assertEqual(gzip.decompress(packed), plain)
            self.assertLess(len(packed), len(plain))
            first_load += len(packed)
        self.assertLess(first_load, FIRST_LOAD_LIMIT)
        for missing in ("/ui/assets/app-00000000.js", "/ui/assets/index.html", "/ui/assets/"):
            status, h, _ = get(self.d, missing)
            self.assertEqual(status, 404, missing)
            self.assertEqual(h["Cache-Control"], "no-store")

    def test_lathe_ui_print(self):
        r = self.d.cli("ui", "--print")
        self.assertRegex(r.stdout.strip(), r"^http://localhost:\d+/ui/login\?code=[0-9a-f]{64}$")
        r = self.d.cli("ui", "--print", "--browser", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)


@unittest.skipUnless(os.access(CHROMIUM, os.X_OK), "needs Debian's chromium (scripts/deps.sh)")
@unittest.skipUnless(os.path.isdir(os.path.join(NODE_MODULES, "playwright-core")),
                     "needs web/node_modules (scripts/web-deps.sh)")
class Browser(unittest.TestCase):
    def setUp(self):
        harness.second_user(self, USER)
        harness.second_user(self, USER2)
        self.d = harness.Daemon(gpus="sim:2x24GB")
        # The charts draw what the simulated GPUs report from this file, sampled every 200 ms.
        self.load = os.path.join(self.d.home, "load.json")
        self.d.gpus = "sim:2x24GB@" + self.load
        with open(os.path.join(self.d.home, "config.yaml"), "w") as f:
            f.write("telemetry: {interval: 200ms}\n")
            f.write(f"quotas:\n  projects:\n    webproj: {json.dumps(PROJECT_LIMITS)}\n")
        self.d.start()
        self.addCleanup(self.d.cleanup)
        # Before the daemon's home goes: the form's run in an image, if any.
        self.addCleanup(image_fixture.reset_store, self.d.home)

    def test_ui(self):
        d = self.d
        env = d.env(HOME="/tmp")
        # Root's run: another user's for the browser's user.
        other = d.submit("--name", "roots-run", "--workdir", "/tmp", "--", "sleep", "300")
        d.wait_state(other, "running")
        # The user's runs the pages show: a 1,000,000-line log, a checkpoint, a diagnosis.
        big = d.submit("--name", "big-log", "--workdir", "/tmp", "--", "true", user=USER, env=env)
        big_run = d.wait_state(big, "succeeded")
        write_big_log(os.path.join(big_run["run_dir"], "log"), BIG_LINES)
        work = tempfile.mkdtemp(prefix="lathe-web-")
        self.addCleanup(subprocess.run, ["rm", "-rf", work])
        pw = pwd.getpwnam(USER)
        os.chown(work, pw.pw_uid, pw.pw_gid)
        ckpt_dir = os.path.join(work, "ckpt")
        ckpt = d.submit("--name", "with-checkpoint", "--workdir", "/tmp", "--checkpoint-dir", ckpt_dir, "--",
                        "sh", "-c", f"mkdir -p {ckpt_dir} && printf weights-v1 > {ckpt_dir}/model.pt",
                        user=USER, env=env)
        d.wait_state(ckpt, "succeeded")
        d.wait_for(lambda: [e for e in d.inspect(ckpt)["events"] if e["type"] == "checkpoint"],
                   "the checkpoint captured at the end")
        # A model registered from that checkpoint, with an alias: the Models page's versions and lineage.
        d.cli("model", "create", "web-model", "--from", ckpt, user=USER, env=env)
        d.cli("model", "alias", "web-model", "prod", "1", user=USER, env=env)
        # web-served/1 and /2 serve, /3 cannot load: the versions the browser deploys, rolls out and back.
        for v, handler in ((1, SERVED.replace("V", "1")), (2, SERVED.replace("V", "2")), (3, BROKEN)):
            src = os.path.join(work, f"served-{v}")
            os.mkdir(src)
            with open(os.path.join(src, "handler.py"), "w") as f:
                f.write(handler)
            for path in (src, os.path.join(src, "handler.py")):
                os.chown(path, pw.pw_uid, pw.pw_gid)
            d.cli("model", "create", "web-served", "--from-dir", src, "--handler", "handler.py", user=USER, env=env)
        # A command deployment of one replica (a small HTTP server): the Deployments page's detail.
        d.cli("deploy", "create", "web-app", "--port", "18459", "--ready", "/health", "--workdir", "/tmp", "--wait", "--",
              harness.PY, "-c", APP, "v1", user=USER, env=env)
        # ... whose program changed once (rev-2): the page rolls it back to rev-1's.
        d.cli("deploy", "update", "web-app", "--", harness.PY, "-c", APP, "v2", user=USER, env=env)
        d.wait_for(lambda: json.loads(d.cli("deploy", "show", "web-app", "--json", user=USER, env=env).stdout)
                   .get("version") == "rev-2" or None, "web-app serving rev-2", 90)
        failed = d.submit("--name", "oom", "--workdir", "/tmp", "--", "sh", "-c",
                          "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB'; exit 1",
                          user=USER, env=env)
        d.wait_state(failed, "failed")
        d.wait_for(lambda: [e for e in d.inspect(failed)["events"] if e["type"] == "diagnosis"], "the diagnosis")
        # A run on a GPU whose scripted load the charts must show: 87 % then 55 %, 12 GB.
        gpu_run = d.submit("--name", "on-a-gpu", "--gpus", "1", "--workdir", "/tmp", "--", "sleep", "300",
                           user=USER, env=env)
        gpu = d.wait_state(gpu_run, "running")["gpus"][0]

        def script(util):
            with open(self.load + ".tmp", "w") as f:
                json.dump({"gpus": [{"index": gpu, "utilization_gpu_pct": util, "memory_used_bytes": "12GB"}]}, f)
            os.rename(self.load + ".tmp", self.load)

        def sampled(util):
            r = d.cli("inspect", gpu_run, "--metrics", "--json", check=False)
            if r.returncode != 0:
                return False
            g = json.loads(r.stdout)["gpus"]
            return bool(g) and g[0]["utilization_pct"] and g[0]["utilization_pct"][-1] == util

        script(87)
        d.wait_for(lambda: sampled(87), "the scripted 87 %")
        script(55)
        d.wait_for(lambda: sampled(55), "the scripted 55 %")
        # An image of the user's, for the run form's image list (where podman works).
        image = ""
        if image_fixture.have_podman():
            shared = harness.shared_scratch(self, "lathe-web-img-")
            d.cli("image", "import", "webbb", image_fixture.busybox_tar(shared), user=USER, env=env)
            image = "webbb:latest"
        api_token = json.loads(d.cli("token", "create", "--json", user=USER, env=env).stdout)["token"]
        url = d.cli("ui", "--print", user=USER, env=env).stdout.strip()
        as_user = ["setpriv", "--reuid", USER, "--regid", USER, "--init-groups", harness.LATHE]
        as_user2 = ["setpriv", "--reuid", USER2, "--regid", USER2, "--init-groups", harness.LATHE]
        config = {
            "login_url": url, "user": USER, "other_run": other, "artifacts": ARTIFACTS,
            "chromium": CHROMIUM, "node_modules": NODE_MODULES, "catalog": catalog(),
            "lathe": as_user, "user2": USER2, "lathe2": as_user2,
            "big_run": big, "big_lines": BIG_LINES, "needle_line": NEEDLE_LINE,
            "needle_text": big_line(NEEDLE_LINE), "last_text": big_line(BIG_LINES - 1),
            "first_text": big_line(0), "middle_line": BIG_LINES // 2, "middle_text": big_line(BIG_LINES // 2),
            "gpu_run": gpu_run, "api_token": api_token, "ckpt_run": ckpt, "model": "web-model", "deployment": "web-app", "served_model": "web-served", "restore_to": os.path.join(work, "restored"), "failed_run": failed,
            "image": image, "notebook_dir": work,
            "lathe_admin": [harness.LATHE], "project_limits": PROJECT_LIMITS,
        }
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(config, f)
        self.addCleanup(os.unlink, f.name)
        spec = os.path.join(SOURCE, "tests", "web", "ui.spec.mjs")
        r = subprocess.run(["node", spec, f.name], capture_output=True, text=True, timeout=300,
                           env={**env, "LATHE_HOME": d.home})
        print(r.stdout, file=sys.stderr)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr + "\n" + d.daemon_log())
        for name in ("overview-en", "runs-en", "runs-zh", "snapshots-zh", "notebooks-en", "run-log-en",
                     "run-log-zh", "run-checkpoint-en", "run-failed-zh", "models-zh", "deployments-en",
                     "deployment-form-en", "deployment-rolled-back-en", "deployment-form-zh",
                     "shared-with-user2-en", "projects-user2-en", "model-shared-zh"):
            self.assertTrue(os.path.getsize(os.path.join(ARTIFACTS, name + ".png")) > 0, name)


if __name__ == "__main__":
    unittest.main()
