"""Process-unique names: ``tmp_12`` for an op's output, ``linear_0`` for a layer's prefix."""
import itertools

_name_sources: dict = {}


def name_source(prefix: str):
    """The iterator of process-unique names ``prefix_0, prefix_1, ...`` (one per prefix)."""
    source = _name_sources.get(prefix)
    if source is None:
        source = _name_sources[prefix] = map(f"{prefix}_{{}}".format, itertools.count())
    return source


def unique_name(prefix: str = "tmp") -> str:
    """A process-unique name: ``tmp_12``, ``linear_0``."""
    return next(name_source(prefix))
