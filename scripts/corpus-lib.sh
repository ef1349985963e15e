# shellcheck shell=bash
# Shared by scripts/prepare-corpus.sh and scripts/prepare-messages.sh (sourced, not run).

# Sets `rosetta` to the binary: $ROSETTA_BIN, else build/rosetta (or build/apps/rosetta) under
# the repository root $1; exits with one line when it is not there.
find_rosetta() {
  local root=$1
  if [[ -n "${ROSETTA_BIN:-}" ]]; then
    rosetta=$ROSETTA_BIN
  elif [[ ! -x "$root/build/rosetta" && -x "$root/build/apps/rosetta" ]]; then
    rosetta=$root/build/apps/rosetta  # where CMake puts it unless told otherwise
  else
    rosetta=$root/build/rosetta
  fi
  if [[ ! -x "$rosetta" ]]; then
    echo "error: $rosetta not found or not executable (build it, or set ROSETTA_BIN)" >&2
    exit 1
  fi
}

# Downloads the .deb of each package named after DIR into DIR (apt-get download: no
# installation). Refreshes apt's package lists (as root) when one of them is unknown.
apt_download() {
  local dir=$1
  shift
  # apt-get download needs package lists; refresh them if a package is unknown.
  if ! apt-cache show "$@" > /dev/null 2>&1; then
    if [[ $(id -u) -ne 0 ]]; then
      local which=$1
      [[ $# -gt 1 ]] && which="one of: $*"
      echo "error: apt does not know $which; run 'sudo apt-get update' first" >&2
      exit 1
    fi
    apt-get update -qq
  fi
  # apt-get download writes to the current directory. As root, apt's _apt sandbox user cannot
  # write into the cache; skip the sandbox (and its warning).
  local sandbox=()
  [[ $(id -u) -eq 0 ]] && sandbox=(-o APT::Sandbox::User=root)
  (cd "$dir" && apt-get download -qq "${sandbox[@]}" "$@")
}
