"""sgd, momentum, adam, adamw: each one fused in-place numba pass over the parameter.

The update runs in the dtype of the array it updates (MasterParam if given, else Param; float16
is computed in float32) on flat views of the state; an array that is not already C-contiguous
in that dtype is updated through a working copy and written back.
"""
import numpy as np

from tape import dtypes
from tape.registry import kernel

from .. import formulas
from ..jit import njit, njit_with


def _compute_dtype(array) -> np.dtype:
    return np.promote_types(array.dtype, np.float32)


def _flat(array, dtype):
    """``array`` as a 1-D C-contiguous ``dtype`` array: a view if it already is one, else a copy."""
    if array.dtype == dtype and array.flags.c_contiguous:
        return array.reshape(-1)
    return np.ascontiguousarray(array, dtype=dtype).reshape(-1)


def _write_back(targets, flats) -> None:
    """Copy each working copy made by ``_flat`` into its target (views need nothing)."""
    for target, flat in zip(targets, flats):
        # _flat's test for a view: cheaper than np.may_share_memory (0.1 against 0.6 us)
        if target.dtype != flat.dtype or not target.flags.c_contiguous:
            target[...] = flat.reshape(target.shape)


def _scalar(array, dtype):
    """The single element of a 1-element array as a ``dtype`` scalar."""
    return dtype.type(array.item())     # exact through a Python float; 0.2 us less than [0]


def _finish(Param, MasterParam) -> None:
    """With multi_precision the update ran on MasterParam: ParamOut is it, cast."""
    if MasterParam is not None:
        Param[...] = MasterParam


# ---- sgd ----

# From this many elements the numba loop runs (one pass against numpy's two: 28 against 72 us
# at 784x256 float32); below it numpy, faster there (1.0 against 5.2 us for 10 elements, a tie
# at 2560).
SGD_NUMBA_FROM = 4096


@njit
def _sgd_loop(param, grad, lr):
    for i in range(param.size):
        param[i] = formulas.sgd(param[i], grad[i], lr)


def _sgd_fused(param, grad, lr):
    """``param -= lr * grad`` in place, on C-contiguous arrays of one shape."""
    if param.size < SGD_NUMBA_FROM:
        np.subtract(param, lr * grad, out=param)     # formulas.sgd, bit for bit
    else:
        _sgd_loop(param.reshape(-1), grad.reshape(-1), lr)


@kernel("sgd", types=dtypes.FLOATING)
def sgd(Param, LearningRate, Grad, MasterParam):
    if MasterParam is None:
        # the common case, on the arrays themselves: a float32 or float64 parameter and a
        # gradient of its dtype, both C-contiguous (what the general path makes them anyway)
        dtype = Param.dtype
        if dtype == Grad.dtype and dtype.itemsize >= 4 and Param.flags.c_contiguous \
                and Grad.flags.c_contiguous:
            _sgd_fused(Param, Grad, dtype.type(LearningRate.item()))
            return Param, None
    source = Param if MasterParam is None else MasterParam
    dtype = _compute_dtype(source)
    param = _flat(source, dtype)
    _sgd_fused(param, _flat(Grad, dtype), _scalar(LearningRate, dtype))
    _write_back((source,), (param,))
    _finish(Param, MasterParam)
    return Param, MasterParam


# ---- momentum ----

@njit
def _momentum_fused(param, grad, velocity, lr, mu, l2, rescale, nesterov):
    for i in range(param.size):
        param[i], velocity[i] = formulas.momentum(param[i], grad[i], velocity[i], lr, mu, l2,
                                                  rescale, nesterov)


@kernel("momentum", types=dtypes.FLOATING)
def momentum(Param, Grad, Velocity, LearningRate, MasterParam, mu, use_nesterov,
             regularization_method, regularization_coeff, rescale_grad):
    source = Param if MasterParam is None else MasterParam
    dtype = _compute_dtype(source)
    l2 = regularization_coeff if regularization_method == "l2_decay" else 0.0
    param, velocity = _flat(source, dtype), _flat(Velocity, dtype)
    _momentum_fused(param, _flat(Grad, dtype), velocity, _scalar(LearningRate, dtype),
                    dtype.type(mu), dtype.type(l2), dtype.type(rescale_grad), use_nesterov)
    _write_back((source, Velocity), (param, velocity))
    _finish(Param, MasterParam)
    return Param, Velocity, MasterParam


