"""Tools to check an op, shipped so users can check their own: ``check_grad``, ``check_forward``,
``Draw`` (the vocabulary of an op's test case), and ``check_function_grad`` for a composition of
ops (a layer's forward, a functional).

    from tape.testing import Draw, check_grad
    inputs, attrs = tape.registry.op_info("my_op").case(Draw.from_seed(0))
    check_grad("my_op", inputs, attrs)
"""
from .draw import Draw
from .function_grad import check_function_grad
from .gradcheck import check_forward, check_grad, grad_op_types, run_op, visible_values, vjp

__all__ = ["Draw", "check_forward", "check_function_grad", "check_grad", "grad_op_types",
           "run_op", "visible_values", "vjp"]
