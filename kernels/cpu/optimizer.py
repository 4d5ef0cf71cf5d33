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
    if param.size < SGD_NUMBA_FROM:
        np.subtract(param, lr * grad, out=param)     # formulas.sgd, bit for bit
    else:
        _sgd_loop(param, grad, lr)


@kernel("sgd", types=dtypes.FLOATING)
def sgd(Param, LearningRate, Grad, MasterParam):
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
