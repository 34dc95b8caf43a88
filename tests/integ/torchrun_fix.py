"""Debian 12's python3-torch (1.13) under Python 3.11: `Std.from_str("0")` is None (iterating an
IntFlag no longer yields its zero member), so every /usr/bin/torchrun fails in `to_map` before it
starts a worker. Where that is so, a test puts this `torchrun` first on the run's PATH: the same
torch.distributed.run, with from_str mended. Stdlib only."""
import os
import subprocess

SHIM = """#!/usr/bin/python3
import sys
from torch.distributed.elastic.multiprocessing import api
def from_str(cls, vm):
    if ":" not in vm:
        return cls(int(vm))
    return {int(k): cls(int(v)) for k, v in (p.split(":") for p in vm.split(","))}
api.Std.from_str = classmethod(from_str)
from torch.distributed.run import main
sys.exit(main())
"""

PROBE = ("from torch.distributed.elastic.multiprocessing import Std; "
         "import sys; sys.exit(0 if Std.from_str('0') is not None else 1)")


def run_path(directory):
    """The PATH a torchrun run needs: the default one, after `directory`/torchrun when this
    machine's torchrun is broken (the shim is written there, readable by everyone)."""
    default = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    if subprocess.run(["/usr/bin/python3", "-c", PROBE], capture_output=True).returncode == 0:
        return default
    os.makedirs(directory, exist_ok=True)
    os.chmod(directory, 0o755)
    path = os.path.join(directory, "torchrun")
    with open(path, "w") as f:
        f.write(SHIM)
    os.chmod(path, 0o755)
    return directory + ":" + default
