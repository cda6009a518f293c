"""SGLang's own cross-node channels (issue 12): they pick their address outside NCCL.

After NCCL's bootstrap, torch's gloo group connects every rank to every other
rank's address on GLOO_SOCKET_IFNAME (else the hostname's), and the other ranks
connect to rank 0's message queue at the address get_local_ip_auto() picks
(SGLANG_HOST_IP, else a guess by route). An address another rank cannot reach
hangs the cluster after NCCL initialised, with no error: the dual-Spark report.
"""

from __future__ import annotations

import re

from twin_helpers import MGMT_IF, READY_LINE, ROCE_IF, wait_for

NCCL_UP = "Init COMPLETE"


def test_sglang_host_ip_other_ranks_cannot_reach_hangs_after_nccl(cluster_factory):
    cluster = cluster_factory(
        "mq-wrong",
        old_first={0: True},
        gid_layouts={0: "link-local,empty,ipv4:{old},ipv4:{ip}"},
        env={"GLOO_SOCKET_IFNAME": MGMT_IF},
    )
    # Rank 0 publishes its message queue on its old cross-wire address.
    cluster.env["SGLANG_HOST_IP"] = cluster.old_ip(0)
    cluster.start()
    stall = re.compile(
        rf"MessageQueue: rank 1 cannot reach rank 0's broadcaster at "
        rf"tcp://{re.escape(cluster.old_ip(0))}:\d+ \(.*\) for \d+s, still waiting"
    )
    assert wait_for(lambda: stall.search(cluster.logs(1)), 30), cluster.logs(1)
    assert NCCL_UP in cluster.logs(0)
    assert NCCL_UP in cluster.logs(1)
    assert f"broadcaster on tcp://{cluster.old_ip(0)}:" in cluster.logs(0)
    assert "(from SGLANG_HOST_IP)" in cluster.logs(0)
    assert not cluster.healthy(0)
    assert cluster.state(0)[0] and cluster.state(1)[0], "the cluster hangs, it does not exit"
    assert READY_LINE not in cluster.logs(0)


def test_gloo_on_a_nic_whose_first_ipv4_is_unreachable_hangs_after_nccl(cluster_factory):
    cluster = cluster_factory(
        "gloo-wrong",
        old_first={0: True},
        gid_layouts={0: "link-local,empty,ipv4:{old},ipv4:{ip}"},
        env={"GLOO_SOCKET_IFNAME": ROCE_IF},
    )
    cluster.env["SGLANG_HOST_IP"] = cluster.mgmt_ip(0)
    cluster.start()
    stall = re.compile(
        rf"\[Gloo\] rank 1 cannot connect to rank 0 at {re.escape(cluster.old_ip(0))}:\d+ "
        r"\(.*\) for \d+s, still waiting"
    )
    assert wait_for(lambda: stall.search(cluster.logs(1)), 30), cluster.logs(1)
    assert NCCL_UP in cluster.logs(1)
    assert not cluster.healthy(0)
    assert cluster.state(0)[0] and cluster.state(1)[0], "the cluster hangs, it does not exit"


def test_channels_on_the_management_nic_come_up(cluster_factory):
    cluster = cluster_factory("channels-ok", old_first={0: True},
                              gid_layouts={0: "link-local,empty,ipv4:{old},ipv4:{ip}"},
                              env={"GLOO_SOCKET_IFNAME": MGMT_IF})  # fmt: skip
    cluster.env["SGLANG_HOST_IP"] = cluster.mgmt_ip(0)
    cluster.start()
    cluster.wait_ready()
    assert f"broadcaster on tcp://{cluster.mgmt_ip(0)}:" in cluster.logs(0)
    assert "MessageQueue: rank 1 connected to rank 0's broadcaster" in cluster.logs(1)
    assert f"[Gloo] rank 1 connected to rank 0 at {cluster.mgmt_ip(0)}:" in cluster.logs(1)
