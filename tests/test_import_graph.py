"""The package's import graph has no cycle: each module imports only modules below it.

The graph is built statically from the source (ast), so an import inside a function or under
`if TYPE_CHECKING:` counts the same as one at the top: hiding an import in a function does not
break a cycle, it only defers it.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "changefeed"


def module_files(src: Path = SRC, package: str = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name, for its __init__.py)."""
    mods: dict[str, Path] = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name of a (possibly relative) import seen in `module`."""
    if level == 0:
        return target or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the package modules it imports anywhere in its text (top level, functions, classes)."""

    def known(name: str) -> str | None:
        # `import a.b.c` of a name that is not a module (rare) falls back to its nearest module.
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                        if hit := known(alias.name):
                            edges.add(hit)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, is_package, node.level, node.module)
                if base != PACKAGE and not base.startswith(PACKAGE + "."):
                    continue
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub in mods:  # `from pkg import submodule`
                        edges.add(sub)
                    elif hit := known(base):
                        edges.add(hit)
        edges.discard(mod)
        graph[mod] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def cycle_path(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """One cycle through the first module of a strongly connected component, as the path of imports."""
    start, inside = comp[0], set(comp)
    prev: dict[str, str] = {}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph[v] & inside):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return [*reversed(path), start]
            if w not in prev:
                prev[w] = v
                todo.append(w)
    raise AssertionError(f"no cycle through {start}")


def test_graph_sees_relative_and_function_level_imports(tmp_path: Path) -> None:
    """The graph builder itself finds a cycle made of a relative import and one hidden in a function."""
    pkg = tmp_path / PACKAGE / "sub"
    pkg.mkdir(parents=True)
    (tmp_path / PACKAGE / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import f\n")
    (pkg / "b.py").write_text("def f():\n    from ..sub import a\n    return a\n")
    (pkg / "c.py").write_text("from changefeed.sub.a import f\n")
    graph = import_graph(module_files(tmp_path))
    assert graph["changefeed.sub.c"] == {"changefeed.sub.a"}
    assert cycles(graph) == [["changefeed.sub.a", "changefeed.sub.b"]]
    assert cycle_path(graph, cycles(graph)[0]) == ["changefeed.sub.a", "changefeed.sub.b", "changefeed.sub.a"]


def test_no_import_cycles() -> None:
    mods = module_files()
    assert "changefeed.spark.apply" in mods and len(mods) > 50
    graph = import_graph(mods)
    found = cycles(graph)
    assert not found, "import cycles in src/changefeed (a -> b: a imports b):\n" + "\n".join(
        f"{' -> '.join(cycle_path(graph, c))}  (modules in the cycle: {', '.join(c)})" for c in found)


def print_layers(package: str) -> None:
    """Each module of `package` and the modules of `package` it imports: the layers as this test sees them."""
    graph = import_graph(module_files())
    for m in sorted(x for x in graph if x == package or x.startswith(package + ".")):
        below = sorted(y.removeprefix(package + ".") for y in graph[m] if y.startswith(package + "."))
        print(m.removeprefix(package + ".") if m != package else "(__init__)", "->", below)


if __name__ == "__main__":  # python tests/test_import_graph.py changefeed.spark.apply
    import sys

    print_layers(sys.argv[1] if len(sys.argv) > 1 else PACKAGE)
