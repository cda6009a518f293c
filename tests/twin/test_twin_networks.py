"""twin/playbooks/tasks/remove_networks.yml (used by the twin's create and destroy) on
real docker: a network docker will not remove is named with what holds it and the fix,
nothing attached to it is touched, and once it is free the same tasks remove it. An
empty network docker keeps (a stale endpoint count, moby/moby#42119) is left for the
next twin by destroy and stops create."""

from __future__ import annotations

import os
import shutil
import subprocess

from twin_helpers import BASE_IMAGE, PREFIX, ROOT, container_state, docker, remove_containers

TASKS = ROOT / "twin/playbooks/tasks/remove_networks.yml"


def _remove(tmp_path, network, keep_empty=False, path=None):
    play = tmp_path / "remove.yml"
    play.write_text(
        "- hosts: localhost\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        f"    - ansible.builtin.include_tasks: {TASKS}\n"
        f"      vars: {{__remove_networks: [{network}],"
        f" __remove_networks_keep_empty: {str(keep_empty).lower()}}}\n"
    )
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    if path is not None:
        env["PATH"] = f"{path}:{env['PATH']}"
    return subprocess.run(
        [
            str(ROOT / ".venv/bin/ansible-playbook"),
            *("-i", "localhost,", "-c", "local", str(play)),
            *("-e", f"ansible_python_interpreter={ROOT / '.venv/bin/python'}"),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )


def _exists(network):
    return docker("network", "inspect", network, check=False).returncode == 0


def test_a_kept_network_is_named_with_what_holds_it(engine_images, tmp_path):
    network, holder = f"{PREFIX}-kept", f"{PREFIX}-holder"
    docker("network", "create", network)
    try:
        docker("run", "-d", "--name", holder, "--network", network, BASE_IMAGE, "sleep", "600")
        refused = _remove(tmp_path, network, keep_empty=True)
        out = " ".join(refused.stdout.split())
        assert refused.returncode != 0, out
        assert f"docker kept twin network {network}" in out, out
        assert f"Still attached: {holder}; remove those containers" in out, out
        # Nothing attached was touched, and the network is still there.
        assert container_state(holder)[0]
        assert _exists(network)

        remove_containers([holder])
        freed = _remove(tmp_path, network)
        assert freed.returncode == 0, freed.stdout
        assert not _exists(network)
    finally:
        remove_containers([holder])
        docker("network", "rm", network, check=False)


def test_an_empty_network_docker_keeps(engine_images, tmp_path):
    """docker's refusal is injected by a wrapper on PATH: the stale count cannot be caused
    on purpose. Destroy leaves the network with a warning; create stops, naming the fix."""
    network = f"{PREFIX}-stale"
    shim = tmp_path / "bin"
    shim.mkdir()
    real = shutil.which("docker")
    (shim / "docker").write_text(
        "#!/bin/sh\n"
        f'if [ "$1 $2 $3" = "network rm {network}" ]; then\n'
        "  echo 'Error response from daemon: error while removing network: network"
        f" {network} id 0 has active endpoints' >&2; exit 1\n"
        "fi\n"
        f'exec {real} "$@"\n'
    )
    (shim / "docker").chmod(0o755)
    docker("network", "create", network)
    try:
        kept = _remove(tmp_path, network, keep_empty=True, path=shim)
        out = " ".join(kept.stdout.split())
        assert kept.returncode == 0, out
        assert f"[WARNING] docker kept twin network {network} with nothing attached" in out, out
        assert _exists(network)

        refused = _remove(tmp_path, network, keep_empty=False, path=shim)
        out = " ".join(refused.stdout.split())
        assert refused.returncode != 0, out
        assert "Nothing is attached, so dockerd's endpoint count for it is stale" in out, out
        assert "restart dockerd" in out, out
        assert _exists(network)
    finally:
        docker("network", "rm", network, check=False)
