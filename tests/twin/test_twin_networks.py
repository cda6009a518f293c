"""twin/playbooks/tasks/remove_networks.yml (used by the twin's create and destroy) on
real docker: a network docker will not remove is named with what holds it and the fix,
nothing attached to it is touched, and once it is free the same tasks remove it."""

from __future__ import annotations

import os
import subprocess

from twin_helpers import BASE_IMAGE, PREFIX, ROOT, container_state, docker, remove_containers

TASKS = ROOT / "twin/playbooks/tasks/remove_networks.yml"


def _remove(tmp_path, network):
    play = tmp_path / "remove.yml"
    play.write_text(
        "- hosts: localhost\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        f"    - ansible.builtin.include_tasks: {TASKS}\n"
        f"      vars: {{__remove_networks: [{network}]}}\n"
    )
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
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
        refused = _remove(tmp_path, network)
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
