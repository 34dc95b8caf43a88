"""The daemon keeps its TCP port across restarts when none is configured: a user's stored
login (`lathe login`) still works after the daemon restarts; a port taken meanwhile by
another program gives a new one, said in the daemon's log; `--port 0` is any free port at
each start.
"""
import json
import os
import socket
import unittest

from harness import Daemon, second_user, shared_scratch
import test_tokens

USER = "lathe-it-port"


class KeptPort(unittest.TestCase):
    # The remote CLI's helpers of the tokens' test.
    user_dir = test_tokens.Tokens.user_dir
    remote = test_tokens.Tokens.remote
    token_file = test_tokens.Tokens.token_file

    def setUp(self):
        self.pw = second_user(self, USER)
        self.base = shared_scratch(self, "lathe-it-port-")
        self.d = Daemon(gpus="none", port=None).start()
        self.addCleanup(self.d.cleanup)

    def port(self):
        with open(os.path.join(self.d.home, "endpoint.json")) as f:
            return int(json.load(f)["tcp"].rsplit(":", 1)[1])

    def restart(self):
        self.d.stop()
        self.d.start()

    def test_a_stored_login_survives_a_restart(self):
        first = self.port()
        tok = json.loads(self.d.cli("token", "create", "--json", user=USER,
                                    env=self.d.env(HOME="/tmp")).stdout)["token"]
        env = self.remote(self.pw)
        self.d.cli("login", f"http://127.0.0.1:{first}", "--token-file",
                   self.token_file(self.pw, tok), user=USER, env=env)
        self.restart()
        self.assertEqual(self.port(), first)
        status = json.loads(self.d.cli("status", "--json", user=USER, env=env).stdout)
        self.assertEqual(status["found_by"], "login")
        self.assertEqual(status["caller"]["user"], USER)

    def test_a_port_taken_meanwhile_gives_another_said_in_the_log(self):
        first = self.port()
        self.d.stop()
        squatter = socket.socket()
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", first))
        squatter.listen()
        self.addCleanup(squatter.close)
        self.d.start()
        self.assertNotEqual(self.port(), first)
        self.assertIn(f"port {first} of the previous start cannot be had again",
                      self.d.daemon_log())
        # Free again: the new port is the one kept now.
        second = self.port()
        squatter.close()
        self.restart()
        self.assertEqual(self.port(), second)

    def test_port_0_is_any_free_port_each_time(self):
        first = self.port()
        self.d.stop()
        self.d.port = "0"
        keep = socket.socket()
        keep.bind(("127.0.0.1", first))  # so that "any free port" cannot be the same by chance
        keep.listen()
        self.addCleanup(keep.close)
        self.d.start()
        self.assertNotEqual(self.port(), first)
        self.assertNotIn("of the previous start", self.d.daemon_log())


if __name__ == "__main__":
    unittest.main()
