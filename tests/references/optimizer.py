"""References for sgd, momentum, adam, adamw, adagrad, rmsprop, adadelta, adamax and lamb
(textbook forms, numpy)."""
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


def adagrad(Param, Grad, Moment, LearningRate, *, epsilon, MasterParam=None):
    source = Param if MasterParam is None else MasterParam
    moment = Moment + Grad ** 2
    updated = source - LearningRate.reshape(()) * Grad / (np.sqrt(moment) + epsilon)
    param_out, master_out = _param_outputs(Param, MasterParam, updated)
    return param_out, moment, master_out


def rmsprop(Param, MeanSquare, Grad, Moment, LearningRate, *, epsilon, decay, momentum,
            centered, MeanGrad=None, MasterParam=None):
    source = Param if MasterParam is None else MasterParam
    mean_square = decay * MeanSquare + (1 - decay) * Grad ** 2
    mean_grad = MeanGrad
    variance = mean_square
    if centered:
        mean_grad = decay * MeanGrad + (1 - decay) * Grad
        variance = mean_square - mean_grad ** 2
    moment = momentum * Moment + LearningRate.reshape(()) * Grad / np.sqrt(variance + epsilon)
    param_out, master_out = _param_outputs(Param, MasterParam, source - moment)
    return param_out, moment, mean_square, mean_grad, master_out


def adadelta(Param, Grad, AvgSquaredGrad, AvgSquaredUpdate, LearningRate, *, rho, epsilon,
             MasterParam=None):
    source = Param if MasterParam is None else MasterParam
    avg_grad = rho * AvgSquaredGrad + (1 - rho) * Grad ** 2
    update = -np.sqrt((AvgSquaredUpdate + epsilon) / (avg_grad + epsilon)) * Grad
    avg_update = rho * AvgSquaredUpdate + (1 - rho) * update ** 2
    param_out, master_out = _param_outputs(Param, MasterParam,
                                           source + LearningRate.reshape(()) * update)
    return param_out, avg_grad, avg_update, master_out


def adamax(Param, Grad, LearningRate, Moment, InfNorm, Beta1Pow, *, beta1, beta2, epsilon,
           MasterParam=None):
    source = Param if MasterParam is None else MasterParam
    moment = beta1 * Moment + (1 - beta1) * Grad
    inf_norm = np.maximum(beta2 * InfNorm + epsilon, np.abs(Grad))
    rate = LearningRate.reshape(()) / (1 - Beta1Pow.reshape(()))
    param_out, master_out = _param_outputs(Param, MasterParam,
                                           source - rate * moment / inf_norm)
    return param_out, moment, inf_norm, master_out


def lamb(Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow, *, weight_decay, beta1,
         beta2, epsilon, always_adapt, MasterParam=None, SkipUpdate=None):
    """LAMB: an Adam direction plus decoupled decay, scaled by ||param|| / ||direction||."""
    if SkipUpdate is not None and SkipUpdate.item():
        return Param, Moment1, Moment2, Beta1Pow, Beta2Pow, MasterParam
    source = Param if MasterParam is None else MasterParam
    m = beta1 * Moment1 + (1 - beta1) * Grad
    v = beta2 * Moment2 + (1 - beta2) * Grad ** 2
    m_hat, v_hat = m / (1 - Beta1Pow.reshape(())), v / (1 - Beta2Pow.reshape(()))
    direction = m_hat / (np.sqrt(v_hat) + epsilon) + weight_decay * source
    ratio = 1.0
    p_norm, d_norm = np.linalg.norm(source), np.linalg.norm(direction)
    if (weight_decay > 0 or always_adapt) and p_norm > 0 and d_norm > 0:
        ratio = p_norm / d_norm
    param_out, master_out = _param_outputs(
        Param, MasterParam, source - LearningRate.reshape(()) * ratio * direction)
    return (param_out, m, v, (Beta1Pow * beta1).astype(Beta1Pow.dtype),
            (Beta2Pow * beta2).astype(Beta2Pow.dtype), master_out)
