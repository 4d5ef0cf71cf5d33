"""References for sgd, momentum, adam and adamw (textbook forms, numpy)."""
import numpy as np


def _param_outputs(Param, MasterParam, updated):
    """(ParamOut, MasterParamOut): with a master copy the update ran on it, Param gets it cast."""
    if MasterParam is None:
        return updated, None
    return updated.astype(Param.dtype), updated


def sgd(Param, LearningRate, Grad, MasterParam=None):
    source = Param if MasterParam is None else MasterParam
    return _param_outputs(Param, MasterParam, source - LearningRate.reshape(()) * Grad)


def momentum(Param, Grad, Velocity, LearningRate, *, mu, use_nesterov, regularization_method,
             regularization_coeff, rescale_grad, MasterParam=None):
    source = Param if MasterParam is None else MasterParam
    grad = Grad * rescale_grad
    if regularization_method == "l2_decay":
        grad = grad + regularization_coeff * source
    velocity = mu * Velocity + grad
    step = grad + mu * velocity if use_nesterov else velocity
    param_out, master_out = _param_outputs(Param, MasterParam,
                                           source - LearningRate.reshape(()) * step)
    return param_out, velocity, master_out


def _adam(Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow, *, beta1, beta2,
          epsilon, amsgrad, use_global_beta_pow, Moment2Max, MasterParam, SkipUpdate,
          Beta1Tensor, Beta2Tensor, EpsilonTensor, lr_ratio=1.0, decay=0.0):
    """Adam with bias-corrected moments m_hat, v_hat; the parameter is first multiplied by
    ``1 - lr * decay`` (decoupled weight decay)."""
    if SkipUpdate is not None and SkipUpdate.item():
        return Param, Moment1, Moment2, Moment2Max, Beta1Pow, Beta2Pow, MasterParam
    b1 = beta1 if Beta1Tensor is None else Beta1Tensor.reshape(())
    b2 = beta2 if Beta2Tensor is None else Beta2Tensor.reshape(())
    eps = epsilon if EpsilonTensor is None else EpsilonTensor.reshape(())
    lr = LearningRate.reshape(()) * lr_ratio
    source = (Param if MasterParam is None else MasterParam) * (1 - lr * decay)
    m = b1 * Moment1 + (1 - b1) * Grad
    v = b2 * Moment2 + (1 - b2) * Grad ** 2
    v_max = np.maximum(v, Moment2Max) if amsgrad else None
    m_hat = m / (1 - Beta1Pow.reshape(()))
    v_hat = (v_max if amsgrad else v) / (1 - Beta2Pow.reshape(()))
    param_out, master_out = _param_outputs(Param, MasterParam,
                                           source - lr * m_hat / (np.sqrt(v_hat) + eps))
    if use_global_beta_pow:
        pows = Beta1Pow, Beta2Pow
    else:
        pows = (Beta1Pow * b1).astype(Beta1Pow.dtype), (Beta2Pow * b2).astype(Beta2Pow.dtype)
    return param_out, m, v, v_max, *pows, master_out


def adam(Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow, *, beta1, beta2,
         epsilon, amsgrad, use_global_beta_pow, Moment2Max=None, MasterParam=None,
         SkipUpdate=None, Beta1Tensor=None, Beta2Tensor=None, EpsilonTensor=None):
    return _adam(Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow, beta1=beta1,
                 beta2=beta2, epsilon=epsilon, amsgrad=amsgrad,
                 use_global_beta_pow=use_global_beta_pow, Moment2Max=Moment2Max,
                 MasterParam=MasterParam, SkipUpdate=SkipUpdate, Beta1Tensor=Beta1Tensor,
                 Beta2Tensor=Beta2Tensor, EpsilonTensor=EpsilonTensor)


def adamw(Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow, *, beta1, beta2,
          epsilon, amsgrad, use_global_beta_pow, lr_ratio, coeff, with_decay, Moment2Max=None,
          MasterParam=None, SkipUpdate=None, Beta1Tensor=None, Beta2Tensor=None,
          EpsilonTensor=None):
    return _adam(Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow, beta1=beta1,
                 beta2=beta2, epsilon=epsilon, amsgrad=amsgrad,
                 use_global_beta_pow=use_global_beta_pow, Moment2Max=Moment2Max,
                 MasterParam=MasterParam, SkipUpdate=SkipUpdate, Beta1Tensor=Beta1Tensor,
                 Beta2Tensor=Beta2Tensor, EpsilonTensor=EpsilonTensor, lr_ratio=lr_ratio,
                 decay=coeff if with_decay else 0.0)
