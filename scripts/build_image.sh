#!/usr/bin/env bash
# Builds the Manta image (Containerfile) with what Debian provides, reaching
# nothing but Debian's archive: mmdebstrap makes the Debian 12 slim root file
# system the Containerfile starts FROM, buildah builds the image on it
# (chroot isolation: no container engine needs to run), and the image is
# written out as an OCI archive and as a root file system.
#
#   scripts/build_image.sh [--no-build] [--out DIR]   # DIR: build/image
#
# Run as root (mmdebstrap and buildah write their own stores). Writes:
#   DIR/base-bookworm-slim.tar  the base root file system (reused by later runs; delete it to refresh)
#   DIR/context/                the build context: opt/manta/{bin,python,examples,configs}
#   DIR/manta-<version>.oci.tar the image (`skopeo copy oci-archive:... docker://REGISTRY/manta:<version>`)
#   DIR/rootfs/, DIR/image.env  its root file system and environment, for scripts/test_image.sh
# and leaves localhost/manta:<version> in buildah's store (podman sees it).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=build/image
BUILD=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --out) OUT="$2"; shift ;;
    *) echo "usage: $0 [--no-build] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
if [ "$(id -u)" -ne 0 ]; then echo "$0: run as root (mmdebstrap, buildah)" >&2; exit 2; fi
VERSION="$(sed -n 's/^project(manta VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
IMAGE="localhost/manta:$VERSION"
MIRROR="${MANTA_DEBIAN_MIRROR:-http://deb.debian.org}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
started=$SECONDS
phase() { echo "== $1 ($((SECONDS - started)) s)"; }

scripts/install_deps.sh --image

# The programs the image ships, and the Python package's module.
PROGRAMS=(gcs_server raylet dashboard job_runner manta manta_serve manta_export_gguf manta_train manta_train_local
          maxtext_trainer maxtext_elastic_trainer example_counter example_placement_group example_tpu_devices
          example_tpu_hosts example_tpu_multislice)
if [ "$BUILD" = 1 ]; then
  phase "building ${PROGRAMS[*]} manta_python"
  scripts/build.sh --target "${PROGRAMS[@]}" manta_python
fi

phase "staging the context in $OUT/context"
ctx="$OUT/context"
rm -rf "$ctx"
mkdir -p "$ctx/opt/manta/bin" "$ctx/opt/manta/python" "$ctx/opt/manta/examples" "$ctx/opt/manta/configs"
for p in "${PROGRAMS[@]}"; do
  install -m 0755 "build/bin/$p" "$ctx/opt/manta/bin/$p"
  strip --strip-unneeded "$ctx/opt/manta/bin/$p"
done
cp -rL build/python/manta "$ctx/opt/manta/python/manta"   # the package's files and its module
find "$ctx/opt/manta/python" -name __pycache__ -prune -exec rm -rf {} +
cp examples/python/*.py "$ctx/opt/manta/examples/"
cp train/kernels/configs/*.yml "$ctx/opt/manta/configs/"
chmod -R a+rX,go-w "$ctx/opt/manta"

base="$OUT/base-bookworm-slim.tar"
if [ ! -f "$base" ]; then
  phase "mmdebstrap: Debian 12 minbase, docs and locales left out, as debian:12-slim"
  # shellcheck disable=SC2016 # the hook's $1 is the root, which mmdebstrap passes
  mmdebstrap --variant=minbase --mode=root --format=tar \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    bookworm "$base.tmp" \
    "deb $MIRROR/debian bookworm main" "deb $MIRROR/debian bookworm-updates main" \
    "deb $MIRROR/debian-security bookworm-security main"
  mv "$base.tmp" "$base"
fi

phase "importing the base as localhost/debian:12-slim"
ctr="$(buildah from scratch)"
buildah add --quiet "$ctr" "$base" / >/dev/null
buildah commit --quiet --rm "$ctr" localhost/debian:12-slim >/dev/null

phase "buildah build $IMAGE"
buildah build --isolation chroot --network host --layers=false \
  --build-arg BASE=localhost/debian:12-slim \
  --label "org.opencontainers.image.title=manta" --label "org.opencontainers.image.version=$VERSION" \
  --label "org.opencontainers.image.revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
  -f Containerfile -t "$IMAGE" "$ctx"

phase "writing $OUT/manta-$VERSION.oci.tar and $OUT/rootfs"
rm -f "$OUT/manta-$VERSION.oci.tar"
buildah push --quiet "$IMAGE" "oci-archive:$OUT/manta-$VERSION.oci.tar:manta:$VERSION"
ctr="$(buildah from --pull=never "$IMAGE")"
mnt="$(buildah mount "$ctr")"
rm -rf "$OUT/rootfs"
cp -a "$mnt/." "$OUT/rootfs/"
buildah umount "$ctr" >/dev/null
buildah rm "$ctr" >/dev/null
buildah inspect --type image --format '{{range .OCIv1.Config.Env}}{{println .}}{{end}}' "$IMAGE" >"$OUT/image.env"
buildah inspect --type image --format '{{.OCIv1.Config.User}}' "$IMAGE" >"$OUT/image.user"
echo "$IMAGE" >"$OUT/image.name"

phase "done"
echo "image $IMAGE: $(du -sh "$OUT/manta-$VERSION.oci.tar" | cut -f1) as an OCI archive," \
     "$(du -sh "$OUT/rootfs" | cut -f1) unpacked; scripts/test_image.sh checks it"
