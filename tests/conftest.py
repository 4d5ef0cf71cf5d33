"""Hypothesis profiles and shared fixtures.

Profiles: ``ci`` (the default: derandomized, few examples per op, so the suite stays within
minutes) and ``nightly`` (many more examples). Choose with ``HYPOTHESIS_PROFILE=nightly``.
"""
import os

import pytest
from hypothesis import HealthCheck, settings

import tape
from tape.registry import op_info

settings.register_profile("ci", derandomize=True, max_examples=40, deadline=None,
                          database=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("nightly", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


class _ForbiddenKernel:
    """Stands in for a kernel that must not run: an error had to come first."""

    def __init__(self, op_type):
        self.op_type = op_type

    def call(self, ins, attrs, wants):
        raise AssertionError(f"{self.op_type}: a kernel ran although the input was invalid")


@pytest.fixture
def forbid_kernels(monkeypatch):
    """``forbid_kernels("mul")``: until the test ends, running any kernel of the op fails."""
    def forbid(op_type):
        info = op_info(op_type)
        stub = _ForbiddenKernel(op_type)
        monkeypatch.setattr(info, "kernels", {key: stub for key in info.kernels})
    return forbid


@pytest.fixture(autouse=True)
def fresh_tape():
    """Each test starts on a new global tape."""
    tape.reset_global_tape()
    yield
    tape.reset_global_tape()
