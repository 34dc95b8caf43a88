"""Everything the CLI prints goes through the message catalog.

Under the pseudo-locale (LATHE_LANG=pseudo) every catalog text is printed as
⟦English⟧. Each command's output is checked for Latin letters outside the
brackets: such a word must be data — a run's id, name or command, a path, a
user name, a number with its unit, a flag, a command word, JSON — or it is a
text that did not go through the catalog, and the test names it.
"""
import http.client
import json
import os
import re
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

OPEN, CLOSE = "⟦", "⟧"

# Words a person types: the commands and the JSON literals a spec value shows.
COMMAND_WORDS = {
    "lathe", "version", "daemon", "up", "down", "status", "run", "ps", "logs", "stop", "inspect",
    "gpus", "profiles", "top", "snap", "create", "ls", "show", "diff", "restore", "prune", "gc", "fsck", "watch",
    "rebuild-index", "doctor", "explain", "term", "plan", "serve", "token", "login", "logout", "rm", "secret", "set", "open", "ui", "notebook", "start", "restart", "model", "alias", "export", "deploy", "update", "promote", "scale", "key", "pools", "image", "reload", "completion", "share", "unshare", "shares", "project", "add", "remove", "true", "false", "null",
}
UNIT = re.compile(r"^[+-]?[0-9][0-9.,]*(ms|s|m|h|d|B|kB|MB|GB|TB|KiB|MiB|GiB|TiB|k|M|G|T|"
                  r"Ki|Mi|Gi|Ti|C|W|MHz|x[0-9]+[A-Za-z]*|%)?$")
# The ids of the doctor's checks and of the knowledge base ("gpu.driver",
# "cuda.out_of_memory"), which the docs and `lathe term` use too.
CHECK_ID = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")
HEX = re.compile(r"^[0-9a-f]{8,64}$")
STRIP = "()[]{}<>,;:.!?'\"“”‘’`，。：；（）、|=*"


