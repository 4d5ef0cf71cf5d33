"""Tools to check an op, shipped so users can check their own: ``check_grad``, ``check_forward``,
and ``Draw``, the vocabulary of an op's test case.

    from tape.testing import Draw, check_grad
    inputs, attrs = tape.registry.op_info("my_op").case(Draw.from_seed(0))
    check_grad("my_op", inputs, attrs)
"""
from .draw import Draw
from .gradcheck import check_forward, check_grad, grad_op_types, run_op, visible_values, vjp

__all__ = ["Draw", "check_forward", "check_grad", "grad_op_types", "run_op", "visible_values",
           "vjp"]
