"""optim.lr_scheduler: StepDecay, CosineAnnealing and LinearWarmup give the textbook rates and
PyTorch's (when importable), round-trip their state, and check their arguments."""
import math

import numpy as np
import pytest

import tape
from tape import optim
from tape.optim.lr_scheduler import CosineAnnealing, LinearWarmup, StepDecay


def _rates(scheduler, steps):
    rates = [scheduler.optimizer.learning_rate]
    for _ in range(steps - 1):
        scheduler.step()
        rates.append(scheduler.optimizer.learning_rate)
    return rates


def test_step_decay():
    assert _rates(StepDecay(optim.SGD(1.0), step_size=3, gamma=0.5), 8) == \
        [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25]


def test_cosine_annealing():
    rates = _rates(CosineAnnealing(optim.SGD(1.0), T_max=4, eta_min=0.1), 9)
    want = [0.1 + 0.9 * (1 + math.cos(math.pi * t / 4)) / 2 for t in range(9)]
    np.testing.assert_allclose(rates, want, rtol=1e-15)
    assert rates[4] == pytest.approx(0.1) and rates[8] == pytest.approx(1.0)


def test_linear_warmup_then_constant_or_another_schedule():
    constant = _rates(LinearWarmup(optim.SGD(1.0), 4, start_lr=0.0, end_lr=0.2), 6)
    np.testing.assert_allclose(constant, [0.0, 0.05, 0.1, 0.15, 0.2, 0.2])
    opt = optim.SGD(0.2)
    warm = LinearWarmup(opt, 2, start_lr=0.0, end_lr=0.2, after=StepDecay(opt, 2, gamma=0.5))
    np.testing.assert_allclose(_rates(warm, 7), [0.0, 0.1, 0.2, 0.2, 0.1, 0.1, 0.05])


@pytest.mark.parametrize("make, torch_make", [
    (lambda o: StepDecay(o, 3, 0.5), lambda t, o: t.optim.lr_scheduler.StepLR(o, 3, 0.5)),
    (lambda o: CosineAnnealing(o, 5, 0.01),
     lambda t, o: t.optim.lr_scheduler.CosineAnnealingLR(o, 5, 0.01))])
def test_schedules_match_torch(make, torch_make):
    torch = pytest.importorskip("torch")
    torch_opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.3)
    torch_sched = torch_make(torch, torch_opt)
    want = []
    for _ in range(12):
        want.append(torch_opt.param_groups[0]["lr"])
        torch_opt.step()
        torch_sched.step()
    np.testing.assert_allclose(_rates(make(optim.SGD(0.3)), 12), want, rtol=1e-12)


def test_scheduler_state_round_trip():
    opt = optim.SGD(1.0)
    warm = LinearWarmup(opt, 3, 0.0, 1.0, after=CosineAnnealing(opt, T_max=10))
    for _ in range(5):
        warm.step()
    state = warm.state_dict()
    assert state == {"last_epoch": 5, "base_lr": 1.0, "after.last_epoch": 0, "after.base_lr": 1.0}
    other_opt = optim.SGD(0.5)
    other = LinearWarmup(other_opt, 3, 0.0, 1.0, after=CosineAnnealing(other_opt, T_max=10))
    other.load_state_dict({k: np.asarray(v) for k, v in state.items()})   # as load() gives
    assert other_opt.learning_rate == opt.learning_rate
    warm.step()
    other.step()
    assert other_opt.learning_rate == opt.learning_rate
    with pytest.raises(tape.InvalidArgumentError, match="missing key.*after.base_lr"):
        other.load_state_dict({"last_epoch": 1, "base_lr": 1.0, "after.last_epoch": 0})


@pytest.mark.parametrize("make, message", [
    (lambda o: StepDecay(o, 0), "step_size"), (lambda o: CosineAnnealing(o, 2.5), "T_max"),
    (lambda o: LinearWarmup(o, 2, 0.0, 1.0, after=StepDecay(optim.SGD(1.0), 2)), "same")])
def test_scheduler_arguments_are_checked(make, message):
    with pytest.raises(tape.InvalidArgumentError, match=message):
        make(optim.SGD(1.0))
