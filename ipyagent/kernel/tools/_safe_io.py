"""Opening, reading, walking and writing inside a workspace without following a swapped link.

A path is first resolved and checked to be inside the workspace; then every folder on the way is
opened from the workspace's own descriptor with ``O_NOFOLLOW``, so a folder swapped for a
symbolic link after the check is refused instead of followed. Only regular files are read or
replaced: a file is opened with ``O_NONBLOCK`` (a named pipe would otherwise block the open
forever) and checked with ``fstat`` before a byte is read. Reads stream and stop at a byte cap.

Standard library only, with no package imports: the search worker process loads this module
by itself (see :mod:`._search`).
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import secrets
import stat
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

__all__ = [
    "MAX_DEPTH",
    "WorkspaceError",
    "file_kind",
    "is_binary",
    "is_secret",
    "iter_lines",
    "off_limits",
    "open_folder",
    "open_regular",
    "secret_inode",
    "walk",
    "write_regular",
]

MAX_DEPTH = 64  # folders below this depth are not walked (and said so)
MAX_LINE_BYTES = 20_000  # a longer line is cut: one minified file must not fill the reply
_CHUNK = 1 << 16

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)
#: Descriptor-relative opens exist (Linux, macOS, the BSDs): folders cannot be swapped under us.
DIR_FD = os.open in os.supports_dir_fd and bool(_NOFOLLOW and _DIRECTORY)

#: File names that hold secrets by convention (matched on the name, case-insensitively).
SECRET_NAMES = (
    ".env",
    ".env.*",
    "*.env",
    ".envrc",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.keystore",
    "*.jks",
    "credentials.json",
    "service-account*.json",
    "secrets.toml",
    "secrets.yaml",
    "secrets.yml",
)
#: Folders whose every file holds secrets by convention.
SECRET_FOLDERS = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker")
_NOT_SECRET = ("*.example", "*.sample", "*.template", "*.dist", ".env.example")
#: Secrets files of the user's home that a file in the workspace may be a hard link to (a notebook
#: folder under home is on the same file system). Folders: every file in them.
HOME_SECRETS = (
    ".netrc",
    ".pgpass",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".aws/credentials",
    ".aws/config",
    ".docker/config.json",
    ".kube/config",
    ".config/gh/hosts.yml",
)
HOME_SECRET_FOLDERS = (".ssh",)


class WorkspaceError(Exception):
    """A path the tools may not touch, or an edit that does not apply; written for the model
    (the agent turns it into an error result)."""


def is_secret(parts: Sequence[str]) -> bool:
    """Whether the file at ``parts`` (path components) holds secrets by convention: ``.env``,
    private keys, cloud and package-index credentials, anything under ``.ssh`` or ``.aws``."""
    if not parts:
        return False
    name = parts[-1].lower()
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in _NOT_SECRET):
        return False
    if any(part.lower() in SECRET_FOLDERS for part in parts[:-1]):
        return True
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in SECRET_NAMES)


_Listed = tuple[int, dict[tuple[int, int], str], list[str]]


class _SecretIndex:
    """The secrets files of a workspace by inode, to recognise a hard link to one under another
    name. Asked only about files with more than one link (rare), so nothing is walked for the
    usual read. Folders are remembered with their mtime: adding, removing or renaming an entry
    changes it, so a later question lists again only the folders that changed and stats the rest
    (a file's inode does not change when its content does)."""

    def __init__(self) -> None:
        # (root, folder parts) -> (folder's mtime_ns, secret inodes -> shown path, subfolders)
        self._folders: dict[tuple[str, tuple[str, ...]], _Listed] = {}
        self._lock = threading.Lock()

    def find(self, root: str, inode: tuple[int, int], skip: frozenset[str]) -> str | None:
        """The workspace-relative path (or ``~/...``) of the secrets file that is ``inode``."""
        with self._lock:
            stack: list[tuple[str, ...]] = [()]
            while stack:
                parts = stack.pop()
                inodes, subfolders = self._folder(root, parts, skip)
                if inode in inodes:
                    return inodes[inode]
                if len(parts) < MAX_DEPTH:
                    stack.extend((*parts, name) for name in subfolders)
        return _home_secret(inode)

    def _folder(
        self, root: str, parts: tuple[str, ...], skip: frozenset[str]
    ) -> tuple[dict[tuple[int, int], str], list[str]]:
        path = os.path.join(root, *parts)
        try:
            mtime = os.stat(path, follow_symlinks=False).st_mtime_ns
        except OSError:
            return {}, []
        known = self._folders.get((root, parts))
        if known is not None and known[0] == mtime:
            return known[1], known[2]
        inodes: dict[tuple[int, int], str] = {}
        subfolders: list[str] = []
        try:
            with os.scandir(path) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name not in skip:
                            subfolders.append(entry.name)
                    elif entry.is_file(follow_symlinks=False) and is_secret([*parts, entry.name]):
                        info = entry.stat(follow_symlinks=False)
                        inodes[(info.st_dev, info.st_ino)] = "/".join([*parts, entry.name])
        except OSError:
            return {}, []
        self._folders[(root, parts)] = (mtime, inodes, subfolders)
        return inodes, subfolders


_INDEX = _SecretIndex()


def _home_secret(inode: tuple[int, int]) -> str | None:
    home = os.path.expanduser("~")
    files = [os.path.join(home, name) for name in HOME_SECRETS]
    for folder in HOME_SECRET_FOLDERS:
        with contextlib.suppress(OSError), os.scandir(os.path.join(home, folder)) as it:
            files += [entry.path for entry in it]
    for path in files:
        try:
            info = os.stat(path, follow_symlinks=False)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) == inode and stat.S_ISREG(info.st_mode):
            return "~/" + os.path.relpath(path, home)
    return None


