"""Static mode: a recorded tape becomes a program that Prune, the Executor and PaddlePaddle run.

``trace`` (or ``to_program`` of a hand-recorded tape) turns ops into a Program; ``prune`` cuts
it to what targets need; ``Executor`` runs it with the eager tape's shape rules and kernels;
``append_backward`` and ``Optimizer.minimize`` add training to it; ``save_inference_model`` /
``load_inference_model`` write and read the files Paddle Inference serves.
"""
from . import control_flow, nn  # noqa: F401  (control_flow: the Executor's runners)
from .backward import append_backward, append_optimizer_ops
from .data_parallel import data_parallel
from .executor import Executor
from .inference import load_inference_model, save_inference_model
from .program import Program, append_checkpoint
from .prune import prune
from .scope import Scope, ScopeVar, global_scope
from .trace import to_program, trace
from .visualize import to_dot

__all__ = ["Executor", "Program", "Scope", "ScopeVar", "append_backward", "append_checkpoint",
           "append_optimizer_ops", "data_parallel", "global_scope", "load_inference_model",
           "nn", "prune", "save_inference_model", "to_dot", "to_program", "trace"]
