"""An op's new output leaves its VarDesc's ``_name`` unset (a store less per output, eager and
lazy): it is named ``tmp_<n>`` when first asked, once, and a copy shares that name."""
import contextlib
import copy

import numpy as np
import pytest
from test_positional import unchecked  # noqa: F401  (the fixture the first test uses)

import tape
from tape import ops
from tape.var_desc import VarDesc


@pytest.mark.usefixtures("unchecked")
@pytest.mark.parametrize("lazy", [False, True])
def test_a_new_output_is_named_when_first_asked_and_keeps_the_name(lazy):
    x = tape.Variable(np.ones((2, 3), np.float32), stop_gradient=False)
    with tape.lazy() if lazy else contextlib.nullcontext():
        tape.reset_global_tape()
        outputs = [ops.tanh(x), *ops.split(x, num=3, axis=1)]
        for y in outputs:
            with pytest.raises(AttributeError):
                VarDesc._name.__get__(y.desc)      # (the slot itself: never stored)
        names = [y.name for y in outputs]
        assert all(n.startswith("tmp_") for n in names) and len(set(names)) == len(names)
        assert [y.name for y in outputs] == names
        assert copy.copy(outputs[0].desc).name == names[0]


def test_a_temporary_and_a_named_desc():
    temporary = VarDesc.temporary((2,), 5, True)
    assert temporary.name.startswith("tmp_") and temporary.name == temporary.name
    assert VarDesc("w", (2,)).name == "w"
    renamed = VarDesc.temporary((2,), 5, True)
    renamed.name = "given"
    assert renamed.name == "given"

