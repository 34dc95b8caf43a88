"""Test images made here (no registry is reachable): a busybox root file system
(busybox-static) with a set-user-ID root probe built by gcc, as a tar for
`lathe image import`.

The probe (`/bin/escalate PATH`) calls setuid(0), reports its ids and whether
it could open PATH for writing: the escalation test's evidence. It is the
control that makes that test able to fail: without no-new-privileges it does
become root (checked by hand with podman; docs/environments.md).
"""
import os
import shutil
import subprocess
import tempfile

PROBE_C = r"""
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
  int r = setuid(0);
  printf("uid=%d euid=%d setuid0=%d\n", (int)getuid(), (int)geteuid(), r);
  if (argc > 1) {
    FILE *f = fopen(argv[1], "a");
    printf("write %s: %s\n", argv[1], f ? "ok" : "denied");
    if (f) fclose(f);
  }
  return 0;
}
"""

APPLETS = ["sh", "id", "ls", "cat", "echo", "sleep", "touch", "stat", "env", "dd", "true",
           "false", "mkdir", "rm", "pwd", "head", "wc", "grep", "ps", "kill", "httpd"]


def daemon_podman(home, *args, check=False):
    """podman on a daemon's image store (<home>/images), as the daemon runs it."""
    store = os.path.join(home, "images")
    env = dict(os.environ, CONTAINERS_CONF=store + "/containers.conf",
               CONTAINERS_STORAGE_CONF=store + "/storage.conf")
    return subprocess.run(["podman", "--root", store + "/graph", "--runroot", store + "/run",
                           *args], env=env, capture_output=True, text=True, check=check)


def reset_store(home):
    """Removes every container and image of a daemon's store (a test's tearDown, before the
    daemon's home goes)."""
    if os.path.isdir(os.path.join(home, "images")):
        daemon_podman(home, "rm", "--all", "--force", "--time", "0")
        # Not `system reset`: it clears state other stores' podman share (/dev/shm's locks).
        daemon_podman(home, "rmi", "--all", "--force")


def container_names(home):
    return daemon_podman(home, "ps", "--all", "--format", "{{.Names}}", check=True).stdout.split()


def have_podman():
    return all(os.path.exists(p) for p in ("/usr/bin/podman", "/usr/sbin/runc", "/bin/busybox"))


def busybox_tar(dir_, files=None, name="bb.tar"):
    """A tar of a busybox root file system with /bin/escalate (setuid root), in dir_ (0755);
    `files` maps more paths in it to their text."""
    root = tempfile.mkdtemp(prefix="rootfs-", dir=dir_)
    for d in ("bin", "tmp", "etc", "dev", "proc", "sys"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    shutil.copy("/bin/busybox", os.path.join(root, "bin", "busybox"))
    for a in APPLETS:
        os.symlink("busybox", os.path.join(root, "bin", a))
    src = os.path.join(dir_, "escalate.c")
    with open(src, "w") as f:
        f.write(PROBE_C)
    probe = os.path.join(root, "bin", "escalate")
    subprocess.run(["gcc", "-static", "-O1", "-o", probe, src], check=True)
    os.chown(probe, 0, 0)
    os.chmod(probe, 0o4755)
    with open(os.path.join(root, "etc", "passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\n")
    for path, text in (files or {}).items():
        with open(os.path.join(root, path.lstrip("/")), "w") as f:
            f.write(text)
    tar = os.path.join(dir_, name)
    subprocess.run(["tar", "-C", root, "--numeric-owner", "-cf", tar, "."], check=True)
    os.chmod(tar, 0o644)
    shutil.rmtree(root)
    return tar


class Registry:
    """A docker-registry on loopback with htpasswd credentials (user `u`, password `p`),
    its storage in `dir_`, and a podman store of the test's own to push from."""

    def __init__(self, dir_, port):
        self.dir = dir_
        self.port = port
        self.host = "127.0.0.1:%d" % port
        htpasswd = os.path.join(dir_, "htpasswd")
        out = subprocess.run(["htpasswd", "-Bbn", "u", "p"], check=True, capture_output=True,
                             text=True).stdout
        with open(htpasswd, "w") as f:
            f.write(out)
        conf = os.path.join(dir_, "registry.yml")
        with open(conf, "w") as f:
            f.write("version: 0.1\nlog: {level: error}\n"
                    "storage: {filesystem: {rootdirectory: %s}, delete: {enabled: true}}\n"
                    "http: {addr: '%s'}\n"
                    "auth: {htpasswd: {realm: test, path: %s}}\n"
                    % (os.path.join(dir_, "data"), self.host, htpasswd))
        self.log = open(os.path.join(dir_, "registry.log"), "wb")
        self.proc = subprocess.Popen(["docker-registry", "serve", conf], stdout=self.log,
                                     stderr=self.log)
        self.store = os.path.join(dir_, "pusher")
        os.makedirs(self.store + "/tmp", exist_ok=True)
        with open(self.store + "/containers.conf", "w") as f:
            f.write('[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n'
                    '[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
                    'runtime = "runc"\ntmp_dir = "%s/libpod"\n' % self.store)
        with open(self.store + "/storage.conf", "w") as f:
            f.write('[storage]\ndriver = "overlay"\ngraphroot = "%s/graph"\n'
                    'runroot = "%s/run"\n[storage.options.overlay]\n'
                    'skip_mount_home = "true"\n' % (self.store, self.store))
        import socket
        import time
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the registry did not come up")

    def podman(self, *args):
        env = dict(os.environ, CONTAINERS_CONF=self.store + "/containers.conf",
                   CONTAINERS_STORAGE_CONF=self.store + "/storage.conf",
                   TMPDIR=self.store + "/tmp")
        return subprocess.run(["podman", *args], env=env, check=True, capture_output=True,
                              text=True)

    def push(self, tar, ref):
        """Imports `tar` and pushes it as HOST/ref; returns the pushed image's id."""
        image_id = self.podman("import", "--quiet", tar).stdout.strip().split(":")[-1]
        self.podman("push", "--quiet", "--tls-verify=false", "--creds", "u:p", image_id,
                    "docker://%s/%s" % (self.host, ref))
        return image_id

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()
        subprocess.run(["podman", "rmi", "--all", "--force"], capture_output=True,
                       env=dict(os.environ, CONTAINERS_CONF=self.store + "/containers.conf",
                                CONTAINERS_STORAGE_CONF=self.store + "/storage.conf"))
