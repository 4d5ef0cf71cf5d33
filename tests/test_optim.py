"""optim: Momentum, Adam, AdamW against numpy and PyTorch over several steps; gradient
clipping; the optimizer's state_dict (schedulers: test_lr_schedulers.py; the update ops' own
checks: test_update_ops.py)."""

import numpy as np
import pytest

import tape
from tape import layers
from tape.optim.adam import Adam, AdamW
from tape.optim.clip import clip_grad_norm, clip_grad_value
from tape.optim.momentum import Momentum

STEPS = 6
SHAPES = [(3, 4), (4,)]


def _parameters(dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    params = []
    for i, shape in enumerate(SHAPES):
        p = tape.Variable(rng.standard_normal(shape).astype(dtype), name=f"p{seed}_{i}",
                          stop_gradient=False)
        p.desc.persistable = True
        params.append(p)
    return params


def _gradients(dtype=np.float64, seed=1):
    """STEPS gradients per parameter."""
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(shape).astype(dtype) for shape in SHAPES] for _ in range(STEPS)]


def _train(opt, params, grads, lrs=None):
    """Run the optimizer over ``grads``; the parameter values after each step."""
    history = []
    for step, step_grads in enumerate(grads):
        if lrs is not None:
            opt.learning_rate = lrs[step]
        for p, g in zip(params, step_grads):
            p.grad = tape.Variable(g.copy())
        opt(params)
        assert all(p.grad is None for p in params)
        history.append([p.value().copy() for p in params])
    return history


# ---- numpy references, written from the textbook formulas ----

def _momentum_reference(params, grads, lr, mu, nesterov, decay):
    params = [p.copy() for p in params]
    velocity = [np.zeros_like(p) for p in params]
    history = []
    for step_grads in grads:
        for i, g in enumerate(step_grads):
            g = g + decay * params[i]
            velocity[i] = mu * velocity[i] + g
            params[i] = params[i] - lr * (g + mu * velocity[i] if nesterov else velocity[i])
        history.append([p.copy() for p in params])
    return history


def _adam_reference(params, grads, lr, beta1, beta2, eps, l2=0.0, decoupled=0.0):
    params = [p.copy() for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    history = []
    for t, step_grads in enumerate(grads, 1):
        for i, g in enumerate(step_grads):
            params[i] = params[i] * (1 - lr * decoupled)
            g = g + l2 * params[i]
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            m_hat, v_hat = m[i] / (1 - beta1 ** t), v[i] / (1 - beta2 ** t)
            params[i] = params[i] - lr * m_hat / (np.sqrt(v_hat) + eps)
        history.append([p.copy() for p in params])
    return history


def _assert_histories_close(got, want, rtol, atol=0.0):
    for step, (g, w) in enumerate(zip(got, want)):
        for i, (a, b) in enumerate(zip(g, w)):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol,
                                       err_msg=f"step {step}, parameter {i}")


@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("decay", [0.0, 0.05])
def test_momentum_matches_numpy(nesterov, decay):
    params, grads = _parameters(), _gradients()
    want = _momentum_reference([p.value() for p in params], grads, 0.1, 0.9, nesterov, decay)
    got = _train(Momentum(0.1, momentum=0.9, use_nesterov=nesterov, weight_decay=decay),
                 params, grads)
    _assert_histories_close(got, want, rtol=1e-12)


@pytest.mark.parametrize("decay", [0.0, 0.1])
def test_adam_matches_numpy(decay):
    params, grads = _parameters(), _gradients()
    want = _adam_reference([p.value() for p in params], grads, 0.01, 0.9, 0.999, 1e-8, l2=decay)
    got = _train(Adam(0.01, weight_decay=decay), params, grads)
    _assert_histories_close(got, want, rtol=1e-10)


def test_adamw_matches_numpy():
    params, grads = _parameters(), _gradients()
    want = _adam_reference([p.value() for p in params], grads, 0.01, 0.8, 0.99, 1e-6,
                           decoupled=0.1)
    got = _train(AdamW(0.01, beta1=0.8, beta2=0.99, epsilon=1e-6, weight_decay=0.1), params,
                 grads)
    _assert_histories_close(got, want, rtol=1e-10)


def test_adam_with_weight_decay_adds_the_decay_through_scale_and_sum_ops(ops_seen_by_tape_run):
    _train(Adam(0.01, weight_decay=0.1), _parameters(), _gradients()[:1])
    assert ops_seen_by_tape_run == ["scale", "sum", "adam"] * len(SHAPES)


