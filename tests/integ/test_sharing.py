"""Sharing and projects from three unprivileged users against a root daemon
(docs/sharing.md): what is shared is reachable exactly as the role says
(view: spec, logs, events; use: also open it / call it with a key of one's
own / deploy a model; manage: also stop, scale, move aliases), nothing else
is, environment values stay the owner's, and taking a share back or removing
a project member takes effect at the next request.
"""
import http.client
import json
import os
import subprocess
import time
import unittest

from harness import PY, DaemonTest, second_user, shared_scratch

A, B, C = "lathe-sh-a", "lathe-sh-b", "lathe-sh-c"
GROUP = "lathe-sh-g"  # C is in it

APP = r"""
import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    do_POST = do_GET
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
"""
WHO_APP = APP.replace('"2"', 'str(len(os.environ["WHO"]))').replace('b"ok"',
                                                                   'os.environ["WHO"].encode()')


class Sharing(DaemonTest):
    gpus = "sim:2x24GB"

    def setUp(self):
        for u in (A, B, C):
            second_user(self, u)
        subprocess.run(["groupadd", "-f", GROUP], check=True)
        subprocess.run(["usermod", "-aG", GROUP, C], check=True)
        super().setUp()

    def as_(self, user, *args, check=True):
        return self.d.cli(*args, user=user, check=check)

    def json_as(self, user, *args):
        return json.loads(self.as_(user, *args, "--json").stdout)

    def refused(self, user, *args, code=None):
        r = self.as_(user, *args, check=False)
        self.assertNotEqual(r.returncode, 0, f"{user}: lathe {' '.join(args)} was let through")
        if code is not None:
            self.assertEqual(r.returncode, code, r.stderr)
        return r.stderr

    def job(self, user, *extra):
        return self.as_(user, "run", "--workdir", "/tmp", "--env", "SECRET_ENV=hunter2", *extra,
                        "--", "sh", "-c", "echo started; sleep 300").stdout.strip()

    def test_a_run_shared_by_role_and_taken_back(self):
        rid = self.job(A)
        self.d.wait_state(rid, "running")
        self.d.wait_for(lambda: "started" in self.d.logs(rid), "the first line")
        # Unshared: another user sees who and what state in lists, never more.
        self.assertIn("belongs to " + A, self.refused(B, "inspect", rid))
        self.refused(B, "logs", rid)
        listed = {r["id"]: r for r in self.json_as(B, "ps")}
        self.assertNotIn("spec", listed[rid])

        out = self.as_(A, "share", rid, "--user", B).stdout
        self.assertIn(B, out)
        self.assertIn("view", out)
        seen = self.json_as(B, "inspect", rid)
        self.assertEqual(seen["shared"], {"role": "view", "by": A})
        self.assertEqual(seen["spec"]["env"]["SECRET_ENV"], "(hidden)")
        self.assertIn("started", self.as_(B, "logs", rid).stdout)
        listed = {r["id"]: r for r in self.json_as(B, "ps")}
        self.assertEqual(listed[rid]["shared"]["role"], "view")
        self.assertNotIn("hunter2", json.dumps(listed[rid]))
        # View is not stop, not rm, not sharing on.
        self.assertIn("your role on it is view, to stop it needs manage", self.refused(B, "stop", rid))
        self.refused(B, "share", rid, "--user", C)
        self.assertIn("only the owner", self.refused(B, "share", rid, "--user", C))
        # The third user still sees nothing.
        self.refused(C, "inspect", rid)
        self.refused(C, "logs", rid)
        shares = self.json_as(B, "shares")
        self.assertEqual([(s["kind"], s["object"], s["role"]) for s in shares["shared_with_me"]],
                         [("run", rid, "view")])
        self.assertEqual(self.json_as(A, "shares", rid)["shares"][0]["user"], B)

        # A group with role manage: its member stops the run.
        self.as_(A, "share", rid, "--group", GROUP, "--role", "manage")
        self.assertEqual(self.json_as(C, "inspect", rid)["shared"],
                         {"role": "manage", "by": A})
        self.as_(C, "stop", rid)
        self.d.wait_state(rid, ["stopped", "failed"])
        self.refused(C, "rm", rid)  # removing stays the owner's

        # Taken back: refused at the very next request.
        self.as_(A, "unshare", rid, "--user", B)
        self.assertIn("belongs to " + A, self.refused(B, "inspect", rid))
        self.refused(B, "logs", rid)
        self.assertEqual(self.json_as(B, "shares")["shared_with_me"], [])
        # Bad input names what is wrong.
        self.assertIn("view, use, manage",
                      self.refused(A, "share", rid, "--user", B, "--role", "owner"))
        self.assertIn("nobody-such", self.refused(A, "share", rid, "--user", "nobody-such"))
        self.assertIn("'user' and 'group'", self.refused(A, "share", rid))
        self.assertIn("not shared", self.refused(A, "unshare", rid, "--user", B))

    def test_use_opens_a_port_and_view_does_not(self):
        rid = self.as_(A, "run", "--workdir", "/tmp", "--port", "web=18462", "--", PY, "-c",
                       APP).stdout.strip()
        self.d.wait_state(rid, "running")
        self.as_(A, "share", "run:" + rid, "--user", B)
        self.assertIn("open", self.refused(B, "open", rid, "--json"))
        self.as_(A, "share", "run:" + rid, "--user", B, "--role", "use")
        opened = self.d.wait_for(
            lambda: (lambda r: json.loads(r.stdout) if r.returncode == 0 else None)(
                self.as_(B, "open", rid, "--json", check=False)), "the port opens for B")
        self.assertIn("url", json.dumps(opened))
        self.refused(C, "open", rid, "--json")
        self.as_(A, "stop", rid)

    def test_projects(self):
        p = self.json_as(A, "project", "create", "ml", "--member", B + ":view")
        self.assertEqual([(m["user"], m["role"]) for m in p["members"]], [(B, "view")])
        rid = self.job(A, "--project", "ml")
        self.d.wait_state(rid, "running")
        seen = self.json_as(B, "inspect", rid)
        self.assertEqual(seen["shared"], {"role": "view", "by": "project ml"})
        self.assertEqual(seen["spec"]["env"]["SECRET_ENV"], "(hidden)")
        self.refused(C, "inspect", rid)
        self.assertIn("belongs to " + A, self.refused(B, "stop", rid))
        # A viewer puts nothing into the project; a user does.
        self.assertIn("may not put anything", self.refused(B, "run", "--workdir", "/tmp",
                                                           "--project", "ml", "--", "true"))
        self.refused(C, "run", "--workdir", "/tmp", "--project", "ml", "--", "true")
        self.refused(B, "project", "add", "ml", "--member", C)  # only the owner or a manager
        self.json_as(A, "project", "add", "ml", "--member", B + ":manage")
        mine = self.as_(B, "run", "--workdir", "/tmp", "--project", "ml", "--",
                        "true").stdout.strip()
        self.assertEqual(self.json_as(A, "inspect", mine)["shared"]["by"], "project ml")
        self.as_(B, "stop", rid)  # manage in the project
        # LATHE_PROJECT is the default project of a user's runs.
        env = self.d.env(LATHE_PROJECT="ml")
        r = self.d.cli("run", "--workdir", "/tmp", "--", "true", user=B, env=env)
        self.assertEqual(self.d.inspect(r.stdout.strip())["spec"]["project"], "ml")
        shown = self.json_as(B, "project", "show", "ml")
        self.assertIn("gpu_hours", shown["usage"])
        self.assertEqual([x["name"] for x in self.json_as(B, "project", "ls")], ["ml"])
        self.assertEqual(self.json_as(C, "project", "ls"), [])
        self.refused(C, "project", "show", "ml")
        # A member removed loses what the project gave, at the next request.
        self.json_as(A, "project", "remove", "ml", "--member", B)
        self.refused(B, "inspect", rid)
        self.json_as(B, "inspect", mine)  # their own run stays theirs
        self.assertIn("exists already", self.refused(C, "project", "create", "ml"))
        self.assertIn("view, use, manage", self.refused(A, "project", "create", "x", "--member",
                                                        B + ":boss"))
        self.refused(B, "project", "rm", "ml")
        self.as_(A, "project", "rm", "ml")
        self.assertEqual(self.json_as(A, "project", "ls"), [])

    def a_model_digits(self):
        """A's model `digits`, made from a one-file directory everyone may read."""
        src = os.path.join(shared_scratch(self, "lathe-sh-"), "weights")
        os.makedirs(src)
        with open(os.path.join(src, "model.pt"), "w") as f:
            f.write("x")
        os.chmod(src, 0o755)
        self.as_(A, "model", "create", "digits", "--from-dir", src)
        return src

    def test_a_model_shared_by_role(self):
        self.a_model_digits()
        self.assertIn("not found", self.refused(B, "model", "show", "digits"))
        self.as_(A, "share", "model:digits", "--user", B)
        shown = self.json_as(B, "model", "show", "digits")
        self.assertEqual(shown["shared"]["role"], "view")
        self.assertIn("digits", [m["name"] for m in self.json_as(B, "model", "ls")])
        self.refused(B, "model", "alias", "digits", "prod", "1")
        self.as_(A, "share", "model:digits", "--user", B, "--role", "manage")
        self.as_(B, "model", "alias", "digits", "prod", "1")
        self.refused(B, "model", "rm", "digits/1")  # removing stays the owner's
        self.refused(C, "model", "show", "digits")
        self.as_(A, "unshare", "model:digits", "--user", B)
        self.assertIn("not found", self.refused(B, "model", "show", "digits"))

    def test_what_users_read_says_who_shared_and_which_role(self):
        zh = self.d.env(LANG="zh_CN.UTF-8", LATHE_LANG="zh")
        rid = self.job(A)
        self.d.wait_state(rid, "running")
        self.as_(A, "share", rid, "--user", B, "--role", "manage")
        # The human table marks what is shared, by whom and as what.
        ps = self.as_(B, "ps").stdout
        self.assertIn("SHARED BY", ps)
        self.assertIn("%s (manage)" % A, [c.strip() for c in
                                           next(l for l in ps.splitlines() if rid in l).split("  ")])
        self.assertNotIn("SHARED BY", self.as_(A, "ps").stdout)
        # Removing is the owner's whatever the role: said so, not "a role that allows it".
        err = self.refused(B, "rm", rid)
        self.assertIn("only its owner (or root) may delete it", err)
        self.assertNotIn("role that allows", err)
        # Kinds and roles in Chinese.
        err = self.d.cli("share", rid, "--user", C, user=B, env=zh, check=False).stderr
        self.assertIn("共享运行 " + rid, err)
        self.assertNotIn(" run ", err)
        err = self.d.cli("unshare", rid, "--group", GROUP, user=A, env=zh, check=False).stderr
        self.assertIn("运行 %s 并未共享给组" % rid, err)
        self.assertIn("not shared with group '%s'" % GROUP,
                      self.refused(A, "unshare", rid, "--group", GROUP))
        self.as_(A, "stop", rid)

        # A notebook is shared as a notebook, and B's list says whose it is.
        nb = json.loads(self.as_(A, "notebook", "start", "--json").stdout)["id"]
        out = self.as_(A, "share", "notebook:" + nb, "--user", B).stdout
        self.assertIn("shared notebook " + nb, out)
        ls = self.as_(B, "notebook", "ls").stdout
        row = next(l for l in ls.splitlines() if nb in l)
        self.assertIn(A, row)
        self.assertIn("%s (view)" % A, row)
        self.as_(A, "stop", nb)

        # A project: its members see its name in the mark, roles and GPU-hours per member.
        self.json_as(A, "project", "create", "ml", "--member", B + ":manage")
        prid = self.job(A, "--project", "ml")
        row = next(l for l in self.as_(B, "ps").stdout.splitlines() if prid in l)
        self.assertIn("project ml (manage)", row)
        shown = self.d.cli("project", "show", "ml", user=B, env=zh).stdout
        self.assertIn("所有者", shown)
        self.assertNotIn("owner", shown.split("\n", 1)[1])
        self.assertIn("GPU 小时", shown)
        self.assertIn("GPU-HOURS", self.as_(B, "project", "show", "ml").stdout)
        for listed in (self.json_as(B, "project", "ls")[0],
                       self.json_as(A, "project", "add", "ml", "--member", C + ":view"),
                       self.json_as(A, "project", "remove", "ml", "--member", C)):
            self.assertIn("gpu_hours_by_user", listed["usage"])
        err = self.refused(B, "project", "rm", "ml")
        self.assertIn("only the owner of project 'ml' (%s) may remove it" % A, err)
        self.as_(A, "stop", prid)
        self.as_(A, "project", "rm", "ml")

        # A model shared for view: the role one has and the one needed.
        src = self.a_model_digits()
        self.as_(A, "share", "model:digits", "--user", B)
        row = next(l for l in self.as_(B, "model", "ls").stdout.splitlines() if "digits" in l)
        self.assertIn("%s (view)" % A, row)
        err = self.refused(B, "model", "alias", A + "/digits", "x", "1")
        self.assertIn("your role on it is view, this needs manage", err)
        self.assertNotIn("public", err)
        err = self.refused(B, "model", "create", A + "/digits", "--from-dir", src)
        self.assertIn("only its owner adds versions", err)

    def test_a_deployment_called_with_a_shared_users_own_key(self):
        def show(user):
            return self.json_as(user, "deploy", "show", "web")

        self.as_(A, "deploy", "create", "web", "--port", "18461", "--ready", "/", "--workdir", "/tmp", "--env",
                 "SECRET_ENV=hunter2", "--wait", "--", PY, "-c", APP)
        port = int(show(A)["url"].split(":")[2].split("/")[0])

        def call(key):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", "/d/web/x", headers={"Authorization": "Bearer " + key})
            r = c.getresponse()
            out = r.status, r.read()
            c.close()
            return out

        self.assertIn("no deployment named", self.refused(B, "deploy", "show", "web"))
        self.as_(A, "share", "deployment:web", "--user", B)
        s = show(B)
        self.assertEqual(s["shared"]["role"], "view")
        self.assertEqual(s["spec"]["env"]["SECRET_ENV"], "(hidden)")
        self.assertIn("needs use", self.refused(B, "deploy", "key", "create", "web"))
        self.as_(A, "share", "deployment:web", "--user", B, "--role", "use")
        key = self.as_(B, "deploy", "key", "create", "web").stdout.strip()
        self.assertEqual(call(key)[0], 200)
        # Their own keys only; scaling needs manage.
        self.assertEqual(len(self.json_as(B, "deploy", "key", "ls", "web")), 1)
        self.refused(B, "deploy", "scale", "web", "2")
        self.refused(C, "deploy", "show", "web")
        # Taken back: their key is refused by the front at the next request.
        self.as_(A, "unshare", "deployment:web", "--user", B)
        self.assertEqual(call(key)[0], 401)
        self.refused(B, "deploy", "show", "web")
        self.as_(A, "deploy", "rm", "web")

    def test_a_project_deployment_changed_by_a_member(self):
        self.json_as(A, "project", "create", "ml", "--member", B + ":manage")
        made = self.as_(A, "deploy", "create", "web2", "--project", "ml", "--port", "18462",
                        "--ready", "/", "--workdir", "/tmp", "--", PY, "-c", APP).stdout
        self.assertIn("created by " + A, made)
        self.assertEqual(self.json_as(A, "deploy", "show", "web2")["spec"]["project"], "ml")
        # A member sees it, marked with the project and the role.
        listed = self.json_as(B, "deploy", "ls")
        self.assertEqual([(d["name"], d["shared"]["by"]) for d in listed], [("web2", "project ml")])
        text = self.as_(B, "deploy", "ls").stdout
        self.assertIn("SHARED BY", text)
        self.assertIn("project ml (manage)", text)
        zh = self.d.cli("deploy", "ls", user=B, env=self.d.env(LATHE_LANG="zh")).stdout
        self.assertIn("项目 ml", zh)
        self.assertNotIn("SHARED BY", self.as_(A, "deploy", "ls").stdout)
        # The line names who made the change, not the owner.
        out = self.as_(B, "deploy", "scale", "web2", "--autoscale", "1..3").stdout
        self.assertIn("updated by " + B, out)
        self.assertNotIn(A, out)
        self.assertEqual(self.json_as(B, "deploy", "scale", "web2", "2")["changed_by"], B)
        # A user's default project (LATHE_PROJECT) is a deployment's too.
        self.as_(A, "share", "deployment:web2", "--user", C, "--role", "manage")
        out = self.as_(C, "deploy", "scale", "web2", "1").stdout
        self.assertIn("updated by " + C, out)
        mark = self.as_(C, "deploy", "ls").stdout
        self.assertIn(A + " (manage)", mark)
        env = self.d.env(LATHE_PROJECT="ml")
        self.d.cli("deploy", "create", "web3", "--port", "18463", "--workdir", "/tmp", "--", PY,
                   "-c", APP, user=B, env=env)
        self.assertEqual(self.json_as(A, "deploy", "show", B + "/web3")["shared"]["by"],
                         "project ml")
        self.as_(B, "deploy", "rm", "web3")
        self.as_(A, "deploy", "rm", "web2")

    def test_names_are_unique_per_owner_not_per_machine(self):
        # Two users each have a model "digits" and a deployment "web".
        for user in (A, B):
            src = os.path.join(shared_scratch(self, "lathe-sh-"), "weights")
            os.makedirs(src)
            with open(os.path.join(src, "model.pt"), "w") as f:
                f.write(user)
            os.chmod(src, 0o755)
            made = self.json_as(user, "model", "create", "digits", "--from-dir", src)
            self.assertEqual(made["ref"], user + "/digits/1")
        self.assertEqual(self.json_as(A, "model", "show", "digits")["owner"], A)
        self.assertEqual(self.json_as(B, "model", "show", "digits")["owner"], B)
        # Another's private model stays unknown, named either way.
        self.assertIn("not found", self.refused(B, "model", "show", A + "/digits"))
        self.assertIn("not found", self.refused(C, "model", "show", "digits"))
        # Two public ones: a bare name is ambiguous to a third user, OWNER/NAME is not.
        self.as_(A, "model", "create", "digits", "--from-dir", src, "--public")
        self.as_(B, "model", "create", "digits", "--from-dir", src, "--public")
        err = self.refused(C, "model", "show", "digits")
        self.assertIn(A + "/digits", err)
        self.assertIn(B + "/digits", err)
        self.assertEqual(self.json_as(C, "model", "show", B + "/digits@latest")["ref"],
                         B + "/digits/2")
        self.assertEqual(len(self.json_as(C, "model", "ls")), 2)

        for port, user, public in ((18471, A, ["--public"]), (18472, B, [])):
            self.as_(user, "deploy", "create", "web", "--port", str(port), "--ready", "/",
                     "--workdir", "/tmp", "--env", "WHO=" + user, *public, "--wait", "--",
                     PY, "-c", WHO_APP)
        key = self.as_(B, "deploy", "key", "create", "web").stdout.strip()
        a, b = (self.json_as(u, "deploy", "show", "web") for u in (A, B))
        self.assertEqual((a["owner"], a["ref"]), (A, A + "/web"))
        self.assertEqual((b["owner"], b["ref"]), (B, B + "/web"))
        self.assertIn("/d/%s/web/" % A, a["url"])
        front = int(a["url"].split(":")[2].split("/")[0])

        def call(path, key=None):
            c = http.client.HTTPConnection("127.0.0.1", front, timeout=30)
            c.request("GET", path, headers={"Authorization": "Bearer " + key} if key else {})
            r = c.getresponse()
            out = r.status, r.read().decode()
            c.close()
            return out

        self.assertEqual(call("/d/%s/web/x" % A), (200, A))
        self.assertEqual(call("/d/%s/web/x" % B)[0], 401)
        self.assertEqual(call("/d/%s/web/x" % B, key), (200, B))
        status, body = call("/d/web/x")  # two have that name: which one is for the caller to say
        self.assertEqual(status, 409, body)
        self.assertIn("/d/%s/web/" % A, body)
        self.assertIn("/d/%s/web/" % B, body)
        # ... or for their key: B's key picks B's.
        self.assertEqual(call("/d/web/x", key), (200, B))
        self.assertIn("no deployment named", self.refused(C, "deploy", "show", "web"))
        self.as_(A, "share", "deployment:%s/web" % A, "--user", C)
        self.assertEqual(self.json_as(C, "deploy", "show", "web")["owner"], A)
        self.as_(B, "share", "deployment:web", "--user", C)
        self.assertIn(A + "/web", self.refused(C, "deploy", "show", "web"))
        self.assertEqual(self.json_as(C, "deploy", "show", B + "/web")["owner"], B)
        self.as_(B, "deploy", "rm", "web")
        # One "web" left: its short URL answers again.
        self.d.wait_for(lambda: call("/d/web/x") == (200, A), "the short URL of the one left")
        self.as_(A, "deploy", "rm", "web")


if __name__ == "__main__":
    unittest.main()
