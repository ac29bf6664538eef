"""The names a piece of code may touch, found from its ``ast`` (what the variables' checkpoint
copies before the agent's code runs)."""

from __future__ import annotations

from ipyagent.kernel.code_names import code_names


def test_assignments_of_every_form_bind_their_names() -> None:
    names = code_names(
        "a = 1\n"
        "b, (c, *d) = 1, (2, 3)\n"
        "e: int = 5\n"
        "f += 1\n"
        "for g, h in pairs: pass\n"
        "with open(p) as i, lock as (j, k): pass\n"
        "if (m := 3): pass\n"
        "del n\n"
        "try:\n    pass\nexcept Exception as o:\n    pass\n"
    )
    assert names.bound == {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "m", "n", "o"}
    assert names.augmented == {"f"}
    assert "f" in names.read, "x += 1 reads x too"


def test_imports_defs_and_classes_bind_their_top_level_names() -> None:
    names = code_names(
        "import os.path\nimport numpy as np\nfrom a.b import c, d as e\ndef f(x=default): y = 1\n"
        "class G(Base):\n    z = 2\n"
    )
    assert names.bound == {"os", "np", "c", "e", "f", "G"}
    assert {"default", "Base"} <= names.read
    assert not names.star_import
    assert code_names("from m import *").star_import


def test_names_local_to_functions_lambdas_and_comprehensions_are_not_bound() -> None:
    names = code_names(
        "def f(a):\n    b = a\n    return b\n"
        "g = lambda c: c + 1\n"
        "h = [d for d in range(3)]\n"
        "k = {e: v for e, v in items}\n"
    )
    assert names.bound == {"f", "g", "h", "k"}


def test_a_walrus_in_a_comprehension_binds_in_the_namespace() -> None:
    assert code_names("[last := x for x in xs]").bound == {"last"}


def test_global_in_a_function_defined_there_binds_the_module_name() -> None:
    assert code_names("def f():\n    global total\n    total = 1\n").bound == {"f", "total"}


def test_stores_into_an_object_name_its_root_as_mutated() -> None:
    names = code_names(
        "df['x'] = 1\nobj.a.b = 2\ndel cache['k']\nframe.loc[0, 'y'] += 1\nlst.append(3)\n"
        "df.drop(columns=['x'], inplace=True)\n"
    )
    assert names.stored_into == {"df", "obj", "cache", "frame"}
    assert {"lst", "df"} <= names.read, "a method call reads its object: a mutable one is copied"
    assert names.bound == set()


def test_reads_in_function_bodies_count_and_code_that_does_not_parse_names_nothing() -> None:
    assert "data" in code_names("def f():\n    data.append(1)\nf()").read
    assert code_names("def (:").mentioned == set()