def outside_brackets(text):
    """The text with every ⟦…⟧ (nested ones too) removed."""
    out, depth = [], 0
    for ch in text:
        if ch == OPEN:
            depth += 1
        elif ch == CLOSE:
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def strings_of(value, skip=()):
    """Every string and number in a JSON value, but those under keys in `skip`."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k not in skip:
                yield from strings_of(v, skip)
    elif isinstance(value, list):
        for v in value:
            yield from strings_of(v, skip)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        yield str(value)


class PseudoLocaleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = harness.Daemon(gpus="sim:2x24GB").start()
        d = cls.d
        cls.work = tempfile.mkdtemp(prefix="lathe-i18n-")
        cls.ckpt = os.path.join(cls.work, "ckpt")
        cls.ok = d.submit("--name", "good-run", "--checkpoint-dir", cls.ckpt, "--", "sh", "-c",
                          'echo step > "$LATHE_CHECKPOINT_DIR/ckpt_100.pt"; echo done')
        cls.bad = d.submit("--name", "bad-run", "--", "sh", "-c",
                           "echo 'RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB';"
                           " exit 1")
        d.wait_state(cls.ok, "succeeded")
        d.wait_state(cls.bad, "failed")
        d.wait_for(lambda: any(e["type"] == "checkpoint" for e in d.inspect(cls.ok)["events"]),
                   "the checkpoint of the good run")
        d.wait_for(lambda: any(e["type"] == "diagnosis" for e in d.inspect(cls.bad)["events"]),
                   "the diagnosis of the failed run")
        # Data: what the API says about the runs, snapshots, GPUs and the
        # daemon — except the texts the CLI must translate.
        texts = ("state", "reason", "events", "message", "waiting", "note", "status", "mode",
                 "priority")
        data = set()
        for ref in (cls.ok, cls.bad):
            data.update(strings_of(d.inspect(ref), skip=texts))
        for cmd in (("snap", "ls", "--json"), ("gpus", "--json"), ("status", "--json")):
            data.update(strings_of(json.loads(d.cli(*cmd).stdout), skip=texts))
        data.update({harness.LATHE, os.path.basename(harness.LATHE), d.home, cls.work})
        cls.data_words = set()
        for s in data:
            cls.data_words.update(w.strip(STRIP) for w in s.split())
        cls.data_words.update(COMMAND_WORDS)

    @classmethod
    def tearDownClass(cls):
        cls.d.cleanup()
        shutil.rmtree(cls.work, ignore_errors=True)

    def pseudo(self, *args, expect_rc=(0,)):
        r = self.d.cli(*args, check=False, env=self.d.env(LATHE_LANG="pseudo"))
        self.assertIn(r.returncode, expect_rc, f"lathe {' '.join(args)}: {r.stdout}{r.stderr}")
        return r.stdout + r.stderr

    def assertAllTranslated(self, what, output, extra_data=(), only_data=False):
        if not only_data:
            self.assertIn(OPEN, output, f"{what}: no catalog text at all:\n{output}")
        allowed = self.data_words | set(extra_data)
        untranslated = []
        for full_line in output.splitlines():
            line = outside_brackets(full_line)
            if line.lstrip().startswith("$ ") or OPEN + "verify:" in full_line:
                continue  # a command to run, as the knowledge base writes it
            for raw in line.split():
                word = raw.strip(STRIP)
                if not re.search(r"[A-Za-z]", word):
                    continue
                if raw.endswith("..."):  # a long command, cut short
                    cut = word
                    if any(w.startswith(cut) for w in allowed):
                        continue
                if (word in allowed or word.startswith("-") or "/" in word or UNIT.match(word)
                        or HEX.match(word) or re.fullmatch(r"[A-Z][A-Z0-9_]+(=.*)?", word)
                        or "=" in word or CHECK_ID.match(word)):
                    continue
                untranslated.append(word)
        self.assertEqual(untranslated, [], f"{what}: Latin text outside ⟦⟧:\n{output}")

    def test_run_commands(self):
        for args in (("ps",), ("ps", "--all"), ("status",), ("gpus",), ("pools",), ("top",),
                     ("inspect", self.ok), ("inspect", self.bad), ("inspect", self.ok, "--metrics")):
            self.assertAllTranslated(" ".join(args), self.pseudo(*args))

    def test_logs(self):
        # The log is the run's own output: data; what lathe adds is catalog text.
        log = {w.strip(STRIP) for ref in (self.ok, self.bad) for w in self.d.logs(ref).split()}
        self.assertAllTranslated("logs", self.pseudo("logs", self.bad), log, only_data=True)
        self.assertAllTranslated("logs --limit", self.pseudo("logs", "--limit", "1", self.ok), log)

    def test_run_follow_of_a_failed_run(self):
        out = self.pseudo("run", "--follow", "--", "sh", "-c", "echo hello-follow; exit 3",
                          expect_rc=(1,))
        self.assertIn("hello-follow", out)
        self.assertAllTranslated("run --follow", out, extra_data={"hello-follow"})

    def test_snapshots(self):
        self.assertAllTranslated("snap ls", self.pseudo("snap", "ls"))
        snap_id = json.loads(self.d.cli("snap", "ls", "--json").stdout)[0]["id"]
        self.assertAllTranslated("snap show", self.pseudo("snap", "show", snap_id),
                                 extra_data={"ckpt_100.pt", "pytorch-legacy"})  # a format's name

    def test_doctor_plan_explain(self):
        self.assertAllTranslated("doctor", self.pseudo("doctor", "--fast", expect_rc=(0, 1)))
        models = strings_of(json.loads(self.d.cli("plan", "--params", "7B", "--json").stdout))
        self.assertAllTranslated("plan", self.pseudo("plan", "--params", "7B"),
                                 extra_data={w for m in models for w in m.split()})
        self.assertAllTranslated("explain", self.pseudo("explain", "--run", self.bad))

    def test_ui_and_sessions_in_token_ls(self):
        out = self.pseudo("ui")
        url = out.split()[0]
        user = json.loads(self.d.cli("status", "--json").stdout)["caller"]["user"]
        self.assertAllTranslated("ui", out, extra_data={url, user, "HOST", "ssh", "-L"})
        # Sign in with the link, so that `token ls` lists a session.
        port = url.split("/")[2].rsplit(":", 1)[1]
        c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
        c.request("GET", "/" + url.split("/", 3)[3], headers={"Host": "localhost:" + port})
        self.assertEqual(c.getresponse().status, 303)
        c.close()
        listed = json.loads(self.d.cli("token", "ls", "--json").stdout)
        ids = {t["id"] for t in listed}
        self.assertAllTranslated("token ls", self.pseudo("token", "ls"),
                                 extra_data=ids | {user, "-"})

    def test_rm_dry_run_and_refusal(self):
        self.assertAllTranslated("rm --dry-run", self.pseudo("rm", "--finished", "--older-than", "0s",
                                                             "--dry-run"))
        self.assertAllTranslated("rm --finished alone",
                                 self.pseudo("rm", "--finished", expect_rc=(2,)))

    def test_models(self):
        out = self.pseudo("model", "create", "i18n-model", "--from-dir", self.ckpt,
                          "--file", "ckpt_100.pt", "--note", "n")
        data = {"i18n-model", "i18n-model/1", "torchscript", "ckpt_100.pt", "root", "n",
                self.ckpt}
        self.assertAllTranslated("model create", out, extra_data=data)
        self.d.cli("model", "alias", "i18n-model", "prod", "1")
        for args in (("model", "ls"), ("model", "show", "i18n-model"),
                     ("model", "show", "i18n-model@prod")):
            self.assertAllTranslated(" ".join(args), self.pseudo(*args),
                                     extra_data=data | {"prod", "prod=1"})
        self.assertAllTranslated("model rm refused",
                                 self.pseudo("model", "rm", "i18n-model/1", expect_rc=(1,)),
                                 extra_data=data | {"i18n-model@prod"})

    def test_help_and_usage_errors(self):
        for args in (("--help",), ("run", "--help"), ("snap", "ls", "--help"),
                     ("logs", "--help"), ("doctor", "--help"),
                     ("token", "create", "--help"), ("login", "--help"), ("rm", "--help"),
                     ("secret", "set", "--help"), ("secret", "--help"), ("ui", "--help"), ("open", "--help"),
                     ("token", "ls", "--help"), ("token", "rm", "--help"),
                     ("notebook", "--help"), ("notebook", "start", "--help"),
                     ("notebook", "ls", "--help"), ("notebook", "restart", "--help"),
                     ("model", "--help"), ("model", "create", "--help"), ("model", "show", "--help"),
                     ("model", "alias", "--help"), ("model", "export", "--help"),
                     ("deploy", "--help"), ("deploy", "create", "--help"),
                     ("deploy", "scale", "--help"), ("deploy", "logs", "--help"),
                     ("deploy", "update", "--help"),
                     ("deploy", "key", "create", "--help"), ("deploy", "key", "rm", "--help"),
                     ("daemon", "--help"), ("top", "--help"), ("inspect", "--help")):
            out = self.pseudo(*args)
            self.assertAllTranslated(" ".join(args), out)
            # Every flag and argument has its text.
            for line in out.splitlines():
                if line.startswith("  -") and OPEN not in line:
                    self.fail(f"lathe {' '.join(args)}: a flag without its text: {line!r}")
        self.assertAllTranslated("a mistyped flag",
                                 self.pseudo("run", "--gpux", "1", "--", "ls", expect_rc=(2,)),
                                 extra_data={"gpux"})
        self.assertAllTranslated("a bad value",
                                 self.pseudo("run", "--gpus", "abc", "--", "ls", expect_rc=(2,)),
                                 extra_data={"abc"})
        # CLI11's own words, each said by the catalog: a flag given twice, two that exclude
        # each other (the pseudo-locale cannot tell: CLI11's text would be an argument).
        for args, zh in ((("run", "--gpus", "1", "--gpus", "2", "--", "ls"),
                          "--gpus 最多接受 1 个值，但给出了 2 个"),
                         (("share", "run:r1", "--user", "u", "--group", "g"),
                          "--user 与 --group 不能同时使用")):
            r = self.d.cli(*args, check=False, env=self.d.env(LATHE_LANG="zh"))
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(zh, r.stderr)
            self.assertNotRegex(r.stderr, "required but|excludes")

    def test_chinese_has_no_english_state_or_event_words(self):
        r = self.d.cli("inspect", self.bad, env=self.d.env(LANG="zh_CN.UTF-8"))
        self.assertIn("已失败", r.stdout)
        self.assertIn("已退出，退出码 1", r.stdout)
        for english in ("failed", "exited with code", "submitted", "started, pid", "events:"):
            self.assertNotIn(english, r.stdout)
        help_zh = self.d.cli("run", "--help", env=self.d.env(LANG="zh_CN.UTF-8")).stdout
        self.assertIn("GPU 数量", help_zh)
        self.assertNotIn("number of GPUs", help_zh)


if __name__ == "__main__":
    unittest.main()
