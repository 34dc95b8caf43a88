"""GPU placement and priorities on a simulated 4-GPU inventory."""
import unittest

from harness import DaemonTest


class Scheduling(DaemonTest):
    def test_four_single_gpu_jobs_run_at_once_and_the_fifth_waits(self):
        ids = [self.d.submit("--gpus", "1", "--", "sh", "-c",
                             'echo "dev=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER id=$LATHE_RUN_ID"; sleep 60')
               for _ in range(5)]
        for i in ids[:4]:
            self.d.wait_state(i, "running")
        self.assertEqual(self.d.inspect(ids[4])["state"], "queued")
        devices = set()
        for i in ids[:4]:
            line = self.d.wait_for(lambda: self.d.logs(i).strip(), "log of " + i)
            self.assertIn("order=PCI_BUS_ID", line)
            self.assertIn("id=" + i, line)
            devices.add(line.split()[0])
        self.assertEqual(devices, {"dev=0", "dev=1", "dev=2", "dev=3"})
        alloc = sorted(g for i in ids[:4] for g in self.d.inspect(i)["gpus"])
        self.assertEqual(alloc, [0, 1, 2, 3])
        # Freeing one GPU lets the fifth start on exactly that GPU.
        freed = self.d.inspect(ids[1])["gpus"]
        self.d.cli("stop", ids[1])
        self.d.wait_state(ids[1], "stopped")
        r = self.d.wait_state(ids[4], "running")
        self.assertEqual(r["gpus"], freed)
        gpus = self.d.cli("gpus").stdout
        self.assertIn("SIMULATED", gpus)
        self.assertIn(ids[4], gpus)

    def test_high_priority_preempts_low_which_is_requeued_and_completes(self):
        low = [self.d.submit("--gpus", "1", "--priority", "low", "--name", f"low{i}", "--",
                             "sh", "-c", "echo start; sleep 4; echo finished")
               for i in range(4)]
        for i in low:
            self.d.wait_state(i, "running")
        high = self.d.submit("--gpus", "1", "--priority", "high", "--", "sh", "-c", "echo high; sleep 1")
        self.d.wait_state(high, "succeeded")
        runs = [self.d.wait_state(i, "succeeded", timeout=120) for i in low]
        preempted = [r for r in runs if r["preemptions"] > 0]
        self.assertEqual(len(preempted), 1, "exactly one low run is preempted")
        victim = preempted[0]
        self.assertEqual(victim["retries_used"], 0, "preemption does not use up --retry")
        events = [e["data"].get("to") for e in victim["events"] if e["type"] == "state"]
        self.assertIn("preempted", events)
        self.assertEqual(events[-1], "succeeded")
        self.assertEqual(self.d.logs(victim["id"]).count("start"), 2)
        self.assertEqual(self.d.logs(high), "high\n")

    def test_impossible_request_is_refused_at_submit(self):
        r = self.d.cli("run", "--gpus", "5", "--", "true", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("gpus", r.stderr)
        self.assertIn("4", r.stderr)


if __name__ == "__main__":
    unittest.main()
