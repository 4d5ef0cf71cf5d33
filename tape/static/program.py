"""Program: a ProgramDesc with the Scope holding its persistable values and its feed/fetch names;
plus what every static pass shares (holder variables, op roles, shape inference over a block)."""
from __future__ import annotations

import copy

from ..desc import FEED_MINIBATCH, FETCH_LIST, OpDesc, ProgramDesc, VarDesc
from ..dispatch import infer_shapes
from ..errors import InvalidArgumentError, NotFoundError
from ..registry import REGISTRY, op_info
from .scope import Scope

FEED_HOLDER, FETCH_HOLDER = "feed", "fetch"
EMPTY_VAR = "@EMPTY@"   # Paddle's name for an output nobody wants
HOLDER_OPS = frozenset(("feed", "fetch"))

# Paddle's OpRole bits (the extra attribute ``op_role`` of every op it writes)
FORWARD, BACKWARD, OPTIMIZE, LOSS = 0, 1, 2, 256
OP_ROLE = "op_role"


class Program:
    """A static program: ``desc`` (a ProgramDesc), ``scope`` (a Scope holding the values of its
    persistable variables), ``feed_names`` and ``fetch_names`` (its inputs and outputs, in
    ``col`` order). ``str(program)`` prints the ProgramDesc, one line per op.
    """

    __slots__ = ("desc", "scope", "feed_names", "fetch_names")

    def __init__(self, desc: ProgramDesc, scope: Scope | None = None, feed_names=None,
                 fetch_names=None):
        self.desc = desc
        self.scope = scope if scope is not None else Scope()
        if feed_names is None:
            feed_names = holder_names(desc, "feed")
        if fetch_names is None:
            fetch_names = holder_names(desc, "fetch")
        self.feed_names, self.fetch_names = list(feed_names), list(fetch_names)

    def to_dot(self) -> str:
        """The Graphviz source of this program's picture (``tape.static.visualize``)."""
        from .visualize import program_to_dot
        return program_to_dot(self)

    def global_block(self):
        return self.desc.global_block()

    def block(self, idx: int):
        return self.desc.block(idx)

    def serialize_to_string(self) -> bytes:
        return self.desc.serialize_to_string()

    def clone(self, for_test: bool = False) -> Program:
        """A copy of the program sharing its scope (so its parameters). ``for_test``, as
        Paddle's: without the backward and optimizer ops, and with ``is_test`` set (dropout
        drops nothing, batch norm normalises with its running statistics).

        >>> test_program = program.clone(for_test=True)
        """
        desc = copy_desc(self.desc)
        if for_test:
            block = desc.global_block()
            block.ops = [op for op in block.ops
                         if not op.attrs.get(OP_ROLE, FORWARD) & (BACKWARD | OPTIMIZE)]
            used = {n for op in block.ops for n in op.input_arg_names() + op.output_arg_names()}
            block.vars = {n: d for n, d in block.vars.items() if n in used or d.persistable}
            set_is_test(desc)
        return Program(desc, self.scope, self.feed_names, self.fetch_names)

    def __str__(self):
        return f"feed {self.feed_names} -> fetch {self.fetch_names}\n{self.desc}"

    def __repr__(self):
        block = self.desc.global_block()
        return (f"Program(feed={self.feed_names}, fetch={self.fetch_names}, "
                f"{len(block.ops)} ops, {len(block.vars)} vars)")


def desc_of(program) -> ProgramDesc:
    """The ProgramDesc of a Program, or the argument itself."""
    return program.desc if isinstance(program, Program) else program


def copy_desc(desc: ProgramDesc) -> ProgramDesc:
    """A copy whose blocks, VarDescs and OpDescs can be changed without touching ``desc``
    (attribute values, immutable, are shared)."""
    out = copy.copy(desc)
    out.blocks = [_copy_block(b) for b in desc.blocks]
    out.op_version_map = dict(desc.op_version_map)
    return out


def _copy_block(block):
    out = copy.copy(block)
    out.vars = {n: copy.copy(d) for n, d in block.vars.items()}
    out.ops = [copy_op(op) for op in block.ops]
    return out


def copy_op(op: OpDesc) -> OpDesc:
    out = copy.copy(op)
    out.inputs = {k: list(v) for k, v in op.inputs.items()}
    out.outputs = {k: list(v) for k, v in op.outputs.items()}
    out.attrs = dict(op.attrs)
    if op.attr_types is not None:
        out.attr_types = dict(op.attr_types)
    return out


