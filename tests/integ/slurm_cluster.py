"""A private Slurm 22.05 on loopback for a test: munged on its own socket, slurmctld and one
slurmd with a generated slurm.conf in a temporary directory, random ports, and fake GPUs (GRES
backed by character devices made with mknod). Nothing system-wide is touched; every process it
starts is stopped by its pid in stop(), which is safe to call after a failed start.

Needs root (munged runs as the munge user, slurmd as root, mknod) and Debian's munge, slurmctld,
slurmd and slurm-client (`scripts/deps.sh`). Stdlib only.
"""
import os
import shutil
import signal
import socket
import subprocess
import time

SBIN = "/usr/sbin"
NEEDED = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/sbatch",
          "/usr/bin/squeue", "/usr/bin/scancel", "/usr/bin/sinfo", "/usr/bin/setpriv",
          "/etc/munge/munge.key")


def missing():
    """What this machine lacks to start a private Slurm ("" when nothing)."""
    if os.geteuid() != 0:
        return "needs root (munged as the munge user, slurmd as root, mknod)"
    absent = [p for p in NEEDED if not os.path.exists(p)]
    if absent:
        return "missing " + ", ".join(absent) + " (scripts/deps.sh installs Slurm)"
    try:
        import pwd
        pwd.getpwnam("munge")
    except KeyError:
        return "no munge user"
    return ""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


