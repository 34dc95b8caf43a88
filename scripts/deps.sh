#!/usr/bin/env bash
# Installs every Debian package Lathe's build and tests need, then the web UI's
# npm packages (scripts/web-deps.sh: npm ci from web/package-lock.json). Idempotent:
# when everything is present it only asks dpkg and hashes the lockfile, and returns
# in well under a second.
#   scripts/deps.sh          build + test dependencies
#   scripts/deps.sh --bench  also what only the benchmarks need (wrk, hyperfine, nginx, ...)
set -euo pipefail

BUILD=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
  libspdlog-dev libfmt-dev libsqlite3-dev sqlite3 libzstd-dev libssl-dev
  libre2-dev libcurl4-openssl-dev libgtest-dev libgmock-dev libsimdjson-dev
  libtorch-dev libopenblas0-pthread clang-format clang nodejs
)
# Debian's nodejs comes without npm (the package npm); a nodejs of another origin
# (e.g. NodeSource's) has npm in it and conflicts with Debian's npm package.
if ! command -v npm >/dev/null 2>&1; then BUILD+=(npm); fi
TEST=(
  python3 util-linux procps passwd curl openssl
  python3-torch python3-numpy python3-sklearn prometheus
  jupyter-notebook python3-websocket r-base-core r-cran-irkernel chromium fonts-noto-cjk
  munge slurm-wlm slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin  # the Slurm pools' tests start a private one
  # runs in images (docs/environments.md): podman with runc (crun fails on hybrid
  # cgroups), its init, a busybox and a gcc-built setuid probe for test images,
  # a registry on loopback, and mmdebstrap for a Debian image with python3
  podman runc catatonit conmon netavark buildah busybox-static skopeo docker-registry
  apache2-utils mmdebstrap
)
BENCH=(
  wrk hyperfine
  restic borgbackup python3-fastapi python3-uvicorn python3-uvloop python3-httptools valgrind nginx
)

want=("${BUILD[@]}" "${TEST[@]}")
if [[ "${1:-}" == "--bench" ]]; then want+=("${BENCH[@]}"); fi

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "deps: installing ${missing[*]}" >&2
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q >/dev/null
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
  echo "deps: done" >&2
fi

bash "$(dirname "$0")/web-deps.sh"

# The Debian+torch image of the image tests (cached outside the clone, keyed by
# package versions; minutes once). Not fatal: without it those tests skip.
if [[ $(id -u) -eq 0 ]]; then
  bash "$(dirname "$0")/test-images.sh" >/dev/null ||
    echo "deps: the Debian+torch test image was not built; tests/integ/test_image_torch.py skips" >&2
fi
