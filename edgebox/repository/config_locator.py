"""Where each field of a ``config.pbtxt`` sits, so errors found after parsing
still name a line and column.

protobuf's ``ParseError`` locates syntax errors; semantic ones (a name that does
not match its folder, an ensemble step reading a tensor nobody writes) are found
on the parsed message, which has no positions. This walks protobuf's own
tokenizer alongside the message descriptor and records the position of every
field name under a path such as ``input[1].dims`` or ``ensemble_scheduling.step[0]``.
"""

from __future__ import annotations

from google.protobuf import text_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

Position = tuple[int, int]

Problem = tuple[str, str]
"""(field path, message): what a config rule finds, located through ``FieldPositions.find``."""


class FieldPositions:
    def __init__(self, positions: dict[str, Position]) -> None:
        self._positions = positions

    def find(self, path: str) -> Position | None:
        """Position of ``path``, else of its nearest recorded parent."""
        while path:
            if path in self._positions:
                return self._positions[path]
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""
        return None


def locate_fields(text: str, descriptor: Descriptor) -> FieldPositions:
    """Index field positions; on text it cannot follow, returns what it found so far."""
    positions: dict[str, Position] = {}
    try:
        tokenizer = text_format.Tokenizer(text.splitlines(keepends=True))
        _walk_message(tokenizer, descriptor, "", positions, closing=None)
    except Exception:  # a best-effort index must never mask the real error
        pass
    return FieldPositions(positions)


def _walk_message(tok, descriptor: Descriptor, prefix: str, positions, closing: str | None):
    counts: dict[str, int] = {}
    while not tok.AtEnd():
        token = tok.token
        if closing is not None and token == closing:
            tok.NextToken()
            return
        if token in (",", ";"):
            # text format allows either after any field: { name: "a", dims: [ 4 ] }
            tok.NextToken()
            continue
        name = token
        position = (tok._line + 1, tok._column + 1)
        tok.NextToken()
        field = descriptor.fields_by_name.get(name)
        if field is None:
            return
        if tok.token == ":":
            tok.NextToken()
        repeated = _is_repeated(field)
        is_message = field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP)

        def path_for_next(field_name: str = name) -> str:
            index = counts.get(field_name, 0)
            counts[field_name] = index + 1
            return f"{prefix}{field_name}[{index}]"

        plain_path = f"{prefix}{name}"
        positions.setdefault(plain_path, position)
        if is_message:
            if tok.token == "[":
                tok.NextToken()
                while tok.token != "]":
                    if tok.token == ",":
                        tok.NextToken()
                        continue
                    element = path_for_next()
                    positions[element] = (tok._line + 1, tok._column + 1)
                    _open_message(tok, field.message_type, element, positions)
                tok.NextToken()
            else:
                element = path_for_next() if repeated else plain_path
                positions.setdefault(element, position)
                _open_message(tok, field.message_type, element, positions)
        else:
            if tok.token == "[":
                while tok.token != "]":
                    tok.NextToken()
                tok.NextToken()
            else:
                tok.NextToken()
                while tok.token.startswith(("'", '"')):
                    tok.NextToken()


def _open_message(tok, descriptor: Descriptor, path: str, positions) -> None:
    opener = tok.token
    closing = {"{": "}", "<": ">"}.get(opener)
    if closing is None:
        raise ValueError(f"expected '{{' at {tok._line + 1}:{tok._column + 1}")
    tok.NextToken()
    _walk_message(tok, descriptor, f"{path}.", positions, closing)


def _is_repeated(field: FieldDescriptor) -> bool:
    # protobuf 5.29+ deprecates ``label``; JetPack's older protobuf lacks ``is_repeated``.
    if hasattr(field, "is_repeated"):
        return field.is_repeated
    return field.label == FieldDescriptor.LABEL_REPEATED
