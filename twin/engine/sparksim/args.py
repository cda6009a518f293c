"""Command line of the stand-in: upstream's flag set plus the seeds' custom-build flags.

The image carries ``flags.json``, read statically from the release's
``server_args.py`` at build time (twin/engine/extract.py), so every flag of that
release parses and anything else fails with argparse's exit 2, as upstream. The
seeds ran custom builds with a few flags no release has (DFLASH, DSPARK, the
mamba radix cache strategy ...): those are added on top.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

FLAGS_JSON = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "flags.json")
IMAGE_FLAGS_JSON = "/sgl-workspace/sglang/python/sglang/flags.json"

# Flags the stand-in reads: (names, dest, type, default, action, choices, nargs).
CORE = [
    (("--model-path", "--model"), "model_path", str, None, "store", None, None),
    (("--tokenizer-path",), "tokenizer_path", str, None, "store", None, None),
    (("--served-model-name",), "served_model_name", str, None, "store", None, None),
    (("--host",), "host", str, "127.0.0.1", "store", None, None),
    (("--port",), "port", int, 30000, "store", None, None),
    (("--tensor-parallel-size", "--tp-size"), "tp_size", int, 1, "store", None, None),
    (("--pipeline-parallel-size", "--pp-size"), "pp_size", int, 1, "store", None, None),
    (("--data-parallel-size", "--dp-size"), "dp_size", int, 1, "store", None, None),
    (("--nnodes",), "nnodes", int, 1, "store", None, None),
    (("--node-rank",), "node_rank", int, 0, "store", None, None),
    (("--dist-init-addr", "--nccl-init-addr"), "dist_init_addr", str, None, "store", None, None),
    (("--context-length",), "context_length", int, None, "store", None, None),
    (("--max-running-requests",), "max_running_requests", int, None, "store", None, None),
    (("--watchdog-timeout",), "watchdog_timeout", float, 300.0, "store", None, None),
    (("--log-level",), "log_level", str, "info", "store", None, None),
    (("--api-key",), "api_key", str, None, "store", None, None),
    (("--admin-api-key",), "admin_api_key", str, None, "store", None, None),
    (("--enable-metrics",), "enable_metrics", None, False, "store_true", None, None),
    (("--disable-cuda-graph",), "disable_cuda_graph", None, False, "store_true", None, None),
    (
        ("--speculative-algorithm",),
        "speculative_algorithm",
        str,
        None,
        "store",
        ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK"],
        None,
    ),
    (
        ("--speculative-draft-model-path", "--speculative-draft-model"),
        "speculative_draft_model_path",
        str,
        None,
        "store",
        None,
        None,
    ),
    (
        ("--speculative-draft-model-revision",),
        "speculative_draft_model_revision",
        str,
        None,
        "store",
        None,
        None,
    ),
    (
        ("--speculative-draft-model-quantization",),
        "speculative_draft_model_quantization",
        str,
        None,
        "store",
        None,
        None,
    ),
    (("--speculative-num-steps",), "speculative_num_steps", int, None, "store", None, None),
    (("--speculative-eagle-topk",), "speculative_eagle_topk", int, None, "store", None, None),
    (
        ("--speculative-num-draft-tokens",),
        "speculative_num_draft_tokens",
        int,
        None,
        "store",
        None,
        None,
    ),
]

# Flags of the seeds' custom builds that no release on PyPI has.
SEED_EXTRAS = [
    (
        ("--speculative-dspark-block-size",),
        "speculative_dspark_block_size",
        int,
        None,
        "store",
        None,
        None,
    ),
    (
        ("--mamba-radix-cache-strategy",),
        "mamba_radix_cache_strategy",
        str,
        None,
        "store",
        None,
        None,
    ),
    (
        ("--disable-prefill-cuda-graph",),
        "disable_prefill_cuda_graph",
        None,
        False,
        "store_true",
        None,
        None,
    ),
]

# Used when no flags.json is found (running from a checkout): the seeds' other flags.
FALLBACK = [
    ("--trust-remote-code", "store_true"),
    ("--mem-fraction-static", "store"),
    ("--attention-backend", "store"),
    ("--chunked-prefill-size", "store"),
    ("--kv-cache-dtype", "store"),
    ("--cuda-graph-max-bs", "store"),
    ("--disable-flashinfer-autotune", "store_true"),
    ("--mamba-ssm-dtype", "store"),
    ("--max-mamba-cache-size", "store"),
    ("--enable-torch-compile", "store_true"),
    ("--torch-compile-max-bs", "store"),
    ("--num-continuous-decode-steps", "store"),
    ("--reasoning-parser", "store"),
    ("--tool-call-parser", "store"),
    ("--chat-template", "store"),
    ("--revision", "store"),
]


class _Deprecated(argparse.Action):
    def __init__(self, option_strings, dest, nargs=0, **kwargs):
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(
            f"The command line argument '{option_string}' is deprecated and will be removed "
            "in future versions.",
            file=sys.stderr,
        )


def _load_flags(path):
    for candidate in (path, IMAGE_FLAGS_JSON, FLAGS_JSON):
        if candidate and os.path.exists(candidate):
            with open(candidate, encoding="utf-8") as handle:
                return json.load(handle)
    return [
        {
            "names": [name],
            "action": action,
            "type": "str",
            "nargs": None,
            "choices": None,
            "default": None,
            "dest": None,
        }
        for name, action in FALLBACK
    ]


def build_parser(flags_path=None):
    """argparse parser with the release's flags; the stand-in's own flags keep their dest."""
    parser = argparse.ArgumentParser(prog="python3 -m sglang.launch_server")
    return add_arguments(parser, flags_path)


def add_arguments(parser, flags_path=None):
    """Add the release's flags to ``parser`` (what upstream's ServerArgs.add_cli_args does)."""
    taken = set()
    upstream = _load_flags(flags_path)
    defaults = {}
    for flag in upstream:
        for name in flag["names"]:
            defaults[name] = flag.get("default")
    for names, dest, typ, default, action, choices, nargs in CORE + SEED_EXTRAS:
        names = [n for n in names if n not in taken]
        upstream_default = next((defaults[n] for n in names if defaults.get(n) is not None), None)
        if upstream_default is not None and action == "store":
            default = typ(upstream_default) if typ else upstream_default
        kwargs = {"dest": dest, "default": default}
        if action == "store_true":
            kwargs["action"] = "store_true"
        else:
            kwargs.update(type=typ, choices=choices, nargs=nargs)
        parser.add_argument(*names, **kwargs)
        taken.update(names)
    for flag in upstream:
        names = [n for n in flag["names"] if n not in taken]
        if not names:
            continue
        kwargs = {}
        if flag.get("dest"):
            kwargs["dest"] = flag["dest"]
        if flag["action"] in ("store_true", "store_false"):
            kwargs["action"] = flag["action"]
        elif flag["action"] == "deprecated":
            kwargs["action"] = _Deprecated
        else:
            kwargs["type"] = {"int": int, "float": float}.get(flag.get("type"), str)
            if flag.get("nargs") is not None:
                kwargs["nargs"] = flag["nargs"]
            if flag.get("choices"):
                kwargs["choices"] = flag["choices"]
            kwargs["default"] = flag.get("default")
        parser.add_argument(*names, **kwargs)
        taken.update(names)
    return parser


def parse(argv, flags_path=None):
    """Parse argv like upstream's prepare_server_args (exit 2 on an unknown flag)."""
    args = build_parser(flags_path).parse_args(argv)
    if args.served_model_name is None:
        args.served_model_name = args.model_path
    if args.tokenizer_path is None:
        args.tokenizer_path = args.model_path
    return args


