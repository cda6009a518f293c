"""The rank launcher (roles/sglang_node/files/sparkfleet_launcher.py), run against a fake docker.

The launcher runs as a subprocess with a PATH whose first entry holds a fake `docker`: it
records every argv (one JSON list a line in `calls`) and answers from files the test
writes beside it. _converge comes from the checkout (.collections on PYTHONPATH), the way
the launcher's fallback import expects; one test runs it beside a copy of _converge.py,
as the role installs it on a node.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.sparkfleet.serving.plugins.module_utils import _converge

ROOT = Path(__file__).resolve().parents[3]
LAUNCHER = ROOT / "roles" / "sglang_node" / "files" / "sparkfleet_launcher.py"
CONVERGE = ROOT / "plugins" / "module_utils" / "_converge.py"

NAME = "qwen38-tp4-r1"
IMAGE = "sparkfleet-twin/sglang:0.5.9"
IMAGE_ID = "sha256:" + "ab" * 32
# The fix the launcher's refusals name, in the installed collection's form.
SITE = "ansible-playbook sparkfleet.serving.site -i <inventory>"
GID = "0000:0000:0000:0000:0000:ffff:c0a8:6401"
LOG_LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ sparkfleet-sglang\[" + re.escape(NAME) + r"\]: (.*)$"
)

# docker, as far as the launcher asks it. Answers come from files in its own directory:
# images (ids, one a line), tag_id (what the tag names), container ("<state> <label>"),
# ps (names), logs (stdout of docker logs), fail_<verb> (exit code of that verb),
# argcheck (the engine parse's answer, JSON).
FAKE_DOCKER = """#!{python}
import json, os, sys

here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
with open(os.path.join(here, "calls"), "a") as fh:
    fh.write(json.dumps(args) + "\\n")


def answer(name):
    path = os.path.join(here, name)
    if os.path.exists(path):
        with open(path) as fh:
            return fh.read()
    return None


fail = answer("fail_" + args[0])
if fail:
    sys.stderr.write("fake docker: " + args[0] + " fails\\n")
    sys.exit(int(fail))
if args[:2] == ["image", "inspect"]:
    if "--format" in args:
        tagged = answer("tag_id")
        if tagged is None:
            sys.stderr.write("Error: No such image\\n")
            sys.exit(1)
        print(tagged.strip())
    elif args[-1] not in (answer("images") or "").split():
        print("[]")
        sys.stderr.write("Error: No such image: " + args[-1] + "\\n")
        sys.exit(1)
    else:
        print("[{{}}]")
elif args[:2] == ["container", "inspect"]:
    container = answer("container")
    if container is None:
        print()
        sys.stderr.write("Error: No such container: " + args[-1] + "\\n")
        sys.exit(1)
    print(container.strip() if "--format" in args else "[{{}}]")
elif args[0] == "ps":
    sys.stdout.write(answer("ps") or "")
elif args[0] == "logs":
    sys.stdout.write(answer("logs") or "")
    sys.stderr.write("stderr line api_key='from-stderr' end\\n")
elif args[0] == "run" and "sparkfleet.argcheck=1" in args:
    # The engine's parse of the launch arguments (check): answer "argcheck", else ok.
    print("sparkfleet-argcheck: " + (answer("argcheck") or '{{"ok": true}}').strip())
elif args[0] == "run":
    print("f00d" * 16)
