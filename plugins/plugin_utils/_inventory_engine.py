# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Offline checks of the resolved profile (sglang_engine), each problem on the head's line.

One check per concern, run in a fixed order by check_engine, so the problems come out in the
same order on every run.
"""

from __future__ import annotations

import posixpath
import re

from ansible_collections.sparkfleet.serving.plugins.module_utils._engine import speculative_window
from ansible_collections.sparkfleet.serving.plugins.module_utils._weights import COMMIT_RE
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_report import (
    as_count,
    is_loopback,
    url_problem,
)
from ansible_collections.sparkfleet.serving.plugins.plugin_utils._inventory_vars import (
    owned_env_key,
    owned_flags,
)

ENGINE_VAR = "sglang_engine"
DSV4_SPECULATIVE = ("EAGLE", "DSPARK")
# Revisions written as reminders, not pins (an example inventory's own text).
PLACEHOLDER_RE = re.compile(
    r"^(todo|tbd|fixme|changeme|change_me|none|null|unset|pin.?me|x+|0+)$|[<>{}]",
    re.IGNORECASE,
)
HEX_RE = re.compile(r"^[0-9a-f]+$")
DIGEST_RE = re.compile(r"@sha256:([0-9a-f]*)$")
RESERVED_PORTS = {22: "sshd"}


def check_engine(host, engine, node_count, api_key_set, report):
    """Every check of the profile, in the order its problems are reported."""
    checks = (
        _check_image,
        _check_pins,
        _check_hf_endpoint,
        _check_data_dir,
        _check_required,
        lambda h, e, r: _check_parallelism(h, e, node_count, r),
        _check_ports,
        _check_extra_args,
        _check_env,
        _check_speculative,
        _check_timeouts,
        lambda h, e, r: _check_exposure(h, e, api_key_set, r),
    )
    for check in checks:
        check(host, engine, report)


def _check_image(host, engine, report):
    """The image is pinned: a tag or a full sha256 digest."""
    image = str(engine.get("image") or "")
    digest = DIGEST_RE.search(image)
    if not image:
        report.error(
            host,
            f"{ENGINE_VAR}.image",
            "is empty",
            "set sglang_profile_overrides.image to the pinned image",
        )
    elif digest and len(digest.group(1)) != 64:
        report.error(
            host,
            f"{ENGINE_VAR}.image",
            f"{image!r} carries a truncated digest",
            "set sglang_profile_overrides.image to name@sha256:<64 hex digits>",
        )
    elif not digest and ":" not in image.rsplit("/", 1)[-1]:
        report.error(
            host,
            f"{ENGINE_VAR}.image",
            f"{image!r} has no tag or digest",
            "pin it (name:tag or name@sha256:...)",
        )


def _check_pins(host, engine, report):
    """The model's and the draft model's revisions, where set, are full commits."""
    _check_pin(
        host,
        f"{ENGINE_VAR}.model_revision",
        engine.get("model_revision"),
        report,
        "sglang_profile_overrides.model_revision",
    )
    spec = engine.get("speculative") or {}
    _check_pin(
        host,
        f"{ENGINE_VAR}.speculative.draft_model_revision",
        spec.get("draft_model_revision"),
        report,
        "sglang_profile_overrides.speculative.draft_model_revision",
    )


def _check_pin(host, var, value, report, override):
    """A pin that is set must be a full commit (an unset one: _inventory_weights.py)."""
    fix = f"set {override} to the full 40-character commit sha"
    if value is None or str(value).strip() == "":
        return
    text = str(value).strip()
    if PLACEHOLDER_RE.search(text):
        report.error(host, var, f"{text!r} is a placeholder, not a revision", fix)
        return
    if COMMIT_RE.match(text):
        return
    if "…" in text or text.endswith("..."):
        report.error(host, var, f"{text!r} is truncated", fix)
    elif HEX_RE.match(text.lower()) and len(text) < 40:
        report.error(host, var, f"{text!r} looks like a truncated commit", fix)
    elif HEX_RE.match(text.lower()):
        report.error(host, var, f"{text!r} is not a 40-character lowercase commit sha", fix)
    else:
        report.error(
            host,
            var,
            f"{text!r} is not a commit but a branch or tag name, which moves",
            f"{fix} it points at now",
        )


def _check_hf_endpoint(host, engine, report):
    """The profile's Hugging Face endpoint, where set, is an http(s) URL."""
    endpoint = engine.get("hf_endpoint")
    if endpoint not in (None, "") and url_problem(endpoint):
        report.error(
            host,
            f"{ENGINE_VAR}.hf_endpoint",
            url_problem(endpoint),
            "set sglang_profile_overrides.hf_endpoint to the mirror's URL, e.g. "
            "https://hf-mirror.com",
        )


def _check_data_dir(host, engine, report):
    data_dir = engine.get("data_dir")
    if data_dir in (None, "") or posixpath.isabs(str(data_dir)):
        return
    report.error(
        host,
        "sglang_engine.data_dir",
        f"{data_dir!r} is a relative path (every host path of the profile, weights, caches "
        "and chat template, is built on it)",
        "set sglang_profile_overrides.data_dir to an absolute path, e.g. /srv/sparkfleet",
    )


def _check_required(host, engine, report):
    """The fields every launch needs are not empty."""
    for field in ("model_path", "served_model_name", "container_name"):
        if not engine.get(field):
            report.error(
                host, f"{ENGINE_VAR}.{field}", "is empty", f"set sglang_profile_overrides.{field}"
            )


