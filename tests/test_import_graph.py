"""No import cycle among the modules of `unbounded`.

The graph is built from the source (no import is run): every `import unbounded...` and
`from ... import ...` (relative ones resolved) anywhere in a module, including inside
functions, since a deferred import is still a dependency. Imports under `if TYPE_CHECKING:`
never run and are left out. An edge goes to the module named (a package's `__init__` when
the name is a package), not to the packages above it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "unbounded"


def module_files() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__)."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_package)
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return skipped


def import_graph(*, type_checking: bool = False) -> dict[str, set[str]]:
    """Module -> the `unbounded` modules it imports (with `type_checking`, those imported
    only under `if TYPE_CHECKING:` too)."""
    modules = module_files()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        skipped = set() if type_checking else _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    prefix = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    prefix = node.module or ""
                # `from package import module` names the module; else the package itself.
                targets = [
                    f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in modules else prefix
                    for alias in node.names
                ]
            for target in targets:
                resolved = resolve(target) if target.startswith("unbounded") else None
                if resolved is not None and resolved != name:
                    graph[name].add(resolved)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_sees_every_kind_of_import() -> None:
    graph = import_graph()
    assert "unbounded.session" in graph["unbounded.integrations.anthropic_client"]  # absolute
    assert "unbounded.cli.app" in graph["unbounded.cli.compact_command"]
    assert "unbounded.cli.compact_command" in graph["unbounded.cli"]  # from a package
    # Inside a function: `load_address` imports the loader when it reads a file.
    assert "unbounded.transcripts.loader" in graph["unbounded.addresses"]


def test_cycles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_among_the_modules() -> None:
    assert cycles(import_graph()) == []


def test_no_import_cycle_even_through_type_checking_imports() -> None:
    graph = import_graph(type_checking=True)
    assert "unbounded.compaction.micro" in graph["unbounded.turn"]  # seen under TYPE_CHECKING
    assert cycles(graph) == []


def test_nothing_the_session_rests_on_imports_it() -> None:
    """Every module `session.py` imports, directly or not (type-checking imports included),
    is below it: none of them imports `session.py` back."""
    graph = import_graph(type_checking=True)
    below: set[str] = set()
    todo = sorted(graph["unbounded.session"])
    while todo:
        module = todo.pop()
        if module not in below and module != "unbounded.session":
            below.add(module)
            todo.extend(sorted(graph[module]))
    assert "unbounded.engine" in below and "unbounded.compaction.decisions" in below
    assert sorted(m for m in below if "unbounded.session" in graph[m]) == []


def test_the_layers_point_down() -> None:
    """`model` (messages, replies, the provider protocol) rests on `errors` alone, and
    compaction uses what it needs from below, never the providers, the session or the
    integrations above it."""
    graph = import_graph()
    above_compaction = ("unbounded.providers", "unbounded.session", "unbounded.integrations")
    upward = [
        (module, target)
        for module, targets in graph.items()
        if module.startswith("unbounded.compaction")
        for target in targets
        if target.startswith((*above_compaction, "unbounded.cli"))
    ]
    assert upward == []
    outside = [
        (module, target)
        for module, targets in graph.items()
        if module == "unbounded.model" or module.startswith("unbounded.model.")
        for target in targets
        if not target.startswith(("unbounded.model.", "unbounded.errors"))
        and target != "unbounded.model"
    ]
    assert outside == []