"""


class Node:
    """A node in a temp dir: sysfs, the env and patch files, the rank JSON and a fake docker."""

    def __init__(self, root):
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir()
        docker = self.bin / "docker"
        docker.write_text(FAKE_DOCKER.format(python=sys.executable))
        docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
        self.sysfs = root / "sys" / "class" / "net"
        (self.sysfs / "enp1s0f0np0").mkdir(parents=True)
        self.mtu_file = self.sysfs / "enp1s0f0np0" / "mtu"
        self.mtu_file.write_text("9000\n")
        ib = root / "sys" / "class" / "infiniband" / "rocep1s0f0" / "ports" / "1"
        (ib / "gids").mkdir(parents=True)
        (ib / "gid_attrs" / "types").mkdir(parents=True)
        self.gid_file = ib / "gids" / "3"
        self.gid_file.write_text(GID + "\n")
        self.type_file = ib / "gid_attrs" / "types" / "3"
        self.type_file.write_text("RoCE v2\n")
        self.ib = ib
        # The node booted an hour ago unless a test says otherwise (boot_wait_s is 60).
        self.stat_file = root / "stat"
        self.booted(3600)
        self.env_file = root / "etc" / "sglang.env"
        self.env_file.parent.mkdir()
        self.env_file.write_text("SGLANG_API_KEY=secret\n")
        patches = root / "patches" / "p1"
        patches.mkdir(parents=True)
        self.patches = [patches / "a.py", patches / "b.py"]
        for i, path in enumerate(self.patches):
            path.write_text(f"# HARDEN-PATCH fix{i}\nx = {i}\n")
        self.log_dir = root / "log"
        self.mark = root / "lib" / "stopped"
        self.engine_log = self.log_dir / f"{NAME}.log"
        self.config = root / "rank.json"
        self.meminfo = root / "meminfo"
        self.meminfo.write_text("MemTotal:       128000000 kB\nMemAvailable:   100000000 kB\n")
        self.cfg = {
            "host": "spark-2",
            "memory": {
                "meminfo": str(self.meminfo),
                "need_bytes": 90 * 1024**3,
                "setting": "90g",
            },
            "name": NAME,
            "launcher": "/usr/local/sbin/sparkfleet-sglang",
            "rank": 1,
            "image": IMAGE,
            "image_id": IMAGE_ID,
            "env_file": str(self.env_file),
            "log_dir": str(self.log_dir),
            "stopped_mark": str(self.mark),
            "stop_timeout_s": 120,
            "log_max_size": "100m",
            "log_max_files": 5,
            "patch_files": [str(p) for p in self.patches],
            "sysfs_net": str(self.sysfs),
            "node": {
                "links": [
                    {
                        "iface": "enp1s0f0np0",
                        "mtu": 9000,
                        "gid": {
                            "root": str(root / "sys" / "class" / "infiniband"),
                            "hca": "rocep1s0f0",
                            "address": "192.168.100.1",
                            "roce_version": 2,
                        },
                    }
                ],
                "boot_wait_s": 60,
                "stat_file": str(self.stat_file),
            },
            "docker_args": [
                "--network",
                "host",
                "--env-file",
                str(self.env_file),
                "-v",
                f"{self.patches[0]}:/sgl/a.py:ro",
            ],
            "command": [
                "python3",
                "-m",
                "sglang.launch_server",
                "--tp",
                "4",
                "--api-key-file",
                "x",
            ],
        }
        self.write_config()
        self.answer("images", IMAGE_ID + "\n")
        self.answer("tag_id", IMAGE_ID + "\n")

    def booted(self, seconds_ago):
        self.stat_file.write_text(f"cpu  1 2 3\nbtime {int(time.time() - seconds_ago)}\n")

    def move_gid(self, index):
        """The data-plane address's GID now sits at ``index`` (a reboot, a hardware swap)."""
        for name in ("gids", "gid_attrs/types"):
            for old in (self.ib / name).iterdir():
                old.unlink()
        (self.ib / "gids" / str(index)).write_text(GID + "\n")
        (self.ib / "gid_attrs" / "types" / str(index)).write_text("RoCE v2\n")

    def write_config(self):
        self.config.write_text(json.dumps(self.cfg, indent=2))

    def answer(self, name, text):
        (self.bin / name).write_text(text)

    def forget(self, name):
        (self.bin / name).unlink(missing_ok=True)

    def calls(self):
        path = self.bin / "calls"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def env(self, **extra):
        env = dict(os.environ)
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = str(ROOT / ".collections")
        env.pop("SPARKFLEET_RANK_CONFIG", None)
        env.update(extra)
        return env

    def run(self, *args, launcher=LAUNCHER, **extra):
        return subprocess.run(
            [sys.executable, str(launcher), "--config", str(self.config), *args],
            capture_output=True,
            text=True,
            env=self.env(**extra),
            timeout=60,
            check=False,
        )

    def launch_log(self):
        path = self.log_dir / "launch.log"
        lines = path.read_text().splitlines() if path.exists() else []
        messages = []
        for line in lines:
            match = LOG_LINE.match(line)
            assert match, line
            messages.append(match.group(1))
        return messages

    def expected_hash(self):
        files = [self.config, self.env_file, *self.patches]
        return _converge.launch_config_hash([_converge.file_sha256(str(f)) for f in files])


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


# --- config-hash and show --------------------------------------------------------------


def test_config_hash_is_the_shared_rule_of_json_env_and_patches(node):
    out = node.run("config-hash")
    assert out.returncode == 0, out.stderr
    assert out.stdout == node.expected_hash() + "\n"
    assert re.fullmatch(r"[0-9a-f]{16}", out.stdout.strip())
    # The order is the rule: the JSON file, the env file, each patch file in order.
    shas = [_converge.file_sha256(str(f)) for f in (node.config, node.env_file, *node.patches)]
    assert out.stdout.strip() == _converge.launch_config_hash(shas)
    assert out.stdout.strip() != _converge.launch_config_hash([shas[1], shas[0], *shas[2:]])


@pytest.mark.parametrize(
    "change",
    ["json", "env", "patch"],
)
def test_config_hash_changes_with_each_kind_of_file(node, change):
    before = node.run("config-hash").stdout.strip()
    if change == "json":
        node.cfg["command"].append("--enable-metrics")
        node.write_config()
    elif change == "env":
        node.env_file.write_text("SGLANG_API_KEY=other\n")
    else:
        node.patches[1].write_text("# HARDEN-PATCH fix1 v2\n")
    after = node.run("config-hash").stdout.strip()
    assert after != before
    assert after == node.expected_hash()