def _check_parallelism(host, engine, node_count, report):
    """nnodes is the inventory's node count; tp_size x pp_size uses every GPU exactly once."""
    nnodes = as_count(engine.get("nnodes"))
    tp = as_count(engine.get("tp_size"))
    pp = as_count(engine.get("pp_size")) or 1
    gpus = as_count(engine.get("__gpus_per_node")) or 1
    if nnodes != node_count:
        need = node_count * gpus
        # Settings that must change together are named in one message.
        together = (
            f" and, with it, tp_size x pp_size to {need} (now {tp * pp}, e.g. tp_size: {need})"
            if tp and tp * pp != need
            else ""
        )
        report.error(
            host,
            f"{ENGINE_VAR}.nnodes",
            f"is {engine.get('nnodes')} but spark_nodes has {node_count} nodes",
            f"set sglang_profile_overrides.nnodes to {node_count}{together}, or fix the inventory",
        )
    if tp is None or tp < 1:
        report.error(
            host,
            f"{ENGINE_VAR}.tp_size",
            f"is {engine.get('tp_size')!r}",
            "set a positive tensor-parallel size",
        )
    elif nnodes == node_count and tp * pp != nnodes * gpus:
        report.error(
            host,
            f"{ENGINE_VAR}.tp_size",
            f"x pp_size = {tp * pp}, but {nnodes} nodes x {gpus} GPU = {nnodes * gpus}",
            "tp_size x pp_size must use every GPU of the cluster exactly once",
        )


def _check_ports(host, engine, report):
    """The API and rendezvous ports: valid, not reserved, not the same."""
    port, dist_port = as_count(engine.get("port")), as_count(engine.get("dist_init_port"))
    for field, value in (("port", port), ("dist_init_port", dist_port)):
        if value is None or not 1 <= value <= 65535:
            report.error(
                host,
                f"{ENGINE_VAR}.{field}",
                f"is {engine.get(field)!r}",
                "use a TCP port 1..65535",
            )
        elif value in RESERVED_PORTS:
            report.error(
                host,
                f"{ENGINE_VAR}.{field}",
                f"is {value}, used by {RESERVED_PORTS[value]}",
                "pick a free port",
            )
    if port is not None and port == dist_port:
        report.error(
            host,
            f"{ENGINE_VAR}.dist_init_port",
            f"{dist_port} clashes with the API port",
            "the rendezvous needs its own port (seed: API 8081, rendezvous 23000)",
        )


def _check_extra_args(host, engine, report):
    """extra_args repeats no flag the collection sets itself (owned_flags)."""
    flags = [str(arg).split("=", 1)[0] for arg in engine.get("extra_args") or []]
    _refuse_owned(
        host, report, "extra_args", flags, owned_flags().get, "contains {}", "remove it: it is {}"
    )


def _check_env(host, engine, report):
    """env is a mapping that sets no key the collection owns (owned_env_key)."""
    env = engine.get("env") or {}
    if not isinstance(env, dict):
        report.error(
            host, f"{ENGINE_VAR}.env", f"is {env!r}, not a mapping", "write env as KEY: value"
        )
        env = {}
    _refuse_owned(
        host,
        report,
        "env",
        sorted(env),
        owned_env_key,
        "sets {}, which the collection owns",
        "remove it from sglang_profile_overrides.env (or the preset): it is {}",
    )


def _refuse_owned(host, report, field, names, owner_of, said, fix):
    """One error per name that the collection sets itself: owner_of(name) says what sets it
    (None: not the collection's); said and fix are formatted with the name and the owner."""
    for name in names:
        owner = owner_of(name)
        if owner:
            report.error(host, f"{ENGINE_VAR}.{field}", said.format(name), fix.format(owner))


def _check_speculative(host, engine, report):
    """The draft algorithm fits the family; a draft window keeps the clamp and the floor."""
    spec = engine.get("speculative") or {}
    algorithm = spec.get("algorithm")
    if engine.get("family") == "deepseek_v4" and algorithm and algorithm not in DSV4_SPECULATIVE:
        report.error(
            host,
            f"{ENGINE_VAR}.speculative.algorithm",
            f"is {algorithm}, which DeepSeek-V4 does not accept",
            "use EAGLE (what 'MTP'/NextN means for DSV4) or DSPARK, or none",
        )
    window = speculative_window(engine)
    clamped = any("max_tokens_clamp" in (p.get("apply") or []) for p in engine.get("patches") or [])
    floor = as_count(engine.get("min_new_tokens")) or 0
    if window and not clamped:
        report.error(
            host,
            f"{ENGINE_VAR}.patches",
            f"lack max_tokens_clamp while {algorithm} takes {window} tokens per step",
            "keep the clamp: a max_tokens <= the draft window wedges every rank (seed Pitfall 3)",
        )
    elif window and floor <= window:
        report.error(
            host,
            f"{ENGINE_VAR}.min_new_tokens",
            f"{floor} does not exceed the speculative window ({window} tokens)",
            f"raise it above {window} (the seed uses 16 for 8 draft tokens)",
        )


def _check_timeouts(host, engine, report):
    """The engine's timeouts are positive numbers of seconds."""
    for field in ("watchdog_timeout", "health_timeout_s"):
        value = as_count(engine.get(field))
        if value is None or value < 1:
            report.error(
                host,
                f"{ENGINE_VAR}.{field}",
                f"is {engine.get(field)!r}",
                "use a positive number of seconds",
            )


def _check_exposure(host, engine, api_key_set, report):
    """An API beyond loopback without an API key is a warning, in capitals."""
    listen = str(engine.get("host") or "")
    if listen and not is_loopback(listen) and not api_key_set:
        report.warn(
            host,
            "sglang_api_key",
            f"is empty while the API listens on {listen}:{engine.get('port')}",
            "ANYONE ON THAT NETWORK CAN USE THE MODEL; "
            "set a vaulted sglang_api_key or bind 127.0.0.1",
        )