def check(args):
    """upstream check_server_args() subset: a list of error messages (empty if fine)."""
    errors = []
    if args.model_path is None:
        errors.append("the following arguments are required: --model-path")
    if (args.tp_size * args.pp_size) % args.nnodes != 0:
        errors.append("tp_size must be divisible by number of nodes")
    if not 0 <= args.node_rank < args.nnodes:
        errors.append(
            f"node_rank must be in [0, nnodes): got --node-rank {args.node_rank} "
            f"with --nnodes {args.nnodes}"
        )
    if args.nnodes > 1 and not args.dist_init_addr:
        errors.append("--dist-init-addr is required when --nnodes > 1")
    if args.dist_init_addr:
        host, _, port = args.dist_init_addr.rpartition(":")
        if not host or not port.isdigit():
            errors.append(f"--dist-init-addr must be host:port, got {args.dist_init_addr!r}")
    if args.watchdog_timeout is not None and args.watchdog_timeout <= 0:
        errors.append("--watchdog-timeout must be positive")
    return errors


def draft_window(args):
    """Tokens one speculative step covers, or 0 when speculative decoding is off."""
    algo = (args.speculative_algorithm or "").upper()
    if not algo:
        return 0
    if args.speculative_num_draft_tokens:
        return args.speculative_num_draft_tokens
    if algo == "DSPARK" and args.speculative_dspark_block_size:
        return args.speculative_dspark_block_size
    if args.speculative_num_steps:
        return args.speculative_num_steps + 1
    # upstream auto_choose_speculative_params() default for EAGLE-style drafts: 3 steps, 4 tokens
    return 4


def dist_addr(args):
    """(host, port) of --dist-init-addr."""
    host, _, port = args.dist_init_addr.rpartition(":")
    return host.strip("[]"), int(port)


def gpus_per_node(args):
    return max(1, (args.tp_size * args.pp_size) // args.nnodes)


def tp_rank(args):
    """The first TP rank of this node (one simulated GPU process per node)."""
    return args.node_rank * gpus_per_node(args)


def log_prefix(args):
    prefix = ""
    if args.pp_size > 1:
        prefix += " PP0"
    if args.tp_size > 1:
        prefix += f" TP{tp_rank(args)}"
    return prefix


def as_dict(args):
    """All arguments, keys redacted (for /get_server_info)."""
    secret = ("api_key", "admin_api_key")
    return {k: ("<redacted>" if k in secret and v else v) for k, v in sorted(vars(args).items())}
