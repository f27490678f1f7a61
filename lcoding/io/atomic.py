"""Atomic text files: the one way lcoding writes a file (model files, predictions).

:func:`write_text_atomic` writes a temporary file in the target's folder and renames it
over the target, so a reader sees the old file or the new one, never a part of one:

* a crash, a full disk or Ctrl-C leaves the target untouched and removes the temporary
  file (every exception, ``KeyboardInterrupt`` included);
* a run killed outright (``kill -9``, power loss) can leave its temporary file behind.
  Its name, ``.<target>.lcoding-tmp.<host>.<pid>.<random>``, says which process wrote
  it; the next write to the same folder from the same host removes those whose process
  is gone;
* a new file gets the permissions ``open()`` would give it (``0o666`` less the umask,
  as LIBLINEAR's ``fopen``); overwriting keeps the existing file's permission bits;
* a target that is a symbolic link is followed: the link's target is replaced (still
  atomically, by a rename in its own folder), the link stays.
"""
from __future__ import annotations

import os
import re
import secrets
import socket

TEMP_MARK = ".lcoding-tmp"
_HOST = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname() or "host")[:64] or "host"
_TEMP_NAME = re.compile(r"\.lcoding-tmp\.(?P<host>[A-Za-z0-9-]+)\.(?P<pid>[0-9]+)\.[0-9a-f]{16}$")


def temp_name(target_name: str, pid: int | None = None) -> str:
    """A fresh temporary file name for ``target_name`` (a base name), recognisable by
    :func:`stale_temp_files`."""
    pid = os.getpid() if pid is None else pid
    return f".{target_name}{TEMP_MARK}.{_HOST}.{pid}.{secrets.token_hex(8)}"


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return True          # not a process id we could have written: leave it alone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True          # exists (another user's process) or cannot tell
    return True


def stale_temp_files(folder: str) -> list:
    """Temporary files of :func:`write_text_atomic` in ``folder`` written on this host
    by processes that no longer run (their pid is gone)."""
    stale = []
    try:
        entries = os.scandir(folder)
    except OSError:
        return stale
    with entries:
        for entry in entries:
            name = entry.name
            if not name.startswith(".") or TEMP_MARK not in name:
                continue
            match = _TEMP_NAME.search(name)
            if match is None or match["host"] != _HOST:
                continue
            pid = int(match["pid"])
            if pid != os.getpid() and not _pid_alive(pid):
                try:
                    if entry.is_file(follow_symlinks=False):
                        stale.append(entry.path)
                except OSError:
                    pass
    return stale


def remove_stale_temp_files(folder: str) -> int:
    """Remove :func:`stale_temp_files`; returns how many were removed."""
    removed = 0
    for path in stale_temp_files(folder):
        try:
            os.unlink(path)
            removed += 1
        except OSError:
            pass
    return removed


def resolved_target(path) -> str:
    """The file a write to ``path`` replaces: ``path`` itself, or the file its chain of
    symbolic links points to (which need not exist yet)."""
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    return os.path.realpath(path) if os.path.islink(path) else os.path.abspath(path)


def write_text_atomic(path, text: str, encoding: str = "ascii", what: str = "file") -> None:
    """Write ``text`` to ``path`` atomically (see the module docstring).

    ``what`` names the file in error messages (``"model file"``).  A missing folder
    raises ``FileNotFoundError``; other failures the ``OSError`` of the step that
    failed.  ``text`` is encoded before anything is written, so an encoding error
    leaves no file either.
    """
    data = text.encode(encoding)
    shown = os.fspath(path)
    target = resolved_target(path)
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"cannot save {what} {shown}: folder {folder} does not exist")
    remove_stale_temp_files(folder)
    try:
        mode = os.stat(target).st_mode & 0o7777      # overwriting keeps the permissions
    except FileNotFoundError:
        mode = None                                  # new file: 0o666 less the umask
    tmp = os.path.join(folder, temp_name(os.path.basename(target)))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _sync_folder(folder)


def _sync_folder(folder: str) -> None:
    """Make the rename durable (best effort: not every system can fsync a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
