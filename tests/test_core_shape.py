"""The core's shape: every piece of state has one owner, and no module imports itself in a circle.

The core is ``ipyagent/agentlib``, providers included. Both rules are read from the source with
:mod:`ast`, so they hold for code that no test happens to run.

**Private names.** A name with one leading underscore belongs to the module, class or object
that defines it; nothing else reads it. In the core:

1. no ``x._name`` unless ``x`` is ``self`` or ``cls``: an attribute of another object (of
   another class, or another instance held in a variable) is reached through its public API;
2. no ``from module import _name`` of a name another module defines;
3. a private *module* (``providers/_http.py``) is imported only by its own package (its
   siblings), or from inside it.

Dunder names (``__name__``, ``__class__``) are not private. The exceptions, with why, are
:data:`PUBLIC_UNDERSCORE_NAMES`; there are no others.

**No cycles.** The core's import graph has no cycle. An import counts wherever it is written: a
function-local import is how a circle hides (it defers the failure, not the dependency). Only
imports under ``if TYPE_CHECKING:`` do not count: they never run. Importing ``a.b`` runs
``a/__init__.py`` first, but that implicit edge is not counted (every module would otherwise
depend on its package's ``__init__``, which re-exports it); an explicit ``from .. import X``
is.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import ipyagent

PACKAGE = Path(ipyagent.__file__).parent
CORE = PACKAGE / "agentlib"

#: Underscore names that are public API: a named tuple's methods carry an underscore only so
#: they cannot clash with field names (``urlsplit(...)._replace(netloc=...)`` in redact.py);
#: ``os._exit`` is how a forked child ends without running its parent's cleanup (sandbox).
PUBLIC_UNDERSCORE_NAMES = frozenset({"_replace", "_asdict", "_fields", "_field_defaults", "_make", "_exit"})


@dataclass(frozen=True)
class Module:
    name: str  # dotted: ipyagent.agentlib.run
    path: Path
    tree: ast.Module

    @property
    def package(self) -> str:
        """The package the module belongs to (a package's ``__init__`` belongs to itself)."""
        return self.name if self.path.name == "__init__.py" else self.name.rpartition(".")[0]


def modules(root: Path) -> dict[str, Module]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = Module(name, path, ast.parse(path.read_text(), filename=str(path)))
    return found


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of every node under an ``if TYPE_CHECKING:``."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
            (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
            or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
        ):
            skipped.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return skipped


def imports(module: Module) -> Iterator[tuple[int, str, str | None]]:
    """``(line, module imported from, name imported or None)`` for every import, resolved."""
    skipped = type_checking_only(module.tree)
    for node in ast.walk(module.tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.package.split(".")
                anchor = ".".join(package[: len(package) - (node.level - 1)])
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                yield node.lineno, base, alias.name


def imported_modules(module: Module, known: dict[str, Module]) -> Iterator[tuple[int, str]]:
    """Every module of ``known`` that ``module`` imports, with the line."""
    for line, base, name in imports(module):
        if name is not None and f"{base}.{name}" in known:
            yield line, f"{base}.{name}"  # from package import submodule
        elif base in known:
            yield line, base


def private_part(name: str) -> tuple[str, str] | None:
    """For a dotted module name with a private part (``a.b._c.d``): the package that owns the
    part (``a.b``) and the part itself (``a.b._c``). None when every part is public."""
    parts = name.split(".")
    for i, part in enumerate(parts):
        if is_private(part):
            return ".".join(parts[:i]), ".".join(parts[: i + 1])
    return None


def private_reaches(known: dict[str, Module]) -> list[str]:
    found = []
    for module in known.values():
        where = f"{module.path.relative_to(PACKAGE.parent)}"
        for node in ast.walk(module.tree):
            if (
                isinstance(node, ast.Attribute)
                and is_private(node.attr)
                and node.attr not in PUBLIC_UNDERSCORE_NAMES
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        for line, base, name in imports(module):
            targets = [base]
            if name is not None and f"{base}.{name}" in known:
                targets.append(f"{base}.{name}")  # a module imported by name
            elif name is not None and is_private(name) and base != module.name:
                found.append(f"{where}:{line}: from {base} import {name}")
            for target in targets:
                private = private_part(target)
                if private is None:
                    continue
                owner, root = private
                inside = module.name == root or module.name.startswith(f"{root}.")
                if module.package != owner and not inside:
                    found.append(f"{where}:{line}: imports the private module {target}")
    return sorted(found, key=lambda f: (f.split(":")[0], int(f.split(":")[1])))


def cycles(known: dict[str, Module]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    graph = {name: {t for _, t in imported_modules(m, known) if t != name} for name, m in known.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return components


def test_no_module_of_the_core_reads_another_ones_private_names() -> None:
    assert private_reaches(modules(CORE)) == []


def test_the_core_imports_no_module_in_a_circle() -> None:
    assert cycles(modules(CORE)) == []


# -- the checks themselves: each finds what it should -------------------------------------------


def fake(files: dict[str, str]) -> dict[str, Module]:
    """A package ``ipyagent.fake`` made of ``files`` (never written to disk)."""
    known = {}
    for relative, source in files.items():
        path = PACKAGE.parent / "ipyagent" / "fake" / relative
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        known[name] = Module(name, path, ast.parse(source))
    return known


def test_the_private_name_check_sees_attributes_imports_and_private_modules() -> None:
    known = fake(
        {
            "__init__.py": "",
            "a.py": "def f(self, b):\n    return self._x + b._y + b.__class__ + b._asdict()\n",
            "b.py": "from .a import _helper\nfrom .sub._impl import thing\nfrom .sub import _impl\n",
            "sub/__init__.py": "",
            "sub/_impl.py": "",
            "sub/c.py": "from ._impl import thing\nfrom . import _impl\n",
        },
    )
    found = [line.split(": ", 1)[1] for line in private_reaches(known)]
    assert found == [
        "b._y",
        "from ipyagent.fake.a import _helper",
        "imports the private module ipyagent.fake.sub._impl",
        "imports the private module ipyagent.fake.sub._impl",
    ]


def test_the_cycle_check_counts_local_imports_but_not_type_checking_ones() -> None:
    files = {
        "__init__.py": "",
        "a.py": "from . import b\n",
        "b.py": "def f():\n    from .c import g\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n",
    }
    assert cycles(fake(files)) == []
    files["c.py"] = "def g():\n    from .a import x\n"
    assert cycles(fake(files)) == [["ipyagent.fake.a", "ipyagent.fake.b", "ipyagent.fake.c"]]
