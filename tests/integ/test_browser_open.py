"""Opening a browser never puts a sign-in code where another user can read it.

An unprivileged user (A) against a root daemon opens the one-time links of
`lathe ui` (by default: stdout a terminal, DISPLAY set), `lathe open RUN
--browser` and `lathe notebook open RUN --browser`, with a stand-in for
`xdg-open` first on PATH (fake_browser.py: it records its argv and
environment, lingers as a browser would, then reads the page it was given and
follows it as a browser does). Meanwhile a second user (B) polls every
process's /proc/PID/cmdline and /proc/PID/environ in a tight loop
(proc_watcher.py). B finds no code; the browser got a page path, not the
link; the page is A's alone (0600 in a 0700 directory); and following it
still signs A in — on the web UI and on the run's origin.
"""
import json
import os
import pty
import shutil
import stat
import subprocess
import unittest

from harness import DaemonTest, LATHE, PY, second_user, shared_scratch

USER_A = "lathe-it-br-a"
USER_B = "lathe-it-br-b"
HERE = os.path.dirname(os.path.abspath(__file__))


class BrowserOpen(DaemonTest):
    gpus = "none"

    def setUp(self):
        self.a = second_user(self, USER_A)
        self.b = second_user(self, USER_B)
        super().setUp()
        self.base = shared_scratch(self, "lathe-it-br-")
        self.bin = os.path.join(self.base, "bin")
        os.makedirs(self.bin)
        shutil.copy(os.path.join(HERE, "fake_browser.py"), os.path.join(self.bin, "xdg-open"))
        os.chmod(os.path.join(self.bin, "xdg-open"), 0o755)
        os.chmod(self.bin, 0o755)
        self.home_a = self.owned("home-a", self.a)
        self.runtime_a = self.owned("run-a", self.a)
        self.records = self.owned("records", self.a)
        self.site = self.owned("site", self.a, 0o755)
        with open(os.path.join(self.site, "hello.txt"), "w") as f:
            f.write("hello from A's run\n")
        os.chmod(os.path.join(self.site, "hello.txt"), 0o644)
        self.watch_dir = self.owned("watch", self.b)

    def owned(self, name, pw, mode=0o700):
        d = os.path.join(self.base, name)
        os.makedirs(d)
        os.chown(d, pw.pw_uid, pw.pw_gid)
        os.chmod(d, mode)
        return d

    def env_a(self, **extra):
        e = self.d.env(HOME=self.home_a, DISPLAY=":0", FAKE_BROWSER_LOG=self.records,
                       PATH=self.bin + ":" + os.environ.get("PATH", "/usr/bin:/bin"))
        e.pop("XDG_RUNTIME_DIR", None)
        e.pop("XDG_CACHE_HOME", None)
        e.pop("WAYLAND_DISPLAY", None)
        e.update(extra)
        return e

    def as_a(self, *args, tty=False, **env):
        """`lathe ARGS` as A; with tty, stdout is a terminal (a person at a desktop)."""
        cmd = ["setpriv", "--reuid", USER_A, "--regid", USER_A, "--init-groups", LATHE, *args]
        if not tty:
            return subprocess.run(cmd, capture_output=True, text=True, env=self.env_a(**env),
                                  timeout=120)
        master, slave = pty.openpty()
        p = subprocess.Popen(cmd, stdout=slave, stderr=subprocess.PIPE, text=True,
                             env=self.env_a(**env))
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's last writer is gone
                break
            if not chunk:
                break
            out += chunk
        os.close(master)
        err = p.communicate(timeout=120)[1]
        return subprocess.CompletedProcess(cmd, p.returncode, out.decode(errors="replace"), err)

    def start_watcher(self):
        out = os.path.join(self.watch_dir, "found.json")
        stop = os.path.join(self.watch_dir, "stop")
        p = subprocess.Popen(["setpriv", "--reuid", USER_B, "--regid", USER_B, "--init-groups",
                              PY, os.path.join(HERE, "proc_watcher.py"), out, stop])
        self.addCleanup(lambda: p.poll() is None and p.kill())
        return p, out, stop

    def stop_watcher(self, watcher):
        p, out, stop = watcher
        with open(stop, "w"):
            pass
        self.assertEqual(p.wait(timeout=60), 0)
        with open(out) as f:
            return json.load(f)

    def records_seen(self):
        seen = []
        for name in sorted(os.listdir(self.records)):
            with open(os.path.join(self.records, name)) as f:
                seen.append(json.load(f))
        return seen

    def serving_run(self):
        r = self.as_a("run", "--port", "8000", "--workdir", self.site, "--", "sh", "-c",
                      f'exec {PY} -m http.server --bind 127.0.0.1 "$LATHE_PORT_8000"')
        self.assertEqual(r.returncode, 0, r.stderr)
        run = r.stdout.strip()
        self.d.wait_state(run, "running")
        self.d.wait_for(lambda: self.d.inspect(run)["ports"][0]["state"] == "listening",
                        "A's server to listen")
        return run

    def test_no_opening_path_shows_a_code_to_another_user_and_sign_in_works(self):
        run = self.serving_run()
        watcher = self.start_watcher()
        ui = self.as_a("ui", tty=True, XDG_RUNTIME_DIR=self.runtime_a)
        opened = self.as_a("open", run, "--browser")
        nb = self.as_a("notebook", "open", run, "--browser")
        found = self.stop_watcher(watcher)
        for r in (ui, opened, nb):
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("could not", ui.stderr + opened.stderr + nb.stderr)

        seen = self.records_seen()
        self.assertEqual(len(seen), 3, seen)
        codes = [rec["url"].split("code=", 1)[1] for rec in seen if "url" in rec]
        # B, polling all along, saw the browsers run and none of their codes
        # (what else on the machine says "code=" is not this test's business).
        self.assertTrue(found["saw_opener"], found)
        leaked = [f for f in found["found"] if any(c in f[1] for c in codes) or
                  not codes and "login?code=" in f[1]]
        self.assertEqual(leaked, [])
        for rec in seen:
            self.assertNotIn("error", rec, rec)
            code = rec["url"].split("code=", 1)[1]
            # The browser got a page of A's, not the link; the code is in
            # neither its command line nor its environment.
            page = rec["argv"][1]
            self.assertEqual(len(rec["argv"]), 2, rec["argv"])
            self.assertTrue(os.path.basename(page).startswith("signin-"), page)
            self.assertNotIn(code, " ".join(rec["argv"]))
            self.assertNotIn(code, json.dumps(rec["environ"]))
            self.assertEqual((rec["page_mode"], rec["dir_mode"], rec["page_uid"]),
                             (0o600, 0o700, self.a.pw_uid))
            self.assertTrue(rec["refresh_agrees"])
            self.assertIn(rec["login_status"], (200, 303), rec)
        by_kind = {("ui" if "/ui/login" in r["url"] else "run"): r for r in seen}
        ui_rec = by_kind["ui"]
        self.assertTrue(ui_rec["argv"][1].startswith(self.runtime_a + "/lathe/browser/"))
        self.assertEqual(ui_rec["cookie_name"], "lathe_session")
        self.assertEqual(ui_rec["signed_in_as"], USER_A)  # the victim's sign-in still works
        self.assertIn(ui_rec["url"], ui.stdout)  # the link is still printed, to A's terminal
        runs = [r for r in seen if "/ui/login" not in r["url"]]
        self.assertEqual(len(runs), 2)
        self.assertNotEqual(runs[0]["url"], runs[1]["url"])
        for rec in runs:
            self.assertIn(rec["url"], opened.stdout + nb.stdout)
            self.assertTrue(rec["argv"][1].startswith(self.home_a + "/.cache/lathe/browser/"))
            self.assertEqual(rec["cookie_name"], "lathe_run")
            self.assertEqual(rec["run_page"], "hello from A's run\n")
        for d in (self.runtime_a + "/lathe", self.home_a + "/.cache/lathe"):
            self.assertEqual(stat.S_IMODE(os.stat(d).st_mode), 0o700, d)
        self.d.cli("stop", run)


if __name__ == "__main__":
    unittest.main()
