# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Resolve an engine profile: a preset, the one preset it builds on, then overrides."""

from __future__ import annotations

import copy


class ProfileError(ValueError):
    """A preset chain the collection does not accept."""


def merge(base, override):
    """``override`` over ``base``: dicts merge key by key, everything else replaces."""
    out = copy.deepcopy(base)
    for key, value in (override or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def resolve(preset, base=None, overrides=None, name="preset"):
    """The profile ``preset`` describes (``base`` is the preset it names, if any)."""
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
    return merge(merge(base or {}, preset), overrides or {})