def test_config_hash_installed_beside_converge(node, tmp_path):
    """On a node the launcher imports the _converge.py and _textfile.py copied beside it
    (no collection)."""
    sbin = tmp_path / "sbin"
    sbin.mkdir()
    shutil.copy(LAUNCHER, sbin / "sparkfleet_launcher.py")
    shutil.copy(CONVERGE, sbin / "_converge.py")
    shutil.copy(CONVERGE.parent / "_textfile.py", sbin / "_textfile.py")
    shutil.copy(CONVERGE.parent / "_gid.py", sbin / "_gid.py")
    shutil.copy(CONVERGE.parent / "_engine_args.py", sbin / "_engine_args.py")
    shutil.copy(CONVERGE.parent / "_profile_schema.py", sbin / "_profile_schema.py")
    out = subprocess.run(
        [sys.executable, str(sbin / "sparkfleet_launcher.py"), "config-hash"],
        capture_output=True,
        text=True,
        env=dict(node.env(SPARKFLEET_RANK_CONFIG=str(node.config)), PYTHONPATH=""),
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == node.expected_hash()


def test_show_prints_the_exact_run_argv(node):
    out = node.run("show")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "docker",
        "run",
        "-d",
        "--name",
        NAME,
        "--label",
        f"sparkfleet.config={node.expected_hash()}",
        "--label",
        "sparkfleet.rank=1",
        "--label",
        f"sparkfleet.image-id={IMAGE_ID}",
        "--label",
        "sparkfleet.launcher=/usr/local/sbin/sparkfleet-sglang",
        "--log-opt",
        "max-size=100m",
        "--log-opt",
        "max-file=5",
        # The rank's own options, the GID index found now, the image id the patches came
        # from, its command.
        *node.cfg["docker_args"],
        "--label",
        "sparkfleet.gid-index=3",
        "-e",
        "NCCL_IB_GID_INDEX=3",
        IMAGE_ID,
        *node.cfg["command"],
    ]
    # show only prints: docker is not asked to run anything.
    assert not [c for c in node.calls() if c[0] in ("run", "rm", "stop")]


# --- check -----------------------------------------------------------------------------


def test_check_passes(node):
    out = node.run("check")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "ok\n"
    assert out.stderr == ""
    assert ["image", "inspect", IMAGE_ID] in node.calls()
    assert node.launch_log() == []


def test_check_passes_without_a_gid(node):
    node.cfg["node"]["links"][0]["gid"] = None
    node.write_config()
    node.gid_file.write_text("0000:moved\n")
    out = node.run("check")
    assert (out.returncode, out.stdout) == (0, "ok\n"), out.stderr


def _assert_refused(node, out, reason):
    assert out.returncode == 1
    # A refusal of the data plane says how long ago the node booted (the cluster control
    # tells a late port from a broken one); the other refusals print nothing.
    assert re.fullmatch(r"(uptime_s=360[0-9]\n)?", out.stdout)
    last = out.stderr.splitlines()[-1]
    match = LOG_LINE.match(last)
    assert match, last
    assert match.group(1) == f"REFUSED: {reason}"
    assert node.launch_log()[-1] == f"REFUSED: {reason}"


# --- memcheck (the cluster control runs it with every rank stopped) ------------------------


def test_memcheck_passes_when_memavailable_covers_the_limit(node):
    out = node.run("memcheck")
    assert (out.returncode, out.stdout) == (0, "ok\n"), out.stderr
    assert node.calls() == []  # reads a file, asks docker nothing


def test_memcheck_refuses_a_node_whose_memory_did_not_come_back(node):
    node.meminfo.write_text("MemTotal:       128000000 kB\nMemAvailable:   12582912 kB\n")
    _assert_refused(
        node,
        node.run("memcheck"),
        "spark-2: the container's memory limit (container.memory 90g) needs 90.0 GiB but "
        f"12.0 GiB is available (MemAvailable of {node.meminfo} with the rank stopped); "
        "fix: reboot spark-2 (a crashed engine's memory is not returned), then "
        "sparkfleet-watchdog clear on the head, or lower container.memory",
    )


def test_memcheck_refuses_when_meminfo_cannot_be_read(node):
    node.meminfo.unlink()
    out = node.run("memcheck")
    assert out.returncode == 1
    assert (
        f"0.0 GiB is available (MemAvailable of {node.meminfo} with the rank stopped, which "
        "cannot be read)" in out.stderr
    )


def test_memcheck_without_a_memory_limit_has_nothing_to_compare(node):
    node.cfg["memory"] = {"meminfo": str(node.meminfo), "need_bytes": 0, "setting": None}
    node.write_config()
    node.meminfo.write_text("MemAvailable: 1 kB\n")
    out = node.run("memcheck")
    assert (out.returncode, out.stdout) == (0, "ok\n"), out.stderr


def test_check_refuses_a_low_mtu(node):
    node.mtu_file.write_text("1500\n")
    _assert_refused(
        node,
        node.run("check"),
        "enp1s0f0np0 MTU is 1500, below 9000: RDMA over this path would fail; "
        f"re-run {SITE} (roce role) or fix the NIC",
    )


def test_check_refuses_an_unreadable_mtu_as_zero(node):
    node.mtu_file.unlink()
    _assert_refused(
        node,
        node.run("check"),
        "enp1s0f0np0 MTU is 0, below 9000: RDMA over this path would fail; "
        f"re-run {SITE} (roce role) or fix the NIC",
    )


def test_check_accepts_a_larger_mtu(node):
    node.mtu_file.write_text("9216\n")
    assert node.run("check").stdout == "ok\n"


