"""How a bad setting is reported: one ``SettingsProblem`` per mistake, all of
them in one ``SettingsError``, so ``edgebox serve`` and ``edgebox check
--config`` print the same list from the same code."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence

from edgebox.errors import EdgeboxError
from edgebox.secrets_mask import mask_secrets

Place = tuple[str, int] | None
"""Where a value is in the YAML file, ``(file, line)``; None for the
environment, flags and defaults."""


@dataclasses.dataclass(frozen=True)
class SettingsProblem:
    """One bad setting. ``message`` names the setting and its source
    (``setting 'mqtt.qos' from --mqtt-qos: ...``); ``located()`` puts the file
    and line first when the value is in the YAML file
    (``FILE:LINE: setting 'mqtt.qos': ...``)."""

    message: str
    file: str | None = None
    line: int | None = None
    setting: str | None = None
    """The setting at fault (``mqtt.qos``, ``streams[0]``); None for a key
    that is no setting."""
    detail: str = ""
    """What is wrong, without the setting's name and source."""

    def located(self) -> str:
        if self.file is None or self.line is None:
            return self.message
        what = f"setting '{self.setting}': {self.detail}" if self.setting else self.detail
        return f"{self.file}:{self.line}: {what}"


class SettingsError(EdgeboxError):
    """Every problem found (``problems``, one or more: those with a line in
    line order, then the others as found); ``str()`` holds their messages, one
    a line."""

    def __init__(self, problems: str | Sequence[SettingsProblem]) -> None:
        if isinstance(problems, str):
            problems = (SettingsProblem(problems),)
        self.problems: tuple[SettingsProblem, ...] = tuple(problems)
        super().__init__("\n".join(problem.message for problem in self.problems))


def problem(
    setting: str, source: str, detail: str, place: Place = None, *, paren: bool = False
) -> SettingsProblem:
    """The problem with ``setting`` given by ``source``. ``detail`` may quote
    the value, which may be a camera URL with its password: masked before it
    reaches the journal."""
    detail = mask_secrets(detail)
    origin = f"({source})" if paren else f"from {source}"
    file, line = place or (None, None)
    return SettingsProblem(f"setting '{setting}' {origin}: {detail}", file, line, setting, detail)


def did_you_mean(key: str, candidates: list[str]) -> str:
    """``; did you mean 'x'?`` for the closest candidate, or empty: an unknown
    key is most often a typo or a dash for an underscore."""
    guess = difflib.get_close_matches(key.replace("-", "_"), candidates, n=1)
    return f"; did you mean '{guess[0]}'?" if guess else ""


def nowhere(*_keys: str) -> Place:
    """The locator of a value that is not in the file (environment, flags)."""
    return None
