"""What an eager or lazy runner (``tape.runner``) checks beyond its written-out lines, and the
errors it raises, named by op and slot; which tapes backward has spent, for the message of a
stale input."""
from __future__ import annotations

from .errors import InvalidArgumentError, PreconditionNotMetError
from .variable import Variable


def count_error(info, name: str, vs) -> InvalidArgumentError:
    if not vs:
        return InvalidArgumentError(f"{info.type}: input '{name}' is required but was not "
                                    f"given")
    return InvalidArgumentError(f"{info.type}: input '{name}' takes one Variable, received "
                                f"{len(vs)}")


def no_value(info, name: str, desc) -> InvalidArgumentError:
    return InvalidArgumentError(f"{info.type}: input '{name}' ({desc.name}) holds no value")


def not_variable(info, name: str, value) -> InvalidArgumentError:
    return InvalidArgumentError(f"{info.type}: input '{name}' expects a Variable, received "
                                f"{type(value).__name__}")


def common_place(info, inputs: dict, place, name: str, v):
    """The op's place once ``v`` of slot ``name`` is seen: its own for the first input, else
    ``place``; an input on another place is an error."""
    if place is None:
        return v.place
    if v.place == place:
        return place
    first_slot, first = next((slot, inputs[slot][0]) for slot, _, _ in info.slot_specs
                             if inputs.get(slot))
    raise InvalidArgumentError(
        f"{info.type}: input '{name}' ({v.name}) is on {v.place} but input '{first_slot}' "
        f"({first.name}) is on {first.place}; an op runs on one place: move one of them with "
        f"Variable.to(place)")


def gather_many(info, inputs: dict, name: str, vs, place, unset) -> tuple:
    """``(signature part, arrays, place)`` of the Variables ``vs`` of duplicable slot ``name``,
    each checked as a single slot's is (``unset`` stands in for a value not yet computed)."""
    key, arrays = [len(vs)], []
    for v in vs:
        if not isinstance(v, Variable):
            raise not_variable(info, name, v)
        d = v.desc
        value = v._value
        if value is None:
            value = unset(info, name, v)
        if v.place is not place:
            place = common_place(info, inputs, place, name, v)
        key.append((d.shape, d.dtype, d.stop_gradient))
        arrays.append(value)
    return tuple(key), arrays, place


def check_stale(tape, info, name: str, vs) -> None:
    for v in vs:
        if v._tape and v._tape != tape.serial and not v.desc.stop_gradient:
            raise stale_error(info, name, v)


_spent_serials: set = set()     # tapes backward has spent (recent ones)


def tape_spent(serial: int) -> None:
    """Note that backward spent tape ``serial`` (for the message of a later stale input)."""
    if len(_spent_serials) >= 4096:
        _spent_serials.clear()
    _spent_serials.add(serial)


def fate(serial: int) -> str:
    """What became of tape ``serial``, for an error about a Variable it computed."""
    if serial in _spent_serials:
        return "backward has spent (it released the ops a gradient would flow through)"
    return "has since been reset"


def stale_error(info, name: str, v) -> PreconditionNotMetError:
    return PreconditionNotMetError(
        f"{info.type}: input '{name}' ({v.name}) was computed on a tape that {fate(v._tape)}, "
        f"so no gradient can flow through it; call {v.name}.detach() to use its value as a "
        f"constant")


def spent_error(info) -> PreconditionNotMetError:
    return PreconditionNotMetError(
        f"{info.type}: this tape was spent by backward; call tape.reset_global_tape() before "
        f"recording a new computation")