def secret_inode(root: str, info: os.stat_result, *, skip: frozenset[str]) -> str | None:
    """Which secrets file the file ``info`` describes is under another name, if any: a hard link
    to ``.env`` is ``.env``. Only a file with more than one link can be one; for those, the
    workspace ``root``'s secrets files (by name, outside the ``skip`` folders) and the usual ones
    of the home folder are compared by inode."""
    if info.st_nlink < 2:
        return None
    return _INDEX.find(root, (info.st_dev, info.st_ino), skip)


def _changed(where: str, exc: OSError) -> WorkspaceError:
    return WorkspaceError(
        f"{where} changed while it was being opened (a folder on the way is now a symbolic link or "
        f"not a folder: {exc.strerror}); nothing was read or written. Look at the folder again."
    )


@contextmanager
def open_folder(root: str, parts: Sequence[str], *, create: bool = False) -> Iterator[int]:
    """A descriptor on the folder ``root/parts...``, every step opened without following a link
    (``create``: make missing folders). ``root`` is the resolved workspace."""
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _NONBLOCK | _CLOEXEC)
    try:
        for index, name in enumerate(parts):
            if not DIR_FD:
                continue
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=fd)
            try:
                child = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=fd)
            except FileNotFoundError as exc:
                raise WorkspaceError(f"No folder {'/'.join(parts[: index + 1])!r} in the workspace.") from exc
            except OSError as exc:  # ELOOP or ENOTDIR: swapped for a link or a file after the check
                raise _changed("/".join(parts[: index + 1]), exc) from exc
            os.close(fd)
            fd = child
        if not DIR_FD and parts:  # no descriptor-relative calls here: plain paths, checked once
            path = os.path.join(root, *parts)
            if create:
                os.makedirs(path, exist_ok=True)
            os.close(fd)
            fd = os.open(path, os.O_RDONLY | _CLOEXEC)
        yield fd
    finally:
        os.close(fd)


def _at(folder: int, root: str, parts: Sequence[str]) -> tuple[str, dict[str, int]]:
    """``name`` and ``dir_fd=`` keywords for the last component of ``parts``."""
    if DIR_FD:
        return parts[-1], {"dir_fd": folder}
    return os.path.join(root, *parts), {}


