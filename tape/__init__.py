"""Tape: an eager, define-by-run autodiff library on PaddlePaddle Fluid's operator model."""
# Order matters: ops register their protos, then kernels register against them; the
# operators and the static package use both.
from . import dtypes, ops  # noqa: I001,F401
from .kernels import cpu as _cpu_kernels  # noqa: F401
from . import checkpoint, distributed, overloads, static  # noqa: F401
from . import functional  # noqa: F401
from .desc import BlockDesc, OpDesc, ProgramDesc, VarDesc  # noqa: F401
from .errors import (  # noqa: F401
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionNotMetError,
    TapeError,
)
from .flags import get_flags, set_flags  # noqa: F401
from .memory import MemoryReport, memory_report  # noqa: F401
from .place import CPUPlace, CUDAPlace, default_place, set_default_place  # noqa: F401
from .random import seed  # noqa: F401
from .tape import (  # noqa: F401
    LazyTape,
    OpHandle,
    compute,
    Tape,
    get_global_tape,
    lazy,
    no_grad,
    reset_global_tape,
)
from .variable import Variable  # noqa: F401
from .function import Function, function  # noqa: F401
from .static.visualize import visualize  # noqa: F401
