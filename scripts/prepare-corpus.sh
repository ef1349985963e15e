#!/usr/bin/env bash
# Prepares the default corpus: German -> English sentence pairs from the Ding dictionary
# (Debian package trans-de-en, GPL-2+), split into OUTDIR/train.tsv, valid.tsv and test.tsv.
#
#   scripts/prepare-corpus.sh OUTDIR [extra prepare-corpus options, e.g. --phrases]
#
# Uses /usr/share/trans/de-en when the package is installed; otherwise downloads the .deb once
# into a cache directory (ROSETTA_CACHE, default ~/.cache/rosetta) with apt-get download and
# unpacks it with dpkg -x (no installation, no root needed unless apt lists are missing).
# Idempotent: running it again rewrites the same files. The binary is $ROSETTA_BIN, else
# build/rosetta (or build/apps/rosetta) in the repository.
set -euo pipefail

if [[ $# -lt 1 || "$1" == -h || "$1" == --help ]]; then
  echo "usage: $0 OUTDIR [prepare-corpus options]" >&2
  exit 2
fi
out=$1
shift

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/corpus-lib.sh
source "$root/scripts/corpus-lib.sh"
find_rosetta "$root"

ding=/usr/share/trans/de-en
if [[ ! -f "$ding" ]]; then
  cache=${ROSETTA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rosetta}
  ding="$cache/trans-de-en/usr/share/trans/de-en"
  if [[ ! -f "$ding" ]]; then
    mkdir -p "$cache"
    echo "fetching Debian package trans-de-en into $cache"
    compgen -G "$cache/trans-de-en_*.deb" > /dev/null || apt_download "$cache" trans-de-en
    debs=("$cache"/trans-de-en_*.deb)
    rm -rf "$cache/trans-de-en.tmp"
    dpkg -x "${debs[-1]}" "$cache/trans-de-en.tmp"
    rm -rf "$cache/trans-de-en"
    mv "$cache/trans-de-en.tmp" "$cache/trans-de-en"
  fi
fi

"$rosetta" prepare-corpus --ding "$ding" --out "$out" "$@"
echo "corpus in $out:"
wc -l "$out"/*.tsv
