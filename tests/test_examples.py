"""The demo (``make demo``) trains the digits classifier to the accuracy the README promises."""
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("seed", [0, 2])
def test_digits_demo_reaches_96_percent(seed):
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "digits.py"),
                             "--seed", str(seed)], capture_output=True, text=True, check=True,
                            timeout=300)
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", result.stdout).group(1))
    assert accuracy >= 0.96
