"""Helpers for the engine-image tests: docker, HTTP, GID tables, test patches, clusters.

Every container and network these tests create is named ``sgltest-<pid>-...`` and
removed at the end; nothing else on the docker host is touched.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import shlex
import subprocess
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VERSION = "0.5.9"
IMAGE = f"sparkfleet-twin/sglang:{VERSION}"
IMAGE_UNCHECKED = f"sparkfleet-twin/sglang:{VERSION}-unchecked-pyc"
BASE_IMAGE = "sparkfleet-twin/base:bookworm"
SGL = "/sgl-workspace/sglang/python/sglang/srt"
TM_PATH = f"{SGL}/managers/tokenizer_manager.py"
WD_PATH = f"{SGL}/utils/watchdog.py"
WD_PYC = f"{SGL}/utils/__pycache__/watchdog.cpython-311.pyc"
SYSFS = "/opt/sparksim/sys/class/infiniband"
HCA = "rocep1s0f0"
ROCE_IF = "enp1s0f0np0"
MGMT_IF = "enP7s7"
PORT = 30000
DIST_PORT = 23000
PREFIX = f"sgltest-{os.getpid()}"
READY_LINE = "The server is fired up and ready to roll!"

CLAMP_MARK = "HARDEN-PATCH max_tokens_clamp (tests/twin test patch)"
DUMP_MARK = "HARDEN-PATCH watchdog_stack_dump (tests/twin test patch)"
DUMP_LOG = "HARDEN-PATCH stack dump of thread"


# ---- docker --------------------------------------------------------------
def docker(*args, check=True, timeout=120, input=None):
    proc = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, input=input
    )
    if check and proc.returncode != 0:
        raise RuntimeError(f"docker {shlex.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc


def remove_containers(names):
    # One at a time: parallel removals on one network can leave docker's endpoint
    # count stale (see twin/playbooks/tasks/remove_networks.yml).
    for name in names:
        if name.startswith("sgltest-"):
            docker("rm", "-f", name, check=False)


def container_state(name):
    """(running, exit_code) of a container, or (False, None) if it is gone."""
    proc = docker("inspect", "-f", "{{.State.Running}} {{.State.ExitCode}}", name, check=False)
    if proc.returncode != 0:
        return False, None
    running, code = proc.stdout.split()
    return running == "true", int(code)


def logs(name):
    proc = docker("logs", name, check=False)
    return proc.stdout + proc.stderr


def wait_for(predicate, timeout, interval=0.25):
    """Poll until predicate() is truthy; return its value (or the last falsy one)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


