"""The public bug corpus of `benchmarks/public_bugs.py` is complete and its ground truth is valid.

Runs no program (the benchmark does): every bug folder has its buggy and fixed program, both mark
their edits with `# PORT:`, its meta file names a symptom of tfguard's vocabulary, a source and
a license, and the first-findings snapshot covers exactly the corpus.
"""

import json
from pathlib import Path

import pytest

from tfguard._findings import SYMPTOMS

CORPUS = Path(__file__).resolve().parents[2] / "benchmarks" / "public_bugs"
FOLDERS = sorted(p for p in CORPUS.iterdir() if p.is_dir())


def test_the_corpus_has_twenty_bugs_or_more():
    assert len(FOLDERS) >= 20, f"{len(FOLDERS)} bug folders in {CORPUS}"


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_a_bug_has_both_programs_and_a_valid_meta_file(folder):
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["name"] == folder.name
    assert meta["symptom"] in SYMPTOMS, f"{folder.name}: {meta['symptom']!r} is not a symptom id"
    for key in ("benchmark_url", "source_url", "license", "root_cause", "shows"):
        assert meta[key].strip(), f"{folder.name}: meta.json has an empty {key!r}"
    for program in ("buggy.py", "fixed.py"):
        text = (folder / program).read_text()
        assert "# PORT:" in text, f"{folder.name}/{program} marks no edit with '# PORT:'"
    assert (folder / "buggy.py").read_text() != (folder / "fixed.py").read_text()


def test_the_snapshot_covers_exactly_the_corpus():
    snapshot = json.loads((CORPUS / "first_findings.json").read_text())
    assert sorted(snapshot) == [p.name for p in FOLDERS]
    for name, entry in snapshot.items():
        for variant in ("buggy", "fixed"):
            first = entry[f"{variant}_first"]
            assert first == (entry[variant][0] if entry[variant] else None), name