def set_is_test(desc: ProgramDesc) -> None:
    """Set ``is_test`` on every op that has the attribute (Paddle's inference optimisation):
    dropout then drops nothing, batch norm uses its running statistics."""
    for block in desc.blocks:
        for op in block.ops:
            info = REGISTRY.get(op.type)
            if "is_test" in op.attrs or (info is not None and "is_test" in info.attrs):
                op.attrs["is_test"] = True


def holder_names(desc: ProgramDesc, op_type: str) -> list[str]:
    """The variables fed (``op_type="feed"``) or fetched (``"fetch"``) by block 0, in col order."""
    ops = sorted((op for op in desc.global_block().ops if op.type == op_type),
                 key=lambda op: op.attrs.get("col", 0))
    return [op.output("Out")[0] if op_type == "feed" else op.input("X")[0] for op in ops]


def ensure_holder(block, op_type: str) -> str:
    """Declare the ``feed`` or ``fetch`` holder variable in ``block`` if missing; its name."""
    name, kind = (FEED_HOLDER, FEED_MINIBATCH) if op_type == "feed" else (FETCH_HOLDER,
                                                                         FETCH_LIST)
    if name not in block.vars:
        block.add_var(VarDesc(name, persistable=True, type=kind))
    return name


def feed_op(name: str, col: int) -> OpDesc:
    return OpDesc("feed", {"X": [FEED_HOLDER]}, {"Out": [name]}, {"col": col, OP_ROLE: FORWARD})


def fetch_op(name: str, col: int) -> OpDesc:
    return OpDesc("fetch", {"X": [name]}, {"Out": [FETCH_HOLDER]}, {"col": col, OP_ROLE: FORWARD})


def next_col(block, op_type: str) -> int:
    return 1 + max((op.attrs.get("col", 0) for op in block.ops if op.type == op_type),
                   default=-1)


def new_op(type: str, inputs: dict, outputs: dict, attrs: dict, role: int) -> OpDesc:
    """An OpDesc of a registered op with every attribute of its proto (defaults filled)."""
    return OpDesc(type, inputs, outputs, {**op_info(type).check_attrs(attrs), OP_ROLE: role})


def proto_attrs(info, op: OpDesc) -> dict:
    """The attributes of ``op`` that its proto declares, checked and with defaults filled (Paddle
    programs also carry extra attributes, like op_role, that no kernel reads)."""
    attrs = op.attrs
    if any(name not in info.attrs for name in attrs):
        attrs = {k: v for k, v in attrs.items() if k in info.attrs}
    return info.checked_attrs(attrs)[0]


def infer_op_shapes(block, op: OpDesc) -> None:
    """Run ``op``'s registered shape rule over the VarDescs of ``block`` and set the shape and
    dtype of the VarDescs of its outputs (ops without a rule, and feed/fetch, are left alone)."""
    info = REGISTRY.get(op.type)
    if info is None or info.infer_shape is None or op.type in HOLDER_OPS:
        return
    ins = {}
    for slot, names in op.inputs.items():
        if names:
            ins[slot] = [declared(block, n, op) for n in names]
    for slot, specs in infer_shapes(info, ins, proto_attrs(info, op)).items():
        for name, (shape, dtype) in zip(op.outputs.get(slot, ()), specs):
            d = declared(block, name, op)
            d.shape, d.dtype = shape, dtype


def declared(block, name: str, op: OpDesc | None = None) -> VarDesc:
    d = block.vars.get(name)
    if d is None:
        where = f"op '{op.type}' uses " if op is not None else ""
        raise NotFoundError(f"{where}variable '{name}', which block {block.idx} does not declare")
    return d


def persistable_names(block) -> list[str]:
    """The persistable variables of ``block`` that hold values (not the feed/fetch holders),
    sorted by name: the order of Paddle's parameter files."""
    return sorted(n for n, d in block.vars.items()
                  if d.persistable and d.type not in (FEED_MINIBATCH, FETCH_LIST))


def append_checkpoint(program, file_path: str, names=None) -> OpDesc:
    """Append a ``save_combine`` op writing ``names`` (default: every persistable variable, i.e.
    the parameters and optimizer state) to ``file_path``, in sorted-name order; returns it, to be
    run as a target: ``executor.run(program, targets=[checkpoint])``."""
    block = desc_of(program).global_block()
    names = sorted(names) if names is not None else persistable_names(block)
    for n in names:
        if not declared(block, n).persistable:
            raise InvalidArgumentError(f"append_checkpoint: '{n}' is not persistable; a "
                                       f"checkpoint holds parameters and optimizer state")
    op = new_op("save_combine", {"X": names}, {}, {"file_path": file_path}, FORWARD)
    return block.append_op(op)
