"""Which fields of a dataclass carry a docstring: the string literal right
under the field, as every settings class writes them (MLServer's settings
put a description on each field for the same reason)."""

from __future__ import annotations

import ast
import inspect
import itertools


def documented_fields(cls: type) -> set[str]:
    """The names of ``cls``'s annotated fields followed by a string literal."""
    body = ast.parse(inspect.getsource(cls)).body[0].body
    return {
        node.target.id
        for node, after in itertools.pairwise(body)
        if isinstance(node, ast.AnnAssign)
        and isinstance(after, ast.Expr)
        and isinstance(after.value, ast.Constant)
        and isinstance(after.value.value, str)
    }
