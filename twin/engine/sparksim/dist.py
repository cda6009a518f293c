"""Ranks meeting like torch.distributed + NCCL, over plain TCP.

* Rendezvous (torch's TCPStore at --dist-init-addr): rank 0 listens, every other
  rank connects and registers; the connection then carries the job's control
  traffic (rank 0 forwards each scheduler step on it).
* NCCL bootstrap: every rank listens on the first IPv4 of NCCL_SOCKET_IFNAME,
  publishes that address through the rendezvous and connects to every other
  rank's address. One unreachable address stalls the whole job, silently for
  the other ranks, as NCCL's bootstrap does (seed Pitfall 1).

Messages are JSON objects, one per line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import socket
import threading
import time

from sparksim import log

logger = logging.getLogger("sglang.srt.distributed")

CONNECT_TIMEOUT_S = 1.0


class DistError(Exception):
    """A peer vanished: what NCCL/gloo report as a remote error."""


class Conn:
    """A JSON-lines connection whose reader thread feeds a queue (None on EOF)."""

    def __init__(self, sock, peer="", inbox=None):
        self.sock = sock
        self.peer = peer
        self.inbox = inbox if inbox is not None else queue.Queue()
        self._lock = threading.Lock()
        self._file = sock.makefile("rb")
        self.closed = False

    def start_reader(self, tag=None):
        threading.Thread(target=self._read_loop, args=(tag,), daemon=True).start()
        return self

    def _read_loop(self, tag):
        try:
            for line in self._file:
                msg = json.loads(line)
                self.inbox.put((tag, msg) if tag is not None else msg)
        except (OSError, ValueError):
            pass
        self.closed = True
        self.inbox.put((tag, None) if tag is not None else None)

    def read_one(self, timeout=None):
        """Read one message synchronously (before the reader thread starts)."""
        self.sock.settimeout(timeout)
        line = self._file.readline()
        self.sock.settimeout(None)
        if not line:
            return None
        return json.loads(line)

    def send(self, msg):
        data = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
        with self._lock:
            try:
                self.sock.sendall(data)
            except OSError as exc:
                raise DistError(f"send to {self.peer} failed: {exc}") from exc

    def close(self):
        with contextlib.suppress(OSError):
            self.sock.close()


def _listen(host, port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(64)
    return sock


def _connect(host, port, timeout=CONNECT_TIMEOUT_S):
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class BootstrapListener:
    """NCCL's bootstrap socket: accepts peers' handshakes on an ephemeral port."""

    def __init__(self, ip, rank):
        self.ip = ip
        self.rank = rank
        self.sock = _listen(ip, 0)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self):
        return f"{self.ip}:{self.port}"

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handshake, args=(conn,), daemon=True).start()

    def _handshake(self, conn):
        try:
            conn.settimeout(5)
            conn.recv(256)
            conn.sendall(json.dumps({"rank": self.rank, "ok": True}).encode() + b"\n")
        except OSError:
            pass
        finally:
            conn.close()


def _nccl_stall(rank, peer, addr, error, waited):
    log.nccl(
        "WARN",
        f"bootstrap: rank {rank} cannot reach rank {peer} at {addr} "
        f"({error}) for {waited:.0f}s, still waiting",
    )


def _nccl_connected(rank, peer, addr):
    log.nccl("INFO", f"bootstrap: rank {rank} connected to rank {peer} at {addr}")


def bootstrap_mesh(rank, peers, log_every, on_stall=_nccl_stall, on_connect=_nccl_connected):
    """Connect to every other rank's bootstrap address; stall (logging) until all answer."""
    pending = {int(r): addr for r, addr in peers.items() if int(r) != rank}
    start = last_log = time.monotonic()
    errors = {}
    while pending:
        for peer, addr in sorted(pending.items()):
            host, _, port = addr.rpartition(":")
            try:
                sock = _connect(host, int(port))
                sock.sendall(json.dumps({"rank": rank}).encode() + b"\n")
                sock.settimeout(5)
                sock.recv(256)
                sock.close()
                del pending[peer]
                on_connect(rank, peer, addr)
            except OSError as exc:
                errors[peer] = exc.strerror or type(exc).__name__
                if isinstance(exc, socket.timeout):
                    errors[peer] = "connect timed out"
        if not pending:
            break
        now = time.monotonic()
        if now - last_log >= log_every:
            last_log = now
            for peer, addr in sorted(pending.items()):
                on_stall(rank, peer, addr, errors.get(peer), now - start)
        time.sleep(0.5)


