#!/usr/bin/python3
"""The OS seam, held: raw operating-system calls (`::open(`, `::chmod(`, `::geteuid(`, ...)
belong in src/lathe/os/, which gives the rest of the tree Status-returning, testable
wrappers. Outside it, each file may keep at most the raw calls that
scripts/os_seam_allowed.txt grants it, with the reason written there (the monitor's
child between fork and exec, the HTTP server's socket code, ...). A new raw call
outside os/ fails this check, naming the file, the line and the call; a file that
needs fewer than it is granted is reported so that the grant can shrink.

    /usr/bin/python3 scripts/check_os_seam.py            # check (make os-seam-check, .ci/run)
    /usr/bin/python3 scripts/check_os_seam.py --counts   # what each file has now

Tests (`*_test.cc`, test_util/, fuzz targets) are not checked. Stdlib only.
"""
import os
import re
import sys

# LATHE_SEAM_ROOT: another tree to check (the check's own test plants a call in one).
ROOT = os.environ.get("LATHE_SEAM_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALLOWED = os.path.join(ROOT, "scripts", "os_seam_allowed.txt")

CALLS = (
    "open openat close read write pread pwrite readv writev lseek stat lstat fstat fstatat statx "
    "mkdir mkdirat rmdir unlink unlinkat rename renameat renameat2 chmod fchmod fchmodat chown "
    "fchown lchown fchownat symlink symlinkat readlink readlinkat link linkat access faccessat "
    "truncate ftruncate fsync fdatasync syncfs fallocate utimensat futimens opendir fdopendir "
    "readdir closedir getuid geteuid getgid getegid setuid setgid setresuid setresgid setfsuid "
    "setfsgid setgroups getgroups initgroups kill killpg fork vfork execv execve execvp execvpe "
    "waitpid waitid wait4 pipe pipe2 dup dup2 dup3 socket socketpair bind listen accept accept4 "
    "connect shutdown send recv sendmsg recvmsg sendto recvfrom setsockopt getsockopt "
    "getsockname getpeername mount umount2 unshare setns prctl ioctl mmap munmap madvise mprotect "
    "poll ppoll epoll_create1 epoll_ctl epoll_wait signalfd eventfd inotify_init1 "
    "inotify_add_watch inotify_rm_watch statvfs fstatvfs sendfile splice setsid setpgid getpgid "
    "getrlimit setrlimit prlimit getpid getppid gettid sysconf umask chdir fchdir getcwd flock "
    "fcntl isatty ttyname getpwnam getpwuid getpwnam_r getpwuid_r getgrnam getgrgid getgrnam_r "
    "getgrgid_r getgrouplist").split()
PATTERN = re.compile(r"(?<![\w.>])::(" + "|".join(CALLS) + r")\s*\(")


def checked_files():
    for top in ("src/lathe", "src/cmd"):
        for dirpath, dirnames, files in os.walk(os.path.join(ROOT, top)):
            rel_dir = os.path.relpath(dirpath, ROOT)
            if rel_dir.startswith("src/lathe/os") or "test_util" in rel_dir.split(os.sep):
                dirnames[:] = []
                continue
            for f in sorted(files):
                if not f.endswith((".cc", ".h")) or f.endswith("_test.cc") or "fuzz" in f:
                    continue
                yield os.path.join(rel_dir, f)


def calls_in(path):
    out = []
    with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            code = line.split("//", 1)[0]
            for m in PATTERN.finditer(code):
                out.append((n, m.group(1)))
    return out


def read_allowed():
    allowed = {}
    with open(ALLOWED, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 3 or not parts[1].isdigit():
                sys.exit(f"{ALLOWED}:{n}: expected 'PATH COUNT REASON', got {line!r}")
            allowed[parts[0]] = int(parts[1])
    return allowed


def main():
    found = {p: calls_in(p) for p in checked_files()}
    found = {p: c for p, c in found.items() if c}
    if "--counts" in sys.argv:
        for p, c in sorted(found.items()):
            print(f"{p} {len(c)} {' '.join(sorted(set(x for _, x in c)))}")
        return 0
    allowed = read_allowed()
    bad = 0
    for p, c in sorted(found.items()):
        grant = allowed.get(p, 0)
        if len(c) > grant:
            bad += 1
            where = ", ".join(f"{p}:{n} ::{name}(" for n, name in c)
            print(f"os seam: {p} makes {len(c)} raw OS call(s), {grant} allowed "
                  f"(scripts/os_seam_allowed.txt): {where}. Use or add an os/ function.")
    for p, grant in sorted(allowed.items()):
        have = len(found.get(p, []))
        if have < grant:
            print(f"os seam: {p} is allowed {grant} raw OS call(s) and makes {have}: "
                  f"lower its line in scripts/os_seam_allowed.txt")
    if bad:
        return 1
    total = sum(len(c) for c in found.values())
    print(f"os seam: {total} raw OS calls outside src/lathe/os in {len(found)} files, all allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
