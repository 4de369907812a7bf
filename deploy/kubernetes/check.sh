#!/usr/bin/env bash
# Checks Kubernetes manifests offline: yamllint, `kubectl kustomize`, and
# check.mjs (every object against the Kubernetes API schemas; every TPU
# worker group's hosts and chips against its topology; every pod against
# the image's Containerfile: its user, a read-only root, the token Secret).
#
#   deploy/kubernetes/check.sh [DIR [CONTAINERFILE]]   # default: deploy/kubernetes, ./Containerfile
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-$here}"
containerfile="${2:-$here/../../Containerfile}"
export NODE_PATH="${MANTA_NODE_TOOLS:-$HOME/.cache/manta/node_tools}/node_modules"
if [ ! -d "$NODE_PATH/kubernetes-models" ]; then
  echo "missing npm packages under $NODE_PATH: run scripts/install_deps.sh" >&2
  exit 2
fi
yamllint -s -c "$here/.yamllint" "$dir"
rendered="$(kubectl kustomize "$dir")"
node "$here/check.mjs" - "$containerfile" <<<"$rendered"
