"""``dynamic.py``'s 100-op chain (``per_op.py``'s): eager and lazy Tape, lazy recording alone
and lazy execution alone, beside PyTorch and DyNet, µs per op."""
from __future__ import annotations

import numpy as np
import per_op
from dynamic_checks import (
    DYNET_OFF,
    DYNET_ON,
    LAZY_EXECUTION,
    LAZY_RECORDING,
    TAPE_LAZY,
    check_loss,
)
from harness import TAPE, TORCH, OtherLoad, measure, print_notes, print_table


def run_chain(tape, torch, peers, options, notes) -> dict:
    """``per_op.py``'s chain, forward (with its value) and forward + backward, µs per op;
    ``{(library, "forward" or "backward"): µs per op}``. Lazy Tape's chain is also timed
    recorded only: the ops' record-time work, and freeing them unrun when the block ends."""
    functions, gradients, checks = {}, {}, []
    if tape is not None:
        chain, forward_backward, _ = per_op.tape_functions(tape)
        functions[TAPE] = (lambda: chain().value(), forward_backward)
        functions[TAPE_LAZY] = per_op.tape_lazy_functions(tape)[:2]
        functions[LAZY_RECORDING] = (lambda: _record_lazily(tape, chain), None)
        functions[LAZY_EXECUTION] = (None, LazyExecution(tape))
        expected_sum = float(chain().value())
    if torch is not None:
        functions[TORCH] = per_op.torch_functions(torch)[:2]
    for peer in peers if tape is not None else ():
        total, (gradient,) = peer.build("chain", [per_op.x_np], [], None)
        checks.append(check_loss(f"{peer.name}: the chain's sum", total, expected_sum,
                                 "Tape"))
        gradients[peer.name] = gradient
        functions[peer.name] = (peer.steps("forward"), peer.steps("step"))
    for lib, (_, forward_backward) in functions.items():
        if lib not in gradients and forward_backward is not None:
            gradients[lib] = np.asarray(forward_backward())
    checks.append(per_op.check_gradients(gradients))
    figures = {}
    with OtherLoad(peer.pid for peer in peers) as load:
        for kind, column in (("forward", 0), ("backward", 1)):
            seconds = measure({lib: fns[column] for lib, fns in functions.items()
                               if fns[column] is not None}, **options)
            figures.update({(lib, kind): t * 1e6 / per_op.OPS for lib, t in seconds.items()})
    for kind, title, extra in (("forward", "forward, value computed", [LAZY_RECORDING]),
                               ("backward", "forward + backward to the leaf", [LAZY_EXECUTION])):
        rows = [(lib, figures.get((lib, kind)), notes.get(lib) or notes.get(TAPE))
                for lib in [TORCH, TAPE, TAPE_LAZY, *extra, DYNET_OFF, DYNET_ON]]
        print_table(f"{per_op.OPS}-op chain on float32[{per_op.SIZE}]: {title}", "µs per op",
                    rows, baselines=(TORCH, TAPE_LAZY), digits=2)
    print()
    print_notes(checks + [load.note()])
    return figures


def _record_lazily(tape, chain) -> None:
    with tape.lazy():
        chain()


class LazyExecution:
    """Lazy Tape's chain executed after recording: from ``loss.backward()`` on a recorded lazy
    chain until the leaf's gradient is in place. Each call records the chain untimed (issue
    12 sets recording its own target), then the timed part runs; ``measure`` asks
    ``seconds_per_call`` for the timed part alone. Called, it returns the gradient."""

    def __init__(self, tape):
        self.tape = tape
        self.x = tape.Variable(per_op.x_np.copy(), stop_gradient=False)

    def _recorded(self):
        tape = self.tape
        tape.reset_global_tape()
        self.x.grad = None
        y = self.x
        for _ in range(per_op.PAIRS):   # (per_op.py's chain)
            y = y * per_op.SCALE
            y = y + per_op.SHIFT
        return tape.ops.reduce_sum(y, reduce_all=True)

    def __call__(self):
        with self.tape.lazy():
            self._recorded().backward()
            return self.x.grad.value()

    def seconds_per_call(self, number: int, clock) -> float:
        total = 0.0
        for _ in range(number):
            with self.tape.lazy():
                loss = self._recorded()
                start = clock()
                loss.backward()
                self.x.grad.value()
                total += clock() - start
        return total / number
