"""What a SIGHUP changes: the settings read again, compared field by field
with those the daemon runs on, split into what applies live and what waits
for a restart.

Pure: nothing here touches a running part. ``compare`` answers the settings
the daemon runs on after the reload (``SettingsChange.applied``): the new
values of the live fields and the old values of the others, so a later
reload names a restart-only change again until the daemon restarts.

Live fields are listed explicitly; a field added to ``Settings`` later needs
a restart until someone applies it live and lists it here.
"""

from __future__ import annotations

import dataclasses

from edgebox.settings import SECTIONS, Settings

LIVE_FIELDS = frozenset({"log_verbose", "streams", "exit_timeout_secs"})
"""Top-level fields the daemon applies while running."""
LIVE_SECTION_FIELDS: dict[str, frozenset[str]] = {
    "mqtt": frozenset(
        {
            "url",
            "client_id",
            "username",
            "password_file",
            "ca_file",
            "cert_file",
            "key_file",
            "protocol",
            "keepalive",
            "qos",
            "topic_prefix",
            "device_id",
            "max_inflight",
        }
    ),
    "telemetry": frozenset({"interval_s", "history_s", "mqtt_interval_s"}),
}
"""Section fields applied live. MQTT's spool (``spool_path``,
``spool_max_mb``, ``spool_write_delay_s``) and bus queue (``queue_events``)
are opened once; turning a section on or off (``mqtt`` absent or present)
needs a restart too."""


@dataclasses.dataclass(frozen=True)
class SettingsChange:
    live: tuple[str, ...]
    """Changed fields applied now, dotted for sections (``telemetry.interval_s``)."""
    restart: tuple[str, ...]
    """Changed fields that take effect after a restart."""
    applied: Settings
    """What the daemon runs on once the live fields are applied."""


def compare(current: Settings, new: Settings) -> SettingsChange:
    """Field by field, in ``Settings`` order."""
    live: list[str] = []
    restart: list[str] = []
    applied: dict[str, object] = {}
    for field in dataclasses.fields(Settings):
        name = field.name
        old_value, new_value = getattr(current, name), getattr(new, name)
        if old_value == new_value:
            continue
        if name in SECTIONS and old_value is not None and new_value is not None:
            live_names = LIVE_SECTION_FIELDS.get(name, frozenset())
            kept: dict[str, object] = {}
            for inner in dataclasses.fields(old_value):
                before, after = getattr(old_value, inner.name), getattr(new_value, inner.name)
                if before == after:
                    continue
                if inner.name in live_names:
                    live.append(f"{name}.{inner.name}")
                else:
                    restart.append(f"{name}.{inner.name}")
                    kept[inner.name] = before
            applied[name] = dataclasses.replace(new_value, **kept)
        elif name in LIVE_FIELDS:
            live.append(name)
            applied[name] = new_value
        else:
            restart.append(name)
    result = dataclasses.replace(current, **applied)
    object.__setattr__(result, "_sources", new.sources)
    return SettingsChange(tuple(live), tuple(restart), result)


def restart_warning(names: tuple[str, ...]) -> str:
    """The one log line naming every field that waits for a restart."""
    quoted = ", ".join(f"'{name}'" for name in names)
    if len(names) == 1:
        return f"setting {quoted} changed; it takes effect after a restart"
    return f"settings {quoted} changed; they take effect after a restart"
