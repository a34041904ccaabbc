"""The artifact path end to end: pack on the operator's side, then download and
unpack on the device's, through a real HTTP server."""

from __future__ import annotations

import os

from artifact_server import ArtifactServer

from edgebox.fleet.artifacts import download, pack, unpack
from edgebox.fleet.document import Artifact


def test_packed_version_arrives_unpacked_with_the_same_files(tmp_path):
    source = tmp_path / "lane_detector" / "7"
    (source / "assets").mkdir(parents=True)
    (source / "model.onnx").write_bytes(os.urandom(200_000))
    (source / "assets" / "labels.txt").write_text("lane\n")
    store = tmp_path / "store"
    store.mkdir()
    packed = pack(source, store / "lane_detector-7.tar.gz")

    with ArtifactServer(store) as server:
        artifact = Artifact(server.url("lane_detector-7.tar.gz"), packed.sha256, packed.size)
        got = download(artifact, tmp_path / "device" / "fleet", 1 << 20, None)
    unpack(got.path, tmp_path / "device" / "unpacked")

    out = tmp_path / "device" / "unpacked"
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == [
        "assets",
        "assets/labels.txt",
        "model.onnx",
    ]
    for name in ("model.onnx", "assets/labels.txt"):
        assert (out / name).read_bytes() == (source / name).read_bytes()
