"""The scheduler child process (one per node, like one GPU per Spark).

It does what SGLang's scheduler process does on a real node: joins the job
(rendezvous + NCCL bootstrap, with the GID check NCCL's IB transport makes),
"loads weights", then runs decode steps. Rank 0 forwards every step to the
other ranks' schedulers over the rendezvous connections, so a dead peer is seen
at once. Its hang detector is the REAL ``WatchdogRaw`` from the mounted
watchdog.py, which SIGQUITs this process' parent (the server process) on a wedge.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import inspect
import logging
import os
import queue
import signal
import sys
import threading
import time
import traceback

from sparksim import args as argmod
from sparksim import dist, gpu, log, model, netinfo, upstream

logger = logging.getLogger("sglang.srt.managers.scheduler")

DECODE_LOG_INTERVAL = 40  # upstream --decode-log-interval default


class StartupError(Exception):
    """A check a real node would fail at start-up (exit 1)."""


def _env_float(name, default):
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return float(default)


def _prctl_setup(title):
    """kill_itself_when_parent_died() and a process name, via prctl."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        libc.prctl(15, title.encode()[:15])  # PR_SET_NAME
    except OSError:
        pass


class _FallbackWatchdogRaw:
    """Same shape as upstream's WatchdogRaw, for releases without watchdog.py (< 0.5.7)."""

    def __init__(
        self, debug_name, get_counter, is_active, watchdog_timeout, soft=False, dump_info=None
    ):
        self.debug_name = debug_name
        self.get_counter = get_counter
        self.is_active = is_active
        self.watchdog_timeout = watchdog_timeout
        self.soft = soft
        self.dump_info = dump_info
        self.parent_process = upstream._Process().parent()
        threading.Thread(target=self._watchdog_thread, daemon=True).start()

    def _watchdog_thread(self):
        last_counter, last_time = 0, time.perf_counter()
        while True:
            now = time.perf_counter()
            if self.is_active():
                counter = self.get_counter()
                if counter == last_counter:
                    if now > last_time + self.watchdog_timeout:
                        break
                else:
                    last_counter, last_time = counter, now
            time.sleep(self.watchdog_timeout / 2)
        if self.dump_info is not None and (info := self.dump_info()):
            logger.error(f"{self.debug_name} debug info:\n{info}")
        upstream._pyspy_dump_schedulers()
        logger.error(f"Watchdog timeout ({self.watchdog_timeout=})")
        print(file=sys.stderr, flush=True)
        print(file=sys.stdout, flush=True)
        if not self.soft:
            time.sleep(5)
            self.parent_process.send_signal(signal.SIGQUIT)


def _watchdog_class():
    try:
        module = upstream.load_watchdog()
    except ModuleNotFoundError:
        logger.info("watchdog.py is not part of this release; using the built-in equivalent")
        return _FallbackWatchdogRaw
    return getattr(module, "WatchdogRaw", _FallbackWatchdogRaw)


def _gloo_stall(rank, peer, addr, error, waited):
    logging.getLogger("torch.distributed").warning(
        f"[Gloo] rank {rank} cannot connect to rank {peer} at {addr} ({error}) "
        f"for {waited:.0f}s, still waiting"
    )


def _gloo_connected(rank, peer, addr):
    logger.info(f"[Gloo] rank {rank} connected to rank {peer} at {addr}")


def _mq_stall(rank, _peer, addr, error, waited):
    logger.warning(
        f"MessageQueue: rank {rank} cannot reach rank 0's broadcaster at tcp://{addr} "
        f"({error}) for {waited:.0f}s, still waiting"
    )


def _mq_connected(rank, _peer, addr):
    logger.info(f"MessageQueue: rank {rank} connected to rank 0's broadcaster at tcp://{addr}")


