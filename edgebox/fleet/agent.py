"""The device's fleet agent: takes the group's signed desired state from the
broker and moves this device towards it, on a thread of its own.

Like a Kubernetes controller or an AWS IoT shadow, it reconciles rather than
obeys: each pass compares what the document wants for each model with what
the repository and the lifecycle show, and takes the next step (download,
verify, publish the version folder, park newer versions for a rollback),
then reports where each model stands. The device keeps serving whatever
happens to the broker: the last applied document is kept on disk
(``state_store.py``) and reconciled towards after a restart.

Nothing a document names is run by the agent. It fetches an artifact, checks
its size and SHA-256, unpacks it safely and publishes the version folder with
the same atomic code as ``edgebox publish``; from there the daemon's own
poller, rollout gates and version policy decide, exactly as for a folder
copied in by hand, so a version the gates reject is never served.

A document that is refused (bad signature, unknown key, another group, a
generation not newer than the applied one, malformed) changes nothing and is
reported once, as an event and in the reported state. The same applied
document arriving again (a retained message after a reconnect) is no news.

``offer`` is called on the MQTT thread and only hands the payload over; a
newer payload replaces one not yet read (a desired state is only worth its
latest version). Downloads run on the agent's thread, so they never hold up
MQTT, inference or the dashboard.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from edgebox.errors import EdgeboxError
from edgebox.events.fleet import FleetDocumentRefused, FleetModelChanged, FleetReported
from edgebox.fleet import artifacts
from edgebox.fleet.device_view import DeviceView
from edgebox.fleet.document import REPORTED_SCHEMA, Desired, WantedModel, parse_document
from edgebox.fleet.figures import FleetFigures
from edgebox.fleet.signing import Refused, TrustedKeys
from edgebox.fleet.state_store import Applied, FleetStore
from edgebox.fleet.targeting import targets_device
from edgebox.repository.publish import publish_version
from edgebox.repository.rollback import ROLLED_BACK, roll_back, version_folders

log = logging.getLogger("edgebox.fleet")

PASS_INTERVAL_S = 1.0
"""How often the agent looks at progress (a rollout deciding, a poll
picking up a published folder) when no document arrives."""
RETRY_S = (5.0, 15.0, 60.0, 300.0)
"""Waits before fetching an artifact again after a failure that may pass
(the store unreachable, a connection cut): more each time, capped."""


@dataclass
class _Progress:
    """One model's state as last reported, and what the agent keeps to
    decide its next step."""

    version: int
    state: str = ""
    """Empty until the first pass decides it."""
    reason: str = ""
    retry_at: float = 0.0
    failures: int = 0
    final: bool = False
    """A failure retrying cannot fix (the artifact does not match the
    document): the model stays ``failed`` until a new document."""


@dataclass
class AgentSetup:
    group: str
    device: str
    trusted: TrustedKeys
    repository: Path
    download_dir: Path
    max_artifact_bytes: int
    ca_file: Path | None = None
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time
    publish: Callable[[object], None] = field(default=lambda event: None)
    """The event bus's ``publish``."""


