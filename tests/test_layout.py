"""The layout table (docs/LAYOUT.md, linked from the README) is exact: every engine sub-package and module it names
exists, and it names them all."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ROOT / "bench_core"


def _layout_rows() -> dict[str, str]:
    text = (ROOT / "docs" / "LAYOUT.md").read_text()
    section = text[text.index("## Layout"):]
    rows = re.findall(r"^\| `bench_core/([a-z_]+)/` \| (.*) \|$", section, flags=re.M)
    return dict(rows)


def test_every_sub_package_and_module_is_in_the_readme_layout():
    rows = _layout_rows()
    packages = sorted(p.name for p in ENGINE.iterdir() if (p / "__init__.py").exists())
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
    """The floors, bottom up, as docs/LAYOUT.md lists them; an import may only go down or sideways within a package."""
    order = list(_layout_rows())
    for package in order:
        for path in (ENGINE / package).glob("*.py"):
            for other in set(re.findall(r"^\s*(?:from|import) bench_core\.([a-z_]+)", path.read_text(), flags=re.M)):
                assert order.index(other) <= order.index(package), \
                    f"{path.relative_to(ROOT)} imports bench_core.{other}, which stands above {package}"


def test_no_two_test_files_share_a_name():
    """pytest imports test files by their base name (no packages under tests/): two of one name stop collection."""
    names = [p.name for p in Path(__file__).parent.rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_each_test_file_in_an_engine_package_folder_names_one_of_its_modules():
    """tests/bench_core/<package>/test_<module>.py tests bench_core/<package>/<module>.py, so the mirror cannot rot
    when a module is renamed or moved. A module name two packages share is test_<package>_<module>.py: pytest imports
    test files by their base name."""
    for path in (ROOT / "tests" / "bench_core").glob("*/test_*.py"):
        package, name = path.parent.name, path.stem.removeprefix("test_")
        where = path.relative_to(ROOT)
        assert (ENGINE / package / "__init__.py").exists(), f"{where}: there is no package bench_core/{package}/"
        modules = {p.stem for p in (ENGINE / package).glob("*.py") if p.stem != "__init__"}
        assert name in modules or name.removeprefix(package + "_") in modules, \
            f"{where}: bench_core/{package}/ has no module {name}.py (it has {sorted(modules)})"