@pytest.mark.parametrize(
    ("gid", "kind", "found"),
    [
        ("fe80:0000:0000:0000:0000:0000:0000:0001\n", "RoCE v2\n", "none"),
        (GID + "\n", "IB/RoCE v1\n", "v1 at rocep1s0f0 port 1 index 3 (192.168.100.1)"),
        (None, "RoCE v2\n", "none"),
    ],
    ids=["other-gid", "only-v1", "gid-missing"],
)
def test_check_refuses_when_no_gid_carries_the_address(node, gid, kind, found):
    for path, text in ((node.gid_file, gid), (node.type_file, kind)):
        if text is None:
            path.unlink()
        else:
            path.write_text(text)
    out = node.run("check")
    assert out.returncode == 1
    reason = out.stderr.strip().splitlines()[-1]
    assert "REFUSED: 192.168.100.1: no RoCE v2 GID on rocep1s0f0" in reason
    assert f"IPv4 GIDs present: {found}" in reason
    assert reason.endswith(f"the port is not up yet, or re-run {SITE} (roce role)")
    # The cluster control reads how long ago the node booted.
    assert re.fullmatch(r"uptime_s=360[0-9]\n", out.stdout)


def test_a_moved_gid_index_is_found_at_start_logged_and_used(node):
    """The index is discovered, not pinned: the same configuration runs on the new index."""
    assert node.run("start").returncode == 0
    config = node.run("config-hash").stdout
    node.move_gid(7)
    assert node.run("check").stdout == "ok\n"
    assert "NCCL_IB_GID_INDEX=7" in node.run("show").stdout.splitlines()
    out = node.run("start")
    assert out.returncode == 0, out.stderr
    runs = [c for c in node.calls() if c[0] == "run" and "sparkfleet.argcheck=1" not in c]
    assert [a for a in runs[0] if "GID_INDEX" in a or "gid-index" in a] == [
        "sparkfleet.gid-index=3",
        "NCCL_IB_GID_INDEX=3",
    ]
    assert [a for a in runs[1] if "GID_INDEX" in a or "gid-index" in a] == [
        "sparkfleet.gid-index=7",
        "NCCL_IB_GID_INDEX=7",
    ]
    assert node.run("config-hash").stdout == config
    assert f"sparkfleet.config={config.strip()}" in runs[1]
    assert node.launch_log()[-2] == (
        "the RoCE v2 GID of 192.168.100.1 moved from index 3 to 7 (v2 at rocep1s0f0 port 1 "
        "index 7 (192.168.100.1)): using 7 (a reboot or a hardware swap; the configuration "
        "is unchanged)"
    )


def add_second_function(node, index):
    """The other half of the 200G port: its own netdev, HCA, address and GID table."""
    (node.sysfs / "enP2p1s0f0np0").mkdir()
    (node.sysfs / "enP2p1s0f0np0" / "mtu").write_text("9000\n")
    ib = node.root / "sys" / "class" / "infiniband" / "roceP2p1s0f0" / "ports" / "1"
    (ib / "gids").mkdir(parents=True)
    (ib / "gid_attrs" / "types").mkdir(parents=True)
    (ib / "gids" / str(index)).write_text("0000:0000:0000:0000:0000:ffff:c0a8:6501\n")
    (ib / "gid_attrs" / "types" / str(index)).write_text("RoCE v2\n")
    link = json.loads(json.dumps(node.cfg["node"]["links"][0]))
    link["iface"] = "enP2p1s0f0np0"
    link["gid"].update(hca="roceP2p1s0f0", address="192.168.101.1")
    node.cfg["node"]["links"].append(link)
    node.write_config()


def test_both_halves_of_the_port_are_checked_and_share_the_gid_index(node):
    add_second_function(node, 3)
    assert node.run("check").stdout == "ok\n"
    assert "NCCL_IB_GID_INDEX=3" in node.run("show").stdout.splitlines()
    (node.sysfs / "enP2p1s0f0np0" / "mtu").write_text("1500\n")
    out = node.run("check")
    assert out.returncode == 1
    assert "REFUSED: enP2p1s0f0np0 MTU is 1500, below 9000" in out.stderr


def test_functions_whose_gids_sit_at_different_indices_are_refused(node):
    """NCCL takes one NCCL_IB_GID_INDEX for every HCA in NCCL_IB_HCA."""
    add_second_function(node, 5)
    out = node.run("check")
    assert out.returncode == 1
    assert (
        "the RoCE GIDs of the data-plane functions sit at different indices (3 on rocep1s0f0, "
        "5 on roceP2p1s0f0), and NCCL takes one NCCL_IB_GID_INDEX for every HCA; fix: set "
        "roce_gid_mode: auto"
    ) in out.stderr


