"""One way to run every playbook, in every doc, message and example.

A user of the installed collection runs ``ansible-playbook sparkfleet.serving.<name> -i
<inventory>``; a clone's ``playbooks/<name>.yml`` path is no command they have. So the docs,
the role READMEs, the example inventory, the playbooks' header comments and every runtime
message (fail/assert/debug texts, templates, what the node-side Python prints) show a
command only in that form, always with ``-i``. The clone form is explained once, in
docs/real-cluster.md's "Working from a clone" section; the Makefile and the tests are the
clone's own tools and are not read.

A command is:
- ``ansible-playbook`` followed by a playbook: a ``.yml`` path is refused (twin/ and
  molecule/ playbooks of the test bed excepted), ``sparkfleet.serving.<name>`` needs ``-i``;
- a ``<name>.yml`` followed by an option (``site.yml --tags launch``,
  ``playbooks/verify.yml -e repair=true``);
- ``run``/``re-run`` followed by a ``<name>.yml`` ("fix: re-run site.yml").
In the pages a reader reads (README, docs/, role READMEs, the example inventory), a path
``playbooks/<name>.yml`` is refused even as a noun: the installed collection is named
``sparkfleet.serving.<name>``. A bare ``site.yml`` naming the playbook is fine.
"""

from __future__ import annotations

import ast
import glob
import os
import re

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLONE_PAGE = "docs/real-cluster.md"
CLONE_SECTION = "## Working from a clone"
# Options of ansible-playbook that take a value (the value is not the playbook).
VALUE_OPTIONS = {
    "-i",
    "--inventory",
    "-e",
    "--extra-vars",
    "-l",
    "--limit",
    "-t",
    "--tags",
    "--skip-tags",
    "--vault-password-file",
    "--vault-id",
    "-u",
    "--user",
    "-f",
    "--forks",
    "-c",
    "--connection",
    "-M",
    "--module-path",
}
# Paths of the test bed's own playbooks, which a test-bed page may run by path.
TEST_BED = ("twin/", "molecule/")
ANSIBLE_PLAYBOOK = re.compile(r"(?<![\w/.-])ansible-playbook[ \t]+")
# A token of a command, after the comment marks and YAML indentation of a wrapped line.
TOKEN = re.compile(r"(?:\s|#|\\\n)*([^\s]+)")
YML_WITH_OPTION = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.ya?ml)[ \t]+\[?-{1,2}[a-zA-Z]")
RUN_YML = re.compile(r"\b(?:[Rr]e-?run|[Rr]un)[ \t]+[`'\"]?((?:[\w.-]+/)*[\w-]+\.ya?ml)\b")
PLAYBOOK_PATH = re.compile(r"(?<![\w/.-])playbooks/[\w-]+\.ya?ml")


def rel(paths):
    return sorted({os.path.relpath(p, ROOT) for p in paths})


def pages():
    """What a reader reads as documentation: every playbook path in them is refused."""
    found = ["README.md"]
    found += glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)
    found += glob.glob(os.path.join(ROOT, "docs", "docsite", "**", "*.rst"), recursive=True)
    found += glob.glob(os.path.join(ROOT, "docs", "docsite", "*.yml"))
    found += glob.glob(os.path.join(ROOT, "roles", "*", "README.md"))
    for path in glob.glob(os.path.join(ROOT, "inventory", "**", "*"), recursive=True):
        twin = os.path.relpath(path, ROOT).split(os.sep)[1].startswith("sim")
        if os.path.isfile(path) and not twin:
            found.append(path)
    return rel(os.path.join(ROOT, p) for p in found)


def sources():
    """Playbooks, roles and plugins: the commands their messages and comments show."""
    found = [os.path.join(ROOT, "site.yml")]
    found += glob.glob(os.path.join(ROOT, "playbooks", "*.yml"))
    for ext in ("yml", "j2", "py", "sh"):
        found += glob.glob(os.path.join(ROOT, "roles", "**", f"*.{ext}"), recursive=True)
    for ext in ("py", "yml"):
        found += glob.glob(os.path.join(ROOT, "plugins", "**", f"*.{ext}"), recursive=True)
    # the twin's inventories: only the commands their comments show
    found += glob.glob(os.path.join(ROOT, "inventory", "sim*", "**", "*.yml"), recursive=True)
    return rel(found)


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        return handle.read()


def blank_clone_section(path, text):
    """docs/real-cluster.md's clone section, the one place the clone form is shown."""
    if path != CLONE_PAGE:
        return text
    start = text.index(CLONE_SECTION)
    end = text.find("\n## ", start + len(CLONE_SECTION))
    end = len(text) if end < 0 else end
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def clean(token):
    return token.strip("`'\"()[],;:.")


