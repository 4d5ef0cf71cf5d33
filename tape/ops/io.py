"""save_combine / load_combine: tensors to and from Paddle's combined file (``.pdiparams``).

The file holds no names (tape/params.py has the layout): ``save_combine`` writes its X
inputs in slot order; ``load_combine`` assigns the file's records, in order, to its Out outputs.
Paddle keeps both in the sorted-name order of the persistable variables.

load_combine's output shapes come from the file, not from inputs: its shape rule reads the
record headers (not the elements), every time (the file may change between two runs). A static
program declares the Out variables beforehand; when the shape-rule context carries those
VarDescs (``ctx.declared = {"Out": [VarDesc, ...]}``), the rule checks the file against them
record by record (count, dtype, dims; -1 matches any size), and if the file does not exist yet it
takes the declared shapes and leaves the missing file to the kernel.

The in-memory variants (save_to_memory, model_from_memory) are refused: Tape saves and loads
through files.
"""
import itertools
import os
import tempfile

from .. import dtypes, params
from ..attribute import BOOLEAN, STRING, Attr
from ..errors import NotFoundError, TapeError
from ..registry import Slot, register_op


class NonEmpty:
    """Value check: a non-empty string."""

    def __call__(self, v):
        return bool(v)

    def describe(self):
        return "a non-empty path"

    def invalid(self):
        return [""]


_FILE_PATH = Attr("file_path", STRING, None, "the file to write or read", check=NonEmpty())


def _no_memory_mode(ctx, attr: str) -> None:
    if ctx.attrs[attr]:
        raise ctx.error(f"attribute {attr}=True is not supported (Tape saves and loads through "
                        f"files); expected {attr}=False and the file in file_path")


def _save_combine_shape(ctx):
    _no_memory_mode(ctx, "save_to_memory")


def _load_combine_shape(ctx):
    _no_memory_mode(ctx, "model_from_memory")
    path = ctx.attrs["file_path"]
    declared = (ctx.declared or {}).get("Out")
    if declared is not None and not os.path.exists(path):
        specs = [(d.shape, d.dtype) for d in declared]
    else:
        expected = None if declared is None else [(d.name, d.shape, d.dtype) for d in declared]
        try:
            specs = params.read_headers(path, expected)
        except NotFoundError as e:
            raise NotFoundError(f"load_combine: {e}") from None
        except TapeError as e:
            raise ctx.error(str(e)) from None
    if ctx.attrs["load_as_fp16"]:
        specs = [(s, dtypes.FP16 if d in dtypes.FLOATING else d) for s, d in specs]
    ctx.set_outputs("Out", specs)


_case_names = itertools.count()
_case_dir = None


def _case_path(suffix: str = ".pdiparams") -> str:
    """A fresh file path in a private temporary directory (removed at exit), for test cases of
    ops that write or read files."""
    global _case_dir
    if _case_dir is None:
        _case_dir = tempfile.TemporaryDirectory(prefix="tape-io-")
    return os.path.join(_case_dir.name, f"case_{next(_case_names)}{suffix}")


def _draw_arrays(d) -> list:
    """1-4 tensors of rank 0-4 (size-1 and empty dims included), mostly floating, some int64."""
    arrays = []
    for _ in range(d.integer(1, 4)):
        shape = d.shape(0, 4, 0, 4)
        arrays.append(d.ints(shape, -5, 5) if d.integer(0, 3) == 0 else d.floats(shape))
    return arrays


def _save_combine_case(d):
    attrs = {"file_path": _case_path(), "save_as_fp16": d.boolean()}
    return {"X": _draw_arrays(d)}, attrs


def _load_combine_case(d):
    arrays = _draw_arrays(d)
    stored = [a.astype(d.choice(("float32", "float64"))) if a.dtype.kind == "f" else a
              for a in arrays]
    path = _case_path()
    params.save_combined(path, stored)
    return {}, {"file_path": path, "load_as_fp16": d.boolean()}


register_op(
    "save_combine",
    inputs=[Slot("X", "the tensors to save, in file order", duplicable=True)],
    outputs=[Slot("Y", "the bytes, with save_to_memory (not supported)", dispensable=True)],
    attrs=[_FILE_PATH,
           Attr("overwrite", BOOLEAN, True, "replace an existing file (else: an error)"),
           Attr("save_as_fp16", BOOLEAN, False, "store floating tensors as float16"),
           Attr("save_to_memory", BOOLEAN, False, "write the bytes to Y instead of a file")],
    infer_shape=_save_combine_shape, case=_save_combine_case,
    doc="Write X[0], X[1], ... to file_path as one combined file (Paddle's .pdiparams), "
        "atomically: temporary file, fsync, rename.")

register_op(
    "load_combine",
    outputs=[Slot("Out", "the loaded tensors, in file order", duplicable=True)],
    attrs=[_FILE_PATH,
           Attr("load_as_fp16", BOOLEAN, False, "convert floating tensors to float16"),
           Attr("model_from_memory", BOOLEAN, False, "file_path holds the bytes themselves")],
    infer_shape=_load_combine_shape, case=_load_combine_case, cache_shapes=False,
    doc="Out[i] = the i-th tensor of the combined file at file_path.")