def test_a_start_soon_after_the_boot_waits_for_a_late_port(node):
    node.booted(5)
    node.mtu_file.write_text("1500\n")
    node.gid_file.unlink()
    start = subprocess.Popen(
        [sys.executable, str(LAUNCHER), "--config", str(node.config), "start"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=node.env(),
    )
    deadline = time.monotonic() + 20
    while not any(m.startswith("booted") for m in node.launch_log()):
        assert time.monotonic() < deadline and start.poll() is None
        time.sleep(0.1)
    # The port comes up: its MTU first, its address (and GID) a moment later.
    node.mtu_file.write_text("9000\n")
    time.sleep(1)
    node.gid_file.write_text(GID + "\n")
    _out, err = start.communicate(timeout=30)
    assert start.returncode == 0, err
    log = node.launch_log()
    waited = re.match(
        r"booted (\d+) s ago and not ready \(enp1s0f0np0 MTU is 1500, below 9000.*; "
        r"waiting up to (\d+) s \(sglang_node_boot_wait_s\)$",
        log[0],
    )
    assert waited, log[0]
    # The rest of the 60 s boot wait, counted from the boot (the node booted 5 s before the
    # launcher began; a loaded machine may take a few seconds more to start it).
    booted, rest = int(waited[1]), int(waited[2])
    assert 5 <= booted < 30 and booted + rest in (59, 60, 61), log[0]
    assert log[-1].startswith(f"started {NAME}")
    assert [c for c in node.calls() if c[0] == "run"]


def test_a_start_refuses_once_the_boot_wait_is_over(node):
    node.booted(57)
    node.mtu_file.write_text("1500\n")
    t0 = time.monotonic()
    out = node.run("start")
    assert out.returncode == 1
    # Waited for the rest of boot_wait_s (60) only, then refused with the reason.
    assert 2 <= time.monotonic() - t0 < 15
    assert out.stdout.startswith("uptime_s=")
    assert node.launch_log()[-1].startswith("REFUSED: enp1s0f0np0 MTU is 1500, below 9000")
    assert not [c for c in node.calls() if c[0] == "run"]


def test_a_check_never_waits(node):
    node.booted(5)
    node.mtu_file.write_text("1500\n")
    t0 = time.monotonic()
    out = node.run("check")
    assert out.returncode == 1
    assert time.monotonic() - t0 < 10
    assert re.fullmatch(r"uptime_s=[5-9]\n", out.stdout)


@pytest.mark.parametrize("how", ["unpatched", "empty", "missing"])
def test_check_refuses_an_unpatched_file(node, how):
    path = node.patches[1]
    if how == "unpatched":
        path.write_text("x = 1\n")
    elif how == "empty":
        path.write_text("")
    else:
        path.unlink()
    _assert_refused(
        node,
        node.run("check"),
        f"patch file {path} is missing or not patched; re-run {SITE} (sglang_patches role)",
    )


def test_check_refuses_a_missing_env_file(node):
    node.env_file.unlink()
    _assert_refused(
        node,
        node.run("check"),
        f"{node.env_file} is missing; re-run {SITE} (sglang_node role)",
    )


def test_check_refuses_a_missing_image(node):
    node.answer("images", "sha256:other\n")
    _assert_refused(
        node,
        node.run("check"),
        f"image {IMAGE_ID} (the {IMAGE} the patches were cut from) is no longer on this node; "
        f"load that image again, or re-run {SITE} to patch the image {IMAGE} now names",
    )


@pytest.mark.parametrize("tagged", ["sha256:" + "cd" * 32, None])
def test_check_only_logs_a_moved_tag(node, tagged):
    if tagged:
        node.answer("tag_id", tagged + "\n")
    else:
        node.forget("tag_id")
    out = node.run("check")
    assert (out.returncode, out.stdout) == (0, "ok\n"), out.stderr
    message = (
        f"{IMAGE} now points at {tagged or 'absent'}, not {IMAGE_ID}: running {IMAGE_ID} "
        f"(what the patches were cut from); re-run {SITE} to move to the new image"
    )
    assert node.launch_log() == [message]
    assert LOG_LINE.match(out.stderr.splitlines()[-1]).group(1) == message
    assert ["image", "inspect", "--format", "{{.Id}}", IMAGE] in node.calls()


# --- status ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("container", "mark", "want"),
    [
        (None, False, "absent"),
        ("", False, "absent"),
        ("exited -", False, "exited"),
        ("exited LABEL", True, "stopped"),
        (None, True, "stopped"),
        ("paused LABEL", False, "paused"),
        ("paused LABEL", True, "paused"),
        ("created -", False, "created"),
        ("running LABEL", False, "running current"),
        ("running LABEL", True, "running current"),
        ("running 0123456789abcdef", False, "running stale"),
        ("running -", False, "running stale"),
    ],
)
def test_status(node, container, mark, want):
    if container is not None:
        node.answer("container", container.replace("LABEL", node.expected_hash()) + "\n")
    if mark:
        node.mark.parent.mkdir(parents=True)
        node.mark.write_text("2026-12-05T09:00:00Z by test\n")
    out = node.run("status")
    assert out.returncode == 0, out.stderr
    assert out.stdout == want + "\n"
    inspects = [c for c in node.calls() if c[:2] == ["container", "inspect"]]
    assert inspects == [
        [
            "container",
            "inspect",
            "--format",
            '{{.State.Status}} {{or (index .Config.Labels "sparkfleet.config") "-"}}',
            NAME,
        ]
    ]


def test_status_is_stale_once_the_json_changes(node):
    node.answer("container", f"running {node.expected_hash()}\n")
    assert node.run("status").stdout == "running current\n"
    node.cfg["stop_timeout_s"] = 60
    node.write_config()
    assert node.run("status").stdout == "running stale\n"


# --- stop ------------------------------------------------------------------------------


