"""The README is a front page that links into docs/, and the API reference covers the public API.

`make test` builds the docs site with `mkdocs build --strict` before the
tests, which fails on a broken link or reference inside docs/; these tests
check what that build does not see: the README itself, and that the
reference page names every public name of `tfguard.__all__`.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import tfguard

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
REFERENCE = ROOT / "docs" / "reference.md"
DOCTEST_BLOCKS = ROOT / "docs" / "extensions" / "doctest_blocks.py"
MAX_README_LINES = 200

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(markdown: str) -> list[str]:
    """The targets of the Markdown links and images in `markdown` that point into the repository.

    Example:

    >>> relative_links("[a](docs/x.md#y) ![b](p.png) [c](https://e.org) [d](#top)")
    ['docs/x.md#y', 'p.png']
    """
    targets = _LINK.findall(markdown)
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def test_the_readme_is_a_front_page_of_at_most_200_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines, expected at most {MAX_README_LINES}: move the detail to "
        "a page under docs/ and link it")


def test_the_readme_shows_the_two_commands():
    readme = README.read_text(encoding="utf-8")
    missing = [command for command in ("make demo", "make test") if command not in readme]
    assert not missing, f"README.md does not show {missing}; a newcomer starts with these two commands"


def test_every_relative_link_of_the_readme_resolves_to_a_file():
    links = relative_links(README.read_text(encoding="utf-8"))
    assert any(link.startswith("docs/") for link in links), "README.md links nothing under docs/"
    broken = [link for link in links if not (ROOT / link.split("#")[0]).is_file()]
    assert not broken, (f"README.md links to files that do not exist: {broken}; "
                        "link a file relative to the repository root")


def test_the_api_reference_documents_every_public_name():
    page = REFERENCE.read_text(encoding="utf-8")
    documented = {line.split()[1].rsplit(".", 1)[-1] for line in page.splitlines()
                  if line.startswith("::: ")}
    missing = sorted(set(tfguard.__all__) - documented - {"__version__"})
    assert not missing, (f"docs/reference.md has no `::: module.NAME` block for {missing}, which "
                         "tfguard.__all__ lists: add one under the module that defines each")
    assert "tfguard.__version__" in page


def test_the_docs_render_a_docstrings_doctest_lines_as_one_code_block():
    spec = importlib.util.spec_from_file_location("doctest_blocks", DOCTEST_BLOCKS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the griffe extension mkdocs.yml names
    docstring = "Sums.\n\nExample:\n\n>>> [1, 2][:1]\n[1]\n\nArgs:\n    x: a list."
    assert module.fence_doctests(docstring) == (
        "Sums.\n\nExample:\n\n```pycon\n>>> [1, 2][:1]\n[1]\n```\n\nArgs:\n    x: a list.")
    fenced = "```python\n>>> 1\n```"
    assert module.fence_doctests(fenced) == fenced
