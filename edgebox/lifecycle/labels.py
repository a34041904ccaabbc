"""Class labels of a version's outputs, read from each output's
``label_filename`` while the version loads; the classification extension
hands them to any client, so only files inside the model folder are read.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_classification.md
"""

from __future__ import annotations

from edgebox.backends.base import ModelContext
from edgebox.errors import Unavailable
from edgebox.repository.contained_path import read_regular_file, resolve_inside

MAX_LABEL_FILE_BYTES = 16 * 1024 * 1024
"""Largest ``label_filename`` read (ImageNet-21k's labels take under 1 MB)."""


def read_labels(context: ModelContext) -> dict[str, list[str]]:
    """Output name -> its ``label_filename``'s lines. The file must be a
    regular file inside the model folder (after symlinks) of at most
    ``MAX_LABEL_FILE_BYTES``; otherwise the load fails: InvalidArgument for a
    path leading out, Unavailable naming the output and the file for the rest."""
    labels: dict[str, list[str]] = {}
    for output in context.config.output:
        if output.label_filename:
            where = f"{context.where}, output '{output.name}'"
            path = resolve_inside(context.model_dir, output.label_filename, "label_filename", where)
            try:
                raw = read_regular_file(path, MAX_LABEL_FILE_BYTES)
                labels[output.name] = raw.decode("utf-8").splitlines()
            except OSError as exc:
                raise Unavailable(
                    f"{where}: cannot read label_filename '{path}': {exc.strerror}"
                ) from None
            except UnicodeDecodeError:
                raise Unavailable(f"{where}: label_filename '{path}' is not UTF-8 text") from None
            except ValueError as exc:
                raise Unavailable(f"{where}: label_filename '{path}' {exc}") from None
    return labels
