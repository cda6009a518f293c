"""Shared helpers of the scenarios' testinfra verifiers.

The verifiers reach each node through its docker container (``docker://<name>``)
and read real state: files, NICs, routes, processes, containers, HTTP answers.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess

import testinfra

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VAULT = os.path.join(REPO, "twin", "vault-password")
LAUNCHER = "/usr/local/sbin/sparkfleet-sglang"


def inventory(path):
    """Every host of spark_nodes with its variables, as ansible-inventory sees them."""
    out = subprocess.run(
        [
            os.path.join(REPO, ".venv", "bin", "ansible-inventory"),
            "-i",
            os.path.join(REPO, path),
            "--vault-password-file",
            VAULT,
            "--list",
        ],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg")},
    ).stdout
    data = json.loads(out)
    hostvars = data["_meta"]["hostvars"]
    nodes = {h: hostvars[h] for h in data["spark_nodes"]["hosts"]}
    CONTAINERS.update({h: v.get("sparksim_container", h) for h, v in nodes.items()})
    return nodes


# Node name -> its container (inventory/sim-2node and sim-ssh name theirs in host_vars).
CONTAINERS = {}


def node(name):
    return testinfra.get_host(f"docker://{CONTAINERS.get(name, name)}")


def launch_argv(host):
    """The `docker run` argv the node's launcher would execute (its `show`)."""
    return host.check_output(f"{LAUNCHER} show").splitlines()


def curl(host, url, key=None, body=None, timeout=60):
    """(status, body) of an HTTP request made on the node itself."""
    cmd = ["curl", "-sS", "-m", str(timeout), "-o", "/tmp/.verify-body", "-w", "%{http_code}"]
    if key:
        cmd += ["-H", f"Authorization: Bearer {key}"]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
    cmd.append(url)
    host.run("rm -f /tmp/.verify-body")
    status = host.run(" ".join(shlex.quote(c) for c in cmd)).stdout.strip()
    return int(status or 0), host.run("cat /tmp/.verify-body 2>/dev/null").stdout


def split_docker_run(argv):
    """(docker options as (option, value) pairs, image, command) of a docker run argv."""
    assert argv[:2] == ["docker", "run"], argv[:2]
    opts, i = [], 2
    while argv[i].startswith("-"):
        if (argv[i].startswith("--") and "=" in argv[i]) or argv[i] in ("-d", "--rm"):
            opts.append((argv[i], None))
            i += 1
        else:
            opts.append((argv[i], argv[i + 1]))
            i += 2
    return opts, argv[i], argv[i + 1 :]


def engine_flags(command):
    """launch_server flags as (flag, value-or-None) pairs, from a python3 command."""
    if "-m" in command:
        args = command[command.index("-m") + 2 :]
    else:  # the API-key shim: python3 ... -c CODE flags...
        args = command[command.index("-c") + 2 :]
    pairs, i = [], 0
    while i < len(args):
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            pairs.append((args[i], args[i + 1]))
            i += 2
        else:
            pairs.append((args[i], None))
            i += 1
    return pairs