def test_stop_is_remembered(node):
    node.answer("container", "running x\n")
    out = node.run("stop", USER="alice", SUDO_USER="bob")
    assert out.returncode == 0, out.stderr
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ by bob\n", node.mark.read_text())
    calls = node.calls()
    assert ["stop", "--time", "120", NAME] in calls
    assert ["rm", "-f", NAME] in calls
    assert calls.index(["stop", "--time", "120", NAME]) < calls.index(["rm", "-f", NAME])
    assert node.launch_log() == [f"stopped {NAME} (deliberate)"]


@pytest.mark.parametrize(
    ("env", "who"), [({"USER": "alice", "SUDO_USER": ""}, "alice"), ({"USER": ""}, "root")]
)
def test_stop_mark_names_who(node, env, who):
    out = node.run("stop", **env)
    assert out.returncode == 0, out.stderr
    assert node.mark.read_text().endswith(f" by {who}\n")
    # No container: nothing stopped, nothing logged.
    assert not [c for c in node.calls() if c[0] in ("stop", "rm")]
    assert node.launch_log() == []


def test_stop_restart_is_not_remembered(node):
    node.answer("container", "running x\n")
    out = node.run("stop", "--restart")
    assert out.returncode == 0, out.stderr
    assert not node.mark.exists()
    assert ["rm", "-f", NAME] in node.calls()
    assert node.launch_log() == [f"stopped {NAME} (restart)"]


def test_stop_removes_this_launchers_other_ranks(node):
    node.answer("ps", f"qwen-old-r1\n{NAME}\n")
    out = node.run("stop", "--restart")
    assert out.returncode == 0, out.stderr
    calls = node.calls()
    assert [
        "ps",
        "-a",
        "--filter",
        "label=sparkfleet.rank",
        "--filter",
        "label=sparkfleet.launcher=/usr/local/sbin/sparkfleet-sglang",
        "--format",
        "{{.Names}}",
    ] in calls
    assert ["stop", "--time", "120", "qwen-old-r1"] in calls
    assert ["rm", "-f", "qwen-old-r1"] in calls
    assert ["rm", "-f", NAME] not in calls
    assert node.launch_log() == [
        f"removed qwen-old-r1, a rank of an earlier profile (this rank is now {NAME})"
    ]


# --- start -----------------------------------------------------------------------------


def test_start_runs_the_shown_argv_and_follows_the_log(node):
    node.mark.parent.mkdir(parents=True)
    node.mark.write_text("by test\n")
    node.answer("container", "exited -\n")
    node.answer("ps", f"qwen-old-r1\n{NAME}\n")
    node.answer("logs", "booting api_key='secret' up\n")
    shown = node.run("show").stdout.splitlines()
    out = node.run("start")
    assert out.returncode == 0, out.stderr
    assert not node.mark.exists()
    calls = node.calls()
    run = [c for c in calls if c[0] == "run"]
    assert run == [shown[1:]]
    assert calls.index(["rm", "-f", "qwen-old-r1"]) < calls.index(["rm", "-f", NAME])
    assert calls.index(["rm", "-f", NAME]) < calls.index(run[0])
    assert node.launch_log() == [
        f"removed qwen-old-r1, a rank of an earlier profile (this rank is now {NAME})",
        f"removed leftover container {NAME}",
        f"started {NAME} (rank 1, config {node.expected_hash()}), log {node.engine_log}",
    ]
    # The detached follower keeps the engine log (masked).
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if node.engine_log.exists() and "end\n" in node.engine_log.read_text():
            break
        time.sleep(0.1)
    assert "booting api_key='***' up\n" in node.engine_log.read_text()
    assert ["logs", "--follow", "--timestamps", NAME] in node.calls()


def test_start_refuses_before_touching_anything(node):
    node.mtu_file.write_text("1500\n")
    node.mark.parent.mkdir(parents=True)
    node.mark.write_text("by test\n")
    out = node.run("start")
    assert out.returncode == 1
    assert node.mark.exists()
    assert not [c for c in node.calls() if c[0] in ("run", "rm", "stop", "ps")]
    assert node.launch_log()[-1].startswith("REFUSED: enp1s0f0np0 MTU is 1500")


def test_start_fails_with_dockers_code(node):
    node.answer("fail_run", "125")
    out = node.run("start")
    assert out.returncode == 125
    assert "fake docker: run fails" in out.stderr
    assert not any(m.startswith("started") for m in node.launch_log())


# --- follow-log and tail ---------------------------------------------------------------


def test_follow_log_masks_the_api_key(node):
    node.log_dir.mkdir()
    node.engine_log.write_text("earlier line\n")
    os.chmod(node.engine_log, 0o600)
    node.answer(
        "logs",
        "2026-12-05T09:00:00Z server_args=ServerArgs(api_key='secret', port=30000) "
        "admin_api_key='other'\nplain line\n",
    )
    out = node.run("follow-log")
    assert out.returncode == 0, out.stderr
    text = node.engine_log.read_text()
    assert "secret" not in text
    assert "other'" not in text
    assert "from-stderr" not in text
    assert text.splitlines()[0] == "earlier line"
    assert (
        "2026-12-05T09:00:00Z server_args=ServerArgs(api_key='***', port=30000) "
        "admin_api_key='***'\n"
    ) in text
    assert "plain line\n" in text
    assert "stderr line api_key='***' end\n" in text
    assert node.calls() == [["logs", "--follow", "--timestamps", NAME]]