# ---- http ----------------------------------------------------------------
def request(url, method="GET", body=None, headers=None, timeout=10):
    """(status, text); status 0 when the connection fails."""
    parts = urllib.parse.urlsplit(url)
    data = json.dumps(body).encode() if body is not None else None
    hdrs = {"Content-Type": "application/json"} if data is not None else {}
    hdrs.update(headers or {})
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request(method, parts.path or "/", body=data, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    except OSError:
        return 0, ""
    finally:
        conn.close()


def chat(url, content, max_tokens=None, key=None, stream=False, timeout=30):
    body = {"model": "x", "messages": [{"role": "user", "content": content}]}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return request(f"{url}/v1/chat/completions", "POST", body, headers, timeout=timeout)


# ---- GID tables (twin/tools/gidtable.py) ---------------------------------
def _gidtable():
    spec = importlib.util.spec_from_file_location("gidtable", ROOT / "twin/tools/gidtable.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GIDTABLE = _gidtable()


def write_gid_table(root, layout):
    """Write <root>/rocep1s0f0/ports/1 for ROCE_IF; return {ipv4: RoCE v2 index}."""
    addresses = GIDTABLE.expand(layout, ROCE_IF, mac="02:42:0a:1e:00:03", ipv4=[])
    GIDTABLE.write_table(str(root), HCA, 1, ROCE_IF, addresses, 16)
    return {addr: 2 * i + 1 for i, addr in enumerate(addresses) if addr and "." in addr}


# ---- test patches (small, clearly marked; the real patch engine is elsewhere) --
def clamp_patch(source):
    anchor = 'max_new_tokens = obj.sampling_params.get("max_new_tokens")'
    out = []
    for line in source.splitlines(keepends=True):
        out.append(line)
        if line.strip() == anchor:
            pad = line[: len(line) - len(line.lstrip())]
            out += [
                f"{pad}# {CLAMP_MARK}\n",
                f"{pad}if max_new_tokens is not None and 0 < max_new_tokens < 16:\n",
                f'{pad}    obj.sampling_params["max_new_tokens"] = max_new_tokens = 16\n',
            ]
    text = "".join(out)
    assert CLAMP_MARK in text, "clamp anchor not found in tokenizer_manager.py"
    return text


def stack_dump_patch(source):
    out = []
    for line in source.splitlines(keepends=True):
        if line.strip() == "pyspy_dump_schedulers()":
            pad = line[: len(line) - len(line.lstrip())]
            out += [
                f"{pad}# {DUMP_MARK}\n",
                f"{pad}import traceback as _harden_tb\n",
                f"{pad}for _tid, _frame in sys._current_frames().items():\n",
                f"{pad}    _stack = ''.join(_harden_tb.format_stack(_frame))\n",
                f'{pad}    logger.error("{DUMP_LOG} %s:\\n%s", _tid, _stack)\n',
            ]
        out.append(line)
    text = "".join(out)
    assert DUMP_MARK in text, "pyspy_dump_schedulers() anchor not found in watchdog.py"
    return text


class Cluster:
    """N simulated Sparks on the module's two planes, launched like the collection does.

    Each node is a container with NET_ADMIN that renames its NICs to the Spark names
    (``enP7s7`` management, ``enp1s0f0np0`` RoCE), optionally puts an old IPv4 first
    on the RoCE NIC (seed Pitfall 1), then execs the launch command of the runtime
    contract: ``python3 [--check-hash-based-pycs always] -m sglang.launch_server ...``.
    """

    def __init__(
        self,
        planes,
        tmp,
        name,
        *,
        image=IMAGE,
        nnodes=2,
        flags=(),
        env=None,
        mounts=(),
        check_hash=True,
        gid_layouts=None,
        gid_index=None,
        old_first=None,
        socket_ifname=MGMT_IF,
        model_dir=None,
    ):
        self.planes = planes
        self.slot = next(planes["slots"])
        self.name = f"{PREFIX}-{name}"
        self.tmp = Path(tmp)
        self.image = image
        self.nnodes = nnodes
        self.flags = list(flags)
        self.env = dict(env or {})
        self.mounts = list(mounts)
        self.check_hash = check_hash
        self.old_first = dict(old_first or {})
        self.socket_ifname = socket_ifname
        self.model_dir = model_dir
        self.gid_index = {}
        self.gid_roots = {}
        gid_index = dict(gid_index or {})
        for rank in range(nnodes):
            root = self.tmp / f"gid-r{rank}"
            layout = (gid_layouts or {}).get(rank) or (
                "link-local,empty,empty,ipv4:{ip}" if rank == 0 else "link-local,empty,ipv4:{ip}"
            )
            layout = layout.format(ip=self.roce_ip(rank), old=self.old_ip(rank))
            indexes = write_gid_table(root, layout)
            self.gid_roots[rank] = root
            self.gid_index[rank] = gid_index.get(rank, indexes.get(self.roce_ip(rank)))
            for path in [root, *root.rglob("*")]:
                path.chmod(0o755 if path.is_dir() else 0o644)

    # addresses ------------------------------------------------------------
    def _ip(self, plane, rank):
        net = self.planes["subnets"][plane]
        return str(net.network_address + 10 * self.slot + rank)

    def mgmt_ip(self, rank):
        return self._ip("mgmt", rank)

    def roce_ip(self, rank):
        return self._ip("roce", rank)

    def old_ip(self, rank):
        """An old cross-wire address no other node can route to."""
        return f"10.254.{self.slot}.{rank + 1}"

    def node(self, rank):
        return f"{self.name}-r{rank}"

    def url(self, rank=0):
        return f"http://{self.mgmt_ip(rank)}:{PORT}"

    # launch ---------------------------------------------------------------
    def launch_args(self, rank):
        return [
            "--model-path", "/models/tiny",
            "--served-model-name", "qwen3.8-27b",
            "--tp-size", str(self.nnodes),
            "--nnodes", str(self.nnodes),
            "--node-rank", str(rank),
            "--dist-init-addr", f"{self.roce_ip(0)}:{DIST_PORT}",
            "--host", "0.0.0.0",
            "--port", str(PORT),
            *self.flags,
        ]  # fmt: skip

    def _script(self, rank):
        roce_prefix = self.planes["subnets"]["roce"].prefixlen
        lines = [
            "set -e",
            'ren() { dev=$(ip -o -4 addr show | awk -v a="$1" \'$4 ~ "^"a"/" {print $2; exit}\');'
            ' ip link set "$dev" down; ip link set "$dev" name "$2"; ip link set "$2" up; }',
            f"ren {self.mgmt_ip(rank)} {MGMT_IF}",
            f"ren {self.roce_ip(rank)} {ROCE_IF}",
        ]
        if self.old_first.get(rank):
            lines += [
                f"ip addr flush dev {ROCE_IF}",
                f"ip addr add {self.old_ip(rank)}/24 dev {ROCE_IF}",
                f"ip addr add {self.roce_ip(rank)}/{roce_prefix} dev {ROCE_IF}",
            ]
        python = "python3 --check-hash-based-pycs always" if self.check_hash else "python3"
        lines.append(f'exec {python} -m sglang.launch_server "$@"')
        return "\n".join(lines)

    def start(self, ranks=None):
        """Workers first (highest rank first), the head last, like the playbook."""
        ranks = list(range(self.nnodes)) if ranks is None else list(ranks)
        for rank in sorted(ranks, reverse=True):
            self._start_node(rank)
        return self

    def _start_node(self, rank):
        name = self.node(rank)
        env = {
            "PYTHONDONTWRITEBYTECODE": "1",
            "NCCL_SOCKET_IFNAME": self.socket_ifname,
            "NCCL_IB_HCA": HCA,
            "NCCL_IB_ROCE_VERSION_NUM": "2",
            "NCCL_IB_ADDR_RANGE": str(self.planes["subnets"]["roce"]),
            "NCCL_DEBUG": "INFO",
            "SPARKSIM_SYSFS_ROOT": SYSFS,
            "SPARKSIM_BOOT_S": "1",
            "SPARKSIM_BOOTSTRAP_LOG_S": "1",
        }
        if self.gid_index.get(rank) is not None:
            env["NCCL_IB_GID_INDEX"] = str(self.gid_index[rank])
        env.update(self.env)
        cmd = ["create", "--name", name, "--hostname", name, "--cap-add", "NET_ADMIN"]
        cmd += ["--network", self.planes["names"]["mgmt"], "--ip", self.mgmt_ip(rank)]
        for key, value in env.items():
            cmd += ["-e", f"{key}={value}"]
        cmd += ["-v", f"{self.gid_roots[rank]}:{SYSFS}:ro"]
        if self.model_dir is not None:
            cmd += ["-v", f"{self.model_dir}:/models/tiny:ro"]
        for host, target in self.mounts:
            cmd += ["-v", f"{host}:{target}:ro"]
        cmd += [self.image, "sh", "-c", self._script(rank), "sh", *self.launch_args(rank)]
        docker(*cmd)
        docker("network", "connect", "--ip", self.roce_ip(rank), self.planes["names"]["roce"], name)
        docker("start", name)

    # observe --------------------------------------------------------------
    def logs(self, rank=0):
        return logs(self.node(rank))

    def state(self, rank=0):
        return container_state(self.node(rank))

    def healthy(self, rank=0):
        return request(f"{self.url(rank)}/health", timeout=3)[0] == 200

    def wait_ready(self, timeout=30):
        """Head's /health 200 and every worker's dummy /health 200."""
        ok = wait_for(lambda: self.healthy(0), timeout)
        if not ok:
            raise AssertionError(
                f"{self.name} did not become healthy:\n"
                + "\n".join(f"--- r{r}\n{self.logs(r)[-3000:]}" for r in range(self.nnodes))
            )
        return all(self.healthy(r) for r in range(1, self.nnodes))

    def wait_exit(self, rank, timeout):
        return wait_for(lambda: not self.state(rank)[0], timeout)

    def remove(self):
        remove_containers([self.node(r) for r in range(self.nnodes)])