def test_float32_training_keeps_float32_state():
    params = _parameters(np.float32)
    opt = Adam(0.01)
    _train(opt, params, _gradients(np.float32)[:2])
    state = opt.state_dict(params)
    assert all(np.asarray(v).dtype == np.float32 for k, v in state.items() if k != "learning_rate")
    assert all(p.dtype == np.float32 for p in params)
    np.testing.assert_allclose(state[f"{params[0].name}.beta1_pow"], [0.9 ** 3], rtol=1e-6)


def test_state_is_made_on_first_use_per_parameter_and_skipped_without_gradient():
    params = _parameters()
    opt = Momentum(0.1)
    before = params[1].value().copy()
    params[0].grad = tape.Variable(np.ones(SHAPES[0]))
    opt(params)
    np.testing.assert_array_equal(params[1].value(), before)
    state = opt.state_dict(params)
    assert sorted(state) == ["learning_rate", f"{params[0].name}.velocity"]


# ---- PyTorch, when importable ----

def _torch_history(make, params, grads, lrs=None):
    torch = pytest.importorskip("torch")
    tensors = [torch.tensor(p.value().copy(), requires_grad=True) for p in params]
    opt = make(tensors)
    history = []
    for step, step_grads in enumerate(grads):
        if lrs is not None:
            for group in opt.param_groups:
                group["lr"] = lrs[step]
        for t, g in zip(tensors, step_grads):
            t.grad = torch.tensor(g.copy())
        opt.step()
        history.append([t.detach().numpy().copy() for t in tensors])
    return history


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_matches_torch_sgd(nesterov):
    torch = pytest.importorskip("torch")
    params, grads = _parameters(), _gradients()
    want = _torch_history(lambda ts: torch.optim.SGD(ts, lr=0.1, momentum=0.9,
                                                     nesterov=nesterov, weight_decay=0.01),
                          params, grads)
    got = _train(Momentum(0.1, 0.9, use_nesterov=nesterov, weight_decay=0.01), params, grads)
    _assert_histories_close(got, want, rtol=1e-12)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-10), (np.float32, 2e-5)])
def test_adam_matches_torch(dtype, rtol):
    torch = pytest.importorskip("torch")
    params, grads = _parameters(dtype), _gradients(dtype)
    lrs = [0.01, 0.02, 0.005, 0.01, 0.03, 0.001]     # a changing rate, as under a scheduler
    want = _torch_history(lambda ts: torch.optim.Adam(ts, lr=0.01, weight_decay=0.05),
                          params, grads, lrs)
    got = _train(Adam(0.01, weight_decay=0.05), params, grads, lrs)
    _assert_histories_close(got, want, rtol=rtol, atol=rtol)


def test_adamw_matches_torch():
    torch = pytest.importorskip("torch")
    params, grads = _parameters(), _gradients()
    want = _torch_history(lambda ts: torch.optim.AdamW(ts, lr=0.01, weight_decay=0.1),
                          params, grads)
    got = _train(AdamW(0.01, weight_decay=0.1), params, grads)
    _assert_histories_close(got, want, rtol=1e-10)


def test_optimizers_train_a_model():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 4)).astype(np.float32)
    y = (x @ rng.standard_normal((4, 1)) > 0).astype(np.int64)
    for opt in (Momentum(0.1), Adam(0.05), AdamW(0.05)):
        tape.seed(0)
        l1, l2 = layers.Linear(4, 16, act="relu"), layers.Linear(16, 2)
        losses = []
        for _ in range(30):
            tape.reset_global_tape()
            _, loss = tape.ops.softmax_with_cross_entropy(l2(l1(tape.Variable(x))),
                                                          tape.Variable(y))
            loss = tape.ops.mean(loss)
            losses.append(float(loss.value()))
            loss.backward()
            opt(l1.params() + l2.params())
        assert losses[-1] < 0.5 * losses[0], (type(opt).__name__, losses)


# ---- gradient clipping ----

def _with_grads(grads):
    params = []
    for g in grads:
        p = tape.Variable(np.zeros_like(g), stop_gradient=False)
        p.grad = tape.Variable(g)
        params.append(p)
    return params


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clip_grad_norm_scales_to_the_global_norm(dtype):
    grads = [np.array([3.0, 0.0], dtype), np.array([[0.0, 4.0]], dtype)]
    params = _with_grads(grads) + [tape.Variable(np.ones(2), stop_gradient=False)]   # no grad
    shared = params[0].grad
    assert clip_grad_norm(params, max_norm=1.0) == pytest.approx(5.0)
    np.testing.assert_allclose(params[0].grad.value(), [0.6, 0.0], rtol=1e-6)
    np.testing.assert_allclose(params[1].grad.value(), [[0.0, 0.8]], rtol=1e-6)
    assert params[0].grad.dtype == dtype and params[2].grad is None
    np.testing.assert_array_equal(shared.value(), grads[0])   # replaced, not scaled in place
    assert clip_grad_norm(params, max_norm=10.0) == pytest.approx(1.0)   # below: unchanged
    np.testing.assert_allclose(params[1].grad.value(), [[0.0, 0.8]], rtol=1e-6)


