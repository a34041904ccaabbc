"""``config.pbtxt`` -> Triton's ``ModelConfig`` message, normalized.

The file is parsed as protobuf text format against the ``ModelConfig`` schema that
``tritonclient`` ships, so any field Triton accepts is accepted here and a typo is
an error with ``path:line:col``. After parsing, the config is normalized the way
Triton normalizes it (platform and backend both filled, default version policy,
default instance group, default model file name), so every later reader sees one
shape. Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md
"""

from __future__ import annotations

import os
from pathlib import Path

from google.protobuf import json_format, text_format
from google.protobuf.descriptor import FieldDescriptor
from tritonclient.grpc import model_config_pb2

from edgebox.errors import ConfigError
from edgebox.repository.config_locator import FieldPositions, locate_fields
from edgebox.repository.config_rules import check_model_config
from edgebox.repository.names import version_number

ModelConfig = model_config_pb2.ModelConfig

CONFIG_FILENAME = "config.pbtxt"
DEFAULT_MAX_SEQUENCE_IDLE_US = 1_000_000
"""Triton's ``max_sequence_idle_microseconds`` when a config leaves it 0."""

PLATFORM_TO_BACKEND = {
    "tensorrt_plan": "tensorrt",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
    "tensorflow_graphdef": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
}
BACKEND_TO_PLATFORM = {
    "tensorrt": "tensorrt_plan",
    "onnxruntime": "onnxruntime_onnx",
    "pytorch": "pytorch_libtorch",
}
DEFAULT_MODEL_FILENAMES = {
    "tensorrt_plan": "model.plan",
    "onnxruntime_onnx": "model.onnx",
    "pytorch_libtorch": "model.pt",
    "tensorflow_graphdef": "model.graphdef",
    "tensorflow_savedmodel": "model.savedmodel",
    "python": "model.py",
}
_BACKEND_BY_MODEL_FILE = {
    "model.onnx": "onnxruntime",
    "model.plan": "tensorrt",
    "model.py": "python",
}


def read_model_config(model_dir: Path) -> ModelConfig:
    """Read, parse, check and normalize ``<model_dir>/config.pbtxt``, or, for a
    folder without one, the config Triton starts auto-complete from (see
    ``model_folder_config``).

    Raises ConfigError naming the file (and line and column where known) for a
    syntax error, an unknown field, or the first semantic problem, and naming
    the folder when it has neither a config nor a model file.
    """
    config, problems = model_folder_config(model_dir)
    if problems:
        raise problems[0]
    return config


def model_folder_config(model_dir: Path) -> tuple[ModelConfig, list[ConfigError]]:
    """``parse_model_config_file`` of the folder's ``config.pbtxt``; without
    one, as in Triton, a config holding only what the files tell: the name
    (the folder's) and the backend (the model file in the newest version
    folder that has one). The backend fills the rest when the version loads
    (inputs, outputs, batching: python's ``auto_complete_config``, ONNX's and
    TensorRT's model I/O). ConfigError when no model file names a backend."""
    path = model_dir / CONFIG_FILENAME
    if os.path.lexists(path):
        return parse_model_config_file(path, model_dir.name)
    if _backend_from_files(model_dir) is None:
        looked_for = ", ".join(f"'{name}'" for name in sorted(_BACKEND_BY_MODEL_FILE))
        raise ConfigError(
            str(model_dir),
            f"no {CONFIG_FILENAME}, and no version folder holds a model file to tell the "
            f"backend from (looked for {looked_for})",
        )
    config = ModelConfig()
    problems = normalize_model_config(
        config, model_dir.name, model_dir, str(model_dir), FieldPositions({})
    )
    return config, problems


