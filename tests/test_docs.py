"""Every raw file and figure the docs name exists: a figure without its raw output is not published."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NAMED = re.compile(r"docs/(?:data|figures|screenshots)/[\w.\-]+\.(?:json|log|txt|png|csv)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)]+)\)")
TEMPLATE = re.compile(r"_run[A-Z]\.")  # a command template's output name (record.sh ..._runN.txt), not a claim


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_named_file_and_image_exists(doc):
    text = doc.read_text()
    named = {ROOT / m for m in NAMED.findall(text) if not TEMPLATE.search(m)} | {
        doc.parent / m for m in IMAGE.findall(text)}
    missing = sorted(str(p.relative_to(ROOT)) for p in named if not p.exists())
    assert not missing, f"{doc.name} names files that are not in the repo: {missing}"
