# Copyright: sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What netplan makes of a node's files for one port: its profiles, their sources, their MTU.

DGX OS lets NetworkManager own the ConnectX-7 ports, and NetworkManager stores its own
connections as netplan files (``90-NM-<uuid>.yaml``). Such a file for the data-plane port
beside the roce role's gives the port two profiles: ``netplan generate`` passes, ``netplan
get`` still shows the role's MTU, and at boot either profile may win. The one reliable
reading is netplan's own generated output, so this module generates the node's files (plus,
optionally, a file about to be written) into a scratch root and reads what came out:
NetworkManager keyfiles (``run/NetworkManager/system-connections/netplan-<id>.nmconnection``)
and networkd units (``run/systemd/network/10-netplan-<id>.network``, MTU also in the
``.link``). Used by the converge probe (spark_node_info), the roce stage, and the twin's
boot (which applies the MTU the generated output gives, as a node's renderer does).
"""

from __future__ import annotations

import configparser
import glob
import os
import re
import shutil
import subprocess
import tempfile

NM_DIR = "run/NetworkManager/system-connections"
NETWORKD_DIR = "run/systemd/network"


def _ini(path):
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return None
    return parser


def _int_or_none(text):
    text = (text or "").strip()
    return int(text) if text.isdigit() else None


def read_profiles(root, iface):
    """Every profile netplan generated under ``root`` for ``iface``, sorted by id.

    Each: ``id`` (the netplan definition), ``renderer`` (NetworkManager or networkd),
    ``path`` (the generated file, relative to ``root``) and ``mtu`` (None when unset).
    """
    profiles = []
    for path in sorted(glob.glob(os.path.join(root, NM_DIR, "netplan-*.nmconnection"))):
        ini = _ini(path)
        if ini is None or ini.get("connection", "interface-name", fallback="") != iface:
            continue
        profiles.append(
            {
                "id": os.path.basename(path)[len("netplan-") : -len(".nmconnection")],
                "renderer": "NetworkManager",
                "path": os.path.relpath(path, root),
                "mtu": _int_or_none(ini.get("ethernet", "mtu", fallback="")),
            }
        )
    for path in sorted(glob.glob(os.path.join(root, NETWORKD_DIR, "10-netplan-*.network"))):
        ini = _ini(path)
        names = (ini.get("Match", "Name", fallback="") if ini else "").split()
        if iface not in names:
            continue
        mtu = _int_or_none(ini.get("Link", "MTUBytes", fallback=""))
        if mtu is None:
            link = _ini(path[: -len(".network")] + ".link")
            mtu = _int_or_none(link.get("Link", "MTUBytes", fallback="")) if link else None
        profiles.append(
            {
                "id": os.path.basename(path)[len("10-netplan-") : -len(".network")],
                "renderer": "networkd",
                "path": os.path.relpath(path, root),
                "mtu": mtu,
            }
        )
    return sorted(profiles, key=lambda p: p["id"])


def defining_files(texts, netdef_id):
    """The names among ``texts`` (file name -> YAML text) that define ``netdef_id``."""
    try:
        import yaml  # netplan's own CLI needs it; absent, a line match below does
    except ImportError:  # pragma: no cover - every netplan host has PyYAML
        yaml = None
    found = []
    for name, text in sorted(texts.items()):
        if yaml is not None:
            try:
                network = (yaml.safe_load(text) or {}).get("network") or {}
            except (yaml.YAMLError, AttributeError):
                network = {}
            if isinstance(network, dict) and any(
                isinstance(defs, dict) and netdef_id in defs
                for kind, defs in network.items()
                if kind not in ("version", "renderer")
            ):
                found.append(name)
            continue
        key = re.compile(r"^\s+[\"']?" + re.escape(netdef_id) + r"[\"']?\s*:", re.MULTILINE)
        if key.search(text):
            found.append(name)
    return found


def port_profiles(ifaces, netplan_dir="/etc/netplan", extra=None, netplan="netplan"):
    """netplan's profiles for each port of ``ifaces`` from the files in ``netplan_dir``.

    ``extra``: {file name: text}, files to add or replace first (a file about to be
    written). Returns {"ports": {iface: [profiles]}, "error": None} with each profile's
    ``files`` (the YAML files that define it), or {"ports": {}, "error": why} when netplan
    is missing or its generator refuses the files.
    """
    ifaces = [ifaces] if isinstance(ifaces, str) else list(ifaces)
    texts = {}
    for path in sorted(glob.glob(os.path.join(netplan_dir, "*.yaml"))):
        try:
            with open(path, encoding="utf-8") as fh:
                texts[os.path.basename(path)] = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            return {"ports": {}, "error": f"{path}: {exc}"}
    texts.update(extra or {})
    root = tempfile.mkdtemp(prefix="sparkfleet-netplan.")
    try:
        etc = os.path.join(root, "etc", "netplan")
        os.makedirs(etc)
        for name, text in texts.items():
            fd = os.open(os.path.join(etc, name), os.O_WRONLY | os.O_CREAT, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
        try:
            res = subprocess.run(
                [netplan, "generate", "--root-dir", root],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"ports": {}, "error": f"netplan generate did not run: {exc}"}
        if res.returncode != 0:
            lines = (res.stderr or res.stdout).strip().splitlines()
            return {
                "ports": {},
                "error": "netplan generate failed: "
                + (lines[-1] if lines else f"rc={res.returncode}"),
            }
        ports = {iface: read_profiles(root, iface) for iface in ifaces}
    finally:
        # The scratch copy only: nothing of the node's own configuration is in it, and a
        # leftover in /tmp must not turn a reading into a failure.
        shutil.rmtree(root, ignore_errors=True)
    for profiles in ports.values():
        for profile in profiles:
            profile["files"] = [
                os.path.join(netplan_dir, name) for name in defining_files(texts, profile["id"])
            ]
    return {"ports": ports, "error": None}


def conflict_problem(host, iface, profiles, own_file):
    """Why more than one profile for the data-plane port is refused, naming the files; or None."""
    if len(profiles) <= 1:
        return None
    others = sorted(
        {f for p in profiles for f in p.get("files") or [] if f != own_file}
        or {p["path"] for p in profiles}
    )
    listed = "; ".join(
        f"{p['id']} ({p['renderer']}, MTU {p['mtu'] or 'unset'}, from "
        f"{', '.join(p.get('files') or ['?'])})"
        for p in profiles
    )
    return (
        f"{host}: netplan gives {iface} {len(profiles)} profiles: {listed}. At boot either may "
        "win, and one without the MTU leaves the data plane at 1500. Fix: remove "
        f"{', '.join(others)} (a NetworkManager connection for the port: nmcli connection "
        "delete it), then re-run ansible-playbook sparkfleet.serving.site -i <inventory>; "
        f"the roce role's {own_file} is the port's one profile"
    )


def netplan_problems(result, host, ifaces, own_file, mtu):
    """What is wrong with the ports' profiles (port_profiles' result) once ``own_file`` is
    written, each naming the host, the files and the fix; [] when each port has one
    profile, from ``own_file``, carrying ``mtu``."""
    ifaces = [ifaces] if isinstance(ifaces, str) else list(ifaces)
    if result.get("error"):
        return [
            f"{host}: cannot tell which profiles netplan gives {', '.join(ifaces)}: "
            f"{result['error']}; fix the netplan files (netplan generate must pass), or set "
            "roce_persist: networkd"
        ]
    problems = []
    for iface in ifaces:
        problems += _port_problems(
            host, iface, (result.get("ports") or {}).get(iface) or [], own_file, mtu
        )
    return problems


def _port_problems(host, iface, profiles, own_file, mtu):
    problem = conflict_problem(host, iface, profiles, own_file)
    if problem:
        return [problem]
    own = [p for p in profiles if own_file in (p.get("files") or [])]
    if not own:
        return [
            f"{host}: netplan generates no profile for {iface} from {own_file}; fix: check "
            "roce_iface (the data-plane port's name) and the netplan files"
        ]
    if own[0]["mtu"] != int(mtu):
        files = ", ".join(own[0].get("files") or [own_file])
        return [
            f"{host}: netplan's profile for {iface} has MTU {own[0]['mtu'] or 'unset'}, not "
            f"roce_mtu {int(mtu)}: another file defining it ({files}) overrides {own_file}; "
            "fix: remove the port from the other files, then re-run "
            "ansible-playbook sparkfleet.serving.site -i <inventory>"
        ]
    return []
