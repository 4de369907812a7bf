#!/usr/bin/env bash
# The manifest check accepts deploy/kubernetes and rejects copies of it with
# a worker group whose numOfHosts contradicts its topology, whose hosts ask
# for the wrong number of chips, or whose object breaks the API schema.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

"$here/check.sh" "$here"

expect_rejected() {  # NAME SED-EXPRESSION FILE WORDS
  local name="$1" expr="$2" file="$3" words="$4"
  rm -rf "$tmp/$name" && cp -r "$here" "$tmp/$name"
  sed -i "$expr" "$tmp/$name/$file"
  if out="$("$here/check.sh" "$tmp/$name" 2>&1)"; then
    echo "FAIL: $name was accepted"; exit 1
  fi
  if ! grep -q "$words" <<<"$out"; then
    echo "FAIL: $name was rejected without saying '$words':"; echo "$out"; exit 1
  fi
  echo "ok: $name rejected"
}
expect_rejected hosts 's/replicas: 4  # numOfHosts/replicas: 3  # numOfHosts/' tpu-slices.yaml "numOfHosts 3 contradicts topology 4x4"
expect_rejected chips 's/google.com\/tpu: "4"/google.com\/tpu: "8"/' tpu-slices.yaml "asks for google.com/tpu 8"
expect_rejected schema 's/containerPort: 6379/containerPort: gcs-port/' head.yaml "containerPort must be integer"
expect_rejected topology 's/gke-tpu-topology: 4x4/gke-tpu-topology: 4x4x/' tpu-slices.yaml "malformed TPU topology"
echo "manifest checks: all ok"
