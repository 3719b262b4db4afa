"""The layout table (docs/LAYOUT.md, linked from the README) is exact: every engine sub-package (nested ones, as
`bench_core/sweep/core/`, included) and module it names exists, and it names them all."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ROOT / "bench_core"


def _layout_rows() -> dict[str, str]:
    text = (ROOT / "docs" / "LAYOUT.md").read_text()
    section = text[text.index("## Layout"):]
    rows = re.findall(r"^\| `bench_core/([a-z_/]+)/` \| (.*) \|$", section, flags=re.M)
    return dict(rows)


def _packages() -> list[str]:
    """Every engine sub-package, nested ones as "sweep/core"."""
    return sorted(p.parent.relative_to(ENGINE).as_posix() for p in ENGINE.rglob("*/__init__.py"))


def _package_of(dotted: str, packages: list[str]) -> str:
    """The sub-package an import names: the deepest one its dotted path lies in (sweep.core.records: sweep/core)."""
    parts = dotted.split(".")
    return next("/".join(parts[:n]) for n in range(len(parts), 0, -1) if "/".join(parts[:n]) in packages)


def test_every_sub_package_and_module_is_in_the_readme_layout():
    rows = _layout_rows()
    packages = _packages()
    assert sorted(rows) == packages
    for package, text in rows.items():
        named = set(re.findall(r"`([a-z_]+)`", text))
        modules = {p.stem for p in (ENGINE / package).glob("*.py") if p.stem != "__init__"}
        assert named == modules, \
            f"bench_core/{package}: docs/LAYOUT.md names {sorted(named)}, the tree has {sorted(modules)}"


def test_every_sub_package_says_what_it_is():
    for init in ENGINE.glob("*/__init__.py"):
        doc = init.read_text().strip()
        assert doc.startswith('"""') and len(doc.splitlines()) == 1, f"{init}: a one-line docstring, nothing else"


def test_no_sub_package_imports_one_above_it():
    """The floors, bottom up, as docs/LAYOUT.md lists them (a package's sub-packages after it, in their own order);
    an import may only go down or sideways within a package."""
    order, packages = list(_layout_rows()), _packages()
    for package in order:
        for path in (ENGINE / package).glob("*.py"):
            for dotted in set(re.findall(r"^\s*(?:from|import) bench_core\.([a-z_.]+)", path.read_text(), flags=re.M)):
                other = _package_of(dotted, packages)
                assert order.index(other) <= order.index(package), \
                    f"{path.relative_to(ROOT)} imports bench_core.{other}, which stands above {package}"


def _test_module_name(path: Path) -> str:
    """The name pytest imports a test file under (its default import mode): the base name, or, in a folder with an
    __init__.py, the dotted path from the first folder above without one (tests/bench_core/sweep/core/test_spec.py
    is sweep.core.test_spec)."""
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts)


def test_no_two_test_files_share_a_name():
    """pytest imports each test file under its module name (`_test_module_name`): two of one name stop collection.
    A folder of tests that mirrors a package (tests/bench_core/sweep/) is a package, so its files may share a base
    name with one elsewhere."""
    names = [_test_module_name(p) for p in Path(__file__).parent.rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_each_test_file_in_an_engine_package_folder_names_one_of_its_modules():
    """tests/bench_core/<package path>/test_<module>.py tests bench_core/<package path>/<module>.py (sub-packages
    too: tests/bench_core/sweep/core/test_spec.py is bench_core/sweep/core/spec.py), so the mirror cannot rot when a
    module is renamed or moved. A module name two packages share is test_<package>_<module>.py: pytest imports test
    files outside a test package by their base name. A test of several modules lives in tests/bench_core/ itself."""
    tests = ROOT / "tests" / "bench_core"
    for path in tests.glob("*/**/test_*.py"):
        folder = path.parent.relative_to(tests)
        package, name = ENGINE / folder, path.stem.removeprefix("test_")
        where = path.relative_to(ROOT)
        assert (package / "__init__.py").exists(), f"{where}: there is no package bench_core/{folder}/"
        modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
        assert name in modules or name.removeprefix(folder.name + "_") in modules, \
            f"{where}: bench_core/{folder}/ has no module {name}.py (it has {sorted(modules)})"
