"""The model files a load request carries (Triton's ``file:<path>``
parameters, which form an override model folder) and the rules their paths
must pass before a byte is written.

A path names a file inside the model folder: relative, ``/``-separated, each
component a real name (not empty, ``.`` or ``..``, at most ``NAME_MAX``
bytes, no NUL or control character), the whole at most ``PATH_MAX`` bytes.
Triton 2.51 normalises ``..`` away when it stays inside the folder, writes an
absolute path below the folder, accepts empty components, and crashes on a
component longer than ``NAME_MAX``; edgebox refuses all of these, since a
name that only works after normalising is a mistake or a probe. A top-level
all-digit name is a version folder and must be written as Triton names one
(no leading zero) with the file inside it; ``config.pbtxt`` is refused, as
the config comes from the ``config`` parameter.

Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_model_repository.md
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from edgebox.errors import InvalidArgument
from edgebox.repository.config import CONFIG_FILENAME
from edgebox.repository.names import NAME_MAX, version_number

FILE_PREFIX = "file:"
PATH_MAX = 4095
"""Linux's PATH_MAX less its terminating NUL."""
MAX_DEPTH = 32
MAX_FILES = 1024
MAX_VERSION = 2**63 - 1


@dataclass(frozen=True)
class OverrideFile:
    path: str
    """Relative to the model folder, checked (``file_path_problem``)."""
    data: bytes


def is_file_parameter(key: str) -> bool:
    return key.startswith(FILE_PREFIX)


def override_files(parameters: Mapping[str, object]) -> list[OverrideFile]:
    """The request's ``file:`` parameters, checked, in path order; [] when it
    has none. InvalidArgument names the first parameter refused. The
    transports hand each value over as bytes (HTTP decodes its base64)."""
    keys = sorted(key for key in parameters if is_file_parameter(key))
    if len(keys) > MAX_FILES:
        raise InvalidArgument(f"{len(keys)} file parameters; at most {MAX_FILES} are accepted")
    files: list[OverrideFile] = []
    for key in keys:
        path = key[len(FILE_PREFIX) :]
        problem = file_path_problem(path)
        if problem is not None:
            raise InvalidArgument(f"Invalid file path '{_shown(key)}': {problem}")
        data = parameters[key]
        if not isinstance(data, bytes):
            raise InvalidArgument(
                f"invalid value type for load parameter '{_shown(key)}', expected bytes"
            )
        files.append(OverrideFile(path, data))
    _check_clashes(files)
    return files


def file_path_problem(path: str) -> str | None:
    """Why ``path`` may not name a file of an override model folder, or None."""
    if not path:
        return "the path is empty"
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        return "the path is not valid UTF-8"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        return "control characters (NUL included) are not allowed"
    if path.startswith("/"):
        return "absolute paths are not allowed; give a path inside the model folder"
    if size > PATH_MAX:
        return f"longer than {PATH_MAX} bytes (PATH_MAX)"
    parts = path.split("/")
    if len(parts) > MAX_DEPTH:
        return f"{len(parts)} levels deep; at most {MAX_DEPTH} are accepted"
    for part in parts:
        if not part:
            return "empty path component ('//' or a trailing '/')"
        if part in (".", ".."):
            return f"'{part}' is not allowed as a path component"
        if len(part.encode("utf-8")) > NAME_MAX:
            return f"component '{part[:32]}...' is longer than {NAME_MAX} bytes (NAME_MAX)"
    top = parts[0]
    if top == CONFIG_FILENAME and len(parts) == 1:
        return f"the model's config comes from the 'config' parameter, not a '{CONFIG_FILENAME}'"
    if top.isascii() and top.isdigit():
        number = version_number(top)
        if number is None or number > MAX_VERSION:
            return (
                f"version folder '{top}': expected a positive integer without a leading zero "
                "(at most 2^63-1)"
            )
        if len(parts) == 1:
            return f"'{top}' is a version folder; put the model's files inside it ('{top}/...')"
    return None


def _check_clashes(files: list[OverrideFile]) -> None:
    """A path may not be both a file and a folder of another file."""
    paths = {f.path for f in files}
    for file in files:
        parts = file.path.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder in paths:
                raise InvalidArgument(
                    f"Invalid file path '{FILE_PREFIX}{_shown(file.path)}': "
                    f"'{_shown(folder)}' is sent as a file too"
                )


def _shown(text: str) -> str:
    """At most 80 characters of a client's path, for a message."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= 80 else text[:80] + "..."