# ---- adam, adamw ----

# numpy's error model: no zero-division check per element, which would keep the loop from
# being vectorised (4x slower).
@njit_with(error_model="numpy")
def _adam_fused(param, grad, moment1, moment2, moment2_max, beta1, rest1, beta2, rest2, lr_t,
                eps_t, keep, amsgrad):
    for i in range(param.size):
        # without amsgrad moment2_max is empty, and the formula reads no maximum
        top = moment2_max[i] if amsgrad else moment2[i]
        param[i], moment1[i], moment2[i], top = formulas.adam(
            param[i], grad[i], moment1[i], moment2[i], top, beta1, rest1, beta2, rest2, lr_t,
            eps_t, keep, amsgrad)
        if amsgrad:
            moment2_max[i] = top


def _adam_update(Param, Grad, LearningRate, Moment1, Moment2, Moment2Max, Beta1Pow, Beta2Pow,
                 MasterParam, SkipUpdate, Beta1Tensor, Beta2Tensor, EpsilonTensor, beta1, beta2,
                 epsilon, use_global_beta_pow, lr_ratio=1.0, decay=0.0):
    """The adam step, after scaling the parameter by ``1 - lr * lr_ratio * decay`` (adamw)."""
    outputs = Param, Moment1, Moment2, Moment2Max, Beta1Pow, Beta2Pow, MasterParam
    if SkipUpdate is not None and SkipUpdate.reshape(-1)[0]:
        return outputs
    source = Param if MasterParam is None else MasterParam
    dtype = _compute_dtype(source)
    one = dtype.type(1)
    b1 = dtype.type(beta1) if Beta1Tensor is None else _scalar(Beta1Tensor, dtype)
    b2 = dtype.type(beta2) if Beta2Tensor is None else _scalar(Beta2Tensor, dtype)
    eps = dtype.type(epsilon) if EpsilonTensor is None else _scalar(EpsilonTensor, dtype)
    b1_pow, b2_pow = _scalar(Beta1Pow, dtype), _scalar(Beta2Pow, dtype)
    lr = _scalar(LearningRate, dtype) * dtype.type(lr_ratio)
    # Paddle's form of the bias correction: the corrections fold into lr and epsilon.
    lr_t = lr * (np.sqrt(one - b2_pow) / (one - b1_pow))
    eps_t = eps * np.sqrt(one - b2_pow)
    keep = one - lr * dtype.type(decay)
    state = [source, Moment1, Moment2] + ([Moment2Max] if Moment2Max is not None else [])
    flats = [_flat(a, dtype) for a in state]
    moment2_max = flats[3] if Moment2Max is not None else np.empty(0, dtype)
    _adam_fused(flats[0], _flat(Grad, dtype), flats[1], flats[2], moment2_max, b1, one - b1, b2,
                one - b2, lr_t, eps_t, keep, Moment2Max is not None)
    _write_back(state, flats)
    _finish(Param, MasterParam)
    if not use_global_beta_pow:
        Beta1Pow[...] = b1 * b1_pow
        Beta2Pow[...] = b2 * b2_pow
    return outputs


@kernel("adam", types=dtypes.FLOATING)
def adam(Param, Grad, LearningRate, Moment1, Moment2, Moment2Max, Beta1Pow, Beta2Pow,
         MasterParam, SkipUpdate, Beta1Tensor, Beta2Tensor, EpsilonTensor, beta1, beta2, epsilon,
         use_global_beta_pow):
    return _adam_update(Param, Grad, LearningRate, Moment1, Moment2, Moment2Max, Beta1Pow,
                        Beta2Pow, MasterParam, SkipUpdate, Beta1Tensor, Beta2Tensor,
                        EpsilonTensor, beta1, beta2, epsilon, use_global_beta_pow)


