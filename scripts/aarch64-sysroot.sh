#!/usr/bin/env bash
# A sysroot for cross-building rosetta for aarch64 (cmake/aarch64-linux-gnu.cmake): Debian 12's
# arm64 packages of rosetta's build dependencies, downloaded and unpacked (dpkg -x) into DIR.
#
#   bash scripts/aarch64-sysroot.sh [DIR]        # default DIR: build-aarch64-sysroot
#
# The host's packages and dpkg configuration are left alone: no `dpkg --add-architecture`, nothing
# installed (Debian's arm64 libsentencepiece-dev is not co-installable with the amd64 one, and
# installing it would remove the host's). apt runs with a state, cache and source list of its own
# under DIR/.apt (the host's Debian sources, read from /etc/apt), as any user. C and C++'s own
# libraries (libc, libstdc++, libgomp, libgcc) are the cross compiler's, in /usr/aarch64-linux-gnu
# (Debian's g++-aarch64-linux-gnu, from scripts/install-deps.sh --test).
#
# Idempotent: DIR/.stamp holds a hash of the package list; a second run with the same list does
# nothing, without the network. A set-up step like install-deps.sh: the build itself downloads
# nothing. Environment: ROSETTA_APT_SOURCES, a sources file (one-line or deb822 .sources) to use
# instead of the host's.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-aarch64-sysroot}

# The arm64 packages rosetta's build links or includes. Header-only ones (CLI11, nlohmann-json,
# Boost) come from here too, so that CMake finds every package in one root and none of the
# host's x86-64 CMake files. Runtime dependencies of the libraries, beyond the cross compiler's
# own: libgfortran5 (OpenBLAS). libsentencepiece0 bundles its protobuf-lite.
packages=(
  libopenblas-openmp-dev libopenblas0-openmp libgfortran5
  libsentencepiece-dev libsentencepiece0
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  catch2
  libcli11-dev nlohmann-json3-dev libboost1.74-dev
)
key=$(printf '%s\n' v1 "${packages[@]}" | sha256sum | cut -c1-16)
if [[ -f "$dir/.stamp" && "$(cat "$dir/.stamp")" == "$key" ]]; then
  echo "aarch64-sysroot: $dir up to date (${#packages[@]} packages)"
  exit 0
fi

command -v dpkg-deb >/dev/null && command -v apt-get >/dev/null ||
  { echo "aarch64-sysroot: needs apt-get and dpkg-deb (Debian)" >&2; exit 1; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
apt_dir=$dir/.apt
mkdir -p "$apt_dir/state/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/sources.list.d" \
  "$apt_dir/debs"
: >"$apt_dir/state/status"
# The host's sources (their suites and mirrors; the keyrings they name stay where they are).
rm -f "$apt_dir/sources.list.d/"*
if [[ -n "${ROSETTA_APT_SOURCES:-}" ]]; then
  cp "$ROSETTA_APT_SOURCES" "$apt_dir/sources.list.d/"
else
  [[ -s /etc/apt/sources.list ]] && cp /etc/apt/sources.list "$apt_dir/sources.list.d/host.list"
  for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -e "$f" ]] && cp "$f" "$apt_dir/sources.list.d/"
  done
fi
apt_opts=(
  -o Dir::State="$apt_dir/state" -o Dir::State::status="$apt_dir/state/status"
  -o Dir::Cache="$apt_dir/cache" -o Dir::Etc::SourceList=/dev/null
  -o Dir::Etc::SourceParts="$apt_dir/sources.list.d"
  -o APT::Architecture=arm64 -o APT::Architectures=arm64
  -o Debug::NoLocking=1 -o APT::Sandbox::User="$(id -un)"
)
echo "aarch64-sysroot: apt-get update (arm64, private state in $apt_dir)"
# A third-party source without arm64 may fail its update; a package it lacks fails below.
apt-get "${apt_opts[@]}" -qq update || echo "aarch64-sysroot: apt-get update reported errors (above)" >&2
(cd "$apt_dir/debs" && rm -f ./*.deb && apt-get "${apt_opts[@]}" -qq download "${packages[@]}")

# Unpack afresh: a package dropped from the list leaves nothing behind.
find "$dir" -mindepth 1 -maxdepth 1 ! -name .apt -exec rm -rf {} +
for deb in "$apt_dir/debs/"*.deb; do
  dpkg-deb -x "$deb" "$dir"
done
# Debian's libraries are symlinks; absolute ones (none expected) would point into the host.
while IFS= read -r link; do
  target=$(readlink "$link")
  ln -sfn "$dir$target" "$link"
done < <(find "$dir" -path "$apt_dir" -prune -o -type l -lname '/*' -print)
echo "$key" >"$dir/.stamp"
echo "aarch64-sysroot: $dir: ${#packages[@]} packages unpacked ($(du -sh --exclude=.apt "$dir" | cut -f1))"
