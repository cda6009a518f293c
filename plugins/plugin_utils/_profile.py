# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Resolve an engine profile: a preset, the one preset it builds on, then overrides."""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping

from ansible_collections.sparkfleet.serving.plugins.module_utils._profile_schema import defaults


class ProfileError(ValueError):
    """A preset chain the collection does not accept."""


def plain(value):
    """A copy of ``value`` made of plain dicts and lists.

    Not ``copy.deepcopy``: inside a filter the values are Ansible's lazy containers, whose
    deep copy templates every element again (it was most of a no-change run's profile cost).
    """
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def merge(base, override):
    """``override`` over ``base``: dicts merge key by key, everything else replaces."""
    out = plain(base)
    for key, value in (override or {}).items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = plain(value)
    return out


def resolve(preset, base=None, overrides=None, name="preset"):
    """The profile ``preset`` describes (``base`` is the preset it names, if any).

    Every field the schema knows starts at its default (``_profile_schema``), so a preset
    sets only what differs and the profile still has every field.
    """
    preset = dict(preset or {})
    base_name = preset.pop("base", None)
    if base_name and base is None:
        raise ProfileError(f"{name} builds on {base_name}, which was not given")
    if base is not None and not base_name:
        raise ProfileError(f"{name} names no base, but one was given")
    if base is not None and base.get("base"):
        raise ProfileError(
            f"{name} builds on {base_name}, which builds on {base['base']}; "
            "presets may name one base only"
        )
    return merge(merge(merge(defaults(), base or {}), preset), overrides or {})


DATA_DIR = "{data_dir}"
PROFILE_FILE_SUFFIXES = (".yml", ".yaml")


def expand_data_dir(profile):
    """Every ``{data_dir}`` in a string of the profile replaced by its ``data_dir``."""
    data_dir = profile.get("data_dir")

    def walk(value):
        if isinstance(value, str):
            return value.replace(DATA_DIR, str(data_dir).rstrip("/")) if data_dir else value
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(profile)


def is_profile_file(name):
    """Whether ``sglang_profile`` names a site profile file rather than a shipped preset."""
    return isinstance(name, str) and ("/" in name or name.endswith(PROFILE_FILE_SUFFIXES))


def nearest(word, choices):
    """The choice nearest ``word`` (difflib), or None when none is close."""
    match = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return match[0] if match else None


def closest(word, choices):
    """`` (did you mean X?)`` for the choice nearest ``word``, else an empty string."""
    match = nearest(word, choices)
    return f" (did you mean {match}?)" if match else ""


def value_kind(value):
    """What an inventory value is, as its YAML reads (a tagged str is still a string)."""
    for kind, name in ((bool, "a boolean"), (str, "a string"), ((int, float), "a number")):
        if isinstance(value, kind):
            return name
    if isinstance(value, (list, tuple)):
        return "a list"
    return "null" if value is None else type(value).__name__


def unknown_fields(data, schema, prefix):
    """(dotted field, closest known field) of every key of ``data`` the schema lacks."""
    found = []
    for key, value in (data or {}).items():
        spec = schema.get(key)
        if spec is None:
            found.append((f"{prefix}{key}", closest(key, schema)))
        elif isinstance(value, dict) and spec.get("options"):
            found += unknown_fields(value, spec["options"], f"{prefix}{key}.")
    return found


FIELDS_DOC = "fields: ansible-doc -t role sparkfleet.serving.sglang, entry point profile"


def check_settings(name, overrides, presets, schema, read):
    """Problems of one node's ``sglang_profile``/``sglang_profile_overrides``.

    ``presets`` are the shipped preset names, ``schema`` the profile fields (argument
    spec options), ``read(path_or_preset)`` loads a profile file. Returns
    (variable, problem, fix) triples; the resolved profile when there are none.
    """
    problems, label = _name_problems(name, presets)
    if problems:
        return problems, None
    problems, preset, base = _read_preset(name, label, presets, read)
    if problems:
        return problems, None
    problems = _field_problems(preset, overrides, schema, label)
    if problems:
        return problems, None
    try:
        profile = expand_data_dir(resolve(preset, base, overrides, name))
    except ProfileError as exc:
        return [
            ("sglang_profile", str(exc), "let a profile file name one shipped preset as base")
        ], None
    return [], profile


def _name_problems(name, presets):
    """What is wrong with the name ``sglang_profile`` gives, and the label of a profile file.

    Returns (problems, label): ``label`` names a site profile file in its problems, None for
    a shipped preset.
    """
    if not isinstance(name, str) or not name:
        return [("sglang_profile", f"is {name!r}", "name a shipped preset or a profile file")], None
    if is_profile_file(name):
        if not os.path.isabs(name):
            return [
                (
                    "sglang_profile",
                    f"{name!r} is a relative path",
                    "give its absolute path, e.g. <inventory dir>/profiles/<name>.yml",
                )
            ], None
        if not os.path.isfile(name):
            return [
                (
                    "sglang_profile",
                    f"file {name} does not exist on the controller",
                    "create it or fix the path",
                )
            ], None
        return [], f"sglang_profile file {name}:"
    if name not in presets:
        return [
            (
                "sglang_profile",
                f"{name!r} is not a shipped preset{closest(name, presets)}",
                f"use one of {', '.join(sorted(presets))}, or a profile file's absolute path",
            )
        ], None
    return [], None


def _read_preset(name, label, presets, read):
    """The preset or profile file ``name`` and the one preset it builds on.

    Returns (problems, preset, base); ``base`` is None when it names none.
    """
    try:
        preset = read(name)
    except Exception as exc:  # a site file that does not parse
        return (
            [
                (
                    "sglang_profile",
                    f"{name} cannot be read: {exc}",
                    "fix the YAML of the profile file",
                )
            ],
            None,
            None,
        )
    if not isinstance(preset, dict):
        return (
            [("sglang_profile", f"{name} is not a mapping of profile fields", FIELDS_DOC)],
            None,
            None,
        )
    base = None
    base_name = preset.get("base")
    if base_name is not None:
        if base_name not in presets:
            return (
                [
                    (
                        label or "sglang_profile",
                        f"base {base_name!r} is not a shipped preset{closest(base_name, presets)}",
                        f"use one of {', '.join(sorted(presets))}",
                    )
                ],
                None,
                None,
            )
        base = read(base_name)
    return [], preset, base


def _field_problems(preset, overrides, schema, label):
    """Fields the schema lacks: a profile file's (``label``) own, then the overrides'."""
    problems = []
    if label:
        for field, hint in unknown_fields(
            {k: v for k, v in preset.items() if k != "base"}, schema, ""
        ):
            problems.append(
                (
                    label,
                    f"{field} is not a profile field{hint}",
                    f"correct or remove it; {FIELDS_DOC}",
                )
            )
    if not isinstance(overrides, dict):
        problems.append(
            (
                "sglang_profile_overrides",
                f"is {value_kind(overrides)} ({overrides!r}), not a mapping",
                "give a mapping of profile fields, "
                "e.g. sglang_profile_overrides: {data_dir: /srv/ai}",
            )
        )
        return problems
    for field, hint in unknown_fields(overrides, schema, ""):
        problems.append(
            (
                f"sglang_profile_overrides.{field}",
                f"is not a profile field{hint}",
                f"correct or remove it; {FIELDS_DOC}",
            )
        )
    return problems