def ansible_playbook_commands(text, covered):
    """(offset, problem) for each ansible-playbook command not in the installed form.

    The span of each playbook named is added to ``covered`` (one finding per command).
    """
    found = []
    for match in ANSIBLE_PLAYBOOK.finditer(text):
        pos, playbook, inventory, expect_value = match.end(), None, False, None
        for _word_index in range(16):
            token = TOKEN.match(text, pos)
            if not token:
                break
            raw, pos = token.group(1), token.end()
            word = clean(raw)
            if expect_value:
                inventory = inventory or expect_value in ("-i", "--inventory")
                expect_value = None
            elif word.startswith("-"):
                option = word.split("=", 1)[0]
                inventory = inventory or option in ("-i", "--inventory")
                if option in VALUE_OPTIONS and "=" not in word:
                    expect_value = option
            elif playbook is None and word:
                playbook = word
                covered.append(range(token.start(1), token.end(1)))
            else:
                break
            if raw.endswith(("`", ")", ";", '"')) and not raw.startswith("-"):
                break
        if playbook is None or playbook.startswith("<"):
            continue
        if re.fullmatch(r"[\w./-]+\.ya?ml", playbook) and not playbook.startswith(TEST_BED):
            found.append((match.start(), f"ansible-playbook {playbook}: not the installed form"))
        elif playbook.startswith("sparkfleet.serving.") and not inventory:
            found.append((match.start(), f"ansible-playbook {playbook} without -i"))
    return found


def command_forms(text):
    covered = []
    found = ansible_playbook_commands(text, covered)
    for pattern, what in ((YML_WITH_OPTION, "run with options"), (RUN_YML, "run by its file")):
        for match in pattern.finditer(text):
            inside = any(match.start(1) in span for span in covered)
            if not inside and not match.group(1).startswith(TEST_BED):
                found.append((match.start(1), f"{match.group(1)}: {what}"))
    return found


def docstrings(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                yield body[0].value


def messages(path, text):
    """(offset, text) of what a file says at run time, not its comments or docstrings.

    Python: its string literals but docstrings; YAML and templates: every line but comments.
    """
    if path.endswith(".py"):
        lines = text.splitlines(keepends=True)
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line))
        tree = ast.parse(text)
        skip = {id(node) for node in docstrings(tree)}
        for node in ast.walk(tree):
            string = isinstance(node, ast.Constant) and isinstance(node.value, str)
            if string and id(node) not in skip:
                said = "".join(lines[node.lineno - 1 : node.end_lineno])
                yield starts[node.lineno - 1], said
    elif path.endswith((".yml", ".j2")):
        offset = 0
        for line in text.splitlines(keepends=True):
            # comments, and a playbook importing another by its path
            if not line.lstrip().startswith(("#", "{#")) and "import_playbook:" not in line:
                yield offset, line
            offset += len(line)


def offenders(path, strict):
    text = blank_clone_section(path, read(path))
    found = command_forms(text)
    if strict:
        found += [
            (m.start(), f"{m.group(0)}: a clone's path") for m in PLAYBOOK_PATH.finditer(text)
        ]
    else:
        for offset, said in messages(path, text):
            found += [
                (offset, f"{m}: a clone's path in a message") for m in PLAYBOOK_PATH.findall(said)
            ]
    lines = {}
    for offset, problem in found:
        line = text.count("\n", 0, offset) + 1
        lines.setdefault((line, problem), None)
    return [f"{path}:{line}: {problem}" for line, problem in sorted(lines)]


def test_the_scanned_files_are_found():
    assert {"README.md", CLONE_PAGE, "inventory/qwen38-tp4/hosts.yml"} <= set(pages())
    assert "roles/preflight/README.md" in pages()
    assert not [p for p in pages() if p.startswith("inventory/sim")]
    assert {
        "site.yml",
        "playbooks/site.yml",
        "roles/sglang_node/files/sparkfleet_launcher.py",
    } <= set(sources())
    assert CLONE_SECTION in read(CLONE_PAGE)


@pytest.mark.parametrize("path", pages())
def test_pages_show_the_installed_form(path):
    found = offenders(path, strict=True)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("path", sources())
def test_messages_and_comments_show_the_installed_form(path):
    found = offenders(path, strict=False)
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "text, problems",
    [
        ("ansible-playbook sparkfleet.serving.site -i inventory/<cluster>", 0),
        ("ansible-playbook -i inventory/x sparkfleet.serving.status", 0),
        ("`ansible-playbook sparkfleet.serving.drill \\\n  -i ~/c -e drill_confirm=c`", 0),
        ("      # ansible-playbook sparkfleet.serving.canary\n      #   -i inventory/<cluster>", 0),
        ("the directory C(ansible-playbook) runs in; (ansible-playbook, molecule)", 0),
        ("ansible-playbook -i inventory/sim twin/playbooks/create.yml", 0),
        ("A second `site.yml` on a healthy cluster; `rollback.yml` returns", 0),
        ("site.yml, playbooks/    site, validate, restart", 0),
        ("ansible-playbook sparkfleet.serving.site --tags weights", 1),
        ("fix: ansible-playbook playbooks/verify.yml -e repair=true", 1),
        ("ansible-playbook site.yml -i inventory/<cluster>", 1),
        ("`playbooks/upgrade.yml -e upgrade_image=<tag>` records", 1),
        ("fix: re-run site.yml (roce role)", 1),
        ("the next `verify.yml -e repair=true` completes it", 1),
        ("`site.yml --tags\nlaunch`", 1),
    ],
)
def test_the_rules(text, problems):
    assert len(command_forms(text)) == problems, command_forms(text)


def test_a_page_may_not_name_the_clone_path():
    assert PLAYBOOK_PATH.findall("its report (`playbooks/status.yml`)") == ["playbooks/status.yml"]
    assert not PLAYBOOK_PATH.findall("twin/playbooks/create.yml")