def test_clip_grad_norm_matches_torch():
    torch = pytest.importorskip("torch")
    grads = [np.random.default_rng(i).standard_normal((3, 4)) for i in range(3)]
    tensors = [torch.zeros(3, 4, dtype=torch.float64, requires_grad=True) for _ in grads]
    for t, g in zip(tensors, grads):
        t.grad = torch.tensor(g)
    want_norm = float(torch.nn.utils.clip_grad_norm_(tensors, max_norm=1.5))
    params = _with_grads(grads)
    assert clip_grad_norm(params, 1.5) == pytest.approx(want_norm, rel=1e-12)
    for p, t in zip(params, tensors):   # torch divides by norm + 1e-6
        np.testing.assert_allclose(p.grad.value(), t.grad.numpy(), rtol=1e-5)


def test_clip_grad_value():
    params = _with_grads([np.array([-3.0, 0.5, 2.0], np.float32)])
    clip_grad_value(params, 1.0)
    np.testing.assert_array_equal(params[0].grad.value(), np.array([-1.0, 0.5, 1.0], np.float32))
    assert params[0].grad.dtype == np.float32


@pytest.mark.parametrize("clip", [lambda ps: clip_grad_norm(ps, 0.0),
                                  lambda ps: clip_grad_value(ps, -1.0)])
def test_clip_bounds_are_checked(clip):
    with pytest.raises(tape.InvalidArgumentError, match="must be > 0"):
        clip(_with_grads([np.ones(2)]))


# ---- optimizer state ----

def test_optimizer_state_round_trip_under_other_names():
    params, grads = _parameters(seed=0), _gradients()
    opt = Adam(0.01)
    _train(opt, params, grads[:3])
    keys = {f"w{i}": p for i, p in enumerate(params)}
    state = opt.state_dict(keys)
    assert sorted(state) == ["learning_rate"] + sorted(
        f"w{i}.{s}" for i in range(2) for s in ("beta1_pow", "beta2_pow", "moment1", "moment2"))
    clones = _parameters(seed=0)
    for clone, p in zip(clones, params):
        clone.value()[...] = p.value()
    other = Adam(0.5)
    other.load_state_dict(state, {f"w{i}": p for i, p in enumerate(clones)})
    assert other.learning_rate == 0.01
    got, want = _train(other, clones, grads[3:]), _train(opt, params, grads[3:])
    for a, b in zip(got, want):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def test_optimizer_load_state_dict_errors():
    params = _parameters()
    opt = Momentum(0.1)
    _train(opt, params, _gradients()[:1])
    state = opt.state_dict(params)
    name = params[0].name
    cases = [
        ({k: v for k, v in state.items() if k != "learning_rate"}, "missing key 'learning_rate'"),
        ({**state, f"{name}.moment1": state[f"{name}.velocity"]}, "unexpected key"),
        ({**state, "nobody.velocity": state[f"{name}.velocity"]}, "unexpected key"),
        ({**state, f"{name}.velocity": np.zeros((4, 3))},
         rf"'{name}.velocity' expected float64 \(3, 4\), received float64 \(4, 3\)"),
        ({**state, f"{name}.velocity": state[f"{name}.velocity"].astype(np.float32)},
         "expected float64 .* received float32")]
    before = opt.state_dict(params)
    for bad, message in cases:
        with pytest.raises(tape.InvalidArgumentError, match=message):
            Momentum(0.1).load_state_dict(bad, params)
        with pytest.raises(tape.InvalidArgumentError):
            opt.load_state_dict(bad, params)
    for k, v in opt.state_dict(params).items():   # a refused load changed nothing
        np.testing.assert_array_equal(v, before[k])
    partial = Adam(0.1)
    _train(partial, params, _gradients()[:1])
    adam_state = partial.state_dict(params)
    del adam_state[f"{name}.moment2"]
    with pytest.raises(tape.InvalidArgumentError, match=rf"missing key.*'{name}.moment2'"):
        Adam(0.1).load_state_dict(adam_state, params)
