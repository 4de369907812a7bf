#!/usr/bin/env bash
# Checks the image scripts/build_image.sh built, as the Kubernetes manifests
# run it: user 1000:1000, a read-only root file system, a fresh /tmp, and the
# cluster token as Kubernetes mounts the Secret for fsGroup 1000 (mode 0440,
# group 1000, a read-only mount at /etc/manta).
#
#   scripts/test_image.sh [--out DIR]   # DIR: build/image, as build_image.sh wrote it
#
# 1. chroot into DIR/rootfs, in namespaces of its own (mounts, network, pids:
#    nothing outlives the check, no port is shared with the host): every
#    program and the Python module find their libraries (ldd); `manta start
#    --head --token-file=/etc/manta/token` starts the GCS, a raylet and the
#    dashboard; `manta status` lists the node; example_counter runs on it, and
#    so does examples/tasks_and_actors.py with the image's python3; `manta
#    stop` stops it.
# 2. The same head and status in a container, with podman (runc), where this
#    machine can run one: --read-only, --user from the image, --network none.
# Run as root. Prints each step's time; exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=build/image
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift ;;
    *) echo "usage: $0 [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
if [ "$(id -u)" -ne 0 ]; then echo "$0: run as root (chroot, mounts)" >&2; exit 2; fi
OUT="$(cd "$OUT" && pwd)"
[ -d "$OUT/rootfs/opt/manta/bin" ] || { echo "no image in $OUT: run scripts/build_image.sh" >&2; exit 2; }
USERSPEC="$(cat "$OUT/image.user")"
IMAGE="$(cat "$OUT/image.name")"
TOKEN="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"

echo "== chroot into $OUT/rootfs as $USERSPEC"
started=$SECONDS
unshare --mount --net --pid --fork --propagation private \
  env ROOTFS="$OUT/rootfs" ENVFILE="$OUT/image.env" USERSPEC="$USERSPEC" TOKEN="$TOKEN" bash -s <<'CHECK'
set -euo pipefail
ip link set lo up
r="$ROOTFS"
# The pod's mounts: the root file system read-only, /tmp an emptyDir, the
# Secret a read-only tmpfs holding the token as 0440, root and the group.
mount --bind "$r" "$r" && mount -o remount,bind,ro "$r"
mount -t proc proc "$r/proc"
mount --bind /dev "$r/dev"
mount -t tmpfs -o mode=1777 tmpfs "$r/tmp"
mount -t tmpfs -o mode=0755 tmpfs "$r/etc/manta"
echo "$TOKEN" >"$r/etc/manta/token"
chown 0:"${USERSPEC#*:}" "$r/etc/manta/token" && chmod 0440 "$r/etc/manta/token"
mount -o remount,ro "$r/etc/manta"
mapfile -t image_env <"$ENVFILE"
in_image() { chroot --userspec="$USERSPEC" "$r" /usr/bin/env -i HOME=/home/manta "${image_env[@]}" "$@"; }
step() { echo "-- $*"; }

step "every program finds its libraries"
missing="$(in_image sh -c 'for f in /opt/manta/bin/* /opt/manta/python/manta/_core*.so; do ldd "$f" | sed "s|^|$f: |"; done' | grep 'not found' || true)"
[ -z "$missing" ] || { echo "$missing"; exit 1; }
step "the root file system is read-only to the user"
if in_image touch /home/manta/x 2>/dev/null; then echo "wrote into the root file system"; exit 1; fi

step "manta start --head --token-file=/etc/manta/token"
t=$SECONDS
in_image manta start --head --port=6379 --node-ip-address=127.0.0.1 --token-file=/etc/manta/token \
  --metrics-export-port=8080 --num-cpus=2
echo "   (started in $((SECONDS - t)) s)"
step "manta status"
status="$(in_image manta status)"
echo "$status"
grep -A1 '^Active:' <<<"$status" | grep -q ' node_' || { echo "status lists no active node"; exit 1; }
step "the daemons enforce the Secret's token"
session_token="$(in_image cat /tmp/manta/session_latest/token)"
[ "$session_token" = "$TOKEN" ] || { echo "the session's token is not the Secret's"; exit 1; }
step "example_counter"
in_image sh -c 'cd /tmp && MANTA_ADDRESS=127.0.0.1:6379 timeout 120 example_counter'
step "python3 /opt/manta/examples/tasks_and_actors.py"
in_image sh -c 'cd /tmp && MANTA_ADDRESS=127.0.0.1:6379 timeout 120 python3 /opt/manta/examples/tasks_and_actors.py'
step "manta stop"
in_image manta stop
CHECK
echo "== chroot check passed in $((SECONDS - started)) s"

PODMAN=(podman --runtime runc)
ULIMITS=(--ulimit "nofile=$(ulimit -n):$(ulimit -Hn)" --ulimit "nproc=4096:4096")
if ! command -v podman >/dev/null || ! command -v runc >/dev/null ||
   ! "${PODMAN[@]}" run --rm --network none "${ULIMITS[@]}" "$IMAGE" true 2>/dev/null; then
  echo "== no container runs on this machine (podman with runc): the chroot check stands alone"
  exit 0
fi
echo "== podman run $IMAGE --read-only"
started=$SECONDS
secret="$(mktemp -d)"
trap 'rm -rf "$secret"' EXIT
chmod 0755 "$secret"
echo "$TOKEN" >"$secret/token"
chown 0:"${USERSPEC#*:}" "$secret/token" && chmod 0440 "$secret/token"
"${PODMAN[@]}" run --rm --network none --read-only --tmpfs /tmp:mode=1777 "${ULIMITS[@]}" \
  -v "$secret:/etc/manta:ro" "$IMAGE" sh -c '
    set -e
    id
    manta start --head --port=6379 --node-ip-address=127.0.0.1 --token-file=/etc/manta/token --num-cpus=2
    manta status
    manta stop'
echo "== podman check passed in $((SECONDS - started)) s"
