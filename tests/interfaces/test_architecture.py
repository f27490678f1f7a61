"""The package's architecture: imports point down the layers, no cycle, and every
module imports alone in a fresh interpreter (no registration by import order)."""
from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

import lcoding

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "lcoding"     # the source
# the folder holding the lcoding this run imports (site-packages after `pip install .`,
# the repository after an in-place build): the import tests run there
IMPORTED_HOME = pathlib.Path(lcoding.__file__).resolve().parents[1]

# layer of each top-level part; a module may import its own layer or a lower one
LAYERS = {"core": 0, "io": 1, "linear": 2, "local": 2, "methods": 3, "training": 4}
INTERFACES = 5     # liblinearutil, liblinear, commonutil, cli, demo, legacy, sklearn, ...


def module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules():
    return sorted(module_name(p) for p in PACKAGE.rglob("*.py"))


def imports_of(path: pathlib.Path) -> set:
    """Every lcoding module imported anywhere in the file (also inside functions)."""
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] == "lcoding":
            out.add(node.module)
            for alias in node.names:     # "from lcoding.io import reader" names a module
                out.add(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "lcoding")
    return out


def graph():
    modules = set(all_modules())
    edges = {}
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        edges[name] = {m for m in imports_of(path) if m in modules and m != name}
    return edges


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1], INTERFACES) if len(parts) > 1 else INTERFACES


def test_import_graph_has_no_cycle():
    edges = graph()
    state = {}

    def visit(node, stack):
        state[node] = 1
        for nxt in edges.get(node, ()):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if state.get(nxt) is None:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])


def test_imports_point_down_the_layers():
    bad = [f"{a} ({layer(a)}) imports {b} ({layer(b)})"
           for a, targets in graph().items() for b in targets
           if layer(b) > layer(a) and not b == "lcoding"]
    assert not bad, "\n".join(bad)


def test_the_shared_cycle_tool_agrees():
    tool = PACKAGE.parents[1] / "shared" / "tools" / "import_cycles.py"
    if not tool.exists():
        pytest.skip("../shared/tools/import_cycles.py is not beside the repository")
    out = subprocess.run([sys.executable, str(tool)], cwd=PACKAGE.parent, capture_output=True,
                         text=True, timeout=60)
    assert "0 import cycle(s)" in out.stdout, out.stdout + out.stderr


@pytest.mark.slow
def test_every_module_imports_alone():
    # one fresh interpreter per module would take ~30 s; one interpreter that imports
    # each module in a clean sys.modules state is the same test, far cheaper -- still
    # 4-7 s of the quick subset's minute, so the full suite runs it (the static layer
    # and cycle checks above stay quick)
    script = (
        "import importlib, sys\n"
        "base = set(sys.modules)\n"
        "failed = []\n"
        f"for name in {all_modules()!r}:\n"
        "    if name.endswith('__main__'):\n"
        "        continue\n"
        "    for mod in [m for m in sys.modules if m not in base and m.startswith('lcoding')]:\n"
        "        del sys.modules[mod]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as err:\n"
        "        failed.append(f'{name}: {type(err).__name__}: {err}')\n"
        "print('\\n'.join(failed))\n"
        "sys.exit(1 if failed else 0)\n")
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, cwd=IMPORTED_HOME)
    assert res.returncode == 0, res.stdout + res.stderr


def test_no_registration_tables_filled_on_import():
    """No module writes into another module's table at import time."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:            # module level only
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign):
                targets = [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, (ast.Attribute, ast.Name)):
                    offenders.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                    and isinstance(node.value.func, ast.Attribute) \
                    and node.value.func.attr in ("update", "setdefault", "append", "add"):
                offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders, offenders


def test_an_unbuilt_source_tree_says_so_in_one_line(tmp_path):
    """Python started in a checkout whose kernels are not compiled imports that
    checkout, not the installed package: the error says what to do."""
    import shutil
    shutil.copytree(PACKAGE, tmp_path / "lcoding",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    res = subprocess.run([sys.executable, "-c", "import lcoding.liblinearutil"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: lcoding: the source tree") and "not built" in last
    assert "build_ext --inplace" in last


@pytest.mark.slow
def test_every_module_imports_alone_in_a_fresh_interpreter():
    """The strict form of the test above: one new interpreter per module."""
    from concurrent.futures import ThreadPoolExecutor

    def run(name):
        res = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True,
                             text=True, timeout=120, cwd=IMPORTED_HOME)
        return name, res.returncode, res.stderr.strip().splitlines()[-1:]

    names = [n for n in all_modules() if not n.endswith("__main__")]
    with ThreadPoolExecutor(max_workers=2) as pool:
        failed = [r for r in pool.map(run, names) if r[1] != 0]
    assert not failed, failed
