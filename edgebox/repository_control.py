"""The control verbs beside the dataplane: Triton's model repository extension
(index, load, unload) and the dashboard's rollback and restore. HTTP, gRPC and
the dashboard call these; inference never does, which is why they live apart
from ``DataPlane`` (MLServer keeps ``ModelRepositoryHandlers`` apart from its
dataplane for the same reason).

Each verb is allowed in one model control mode only: load and unload in
``explicit`` (Unavailable otherwise, as Triton answers), rollback and restore
in ``poll`` (Unsupported otherwise), where the repository folder is the truth.
Answers are typed (``dataplane_results.RepositoryIndexEntry``); each transport
renders them.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_model_repository.md
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path

from edgebox.dataplane_results import RepositoryIndexEntry
from edgebox.errors import (
    Cancelled,
    ConfigError,
    EdgeboxError,
    InvalidArgument,
    NotFound,
    Unavailable,
    Unsupported,
)
from edgebox.lifecycle.manager import LifecycleManager
from edgebox.lifecycle.registry import ModelRegistry
from edgebox.lifecycle.states import ModelState
from edgebox.repository.config import config_from_json
from edgebox.repository.layout import scan_repository
from edgebox.repository.names import check_model_name
from edgebox.repository.override_files import OverrideFile, override_files
from edgebox.repository.override_folders import (
    OverrideFilesTooLarge,
    OverrideFolderError,
    OverrideFolders,
)
from edgebox.repository.rollback import (
    VersionFolders,
    model_folder,
    parse_version,
    restore,
    roll_back,
    version_folders,
)

ROLLOUT_ACTIONS = ("promote", "abort", "release")


class RepositoryControl:
    """Thread-safe: HTTP and gRPC workers and the dashboard call in at once;
    the manager serialises loads of one model, ``rollback_model`` and
    ``restore_model`` serialise among themselves."""

    def __init__(
        self,
        registry: ModelRegistry,
        manager: LifecycleManager,
        live: Callable[[], bool],
        control_mode: str = "none",
        override_folders: OverrideFolders | None = None,
    ) -> None:
        """``live`` is the dataplane's: once the server is stopping, a load's
        failure passes through as it is (the load was cut short, not refused).
        ``override_folders``: where a load request's files are written; None
        refuses loads with files."""
        self._registry = registry
        self._manager = manager
        self._live = live
        self._control_mode = control_mode
        self._overrides = override_folders or OverrideFolders(None, 0)
        self._folder_moves = threading.Lock()

    def repository_index(self, ready_only: bool = False) -> list[RepositoryIndexEntry]:
        """Every model folder and every model the registry knows, by name;
        each status (model-level first, then versions ascending) is an entry."""
        snapshot = scan_repository(self._manager.repository, fingerprints=False)
        names = sorted(set(snapshot.models) | set(self._registry.model_names()))
        index: list[RepositoryIndexEntry] = []
        for name in names:
            statuses = self._registry.statuses(name)
            if not statuses and not ready_only:
                index.append(RepositoryIndexEntry(name))
            for version, status in sorted(
                statuses.items(), key=lambda i: -1 if i[0] is None else i[0]
            ):
                if ready_only and status.state is not ModelState.READY:
                    continue
                index.append(
                    RepositoryIndexEntry(
                        name,
                        None if version is None else str(version),
                        status.state,
                        status.reason,
                    )
                )
        return index

    def load_model(self, name: str, parameters: dict | None = None) -> None:
        """The repository extension's load. ``name`` must be one folder name in
        the repository, and an override config is held to the same rules as a
        ``config.pbtxt`` (every path it names stays in the model folder), so a
        client can neither read files outside the repository nor run them.

        Failures are InvalidArgument worded as Triton's, edgebox's reason
        after them: ``failed to load 'NAME', failed to poll from model
        repository: ...`` when no config can be had (no such folder, a
        ``config.pbtxt`` or override that does not parse; Triton answers 500
        there, edgebox 400: the request is the mistake), and ``load failed for
        model 'NAME': ...`` when the model did not load.

        ``file:<path>`` parameters (bytes) are Triton's model file override:
        they need ``config``, are written to a private override folder
        (``repository/override_folders.py``), never into the repository, and
        the model loads from there; a later load without files goes back to
        the repository folder. Their paths are checked first
        (``repository/override_files.py``)."""
        self._require_explicit_mode()
        check_model_name(name)
        try:
            self._load_model(name, parameters or {})
        except (Cancelled, Unsupported, OverrideFolderError):
            raise
        except EdgeboxError as exc:
            if not self._live():
                raise
            raise _load_refusal(name, exc) from None
        finally:
            self._overrides.sweep(self._manager.override_folders_in_use)

    def _load_model(self, name: str, parameters: dict) -> None:
        try:
            files = override_files(parameters)
        except InvalidArgument as exc:
            raise _PollFailure(str(exc)) from None
        if files:
            self._load_files(name, parameters.get("config"), files)
            return
        config = None
        if "config" in parameters:
            config = _override_config(parameters["config"], name, self._manager.repository / name)
        self._manager.load_model(name, config, retry_failed=True)

    def _load_files(self, name: str, text: object, files: list[OverrideFile]) -> None:
        if text is None:
            raise _PollFailure("Load parameter 'config' must be specified for model file override")
        current = self._manager.override_folder(name)
        try:
            with self._overrides.write(name, files, {current} if current else set()) as model_dir:
                config = _override_config(text, name, model_dir)
                self._manager.load_model(name, config, retry_failed=True, model_dir=model_dir)
        except OverrideFilesTooLarge as exc:
            raise _PollFailure(str(exc)) from None

    def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        """As in Triton, unloading a model that is not loaded (or not in the
        repository at all) does nothing and succeeds."""
        self._require_explicit_mode()
        check_model_name(name)
        if name not in self._registry.model_names():
            return
        try:
            self._manager.unload_model(name, unload_dependents)
        finally:
            self._overrides.sweep(self._manager.override_folders_in_use)

    def served_dependents(self, name: str) -> list[str]:
        """The served ensembles that unloading ``name`` would take down with
        it, so that a person can be asked first; [] for a model not known."""
        return self._manager.served_dependents(name)

    # -- rollouts (any control mode; docs/rollout.md) -------------------------

    def rollout_status(self, name: str) -> dict:
        """The model's rollout resource (``Rollouts.status``): a rollout or
        watch window in progress with its figures, how the last one ended,
        the versions held. NotFound for a model neither loaded nor in the
        repository."""
        self._require_known(name)
        return self._manager.rollouts.status(name)

    def rollout_statuses(self) -> list[dict]:
        """The rollouts and watch windows in progress, by model name."""
        return self._manager.rollouts.statuses()

    def rollout_action(self, name: str, action: str) -> dict:
        """``promote`` or ``abort`` the rollout in progress (InvalidArgument
        when there is none), or ``release`` the model's held versions
        (NotFound when none is held); the rollout resource afterwards."""
        if action not in ROLLOUT_ACTIONS:
            raise InvalidArgument(
                f"rollout action {action!r}: expected one of {', '.join(ROLLOUT_ACTIONS)}"
            )
        self._require_known(name)
        return getattr(self._manager.rollouts, action)(name)

    def _require_known(self, name: str) -> None:
        check_model_name(name)
        if name in self._registry.model_names():
            return
        model_folder(self._manager.repository, name)

    # -- rollback (poll mode; docs/dashboard.md) ------------------------------

    def version_folders(self) -> dict[str, VersionFolders]:
        """Every model folder's version folders in place and rolled back, by
        name; read from disk on each call."""
        root = self._manager.repository
        snapshot = scan_repository(root, fingerprints=False)
        return {name: version_folders(folder.path) for name, folder in snapshot.models.items()}

    def rollback_model(self, name: str, version: object) -> list[int]:
        """Park every version folder of ``name`` newer than ``version`` in
        ``<model>/.rolled-back`` (repository/rollback.py), so the poller unloads
        them and the version policy serves ``version`` again; returns the
        versions moved. Poll mode only (Unsupported otherwise): there the
        folder is the truth. Calls are serialised; the answer comes once the
        folders moved, before the poller acts on it."""
        self._require_poll_mode()
        model_dir = model_folder(self._manager.repository, name)
        number = parse_version(version, f"model '{name}' rollback")
        with self._folder_moves:
            return roll_back(model_dir, number)

    def restore_model(self, name: str) -> list[int]:
        """Move every rolled-back version folder of ``name`` back; returns the
        versions moved. Poll mode only, like ``rollback_model``."""
        self._require_poll_mode()
        model_dir = model_folder(self._manager.repository, name)
        with self._folder_moves:
            return restore(model_dir)

    def _require_poll_mode(self) -> None:
        if self._control_mode != "poll":
            raise Unsupported(
                "model rollback and restore need --model-control-mode poll; this "
                f"server runs in '{self._control_mode}' mode"
            )

    def _require_explicit_mode(self) -> None:
        if self._control_mode != "explicit":
            # 503, as Triton answers: the server could, started otherwise.
            raise Unavailable(
                "explicit model load / unload is not allowed in model control mode "
                f"'{self._control_mode}'; start the server with --model-control-mode explicit"
            )


class _PollFailure(EdgeboxError):
    """A load request's config could not be had (Triton: the poll failed)."""


