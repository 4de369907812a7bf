#!/usr/bin/env bash
# Installs the Debian packages Manta builds with, if any are missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libuv1-dev libgloo-dev libopenblas-dev
  libgtest-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev libsqlite3-dev
  libcpp-httplib-dev libmsgpack-cxx-dev libtcmalloc-minimal4 curl
  procps libhiredis-dev redis-server yamllint libnghttp2-dev chromium prometheus
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

# The npm packages outside the repository: the Kubernetes manifest check's
# (deploy/kubernetes), the dashboard page's plots (uplot, served by the
# dashboard) and its browser test's driver (playwright-core, which drives the
# Debian chromium and downloads no browser), and llama.cpp as npm's
# node-llama-cpp with its prebuilt x64 library only (optional packages, the
# GPU builds, are left out): the peer that loads Manta's GGUF exports.
NODE_TOOLS=(kubernetes-models@4.5.1 js-yaml@4.1.0 uplot@1.6.32 playwright-core@1.65.1 node-llama-cpp@3.22.1
            @node-llama-cpp/linux-x64@3.22.1)
install_node_tools() {
  local prefix="${MANTA_NODE_TOOLS:-$HOME/.cache/manta/node_tools}"
  local spec
  for spec in "${NODE_TOOLS[@]}"; do
    # Missing, or at another version than pinned here.
    if ! grep -qs "\"version\": \"${spec##*@}\"" "$prefix/node_modules/${spec%@*}/package.json"; then
      mkdir -p "$prefix"
      npm install --silent --no-audit --no-fund --omit=optional --prefix "$prefix" "${NODE_TOOLS[@]}" >/dev/null
      return
    fi
  done
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
# The same for Prometheus (the metrics test starts its own on a free port).
for service in redis-server prometheus; do
  if [[ " ${missing[*]} " == *" $service "* ]]; then
    $SUDO systemctl disable --now "$service" >/dev/null 2>&1 || $SUDO service "$service" stop >/dev/null 2>&1 || true
  fi
done
install_node_tools
