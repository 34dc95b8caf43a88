"""The command line's usage errors name the bad flag or word, suggest the nearest valid
one, and point at `--` when a command's own flag came before it; in English and Chinese.

None of these need a daemon: the CLI stops at parsing (exit 2).
"""
import os
import re
import subprocess
import unittest

from harness import LATHE


def lathe(*args, lang="C.UTF-8"):
    env = dict(os.environ)
    for k in ("LATHE_LANG", "LC_ALL", "LC_MESSAGES"):
        env.pop(k, None)
    env["LANG"] = lang
    env["LATHE_HOME"] = "/nonexistent-lathe-home"  # parse errors come before any connection
    return subprocess.run([LATHE, *args], capture_output=True, text=True, env=env, timeout=30)


ZH = "zh_CN.UTF-8"


class UsageErrors(unittest.TestCase):
    def usage(self, *args, lang="C.UTF-8"):
        r = lathe(*args, lang=lang)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stdout, "")
        return r.stderr

    def test_mistyped_flag_is_named_with_the_nearest(self):
        err = self.usage("run", "--gpux", "1", "--", "ls")
        self.assertIn("`lathe run` has no flag --gpux; did you mean --gpus?", err)
        self.assertIn("lathe run --help", err)
        self.assertNotIn("not expected", err)
        zh = self.usage("run", "--gpux", "1", "--", "ls", lang=ZH)
        self.assertIn("`lathe run` 没有 --gpux 这个选项；是不是想输入 --gpus？", zh)
        self.assertIn("lathe run --help", zh)

    def test_flag_without_a_near_one_gets_no_guess(self):
        err = self.usage("ps", "--colour")
        self.assertIn("`lathe ps` has no flag --colour", err)
        self.assertNotIn("did you mean", err)
        # After a flag (which takes no value): still named.
        self.assertIn("`lathe ps` has no flag --colour", self.usage("ps", "-a", "--colour"))

    def test_forgotten_double_dash(self):
        err = self.usage("run", "--gpus", "1", "python3", "train.py", "--steps", "10")
        self.assertIn("`lathe run` has no flag --steps", err)
        self.assertIn("put -- before the command", err)
        self.assertIn("lathe run --gpus 1 -- python3 train.py --steps 10", err)
        zh = self.usage("run", "python3", "train.py", "--steps", "10", lang=ZH)
        self.assertIn("`lathe run` 没有 --steps 这个选项", zh)
        self.assertIn("请在命令前加上 --", zh)
        self.assertIn("lathe run -- python3 train.py --steps 10", zh)

    def test_unknown_subcommand(self):
        err = self.usage("pss")
        self.assertIn("`lathe` has no command 'pss'; did you mean ps?", err)
        self.assertNotIn("A subcommand is required", err)
        zh = self.usage("--lang", "zh", "pss")
        self.assertIn("`lathe` 没有 “pss” 这个命令；是不是想输入 ps？", zh)
        self.assertIn("`lathe snap` has no command 'lss'; did you mean ls?", self.usage("snap", "lss"))
        self.assertIn("`lathe snap ls` has no flag --jsn; did you mean --json?",
                      self.usage("snap", "ls", "--jsn"))

    def test_missing_subcommand(self):
        self.assertIn("`lathe` needs a command", self.usage())
        self.assertIn("`lathe snap` 后面需要跟一个命令", self.usage("snap", lang=ZH))

    def test_valid_words_are_not_reported(self):
        # A missing value is CLI11's own error, not an unknown flag.
        err = self.usage("run", "--gpus")
        self.assertNotIn("has no flag", err)
        self.assertIn("--gpus", err)
        # Everything after -- is the command's.
        r = lathe("run", "-f", "/nonexistent/job.yaml", "--", "ls", "--gpux")
        self.assertNotIn("has no flag", r.stderr)


class EachCommandBuildsItsOwnCommandLine(unittest.TestCase):
    """A call builds only its own command's flags (cmd/commands.cc): every command
    `lathe --help` lists must still be found, with its own help and usage errors."""

    def test_every_listed_command_has_its_help_and_its_errors(self):
        listed = lathe("--help")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        names = []
        section = False
        for line in listed.stdout.splitlines():
            if line.startswith("Subcommands:"):
                section = True
            elif section and line.startswith("  ") and line.strip():
                names.append(line.split()[0])
        self.assertIn("run", names)
        self.assertIn("deploy", names)
        self.assertGreater(len(names), 20)
        for name in names:
            h = lathe(name, "--help")
            self.assertEqual(h.returncode, 0, f"{name}: {h.stderr}")
            self.assertIn(name, h.stdout.splitlines()[1] if len(h.stdout.splitlines()) > 1
                          else h.stdout, f"{name}: {h.stdout[:200]}")
            bad = lathe(name, "--no-such-flag-here")
            self.assertEqual(bad.returncode, 2, f"{name}: {bad.stderr}")
            self.assertIn(f"`lathe {name}` has no flag --no-such-flag-here", bad.stderr)
        # A global option before the command still finds it.
        self.assertIn("--gpus", lathe("--lang", "en", "run", "--help").stdout)
        self.assertIn("--gpus", lathe("--lang=en", "run", "--help").stdout)


class EveryCommandIsListedAndCompleted(unittest.TestCase):
    """The table of commands (kCommands in src/cmd/commands.cc) is what `lathe --help` lists,
    what `lathe __complete` offers and what test_i18n.py knows as command words: a command
    added to it cannot be missing from either."""

    def table(self):
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "cmd",
                           "commands.cc")
        with open(src) as f:
            text = f.read()
        body = text[text.index("kCommands[] = {"):]
        body = body[:body.index("};")]
        return set(re.findall(r'\{"([a-z-]+)", Setup', body))

    def test_the_table_is_in_help_in_completion_and_in_the_i18n_words(self):
        words = self.table()
        self.assertTrue({"run", "share", "unshare", "shares", "project"} <= words, words)
        listed = lathe("--help")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        names = {line.split()[0] for line in listed.stdout.split("Subcommands:", 1)[1].splitlines()
                 if line.startswith("  ") and line.strip()}
        self.assertEqual(words - names, set(), "commands --help does not list")
        completed = set(lathe("__complete", "").stdout.split())
        self.assertEqual(words - completed, set(), "commands completion does not offer")
        self.assertEqual(set(lathe("__complete", "sh").stdout.split()), {"share", "shares"})
        self.assertIn("project", lathe("__complete", "pro").stdout.split())
        self.assertIn("unshare", lathe("__complete", "un").stdout.split())
        import test_i18n
        self.assertEqual(words - test_i18n.COMMAND_WORDS, set(), "test_i18n.COMMAND_WORDS")
        # A mistyped one is told apart from them all.
        self.assertIn("did you mean shares?", lathe("sharess").stderr)


if __name__ == "__main__":
    unittest.main()
