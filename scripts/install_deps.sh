#!/usr/bin/env bash
# Installs what Manta needs, when something is missing: Debian packages with
# one apt-get, and the npm packages Debian lacks under ~/.cache/manta.
#
#   scripts/install_deps.sh          # to build and run Manta (scripts/demo.sh)
#   scripts/install_deps.sh --test   # and what the test suite starts or drives
#   scripts/install_deps.sh --image  # and what builds and runs the image (scripts/build_image.sh)
set -euo pipefail

# Building and running: compilers (clang builds; gcc's libstdc++ and
# binutils come with build-essential), the libraries, Python's headers and the
# packages the Python front end uses, and uPlot, which the dashboard's page
# embeds at build time.
PACKAGES=(
  build-essential clang mold cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libuv1-dev libgloo-dev libopenblas-dev
  libgtest-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev libsqlite3-dev
  libcpp-httplib-dev libmsgpack-cxx-dev libtcmalloc-minimal4 procps libhiredis-dev libnghttp2-dev
  libssl-dev
  python3-dev python3-venv pybind11-dev python3-cloudpickle python3-numpy python3-msgpack
)
NODE_TOOLS=(uplot@1.6.32)

# Testing: the servers the tests start (Redis, Prometheus), the browser the
# page's test drives, the checkers of the Kubernetes manifests, clang-format
# 14 and yapf for the format check (scripts/format.sh), curl as a plain HTTP client; from npm the manifests'
# schemas, playwright-core (which drives Debian's chromium and downloads no
# browser) and llama.cpp as node-llama-cpp with its prebuilt x64 library only
# (the peer that loads Manta's GGUF exports); fortunes, the text the
# README's and bench_serving's training runs read (/usr/share/games/fortunes).
TEST_PACKAGES=(redis-server prometheus chromium yamllint clang-format-14 yapf3 curl python3-pytest python3-grpcio
               fortunes)
TEST_NODE_TOOLS=(kubernetes-models@4.5.1 js-yaml@4.1.0 playwright-core@1.65.1 node-llama-cpp@3.22.1
                 @node-llama-cpp/linux-x64@3.22.1)

# The image: mmdebstrap for its Debian base, buildah to build it, podman
# and runc to run it where this machine can run containers.
IMAGE_PACKAGES=(mmdebstrap buildah podman runc)

case "${1:-}" in
  "") ;;
  --image) PACKAGES+=("${IMAGE_PACKAGES[@]}") ;;
  --test)
    PACKAGES+=("${TEST_PACKAGES[@]}")
    NODE_TOOLS+=("${TEST_NODE_TOOLS[@]}")
    # kubectl may come from a cloud SDK rather than Debian.
    command -v kubectl >/dev/null || PACKAGES+=(kubernetes-client)
    ;;
  *) echo "usage: $0 [--test|--image]" >&2; exit 2 ;;
esac
# Node.js and npm may come from elsewhere than Debian's archive (NodeSource's
# nodejs bundles npm): their Debian packages only where the command is missing.
command -v node >/dev/null || PACKAGES+=(nodejs)
command -v npm >/dev/null || PACKAGES+=(npm)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "Installing missing packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Tests start their own redis-server and Prometheus on free ports; the
  # packaged services would hold 6379 (the GCS's default port) and 9090.
  for service in redis-server prometheus; do
    if [[ " ${missing[*]} " == *" $service "* ]]; then
      $SUDO systemctl disable --now "$service" >/dev/null 2>&1 || $SUDO service "$service" stop >/dev/null 2>&1 || true
    fi
  done
fi

# npm packages, outside the repository: installed when one is missing or at
# another version than pinned here.
prefix="${MANTA_NODE_TOOLS:-$HOME/.cache/manta/node_tools}"
for spec in "${NODE_TOOLS[@]}"; do
  if ! grep -qs "\"version\": \"${spec##*@}\"" "$prefix/node_modules/${spec%@*}/package.json"; then
    mkdir -p "$prefix"
    npm install --silent --no-audit --no-fund --omit=optional --prefix "$prefix" "${NODE_TOOLS[@]}" >/dev/null
    break
  fi
done
