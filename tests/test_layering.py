"""One-way layering (DESIGN.md): ``layers``, ``optim`` -> the ``tape`` core <- ``kernels``, and
``tape.static`` and ``tape.onnx`` on top of the core.

Read from the import statements of the source tree (imports inside functions included, relative
ones resolved through pyproject's package-dir), so a violation is named by file and line and is
found even where no test happens to import the module.
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# source folder -> the package it is installed as
PACKAGES = {"tape": "tape", "kernels": "tape.kernels", "layers": "tape.layers",
            "optim": "tape.optim"}


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root)
    parts = [PACKAGES[rel.parts[0]], *rel.parts[1:-1]]
    return ".".join(parts if rel.stem == "__init__" else [*parts, rel.stem])


def imported_names(path: Path, root: Path = ROOT):
    """``(line, module)`` for every import in ``path``, relative ones made absolute. ``from M
    import a`` gives ``M`` and ``M.a``: ``a`` may be a submodule (``from tape import static``)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def violations(files, forbidden, root: Path = ROOT) -> list:
    found = set()
    for path in files:
        for line, name in imported_names(path, root):
            for target in forbidden:
                if name == target or name.startswith(target + "."):
                    found.add((path.relative_to(root).as_posix(), line, target))
    return [f"{path}:{line} imports {target}" for path, line, target in sorted(found)]


def sources(folder: str, pattern: str = "**/*.py", skip=()) -> list:
    files = [p for p in sorted((ROOT / folder).glob(pattern))
             if p.relative_to(ROOT).as_posix() not in skip]
    assert files, f"no sources found under {folder}/"
    return files


TAPE_INIT = "tape/__init__.py"  # exposes the whole package, static mode included
RULES = {
    # a kernel is an array function registered into the core: it never reads an op definition
    # (shared geometry and dtype sets live in the core) nor anything built on top of the core
    "kernels see no ops, static, layers or optim":
        (lambda: sources("kernels"), ("tape.ops", "tape.static", "tape.onnx", "tape.layers",
                                      "tape.optim")),
    # the core (tape/*.py and the op definitions) comes before static mode and the exporters
    "the core sees no tape.static, tape.onnx or tape.distributed":
        (lambda: sources("tape", "*.py", {TAPE_INIT}) + sources("tape/ops")
         + sources("tape/testing"), ("tape.static", "tape.onnx", "tape.distributed")),
    # an exporter reads programs, not kernels: geometry both need lives in the core
    "tape.onnx sees no kernels": (lambda: sources("tape/onnx"), ("tape.kernels",)),
    "tape sees no layers or optim":
        (lambda: sources("tape", skip={TAPE_INIT}), ("tape.layers", "tape.optim")),
}


@pytest.mark.parametrize("rule", RULES)
def test_imports_run_one_way(rule):
    files, forbidden = RULES[rule]
    found = violations(files(), forbidden)
    assert not found, "imports against the layering:\n" + "\n".join(found)


def test_the_check_sees_relative_and_nested_imports(tmp_path):
    kernel = tmp_path / "kernels" / "cpu" / "k.py"
    kernel.parent.mkdir(parents=True)
    kernel.write_text("from ...ops import conv\n"
                      "def f():\n    from tape import static\n"
                      "from ..jit import njit\nimport tape.optim.sgd\n")
    assert violations([kernel], ("tape.ops", "tape.static", "tape.optim"), tmp_path) == [
        "kernels/cpu/k.py:1 imports tape.ops", "kernels/cpu/k.py:3 imports tape.static",
        "kernels/cpu/k.py:5 imports tape.optim"]
