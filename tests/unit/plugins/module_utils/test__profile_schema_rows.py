# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The row helpers of _profile_schema spell out the same rows as ``_f``."""

from __future__ import annotations

from ansible_collections.sparkfleet.serving.plugins.module_utils import _profile_schema as ps


def test_owned_is_a_field_whose_flag_is_spelled_like_it():
    assert ps._owned("tp_size", "int", "Size.") == ps._f(
        "tp_size", "int", "Size.", flag="--tp-size", owned=True
    )
    assert ps._owned("enable_metrics", "bool", "On.", default=True) == ps._f(
        "enable_metrics", "bool", "On.", flag="--enable-metrics", default=True, owned=True
    )


def test_switch_is_an_off_by_default_boolean_flag():
    assert ps._switch("disable_cuda_graph") == ps._f(
        "disable_cuda_graph", "bool", flag="--disable-cuda-graph", default=False
    )
    assert ps._switch("trust_remote_code", "Pass it.")["description"] == "Pass it."


def test_owned_flags_keep_their_owners():
    owned = ps.owned_flags()
    for flag in ("--model-path", "--tp-size", "--nnodes", "--host", "--port", "--enable-metrics"):
        assert owned[flag].startswith("the profile field ")
    assert owned["--node-rank"] == "derived from spark_rank"
