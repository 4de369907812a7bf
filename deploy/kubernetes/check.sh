#!/usr/bin/env bash
# Checks Kubernetes manifests offline: yamllint, `kubectl kustomize`, and
# check.mjs (every object against the Kubernetes API schemas; every TPU
# worker group's hosts and chips against its topology).
#
#   deploy/kubernetes/check.sh [DIR]     # default: deploy/kubernetes
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-$here}"
export NODE_PATH="${MANTA_NODE_TOOLS:-$HOME/.cache/manta/node_tools}/node_modules"
if [ ! -d "$NODE_PATH/kubernetes-models" ]; then
  echo "missing npm packages under $NODE_PATH: run scripts/install_deps.sh" >&2
  exit 2
fi
yamllint -s -c "$here/.yamllint" "$dir"
rendered="$(kubectl kustomize "$dir")"
node "$here/check.mjs" - <<<"$rendered"
