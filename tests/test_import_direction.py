"""Imports point one way (README, Architecture): no optalloc module imports one that imports it
back, directly or through others, whether at the top of the file or inside a function; and the
same holds between optalloc's top-level packages and modules (optalloc.state, optalloc.turn,
...). Imports under `if TYPE_CHECKING:` count too: a type annotation is a dependency."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import optalloc

ROOT = Path(optalloc.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = ("optalloc", *p.relative_to(ROOT).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _imports(path: Path, known: set[str]) -> set[str]:
    found: set[str] = set()

    class Visit(ast.NodeVisitor):
        def visit_Import(self, node: ast.Import) -> None:
            found.update(a.name for a in node.names if a.name in known)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.module in known:
                found.add(node.module)
            for a in node.names:
                if f"{node.module}.{a.name}" in known:
                    found.add(f"{node.module}.{a.name}")

    Visit().visit(ast.parse(path.read_text()))
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _graphs() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    mods = _modules()
    known = set(mods)
    # importing a module runs its parent packages' __init__: those edges are not imports
    modules = {m: {w for w in _imports(p, known) if w != m and not m.startswith(w + ".")}
               for m, p in mods.items()}
    top = defaultdict(set)
    for m, ws in modules.items():
        for w in ws:
            a, b = ".".join(m.split(".")[:2]), ".".join(w.split(".")[:2])
            if a != b:
                top[a].add(b)
    return modules, dict(top)


def test_no_module_imports_one_that_imports_it_back():
    modules, _ = _graphs()
    assert len(modules) > 150  # the whole package was read
    assert _cycles(modules) == []


def test_no_top_level_package_imports_one_that_imports_it_back():
    _, top = _graphs()
    assert {"optalloc.state", "optalloc.turn", "optalloc.cycle", "optalloc.sim"} <= top.keys()
    assert _cycles(top) == []


def test_the_checker_sees_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