class Cluster:
    """One node named after this host, `gpus` fake GPUs, `cpus` CPUs, partition `debug`.

    With `preempt`, a second partition `urgent` on the same node has the higher priority tier:
    a job there preempts (cancels, after `grace_s` of SIGTERM) the jobs of `debug` it needs room
    from (PreemptType=preempt/partition_prio, PreemptMode=CANCEL), and such a job ends PREEMPTED.

    With `rest`, slurmctld also accepts JWTs (AuthAltTypes=auth/jwt, a key in the state directory)
    and slurmrestd serves openapi/v0.0.38 on `rest_url` (127.0.0.1, a free port) as the user
    `nobody` (it refuses to run as root or SlurmUser), authenticating each request by its JWT.

    With `nodes=2`, two slurmd on this host (RECIPES.md): node one named after this host, node
    two `localhost` (both names resolve here, as a cluster's node names do), each with `gpus`
    fake GPUs and `cpus` CPUs, on ports of their own, in partition `debug`.
    """

    def __init__(self, base, gpus=2, cpus=2, preempt=False, grace_s=10, short_minutes=None,
                 nodes=1, rest=False):
        self.base = base
        self.dir = os.path.join(base, "slurm")
        self.mdir = os.path.join(base, "munge")
        self.gpus = gpus
        self.cpus = cpus
        self.preempt = preempt
        self.grace_s = grace_s
        self.short_minutes = short_minutes
        self.rest = rest
        self.rest_url = ""
        self.procs = {}
        self.host = socket.gethostname().split(".")[0]
        if nodes not in (1, 2):
            raise ValueError("nodes: 1 or 2")
        self.node_names = [self.host] if nodes == 1 else [self.host, "localhost"]
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_CONF": self.conf,
                    "HOME": "/root", "LANG": "C.UTF-8"}

    def _write_config(self):
        d = self.dir
        multi = len(self.node_names) > 1
        for sub in ("ctld", "spool", "dev"):
            os.makedirs(os.path.join(d, sub))
        if multi:
            for n in self.node_names:
                os.makedirs(os.path.join(d, "spool", n))
        for i in range(self.gpus):  # GRES needs character devices; nvidia's major is 195
            os.mknod(os.path.join(d, "dev", f"fakegpu{i}"), 0o600 | 0o020000, os.makedev(195, i))
        conf = f"""ClusterName=lathetest
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.mdir}/munge.sock
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
GresTypes=gpu
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
StateSaveLocation={d}/ctld
SlurmdSpoolDir={d}/spool{"/%n" if multi else ""}
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd{"-%n" if multi else ""}.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd{"-%n" if multi else ""}.log
SlurmctldDebug=info
SlurmdDebug=info
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
"""
        if self.rest:
            key = os.path.join(d, "ctld", "jwt.key")
            with open(key, "wb") as f:
                f.write(os.urandom(32))
            os.chmod(key, 0o600)
            conf += f"AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key={key}\n"
        node_line = (f"NodeAddr=127.0.0.1 CPUs={self.cpus} Sockets=1 CoresPerSocket={self.cpus} "
                     f"ThreadsPerCore=1 RealMemory=4000 Gres=gpu:fake:{self.gpus} State=UNKNOWN")
        if multi:
            for n in self.node_names:
                conf += f"NodeName={n} NodeHostname={self.host} Port={free_port()} {node_line}\n"
        else:
            conf += f"NodeName={self.host} {node_line}\n"
        nodes = ",".join(self.node_names)
        if self.preempt:
            # The backfill pass is where a pending job preempts: every second, not every 30.
            conf = conf.replace("sched_min_interval=0", "sched_min_interval=0,bf_interval=1")
            conf += f"""PreemptType=preempt/partition_prio
PreemptMode=CANCEL
PartitionName=debug Nodes={nodes} Default=YES MaxTime=INFINITE State=UP PriorityTier=1 GraceTime={self.grace_s}
PartitionName=urgent Nodes={nodes} MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
"""
        else:
            conf += f"""PartitionName=debug Nodes={nodes} Default=YES MaxTime=INFINITE State=UP
"""
        if self.short_minutes:
            conf += f"PartitionName=short Nodes={nodes} MaxTime={self.short_minutes} State=UP\n"
        with open(self.conf, "w") as f:
            f.write(conf)
        with open(os.path.join(d, "gres.conf"), "w") as f:
            for n in self.node_names:
                f.write(f"NodeName={n} Name=gpu Type=fake File={d}/dev/fakegpu[0-{self.gpus - 1}]\n")

    def _spawn(self, name, argv, user=None):
        out = open(os.path.join(self.base, f"{name}.out"), "w")
        if user:
            argv = ["/usr/bin/setpriv", "--reuid", user, "--regid", user, "--init-groups", "--"] + argv
        self.procs[name] = subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                            cwd=self.base)
        out.close()

    def run(self, *argv, timeout=30):
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def start(self, timeout_s=30):
        os.makedirs(self.dir)
        os.makedirs(self.mdir)
        os.chmod(self.mdir, 0o755)
        shutil.chown(self.mdir, "munge", "munge")
        m = self.mdir
        self._spawn("munged", [f"{SBIN}/munged", "-F", f"--socket={m}/munge.sock",
                               "--key-file=/etc/munge/munge.key", f"--pid-file={m}/munged.pid",
                               f"--log-file={m}/munged.log", f"--seed-file={m}/munged.seed"],
                    user="munge")
        deadline = time.monotonic() + timeout_s
        while not os.path.exists(f"{m}/munge.sock"):
            if time.monotonic() > deadline or self.procs["munged"].poll() is not None:
                raise RuntimeError(f"munged did not start: {self.tail('munged.out')}")
            time.sleep(0.05)
        self._write_config()
        self._spawn("slurmctld", [f"{SBIN}/slurmctld", "-D", "-i"])
        if len(self.node_names) == 1:
            self._spawn("slurmd", [f"{SBIN}/slurmd", "-D"])
        else:
            for n in self.node_names:
                self._spawn(f"slurmd-{n}", [f"{SBIN}/slurmd", "-D", "-N", n])
        while time.monotonic() < deadline:
            for n, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{n} exited with {p.returncode}: {self.tail(n + '.out')}")
            p = self.run("sinfo", "-h", "-N", "-o", "%t")  # one line per node and partition
            if (p.returncode == 0 and set(p.stdout.split()) == {"idle"}
                    and len(p.stdout.split()) >= len(self.node_names)):
                if self.rest:
                    self._start_rest()
                return self
            time.sleep(0.1)
        raise RuntimeError("the Slurm node did not become idle: " + self.tail("slurm/slurmd.log"))

    def _start_rest(self):
        # slurmrestd reads slurm.conf as `nobody`: the directories on the way must let it in.
        for path in (self.base, self.dir):
            os.chmod(path, os.stat(path).st_mode | 0o055)
        os.chmod(self.conf, 0o644)
        os.chmod(os.path.join(self.dir, "gres.conf"), 0o644)
        port = free_port()
        self.rest_url = f"http://127.0.0.1:{port}"
        # slurmrestd needs a token in its own environment to start with rest_auth/jwt; requests
        # carry their own. Any user's token does: root's, short-lived.
        tok = self.token("root", 600)
        env = dict(self.env, SLURM_JWT=tok)
        out = open(os.path.join(self.base, "slurmrestd.out"), "w")
        self.procs["slurmrestd"] = subprocess.Popen(
            ["/usr/bin/setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", "--",
             f"{SBIN}/slurmrestd", "-a", "rest_auth/jwt", "-s", "openapi/v0.0.38",
             f"127.0.0.1:{port}"], env=env, stdout=out, stderr=subprocess.STDOUT, cwd="/")
        out.close()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.procs["slurmrestd"].poll() is not None:
                raise RuntimeError("slurmrestd exited: " + self.tail("slurmrestd.out"))
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("slurmrestd did not listen: " + self.tail("slurmrestd.out"))

    def token(self, user, lifespan_s):
        """A JWT for `user` minted by root (`scontrol token`)."""
        p = self.run("/usr/bin/scontrol", "token", f"username={user}", f"lifespan={lifespan_s}")
        if p.returncode != 0 or "SLURM_JWT=" not in p.stdout:
            raise RuntimeError("scontrol token failed: " + p.stdout + p.stderr)
        return p.stdout.strip().split("SLURM_JWT=", 1)[1]

    def restart_controller(self, down_s=1.0):
        """Stops slurmctld (SIGTERM: it saves its state), waits `down_s`, starts it again on the
        same state, and waits until it answers."""
        p = self.procs["slurmctld"]
        p.terminate()
        p.wait(30)
        time.sleep(down_s)
        self._spawn("slurmctld", [f"{SBIN}/slurmctld", "-D"])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.run("/usr/bin/scontrol", "ping").returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("slurmctld did not come back: " + self.tail("slurm/slurmctld.log"))

    def stop_rest(self):
        p = self.procs.get("slurmrestd")
        if p and p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def tail(self, name, n=2000):
        try:
            with open(os.path.join(self.base, name), errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def stop(self):
        """Cancels every job, then stops slurmd, slurmctld and munged, each by its pid."""
        ctld = self.procs.get("slurmctld")
        if ctld and ctld.poll() is None:
            try:
                self.run("/usr/bin/scancel", "--user=root", timeout=10)
                for u in self.job_users():
                    self.run("/usr/bin/scancel", f"--user={u}", timeout=10)
            except (OSError, subprocess.SubprocessError):
                pass
        self.stop_rest()
        slurmds = [n for n in self.procs if n.startswith("slurmd") and n != "slurmrestd"]
        for name in slurmds + ["slurmctld", "munged"]:
            p = self.procs.get(name)
            if not p or p.poll() is not None:
                continue
            # munged runs under setpriv, which execs it: the same pid.
            for pid in [p.pid] + _children(p.pid):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def job_users(self):
        try:
            p = self.run("/usr/bin/squeue", "-h", "-o", "%u", timeout=10)
        except (OSError, subprocess.SubprocessError):
            return []
        return sorted(set(p.stdout.split())) if p.returncode == 0 else []