class FleetAgent:
    def __init__(
        self, setup: AgentSetup, view: DeviceView, store: FleetStore, figures: FleetFigures
    ) -> None:
        self._setup = setup
        self._view = view
        self._store = store
        self._figures = figures
        self._wake = threading.Condition()
        self._offered: bytes | None = None
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._applied = Applied()
        self._desired: Desired | None = None
        self._progress: dict[str, _Progress] = {}
        self._refused: dict | None = None
        self._refused_digest = b""
        self._reported: dict | None = None

    # -- the MQTT thread --------------------------------------------------------

    def offer(self, payload: bytes) -> None:
        with self._wake:
            self._offered = bytes(payload)
            self._wake.notify()

    # -- the daemon -------------------------------------------------------------

    def start(self) -> None:
        self._sweep()
        self._resume()
        self._thread = threading.Thread(target=self._run, name="fleet-agent", daemon=True)
        self._thread.start()

    def _sweep(self) -> None:
        """Unpacked folders left by a pass cut short (a crash, a power cut):
        never published, so only disk to give back. Partial downloads stay,
        to be resumed."""
        folder = self._setup.download_dir
        if not folder.is_dir():
            return
        for entry in folder.iterdir():
            if entry.is_dir() and (
                entry.name.startswith("unpacked-") or entry.name.endswith(".unpacking")
            ):
                shutil.rmtree(entry, ignore_errors=True)

    def stop(self, timeout_s: float = 10.0) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def report(self) -> dict:
        """The reported state as last published (the dashboard and tests read it)."""
        return dict(self._reported or self._report())

    # -- the agent's thread -----------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._wake:
                if self._offered is None and not self._stopping:
                    self._wake.wait(PASS_INTERVAL_S)
                if self._stopping:
                    return
                offered, self._offered = self._offered, None
            try:
                if offered is not None:
                    self._take(offered)
                self._reconcile()
            except Exception:
                log.exception("fleet: a reconcile pass failed; trying again")
            self._publish_report()

    def _resume(self) -> None:
        """Go on towards the document applied before the restart, if it is
        still signed by a trusted key (a key removed since no longer counts)."""
        applied = self._store.load()
        self._applied = Applied(applied.generation, b"")
        self._figures.set_generation(applied.generation)
        if not applied.envelope:
            return
        try:
            document, _ = self._setup.trusted.open(applied.envelope)
            desired = parse_document(document)
        except Refused as exc:
            log.warning("fleet: the stored desired state no longer opens (%s)", exc.reason)
            return
        self._applied = applied
        self._adopt(desired)

    def _take(self, payload: bytes) -> None:
        if payload == self._applied.envelope:
            return
        digest = hashlib.sha256(payload).digest()
        generation = 0
        try:
            document, key_id = self._setup.trusted.open(payload)
            desired = parse_document(document)
            generation = desired.generation
            self._check(desired, key_id)
        except Refused as exc:
            self._refuse(exc, digest, generation or _claimed_generation(payload))
            return
        self._applied = Applied(desired.generation, payload)
        try:
            self._store.save(self._applied)
        except OSError as exc:
            log.error(
                "fleet: cannot keep generation %d in %s (%s): applied until the next restart",
                desired.generation,
                self._store.path,
                exc,
            )
        self._figures.set_generation(desired.generation)
        log.info(
            "fleet: applying generation %d of group '%s' (%s)",
            desired.generation,
            desired.group,
            ", ".join(f"{m.name} {m.version}" for m in desired.models.values()) or "no models",
        )
        self._adopt(desired)

    def _check(self, desired: Desired, key_id: str) -> None:
        if desired.group != self._setup.group:
            raise Refused(
                f"document for group '{desired.group}', this device is in '{self._setup.group}'",
                "group",
                key_id,
            )
        if desired.generation <= self._applied.generation:
            raise Refused(
                f"generation {desired.generation} is not newer than the applied "
                f"{self._applied.generation}",
                "generation",
                key_id,
            )

    def _refuse(self, exc: Refused, digest: bytes, generation: int) -> None:
        """Reported once per distinct payload: a retained refused document
        arriving again on every reconnect is not news. ``generation`` is the
        one a signed document claimed (0 when it could not be read)."""
        if digest == self._refused_digest:
            return
        self._refused_digest = digest
        self._refused = {
            "generation": generation,
            "key_id": exc.key_id,
            "reason": exc.reason,
            "at": self._setup.wall_clock(),
        }
        self._figures.count_refusal(exc.kind)
        log.warning("fleet: refused a desired state: %s", exc.reason)
        self._setup.publish(
            FleetDocumentRefused(self._setup.group, generation, exc.key_id, exc.reason)
        )

    def _adopt(self, desired: Desired) -> None:
        """Start over for each model whose wanted version changed; keep the
        progress of the others (a new generation for another model must not
        download this one again)."""
        previous = self._desired.models if self._desired is not None else {}
        for name in set(previous) - set(desired.models):
            self._view.set_policy(name, None)
        self._desired = desired
        kept = {}
        for name, wanted in desired.models.items():
            progress = self._progress.get(name)
            if progress is not None and previous.get(name) == wanted:
                kept[name] = progress
            else:
                kept[name] = _Progress(wanted.version)
        self._progress = kept

    # -- reconciling ------------------------------------------------------------

    def _reconcile(self) -> None:
        if self._desired is None:
            return
        for name, wanted in self._desired.models.items():
            if self._stopping:
                return
            progress = self._progress[name]
            state, reason = self._step(wanted, progress)
            self._set(name, progress, state, reason)

    def _set(self, name: str, progress: _Progress, state: str, reason: str) -> None:
        self._figures.set_model_state(name, state)
        if (state, reason) == (progress.state, progress.reason):
            return
        changed = state != progress.state
        progress.state, progress.reason = state, reason
        if changed:
            log.info("fleet: model '%s' version %d: %s %s", name, progress.version, state, reason)
            self._setup.publish(FleetModelChanged(name, state, progress.version, reason))

    def _step(self, wanted: WantedModel, progress: _Progress) -> tuple[str, str]:
        setup = self._setup
        if not targets_device(wanted.targets, setup.group, wanted.name, setup.device):
            return "not_targeted", ""
        if progress.final:
            return progress.state, progress.reason
        model_dir = setup.repository / wanted.name
        if not (model_dir / "config.pbtxt").is_file():
            return "failed", (
                f"model '{wanted.name}' has no config.pbtxt on this device: install the model "
                "first (scripts/provision.sh or edgebox publish --config)"
            )
        folder = model_dir / str(wanted.version)
        seen = self._view.version(wanted.name, wanted.version)
        if seen.state == "held":
            return "rejected", seen.reason
        if seen.state == "failed":
            return "failed", seen.reason
        if folder.is_dir():
            problem = self._park_newer(model_dir, wanted.version)
            if problem is not None:
                return "failed", problem
            if seen.state == "serving" and not self._view.rolling_out(wanted.name):
                return "serving", ""
            return "rolling_out", ""
        parked = model_dir / ROLLED_BACK / str(wanted.version)
        if parked.is_dir():
            os.rename(parked, folder)
            return "rolling_out", "restored from the rolled-back versions"
        if setup.clock() < progress.retry_at:
            return progress.state, progress.reason
        return self._fetch(wanted, progress, folder)

    def _park_newer(self, model_dir: Path, version: int) -> str | None:
        """Park the version folders newer than ``version`` (a rollback), as
        the dashboard's rollback does; why it could not, or None."""
        in_place = version_folders(model_dir).versions
        if not any(v > version for v in in_place):
            return None
        try:
            moved = roll_back(model_dir, version)
        except EdgeboxError as exc:
            return str(exc)
        log.info("fleet: model '%s': parked versions %s", model_dir.name, moved)
        return None

    def _fetch(self, wanted: WantedModel, progress: _Progress, folder: Path) -> tuple[str, str]:
        """Download, verify, unpack and publish the version; each stage is
        reported as it starts, so an operator watching sees a long download."""
        setup = self._setup
        name = wanted.name
        self._set(name, progress, "downloading", "")
        self._publish_report()
        try:
            self._view.set_policy(name, wanted.rollout)
        except (ValueError, EdgeboxError) as exc:
            progress.final = True
            return "failed", f"rollout: {exc}"
        try:
            downloaded = artifacts.download(
                wanted.artifact, setup.download_dir, setup.max_artifact_bytes, setup.ca_file
            )
        except artifacts.ArtifactRejected as exc:
            progress.final = True
            self._refuse_artifact(wanted, str(exc))
            return "failed", str(exc)
        except EdgeboxError as exc:
            return self._retry_later(progress, str(exc))
        self._figures.add_download_bytes(downloaded.fetched_bytes)
        self._set(name, progress, "verifying", "")
        self._publish_report()
        unpacked = setup.download_dir / f"unpacked-{wanted.artifact.sha256[:16]}"
        try:
            shutil.rmtree(unpacked, ignore_errors=True)
            artifacts.unpack(downloaded.path, unpacked)
            publish_version(unpacked, setup.repository, name, wanted.version)
        except EdgeboxError as exc:
            progress.final = True
            self._refuse_artifact(wanted, str(exc))
            return "failed", str(exc)
        finally:
            shutil.rmtree(unpacked, ignore_errors=True)
        progress.failures = 0
        downloaded.path.unlink(missing_ok=True)
        log.info("fleet: model '%s' version %d published into %s", name, wanted.version, folder)
        return "rolling_out", ""

    def _retry_later(self, progress: _Progress, reason: str) -> tuple[str, str]:
        wait = RETRY_S[min(progress.failures, len(RETRY_S) - 1)]
        progress.failures += 1
        progress.retry_at = self._setup.clock() + wait
        return "downloading", f"{reason}; trying again in {wait:g} s"

    def _refuse_artifact(self, wanted: WantedModel, reason: str) -> None:
        """An artifact that does not match its document is the document's
        fault: reported as a refusal, once, like a bad signature."""
        generation = self._desired.generation if self._desired is not None else 0
        text = f"model '{wanted.name}' version {wanted.version}: {reason}"
        self._figures.count_refusal("artifact")
        self._refused = {
            "generation": generation,
            "key_id": "",
            "reason": text,
            "at": self._setup.wall_clock(),
        }
        self._setup.publish(FleetDocumentRefused(self._setup.group, generation, "", text))

    # -- reporting --------------------------------------------------------------

    def _report(self) -> dict:
        models = {}
        for name, progress in sorted(self._progress.items()):
            models[name] = {
                "state": progress.state,
                "version": progress.version,
                "served": self._view.ready_versions(name),
                "reason": progress.reason,
            }
        return {
            "schema": REPORTED_SCHEMA,
            "device": self._setup.device,
            "group": self._setup.group,
            "generation": self._applied.generation,
            "at": self._setup.wall_clock(),
            "models": models,
            "refused": self._refused,
        }

    def _publish_report(self) -> None:
        report = self._report()
        previous = self._reported
        if previous is not None and _same(previous, report):
            return
        self._reported = report
        self._setup.publish(FleetReported(report))


def _claimed_generation(payload: bytes) -> int:
    """The generation an envelope that did not verify claims, read only to
    say which deploy was refused (an operator's tool halts on it); 0 when
    it cannot be read. Nothing else of it is used."""
    try:
        envelope = json.loads(payload)
        document = json.loads(base64.b64decode(envelope["document"], validate=True))
        generation = document["generation"]
    except (ValueError, TypeError, KeyError, binascii.Error):
        return 0
    return generation if isinstance(generation, int) and not isinstance(generation, bool) else 0


def _same(one: dict, other: dict) -> bool:
    return {k: v for k, v in one.items() if k != "at"} == {
        k: v for k, v in other.items() if k != "at"
    }
