"""The lazy fusion and cached-backward tests' fixtures: fusion on for small arrays (the fusion
tests use it on every test), and a record of what lazy execution runs."""
import pytest

from tape import batching, fusion_steps
from tape.kernels import fused


@pytest.fixture
def fuse_small_arrays(monkeypatch):
    """The tests' arrays are small: fusion is on for them too (the default leaves arrays below
    fusion_steps.MIN_ELEMENTS alone)."""
    monkeypatch.setattr(fusion_steps, "MIN_ELEMENTS", 0)


class Calls(list):
    stored: list

    def __init__(self):
        super().__init__()
        self.stored = []


@pytest.fixture
def kernel_calls(monkeypatch):
    """What lazy execution runs, in order: op types of single kernels, "fused" per loop
    (``calls.stored`` lists how many arrays each loop wrote)."""
    calls = Calls()
    invoke, run_group = batching.invoke, fused.run_group

    def counting(plan, arrays, wants=None, names=None):
        calls.append(plan.info.type)
        return invoke(plan, arrays, wants, names)

    def counting_group(program, dtype, inputs, outputs, scalars):
        calls.append("fused")
        calls.stored.append(len(outputs))
        return run_group(program, dtype, inputs, outputs, scalars)
    monkeypatch.setattr(batching, "invoke", counting)
    monkeypatch.setattr(fused, "run_group", counting_group)
    return calls

