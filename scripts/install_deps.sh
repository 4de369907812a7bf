#!/usr/bin/env bash
# Installs the Debian packages Manta builds with, if any are missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libuv1-dev libgloo-dev libopenblas-dev
  libgtest-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev libsqlite3-dev
  libcpp-httplib-dev libmsgpack-cxx-dev libtcmalloc-minimal4 curl
  procps libhiredis-dev redis-server
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "Installing missing packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
# Tests start their own redis-server on free ports; the packaged service
# would hold 6379, the GCS's default port.
if [[ " ${missing[*]} " == *" redis-server "* ]]; then
  $SUDO systemctl disable --now redis-server >/dev/null 2>&1 || $SUDO service redis-server stop >/dev/null 2>&1 || true
fi
