"""Hypothesis profiles, the unused-input check, and shared fixtures.

Profiles: ``ci`` (the default: derandomized, few examples per op, so the suite stays within
minutes) and ``nightly`` (many more examples). Choose with ``HYPOTHESIS_PROFILE=nightly``.

The whole suite runs with ``FLAGS_enable_unused_var_check`` on: every kernel any test runs
(forward and grad, eager and static) must read each input its op declares, but no-need-buffer
ones.
"""
import os

import pytest
from hypothesis import HealthCheck, settings

import tape
from tape import ops
from tape.registry import REGISTRY, op_info

settings.register_profile("ci", derandomize=True, max_examples=40, deadline=None,
                          database=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("nightly", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

tape.set_flags({"FLAGS_enable_unused_var_check": True})


class _ForbiddenKernel:
    """Stands in for a kernel that must not run: an error had to come first."""

    def __init__(self, op_type):
        self.op_type = op_type

    def call(self, ins, attrs, wants):
        raise AssertionError(f"{self.op_type}: a kernel ran although the input was invalid")

    def call_recording(self, ins, attrs, wants):
        return self.call(ins, attrs, wants)


@pytest.fixture
def ops_seen_by_tape_run(monkeypatch) -> list:
    """The list of the op types ``Tape.run`` is called with from then on (a spy on it)."""
    seen = []
    run = tape.Tape.run

    def spy(self, info, *args):
        seen.append(info.type)
        return run(self, info, *args)

    monkeypatch.setattr(tape.Tape, "run", spy)
    return seen


@pytest.fixture
def forbid_kernels(monkeypatch):
    """``forbid_kernels("mul")``: until the test ends, running any kernel of the op fails."""
    def forbid(op_type):
        info = op_info(op_type)
        stub = _ForbiddenKernel(op_type)
        monkeypatch.setattr(info, "kernels", {key: stub for key in info.kernels})
    return forbid


@pytest.fixture
def reported_before_kernel(forbid_kernels):
    """``reported_before_kernel(op_type, call, fragments)``: ``call()`` raises an
    InvalidArgumentError whose message holds every fragment, before any kernel of ``op_type``
    runs."""
    def check(op_type, call, fragments):
        forbid_kernels(op_type)
        with pytest.raises(tape.InvalidArgumentError) as error:
            call()
        message = str(error.value)
        for fragment in fragments:
            assert fragment in message, f"{fragment!r} missing from: {message}"
    return check


@pytest.fixture(autouse=True)
def fresh_tape():
    """Each test starts on a new global tape."""
    tape.reset_global_tape()
    yield
    tape.reset_global_tape()


@pytest.fixture
def user_ops():
    """Registers ops for one test, then removes them (and their grad ops and generated
    functions) from the registry."""
    before = set(REGISTRY)
    yield
    for op_type in set(REGISTRY) - before:
        del REGISTRY[op_type]
        if hasattr(ops, op_type):
            delattr(ops, op_type)


@pytest.fixture(params=["eager", "lazy"])
def mode(request):
    """Runs the test twice: on a fresh eager tape, and inside ``tape.lazy()``."""
    tape.reset_global_tape()
    if request.param == "lazy":
        with tape.lazy():
            yield
    else:
        yield


@pytest.fixture
def restore_flags():
    """Flags a test sets with ``tape.set_flags`` are back to their suite values after it."""
    saved = tape.get_flags()
    yield
    tape.set_flags(saved)


@pytest.fixture
def units_made(monkeypatch):
    """The ``tape.units.Unit`` objects lazy executions make while the test runs, in order."""
    from tape import units
    made = []
    unit_init = units.Unit.__init__

    def counting(self, *args, **kwargs):
        made.append(self)
        unit_init(self, *args, **kwargs)
    monkeypatch.setattr(units.Unit, "__init__", counting)
    return made