class Req:
    def __init__(self, msg):
        self.rid = msg["rid"]
        self.max_new = int(msg["max_new_tokens"])
        self.input_len = int(msg.get("input_len", 0))
        self.health = bool(msg.get("health"))
        self.warmup = bool(msg.get("warmup"))
        self.words, self.natural = model.answer(msg.get("prompt", ""))
        self.emitted = 0

    def __repr__(self):
        return f"Req(rid={self.rid}, max_new_tokens={self.max_new}, output_len={self.emitted})"


class Scheduler:
    def __init__(self, args, ipc_sock):
        self.args = args
        self.rank = args.node_rank
        self.nnodes = args.nnodes
        self.inbox = queue.Queue()
        self.ipc = dist.Conn(ipc_sock, "tokenizer", self.inbox) if ipc_sock is not None else None
        self.window = argmod.draft_window(args)
        self.tps = max(0.1, _env_float("SPARKSIM_DECODE_TPS", 100))
        self.boot_s = max(0.0, _env_float("SPARKSIM_BOOT_S", 300))
        self.log_every = max(0.2, _env_float("SPARKSIM_BOOTSTRAP_LOG_S", 10))
        self.max_running = args.max_running_requests or 32
        self.decode_log_interval = getattr(args, "decode_log_interval", None) or DECODE_LOG_INTERVAL
        self.forward_ct = 0
        self.cur_batch = None
        self.running = collections.OrderedDict()
        self.waiting = collections.deque()
        self.server = None  # rank 0: RendezvousServer
        self.leader = None  # workers: connection to rank 0
        self.watchdog = None
        self._decode_tic = time.perf_counter()
        self._decode_tokens = 0
        # Seed 000's graphs-on / speculative failure class, per profile: after this
        # many finished requests the next one stalls in the decode step until the
        # real WatchdogRaw kills the tree (0: never).
        self.stall_after = int(_env_float("SPARKSIM_STALL_AFTER", 0))
        # Profile C: draft tokens accepted wrongly, so answers come out wrong.
        self.wrong_tokens = os.environ.get("SPARKSIM_WRONG_TOKENS", "0") == "1"
        self.accept_rate = _env_float("SPARKSIM_ACCEPT_RATE", 1.0)
        # The wedge /health hides (a spin loop): while this file exists the scheduler keeps
        # answering /health but decodes nothing, and no batch is in flight, so SGLang's own
        # watchdog sees nothing either. Created and removed by the tests (docker exec).
        self.spin_file = os.environ.get("SPARKSIM_SPIN_FILE", "/tmp/sparksim-spin")
        self.spinning = False
        self.completed = 0

    # ---- start-up --------------------------------------------------------
    def init_distributed(self):
        if self.nnodes == 1:
            return
        try:
            gids = netinfo.select_gids(os.environ)
            ifname, ip = netinfo.socket_address(os.environ.get("NCCL_SOCKET_IFNAME"))
        except netinfo.NetError as exc:
            log.nccl("WARN", str(exc))
            raise StartupError(str(exc)) from None
        for gid in gids:
            log.nccl(
                "INFO",
                f"NET/IB : {gid['dev']} GID index {gid['index']} = {gid['ip']} "
                f"({gid['type']}, {gid['netdev']}), {gid['how']}",
            )
        log.nccl("INFO", f"Bootstrap: Using {ifname}:{ip}<0>")
        listener = dist.BootstrapListener(ip, self.rank)
        host, port = argmod.dist_addr(self.args)
        try:
            if self.rank == 0:
                self.server = dist.RendezvousServer(
                    port, self.nnodes, listener.address, self.log_every
                )
                logger.info(
                    f"Rendezvous: rank 0 listening on 0.0.0.0:{port} for {self.nnodes} ranks"
                )
                peers = self.server.wait_all(host)
                self.server.broadcast({"op": "peers", "peers": peers})
                dist.bootstrap_mesh(0, peers, self.log_every)
                self.server.gather("bootstrap_ok", "the NCCL bootstrap", self.log_every)
                self.server.broadcast({"op": "comm_ready"})
            else:
                self.leader, peers = dist.join(
                    host, port, self.rank, self.nnodes, listener.address, self.log_every
                )
                dist.bootstrap_mesh(self.rank, peers, self.log_every)
                self.leader.send({"op": "bootstrap_ok"})
                msg = self.leader.read_one()
                if msg is None:
                    raise dist.DistError(f"rank 0 at {host}:{port} closed the connection")
        except dist.DistError as exc:
            log.nccl("WARN", f"bootstrap: {exc}")
            raise StartupError(str(exc)) from None
        except OSError as exc:
            raise StartupError(f"rendezvous at {host}:{port} failed: {exc}") from None
        devices = " ".join(f"[{n}]{g['dev']}/RoCE [RO]" for n, g in enumerate(gids))
        log.nccl("INFO", f"NET/IB : Using {devices}; OOB {ifname}:{ip}<0>")
        log.nccl(
            "INFO",
            f"comm rank {argmod.tp_rank(self.args)} nRanks {self.args.tp_size} "
            f"nNodes {self.nnodes} localRanks {argmod.gpus_per_node(self.args)} - Init COMPLETE",
        )
        self.init_cpu_channels()

    def init_cpu_channels(self):
        """The cross-node channels that pick their address outside NCCL, after NCCL is up.

        torch's gloo group (every rank connects to every other rank's address, bound
        per GLOO_SOCKET_IFNAME) and SGLang's cross-node message queue (rank 0's
        MessageQueue publishes on the address get_local_ip_auto() picks: SGLANG_HOST_IP
        or a guess; the other ranks' readers connect to it). An address another rank
        cannot reach hangs the job here, after NCCL initialised, without an error.
        """
        try:
            gloo_ip, gloo_how = netinfo.gloo_address(os.environ)
            mq_ip, mq_how = netinfo.sglang_host_ip(os.environ)
        except netinfo.NetError as exc:
            logger.error(str(exc))
            raise StartupError(str(exc)) from None
        gloo = dist.BootstrapListener(gloo_ip, self.rank)
        logger.info(f"[Gloo] rank {self.rank} listening on {gloo.address} (from {gloo_how})")
        host, port = argmod.dist_addr(self.args)
        try:
            if self.rank == 0:
                mq = dist.BootstrapListener(mq_ip, 0)
                logger.info(f"MessageQueue: broadcaster on tcp://{mq.address} (from {mq_how})")
                got = self.server.gather("cpu_addrs", "the gloo addresses", self.log_every)
                table = {0: gloo.address, **{r: m["gloo"] for r, m in got.items()}}
                self.server.broadcast({"op": "cpu_table", "gloo": table, "mq": mq.address})
                dist.bootstrap_mesh(0, table, self.log_every, _gloo_stall, _gloo_connected)
                self.server.gather("cpu_ok", "the gloo group and the message queue", self.log_every)
            else:
                self.leader.send({"op": "cpu_addrs", "gloo": gloo.address})
                msg = self.leader.read_one()
                if msg is None:
                    raise dist.DistError(f"rank 0 at {host}:{port} closed the connection")
                table = {int(r): a for r, a in msg["gloo"].items()}
                dist.bootstrap_mesh(self.rank, table, self.log_every, _gloo_stall, _gloo_connected)
                dist.bootstrap_mesh(
                    self.rank, {0: msg["mq"]}, self.log_every, _mq_stall, _mq_connected
                )
                self.leader.send({"op": "cpu_ok"})
        except dist.DistError as exc:
            logger.error(f"cross-node channels: {exc}")
            raise StartupError(str(exc)) from None

    def check_gpu(self):
        """A DeepSeek-V4 model on an SM12x GPU goes through the release's SM120 gate."""
        cap = gpu.capability()
        if cap is None or cap[0] != 12:
            return
        config = model.model_config(self.args.model_path)
        if not gpu.is_deepseek_v4(config):
            return
        accepted = gpu.sm120_gate(cap)
        if accepted is None:
            logger.info(f"Compute capability {cap}: this release has no is_sm120() gate")
            return
        where = os.path.relpath(gpu.COMMON, upstream.SGLANG_PYTHON_ROOT)
        if not accepted:
            raise StartupError(
                f"{(config.get('architectures') or ['DeepSeek-V4'])[0]} needs the SM120 "
                f"kernel path, but is_sm120() in {where} returns False on compute capability "
                f"{cap[0]}.{cap[1]} (it accepts exactly (12, 0); GB10 reports (12, 1))"
            )
        logger.info(f"Compute capability {cap}: is_sm120() in {where} accepts it")

    def load(self):
        graphs = not self.args.disable_cuda_graph
        weights_s = self.boot_s * (0.7 if graphs else 1.0)
        tic = time.perf_counter()
        logger.info("Load weight begin. avail mem=119.42 GB")
        time.sleep(weights_s)
        logger.info(
            f"Load weight end. elapsed={time.perf_counter() - tic:.2f} s, "
            "type=SimulatedForCausalLM, dtype=torch.bfloat16, avail mem=101.07 GB, "
            "mem usage=18.35 GB."
        )
        if graphs:
            tic = time.perf_counter()
            logger.info(
                "Capture cuda graph begin. This can take up to several minutes. avail mem=60.20 GB"
            )
            time.sleep(self.boot_s - weights_s)
            logger.info(
                f"Capture cuda graph end. Time elapsed: {time.perf_counter() - tic:.2f} s. "
                "mem usage=1.93 GB. avail mem=58.27 GB."
            )
        try:
            if self.server is not None:
                self.server.gather("loaded", "model loading", self.log_every)
            elif self.leader is not None:
                self.leader.send({"op": "loaded"})
        except dist.DistError as exc:
            raise StartupError(str(exc)) from None

    def start_watchdog(self):
        cls = _watchdog_class()
        kwargs = {
            "debug_name": "Scheduler",
            "get_counter": lambda: self.forward_ct,
            "is_active": lambda: self.cur_batch is not None,
            "watchdog_timeout": self.args.watchdog_timeout,
            "soft": False,
            "dump_info": self.dump_info,
        }
        accepted = inspect.signature(cls.__init__).parameters
        self.watchdog = cls(**{k: v for k, v in kwargs.items() if k in accepted})

    def dump_info(self):
        batch = self.cur_batch or []
        return f"scheduler.cur_batch.batch_size()={len(batch)}\nscheduler.cur_batch.reqs={batch!r}"

    # ---- event loops -----------------------------------------------------
    def event_loop(self):
        if self.server is not None:
            for rank, conn in self.server.conns.items():
                conn.inbox = self.inbox
                conn.start_reader(tag=rank)
        if self.ipc is not None:
            self.ipc.start_reader(tag="ipc")
        if self.rank == 0:
            self.event_loop_normal()
        else:
            self.event_loop_follower()

    def event_loop_follower(self):
        """A worker's scheduler: run every step rank 0 forwards."""
        inbox = queue.Queue()
        self.leader.inbox = inbox
        self.leader.start_reader()
        while True:
            msg = inbox.get()
            if msg is None:
                raise dist.DistError(
                    "NCCL error: remote process exited or there was a network error "
                    f"(rank 0 at {self.leader.peer} closed the connection)"
                )
            op = msg.get("op")
            if op == "step":
                self.cur_batch = [f"step-{msg.get('ct')}"]
                self.forward_ct += 1
                self.leader.send({"op": "ack", "ct": msg.get("ct")})
                self.cur_batch = None
            elif op == "wedge":
                self.run_batch([f"Req(rid={msg.get('rid')}, max_new_tokens={msg.get('n')})"])
            elif op == "stall":
                self.run_batch_stalled(
                    [f"Req(rid={msg.get('rid')}, max_new_tokens={msg.get('n')})"]
                )

    def _handle(self, tag, msg):
        if msg is None:
            if tag == "ipc":
                raise dist.DistError("the tokenizer manager closed its connection")
            raise dist.DistError(
                "NCCL error: remote process exited or there was a network error "
                f"(rank {tag} at {self.server.conns[tag].peer} closed the connection)"
            )
        if tag != "ipc":
            return msg  # an ack
        op = msg.get("op")
        if op == "gen":
            req = Req(msg)
            if req.health and (self.running or self.waiting):
                self.ipc.send({"op": "health_ok", "rid": req.rid})
            else:
                self.waiting.append(req)
        elif op == "abort":
            if msg.get("crash"):
                raise RuntimeError("aclose(): asynchronous generator is already running")
            self.running.pop(msg["rid"], None)
            self.waiting = collections.deque(r for r in self.waiting if r.rid != msg["rid"])
        return None

    def _drain(self, block):
        while True:
            try:
                tag, msg = self.inbox.get(block=block)
            except queue.Empty:
                return
            self._handle(tag, msg)
            block = False

    def _stalls(self, req):
        """Seed 000: after a few good completions a graphs-on decode step never returns."""
        return (
            self.stall_after > 0
            and self.completed >= self.stall_after
            and not req.health
            and not req.warmup
        )

    def _wedges(self, req):
        """Seed Pitfall 3: a request shorter than the draft window never finishes verify."""
        return (
            self.window > 0 and 0 < req.max_new <= self.window and not req.health and not req.warmup
        )

    def event_loop_normal(self):
        period = 1.0 / self.tps
        deadline = time.perf_counter()
        while True:
            self._drain(block=not (self.running or self.waiting))
            admitted = []
            while self.waiting and len(self.running) < self.max_running:
                req = self.waiting.popleft()
                self.running[req.rid] = req
                admitted.append(req)
            if admitted:
                logger.info(
                    f"Prefill batch, #new-seq: {len(admitted)}, "
                    f"#new-token: {sum(r.input_len for r in admitted)}, #cached-token: 0, "
                    f"token usage: 0.00, #running-req: {len(self.running) - len(admitted)}, "
                    f"#queue-req: {len(self.waiting)}, "
                )
                for req in admitted:
                    if self._wedges(req):
                        self._forward_wedge(req)
                    elif self._stalls(req):
                        self._forward_stall(req)
            if not self.running:
                deadline = time.perf_counter()
                continue
            if self._spins():
                deadline = time.perf_counter()
                continue
            self.cur_batch = list(self.running.values())
            self._forward_step()
            self._emit()
            self.forward_ct += 1
            self.cur_batch = None
            if self.forward_ct % self.decode_log_interval == 0:
                self._log_decode()
            # A late step does not make the next one shorter (a GPU step takes its time
            # whatever the host did), so N tokens take at least N periods.
            deadline = max(deadline + period, time.perf_counter())
            delay = deadline - time.perf_counter()
            if delay > 0:
                time.sleep(delay)

    def _spins(self):
        """While the spin file exists: answer what arrives (health checks), decode nothing."""
        spinning = os.path.exists(self.spin_file)
        if spinning != self.spinning:
            self.spinning = spinning
            logger.info(f"spin {'started' if spinning else 'ended'} ({self.spin_file})")
        if not spinning:
            return False
        try:
            tag, msg = self.inbox.get(timeout=0.2)
        except queue.Empty:
            return True
        self._handle(tag, msg)
        return True

    def _forward_step(self):
        """One TP step: every worker must acknowledge it (a collective)."""
        if self.server is None:
            return
        msg = {"op": "step", "ct": self.forward_ct, "bs": len(self.running)}
        for conn in self.server.conns.values():
            conn.send(msg)
        waiting = set(self.server.conns)
        while waiting:
            tag, reply = self.inbox.get()
            ack = self._handle(tag, reply)
            if ack is not None and ack.get("op") == "ack":
                waiting.discard(tag)

    def _forward_wedge(self, req):
        if self.server is not None:
            for conn in self.server.conns.values():
                conn.send({"op": "wedge", "rid": req.rid, "n": req.max_new})
        self.run_batch(list(self.running.values()))

    def _forward_stall(self, req):
        if self.server is not None:
            for conn in self.server.conns.values():
                conn.send({"op": "stall", "rid": req.rid, "n": req.max_new})
        self.run_batch_stalled(list(self.running.values()))

    def run_batch_stalled(self, batch):
        self.cur_batch = batch
        self.forward_decode_cuda_graph(batch)

    def forward_decode_cuda_graph(self, batch):
        # The scheduler stall of seed 000 (B, C, D): a decode step that never
        # completes, so forward_ct stops and the watchdog fires.
        self.cuda_graph_replay(batch)

    def cuda_graph_replay(self, batch):
        threading.Event().wait()

    def run_batch(self, batch):
        self.cur_batch = batch
        self.forward_batch_speculative_generation(batch)

    def forward_batch_speculative_generation(self, batch):
        # The draft window covers the whole request: verify waits for tokens that the
        # target never schedules, and no step completes again (the watchdog's case).
        self.verify(batch)

    def verify(self, batch):
        threading.Event().wait()

    def _emit(self):
        items = []
        for rid, req in list(self.running.items()):
            finish, word = None, None
            if req.emitted >= req.max_new:
                finish = "length"
            else:
                try:
                    word = next(req.words)
                except StopIteration:
                    finish = "stop"
                else:
                    req.emitted += 1
                    self._decode_tokens += 1
                    if self.wrong_tokens and req.natural:
                        word = model.wrong(word)
                    if req.emitted >= req.max_new:
                        finish = "length"
            items.append([rid, word, finish])
            if finish:
                del self.running[rid]
                if not req.health and not req.warmup:
                    self.completed += 1
        if items:
            self.ipc.send({"op": "out", "items": items})

    def _log_decode(self):
        now = time.perf_counter()
        rate = self._decode_tokens / max(now - self._decode_tic, 1e-6)
        self._decode_tic, self._decode_tokens = now, 0
        graph = not self.args.disable_cuda_graph
        msg = (
            f"Decode batch, #running-req: {len(self.running)}, "
            f"#token: {sum(r.input_len + r.emitted for r in self.running.values())}, "
            f"token usage: 0.00, "
        )
        if self.window:
            msg += f"accept len: {1 + self.accept_rate:.2f}, accept rate: {self.accept_rate:.2f}, "
        msg += (
            f"cuda graph: {graph}, gen throughput (token/s): {rate:.2f}, "
            f"#queue-req: {len(self.waiting)}, "
        )
        logger.info(msg)


def run_scheduler_process(args, ipc_sock, pipe_writer):
    """Target of the spawned child (upstream: scheduler.run_scheduler_process)."""
    prefix = argmod.log_prefix(args)
    _prctl_setup(f"sglang::scheduler{prefix.replace(' ', '_')}")
    parent = upstream._Process().parent()
    log.configure(args.log_level, prefix)
    scheduler = None
    try:
        scheduler = Scheduler(args, ipc_sock)
        scheduler.check_gpu()
        scheduler.init_distributed()
        scheduler.load()
        scheduler.start_watchdog()
        pipe_writer.send({"status": "ready", "max_total_num_tokens": 1 << 20})
        scheduler.event_loop()
    except StartupError as exc:
        logger.error(f"Scheduler start-up failed: {exc}")
        with contextlib.suppress(OSError):
            pipe_writer.send({"status": "error", "message": str(exc)})
        sys.exit(1)
    except Exception as exc:
        if isinstance(exc, dist.DistError):
            log.nccl("WARN", f"NET/Socket : {exc}")
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        logger.error(f"Scheduler hit an exception: {text}")
        parent.send_signal(signal.SIGQUIT)
        sys.exit(1)
