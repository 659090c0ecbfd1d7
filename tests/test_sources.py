"""Every fact's source is in the repository: code and docs cite docs/sources.md (by a section
that exists), never files outside the project."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted(p for folder in ("hwsim", "docs", "examples", "benchmarks", "tests")
               for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".md", ".trace")) + \
    [ROOT / "README.md"]
OUTSIDE = re.compile(r"FACTS\.md|shared/(?!models)|seeds/|notes/|calibration/|tosa-spec-digest"
                     r"|sme-numerics\.md|hmx-prm\.txt")


def _anchor(heading: str) -> str:
    """The anchor MkDocs gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


ANCHORS = {_anchor(line[3:]) for line in (ROOT / "docs" / "sources.md").read_text().splitlines()
           if line.startswith("## ")}


def test_sources_are_cited_inside_the_repository():
    outside, missing = [], []
    for path in FILES:
        if path == Path(__file__):
            continue
        text = path.read_text(errors="replace")
        name = str(path.relative_to(ROOT))
        outside += [f"{name}: {found}" for found in OUTSIDE.findall(text)]
        missing += [f"{name}: sources.md#{anchor}" for anchor in
                    re.findall(r"sources\.md#([\w-]+)", text) if anchor not in ANCHORS]
    assert not outside, f"citations of files outside the repository: {outside}"
    assert not missing, f"citations of sections docs/sources.md does not have: {missing}"
    assert len(FILES) > 100


def test_every_parameter_row_cites_a_source_the_page_has():
    import hwsim
    from hwsim.targets import machine_class
    for name in hwsim.targets():
        for row in machine_class(name).PARAMS:
            for anchor in re.findall(r"sources\.md#([\w-]+)", row.source):
                assert anchor in ANCHORS, f"{name}.{row.name}: sources.md#{anchor}"
    assert {"gap9", "gap9-quantisation", "gap9-gvsoc", "hmx", "m4-sme", "sme-numerics", "tosa",
            "documents", "mlperf-tiny-models"} <= ANCHORS
