"""Log lines shaped like SGLang's (``[time TPn] msg``) and NCCL's (``host:pid:tid [dev] NCCL``)."""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading

_NCCL_LEVELS = {"VERSION": 1, "WARN": 2, "INFO": 3, "ABORT": 2, "TRACE": 4}


def configure(log_level="info", prefix=""):
    """upstream configure_logger(): one line per record on stderr."""
    logging.basicConfig(
        level=getattr(logging, str(log_level).upper(), logging.INFO),
        format=f"[%(asctime)s{prefix}] %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
        stream=sys.stderr,
        force=True,
    )


def nccl(level, message, device=0):
    """Print an NCCL-style line. WARN lines always show; INFO only with NCCL_DEBUG=INFO.

    Real NCCL is silent unless NCCL_DEBUG is set; the twin always shows WARN lines
    because they are the failures the collection must be able to diagnose.
    """
    wanted = _NCCL_LEVELS.get(os.environ.get("NCCL_DEBUG", "WARN").upper(), 2)
    if level != "WARN" and _NCCL_LEVELS.get(level, 3) > wanted:
        return
    line = (
        f"{socket.gethostname()}:{os.getpid()}:{threading.get_native_id()} "
        f"[{device}] NCCL {level} {message}"
    )
    print(line, file=sys.stderr, flush=True)
