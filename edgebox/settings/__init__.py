"""settings/ holds the daemon's settings: the top-level ``Settings`` and the
loader that layers defaults, the YAML file, ``EDGEBOX_*`` variables and flags
into one, read once at startup (``cli``) and passed down explicitly.

Invariant: this package sits at the top, beside ``cli`` and ``daemon``, and
is the only place that imports every section class (``mqtt/settings.py``,
``dashboard/settings.py``, ``telemetry/settings.py``, ``streams/settings.py``);
nothing below the top imports it. A section validates itself; the loader
only says where each problem is. Loading never falls back silently: a bad or
unknown setting is a ``SettingsError`` listing every problem with its source
and, from the file, its line.

    top_level.py    Settings: every top-level field and the checks between them
    loader.py       load_settings: the layers, SECTIONS, DEFAULT_CONFIG_FILE
    sections.py     how a section (mapping or list) is read and judged
    conversion.py   a raw value read as a field's type
    yaml_source.py  the YAML file with each key's line; YAML text in a variable
    problems.py     SettingsProblem, SettingsError, "did you mean"
"""

from edgebox.settings.loader import SECTIONS, load_settings
from edgebox.settings.problems import SettingsError, SettingsProblem
from edgebox.settings.top_level import Settings

__all__ = ["SECTIONS", "Settings", "SettingsError", "SettingsProblem", "load_settings"]
