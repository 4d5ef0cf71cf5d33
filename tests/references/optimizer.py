"""Reference for sgd."""


def sgd(Param, LearningRate, Grad, MasterParam=None):
    source = Param if MasterParam is None else MasterParam
    updated = source - LearningRate.reshape(()) * Grad
    if MasterParam is None:
        return updated, None
    return updated.astype(Param.dtype), updated
