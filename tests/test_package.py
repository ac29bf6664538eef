"""The package's shape: a cheap import, a headless core, and a complete public surface."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import ipyagent
import ipyagent.agentlib
import ipyagent.testing

PACKAGE = Path(ipyagent.__file__).parent
HEAVY = ("IPython", "ipykernel", "ipywidgets", "anywidget", "httpx", "traitlets", "comm")


def loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return {name.split(".")[0] for name in out.split()}


def test_importing_ipyagent_loads_no_ipython_widgets_or_http_client() -> None:
    loaded = loaded_after("import ipyagent; from ipyagent import Agent, tool")
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_the_core_runs_a_scripted_agent_without_ipython() -> None:
    loaded = loaded_after(
        "from ipyagent import Agent; from ipyagent.testing import ScriptedModel; "
        "assert Agent(model=ScriptedModel(['hi'])).run_sync('x').text == 'hi'"
    )
    assert not loaded & {"IPython", "ipykernel", "ipywidgets", "anywidget"}


def import_statements(path: Path) -> list[tuple[str, list[str]]]:
    """Each import of ``path`` as (module, names taken from it): ``import a.b`` is ("a.b", []);
    relative modules are resolved against the package. Imports under ``TYPE_CHECKING`` count."""
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = path.relative_to(PACKAGE.parent).with_suffix("").parts[: -node.level]
                base = ".".join((*package, base)) if base else ".".join(package)
            found.append((base, [alias.name for alias in node.names]))
    return found


def imports_of(path: Path) -> list[str]:
    """Every module ``path`` imports, relative imports resolved against its package."""
    return [module for module, _ in import_statements(path)]


def test_agentlib_never_imports_the_layers_above_it() -> None:
    forbidden = ("IPython", "ipykernel", "ipywidgets", "anywidget", "ipyagent.kernel", "ipyagent.widgets")
    offenders = [
        f"{path.name}: {name}"
        for path in (PACKAGE / "agentlib").rglob("*.py")
        for name in imports_of(path)
        if name.startswith(forbidden)
    ]
    assert offenders == []


def test_the_core_owns_the_model_types_and_reaches_providers_only_to_resolve_a_model() -> None:
    # Providers depend on the core (agentlib/model.py), not the other way round; a model id is
    # turned into a provider in the two registries.
    resolvers = {"endpoints.py", "local_models.py"}
    offenders = [
        f"{path.name}: {name}"
        for path in (PACKAGE / "agentlib").glob("*.py")
        for name in imports_of(path)
        if name.startswith("ipyagent.agentlib.providers") and path.name not in resolvers
    ]
    assert offenders == []


def imported_names(path: Path) -> list[str]:
    """Every module or name ``path`` imports, in full: ``from ..agentlib import events`` is
    ``ipyagent.agentlib.events``, ``from .view_state import Block`` is
    ``ipyagent.widgets.view_state.Block``."""
    found: list[str] = []
    for module, names in import_statements(path):
        found += [f"{module}.{name}" for name in names] if names else [module]
    return found


def within(name: str, modules: tuple[str, ...]) -> bool:
    return any(name == module or name.startswith(f"{module}.") for module in modules)


def test_widgets_never_import_the_kernel_layer() -> None:
    offenders = [
        f"{path.name}: {name}"
        for path in (PACKAGE / "widgets").rglob("*.py")
        for name in imported_names(path)
        if within(name, ("ipyagent.kernel",))
    ]
    assert offenders == []


def test_widgets_reach_the_core_only_through_events_view_state_and_actions() -> None:
    # A view is state in, user actions out: it may read the core's events (and the messages they
    # carry, for a resumed conversation's history); its view state and actions are its own
    # (widgets/view_state.py). Running an agent is a controller's job (ipyagent/controllers.py).
    allowed = ("ipyagent.widgets", "ipyagent.agentlib.events", "ipyagent.agentlib.messages")
    offenders = [
        f"{path.name}: {name}"
        for path in (PACKAGE / "widgets").rglob("*.py")
        for name in imported_names(path)
        if within(name, ("ipyagent",)) and not within(name, allowed)
    ]
    # One exception: ipyagent.widgets.ChatWidget, where users have always imported it, is the
    # chat view with its controller, a name the package re-exports on first use (and names for
    # the type checker); no view module imports it.
    assert offenders == ["__init__.py: ipyagent.controllers.ChatWidget"]
    from ipyagent import widgets

    outside = {name: module for name, module in widgets._WHERE.items() if not module.startswith(".")}
    assert outside == {"ChatWidget": "ipyagent.controllers"}


def test_providers_import_only_the_cores_types_and_errors() -> None:
    core = "ipyagent.agentlib"
    allowed = tuple(f"{core}.{name}" for name in ("model", "messages", "usage", "errors", "providers"))
    # Not types nor errors, and there today: secret masking for error messages and cassettes,
    # the retry wait the replay provider shares with the loop, and the atomic write of a cassette's
    # first record and the append of the others (the core's file-writing helpers). Listed so that
    # no other dependency on the core's machinery creeps in.
    known = {
        ("_http.py", f"{core}.redact"),
        ("replay.py", f"{core}.redact"),
        ("replay.py", f"{core}.retry"),
        ("replay.py", f"{core}.atomic"),
        ("replay.py", f"{core}.jsonl"),
    }
    found = {
        (path.name, name.rsplit(".", 1)[0])
        for path in (PACKAGE / "agentlib" / "providers").rglob("*.py")
        for name in imported_names(path)
        if within(name, ("ipyagent",)) and not within(name, allowed)
    }
    assert found == known


def public_names(module: object) -> set[str]:
    """Public names, less submodules (pytest may have imported ipyagent.testing_plugin, and its
    assertion rewriting adds names such as "@py_builtins" that are not identifiers)."""
    return {
        name
        for name, value in vars(module).items()
        if name.isidentifier() and not name.startswith("_") and type(value).__name__ != "module"
    }


def test_top_level_all_is_complete_and_importable() -> None:
    exported = set(ipyagent.__all__)
    for name in exported:
        assert getattr(ipyagent, name) is not None
    # Everything public the package defines or re-exports is in __all__, except its subpackages.
    assert public_names(ipyagent) - {"annotations"} - exported == set()


def test_agentlib_and_testing_all_are_complete() -> None:
    for module in (ipyagent.agentlib, ipyagent.testing):
        exported = set(module.__all__)
        for name in exported:
            assert hasattr(module, name), name
        submodules = {n for n, v in vars(module).items() if type(v).__name__ == "module"}
        assert public_names(module) - submodules - exported - {"annotations"} == set()


def test_modules_stay_small() -> None:
    big = {p.name: n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 800}
    assert big == {}


def test_load_ext_registers_the_magics_without_loading_the_agent_core() -> None:
    loaded = loaded_after(
        "from IPython.testing.globalipapp import start_ipython; ip = start_ipython(); "
        "ip.run_line_magic('load_ext', 'ipyagent'); "
        "assert 'agent' in ip.magics_manager.magics['cell']; "
        "assert 'ipyagent.agentlib' not in sys.modules, 'the core loaded at %load_ext'"
    )
    assert "ipyagent" in loaded
    assert not loaded & {"pydantic", "httpx", "ipywidgets", "anywidget"}


def test_no_two_test_modules_share_a_name() -> None:
    # The test folders are not packages (conftest imports by module name), so pytest imports each
    # test file by its basename: a second file of the same name stops the whole run's collection.
    tests = Path(__file__).parent
    names = [p.name for p in tests.rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
