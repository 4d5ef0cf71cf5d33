"""increment: the one control-flow op with a kernel (the others are run by the static Executor,
which reads and writes the scope: tape.static.control_flow)."""
from tape import dtypes
from tape.registry import kernel


@kernel("increment", types=(dtypes.INT32, dtypes.INT64, dtypes.FP32, dtypes.FP64))
def increment(X, step):
    return X + X.dtype.type(step)
