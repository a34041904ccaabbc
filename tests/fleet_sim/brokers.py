"""The fleet's brokers: a main mosquitto, as a cloud or plant broker would be,
and a "site" mosquitto bridged to it, as a cabinet's or vehicle's local
broker would be, so some devices reach the fleet only through a bridge.

The main broker persists its retained messages (and the bridge's session),
so a restart on the same port keeps the desired state and the devices'
statuses, as a production broker with ``persistence true`` does; the bridge
retries every second, so it is back within about a second of the main
broker accepting again.

The bridge carries each topic one way only: desired states in, what the
devices say out. Measured on mosquitto 2.0.11, a ``topic edgebox/# both``
bridge echoes retained messages back at every reconnect (the main broker
re-sends its retained copies, which the site then forwards up again, and a
stale status from the main broker overwrites the site's newer one), and
``cleansession false`` with a persisted session on the main broker delivers
each queued message three times; one-way topics with ``cleansession true``
deliver each message once, including those published on the site while the
main broker was down.
"""

from __future__ import annotations

from pathlib import Path

from mosquitto_broker import MosquittoBroker

INCOMING_TOPICS = ("fleet/#",)
"""Under the prefix, what the main broker sends down to the site: the groups'
desired states."""
OUTGOING_TOPICS = ("+/status", "+/fleet", "+/events", "+/telemetry", "+/models/#", "+/streams/#")
"""Under the prefix, what the site's devices send up: statuses, reported
states, events, telemetry and results."""

BRIDGE_CLIENT_ID = "fleet-sim-site-bridge"


class _ConfiguredMosquitto(MosquittoBroker):
    """A ``MosquittoBroker`` whose config ends with ``extra_lines()``, asked on
    every (re)start so they may name the other broker's current port."""

    def __init__(self, workdir: Path, extra_lines) -> None:
        super().__init__(workdir)
        self._extra_lines = extra_lines

    def config_text(self) -> str:
        return super().config_text() + "".join(f"{line}\n" for line in self._extra_lines())


class Brokers:
    """``main`` and ``site`` (bridged to ``main``), started by ``start()``, in
    that order, and stopped by ``stop()``, site first. ``restart_main()``
    stops the main broker and starts it again on its port; the site broker
    and its devices stay up and the bridge reconnects on its own."""

    def __init__(self, workdir: Path, prefix: str = "edgebox") -> None:
        workdir = Path(workdir)
        self.prefix = prefix
        self.main = _ConfiguredMosquitto(workdir / "main", self._main_lines)
        self.site = _ConfiguredMosquitto(workdir / "site", self._bridge_lines)

    def _main_lines(self) -> list[str]:
        store = self.main.workdir / "store"
        store.mkdir(exist_ok=True)
        return [
            "persistence true",
            f"persistence_location {store}/",
            "autosave_interval 1",
        ]

    def _bridge_lines(self) -> list[str]:
        return [
            "connection main",
            f"address 127.0.0.1:{self.main.port}",
            *(f"topic {self.prefix}/{topic} in 1" for topic in INCOMING_TOPICS),
            *(f"topic {self.prefix}/{topic} out 1" for topic in OUTGOING_TOPICS),
            f"remote_clientid {BRIDGE_CLIENT_ID}",
            "cleansession true",
            "try_private true",
            # mosquitto 2.0.11 waits about 6 s with "restart_timeout 1"; the
            # base/cap form retries every second.
            "restart_timeout 1 1",
            "keepalive_interval 5",
            "notifications false",
            "start_type automatic",
        ]

    def start(self) -> Brokers:
        self.main.start()
        try:
            self.site.start()
        except BaseException:
            self.main.stop()
            raise
        return self

    def stop(self) -> None:
        self.site.stop()
        self.main.stop()

    def restart_main(self) -> None:
        self.main.restart()

    def __enter__(self) -> Brokers:
        return self.start()

    def __exit__(self, exc_type, exc, traceback) -> None:
        self.stop()
