"""kernels/formulas.py: the scalar formulas both places compile, and what kernels/jit.py does
so that numba's on-disk cache follows them."""
import subprocess
import sys

import numpy as np

from tape.kernels import formulas, jit


def test_importing_the_formulas_imports_no_numba():
    code = "import sys, tape.kernels.formulas; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_a_cached_loop_is_stamped_with_the_formulas_file():
    """numba's cache checks only the file a function is defined in: jit.py adds the stamps of
    formulas.py and of itself, through an attribute numba does not document. If a numba
    release moves it, this fails (rather than a formula edit being silently ignored)."""
    def loop(a, out):
        for i in range(out.size):
            out[i] = formulas.relu_grad(a[i], a[i])

    dispatcher = jit._compile(loop, {})
    stamp = dispatcher._cache._cache_file._source_stamp
    assert stamp[1:] == (jit._stamp(formulas.__file__), jit._stamp(jit.__file__))
    a = np.array([-1.0, 2.0])
    out = np.empty(2)
    dispatcher(a, out)
    assert out.tolist() == [0.0, 2.0]


def test_the_formulas_run_as_python_too():
    """The CUDA simulator runs them as Python on numpy scalars."""
    assert formulas.relu_grad(np.float32(-1), np.float32(3)) == 0.0
    assert formulas.momentum(1.0, 0.5, 0.0, 0.1, 0.9, 0.0, 1.0, False) == (1.0 - 0.1 * 0.5, 0.5)
    x = np.arange(8.0, dtype=np.float32).reshape(1, 1, 2, 4)
    assert formulas.window_argmax(x, 0, 0, 0, 2, 1, 3, formulas.window_max(x, 0, 0, 0, 2, 1, 3)) \
        == (1, 2)