def parse_model_config_file(path: Path, model_name: str) -> tuple[ModelConfig, list[ConfigError]]:
    """Parse and check one config file, returning every semantic problem found.

    A missing or unparsable file raises ConfigError; semantic problems are
    returned so ``edgebox check`` can list them all.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(path), "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), f"cannot read: {exc}") from None
    config = ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        raise ConfigError(
            str(path), _parse_error_text(exc), exc.GetLine(), exc.GetColumn()
        ) from None
    positions = locate_fields(text, ModelConfig.DESCRIPTOR)
    problems = normalize_model_config(config, model_name, path.parent, str(path), positions)
    return config, problems


def config_from_json(json_text: str, model_name: str, model_dir: Path) -> ModelConfig:
    """A config given as JSON (the repository extension's load override)."""
    config = ModelConfig()
    source = f"load request config for '{model_name}'"
    try:
        json_format.Parse(json_text, config)
    except json_format.ParseError as exc:
        raise ConfigError(source, str(exc)) from None
    problems = normalize_model_config(config, model_name, model_dir, source, FieldPositions({}))
    if problems:
        raise problems[0]
    return config


def normalize_model_config(
    config: ModelConfig, model_name: str, model_dir: Path, source: str, positions: FieldPositions
) -> list[ConfigError]:
    """Fill what Triton fills, then check; returns the problems found."""
    if config.name and config.name != model_name:
        problems = [
            _located(
                source,
                positions,
                "name",
                f"model name '{config.name}' does not match its folder '{model_name}'",
            )
        ]
        return problems
    config.name = model_name
    _resolve_platform(config, model_dir)
    if not config.HasField("version_policy"):
        config.version_policy.latest.num_versions = 1
    if not config.default_model_filename:
        default = DEFAULT_MODEL_FILENAMES.get(config.platform or config.backend)
        if default:
            config.default_model_filename = default
    if backend_of(config) != "ensemble":
        if not config.instance_group:
            group = config.instance_group.add()
            group.kind = model_config_pb2.ModelInstanceGroup.KIND_AUTO
        for index, group in enumerate(config.instance_group):
            if not group.name:
                group.name = f"{model_name}_{index}"
            if group.count == 0:
                group.count = 1
        # Triton 2.51 answers this block for every non-ensemble model, its
        # unset pinned-memory switches on (tests/triton_answers.py).
        optimization = config.optimization
        if not optimization.HasField("input_pinned_memory"):
            optimization.input_pinned_memory.enable = True
        if not optimization.HasField("output_pinned_memory"):
            optimization.output_pinned_memory.enable = True
    if config.HasField("sequence_batching"):
        _fill_sequence_batching(config)
    return [
        _located(source, positions, field_path, message)
        for field_path, message in check_model_config(config)
    ]


def _fill_sequence_batching(config: ModelConfig) -> None:
    """What Triton 2.51's config answer shows for a sequence model that left
    these unset (tests/repository/test_config_sequence_defaults.py): a 1 s
    idle time, and an ``oldest`` strategy preferring ``max_batch_size``."""
    batching = config.sequence_batching
    if batching.max_sequence_idle_microseconds == 0:
        batching.max_sequence_idle_microseconds = DEFAULT_MAX_SEQUENCE_IDLE_US
    preferred = batching.oldest.preferred_batch_size
    if batching.HasField("oldest") and config.max_batch_size > 0 and not preferred:
        preferred.append(config.max_batch_size)


def backend_of(config: ModelConfig) -> str:
    """The backend that runs this model: 'onnxruntime', 'tensorrt', 'python',
    'ensemble', or another name edgebox does not run."""
    if config.platform == "ensemble":
        return "ensemble"
    if config.backend:
        return config.backend
    return PLATFORM_TO_BACKEND.get(config.platform, config.platform)


def config_to_dict(config: ModelConfig) -> dict:
    """JSON form for the model-configuration extension, as Triton prints it:
    proto field names, every field present, int64 values as JSON numbers."""
    try:
        data = json_format.MessageToDict(
            config, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
    except TypeError:  # protobuf < 5.26 names the flag differently
        data = json_format.MessageToDict(
            config, preserving_proto_field_name=True, including_default_value_fields=True
        )
    return _int64_as_numbers(data, config.DESCRIPTOR)


def _int64_as_numbers(value, descriptor):
    """proto3 JSON writes int64 as strings; Triton's config JSON uses numbers."""
    if not isinstance(value, dict):
        return value
    for name, item in value.items():
        field = descriptor.fields_by_name.get(name)
        if field is None:
            continue
        if field.message_type is not None:
            if field.message_type.GetOptions().map_entry:
                value_field = field.message_type.fields_by_name["value"]
                if value_field.message_type is not None:
                    for key in item:
                        item[key] = _int64_as_numbers(item[key], value_field.message_type)
                elif value_field.cpp_type in _INT64_TYPES:
                    for key in item:
                        item[key] = int(item[key])
            elif isinstance(item, list):
                value[name] = [_int64_as_numbers(x, field.message_type) for x in item]
            else:
                value[name] = _int64_as_numbers(item, field.message_type)
        elif field.cpp_type in _INT64_TYPES:
            value[name] = [int(x) for x in item] if isinstance(item, list) else int(item)
    return value


_INT64_TYPES = (FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT64)


def _resolve_platform(config: ModelConfig, model_dir: Path) -> None:
    if config.platform == "python":
        # Triton documents `backend: "python"`; some configs in the wild say platform.
        config.platform = ""
        config.backend = "python"
    if config.platform and not config.backend:
        backend = PLATFORM_TO_BACKEND.get(config.platform)
        if backend:
            config.backend = backend
    elif config.backend and not config.platform:
        platform = BACKEND_TO_PLATFORM.get(config.backend)
        if platform:
            config.platform = platform
    elif not config.platform and not config.backend:
        backend = _backend_from_files(model_dir)
        if backend:
            config.backend = backend
            config.platform = BACKEND_TO_PLATFORM.get(backend, "")


def _backend_from_files(model_dir: Path) -> str | None:
    try:
        versions = sorted(
            (p for p in model_dir.iterdir() if p.is_dir() and version_number(p.name) is not None),
            key=lambda p: int(p.name),
            reverse=True,
        )
    except OSError:
        return None
    for version_dir in versions:
        for filename, backend in _BACKEND_BY_MODEL_FILE.items():
            if (version_dir / filename).exists():
                return backend
    return None


def _parse_error_text(exc: text_format.ParseError) -> str:
    text = str(exc)
    prefix = f"{exc.GetLine()}:{exc.GetColumn()} : "
    return text[len(prefix) :] if text.startswith(prefix) else text


def _located(source: str, positions: FieldPositions, field_path: str, message: str) -> ConfigError:
    position = positions.find(field_path)
    if position is None:
        return ConfigError(source, message)
    return ConfigError(source, message, position[0], position[1])