@contextmanager
def open_regular(root: str, parts: Sequence[str]) -> Iterator[int]:
    """A read descriptor on the regular file ``root/parts...``; anything else is refused
    without blocking (a named pipe, a device, a socket, a folder, a link swapped in)."""
    shown = "/".join(parts)
    with open_folder(root, parts[:-1]) as folder:
        name, at = _at(folder, root, parts)
        try:
            fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC | _BINARY, **at)
        except FileNotFoundError as exc:
            raise WorkspaceError(
                f"No file {shown!r} in the workspace. List the folder to see what is there."
            ) from exc
        except IsADirectoryError as exc:
            raise WorkspaceError(f"{shown!r} is a folder, not a file; use list_files.") from exc
        except OSError as exc:  # ELOOP: the file was swapped for a link after the check
            raise _changed(shown, exc) from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise WorkspaceError(
                f"{shown!r} is not a regular file ({file_kind(mode)}); only regular files are read."
            )
        if _NONBLOCK and hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        yield fd
    finally:
        os.close(fd)


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, for a message: "a named pipe", "a folder", ..."""
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a plain file"


def is_binary(fd: int) -> bool:
    head = os.pread(fd, 8192, 0) if hasattr(os, "pread") else b""
    return b"\0" in head


def iter_lines(fd: int, *, max_bytes: int | None = None) -> Iterator[tuple[str, bool, int]]:
    """The file's lines as ``(text, cut, offset after the line)``, streamed: a line longer than
    ``MAX_LINE_BYTES`` is cut (the rest skipped, ``cut`` true). Stops after ``max_bytes`` bytes."""
    read = 0
    with os.fdopen(os.dup(fd), "rb", buffering=_CHUNK) as handle:
        handle.seek(0)
        while max_bytes is None or read < max_bytes:
            raw = handle.readline(MAX_LINE_BYTES)
            if not raw:
                return
            read += len(raw)
            cut = False
            while not raw.endswith(b"\n"):  # cut mid-line: skip to its end in bounded chunks
                more = handle.readline(_CHUNK)
                if not more:
                    break
                read += len(more)
                cut = True
                if more.endswith(b"\n"):
                    break
            yield raw.rstrip(b"\n").rstrip(b"\r").decode("utf-8", errors="replace"), cut, read


def count_newlines(fd: int, start: int, *, limit: int) -> tuple[int, bool]:
    """Newlines from byte ``start`` on, reading at most ``limit`` bytes: ``(count, complete)``."""
    count, offset = 0, start
    while offset - start < limit:
        chunk = os.pread(fd, _CHUNK * 16, offset)
        if not chunk:
            return count, True
        count += chunk.count(b"\n")
        offset += len(chunk)
    return count, False


def walk(
    root: str, parts: Sequence[str], *, skip: frozenset[str]
) -> Iterator[tuple[list[str], list[str], list[str]]]:
    """Like ``os.walk`` top-down, without recursion and without following links: yields
    ``(folder parts, subfolder names, other entry names)``, sorted; the caller may prune the
    subfolder list. Folders deeper than :data:`MAX_DEPTH` are yielded with no entries and the
    name ``"…"`` in place of their subfolders, so the caller can say that it stopped."""
    stack = [list(parts)]
    while stack:
        current = stack.pop()
        if len(current) - len(parts) >= MAX_DEPTH:
            yield current, [], ["…"]
            continue
        try:
            with (
                open_folder(root, current) as fd,
                os.scandir(fd if DIR_FD else os.path.join(root, *current)) as it,
            ):
                entries = sorted(it, key=lambda e: e.name)
                dirs = [e.name for e in entries if e.is_dir(follow_symlinks=False) and e.name not in skip]
                others = [e.name for e in entries if not e.is_dir(follow_symlinks=False)]
        except (WorkspaceError, OSError):
            continue  # vanished or swapped while walking: not ours to read
        yield current, dirs, others
        stack.extend([*current, name] for name in reversed(dirs))


def write_regular(
    root: str, parts: Sequence[str], data: bytes, *, refuse: Mapping[tuple[int, int], str]
) -> bool:
    """Replace (or create) the regular file ``root/parts...`` with ``data`` atomically: a
    temporary file in the same folder, renamed over it, both through the folder's descriptor.
    ``refuse`` maps ``(st_dev, st_ino)`` of files that must not be replaced to the reason, checked
    on the file actually there (a hard link or a late swap cannot get round it). Returns whether the
    file existed."""
    shown = "/".join(parts)
    with open_folder(root, parts[:-1], create=True) as folder:
        name, at = _at(folder, root, parts)
        try:
            info: os.stat_result | None = os.stat(name, follow_symlinks=False, **at)
        except FileNotFoundError:
            info = None
        if info is not None:
            if stat.S_ISLNK(info.st_mode):
                raise _changed(shown, OSError(0, "the file is now a symbolic link"))
            if not stat.S_ISREG(info.st_mode):
                kind = file_kind(info.st_mode)
                raise WorkspaceError(f"{shown!r} is {kind}; only regular files are written.")
            why = refuse.get((info.st_dev, info.st_ino))
            if why is not None:
                raise WorkspaceError(off_limits(shown, why))
        base, _ = _at(folder, root, [*parts[:-1], f".{parts[-1]}.{secrets.token_hex(4)}.tmp"])
        # A new file gets 0o666 less the umask, as open() gives; reading the umask instead would
        # mean setting it, which races with other threads creating files.
        created = 0o600 if info is not None else 0o666
        fd = os.open(
            base, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | _BINARY, created, **at
        )
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                if info is not None and hasattr(os, "fchmod"):
                    os.fchmod(handle.fileno(), stat.S_IMODE(info.st_mode))
            if DIR_FD:
                os.replace(base, name, src_dir_fd=folder, dst_dir_fd=folder)
            else:
                os.replace(base, name)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(base, **at)
            raise
    return info is not None


def off_limits(shown: str, why: str) -> str:
    return (
        f"{shown!r} is off limits to the file tools: it is {why}. Nothing was written. Leave it alone: "
        "write your output to another file, or tell the user what should change."
    )