class RendezvousServer:
    """Rank 0's store: members register, get the peer table, then stay connected."""

    def __init__(self, port, nnodes, bootstrap_addr, log_every):
        self.nnodes = nnodes
        self.port = port
        self.log_every = log_every
        self.addrs = {0: bootstrap_addr}
        self.conns = {}
        self.sealed = False
        self._cond = threading.Condition()
        self.sock = _listen("0.0.0.0", port)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                sock, peer = self.sock.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._register, args=(sock, peer[0]), daemon=True).start()

    def _register(self, sock, peer_ip):
        conn = Conn(sock, peer=peer_ip)
        try:
            msg = conn.read_one(timeout=30)
        except (OSError, ValueError):
            msg = None
        if not msg or msg.get("op") != "join":
            conn.close()
            return
        rank, nnodes = msg.get("rank"), msg.get("nnodes")
        with self._cond:
            problem = None
            if nnodes != self.nnodes:
                problem = f"rank {rank} says --nnodes {nnodes}, rank 0 has --nnodes {self.nnodes}"
            elif not isinstance(rank, int) or not 0 < rank < self.nnodes:
                problem = f"rank {rank} is not a worker rank of a {self.nnodes}-node job"
            elif rank in self.conns and not self.conns[rank].closed:
                problem = f"rank {rank} already joined from {self.conns[rank].peer}"
            elif self.sealed:
                problem = f"rank {rank} tried to join a job that has already started"
            if problem:
                logger.error(f"Rendezvous: rejected {peer_ip}: {problem}")
                with contextlib.suppress(DistError):
                    conn.send({"op": "error", "message": problem})
                conn.close()
                return
            self.conns[rank] = conn
            self.addrs[rank] = msg["bootstrap"]
            logger.info(
                f"Rendezvous: rank {rank} joined from {peer_ip} "
                f"({len(self.conns) + 1}/{self.nnodes})"
            )
            self._cond.notify_all()

    def _alive(self):
        for rank, conn in list(self.conns.items()):
            if conn.closed:
                logger.warning(f"Rendezvous: rank {rank} left before the job started")
                del self.conns[rank]
                self.addrs.pop(rank, None)
        return len(self.conns) + 1

    def wait_all(self, host):
        """Block until every rank registered; log the missing ones periodically."""
        start = time.monotonic()
        with self._cond:
            while True:
                # Detect members that disconnected while waiting (peek at the socket).
                for conn in self.conns.values():
                    _peek_closed(conn)
                if self._alive() == self.nnodes:
                    self.sealed = True
                    break
                self._cond.wait(self.log_every)
                if self._alive() < self.nnodes:
                    missing = [r for r in range(1, self.nnodes) if r not in self.conns]
                    logger.info(
                        f"Rendezvous: waiting for rank(s) {', '.join(map(str, missing))} at "
                        f"{host}:{self.port} ({self._alive()}/{self.nnodes} joined, "
                        f"{time.monotonic() - start:.0f}s)"
                    )
        return dict(self.addrs)

    def broadcast(self, msg):
        for conn in self.conns.values():
            conn.send(msg)

    def gather(self, op, what, log_every):
        """Wait for one message `op` from every worker (read before readers start).

        Returns the messages by rank.
        """
        got = {}
        start = last = time.monotonic()
        waiting = set(self.conns)
        sel_queue = queue.Queue()
        for rank in waiting:
            threading.Thread(
                target=_read_into, args=(self.conns[rank], rank, sel_queue), daemon=True
            ).start()
        while waiting:
            try:
                rank, msg = sel_queue.get(timeout=1)
            except queue.Empty:
                now = time.monotonic()
                if now - last >= log_every:
                    last = now
                    logger.info(
                        f"Waiting for {what} of rank(s) {', '.join(map(str, sorted(waiting)))} "
                        f"({now - start:.0f}s)"
                    )
                continue
            if msg is None:
                raise DistError(
                    f"rank {rank} ({self.conns[rank].peer}) closed the connection during {what}"
                )
            if msg.get("op") == op:
                waiting.discard(rank)
                got[rank] = msg
        return got


def _peek_closed(conn):
    try:
        conn.sock.setblocking(False)
        data = conn.sock.recv(1, socket.MSG_PEEK)
        if data == b"":
            conn.closed = True
    except BlockingIOError:
        pass
    except OSError:
        conn.closed = True
    finally:
        try:
            conn.sock.setblocking(True)
        except OSError:
            conn.closed = True


def _read_into(conn, rank, out):
    try:
        msg = conn.read_one()
    except (OSError, ValueError):
        msg = None
    out.put((rank, msg))


def join(host, port, rank, nnodes, bootstrap_addr, log_every):
    """A worker registers at rank 0's store, retrying until it answers; returns (conn, peers)."""
    start = last = time.monotonic()
    while True:
        try:
            sock = _connect(host, port, timeout=2)
            break
        except OSError as exc:
            now = time.monotonic()
            if now - last >= log_every:
                last = now
                reason = "connect timed out" if isinstance(exc, socket.timeout) else exc.strerror
                logger.info(
                    f"Rendezvous: rank 0 at {host}:{port} not reachable ({reason}), "
                    f"retrying ({now - start:.0f}s)"
                )
            time.sleep(0.5)
    conn = Conn(sock, peer=f"{host}:{port}")
    conn.send({"op": "join", "rank": rank, "nnodes": nnodes, "bootstrap": bootstrap_addr})
    logger.info(f"Rendezvous: rank {rank} registered at {host}:{port}, waiting for all ranks")
    msg = conn.read_one()
    if msg is None:
        raise DistError(f"rank 0 at {host}:{port} closed the connection during the rendezvous")
    if msg.get("op") == "error":
        raise DistError(f"rank 0 refused the rendezvous: {msg.get('message')}")
    return conn, {int(k): v for k, v in msg["peers"].items()}
