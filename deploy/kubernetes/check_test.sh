#!/usr/bin/env bash
# The manifest check accepts deploy/kubernetes and rejects copies of it with
# a worker group whose numOfHosts contradicts its topology, whose hosts ask
# for the wrong number of chips, or whose object breaks the API schema; and
# pods that run as another user than the image's, write their root file
# system, keep no /tmp, or read the token from elsewhere than the Secret.
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
# The image's rules, broken all at once in one copy (one run of the check):
# each must be reported.
rm -rf "$tmp/image" && cp -r "$here" "$tmp/image"
sed -i -e 's/runAsUser: 1000/runAsUser: 0/' -e 's|mountPath: /tmp|mountPath: /scratch|' -e '/fsGroup: 1000/d' \
  -e 's|--token-file=/etc/manta/token|--token-file=/etc/token|' "$tmp/image/head.yaml"
sed -i -e 's/readOnlyRootFilesystem: true/readOnlyRootFilesystem: false/' -e 's/defaultMode: 0440/defaultMode: 0444/' \
  "$tmp/image/tpu-slices.yaml"
if out="$("$here/check.sh" "$tmp/image" 2>&1)"; then echo "FAIL: image rules broken and accepted"; exit 1; fi
for words in "runAsUser 0 is not the image's user 1000" "container manta-worker: no readOnlyRootFilesystem" \
             "no emptyDir at /tmp" "token-file /etc/token is not on a Secret's mount" "lets others read the token" \
             "fsGroup undefined is not the image's group 1000"; do
  grep -q "$words" <<<"$out" || { echo "FAIL: not rejected for '$words':"; echo "$out"; exit 1; }
done
echo "ok: image rules rejected"

# A Containerfile whose user is another than the manifests'.
sed 's/^USER 1000:1000$/USER 1001:1001/' "$here/../../Containerfile" >"$tmp/Containerfile"
if out="$("$here/check.sh" "$here" "$tmp/Containerfile" 2>&1)"; then
  echo "FAIL: manifests for user 1000 were accepted for an image of user 1001"; exit 1
fi
grep -q "runAsUser 1000 is not the image's user 1001" <<<"$out" || { echo "FAIL: $out"; exit 1; }
echo "ok: another image user rejected"
echo "manifest checks: all ok"
