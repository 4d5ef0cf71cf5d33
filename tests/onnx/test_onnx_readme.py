"""The README's list of ops that export to ONNX is the converter table's."""
import pathlib
import re

import pytest

pytest.importorskip("onnx")

from tape.onnx import exportable_ops  # noqa: E402

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_lists_exactly_the_ops_that_export():
    listed = re.search(r"<!-- onnx-ops -->(.*?)<!-- /onnx-ops -->", README.read_text(), re.S)
    assert listed, "README.md lost its <!-- onnx-ops --> list"
    names = re.findall(r"`([a-z0-9_]+)`", listed.group(1))
    assert names == exportable_ops(), \
        "README.md's ONNX op list differs from tape/onnx/ops: write it as " + \
        ", ".join(f"`{op}`" for op in exportable_ops())
