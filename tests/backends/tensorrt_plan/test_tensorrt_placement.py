"""Layer placement from the engine inspector's JSON: what ran on the DLA, what
TensorRT silently moved to the GPU, and the one-line summary the model shows."""

from __future__ import annotations

import json

from edgebox.backends.tensorrt.placement import summarize_placement

DLA_ENGINE_NAMES = {
    "Layers": [
        "Reformatting CopyNode for Input Tensor 0 to {ForeignNode[conv1...relu40]}",
        "input to nvm",
        "{ForeignNode[conv1...relu40]}",
        "relu40 from nvm",
        "input copy finish",
        "relu40 copy finish",
        "Softmax_41",
        "TopK_42",
    ],
    "Bindings": ["input", "scores"],
}


def test_dla_engine_counts_dla_subgraphs_and_names_the_gpu_fallback() -> None:
    placement = summarize_placement(json.dumps(DLA_ENGINE_NAMES), dla_core=0)
    assert placement.dla_layers == ("{ForeignNode[conv1...relu40]}",)
    assert placement.gpu_layers == (
        "Reformatting CopyNode for Input Tensor 0 to {ForeignNode[conv1...relu40]}",
        "Softmax_41",
        "TopK_42",
    )
    assert placement.summary() == (
        "layer placement: DLA core 0: 1 layer; GPU fallback: 3 layers "
        "(Reformatting CopyNode for Input Tensor 0 to {ForeignNode[conv1...relu40]}, "
        "Softmax_41, TopK_42)"
    )


def test_detailed_json_uses_layer_types_and_myelin_graphs_stay_on_the_gpu() -> None:
    detailed = {
        "Layers": [
            {"Name": "{ForeignNode[conv1...conv9]}", "LayerType": "DLA"},
            {"Name": "{ForeignNode[attn0...attn3]}", "LayerType": "Myelin"},
            {"Name": "head", "LayerType": "CaskConvolution"},
        ]
    }
    placement = summarize_placement(json.dumps(detailed), dla_core=1)
    assert placement.dla_layers == ("{ForeignNode[conv1...conv9]}",)
    assert placement.gpu_layers == ("{ForeignNode[attn0...attn3]}", "head")


def test_engine_entirely_on_the_dla_has_no_fallback() -> None:
    only_dla = {"Layers": ["input to nvm", "{ForeignNode[a...b]}", "b from nvm"]}
    assert summarize_placement(json.dumps(only_dla), 1).summary() == (
        "layer placement: DLA core 1: 1 layer; GPU fallback: none"
    )


def test_gpu_engine_counts_every_layer_on_the_gpu() -> None:
    placement = summarize_placement(json.dumps({"Layers": ["conv1 + relu1", "fc"]}), None)
    assert placement.summary() == "layer placement: GPU: 2 layers"


def test_layers_of_other_profiles_are_counted_once() -> None:
    profiles = {"Layers": ["conv", "fc", "conv [profile 1]", "fc [profile 1]"]}
    assert summarize_placement(json.dumps(profiles), None).gpu_layers == ("conv", "fc")


def test_long_fallback_lists_are_shortened() -> None:
    many = {"Layers": ["{ForeignNode[a...b]}"] + [f"gpu{i}" for i in range(8)]}
    summary = summarize_placement(json.dumps(many), 0).summary()
    assert summary.endswith("GPU fallback: 8 layers (gpu0, gpu1, gpu2, gpu3, gpu4 and 3 more)")


def test_engine_built_without_layer_information_says_placement_is_unknown() -> None:
    empty = json.dumps({"Layers": [], "Bindings": ["x"]})
    assert summarize_placement(empty, 0).summary() == (
        "layer placement unknown: the engine lists no layers (built with ProfilingVerbosity NONE?)"
    )


def test_unreadable_inspector_output_is_unknown_not_an_error() -> None:
    summary = summarize_placement("{not json", None).summary()
    assert summary.startswith("layer placement unknown: the engine inspector's JSON is invalid")
