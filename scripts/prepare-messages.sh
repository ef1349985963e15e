#!/usr/bin/env bash
# Prepares the "messages" corpus: German software messages paired with their English originals,
# from the German gettext catalogs (usr/share/locale/de/LC_MESSAGES/*.mo) of a fixed list of
# Debian 12 packages, split into OUTDIR/train.tsv, valid.tsv and test.tsv by
# `rosetta prepare-messages` (see data/include/rosetta/data/messages.h for the filters).
#
#   scripts/prepare-messages.sh OUTDIR [extra prepare-messages options, e.g. --max-chars 150]
#
# Independent of what is installed: downloads the packages' current bookworm versions once into
# a cache directory (ROSETTA_CACHE, default ~/.cache/rosetta; delete $cache/messages to fetch
# newer ones) with apt-get download and unpacks them with dpkg -x (no installation, no root
# needed unless apt lists are missing). OUTDIR/SOURCES.txt records each package's version and
# catalogs. Each catalog keeps its package's licence (mostly GPL or LGPL; see the packages'
# /usr/share/doc/PACKAGE/copyright). The binary is $ROSETTA_BIN, else build/rosetta (or
# build/apps/rosetta) in the repository.
set -euo pipefail

# Packages whose German catalogs are large and varied: command-line tools, package management,
# compilers and build tools, system administration, libraries (GLib, GTK, GnuTLS), PostgreSQL.
# Left out: iso-codes (language and country names: a dictionary, not messages), xkb-data
# (keyboard layout names) and shared-mime-info (file type names).
packages=(
  coreutils tar grep sed findutils diffutils cpio gawk make bison gettext bash
  dpkg libdpkg-perl apt libapt-pkg6.0 aptitude-common debconf-i18n adduser
  git gnupg-l10n libc-l10n wget procps psmisc login util-linux-locales e2fsprogs-l10n
  sudo nano man-db texinfo binutils-common gcc-12-locales xz-utils systemd krb5-locales
  libgnutls30 libglib2.0-data libgtk-3-common gsettings-desktop-schemas
  postgresql-15 postgresql-client-15
)

if [[ $# -lt 1 || "$1" == -h || "$1" == --help ]]; then
  echo "usage: $0 OUTDIR [prepare-messages options]" >&2
  exit 2
fi
out=$1
shift

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/corpus-lib.sh
source "$root/scripts/corpus-lib.sh"
find_rosetta "$root"

cache=${ROSETTA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rosetta}/messages
mkdir -p "$cache/debs"

# The cached .deb of package $1 (the highest version when there are several), or nothing.
cached_deb() {
  local debs=("$cache/debs/$1"_*.deb)
  [[ -e "${debs[0]}" ]] || return 0
  printf '%s\n' "${debs[@]}" | sort -V | tail -n 1
}

missing=()
for p in "${packages[@]}"; do
  [[ -n "$(cached_deb "$p")" ]] || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "fetching ${#missing[@]} Debian packages into $cache/debs"
  apt_download "$cache/debs" "${missing[@]}"
fi

# Unpack every package afresh and keep its German catalogs; SOURCES.txt says where each
# catalog came from.
rm -rf "$cache/unpack" "$cache/LC_MESSAGES.tmp"
mkdir -p "$cache/LC_MESSAGES.tmp"
sources="$cache/SOURCES.txt.tmp"
{
  echo "# The German gettext catalogs of the messages corpus: Debian 12 (bookworm) packages"
  echo "# fetched with apt-get download and read by rosetta prepare-messages."
  echo "# package version architecture catalogs"
} > "$sources"
for p in "${packages[@]}"; do
  deb=$(cached_deb "$p")
  if [[ -z "$deb" ]]; then
    echo "error: $p: no .deb in $cache/debs after apt-get download" >&2
    exit 1
  fi
  dpkg -x "$deb" "$cache/unpack"
  catalogs=()
  for mo in "$cache/unpack/usr/share/locale/de/LC_MESSAGES"/*.mo; do
    [[ -e "$mo" ]] || continue
    catalogs+=("$(basename "$mo")")
    mv "$mo" "$cache/LC_MESSAGES.tmp/"
  done
  if [[ ${#catalogs[@]} -eq 0 ]]; then
    echo "error: $p ($deb) ships no German catalog in usr/share/locale/de/LC_MESSAGES" >&2
    exit 1
  fi
  echo "$p $(dpkg-deb -f "$deb" Version) $(dpkg-deb -f "$deb" Architecture) ${catalogs[*]}" \
    >> "$sources"
  rm -rf "$cache/unpack"
done
rm -rf "$cache/LC_MESSAGES"
mv "$cache/LC_MESSAGES.tmp" "$cache/LC_MESSAGES"

"$rosetta" prepare-messages --mo "$cache/LC_MESSAGES" --out "$out" "$@"
mv "$sources" "$out/SOURCES.txt"
echo "corpus in $out:"
wc -l "$out"/*.tsv
