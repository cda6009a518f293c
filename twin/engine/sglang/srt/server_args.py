"""The stand-in's ``sglang.srt.server_args``: upstream's parser API on the release's flags.

``ServerArgs.add_cli_args(parser)`` adds every flag the release's own server_args.py
declares (flags.json, read at build time by twin/engine/extract.py) plus the seeds'
custom-build flags, as the stand-in's launch_server parses them, so a parse done the way
upstream's ``prepare_server_args`` does it (``argparse.ArgumentParser()``, ``add_cli_args``,
``parse_args``) accepts what the release accepts and refuses anything else with argparse's
own ``error: unrecognized arguments: ...``. Nothing here needs a GPU, the network or weights.
"""

from __future__ import annotations

import argparse

from sparksim import args as _args


class ServerArgs:
    """Only the command-line half of upstream's ServerArgs."""

    @staticmethod
    def add_cli_args(parser):
        _args.add_arguments(parser)

    @classmethod
    def from_cli_args(cls, args):
        return args


def prepare_server_args(argv):
    """Parse argv as upstream's prepare_server_args does (exit 2 on what it refuses)."""
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    return ServerArgs.from_cli_args(parser.parse_args(argv))
