#!/usr/bin/env bash
# Installs the Debian packages Manta builds with, if any are missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libuv1-dev libgloo-dev libopenblas-dev
  libgtest-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev libsqlite3-dev
  libcpp-httplib-dev libmsgpack-cxx-dev libtcmalloc-minimal4 curl
  procps libhiredis-dev redis-server yamllint libnghttp2-dev
)
# Commands that may come from elsewhere than Debian's archive (NodeSource's
# nodejs bundles npm; a cloud SDK may provide kubectl): their Debian
# packages only where the command is missing.
command -v node >/dev/null || PACKAGES+=(nodejs)
command -v npm >/dev/null || PACKAGES+=(npm)
command -v kubectl >/dev/null || PACKAGES+=(kubernetes-client)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# The npm packages the Kubernetes manifest check needs (deploy/kubernetes),
# outside the repository.
install_node_tools() {
  local prefix="${MANTA_NODE_TOOLS:-$HOME/.cache/manta/node_tools}"
  if [ ! -f "$prefix/node_modules/kubernetes-models/package.json" ] || [ ! -f "$prefix/node_modules/js-yaml/package.json" ]; then
    mkdir -p "$prefix"
    npm install --silent --no-audit --no-fund --prefix "$prefix" kubernetes-models@4.5.1 js-yaml@4.1.0 >/dev/null
  fi
}

if [ ${#missing[@]} -eq 0 ]; then
  install_node_tools
  exit 0
fi

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
install_node_tools