@kernel("adamw", types=dtypes.FLOATING)
def adamw(Param, Grad, LearningRate, Moment1, Moment2, Moment2Max, Beta1Pow, Beta2Pow,
          MasterParam, SkipUpdate, Beta1Tensor, Beta2Tensor, EpsilonTensor, beta1, beta2,
          epsilon, use_global_beta_pow, lr_ratio, coeff, with_decay):
    return _adam_update(Param, Grad, LearningRate, Moment1, Moment2, Moment2Max, Beta1Pow,
                        Beta2Pow, MasterParam, SkipUpdate, Beta1Tensor, Beta2Tensor,
                        EpsilonTensor, beta1, beta2, epsilon, use_global_beta_pow, lr_ratio,
                        coeff if with_decay else 0.0)


# ---- adagrad, rmsprop, adadelta, adamax, lamb ----
#
# Each update is written once, as a step over element i of its arrays, numba-compilable for
# both targets: ``_each_element`` compiles the loop around it here, kernels/cuda/optimizer.py a
# numba.cuda kernel around the same step. A step takes the parameter, the gradient, three state
# arrays a, b, c (one it does not use is never read) and a tuple of scalars in the arrays' dtype.
# Square roots are ``** 0.5``: the same in numba, numba.cuda and Python (the simulator).

def _adagrad_step(i, param, grad, moment, b, c, k):
    lr, epsilon = k
    g = grad[i]
    m = moment[i] + g * g
    moment[i] = m
    param[i] -= lr * g / (m ** 0.5 + epsilon)


def _rmsprop_step(i, param, grad, mean_square, moment, mean_grad, k):
    lr, epsilon, decay, rest, mu, centered = k
    g = grad[i]
    v = decay * mean_square[i] + rest * g * g
    mean_square[i] = v
    if centered != 0:
        mg = decay * mean_grad[i] + rest * g
        mean_grad[i] = mg
        v -= mg * mg
    step = mu * moment[i] + lr * g / (v + epsilon) ** 0.5
    moment[i] = step
    param[i] -= step


def _adadelta_step(i, param, grad, avg_squared_grad, avg_squared_update, c, k):
    lr, rho, rest, epsilon = k
    g = grad[i]
    sg = rho * avg_squared_grad[i] + rest * g * g
    update = -((avg_squared_update[i] + epsilon) / (sg + epsilon)) ** 0.5 * g
    avg_squared_grad[i] = sg
    avg_squared_update[i] = rho * avg_squared_update[i] + rest * update * update
    param[i] += lr * update


def _adamax_step(i, param, grad, moment, inf_norm, c, k):
    lr_t, beta1, rest1, beta2, epsilon = k
    g = grad[i]
    m = beta1 * moment[i] + rest1 * g
    u = beta2 * inf_norm[i] + epsilon
    if abs(g) > u:
        u = abs(g)
    moment[i] = m
    inf_norm[i] = u
    param[i] -= lr_t * m / u


def _lamb_moments_step(i, param, grad, moment1, moment2, trust_ratio_div, k):
    beta1, rest1, beta2, rest2, correction1, correction2, epsilon, weight_decay = k
    g = grad[i]
    m = beta1 * moment1[i] + rest1 * g
    v = beta2 * moment2[i] + rest2 * g * g
    moment1[i] = m
    moment2[i] = v
    trust_ratio_div[i] = ((m / correction1) / ((v / correction2) ** 0.5 + epsilon)
                          + weight_decay * param[i])


def _lamb_param_step(i, param, grad, trust_ratio_div, b, c, k):
    (lr,) = k
    param[i] -= lr * trust_ratio_div[i]


_compiled_loops: dict = {}


def _each_element(step):
    """``loop(param, grad, a, b, c, k)`` running ``step`` on every element, compiled by numba on
    first use (not cached on disk: one loop's code serves every step)."""
    loop = _compiled_loops.get(step)
    if loop is None:
        import numba
        element = numba.njit(error_model="numpy")(step)

        @numba.njit(error_model="numpy")
        def loop(param, grad, a, b, c, k):
            for i in range(param.size):
                element(i, param, grad, a, b, c, k)
        _compiled_loops[step] = loop
    return loop


