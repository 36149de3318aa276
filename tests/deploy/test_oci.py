"""The OCI image `make oci` writes (deploy/oci.sh): the layout Higress and Istio both accept, pushed to
a real registry (the CNCF distribution registry, Debian's docker-registry) on 127.0.0.1 and pulled
back with skopeo, byte for byte.

What "accepted" means is what their fetchers do: Istio's pkg/wasm/imagefetcher.go (Higress's gateway
runs the same code from its istio fork): a manifest that is not Docker's is tried as the "compat"
variant: the last layer (the only one, in Istio before 1.2x) must be
application/vnd.oci.image.layer.v1.tar+gzip, a gzip'd tar holding a file whose base name is
plugin.wasm; Higress's image specification adds that plugin.wasm is in the last layer, alone.
`fetch_like_istio` below does exactly those steps on what the registry serves.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import tarfile

import pytest

from deploykit import OCI_LAYOUT, OCI_REF, RUNNING, WASM, Registry

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
TAG = OCI_REF.rsplit("/", 1)[-1].partition(":")[2] or "latest"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def skopeo(*args: str) -> bytes:
    r = subprocess.run(["skopeo", *args], capture_output=True, timeout=120)
    assert r.returncode == 0, f"skopeo {' '.join(args)}: {r.stderr.decode(errors='replace')}"
    return r.stdout


class Layout:
    """An OCI image layout directory."""

    def __init__(self, path: str):
        self.path = path

    def blob(self, digest: str) -> bytes:
        with open(os.path.join(self.path, "blobs", *digest.split(":", 1)), "rb") as f:
            data = f.read()
        assert sha256(data) == digest, f"blob {digest} does not hash to its name"
        return data

    def manifest_descriptor(self, tag: str) -> dict:
        with open(os.path.join(self.path, "index.json"), encoding="utf-8") as f:
            index = json.load(f)
        found = [m for m in index["manifests"] if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag]
        assert len(found) == 1, f"tag {tag!r} in {index}"
        return found[0]


def fetch_like_istio(manifest_bytes: bytes, blob) -> bytes:
    """The module as Istio's ImageFetcher (compat variant, OCI media types) extracts it."""
    manifest = json.loads(manifest_bytes)
    assert manifest.get("mediaType") != DOCKER_MANIFEST, "a Docker manifest takes Istio's other path"
    layers = manifest["layers"]
    assert layers, "number of layers must be greater than zero"
    last = layers[-1]
    assert last["mediaType"] == OCI_LAYER_GZIP, f"invalid media type {last['mediaType']} (expect {OCI_LAYER_GZIP})"
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob(last["digest"]))), mode="r:") as tar:
        for member in tar:
            if os.path.basename(member.name) == "plugin.wasm":
                return tar.extractfile(member).read()
    raise AssertionError("plugin.wasm not found in the archive")


def check_image(manifest_bytes: bytes, blob, wasm_bytes: bytes) -> dict:
    """Every property the two gateways and the OCI spec need; the manifest, parsed."""
    manifest = json.loads(manifest_bytes)
    assert manifest["schemaVersion"] == 2 and manifest["mediaType"] == OCI_MANIFEST
    assert manifest["config"]["mediaType"] == OCI_CONFIG
    assert [layer["mediaType"] for layer in manifest["layers"]] == [OCI_LAYER_GZIP], "one tar+gzip layer"
    assert manifest["annotations"]["module.wasm.image/variant"] == "compat"   # the Wasm image spec's marker

    layer_gz = blob(manifest["layers"][0]["digest"])
    assert len(layer_gz) == manifest["layers"][0]["size"]
    layer_tar = gzip.decompress(layer_gz)
    with tarfile.open(fileobj=io.BytesIO(layer_tar), mode="r:") as tar:
        members = tar.getmembers()
        assert [(m.name, m.isfile(), m.mode & 0o7777) for m in members] == [("plugin.wasm", True, 0o644)], \
            "Higress: each layer holds one file; plugin.wasm, at the root"
        assert tar.extractfile(members[0]).read() == wasm_bytes
    # A complete tar: 512-byte blocks ending with the two zero blocks (umoci 0.4.7 wrote layers without
    # them, which GNU tar refuses: that is why buildah builds the image).
    assert len(layer_tar) % 512 == 0 and layer_tar.endswith(b"\0" * 1024)

    config = json.loads(blob(manifest["config"]["digest"]))
    assert (config["os"], config["architecture"]) == ("wasip1", "wasm")
    assert config["rootfs"] == {"type": "layers", "diff_ids": [sha256(layer_tar)]}
    assert fetch_like_istio(manifest_bytes, blob) == wasm_bytes
    return manifest


