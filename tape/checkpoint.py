"""Checkpoints: a flat ``{name: array}`` state saved as an ``.npz`` file, atomically, no pickle.

``save`` writes a temporary file in the target's folder, syncs it to disk and renames it over
the target (``tape.atomic``), so a crash mid-save leaves the old checkpoint whole.
``load`` never unpickles: a file holding an object array is refused. Ints and floats are stored
as 0-d arrays and come back as 0-d arrays (``int(state["step"])``).

>>> state = checkpoint.combine(model=model.state_dict(), optimizer=opt.state_dict(model),
...                            scheduler=sched.state_dict())
>>> checkpoint.save("run/ckpt.npz", state)
>>> parts = checkpoint.split(checkpoint.load("run/ckpt.npz"))
>>> model.load_state_dict(parts["model"])
>>> opt.load_state_dict(parts["optimizer"], model)
>>> sched.load_state_dict(parts["scheduler"])
"""
from __future__ import annotations

import numbers
import os
import zipfile

import numpy as np

from .atomic import atomic_open
from .errors import InvalidArgumentError, NotFoundError
from .place import host_array

_SEPARATOR = "/"


def _as_array(path, name, value) -> np.ndarray:
    if isinstance(value, (numbers.Real, np.number, np.bool_)):
        return np.asarray(value)
    if hasattr(value, "__cuda_array_interface__"):
        value = host_array(value)
    if isinstance(value, np.ndarray) and value.dtype != object:
        return value
    raise InvalidArgumentError(f"checkpoint {path}: {name!r} must be a numeric numpy array, an "
                               f"int or a float, received {type(value).__name__}"
                               f"{' of dtype object' if isinstance(value, np.ndarray) else ''}")


def save(path, state: dict) -> None:
    """Write ``state`` (``{name: array | int | float}``; device arrays are copied to the host)
    to ``path`` as an ``.npz``."""
    path = os.fspath(path)
    arrays = {}
    for name, value in state.items():
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"checkpoint {path}: names must be non-empty strings, "
                                       f"received {name!r}")
        arrays[name] = _as_array(path, name, value)
    with atomic_open(path) as f, zipfile.ZipFile(f, "w", zipfile.ZIP_STORED,
                                                 allowZip64=True) as archive:
        for name, array in arrays.items():
            with archive.open(name + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)


def load(path) -> dict:
    """The ``{name: array}`` saved at ``path``. Raises NotFoundError for a missing file and
    InvalidArgumentError, naming the file, for one that is not a whole, pickle-free ``.npz``."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise NotFoundError(f"checkpoint {path}: no such file")
    name = None
    try:
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise InvalidArgumentError(f"checkpoint {path}: not an .npz archive (a single "
                                       f".npy array)")
        with archive:
            state = {}
            for name in archive.files:
                state[name] = archive[name]
            return state
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as error:
        if isinstance(error, InvalidArgumentError):
            raise
        member = f" (entry {name!r})" if name is not None else ""
        raise InvalidArgumentError(f"checkpoint {path}: cannot be read{member}, it is truncated, "
                                   f"corrupted or holds pickled objects: "
                                   f"{type(error).__name__}: {error}") from error


def combine(**parts: dict) -> dict:
    """One flat state from several: ``combine(model=a, optimizer=b)`` -> ``{"model/<key>": ...,
    "optimizer/<key>": ...}``."""
    return {f"{part}{_SEPARATOR}{key}": value for part, state in parts.items()
            for key, value in state.items()}


def split(state: dict) -> dict:
    """The inverse of ``combine``: ``{part: {key: value}}``."""
    parts = {}
    for name, value in state.items():
        part, separator, key = name.partition(_SEPARATOR)
        if not separator:
            raise InvalidArgumentError(f"checkpoint.split: {name!r} has no '<part>/' prefix")
        parts.setdefault(part, {})[key] = value
    return parts
