# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The engine profile's one source of truth: every field, its type, default, SGLang flag and
whether the collection owns that flag.

Derived from ``FIELDS`` (nothing else restates them):

- the launch flags and their order (``server_flags``, used by ``_engine.server_args``);
- the flags an ``extra_args`` copy may not repeat (``owned_flags``, ``_inventory``);
- the defaults every resolved profile starts from (``defaults``, ``_profile.resolve``), so a
  preset carries only what it sets;
- the ``profile`` entry point of ``roles/sglang/meta/argument_specs.yml``
  (``argument_spec``; ``make profile-spec`` writes it, a unit test checks it).

``FIELDS`` is in the order the seed's launch script gives the flags; fields without a flag sit
where they read best (the argument spec lists them in this order). A dotted name is a nested
field (``speculative.algorithm``); its parent (``speculative``) comes first. Names starting
with ``__`` are per-node values ``server_args`` derives (not profile fields), kept here so the
flag order is one table.

Adding an engine flag: one ``_f(...)`` line here (``owned=True`` when the collection sets the
value itself, so ``extra_args`` may not repeat it; ``_owned(...)`` for such a flag spelled like
the field, ``_switch(...)`` for an off-by-default boolean one), ``make profile-spec``, and a test.
"""

from __future__ import annotations

import copy


def _f(
    name,
    kind,
    description=None,
    flag=None,
    default=None,
    owned=False,
    choices=None,
    elements=None,
    required=False,
):
    """One profile field. ``description`` defaults to ``C(<flag>).``; ``owned`` is True (the
    owner is "the profile field <name>") or a string naming who sets the flag."""
    if description is None:
        description = f"C({flag})."
    return {
        "name": name,
        "type": kind,
        "description": description,
        "flag": flag,
        "default": default,
        "owned": owned,
        "choices": choices,
        "elements": elements,
        "required": required,
    }


def _dashed(name):
    """The SGLang flag spelled like the field: ``tp_size`` -> ``--tp-size``."""
    return "--" + name.replace("_", "-")


def _owned(name, kind, description, **more):
    """A field whose flag (spelled like the field) the collection sets itself."""
    return _f(name, kind, description, flag=_dashed(name), owned=True, **more)


def _switch(name, description=None):
    """A boolean flag spelled like the field, off by default."""
    return _f(name, "bool", description, flag=_dashed(name), default=False)


def _derived(name, flag, owner):
    """A flag ``server_args`` fills per node (``name`` starts with ``__``), not a profile field."""
    return {"name": name, "flag": flag, "owned": owner, "derived": True}


FIELDS = (
    _f(
        "data_dir",
        "str",
        [
            "Base directory on every node of the profile's host paths (weights, caches, chat "
            "template). Every C({data_dir}) in a string field becomes this value, so a site "
            "moves them all with one override."
        ],
    ),
    _f("description", "str", "One line saying what the profile is."),
    _f(
        "family",
        "str",
        "Model family; C(deepseek_v4) accepts only EAGLE or DSPARK speculation.",
        default="generic",
        choices=["qwen3", "deepseek_v4", "generic"],
    ),
    _f("sglang_version", "str", "SGLang release (or build) inside the image; informational."),
    _f("image", "str", "Pinned engine image, C(name:tag) or C(name@sha256:<64 hex>)."),
    _f("container_name", "str", "Container name; each node appends C(-r<rank>)."),
    _f("python", "str", "Interpreter inside the image.", default="python3"),
    _f("model_repo", "str", "Hugging Face repository of the main weights."),
    _f("model_revision", "str", "Pinned revision (full 40-hex commit) of the main weights."),
    _switch("trust_remote_code", "Pass C(--trust-remote-code)."),
    _owned(
        "model_path", "str", "Path of the main weights on every node (mounted at the same path)."
    ),
    _owned("tp_size", "int", "Tensor-parallel size (C(--tp-size))."),
    _owned("pp_size", "int", "Pipeline-parallel size (C(--pp-size)); unset means 1."),
    _owned(
        "nnodes", "int", "Number of nodes (C(--nnodes)); must equal the size of C(spark_nodes)."
    ),
    _derived("__node_rank", "--node-rank", "derived from spark_rank"),
    _derived(
        "__dist_init_addr",
        "--dist-init-addr",
        "derived from rank 0's roce_ipv4 and dist_init_port",
    ),
    _f(
        "dist_init_port",
        "int",
        "TCP port on rank 0's data-plane IP where ranks meet (C(--dist-init-addr)).",
        default=23000,
    ),
    _owned("served_model_name", "str", "Model name the API serves (C(--served-model-name))."),
    _f("context_length", "int", flag="--context-length"),
    _f("mem_fraction_static", "float", flag="--mem-fraction-static"),
    _f("attention_backend", "str", flag="--attention-backend"),
    _f("chunked_prefill_size", "int", flag="--chunked-prefill-size"),
    _f("kv_cache_dtype", "str", flag="--kv-cache-dtype"),
    _switch("disable_cuda_graph"),
    _switch("disable_prefill_cuda_graph"),
    _f("cuda_graph_max_bs", "int", flag="--cuda-graph-max-bs"),
    _switch("disable_flashinfer_autotune"),
    _f("speculative", "dict", "Speculative decoding; C(algorithm) unset turns it off."),
    _f(
        "speculative.algorithm",
        "str",
        [
            "C(--speculative-algorithm), e.g. C(DFLASH), C(EAGLE), C(DSPARK); unset (null) "
            "turns speculative decoding off."
        ],
        flag="--speculative-algorithm",
    ),
    _f("speculative.draft_model_path", "str", flag="--speculative-draft-model-path"),
    _f(
        "speculative.draft_model_revision",
        "str",
        "C(--speculative-draft-model-revision), a full commit.",
        flag="--speculative-draft-model-revision",
    ),
    _f("speculative.eagle_topk", "int", flag="--speculative-eagle-topk"),
    _f("speculative.num_steps", "int", flag="--speculative-num-steps"),
    _f("speculative.num_draft_tokens", "int", flag="--speculative-num-draft-tokens"),
    _f("speculative.dspark_block_size", "int", flag="--speculative-dspark-block-size"),
    _f(
        "speculative.draft_model_quantization",
        "str",
        flag="--speculative-draft-model-quantization",
    ),
    _f("mamba", "dict", "Mamba/SSM cache settings of hybrid models."),
    _f("mamba.radix_cache_strategy", "str", flag="--mamba-radix-cache-strategy"),
    _f("mamba.ssm_dtype", "str", flag="--mamba-ssm-dtype"),
    _f("mamba.max_cache_size", "int", flag="--max-mamba-cache-size"),
    _f("max_running_requests", "int", flag="--max-running-requests"),
    _switch("enable_torch_compile"),
    _f("torch_compile_max_bs", "int", flag="--torch-compile-max-bs"),
    _f("num_continuous_decode_steps", "int", flag="--num-continuous-decode-steps"),
    _owned(
        "watchdog_timeout", "int", "Scheduler watchdog timeout in seconds (C(--watchdog-timeout))."
    ),
    _f("reasoning_parser", "str", flag="--reasoning-parser"),
    _f("tool_call_parser", "str", flag="--tool-call-parser"),
    _f(
        "chat_template",
        "str",
        "Chat template path inside the container (C(--chat-template)).",
        flag="--chat-template",
    ),
    _owned(
        "host", "str", "Address the API binds (C(0.0.0.0) for all, C(127.0.0.1) for loopback only)."
    ),
    _owned("port", "int", "API port (C(--port))."),
    _owned(
        "enable_metrics",
        "bool",
        "Serve SGLang's Prometheus metrics on C(/metrics) (C(--enable-metrics), after the "
        "seed's flags). The scrape targets and the watchdog's stall check read them.",
        default=True,
    ),
    _f(
        "extra_args",
        "list",
        "Further C(launch_server) flags, appended as given.",
        default=[],
        elements="str",
    ),
    _f(
        "container",
        "dict",
        "C(docker run) options. Fields a node cannot honour (a twin has no GPU) are left empty.",
    ),
    _f("container.gpus", "str", "C(--gpus)."),
    _f("container.memory", "str", "C(--memory)."),
    _f("container.memory_swap", "str", "C(--memory-swap)."),
    _f("container.shm_size", "str", "C(--shm-size)."),
    _f(
        "container.network",
        "str",
        "C(--network); ranks need C(host) to reach the data plane.",
        default="host",
    ),
    _f("container.ipc", "str", "C(--ipc)."),
    _f("container.cap_add", "list", "C(--cap-add) capabilities.", default=[], elements="str"),
    _f(
        "container.ulimits",
        "list",
        "C(--ulimit) entries, e.g. C(memlock=-1:-1) - RDMA pins its buffers, and NVIDIA's "
        "Spark recipes always lift the locked-memory limit.",
        default=[],
        elements="str",
    ),
    _f(
        "container.devices",
        "list",
        "C(--device) entries, e.g. C(/dev/infiniband).",
        default=[],
        elements="str",
    ),
    _f(
        "container.volumes",
        "list",
        "C(-v) mounts, C(host:container[:opts]).",
        default=[],
        elements="str",
    ),
    _f(
        "env",
        "dict",
        "Extra container environment (no secrets here; use the vaulted variables).",
        default={},
    ),
    _f("hf_endpoint", "str", "Hugging Face endpoint (mirror) the engine downloads through."),
    _f(
        "hf_disable_xet",
        "bool",
        "Set C(HF_HUB_DISABLE_XET=1); Xet bypasses the mirror and answers 401.",
        default=True,
    ),
    _f(
        "patches",
        "list",
        "Files inside the image to patch and the named patches for each.",
        default=[],
        elements="dict",
    ),
    _f(
        "patches.file",
        "str",
        "Absolute path of the original inside the image.",
        required=True,
    ),
    _f(
        "patches.apply",
        "list",
        "Patch names for M(sparkfleet.serving.sglang_patch).",
        elements="str",
        required=True,
    ),
    _f(
        "min_new_tokens",
        "int",
        "The clamp's floor for C(max_new_tokens); must exceed the speculative window.",
    ),
    _f("health_timeout_s", "int", "How long bring-up waits for the head's C(/health) 200."),
    _f(
        "decode_floor_tps",
        "float",
        "Decode tokens per second per running request below which this profile counts as slow "
        "under load (the monitoring role's C(SparkfleetDecodeSlow) alert; a figure from "
        "C(sparkfleet.serving.bench) on a healthy cluster, less a margin). 0 leaves the alert out.",
        default=0.0,
    ),
    _f(
        "disk_required_gb",
        "int",
        "Free space the weights need on the filesystem of C(model_path) when they are not "
        "staged yet.",
    ),
)

# The ``profile`` entry point's own text (its options come from FIELDS).
ENTRY_POINT = {
    "short_description": "Fields of an engine profile (presets, site profile files, overrides)",
    "description": [
        "Not a task entry point. The fields a preset in C(files/presets/), a site profile "
        "file named by C(sglang_profile) or C(sglang_profile_overrides) may set, checked "
        "before anything runs (one message per problem, naming hosts, field and fix).",
        "In every string field, C({data_dir}) is replaced by the profile's C(data_dir).",
        "A field a profile leaves out has its default (null unless one is given); a preset "
        "sets only what differs from it.",
    ],
    "author": "sparkfleet maintainers",
}


def _fields(table):
    return [row for row in (FIELDS if table is None else table) if not row.get("derived")]


def server_flags(table=None):
    """(field, SGLang flag) in launch order; dotted fields are nested, ``__`` ones derived."""
    return tuple(
        (row["name"], row["flag"]) for row in (FIELDS if table is None else table) if row["flag"]
    )


def owned_flags(table=None):
    """SGLang flag -> what sets it, for every flag of the table the collection owns."""
    owned = {}
    for row in FIELDS if table is None else table:
        if row["flag"] and row["owned"]:
            owner = row["owned"]
            owned[row["flag"]] = f"the profile field {row['name']}" if owner is True else owner
    return owned


def _children(table, prefix):
    return [row for row in table if row["name"].startswith(prefix + ".")]


def defaults(table=None):
    """The profile of a preset that sets nothing: every field with its default, nested dicts
    complete (lists of dicts, e.g. ``patches``, default to their own default)."""
    rows = _fields(table)
    out = {}
    for row in rows:
        *parents, leaf = row["name"].split(".")
        node = out
        for part in parents:  # parents come first in the table, so each is a dict by now
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        if row["type"] == "dict" and _children(rows, row["name"]):
            node[leaf] = {}
        else:
            node[leaf] = copy.deepcopy(row["default"])
    return out


def _spec(row, rows):
    spec = {"description": row["description"], "type": row["type"]}
    if row["elements"]:
        spec["elements"] = row["elements"]
    if row["choices"]:
        spec["choices"] = list(row["choices"])
    if row["default"] is not None:
        spec["default"] = copy.deepcopy(row["default"])
    if row["required"]:
        spec["required"] = True
    children = _children(rows, row["name"])
    if children:
        spec["options"] = {
            child["name"].rpartition(".")[2]: _spec(child, rows)
            for child in children
            if child["name"].count(".") == row["name"].count(".") + 1
        }
    return spec


def argument_spec(table=None):
    """The options of the sglang role's ``profile`` entry point (argument spec format)."""
    rows = _fields(table)
    return {row["name"]: _spec(row, rows) for row in rows if "." not in row["name"]}
