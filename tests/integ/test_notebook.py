"""Notebooks against real Jupyter (Debian's jupyter-notebook and IRkernel).

An unprivileged user starts a notebook on a simulated GPU and opens its
one-time link with a real HTTP client; a Python cell run over the kernel's
websocket through the proxy prints the run's CUDA_VISIBLE_DEVICES, an R cell
prints its answer; a second user gets 403 at every proxied path, guessing
the token or not; the token is on no process's command line, nor in any page
the owner gets. The kernels listen on unix sockets in the notebook's own
directory: a second user finds none it can connect to and hears no cell. Idle stop is
asserted on events: a busy but silent cell and a GPU the scripted load shows
busy keep a notebook; an open but silent websocket does not. A notebook
survives kill -9 of the daemon with its kernel's state. Bad input is refused
before anything runs.
"""
import http.client
import json
import os
import shutil
import subprocess
import time
import unittest
import uuid

import websocket

from harness import Daemon, PY, second_user, shared_scratch

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel_probe.py")

USER_A = "lathe-it-nb-a"
USER_B = "lathe-it-nb-b"


def have_jupyter():
    return shutil.which("jupyter-notebook") is not None


@unittest.skipUnless(have_jupyter(), "needs jupyter-notebook (scripts/deps.sh installs it)")
class Notebook(unittest.TestCase):
    idle = None  # config.yaml notebooks: for the class

    def setUp(self):
        self.kernel_names = {}
        self.a = second_user(self, USER_A)
        self.b = second_user(self, USER_B)
        self.base = shared_scratch(self, "lathe-it-nb-")
        self.load = os.path.join(self.base, "load.json")
        self.d = Daemon(gpus="sim:2x24GB@" + self.load)
        with open(os.path.join(self.d.home, "config.yaml"), "w") as f:
            f.write("notebooks: {poll: 200ms}\n")
        self.d.start()
        self.addCleanup(self.d.cleanup)
        self.work = os.path.join(self.base, "work")
        os.makedirs(self.work)
        os.chown(self.work, self.a.pw_uid, self.a.pw_gid)
        self.tok_b = json.loads(self.d.cli("token", "create", "--json", user=USER_B,
                                           env=self.d.env(HOME="/tmp")).stdout)["token"]

    # --- helpers ---

    def env_a(self):
        return self.d.env(HOME=self.work)

    def port(self):
        with open(os.path.join(self.d.home, "endpoint.json")) as f:
            return int(json.load(f)["tcp"].rsplit(":", 1)[1])

    def start(self, *flags):
        r = subprocess_cli(self.d, ["notebook", "start", "--wait", *flags], USER_A, self.env_a(),
                           self.work)
        self.assertEqual(r.returncode, 0, r.stderr + self.d.daemon_log())
        url = r.stdout.strip().splitlines()[-1]
        run = url.split("//", 1)[1].split(".", 1)[0]
        return run, url

    def host(self, run):
        return f"{run}.localhost:{self.port()}"

    def sign_in(self, url):
        """Redeems a one-time link as a browser would: the run origin's cookie."""
        hostport, path = url.split("//", 1)[1].split("/", 1)
        c = http.client.HTTPConnection("127.0.0.1", self.port(), timeout=30)
        c.request("GET", "/" + path, headers={"Host": hostport})
        r = c.getresponse()
        r.read()
        self.assertEqual(r.status, 303, r.getheaders())
        return r.getheader("Set-Cookie").split(";", 1)[0]

    def fresh_cookie(self, run):
        r = self.d.cli("notebook", "open", run, user=USER_A, env=self.env_a())
        return self.sign_in(r.stdout.strip())

    def request(self, run, method, path, cookie=None, token=None, body=None):
        h = {"Host": self.host(run)}
        if cookie:
            h["Cookie"] = cookie
        if token:
            h["Authorization"] = "Bearer " + token
        if body is not None:
            h["Content-Type"] = "application/json"
        c = http.client.HTTPConnection("127.0.0.1", self.port(), timeout=60)
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        return r.status, r.read()

    def kernel(self, run, cookie, name="python3"):
        st, body = self.request(run, "POST", "/api/kernels", cookie=cookie,
                                body=json.dumps({"name": name}))
        self.assertEqual(st, 201, body)
        kid = json.loads(body)["id"]
        self.kernel_names[kid] = name
        return kid

    def channels(self, run, cookie, kernel, warm=True):
        ws = websocket.create_connection(
            f"ws://127.0.0.1:{self.port()}/api/kernels/{kernel}/channels",
            host=self.host(run), origin=f"http://{self.host(run)}", cookie=cookie, timeout=120)
        # A new kernel's first output can go out before its iopub channel is
        # subscribed: a cell that prints, until its output arrives.
        for _ in range(20):
            if warm and self.execute(ws, "print('ready')" if kernel_is_python(self, kernel)
                                     else "cat('ready')").strip() == "ready":
                break
            if not warm:
                break
            time.sleep(0.2)
        return ws

    def execute(self, ws, code, wait=True):
        msg_id = uuid.uuid4().hex
        ws.send(json.dumps({
            "header": {"msg_id": msg_id, "username": "t", "session": uuid.uuid4().hex,
                       "msg_type": "execute_request", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": True,
                        "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
        if not wait:
            return msg_id
        return self.output(ws, msg_id)

    def output(self, ws, msg_id):
        """The cell's printed output: until its execute_reply (shell) and its
        `idle` status (iopub, which comes after all its output) have both
        arrived — the two channels are not ordered with each other."""
        out = ""
        replied = idle = False
        while not (replied and idle):
            if replied:  # the idle status follows within moments, if iopub is connected
                ws.settimeout(10)
            try:
                m = json.loads(ws.recv())
            except websocket.WebSocketTimeoutException:
                break
            finally:
                ws.settimeout(120)
            if m.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if m["msg_type"] == "stream":
                out += m["content"]["text"]
            if m["msg_type"] == "error":
                out += "ERROR " + m["content"].get("evalue", "")
            if m["msg_type"] == "execute_reply":
                replied = True
            if m["msg_type"] == "status" and m["content"].get("execution_state") == "idle":
                idle = True
        return out

    def events(self, run):
        return self.d.inspect(run)["events"]

    # --- tests ---

    def test_python_and_r_cells_run_on_the_runs_gpu_and_nobody_else_gets_in(self):
        run, url = self.start("--gpus", "1", "--kernel", "python", "--kernel", "r")
        info = self.d.inspect(run)
        self.assertEqual(info["kind"], "notebook")
        self.assertTrue(info["notebook"]["ready"], info["notebook"])
        gpu = info["gpus"][0]
        cookie = self.sign_in(url)
        k = self.kernel(run, cookie)
        ws = self.channels(run, cookie, k)
        out = self.execute(ws, "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'))")
        ws.close()
        self.assertEqual(out.strip(), str(gpu))
        kr = self.kernel(run, cookie, "ir")
        ws = self.channels(run, cookie, kr)
        self.assertEqual(self.execute(ws, "cat(6 * 7)").strip(), "42")
        ws.close()
        # A terminal, over its own websocket through the proxy: a shell of the run's user.
        st, body = self.request(run, "POST", "/api/terminals", cookie=cookie, body="{}")
        self.assertEqual(st, 200, body)
        term = json.loads(body)["name"]
        ws = websocket.create_connection(
            f"ws://127.0.0.1:{self.port()}/terminals/websocket/{term}", host=self.host(run),
            origin=f"http://{self.host(run)}", cookie=cookie, timeout=60)
        ws.send(json.dumps(["stdin", "echo gpu-$CUDA_VISIBLE_DEVICES-as-$(id -un)\r"]))
        seen = ""
        while f"gpu-{gpu}-as-{USER_A}" not in seen:
            m = json.loads(ws.recv())
            if m[0] == "stdout":
                seen += m[1]
        ws.close()
        # The kernels Jupyter offers are the ones asked for.
        st, body = self.request(run, "GET", "/api/kernelspecs", cookie=cookie)
        self.assertEqual(st, 200)
        self.assertEqual(sorted(json.loads(body)["kernelspecs"]), ["ir", "python3"])
        # B: 403 at every path, with or without the notebook's token guessed.
        token = open(os.path.join(self.d.home, "runs", run, "notebook.token")).read()
        for path in ["/", "/tree", "/api/kernels", f"/api/kernels/{k}", "/api/status",
                     f"/?token={token}", f"/api/kernels?token={token}"]:
            st, _ = self.request(run, "GET", path, token=self.tok_b)
            self.assertEqual(st, 403, path)
        # Nobody at all without a credential; the token itself is no credential here.
        st, _ = self.request(run, "GET", f"/api/status?token={token}")
        self.assertEqual(st, 401)
        # The token is on no command line.
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    self.assertNotIn(token.encode(), f.read(), pid)
            except OSError:
                pass
        # Jupyter's state is the notebook's own, in the run directory.
        self.assertTrue(os.path.isdir(os.path.join(self.d.home, "runs", run, "notebook",
                                                   "runtime")))

    def test_another_user_reaches_no_kernel_and_hears_no_cell(self):
        run, url = self.start("--kernel", "python", "--kernel", "r")
        cookie = self.sign_in(url)
        kernels = {self.kernel(run, cookie): "print", self.kernel(run, cookie, "ir"): "cat"}
        sockets = {k: self.channels(run, cookie, k) for k in kernels}
        found = kernel_sockets(self.a.pw_uid)
        self.assertGreaterEqual(found["kernels"], 2, found)
        found["unix"].append(os.path.join(self.d.home, "runs", run, "notebook", "jupyter.sock"))
        probe = os.path.join(self.base, "kernel_probe.py")
        shutil.copy(PROBE, probe)
        os.chmod(probe, 0o644)
        b = subprocess.Popen(["setpriv", "--reuid", USER_B, "--regid", USER_B, "--init-groups",
                              PY, probe, str(self.a.pw_uid), json.dumps(found)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
        self.addCleanup(lambda: b.poll() is not None or (b.kill(), b.wait()))
        self.assertEqual(b.stdout.readline().strip(), "ready")
        secret = uuid.uuid4().hex
        for k, say in kernels.items():
            out = self.execute(sockets[k], f"{say}('{secret}')")
            self.assertEqual(out.strip(), secret)
            sockets[k].close()
        report, _ = b.communicate("done\n", timeout=60)
        report = json.loads(report)
        self.assertEqual(report["connected"], [], found)
        self.assertEqual(report["received"], [])
        # The kernels' sockets are unix sockets in the notebook's own 0700 directory.
        runtime = os.path.join(self.d.home, "runs", run, "notebook", "runtime")
        self.assertEqual(found["tcp"], [])
        self.assertTrue(found["unix"][:-1], found)
        for path in found["unix"]:
            self.assertTrue(path.startswith(runtime + "/") or path.endswith("jupyter.sock"), path)

    def test_the_pages_the_owner_gets_carry_no_token_and_cells_still_run(self):
        run, url = self.start()
        cookie = self.sign_in(url)
        token = open(os.path.join(self.d.home, "runs", run, "notebook.token")).read()
        for path, body in [("/api/contents/t.ipynb", {"type": "notebook"}),
                           ("/api/contents/f.txt", {"type": "file", "format": "text",
                                                    "content": "hello"})]:
            st, out = self.request(run, "PUT", path, cookie=cookie, body=json.dumps(body))
            self.assertEqual(st, 201, out)
        st, out = self.request(run, "POST", "/api/terminals", cookie=cookie, body="{}")
        self.assertEqual(st, 200, out)
        term = json.loads(out)["name"]
        for path in ["/tree", "/notebooks/t.ipynb", "/edit/f.txt", f"/terminals/{term}",
                     "/view/f.txt", f"/tree?token={token}"]:
            c = http.client.HTTPConnection("127.0.0.1", self.port(), timeout=60)
            c.request("GET", path, headers={"Host": self.host(run), "Cookie": cookie})
            r = c.getresponse()
            page = r.read()
            self.assertEqual(r.status, 200, path)
            self.assertIn(b"<html", page, path)
            self.assertNotIn(token.encode(), page, path)
            self.assertNotIn(token, str(r.getheaders()), path)
        # The notebook works without it: its API, and a cell over the kernel's websocket.
        k = self.kernel(run, cookie)
        ws = self.channels(run, cookie, k)
        self.assertEqual(self.execute(ws, "print(6 * 7)").strip(), "42")
        ws.close()

    def test_idle_stop_spares_busy_cells_and_busy_gpus_but_not_a_silent_tab(self):
        with open(self.load, "w") as f:
            json.dump({"gpus": []}, f)
        run, url = self.start("--gpus", "1", "--idle", "3s")
        cookie = self.sign_in(url)
        k = self.kernel(run, cookie)
        ws = self.channels(run, cookie, k)
        # A cell that computes for twice the idle period and prints nothing.
        self.execute(ws, "import time; time.sleep(7)")
        self.assertEqual(self.d.inspect(run)["state"], "running")
        self.assertFalse([e for e in self.events(run)
                          if e.get("data", {}).get("msg_id") == "notebook.idle_stop"])
        # The GPU busy by the scripted load: not idle either, whatever the kernels do.
        gpu = self.d.inspect(run)["gpus"][0]
        with open(self.load, "w") as f:
            json.dump({"gpus": [{"index": gpu, "utilization_gpu_pct": 90}]}, f)
        time.sleep(7)
        self.assertEqual(self.d.inspect(run)["state"], "running")
        self.assertEqual(self.d.inspect(run)["notebook"]["last_active_by"], "gpu")
        # The GPU idle, the websocket open and silent: stopped, and the event says why.
        with open(self.load, "w") as f:
            json.dump({"gpus": []}, f)
        info = self.d.wait_state(run, "stopped", timeout=120)
        ws.close()
        idle = [e for e in info["events"] if e.get("data", {}).get("msg_id") == "notebook.idle_stop"]
        self.assertEqual(len(idle), 1, info["events"])
        self.assertIn("idle for 3s", idle[0]["message"])
        self.assertIn("GPUs below 5%", idle[0]["message"])
        # `notebook ls` still lists it, stopped for being idle, and says how to bring it back.
        ls = self.d.cli("notebook", "ls", user=USER_A, env=self.env_a())
        row = [line for line in ls.stdout.splitlines() if line.startswith(run)]
        self.assertEqual(len(row), 1, ls.stdout)
        self.assertIn("stopped (idle)", row[0])
        self.assertIn(f"lathe notebook restart {run} --wait", ls.stderr)
        listed = json.loads(self.d.cli("notebook", "ls", "--json", user=USER_A,
                                       env=self.env_a()).stdout)["notebooks"]
        self.assertEqual([n["stop_intent"] for n in listed if n["id"] == run], ["idle"])
        self.assertEqual([n["stopped_by"] for n in listed if n["id"] == run], ["idle"])
        # restart brings it back, the same run.
        r = self.d.cli("notebook", "restart", run, "--wait", user=USER_A, env=self.env_a())
        self.assertIn(run + ".localhost", r.stdout)
        self.assertEqual(self.d.inspect(run)["state"], "running")
        self.assertEqual(self.d.inspect(run)["attempt"], 2)

    def test_a_kernel_keeps_its_state_across_kill_9_of_the_daemon(self):
        run, url = self.start("--idle", "0")
        cookie = self.sign_in(url)
        k = self.kernel(run, cookie)
        ws = self.channels(run, cookie, k)
        self.execute(ws, "x = 6 * 7")
        ws.close()
        self.d.kill9()
        self.d.start()
        self.d.wait_for(lambda: self.d.inspect(run)["notebook"].get("ready"), "ready again")
        cookie = self.fresh_cookie(run)
        ws = self.channels(run, cookie, k)
        self.assertEqual(self.execute(ws, "print(x)").strip(), "42")
        ws.close()

    def test_a_notebook_from_a_spec_file_works_in_its_git_workspace(self):
        home = self.a.pw_dir  # the clone goes under the user's own home (passwd's)
        if not os.path.isdir(home):
            os.makedirs(home)
            os.chown(home, self.a.pw_uid, self.a.pw_gid)
            self.addCleanup(shutil.rmtree, home, True)
        repo = os.path.join(self.base, "repo")
        subprocess.run(["git", "init", "-q", "-b", "main", repo], check=True)
        with open(os.path.join(repo, "analysis.py"), "w") as f:
            f.write("print('hi')\n")
        subprocess.run(["git", "-C", repo, "add", "."], check=True)
        subprocess.run(["git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@x",
                        "commit", "-qm", "one"], check=True)
        commit = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        subprocess.run(["chown", "-R", f"{self.a.pw_uid}:{self.a.pw_gid}", repo], check=True)
        spec = os.path.join(self.work, "nb.yaml")
        with open(spec, "w") as f:
            f.write(f"type: notebook\nworkspace: file://{repo}#main\nidle: 0\n")
        os.chown(spec, self.a.pw_uid, self.a.pw_gid)
        r = subprocess_cli(self.d, ["run", "-f", spec], USER_A, self.env_a(), self.work)
        self.assertEqual(r.returncode, 0, r.stderr)
        run = r.stdout.strip()
        info = self.d.wait_for(lambda: (lambda i: i if i.get("notebook", {}).get("ready") or
                                        i["state"] not in ("queued", "starting", "running")
                                        else None)(self.d.inspect(run)), "ready")
        self.assertEqual(info["state"], "running", info.get("reason"))
        self.assertEqual(info["kind"], "notebook")
        self.assertEqual(info["workspace"]["commit"], commit)
        # Jupyter's root is the clone, in the user's own Lathe directory.
        cookie = self.fresh_cookie(run)
        st, body = self.request(run, "GET", "/api/contents", cookie=cookie)
        self.assertEqual(st, 200, body)
        self.assertIn("analysis.py", [c["name"] for c in json.loads(body)["content"]])
        clone = os.path.join(home, ".lathe", "workspaces", run)
        self.assertTrue(os.path.isfile(os.path.join(clone, "analysis.py")))
        self.assertEqual(os.stat(clone).st_uid, self.a.pw_uid)
        # Stopped and restarted: the same workspace, not a second clone.
        self.d.cli("notebook", "stop", run, user=USER_A, env=self.env_a())
        self.d.wait_state(run, "stopped")
        with open(os.path.join(clone, "notes.txt"), "w") as f:
            f.write("kept")
        self.d.cli("notebook", "restart", run, "--wait", user=USER_A, env=self.env_a())
        cookie = self.fresh_cookie(run)
        st, body = self.request(run, "GET", "/api/contents", cookie=cookie)
        self.assertIn("notes.txt", [c["name"] for c in json.loads(body)["content"]])

    def test_bad_input_is_refused_naming_the_field_and_nothing_runs(self):
        cases = [
            (["--kernel", "julia"], "kernels[0]"),
            (["--idle", "soon"], "'idle'"),
            (["--env", "PATH=/nonexistent"], "apt install jupyter-notebook"),
        ]
        for flags, says in cases:
            r = subprocess_cli(self.d, ["notebook", "start", *flags], USER_A, self.env_a(),
                               self.work)
            self.assertNotEqual(r.returncode, 0, flags)
            self.assertIn(says, r.stderr, flags)
        self.assertEqual(self.d.runs(all_runs=True), [])


def kernel_sockets(uid):
    """The listening sockets of `uid`'s kernel processes (ipykernel, IRkernel),
    seen as root: {"kernels": how many, "tcp": [port], "unix": [path]}."""
    found = {"kernels": 0, "tcp": [], "unix": []}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            if b"ipykernel" not in cmd and b"IRkernel::main" not in cmd:
                continue
            inodes = set()
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
            tables = {}
            for name in ("tcp", "tcp6", "unix"):
                with open(f"/proc/{pid}/net/{name}") as f:
                    tables[name] = [row.split() for row in f.read().splitlines()[1:]]
        except OSError:
            continue
        found["kernels"] += 1
        for row in tables["tcp"] + tables["tcp6"]:
            if row[3] == "0A" and row[9] in inodes:
                found["tcp"].append(int(row[1].rsplit(":", 1)[1], 16))
        for row in tables["unix"]:
            if row[6] in inodes and len(row) > 7 and row[7].startswith("/"):
                found["unix"].append(row[7])
    return found


def kernel_is_python(test, kernel):
    return test.kernel_names.get(kernel, "python3") == "python3"


def subprocess_cli(d, args, user, env, cwd):
    from harness import LATHE
    return subprocess.run(["setpriv", "--reuid", user, "--regid", user, "--init-groups",
                           LATHE, *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=180)


if __name__ == "__main__":
    unittest.main()
