"""Whether a recording file can be written, said as the operating system says it.

SQLite reports a missing directory, a denied permission or a directory given as the file all
as "unable to open database file", and a full disk as "database or disk is full". An operator
needs the file and the OS's own words (``No such file or directory``), so ``probe`` opens the
file and creates a file beside it (where SQLite's write-ahead log goes) before SQLite does,
and ``os_error`` names the OS error behind a SQLite error met while opening.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import tempfile
from pathlib import Path


def probe(path: Path) -> bool:
    """Raise the OSError that writing ``path`` would meet (none: it can be written now).

    Creates ``path`` when it does not exist (SQLite would: an empty file is a new database)
    and says whether it did (``discard`` removes it again when recording fails)."""
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    os.close(fd)
    try:
        # the write-ahead log and its index are created beside the file, in its directory
        with tempfile.TemporaryFile(dir=path.parent, prefix=".gpucon-probe-"):
            pass
    except OSError:
        discard(path, created)
        raise
    return created


def discard(path: Path, created: bool) -> None:
    """Remove ``path`` if ``probe`` created it and nothing was written to it."""
    if not created:
        return
    try:
        if path.stat().st_size == 0:
            path.unlink()
    except OSError:
        pass


def os_error(path: Path, exc: sqlite3.Error) -> OSError | None:
    """The OS error behind ``exc``, met opening ``path`` for writing; None when it is not one
    (the file is not a database, a lock is held)."""
    name = getattr(exc, "sqlite_errorname", "")
    # SQLite says a full disk met while making its shared-memory index as an I/O error
    if name == "SQLITE_FULL" or (name.startswith("SQLITE_IOERR") and _no_room(path)):
        return _error(errno.ENOSPC, path)
    if name.startswith("SQLITE_READONLY"):
        return _error(errno.EROFS if _read_only_fs(path) else errno.EACCES, path)
    if name.startswith("SQLITE_CANTOPEN"):
        try:
            probe(path)
        except OSError as found:
            return found
        return None
    if name.startswith("SQLITE_IOERR"):
        return _error(errno.EIO, path, str(exc))
    return None


def describe(path: Path, error: OSError) -> str:
    """``No such file or directory (ENOENT; /srv/rec does not exist)``: the reason, short."""
    code = error.errno
    words = error.strerror or str(error)
    if code is None:
        return words
    detail = errno.errorcode.get(code, str(code))
    if code == errno.ENOENT and not path.parent.exists():
        detail += f"; {path.parent} does not exist"
    elif code == errno.ENOSPC:
        detail += f"; {_free(path.parent)} free"
    return f"{words} ({detail})"


def _error(code: int, path: Path, extra: str = "") -> OSError:
    words = os.strerror(code) + (f": {extra}" if extra else "")
    return OSError(code, words, str(path))


def _no_room(path: Path) -> bool:
    try:
        return os.statvfs(path.parent).f_bavail == 0
    except OSError:
        return False


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _free(directory: Path) -> str:
    try:
        st = os.statvfs(directory)
    except OSError:
        return "n/a"
    free = st.f_bavail * st.f_frsize
    return f"{free / 1024:.0f} KiB" if free < 1 << 20 else f"{free / (1 << 20):.1f} MiB"