def test_follow_log_creates_a_private_log(node):
    node.log_dir.mkdir()
    node.answer("logs", "hello\n")
    out = node.run("follow-log")
    assert out.returncode == 0, out.stderr
    assert stat.S_IMODE(node.engine_log.stat().st_mode) == 0o600


@pytest.mark.parametrize("lines", ["abc", "-5", "1.5", "5 ", " 5"])
def test_tail_rejects_a_non_number(node, lines):
    node.log_dir.mkdir()
    node.engine_log.write_text("a\nb\n")
    out = node.run("tail", lines)
    assert out.returncode == 2
    assert out.stderr == "tail: LINES must be a number\n"
    assert out.stdout == ""


def test_tail_prints_the_last_lines(node):
    node.log_dir.mkdir()
    node.engine_log.write_text("".join(f"line {i}\n" for i in range(300)))
    three = node.run("tail", "3")
    assert (three.returncode, three.stdout) == (0, "line 297\nline 298\nline 299\n")
    default = node.run("tail")
    assert default.stdout.splitlines() == [f"line {i}" for i in range(100, 300)]
    assert node.run("tail", "0").stdout == ""
    assert node.run("tail", "1000").stdout.count("\n") == 300


def test_tail_of_a_big_log_and_an_unterminated_line(node):
    node.log_dir.mkdir()
    node.engine_log.write_text("x" * 200_000 + "\n" + "".join(f"l{i}\n" for i in range(5)) + "tail")
    assert node.run("tail", "2").stdout == "l4\ntail"
    assert node.run("tail", "7").stdout == "x" * 200_000 + "\n" + "l0\nl1\nl2\nl3\nl4\ntail"


def test_tail_without_a_log_prints_nothing(node):
    out = node.run("tail", "10")
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")


# --- usage -----------------------------------------------------------------------------


@pytest.mark.parametrize("args", [[], ["restart"], ["--help"]])
def test_unknown_verb_prints_usage(node, args):
    out = node.run(*args)
    assert out.returncode == 2
    assert out.stderr == (
        "usage: sparkfleet-sglang "
        "start|check|memcheck|stop [--restart]|status|tail [LINES]|show|config-hash\n"
    )
    assert node.calls() == []


def test_config_from_the_environment(node):
    out = subprocess.run(
        [sys.executable, str(LAUNCHER), "config-hash"],
        capture_output=True,
        text=True,
        env=node.env(SPARKFLEET_RANK_CONFIG=str(node.config)),
        check=False,
    )
    assert out.stdout.strip() == node.expected_hash()


def test_an_unreadable_config_is_refused(node):
    node.config.unlink()
    out = node.run("check")
    assert out.returncode == 1
    assert "REFUSED: cannot read the rank configuration" in out.stderr.splitlines()[-1]
    assert node.calls() == []


# --- what node_exporter reads: sparkfleet_rank.prom ---------------------------------------


def _rank_textfile(directory):
    from prometheus_client.parser import text_string_to_metric_families

    text = (directory / "sparkfleet_rank.prom").read_text()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            # The scrape target carries node and rank: the file never names them.
            assert not {"cluster", "node", "rank", "instance", "job"} & set(sample.labels)
            samples[sample.name] = (dict(sample.labels), sample.value)
    return samples


def test_each_start_stop_and_refusal_rewrites_the_ranks_textfile(node, tmp_path):
    textfiles = tmp_path / "node-exporter"
    opt = ["--textfile-dir", str(textfiles)]
    node.answer("container", "exited -\n")
    before = time.time()
    assert node.run(*opt, "start").returncode == 0
    got = _rank_textfile(textfiles)
    labels, one = got["sparkfleet_rank_info"]
    assert one == 1
    assert labels == {
        "container": NAME,
        "image": node.cfg["image"],
        "config_hash": node.expected_hash(),
    }
    assert before <= got["sparkfleet_rank_last_start_timestamp_seconds"][1] <= time.time()
    assert got["sparkfleet_rank_stopped"][1] == 0
    assert "sparkfleet_rank_last_stop_timestamp_seconds" not in got
    # A deliberate stop: stopped 1, the last start and its configuration kept.
    assert node.run(*opt, "stop").returncode == 0
    after_stop = _rank_textfile(textfiles)
    assert after_stop["sparkfleet_rank_stopped"][1] == 1
    assert after_stop["sparkfleet_rank_info"] == got["sparkfleet_rank_info"]
    assert (
        after_stop["sparkfleet_rank_last_start_timestamp_seconds"]
        == got["sparkfleet_rank_last_start_timestamp_seconds"]
    )
    assert after_stop["sparkfleet_rank_last_stop_timestamp_seconds"][1] >= before
    # A refusal is recorded too (launch.log says why); it starts nothing, so the deliberate
    # stop stays in force (the stopped mark, which status reads too).
    node.mtu_file.write_text("1500\n")
    assert node.run(*opt, "start").returncode == 1
    refused = _rank_textfile(textfiles)
    assert "sparkfleet_rank_last_refusal_timestamp_seconds" in refused
    assert refused["sparkfleet_rank_stopped"][1] == 1
    # The next start ends the deliberate stop; a restart's stop is not one.
    node.mtu_file.write_text("9000\n")
    assert node.run(*opt, "start").returncode == 0
    assert node.run(*opt, "stop", "--restart").returncode == 0
    assert _rank_textfile(textfiles)["sparkfleet_rank_stopped"][1] == 0
    assert not list(textfiles.glob("*.tmp"))


