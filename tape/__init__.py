"""Tape: an eager, define-by-run autodiff library on PaddlePaddle Fluid's operator model."""
from . import dtypes  # noqa: F401
from .desc import BlockDesc, OpDesc, ProgramDesc, VarDesc  # noqa: F401
from .errors import (InvalidArgumentError, NotFoundError, PermissionDeniedError,  # noqa: F401
                     PreconditionNotMetError, TapeError)
from .flags import get_flags, set_flags  # noqa: F401
from .place import CPUPlace, CUDAPlace  # noqa: F401
from .random import seed  # noqa: F401
from .tape import OpHandle, Tape, get_global_tape, no_grad, reset_global_tape  # noqa: F401
from .variable import Variable  # noqa: F401
from . import ops  # noqa: E402,F401  (registers every op)
from .kernels import cpu as _cpu_kernels  # noqa: E402,F401  (registers the CPU kernels)
from . import overloads  # noqa: E402,F401  (Variable's + - * / @)

ops.generate()
