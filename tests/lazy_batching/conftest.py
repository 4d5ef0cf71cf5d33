"""The autobatching tests' fixture: what lazy execution runs, kernel call by kernel call."""
import pytest

import tape
from tape import batching


@pytest.fixture
def kernel_calls(monkeypatch):
    """``(op type, {slot: arrays})`` of each kernel call lazy execution makes, with fusion off:
    these tests pin the scheduler's calls op by op, which fusion replaces by one loop per chain
    (tests/lazy_fusion/ checks fused chains batch too)."""
    calls = []
    invoke = batching.invoke

    def counting(plan, arrays, wants=None, names=None):
        calls.append((plan.info.type, arrays))
        return invoke(plan, arrays, wants, names)
    monkeypatch.setattr(batching, "invoke", counting)
    tape.set_flags({"FLAGS_lazy_fusion": False})
    try:
        yield calls
    finally:
        tape.set_flags({"FLAGS_lazy_fusion": True})