def _apply(step, Param, MasterParam, Grad, states, scalars) -> None:
    """``step`` on every element of Param (MasterParam if given, then cast into Param), Grad
    and the state arrays (at most three), in place; ``scalars`` are cast to the update's
    dtype."""
    source = Param if MasterParam is None else MasterParam
    dtype = _compute_dtype(source)
    arrays = [source, *states]
    flats = [_flat(a, dtype) for a in arrays]
    unused = [np.empty(0, dtype)] * (4 - len(flats))    # the step never reads them
    _each_element(step)(flats[0], _flat(Grad, dtype), *flats[1:], *unused,
                        tuple(dtype.type(x) for x in scalars))
    _write_back(arrays, flats)
    _finish(Param, MasterParam)


@kernel("adagrad", types=dtypes.FLOATING)
def adagrad(Param, Grad, Moment, LearningRate, MasterParam, epsilon):
    _apply(_adagrad_step, Param, MasterParam, Grad, [Moment],
           (_scalar(LearningRate, np.dtype(np.float64)), epsilon))
    return Param, Moment, MasterParam


@kernel("rmsprop", types=dtypes.FLOATING)
def rmsprop(Param, MeanSquare, Grad, Moment, LearningRate, MeanGrad, MasterParam, epsilon,
            decay, momentum, centered):
    states = [MeanSquare, Moment] + ([MeanGrad] if MeanGrad is not None else [])
    _apply(_rmsprop_step, Param, MasterParam, Grad, states,
           (_scalar(LearningRate, np.dtype(np.float64)), epsilon, decay, 1.0 - decay, momentum,
            float(centered)))
    return Param, Moment, MeanSquare, MeanGrad, MasterParam


@kernel("adadelta", types=dtypes.FLOATING)
def adadelta(Param, Grad, AvgSquaredGrad, AvgSquaredUpdate, LearningRate, MasterParam, rho,
             epsilon):
    _apply(_adadelta_step, Param, MasterParam, Grad, [AvgSquaredGrad, AvgSquaredUpdate],
           (_scalar(LearningRate, np.dtype(np.float64)), rho, 1.0 - rho, epsilon))
    return Param, AvgSquaredGrad, AvgSquaredUpdate, MasterParam


@kernel("adamax", types=dtypes.FLOATING)
def adamax(Param, Grad, LearningRate, Moment, InfNorm, Beta1Pow, MasterParam, beta1, beta2,
           epsilon):
    f64 = np.dtype(np.float64)
    lr_t = _scalar(LearningRate, f64) / (1.0 - _scalar(Beta1Pow, f64))
    _apply(_adamax_step, Param, MasterParam, Grad, [Moment, InfNorm],
           (lr_t, beta1, 1.0 - beta1, beta2, epsilon))
    return Param, Moment, InfNorm, MasterParam


@kernel("lamb", types=dtypes.FLOATING)
def lamb(Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow, MasterParam,
         SkipUpdate, weight_decay, beta1, beta2, epsilon, always_adapt):
    outputs = Param, Moment1, Moment2, Beta1Pow, Beta2Pow, MasterParam
    if SkipUpdate is not None and SkipUpdate.reshape(-1)[0]:
        return outputs
    f64 = np.dtype(np.float64)
    source = Param if MasterParam is None else MasterParam
    b1_pow, b2_pow = _scalar(Beta1Pow, f64), _scalar(Beta2Pow, f64)
    trust_ratio_div = np.empty(source.shape, _compute_dtype(source))
    _apply(_lamb_moments_step, Param, MasterParam, Grad, [Moment1, Moment2, trust_ratio_div],
           (beta1, 1.0 - beta1, beta2, 1.0 - beta2, 1.0 - b1_pow, 1.0 - b2_pow, epsilon,
            weight_decay))
    rate = _scalar(LearningRate, f64)
    if weight_decay > 0 or always_adapt:
        p_norm = float(np.linalg.norm(source.reshape(-1).astype(trust_ratio_div.dtype)))
        r_norm = float(np.linalg.norm(trust_ratio_div.reshape(-1)))
        if p_norm > 0 and r_norm > 0:
            rate *= p_norm / r_norm
    _apply(_lamb_param_step, Param, MasterParam, Grad, [trust_ratio_div], (rate,))
    Beta1Pow[...] = b1_pow * beta1
    Beta2Pow[...] = b2_pow * beta2
    return outputs
