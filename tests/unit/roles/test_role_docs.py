"""Every role ships a README.md generated from its argument specs, and it is current.

tools/role_docs.py writes roles/<role>/README.md (what the role does, its entry points
with their options, a minimal example from the main entry point's ``examples``); Galaxy's
importer refuses a collection whose role has no README. These tests fail when a README is
missing or differs from what the specs give (run ``make role-docs``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_SPEC = importlib.util.spec_from_file_location(
    "role_docs", os.path.join(ROOT, "tools", "role_docs.py")
)
role_docs = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(role_docs)


def test_every_role_has_a_current_readme():
    assert len(role_docs.roles()) >= 10
    assert role_docs.stale() == [], "run make role-docs"


@pytest.fixture
def copy(tmp_path):
    """The register, the roles' meta and READMEs in a scratch tree."""
    shutil.copytree(os.path.join(ROOT, "meta"), tmp_path / "meta")
    for role in role_docs.roles():
        src = os.path.join(ROOT, "roles", role)
        shutil.copytree(os.path.join(src, "meta"), tmp_path / "roles" / role / "meta")
        shutil.copy(os.path.join(src, "README.md"), tmp_path / "roles" / role / "README.md")
    return tmp_path


def test_a_missing_and_a_stale_readme_are_named(copy):
    (copy / "roles" / "roce" / "README.md").unlink()
    spec = copy / "roles" / "watchdog" / "meta" / "argument_specs.yml"
    spec.write_text(
        spec.read_text(encoding="utf-8").replace(
            "Seconds between observations inside one cron minute.",
            "Seconds between two observations.",
        ),
        encoding="utf-8",
    )
    assert role_docs.stale(str(copy)) == [("roce", "missing"), ("watchdog", "stale")]


def test_a_role_without_an_example_is_refused(copy):
    spec = copy / "roles" / "sglang_patches" / "meta" / "argument_specs.yml"
    text = spec.read_text(encoding="utf-8")
    start = text.index("    examples: |")
    end = text.index("    options:", start)
    spec.write_text(text[:start] + text[end:], encoding="utf-8")
    with pytest.raises(role_docs.RoleDocError, match=r"role sglang_patches: .* no examples"):
        role_docs.render("sglang_patches", str(copy))


def test_readme_carries_description_entry_points_options_and_example():
    text = role_docs.render("watchdog")
    assert text.startswith("# sparkfleet.serving.watchdog\n")
    assert "## Example\n\n```yaml\n" in text
    assert "- role: sparkfleet.serving.watchdog" in text
    # both entry points, how each is called, and an option of each with type and default
    assert "tasks_from: control" in text
    assert "| `watchdog_interval_s` | int | `10` |" in text
    assert "[`sparkfleet.serving.sglang`](../sglang/README.md)" in text
    # nested options of the profile entry point are rows too
    assert "| `speculative." in role_docs.render("sglang")


@pytest.mark.parametrize(
    "markup, markdown",
    [
        ("C(a | b) and V(true)", "`a | b` and `true`"),
        ("O(watchdog_bin) O(x=y) E(HF_HUB_OFFLINE=1)", "`watchdog_bin` `x=y` `HF_HUB_OFFLINE=1`"),
        ("I(it) B(bold)", "*it* **bold**"),
        ("P(sparkfleet.serving.sglang#role)", "[`sparkfleet.serving.sglang`](../sglang/README.md)"),
        ("M(sparkfleet.serving.roce_link)", "`sparkfleet.serving.roce_link`"),
        (
            "U(https://x.example) L(text, https://y.example)",
            "<https://x.example> [text](https://y.example)",
        ),
        ("C(a `tick`)", "`` a `tick` ``"),
    ],
)
def test_markup(markup, markdown):
    assert role_docs.markup(markup, "watchdog") == [markdown]


def test_table_cells_escape_pipes():
    rows = list(role_docs._rows({"x": {"description": "C(a | b)", "type": "str"}}, "r", "main"))
    assert rows == ["| `x` | str |  | `a \\| b` |"]
