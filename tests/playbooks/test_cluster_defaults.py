"""The inventory checks see each host's own value of a cluster variable it leaves out.

A default such as ``sglang_nccl_socket_ifname: "{{ spark_mgmt_iface }}"`` (role
sparkfleet.serving.cluster) must mean each node's own management NIC. The offline
harness of test_validate.py: nothing here reaches a node.
"""

from __future__ import annotations

import json

from test_validate import mutate, run_playbook, run_validate, write_inventory

PLAYBOOK = """
- name: Run the inventory checks and print what they read
  hosts: spark_nodes
  gather_facts: false
  roles:
    - role: sparkfleet.serving.preflight
      vars:
        preflight_whole_cluster: true
  post_tasks:
    - name: Write the nodes as the checks read them
      ansible.builtin.copy:
        content: "{{ preflight_cluster.nodes | to_json }}"
        dest: "{{ nodes_file }}"
        mode: "0644"
      delegate_to: localhost
      vars:
        ansible_connection: local
      run_once: true
"""


def test_a_templated_default_is_evaluated_for_each_host(tmp_path):
    hosts, group, host_extra = mutate(
        group={"spark_mgmt_iface": None}, host_extra={"spark-3": {"roce_mtu": 9000}}
    )
    del group["spark_mgmt_iface"]
    for i, host in enumerate(sorted(hosts)):
        hosts[host]["spark_mgmt_iface"] = f"mgmt{i}"
    write_inventory(str(tmp_path), hosts, group, host_extra)
    playbook = tmp_path / "read.yml"
    playbook.write_text(PLAYBOOK, encoding="utf-8")
    nodes_file = tmp_path / "nodes.json"
    result = run_playbook(str(tmp_path), str(playbook), "-e", f"nodes_file={nodes_file}")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    nodes = {n["host"]: n for n in json.loads(nodes_file.read_text(encoding="utf-8"))}
    for i, host in enumerate(sorted(hosts)):
        assert nodes[host]["sglang_nccl_socket_ifname"] == f"mgmt{i}", nodes[host]
        # Defaults of the role sparkfleet.serving.cluster, not set in this inventory.
        assert nodes[host]["roce_gid_mode"] == "discover"
        assert nodes[host]["roce_sysfs_root"] == "/sys/class/infiniband"
    assert "UNREACHABLE" not in output


def test_a_value_set_on_the_running_host_is_not_taken_as_everyones_default(tmp_path):
    # spark-1 runs the checks (run_once); its own roce_mtu must not become the others'.
    hosts, group, host_extra = mutate(host_extra={"spark-1": {"roce_mtu": 9100}})
    del group["roce_mtu"]
    write_inventory(str(tmp_path), hosts, group, host_extra)
    result = run_validate(str(tmp_path))
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "spark-2: roce_mtu differs from spark-1's" in output
    assert "UNREACHABLE" not in output


def test_a_refused_inventory_prints_its_message_not_every_nodes_variables(tmp_path):
    hosts, group, host_extra = mutate(group={"roce_mtu": 1500})
    write_inventory(str(tmp_path), hosts, group, host_extra)
    result = run_validate(str(tmp_path))
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "spark-1: roce_mtu is 1500" in output
    assert "127.0.3.13" not in output  # spark-2's ansible_host: no dump of the nodes
