#!/usr/bin/env bash
# Installs rosetta's build and run dependencies from Debian 12 packages. Idempotent; run as root.
set -euo pipefail
# libopenmpi-dev, openmpi-bin: data-parallel training (mpirun -np N rosetta train); optional for
# the build (cmake -DROSETTA_MPI=OFF, or AUTO without them, builds without MPI).
# libboost-dev: Boost.Beast and Asio, headers only, rosetta serve's HTTP server (apps/serve_http.h).
packages=(g++ cmake make pkg-config libopenblas-openmp-dev libcli11-dev libspdlog-dev catch2
          libsentencepiece-dev nlohmann-json3-dev libboost-dev libopenmpi-dev openmpi-bin)
# --test (scripts/run-tests.sh): also chromium, in which the rosetta report tests render their
# pages headless (without it they print a message and skip that part), clang-tidy-14, the lint of
# dangling references (scripts/lint.sh), and clang-14, libclang-rt-14-dev and libomp-14-dev, the
# libFuzzer targets (scripts/ci-extra.sh); on x86-64, g++-aarch64-linux-gnu and qemu-user, the
# aarch64 cross-build and its tests under emulation (scripts/test-aarch64.sh; its arm64 libraries
# go into a sysroot of its own, scripts/aarch64-sysroot.sh, not onto this system). README command
# (1) needs none of them. Every package here exists in Debian 12 for amd64 and arm64 alike: on an
# aarch64 machine the same names install natively (the native build is the ARM test there).
if [[ "${1:-}" == "--test" ]]; then
  packages+=(chromium clang-tidy-14 clang-14 libclang-rt-14-dev libomp-14-dev)
  if [[ "$(uname -m)" == "x86_64" ]]; then
    packages+=(g++-aarch64-linux-gnu qemu-user)
  fi
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing ${missing[*]}; run as root (or with sudo)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${missing[*]}"
