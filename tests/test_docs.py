"""The documentation site agrees with the code: every page is in the nav, every results table
renders from benchmarks/results, the README stays short and its links resolve, and the
contributor's guide runs as written (CI also builds the site with ``mkdocs build --strict``)."""

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from hwsim.schedule import LOWERINGS
from hwsim.targets import MACHINES

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _tables():
    spec = importlib.util.spec_from_file_location("tables", ROOT / "benchmarks" / "tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    nav = re.findall(r"^\s+- [^:]+: ([\w./-]+\.md)$", (ROOT / "mkdocs.yml").read_text(), re.M)
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages


def test_every_results_table_renders_and_is_used():
    tables = _tables()
    used = set()
    for page in DOCS.rglob("*.md"):
        text = page.read_text()
        used |= set(tables.MARKER.findall(text))
        rendered = tables.render(text, page.name)
        assert not tables.MARKER.search(rendered)
    assert used == set(tables.TABLES)


def test_a_results_row_renders_with_its_units(tmp_path, monkeypatch):
    tables = _tables()
    row = {"target": "gap9", "model": "kws", "mode": "exact", "macs": 2656768,
           "cycles": 152405, "simulated_ms": 0.41190540, "layers": 26, "bit_exact": True}
    (tmp_path / "models.json").write_text(json.dumps({"rows": [row]}))
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    assert tables.render("<!-- results: models-gap9 -->").splitlines()[2] == \
        "| kws | exact | 2.66 M | 152,405 | 412 us | 26 | yes |"


def test_an_unknown_table_or_a_missing_results_file_is_refused(tmp_path, monkeypatch):
    tables = _tables()
    with pytest.raises(ValueError, match="page.md: unknown results table 'nope'"):
        tables.render("<!-- results: nope -->", "page.md")
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    with pytest.raises(ValueError, match="page.md: results table 'gemm': FileNotFoundError"):
        tables.render("<!-- results: gemm -->", "page.md")


def test_the_readme_is_short_and_its_links_resolve():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    links = re.findall(r"\]\(((?:docs|examples)/[^)#]+)", readme)
    assert links and all((ROOT / link).exists() for link in links), links


def _blocks(page: str, title: str) -> str:
    text = (DOCS / page).read_text()
    return "\n\n".join(re.findall(rf'```python title="{re.escape(title)}"\n(.*?)```', text, re.S))


def test_the_adding_a_machine_guide_runs(tmp_path, monkeypatch):
    for module in ("dot_machine", "dot_lowering"):
        (tmp_path / f"{module}.py").write_text(_blocks("adding-a-machine.md", f"{module}.py"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(MACHINES, "dot", "")          # the session registers them; undone after
    monkeypatch.setitem(LOWERINGS, "dot", "")
    try:
        code = _blocks("adding-a-machine.md", "session.py")
        exec(compile(code, "docs/adding-a-machine.md", "exec"), {})
    finally:
        for module in ("dot_machine", "dot_lowering"):
            sys.modules.pop(module, None)
    assert (tmp_path / "mm.trace").read_text().count("\ndot ") == 32
