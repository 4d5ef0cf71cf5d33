"""What ``dynamic.py`` checks before it times: a peer's first loss and gradients against
Tape's, and the row labels its tables share."""
from __future__ import annotations

import numpy as np
from dynet_peer import peer_name

RTOL = 1e-4
TAPE_LAZY = "Tape, lazy"
TAPE_LAZY_TRACED = "Tape, lazy, cells as tape.function"
LAZY_RECORDING = "Tape, lazy, recorded only (nothing computed)"
LAZY_EXECUTION = "Tape, lazy, executing forward + backward after recording"
DYNET_OFF, DYNET_ON = peer_name(False), peer_name(True)


def check_gradients(label, tape_params, grads, reference, reference_label) -> str:
    """``grads`` against ``reference``, each parameter within RTOL of its largest entry."""
    worst, wrong = 0.0, []
    for param, ours, theirs in zip(tape_params, grads, reference, strict=True):
        scale = max(float(np.abs(theirs).max()), 1e-30)
        difference = float(np.abs(ours - theirs).max()) / scale
        worst = max(worst, difference)
        if not np.allclose(ours, theirs, rtol=RTOL, atol=RTOL * scale):
            wrong.append(f"{param.name} (max |difference| {difference:.1e} of its largest)")
    if wrong:
        return f"{label}: WRONG gradients vs {reference_label}'s: " + ", ".join(wrong)
    return (f"{label}: gradients agree with {reference_label}'s on the first step "
            f"({len(tape_params)} parameters; largest difference {worst:.1e} of a parameter's "
            "largest gradient)")


def check_loss(label, loss, reference, reference_label) -> str:
    difference = abs(loss - reference) / max(abs(reference), 1e-30)
    verdict = "agrees with" if difference <= RTOL else "WRONG, differs from"
    return (f"{label}: first loss {loss:.6f} {verdict} {reference_label}'s {reference:.6f} "
            f"(relative difference {difference:.1e})")
