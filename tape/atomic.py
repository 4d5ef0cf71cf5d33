"""Atomic file writes: a crash or an error in the middle of a save leaves the old file whole."""
from __future__ import annotations

import contextlib
import os
import tempfile

from .errors import PreconditionNotMetError

# Files are created with the permissions open() would give (mkstemp's are owner-only).
_UMASK = os.umask(0)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_open(path, overwrite: bool = True):
    """``with atomic_open(path) as f: f.write(...)``: the writes go to a temporary file in the
    directory of ``path`` (created if missing); when the block ends normally the file is flushed,
    fsynced and renamed over ``path`` with ``os.replace``; when it raises, the temporary file is
    removed and whatever was at ``path`` is untouched. With ``overwrite=False`` an existing
    ``path`` is an error, raised before anything is written.
    """
    path = os.fspath(path)
    if not overwrite and os.path.exists(path):
        raise PreconditionNotMetError(f"{path} already exists and overwrite=False")
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                               dir=directory)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_directory(directory)


def atomic_write(path, data: bytes, overwrite: bool = True) -> None:
    """Write ``data`` to ``path`` atomically (see ``atomic_open``)."""
    with atomic_open(path, overwrite) as f:
        f.write(data)


def _fsync_directory(directory: str) -> None:
    """Make the rename durable (where the platform allows opening a directory)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
