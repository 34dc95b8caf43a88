"""`lathe completion bash|zsh|fish` and what the shells ask `lathe __complete` for: commands,
subcommands and options from the binary, and the caller's run ids and names from the daemon
(another user's are not offered). Bash's script is sourced and its function called as bash
calls it on Tab.
"""
import os
import subprocess
import unittest

from harness import LATHE, DaemonTest, second_user

USER = "lathe-it-compl"


class Completion(DaemonTest):
    gpus = "sim:1x24GB"

    def complete(self, *words, user=None):
        return self.d.cli("__complete", *words, user=user,
                          env=self.d.env(HOME="/tmp")).stdout.split("\n")[:-1]

    def test_scripts_for_three_shells(self):
        self.assertIn("complete -o default -F _lathe lathe", self.d.cli("completion", "bash").stdout)
        self.assertIn("compdef _lathe lathe", self.d.cli("completion", "zsh").stdout)
        self.assertIn("complete -c lathe", self.d.cli("completion", "fish").stdout)
        r = self.d.cli("completion", "tcsh", check=False)
        self.assertEqual(r.returncode, 2)

    def test_bash_completes_commands_options_and_the_callers_runs(self):
        second_user(self, USER)
        mine = self.d.cli("run", "--name", "tourjob", "--workdir", "/tmp", "--", "sleep", "60").stdout.strip()
        theirs = self.d.cli("run", "--name", "theirjob", "--workdir", "/tmp", "--", "sleep", "60",
                            user=USER, env=self.d.env(HOME="/tmp")).stdout.strip()
        bindir = os.path.dirname(os.path.abspath(LATHE))
        script = ('source <(lathe completion bash); COMP_WORDS=(lathe %s); COMP_CWORD=%d; _lathe; '
                  'printf "%%s\\n" "${COMPREPLY[@]}"')

        def bash(words, cword):
            env = self.d.env(PATH=bindir + ":/usr/bin:/bin")
            return subprocess.run(["bash", "-c", script % (words, cword)], env=env,
                                  capture_output=True, text=True, timeout=30).stdout.split()

        self.assertEqual(sorted(bash("st", 1)), ["status", "stop"])
        self.assertIn("ls", bash("notebook ''", 2))
        self.assertIn("--gpus", bash("run --g", 2))
        self.assertNotIn("--gpus", bash("run --gpus 1 -- --g", 5), "a program's own words")
        # Runs: the caller's ids and names, not another user's.
        as_me = self.complete("logs", "")
        self.assertIn(mine, as_me)
        self.assertIn("tourjob", as_me)
        as_them = self.complete("stop", "", user=USER)
        self.assertIn(theirs, as_them)
        self.assertNotIn(mine, as_them)
        self.assertNotIn("tourjob", as_them)
        self.assertEqual(self.complete("inspect", mine[:6]), [mine])
        for run in (mine, theirs):
            self.d.cli("stop", run)


if __name__ == "__main__":
    unittest.main()
