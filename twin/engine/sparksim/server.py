"""``python3 -m sglang.launch_server`` of the twin: the server (main) process.

Process tree per node, as in SGLang:

    python3 -m sglang.launch_server        main: args, real tokenizer_manager import,
    │                                      HTTP API (rank 0) or dummy health (rank >= 1),
    │                                      SIGQUIT handler that kills the whole tree
    └── sglang::scheduler (spawned child)  rendezvous, NCCL bootstrap, weights, decode,
                                           the real WatchdogRaw (SIGQUITs its parent)
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time

from sparksim import api, http, log, model, scheduler, upstream
from sparksim import args as argmod

logger = logging.getLogger("sglang.launch_server")

KILLED_EXIT = 128 + signal.SIGKILL


def _version():
    try:
        from sglang.version import __version__

        return __version__
    except ImportError:
        return "unknown"


def _die_with_tree(exit_code=KILLED_EXIT):
    """After kill_process_tree(os.getpid()): PID 1 survives its own SIGKILL, so exit."""
    upstream.kill_process_tree(os.getpid(), include_parent=False)
    os._exit(exit_code)


def launch_phase_sigquit_handler(signum=None, frame=None):
    """upstream engine._set_envs_and_config's handler."""
    logger.error("Received sigquit from a child process. It usually means the child failed.")
    upstream.kill_process_tree(os.getpid())
    _die_with_tree()


def _running_phase_handler(tm_module, frontend):
    """upstream SignalHandler(tokenizer_manager).running_phase_sigquit_handler, when it exists."""
    cls = getattr(tm_module, "SignalHandler", None)
    real = getattr(cls, "running_phase_sigquit_handler", None) if cls is not None else None

    def handler():
        if real is not None:
            try:
                cls(frontend.validator).running_phase_sigquit_handler()
            except Exception as exc:  # keep the kill even if the handler's extras fail
                logger.error(f"running_phase_sigquit_handler failed: {exc!r}")
        else:
            logger.error("SIGQUIT received. It usually means one child failed.")
            upstream.kill_process_tree(os.getpid())
        _die_with_tree()

    return handler


def _check_inputs(args):
    errors = argmod.check(args)
    for error in errors:
        logger.error(f"AssertionError: {error}")
    if errors:
        return False
    try:
        model.check_model_path(args.model_path)
    except model.ModelError as exc:
        logger.error(str(exc))
        return False
    try:
        model.check_model_revision(args.model_path, os.environ.get("SPARKFLEET_MODEL_REVISION"))
        model.check_chat_template(getattr(args, "chat_template", None))
    except model.ModelError as exc:
        logger.error(str(exc))
        return False
    draft = args.speculative_draft_model_path
    if draft and not os.path.isdir(draft):
        if draft.startswith(("/", ".", "~")) or draft.count("/") != 1:
            logger.error(
                f"OSError: speculative draft model {draft} is not a local directory and not a "
                "Hugging Face repo id"
            )
            return False
        revision = args.speculative_draft_model_revision
        if os.environ.get("HF_HUB_OFFLINE", "") in ("1", "true", "True", "ON", "YES"):
            # As huggingface_hub does offline: only a complete cached snapshot will do.
            snapshot = model.hf_cache_snapshot(draft, revision)
            if snapshot is None:
                logger.error(
                    "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate "
                    f"cached snapshot folder for {draft} at revision {revision or 'main'} "
                    "on the local "
                    "disk and outgoing traffic has been disabled (HF_HUB_OFFLINE=1)."
                )
                return False
            logger.info(
                f"Draft model {draft} loaded from the local cache: {snapshot} (HF_HUB_OFFLINE=1)"
            )
        elif not model.hf_cache_has(draft, revision):
            logger.warning(
                f"Draft model {draft} (revision {revision or 'main'}) "
                "is not in the local Hugging Face cache; the twin does not download it"
            )
    return True


def _wait_ready(reader, proc):
    try:
        data = reader.recv()
    except EOFError:
        logger.error("Rank 0 scheduler is dead. Please check if there are relevant logs.")
        proc.join()
        logger.error(f"Exit code: {proc.exitcode}")
        return None
    if data.get("status") != "ready":
        logger.error("Initialization failed. Please see the error messages above.")
        return None
    return data


def main(argv=None):
    args = argmod.parse(sys.argv[1:] if argv is None else argv)
    log.configure(args.log_level)
    if not _check_inputs(args):
        return 1
    context_len = model.context_length(args.model_path, args.context_length)
    tm_module = upstream.load_tokenizer_manager()
    signal.signal(signal.SIGQUIT, launch_phase_sigquit_handler)
    signal.signal(signal.SIGTERM, _sigterm)
    # Upstream (0.5.9 launch path) logs the dataclass repr, API key included; the
    # stand-in does the same so that the launcher's log masking is put to the test.
    fields = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(args).items()))
    logger.info(f"server_args=ServerArgs({fields})")

    ctx = multiprocessing.get_context("spawn")
    reader, writer = ctx.Pipe(duplex=False)
    main_sock, sched_sock = socket.socketpair()
    proc = ctx.Process(
        target=scheduler.run_scheduler_process,
        args=(args, sched_sock if args.node_rank == 0 else None, writer),
        name="scheduler",
    )
    proc.start()
    writer.close()
    sched_sock.close()
    if _wait_ready(reader, proc) is None:
        upstream.kill_process_tree(os.getpid(), include_parent=False)
        return 1

    if args.node_rank >= 1:
        return _run_worker(args, proc)
    return asyncio.run(_run_head(args, tm_module, context_len, main_sock, proc))


def _run_worker(args, proc):
    """upstream: non-zero ranks serve a dummy health endpoint and wait for the scheduler."""

    def serve():
        async def run():
            route = api.dummy_metrics_route if args.enable_metrics else api.dummy_route
            server = await http.start(args.host, args.port, route)
            async with server:
                await server.serve_forever()

        try:
            asyncio.run(run())
        except Exception as exc:
            logger.error(f"Dummy health check server failed: {exc}")

    threading.Thread(target=serve, daemon=True).start()
    proc.join()
    logger.error(f"Scheduler or DataParallelController {proc.pid} terminated with {proc.exitcode}")
    return 1


def _sigterm(signum=None, frame=None):
    logger.warning(f"SIGTERM received. signum={int(signum or 15)} {frame=}. Shutting down...")
    upstream.kill_process_tree(os.getpid(), include_parent=False)
    os._exit(0)


async def _run_head(args, tm_module, context_len, main_sock, proc):
    frontend = api.Frontend(args, tm_module, context_len, _version())
    await frontend.attach(main_sock)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGQUIT, _running_phase_handler(tm_module, frontend))
    loop.add_signal_handler(signal.SIGTERM, _sigterm, signal.SIGTERM, None)
    server = await http.start(args.host, args.port, api.Api(frontend).route)
    print(
        f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)",
        flush=True,
    )
    tic = time.time()
    await frontend.warmup()
    logger.info(f"End of prefill/decode warmup. elapsed={time.time() - tic:.2f} s")
    logger.info("The server is fired up and ready to roll!")
    while proc.is_alive():
        await asyncio.sleep(0.5)
    server.close()
    logger.error(f"Scheduler {proc.pid} terminated with {proc.exitcode}")
    return 1
