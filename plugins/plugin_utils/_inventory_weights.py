# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Offline checks of the weights stage and the Hugging Face token (where it may be sent)."""

from __future__ import annotations

from ansible_collections.sparkfleet.serving.plugins.module_utils._weights import hf_token_sent
from ansible_collections.sparkfleet.serving.plugins.module_utils._weights import (
    plan as weights_plan,
)
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_report import (
    url_problem,
)


def check_weights(host, engine, report):
    """What the weights stage refuses from the profile alone (its plan), before any node.

    An unset pin is refused here; a pin that is set but wrong is _check_pin's (in
    _inventory_engine.py; its fix names the override), so the plan's own words for it are not
    repeated.
    """
    spec = engine.get("speculative") or {}
    pins = {
        "sglang_engine.model_revision": engine.get("model_revision"),
        "sglang_engine.speculative.draft_model_revision": spec.get("draft_model_revision"),
    }
    for error in weights_plan(engine)["errors"]:
        var = error.split(" ", 1)[0]
        if var in pins and str(pins[var] or "").strip():
            continue
        report.errors.append(f"{host}: {error}")


def check_secrets(nodes, engine, hf_token_set, report):
    """The Hugging Face token goes only to huggingface.co or an endpoint the inventory trusts.

    Not an error: the token is then withheld (public repos need none). The warning names the
    endpoint and the variable, so a gated repo's 401 is no surprise.
    """
    first = nodes[0]
    trusted = first.get("sglang_hf_token_endpoints")
    if trusted in (None, ""):
        trusted = []
    if not isinstance(trusted, list):
        report.error(
            "cluster",
            "sglang_hf_token_endpoints",
            f"is {trusted!r}, not a list of URLs",
            "list the mirrors the token may go to, e.g. [https://hf.mirror.example.org]",
        )
        return
    for url in trusted:
        if url_problem(url):
            report.error(
                "cluster",
                "sglang_hf_token_endpoints",
                f"entry {url_problem(url)}",
                "give each trusted mirror as scheme://host[:port]",
            )
    if not hf_token_set:
        return
    endpoints = {}
    for node in nodes:
        endpoint = node.get("model_weights_hf_endpoint") or engine.get("hf_endpoint")
        if endpoint and not url_problem(endpoint) and not hf_token_sent(endpoint, trusted):
            endpoints.setdefault(str(endpoint), []).append(node["host"])
    for endpoint, hosts in endpoints.items():
        report.warn(
            ", ".join(hosts) if len(hosts) < len(nodes) else "cluster",
            "sglang_hf_token",
            f"is set but will NOT be sent to {endpoint} (not huggingface.co and not listed in "
            "sglang_hf_token_endpoints)",
            "public repos need no token; for a gated repo list that mirror in "
            f"sglang_hf_token_endpoints: [{endpoint}] if you trust it with the token, or set "
            "sglang_profile_overrides.hf_endpoint: https://huggingface.co",
        )
