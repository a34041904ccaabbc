"""``edgebox passwd``: the dashboard's ``admin`` password, hashed with
werkzeug's ``generate_password_hash`` (scrypt), written into the settings
file as ``dashboard: password_hash:``.

The file is edited as text, one section at a time, so its comments, order
and other settings stay as the operator wrote them; it is replaced atomically
with its owner and mode kept, less any permission for other users and the
group's write: a hash can be attacked offline, so only the owner may change
it and only the owner and the group (root and edgebox, as the package's
postinst sets it: the daemon runs as edgebox and must read it) may read it.
A file whose group is not the daemon's gets mode 0600. The daemon reads the
hash at start and warns when the file is more open than that (``exposure``).
"""

from __future__ import annotations

import getpass
import grp
import os
import re
import stat
import sys
import tempfile
from pathlib import Path

import yaml
from werkzeug.security import generate_password_hash

MIN_LENGTH = 8
DAEMON_GROUP = "edgebox"
NOT_FOR_OTHERS = stat.S_IRWXO | stat.S_IWGRP | stat.S_IXGRP
_SECTION = re.compile(r"^dashboard\s*:(?P<rest>.*)$")
_TOP_LEVEL = re.compile(r"^[^\s#]")
_HASH_LINE = re.compile(r"^(?P<indent>[ \t]+)password_hash\s*:")
_KEY_LINE = re.compile(r"^(?P<indent>[ \t]+)[A-Za-z_]")


def passwd(config: Path, from_stdin: bool) -> int:
    """The command: read the password (twice from a terminal, once from
    stdin), write its hash; 0 on success, 1 with a message on stderr."""
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass("New dashboard password for 'admin': ")
        if getpass.getpass("Again: ") != password:
            return _fail("the passwords differ; nothing written")
    if len(password) < MIN_LENGTH:
        return _fail(f"the password must have at least {MIN_LENGTH} characters")
    try:
        set_password_hash(config, generate_password_hash(password))
    except OSError as exc:
        return _fail(f"cannot read '{config}': {exc.strerror or exc}")
    except ValueError as exc:
        return _fail(str(exc))
    print(
        f"password hash written to {config}; restart edgebox to apply: "
        "sudo systemctl restart edgebox"
    )
    return 0


def set_password_hash(path: Path, password_hash: str) -> None:
    """Puts ``password_hash`` into ``path``'s ``dashboard:`` section (added
    at the end when absent). Raises OSError when the file cannot be read or
    replaced, ValueError when its dashboard section is not a mapping."""
    text = path.read_text(encoding="utf-8")
    updated = _with_hash(text, password_hash)
    document = yaml.safe_load(updated)
    if (
        not isinstance(document, dict)
        or document.get("dashboard", {}).get("password_hash") != password_hash
    ):
        raise ValueError(f"{path}: could not place the hash; set dashboard.password_hash by hand")
    _replace(path, updated)


def _with_hash(text: str, password_hash: str) -> str:
    entry = f'password_hash: "{password_hash}"\n'
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    start = next((i for i, line in enumerate(lines) if _SECTION.match(line)), None)
    if start is None:
        if yaml.safe_load(text) in (None, {}):
            return f"dashboard:\n  {entry}"
        return "".join(lines) + f"\ndashboard:\n  {entry}"
    rest = _SECTION.match(lines[start].rstrip("\n"))["rest"]
    value = yaml.safe_load(rest) if rest.strip() and not rest.strip().startswith("#") else None
    if value is not None:
        if not isinstance(value, dict):
            raise ValueError(f"the 'dashboard' setting must be a mapping, got {value!r}")
        fields = {k: v for k, v in value.items() if k != "password_hash"}
        dumped = yaml.safe_dump(fields, sort_keys=False, default_flow_style=False)
        block = ["dashboard:\n", f"  {entry}"]
        if fields:
            block += [f"  {line}" for line in dumped.splitlines(keepends=True)]
        return "".join(lines[:start] + block + lines[start + 1 :])
    end = start + 1
    while end < len(lines) and not _TOP_LEVEL.match(lines[end]):
        end += 1
    for index in range(start + 1, end):
        if match := _HASH_LINE.match(lines[index]):
            lines[index] = f"{match['indent']}{entry}"
            return "".join(lines)
    keys = (_KEY_LINE.match(lines[index]) for index in range(start + 1, end))
    indent = next((match["indent"] for match in keys if match), "  ")
    lines.insert(start + 1, f"{indent}{entry}")
    return "".join(lines)


def _replace(path: Path, text: str) -> None:
    status = path.stat()
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
        mode = status.st_mode & 0o7777 & ~NOT_FOR_OTHERS
        if not _daemon_group(status.st_gid):
            mode &= ~stat.S_IRWXG
        os.chmod(temporary, mode)
        try:
            os.chown(temporary, status.st_uid, status.st_gid)
        except PermissionError:
            pass
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def exposure(path: Path) -> str | None:
    """What is wrong with who may read ``path``: None when only its owner
    and the daemon's group may, else the problem in words."""
    try:
        status = path.stat()
    except OSError as exc:
        return f"its mode cannot be read ({exc.strerror or exc})"
    mode = stat.S_IMODE(status.st_mode)
    if mode & stat.S_IROTH:
        return f"every local user may read it (mode {mode:04o}; fix: sudo chmod o-rwx {path})"
    if mode & stat.S_IRGRP and not _daemon_group(status.st_gid):
        return (
            f"group {status.st_gid} may read it and edgebox runs in group {os.getegid()} "
            f"(mode {mode:04o}; fix: sudo chmod g-rwx {path})"
        )
    return None


def _daemon_group(gid: int) -> bool:
    """Whether ``gid`` is the daemon's group: ``edgebox`` when it exists
    (``edgebox passwd`` runs as root), else this process's."""
    try:
        return grp.getgrnam(DAEMON_GROUP).gr_gid == gid
    except KeyError:
        return gid == os.getegid()


def _fail(message: str) -> int:
    print(f"edgebox passwd: {message}", file=sys.stderr)
    return 1
