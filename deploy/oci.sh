#!/usr/bin/env bash
# Package the filter as a Wasm plugin image that both Higress and Istio pull from `oci://` URLs.
#
#   deploy/oci.sh <module.wasm> <image reference> <output directory>
#   deploy/oci.sh dist/api_agent.wasm registry.example.com/api-agent:0.1.0 dist
#
# Writes <output>/oci (an OCI image layout, tagged with the reference's tag) and <output>/api-agent-oci.tar
# (the same as an `oci-archive`), and prints the digests. The layout is the "compat" Wasm image:
# an OCI image manifest with one `application/vnd.oci.image.layer.v1.tar+gzip` layer holding
# `plugin.wasm` and nothing else (deploy/README.md says why this one). Built by buildah (Debian's
# package) from `scratch` in a private, temporary storage, so it needs no daemon and leaves no state;
# skopeo writes the archive. Reproducible: every timestamp is SOURCE_DATE_EPOCH (default 0), so the
# same module always gives the same digests.
set -euo pipefail

usage() { echo "usage: $0 <module.wasm> <image reference> <output directory>" >&2; exit 2; }
[[ $# -eq 3 ]] || usage
wasm=$1 ref=$2 out=$3

[[ -s $wasm ]] || { echo "$0: $wasm is missing or empty (run make build)" >&2; exit 1; }
for tool in buildah skopeo; do
    command -v "$tool" >/dev/null || { echo "$0: $tool not found (make setup installs it)" >&2; exit 1; }
done

# The tag: what follows the last ':' after the last '/' (a registry port is not a tag); default latest.
name=${ref##*/}
case $name in
    *@*) echo "$0: give a tag, not a digest: $ref" >&2; exit 2 ;;
    *:*) tag=${name##*:} ;;
    *) tag=latest ;;
esac
[[ $tag =~ ^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$ ]] || { echo "$0: not a valid tag: '$tag'" >&2; exit 2; }
epoch=${SOURCE_DATE_EPOCH:-0}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# buildah's storage lives in the temporary directory; vfs needs neither fuse nor overlay support.
b() { buildah --root "$work/root" --runroot "$work/run" --storage-driver vfs "$@"; }

mkdir -p "$work/ctx" "$out"
cp "$wasm" "$work/ctx/plugin.wasm"
chmod 0644 "$work/ctx/plugin.wasm"

ctr=$(b from --quiet --pull=never scratch)
b copy --quiet "$ctr" "$work/ctx/plugin.wasm" /plugin.wasm >/dev/null
b config --os wasip1 --arch wasm \
    --annotation module.wasm.image/variant=compat \
    --annotation org.opencontainers.image.title=api-agent \
    --annotation org.opencontainers.image.base.name- --annotation org.opencontainers.image.base.digest- \
    "$ctr"
rm -rf "$out/oci" "$out/api-agent-oci.tar"
# --disable-compression=false: gzip the layer (Higress and Istio want tar+gzip); --omit-history and no
# identity label: nothing in the image but the module and the metadata above.
b commit --quiet --rm --format oci --disable-compression=false --identity-label=false --omit-history \
    --timestamp "$epoch" "$ctr" "oci:$out/oci:$tag" >/dev/null
skopeo copy --quiet "oci:$out/oci:$tag" "oci-archive:$out/api-agent-oci.tar:$tag"

read -r digest layer < <(python3 - "$out/oci" "$tag" <<'PY'
import json, os, sys
layout, tag = sys.argv[1:]
[m] = [m for m in json.load(open(os.path.join(layout, "index.json")))["manifests"]
       if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag]
manifest = json.load(open(os.path.join(layout, "blobs", *m["digest"].split(":"))))
print(m["digest"], manifest["layers"][-1]["digest"])
PY
)
echo "$out/oci:$tag  manifest $digest"
echo "  layer $layer (plugin.wasm, $(stat -c %s "$wasm") bytes, sha256:$(sha256sum "$wasm" | cut -d' ' -f1))"
echo "  archive $out/api-agent-oci.tar"
echo "push: skopeo copy oci:$out/oci:$tag docker://$ref"
echo "pin:  oci://${ref%:"$tag"}@$digest"