def test_without_a_textfile_directory_nothing_is_written(node, tmp_path):
    node.answer("container", "exited -\n")
    assert node.run("start").returncode == 0
    # The launcher's own record (the GID index of the last start) is kept all the same.
    assert json.loads((node.log_dir / "launcher-metrics.json").read_text())["gid_index"] == 3
    assert not list(tmp_path.rglob("sparkfleet_rank.prom"))


def test_an_unwritable_textfile_directory_never_hides_a_refusal(node, tmp_path):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the directory should be\n")
    node.mtu_file.write_text("1500\n")
    out = node.run("--textfile-dir", str(blocked / "node-exporter"), "start")
    assert out.returncode == 1
    assert "cannot write" in out.stderr
    # The cluster control reads the reason from the last stderr line.
    assert "REFUSED: enp1s0f0np0 MTU is 1500" in out.stderr.strip().splitlines()[-1]


# --- check: the engine's own parser on the launch arguments ------------------------------

RENDERED = [
    "python3",
    "--check-hash-based-pycs",
    "always",
    "-m",
    "sglang.launch_server",
    "--trust-remote-code",
    "--model-path",
    "/models/m",
    "--tp-size",
    "2",
    "--mem-fraction-static",
    "0.80",
    "--host",
    "127.0.0.1",
    "--port",
    "8890",
    "--enable-p2p-check",
]


def _parses(node):
    return [c for c in node.calls() if c[0] == "run" and "sparkfleet.argcheck=1" in c]


def test_check_parses_the_arguments_in_the_image_once(node):
    node.cfg["command"] = RENDERED
    node.write_config()
    assert node.run("check").stdout == "ok\n"
    (parse,) = _parses(node)
    assert parse[:2] == ["run", "--rm"]
    assert parse[parse.index("--network") + 1] == "none"
    assert parse[parse.index("--entrypoint") + 1] == "python3"
    # The image id the rank runs, then the parse and exactly the rendered arguments.
    assert parse[parse.index(IMAGE_ID) + 1] == "-c"
    assert parse[parse.index(IMAGE_ID) + 3 :] == RENDERED[5:]
    # A heal's check reads the kept verdict: no container.
    assert node.run("check").stdout == "ok\n"
    assert len(_parses(node)) == 1
    assert json.loads((node.mark.parent / "engine-args.json").read_text())[0]["answer"] == {
        "ok": True
    }


def test_check_refuses_an_argument_the_engine_refuses_naming_image_argument_and_field(node):
    node.cfg["command"] = RENDERED
    node.write_config()
    node.answer(
        "argcheck",
        json.dumps(
            {
                "refused": "unrecognized arguments: --mem-fraction-static 0.80 --enable-p2p-check",
                "unknown": ["--mem-fraction-static", "0.80", "--enable-p2p-check"],
            }
        ),
    )
    out = node.run("check")
    _assert_refused(
        node,
        out,
        f"the engine in image {IMAGE} ({IMAGE_ID[:19]}) refuses --mem-fraction-static 0.80 "
        "(the profile field mem_fraction_static); --enable-p2p-check (the profile field "
        "extra_args): its own parser says 'launch_server: error: unrecognized arguments: "
        "--mem-fraction-static 0.80 --enable-p2p-check'; fix: drop or rename the field for "
        "this release (sglang_profile_overrides), or choose an image whose SGLang accepts it",
    )
    assert not [c for c in node.calls() if c[0] in ("stop", "rm") or c[:2] == ["run", "-d"]]
    # Kept: the same image and arguments are refused again without a container.
    node.forget("argcheck")
    assert node.run("check").returncode == 1
    assert len(_parses(node)) == 1


def test_a_new_image_or_new_arguments_parse_again(node):
    node.cfg["command"] = RENDERED
    node.write_config()
    assert node.run("check").returncode == 0
    other = "sha256:" + "cd" * 32
    node.cfg["image_id"] = other
    node.write_config()
    node.answer("images", f"{IMAGE_ID}\n{other}\n")
    assert node.run("check").returncode == 0
    assert other in _parses(node)[-1]
    node.cfg["command"] = [*RENDERED, "--log-level", "debug"]
    node.write_config()
    assert node.run("check").returncode == 0
    assert len(_parses(node)) == 3
    assert _parses(node)[-1][-2:] == ["--log-level", "debug"]


def test_a_parse_that_cannot_run_passes_logged_and_is_not_kept(node):
    node.answer("argcheck", '{"unavailable": "ModuleNotFoundError: No module named sglang"}')
    out = node.run("check")
    assert (out.returncode, out.stdout) == (0, "ok\n"), out.stderr
    assert node.launch_log() == [
        f"the engine's argument parse could not run in {IMAGE}: "
        "ModuleNotFoundError: No module named sglang"
    ]
    assert node.run("check").returncode == 0
    assert len(_parses(node)) == 2