@pytest.fixture(scope="module")
def wasm_bytes(wasm) -> bytes:
    with open(wasm, "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def layout(wasm_bytes) -> Layout:
    """dist/oci, as `make oci` wrote it from the current dist/api_agent.wasm."""
    if not os.path.isfile(os.path.join(OCI_LAYOUT, "index.json")):
        pytest.fail(f"{OCI_LAYOUT} is missing: run `make oci`")
    layout = Layout(OCI_LAYOUT)
    try:
        packaged = fetch_like_istio(layout.blob(layout.manifest_descriptor(TAG)["digest"]), layout.blob)
    except (AssertionError, OSError, KeyError) as e:
        pytest.fail(f"{OCI_LAYOUT}:{TAG} is not a Wasm image ({e}): run `make oci`")
    if packaged != wasm_bytes:
        pytest.fail(f"{OCI_LAYOUT} holds another module than {WASM} (rebuilt since?): run `make oci`")
    return layout


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    reg = Registry(str(tmp_path_factory.mktemp("registry")))
    RUNNING.append(reg)
    try:
        yield reg.start()
    finally:
        reg.stop()
        RUNNING.remove(reg)


def test_layout_is_the_image_both_gateways_accept(layout, wasm_bytes):
    desc = layout.manifest_descriptor(TAG)
    assert desc["mediaType"] == OCI_MANIFEST
    manifest_bytes = layout.blob(desc["digest"])
    check_image(manifest_bytes, layout.blob, wasm_bytes)


def test_archive_holds_the_same_image(layout, wasm_bytes, tmp_path):
    archive = os.path.join(os.path.dirname(OCI_LAYOUT), "api-agent-oci.tar")
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path, filter="data")
    copy = Layout(str(tmp_path))
    desc = copy.manifest_descriptor(TAG)
    assert desc["digest"] == layout.manifest_descriptor(TAG)["digest"]
    check_image(copy.blob(desc["digest"]), copy.blob, wasm_bytes)


def test_round_trip_through_a_registry(layout, wasm_bytes, registry, tmp_path):
    local = layout.manifest_descriptor(TAG)
    remote = f"docker://{registry.host}/api-agent:{TAG}"
    skopeo("copy", "--quiet", "--dest-tls-verify=false", f"oci:{layout.path}:{TAG}", remote)

    # What the registry serves, as any client (and Istio's go-containerregistry) sees it.
    headers, served = registry.get(f"/v2/api-agent/manifests/{TAG}", accept=f"{OCI_MANIFEST}, {DOCKER_MANIFEST}")
    assert headers["content-type"] == OCI_MANIFEST
    assert headers["docker-content-digest"] == sha256(served) == local["digest"], "pushed unchanged"
    check_image(served, lambda d: registry.get(f"/v2/api-agent/blobs/{d}")[1], wasm_bytes)

    # Pulled back with skopeo: manifest and config as it reports them, then the whole image.
    assert skopeo("inspect", "--raw", "--tls-verify=false", remote) == served
    config = json.loads(skopeo("inspect", "--config", "--raw", "--tls-verify=false", remote))
    assert (config["os"], config["architecture"]) == ("wasip1", "wasm")
    skopeo("copy", "--quiet", "--src-tls-verify=false", remote, f"oci:{tmp_path}/pulled:{TAG}")
    pulled = Layout(str(tmp_path / "pulled"))
    desc = pulled.manifest_descriptor(TAG)
    assert desc["digest"] == local["digest"]
    manifest = check_image(pulled.blob(desc["digest"]), pulled.blob, wasm_bytes)
    print(f"\nround trip via {registry.host}: manifest {desc['digest']} ({OCI_MANIFEST}), "
          f"config {manifest['config']['digest']} ({OCI_CONFIG}), "
          f"layer {manifest['layers'][0]['digest']} ({OCI_LAYER_GZIP}), plugin.wasm {sha256(wasm_bytes)}")
