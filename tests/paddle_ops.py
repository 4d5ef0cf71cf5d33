"""Live PaddlePaddle for the op tests: each case runs as one op of a legacy (ProgramDesc)
program, with its input gradients, all cases in one Paddle process."""
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

needs_paddle = pytest.mark.skipif(importlib.util.find_spec("paddle") is None,
                                  reason="paddlepaddle is not installed")

_SCRIPT = """
    import json, sys, numpy as np, paddle
    paddle.enable_static()
    spec, data, results = json.load(open(sys.argv[1])), np.load(sys.argv[2]), {}
    exe = paddle.static.Executor(paddle.CPUPlace())
    for name, (op_type, slots, outputs, attrs, wrt) in spec.items():
        main = paddle.static.Program()
        with paddle.static.program_guard(main, paddle.static.Program()):
            block, feed, ins = main.global_block(), {}, {}
            for slot, count in slots.items():   # count: of a duplicable slot's arrays
                keys = [slot] if count is None else [f"{slot}.{i}" for i in range(count)]
                holders = []
                for key in keys:
                    value = data[f"{name}/{key}"]
                    holders.append(paddle.static.data(f"{name}.{key}", value.shape,
                                                      str(value.dtype)))
                    holders[-1].stop_gradient = slot not in wrt
                    feed[holders[-1].name] = value
                ins[slot] = holders[0] if count is None else holders
            outs = {slot: block.create_var(name=f"{name}.{slot}") for slot in outputs}
            block.append_op(type=op_type, inputs=ins, outputs=outs, attrs=attrs)
            fetch = list(outs.values())
            if wrt:
                dout = data[f"{name}/dOut"]
                feed[f"{name}.dOut"] = dout
                # the cotangent is declared with the target's compile-time shape (sides given
                # by tensors are unknown there), which gradients() requires, and fed unchecked
                target = outs[outputs[0]]
                cotangent = paddle.static.data(f"{name}.dOut", target.shape, str(dout.dtype))
                cotangent.desc.set_need_check_feed(False)
                fetch += paddle.static.gradients([target], [ins[s] for s in wrt], [cotangent])
        values = exe.run(main, feed=feed, fetch_list=fetch)
        for key, value in zip(outputs + ["d" + s for s in wrt], values):
            if np.asarray(value).dtype != object:   # not an array: a var Paddle never wrote
                results[f"{name}/{key}"] = value
    np.savez(sys.argv[3], **results)
"""


def paddle_op_results(tmp, cases: dict) -> dict:
    """``{name: {output slot or "d<Slot>": array}}`` for ``cases`` = ``{name: (op type,
    {slot: array, or a list of arrays for a duplicable slot}, [output slots], attrs, [input
    slots to differentiate], cotangent of the first output slot or None)}``, computed by
    Paddle; ``tmp`` is a scratch directory (a pathlib.Path)."""
    arrays, spec = {}, {}
    for name, (op_type, inputs, outputs, attrs, wrt, dout) in cases.items():
        spec[name] = (op_type, {slot: len(v) if isinstance(v, list) else None
                                for slot, v in inputs.items()}, list(outputs), attrs, list(wrt))
        for slot, value in inputs.items():
            if isinstance(value, list):    # a duplicable slot
                arrays.update({f"{name}/{slot}.{i}": np.asarray(v) for i, v in enumerate(value)})
            else:
                arrays[f"{name}/{slot}"] = np.asarray(value)
        if wrt:
            arrays[f"{name}/dOut"] = dout
    (tmp / "spec.json").write_text(json.dumps(spec))
    np.savez(tmp / "in.npz", **arrays)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_SCRIPT), tmp / "spec.json",
                           tmp / "in.npz", tmp / "out.npz"], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "FLAGS_enable_pir_api": "0",
                                            "GLOG_minloglevel": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    out = np.load(tmp / "out.npz")
    return {name: {key.split("/", 1)[1]: out[key] for key in out.files
                   if key.startswith(name + "/")} for name in cases}
