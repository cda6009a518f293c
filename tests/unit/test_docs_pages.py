"""The README's first screen, the docs/ pages, and every relative link between them.

The long reference lives in docs/*.md; the README links each page from its Documentation
table, and the Ansible docsite carries each one through docs/docsite (links.yml and the
extra-docs page rst/guide.rst, linted by antsibull-docs in make lint). A page that one of
them forgets, or a relative link or #anchor that points nowhere, fails here.
"""

from __future__ import annotations

import glob
import os
import re

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        return handle.read()


def pages():
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))


def slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path):
    return {slug(h) for h in HEADING.findall(FENCE.sub("", read(path)))}


def markdown_files():
    return ["README.md", *pages(), *sorted(glob.glob("roles/*/README.md", root_dir=ROOT))]


def test_the_readme_starts_with_what_a_newcomer_needs():
    text = read("README.md")
    sections = re.findall(r"^## (.+)$", text, re.M)
    assert sections[:2] == ["Quickstart on a real cluster", "Documentation"], sections
    first = text[: text.index("## Quickstart")]
    assert "make demo" in first and "make test" in first
    quick = text[text.index("## Quickstart") : text.index("## Documentation")]
    for step in ("ansible-galaxy collection install", "ansible-vault encrypt"):
        assert step in quick, step
    for playbook in ("validate", "site"):
        assert f"sparkfleet.serving.{playbook} -i" in quick, playbook
    assert len(text.splitlines()) < 150, "the reference belongs in docs/"


def test_every_page_is_in_the_readme_and_the_docsite():
    found = pages()
    assert len(found) >= 8
    readme = read("README.md")
    links = yaml.safe_load(read("docs/docsite/links.yml"))
    linked = {e["url"].split("/blob/main/", 1)[1] for e in links["extra_links"]}
    guide = read("docs/docsite/rst/guide.rst")
    extra = yaml.safe_load(read("docs/docsite/extra-docs.yml"))
    assert extra["sections"][0]["toctree"] == ["guide"]
    for page in found:
        assert f"]({page})" in readme, f"README's Documentation table lacks {page}"
        assert page in linked, f"docs/docsite/links.yml lacks {page}"
        assert f"/{page}>`_" in guide, f"docs/docsite/rst/guide.rst lacks {page}"


@pytest.mark.parametrize("path", markdown_files())
def test_relative_links_and_anchors_resolve(path):
    text = FENCE.sub("", read(path))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _sep, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        missing = not os.path.exists(os.path.join(ROOT, dest))
        if missing or (anchor and dest.endswith(".md") and anchor not in anchors(dest)):
            broken.append(target)
    assert not broken, f"{path}: {broken}"


def test_the_bench_block_is_on_the_benchmarks_page():
    text = read("docs/benchmarks.md")
    assert text.count("<!-- bench:start (written by make bench) -->") == 1
    assert text.count("<!-- bench:end -->") == 1
    assert "bench:start (written" not in read("README.md")
