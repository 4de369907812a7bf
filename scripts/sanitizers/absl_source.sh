#!/usr/bin/env bash
# Unpacks the Debian source of the installed abseil (the same version and
# patches as libabsl-dev) into DEST, for ThreadSanitizer builds: see
# MANTA_TSAN_ABSL_SOURCE in CMakeLists.txt. dpkg-source checks each file
# against the checksums in the .dsc.
#
#   scripts/sanitizers/absl_source.sh build-tsan/absl-src
set -euo pipefail
DEST=${1:?usage: $0 DEST}
[ -f "$DEST/absl/synchronization/mutex.cc" ] && exit 0
VERSION=$(dpkg-query -W -f='${Version}' libabsl-dev)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
DSC="abseil_${VERSION}.dsc"
for pool in http://deb.debian.org/debian/pool/main/a/abseil \
            http://deb.debian.org/debian-security/pool/updates/main/a/abseil; do
  if curl -sfL -o "$WORK/$DSC" "$pool/$DSC"; then
    for f in $(awk '/^Files:/{on=1; next} /^[^ ]/{on=0} on{print $3}' "$WORK/$DSC"); do
      curl -sfL -o "$WORK/$f" "$pool/$f"
    done
    rm -rf "$DEST"
    mkdir -p "$(dirname "$DEST")"
    # A signature dpkg-source cannot verify (no Debian keyring) is only a
    # warning; a checksum that does not match is an error.
    (cd "$WORK" && dpkg-source -x "$DSC" src >"$WORK/log" 2>&1) || { cat "$WORK/log" >&2; exit 1; }
    mv "$WORK/src" "$DEST"
    echo "abseil $VERSION source in $DEST"
    exit 0
  fi
done
echo "abseil $VERSION: no source package found on deb.debian.org" >&2
exit 1
