"""Which names a piece of Python code may touch in the namespace it runs in, found from its
``ast`` without running it: what :mod:`.variable_checkpoint` copies before the agent's code runs.

Over-approximate on purpose (a name read in a function body counts): a copy too many costs memory
under a cap, a copy too few loses the user's data on undo. What the ``ast`` cannot see — names
bound by ``exec`` or a star import — the checkpoint finds by comparing the namespace's bindings
before and after the call.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

__all__ = ["CodeNames", "code_names"]


@dataclass(frozen=True)
class CodeNames:
    """The names a piece of code mentions, at the top level of the namespace."""

    #: Bound or deleted at module level: assignment, ``del``, for / with / except targets,
    #: walrus, imports, ``def`` / ``class``, and ``global`` names in functions defined there.
    bound: frozenset[str] = frozenset()
    #: Read anywhere (function bodies too).
    read: frozenset[str] = frozenset()
    #: Targets of an augmented assignment (``x += ...``: a list is changed in place).
    augmented: frozenset[str] = frozenset()
    #: Roots of an attribute or item assigned or deleted (``df["x"] = ...``, ``obj.a = 1``).
    stored_into: frozenset[str] = frozenset()
    #: ``from m import *``: the names it binds are not known from the code.
    star_import: bool = False

    @property
    def mentioned(self) -> frozenset[str]:
        return self.bound | self.read | self.augmented | self.stored_into


class _Finder(ast.NodeVisitor):
    def __init__(self) -> None:
        self.bound: set[str] = set()
        self.read: set[str] = set()
        self.augmented: set[str] = set()
        self.stored_into: set[str] = set()
        self.star = False
        self.scope = 0  # > 0 inside a function, lambda or class body: its names are its own
        self.comprehension = 0  # > 0 inside a comprehension: its targets are its own

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.read.add(node.id)
        elif self.scope == 0 and self.comprehension == 0:
            self.bound.add(node.id)

    def _store_root(self, node: ast.Attribute | ast.Subscript) -> None:
        if not isinstance(node.ctx, ast.Load):
            root: ast.expr = node
            while isinstance(root, ast.Attribute | ast.Subscript):
                root = root.value
            if isinstance(root, ast.Name):
                self.stored_into.add(root.id)
        self.generic_visit(node)

    visit_Attribute = _store_root
    visit_Subscript = _store_root

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self.augmented.add(node.target.id)
            self.read.add(node.target.id)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        # A walrus in a comprehension binds in the enclosing scope.
        if self.scope == 0:
            self.bound.add(node.target.id)
        self.visit(node.value)

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        self.comprehension += 1
        self.generic_visit(node)
        self.comprehension -= 1

    visit_ListComp = _comprehension
    visit_SetComp = _comprehension
    visit_GeneratorExp = _comprehension
    visit_DictComp = _comprehension

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        if not isinstance(node, ast.Lambda):
            if self.scope == 0:
                self.bound.add(node.name)
            for decorator in node.decorator_list:
                self.visit(decorator)
            if node.returns is not None:
                self.visit(node.returns)
        for default in (*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)):
            self.visit(default)
        self.scope += 1
        body = node.body if isinstance(node.body, list) else [node.body]
        for statement in body:
            self.visit(statement)
        self.scope -= 1

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function
    visit_Lambda = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if self.scope == 0:
            self.bound.add(node.name)
        for expr in (*node.decorator_list, *node.bases, *(k.value for k in node.keywords)):
            self.visit(expr)
        self.scope += 1
        for statement in node.body:
            self.visit(statement)
        self.scope -= 1

    def visit_Global(self, node: ast.Global) -> None:
        self.bound.update(node.names)  # in a function defined here: it rebinds the module's name

    def _alias(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name == "*":
                self.star = True
            elif self.scope == 0:
                self.bound.add(alias.asname or alias.name.split(".")[0])

    visit_Import = _alias
    visit_ImportFrom = _alias

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name and self.scope == 0:
            self.bound.add(node.name)
        self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.name and self.scope == 0:
            self.bound.add(node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name and self.scope == 0:
            self.bound.add(node.name)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest and self.scope == 0:
            self.bound.add(node.rest)
        self.generic_visit(node)


def code_names(source: str) -> CodeNames:
    """The names ``source`` (Python, magics already transformed) binds, reads, augments and
    stores into at the namespace's top level; nothing for code that does not parse (it will not
    run either)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return CodeNames()
    finder = _Finder()
    finder.visit(tree)
    return CodeNames(
        bound=frozenset(finder.bound),
        read=frozenset(finder.read),
        augmented=frozenset(finder.augmented),
        stored_into=frozenset(finder.stored_into),
        star_import=finder.star,
    )
