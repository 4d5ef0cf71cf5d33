"""What a grad maker's OpDescs mean, read in one place for every backward.

A grad maker works on names (static programs need them). It is run here on a forward OpDesc whose
names stand for slot positions (``i:X:0``, ``o:Out:0``), and the grad ops it returns become
GradSteps that say, for each grad-op slot, which forward value, output gradient or input gradient
it binds. The eager tape, static ``append_backward``, ``tape.testing`` and the CUDA test cases all
read grad makers through ``grad_steps``: none of them looks at a grad OpDesc itself.
"""
from __future__ import annotations

from .desc import GRAD_SUFFIX, OpDesc
from .errors import InvalidArgumentError
from .registry import OpInfo, op_info

# How a grad-op slot binds: a forward input/output value, only its shape (no-need-buffer), the
# gradient of a forward output (zeros if none arrived), the gradient of a forward output when
# one arrived (a dispensable slot), the gradient of a forward input, or a temporary between the
# grad ops of one forward op.
FWD_IN, FWD_OUT, META_IN, META_OUT, OUT_GRAD, OPT_OUT_GRAD, IN_GRAD, TEMP = range(8)


class GradStep:
    """One grad op: its OpInfo, how its slots bind, and its attributes when they differ from
    the forward op's (else None).

    ``ins`` and ``outs`` are ``((grad slot, duplicable, ((kind, forward slot or temporary
    name, index), ...)), ...)``, in the grad op's slot order; an output binds only IN_GRAD or
    TEMP.
    """

    __slots__ = ("info", "ins", "outs", "attrs")

    def __init__(self, info: OpInfo, ins: tuple, outs: tuple, attrs):
        self.info = info
        self.ins = ins
        self.outs = outs
        self.attrs = attrs

    def input_grad_slots(self) -> set:
        """Forward input slots this step writes gradients of."""
        return {fslot for _, _, bound in self.outs for kind, fslot, _ in bound if kind == IN_GRAD}

    def output_grad_slots(self) -> set:
        """Forward output slots whose gradients this step reads."""
        return {fslot for _, _, bound in self.ins for kind, fslot, _ in bound
                if kind in (OUT_GRAD, OPT_OUT_GRAD)}


_cache: dict = {}
_CACHE_LIMIT = 4096


def grad_steps(info: OpInfo, input_counts: dict, output_counts: dict, attrs: dict,
               attrs_key=None) -> tuple:
    """The GradSteps of forward op ``info`` with ``{slot: number of variables}`` bound in its
    input and output slots (slots with none are left out) and attributes ``attrs``.

    ``attrs_key`` (a hashable form of ``attrs``) makes the answer cached: per op and slot counts,
    and per attributes too for a grad maker whose ops depend on them.
    """
    if info.grad is None:
        return ()
    key = None
    if attrs_key is not None:
        key = (info, *input_counts.items(), "->", *output_counts.items())
        if info.grad.depends_on_attrs:
            key = (key, attrs_key)
        steps = _cache.get(key)
        if steps is not None:
            return steps
    steps = _make_steps(info, input_counts, output_counts, attrs)
    if key is not None:
        if len(_cache) >= _CACHE_LIMIT:
            _cache.clear()
        _cache[key] = steps
    return steps


def _make_steps(info: OpInfo, input_counts: dict, output_counts: dict, attrs: dict) -> tuple:
    refs, sym_in, sym_out = {}, {}, {}
    for kind, grad_kind, counts, sym in ((FWD_IN, IN_GRAD, input_counts, sym_in),
                                         (FWD_OUT, OUT_GRAD, output_counts, sym_out)):
        for slot, n in counts.items():
            if not n:
                continue
            names = [f"{'io'[kind]}:{slot}:{i}" for i in range(n)]
            sym[slot] = names
            for i, name in enumerate(names):
                refs[name] = (kind, slot, i)
                refs[name + GRAD_SUFFIX] = (grad_kind, slot, i)
    steps = []
    for gop in info.grad.make(OpDesc(info.type, sym_in, sym_out, attrs)):
        ginfo = op_info(gop.type)
        optional = {s.name for s in ginfo.inputs if s.dispensable}
        ins = tuple((s.name, s.duplicable,
                     tuple(_bind_input(info, gop, refs.get(n, (TEMP, n, 0)), s.name in optional)
                           for n in gop.inputs[s.name]))
                    for s in ginfo.inputs if s.name in gop.inputs)
        outs = []
        for s in ginfo.outputs:
            bound = []
            for n in gop.outputs.get(s.name, ()):
                ref = refs.get(n, (TEMP, n, 0))
                if ref[0] not in (IN_GRAD, TEMP):
                    raise InvalidArgumentError(f"{info.type}: grad op {gop.type} writes {n}, "
                                               f"which is not an input gradient")
                bound.append(ref)
            outs.append((s.name, s.duplicable, tuple(bound)))
        steps.append(GradStep(ginfo, ins, tuple(outs), None if gop.attrs == attrs else gop.attrs))
    return tuple(steps)


def _bind_input(info: OpInfo, gop: OpDesc, ref: tuple, optional: bool) -> tuple:
    """Refine a grad-op input binding: shape-only for a no-need-buffer slot, skippable for an
    optional output gradient; reading a forward slot the grad maker did not declare is an error
    (the tape did not keep it)."""
    kind, slot, i = ref
    if kind == OUT_GRAD and optional:
        return (OPT_OUT_GRAD, slot, i)
    if kind not in (FWD_IN, FWD_OUT):
        return ref
    if slot not in info.grad.reads:
        raise InvalidArgumentError(
            f"{info.type}: grad op {gop.type} reads forward slot '{slot}' that the grad maker "
            f"does not declare in reads={sorted(info.grad.reads)}")
    if slot in info.grad.no_need_buffer:
        return (META_IN if kind == FWD_IN else META_OUT, slot, i)
    return ref