def _override_config(text: object, name: str, model_dir: Path):
    """A load request's ``config`` parameter, held to ``config.pbtxt``'s rules
    against the folder the model loads from."""
    try:
        if not isinstance(text, str):
            text = json.dumps(text)
        return config_from_json(text, name, model_dir)
    except TypeError:
        raise _PollFailure("load parameter 'config' must be JSON text") from None
    except EdgeboxError as exc:
        raise _PollFailure(str(exc)) from None


def poll_refusal(name: str, reason: str) -> InvalidArgument:
    """A load request refused before any config could be had, in Triton's
    words (its 500; edgebox's 400), ``reason`` after them."""
    return InvalidArgument(
        f"failed to load '{name}', failed to poll from model repository: {reason}"
    )


def _load_refusal(name: str, error: EdgeboxError) -> InvalidArgument:
    """Triton 2.51's texts for a failed load, edgebox's reason after them."""
    if isinstance(error, (_PollFailure, ConfigError, NotFound)):
        return poll_refusal(name, str(error))
    reason = str(error)
    own = f"model '{name}': "
    if reason.startswith(own):
        reason = reason[len(own) :]
    version = re.match(rf"model '{re.escape(name)}' version (\d+): ", reason)
    if version is not None:
        reason = f"version {version.group(1)} is at UNAVAILABLE state: {reason[version.end() :]}"
    return InvalidArgument(f"load failed for model '{name}': {reason}")
