"""Issue 12: host requirements, collected-failure triage and owned env keys (pure logic)."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.sparkfleet.serving.plugins.module_utils import _engine
from ansible_collections.sparkfleet.serving.plugins.plugin_utils import _inventory_vars, _probe

SEED_CONTAINER = {
    "gpus": "all",
    "memory": "100g",
    "devices": ["/dev/infiniband"],
    "volumes": [
        "/home/tiger/.config/qwen38:/out",
        "/home/tiger/models:/home/tiger/models",
    ],
}
SEED = {
    "image": "qwen38-dflash2:v1.2.2",
    "chat_template": "/out/chat-template-sglang.jinja",
    "model_path": "/home/tiger/models/RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead",
    "container": SEED_CONTAINER,
}
TEMPLATE = "/home/tiger/.config/qwen38/chat-template-sglang.jinja"
MODEL = "/home/tiger/models/RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead"
# What spark_node_info's host reading returns for a node that has everything.
GOOD_PROBE = {
    "runtimes": ["io.containerd.runc.v2", "nvidia", "runc"],
    "cdi": [],
    "devices": {"/dev/infiniband": "present"},
    "image_id": "sha256:" + "a" * 64,
    "paths": {TEMPLATE: "file", MODEL: "dir"},
    "mem_available": 110 * 1024**3,
    "mem_held": 0,
    "uverbs": {"rocep1s0f0": {"devices": ["/dev/infiniband/uverbs0"], "missing": []}},
}


def probe_with(**changes):
    """GOOD_PROBE with top-level keys replaced and ``paths``/``devices`` entries merged."""
    probe = copy.deepcopy(GOOD_PROBE)
    for key, value in changes.items():
        if key in ("paths", "devices"):
            probe[key].update(value)
        else:
            probe[key] = value
    return probe


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("100g", 100 * 1024**3),
        ("512m", 512 * 1024**2),
        ("1.5GiB", int(1.5 * 1024**3)),
        ("0B", 0),
        ("2048", 2048),
        ("12.3MiB", int(12.3 * 1024**2)),
    ],
)
def test_size_bytes(value, expected):
    assert _engine.size_bytes(value) == expected


@pytest.mark.parametrize("value", ["", "g", "12x", "lots"])
def test_size_bytes_rejects(value):
    with pytest.raises(ValueError):
        _engine.size_bytes(value)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (
            "/out/chat-template-sglang.jinja",
            "/home/tiger/.config/qwen38/chat-template-sglang.jinja",
        ),
        ("/home/tiger/models/x", "/home/tiger/models/x"),
        ("/out", "/home/tiger/.config/qwen38"),
        ("/outside/file", None),
        ("/outer", None),
    ],
)
def test_host_path_follows_the_longest_mount(path, expected):
    assert _engine.host_path(SEED, path) == expected


def test_requirements_of_the_seed_profile():
    need = _engine.host_requirements(SEED)
    assert need["gpus"] == "all"
    assert need["devices"] == ["/dev/infiniband"]
    assert need["memory"] == 100 * 1024**3
    assert [p["path"] for p in need["paths"]] == [
        "/home/tiger/.config/qwen38/chat-template-sglang.jinja",
        "/home/tiger/models/RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead",
    ]


def test_a_node_with_everything_passes():
    assert _engine.host_problems("spark-1", SEED, GOOD_PROBE) == []


def test_a_cdi_spec_alone_does_not_serve_docker_gpus():
    """docker's --gpus runs the NVIDIA runtime or its prestart hook; a CDI spec serves only
    --device nvidia.com/gpu=all."""
    probe = probe_with(runtimes=["runc"], cdi=["/etc/cdi/nvidia.yaml"])
    (problem,) = _engine.host_problems("spark-1", SEED, probe)
    assert problem.startswith("spark-1: the profile asks for GPUs (container.gpus all")
    assert "nvidia-container-runtime-hook is not installed" in problem
    assert "the CDI spec (/etc/cdi/nvidia.yaml) serves --device nvidia.com/gpu=all" in problem
    # The hook installed (nvidia-container-toolkit without the runtime configured) serves it.
    probe["programs"] = {"nvidia-container-runtime-hook": "present"}
    assert _engine.host_problems("spark-1", SEED, probe) == []
    assert _engine.host_requirements(SEED)["programs"] == ["nvidia-container-runtime-hook"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"runtimes": ["runc"]},
            ["spark-2: the profile asks for GPUs", "nvidia-ctk runtime configure"],
        ),
        (
            {"devices": {"/dev/infiniband": "missing"}},
            ["spark-2: /dev/infiniband", "mlx5_ib"],
        ),
        # /dev/infiniband is there, but the data-plane HCA has no verbs device in it.
        (
            {"uverbs": {"rocep1s0f0": {"devices": [], "missing": []}}},
            ["spark-2: the data-plane HCA rocep1s0f0 (roce_hca) has no verbs device", "ib_uverbs"],
        ),
        (
            {
                "uverbs": {
                    "rocep1s0f0": {
                        "devices": ["/dev/infiniband/uverbs1"],
                        "missing": ["/dev/infiniband/uverbs1"],
                    }
                }
            },
            ["rocep1s0f0 (roce_hca) has /dev/infiniband/uverbs1 missing"],
        ),
        ({"image_id": ""}, ["spark-2: image qwen38-dflash2:v1.2.2", "docker load"]),
        (
            {"image_id": "", "image_error": "permission denied"},
            ["spark-2: docker could not inspect image qwen38-dflash2:v1.2.2", "permission denied"],
        ),
        (
            {"paths": {TEMPLATE: "missing"}},
            ["spark-2: chat template (chat_template) /out/chat", "fix: stage it"],
        ),
        ({"paths": {MODEL: "file"}}, ["model directory (model_path)", "a file, not a dir"]),
        (
            {"paths": {MODEL: "other"}},
            ["model directory (model_path)", "neither a file nor a directory, not a dir"],
        ),
        ({"mem_available": 20 * 1024**3}, ["needs 100.0 GiB but 20.0 GiB"]),
        ({"mem_available": None}, ["needs 100.0 GiB but 0.0 GiB"]),
    ],
)
def test_each_missing_thing_names_host_what_and_fix(change, expected):
    problems = _engine.host_problems("spark-2", SEED, probe_with(**change))
    assert len(problems) == 1, problems
    for text in expected:
        assert text in problems[0]
    assert "fix:" in problems[0]


def test_memory_held_by_the_running_engine_counts_as_free():
    probe = probe_with(mem_available=20 * 1024**3, mem_held=90 * 1024**3)
    assert _engine.host_problems("spark-1", SEED, probe) == []


def test_pull_allowed_and_paths_off():
    probe = probe_with(image_id="", paths={TEMPLATE: "missing"})
    assert _engine.host_problems("spark-1", SEED, probe, image_pull=True, check_paths=False) == []


def test_what_the_weights_stage_stages_is_not_required_yet():
    # A fresh rack: neither the model directory nor the chat template is there yet.
    probe = probe_with(paths={TEMPLATE: "missing", MODEL: "missing"})
    staged = [
        "/home/tiger/models/RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead/",
        "/home/tiger/.config/qwen38/chat-template-sglang.jinja",
    ]
    assert _engine.host_problems("spark-1", SEED, probe, staged=staged) == []
    # Only what nobody stages is still required: here the chat template.
    problems = _engine.host_problems("spark-1", SEED, probe, staged=staged[:1])
    assert len(problems) == 1
    assert "chat template (chat_template)" in problems[0]
    assert "which is missing; fix:" in problems[0]


DRAFT_REV = "b" * 40
DRAFT = dict(
    SEED,
    speculative={"draft_model_path": "org/Draft-1B", "draft_model_revision": DRAFT_REV},
    container=dict(
        SEED_CONTAINER,
        volumes=[
            *SEED_CONTAINER["volumes"],
            "/home/tiger/.cache/huggingface:/root/.cache/huggingface",
        ],
    ),
)
DRAFT_HOST = f"/home/tiger/.cache/huggingface/hub/models--org--Draft-1B/snapshots/{DRAFT_REV}"


def test_an_offline_boot_needs_the_hub_draft_cached_at_its_revision():
    # Online (or the weights stage staging it) the draft is not a host requirement.
    assert DRAFT_HOST not in [p["path"] for p in _engine.host_requirements(DRAFT)["paths"]]
    need = _engine.host_requirements(DRAFT, offline=True)
    assert [p["path"] for p in need["paths"]][-1] == DRAFT_HOST
    assert _engine.host_problems("spark-3", DRAFT, GOOD_PROBE) == []
    problems = _engine.host_problems("spark-3", DRAFT, GOOD_PROBE, offline=True)
    assert len(problems) == 1, problems
    assert problems[0].startswith("spark-3: speculative draft (speculative.draft_model_path")
    assert f"mounted from {DRAFT_HOST}, which is missing" in problems[0]
    assert "sglang_node_hf_offline: false" in problems[0]
    assert (
        f"HF_HOME=/home/tiger/.cache/huggingface hf download org/Draft-1B --revision {DRAFT_REV}"
        in problems[0]
    )
    cached = probe_with(paths={DRAFT_HOST: "dir"})
    assert _engine.host_problems("spark-3", DRAFT, cached, offline=True) == []


@pytest.mark.parametrize(
    "speculative",
    [
        {"draft_model_path": "/models/draft", "draft_model_revision": DRAFT_REV},
        {"draft_model_path": "org/Draft-1B"},
        {},
    ],
)
def test_a_local_or_unpinned_draft_is_not_looked_up_in_the_cache(speculative):
    profile = dict(DRAFT, speculative=speculative)
    need = _engine.host_requirements(profile, offline=True)
    assert not [p for p in need["paths"] if "huggingface" in p["path"]]


def test_a_twin_profile_needs_no_gpu_runtime_nor_device():
    twin = dict(SEED, container=dict(SEED_CONTAINER, gpus=None, devices=[], memory="2g"))
    probe = probe_with(runtimes=["runc"], devices={}, mem_available=4 * 1024**3)
    del probe["devices"]["/dev/infiniband"]
    assert _engine.host_problems("spark-1", twin, probe) == []


# Collected results: the expected failure is a real answer; the rest is reported as it is.
@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (
            {
                "rc": 1,
                "cmd": "ip -j -4 addr show dev enP7s7",
                "stderr": 'Device "enP7s7" does not exist.',
                "msg": "non-zero return code",
            },
            "",
        ),
        ({"rc": 0, "cmd": "ping", "stdout": "1 received"}, ""),
        ({"skipped": True}, ""),
        (
            {
                "rc": 1,
                "module_stderr": "Error response from daemon: No such container: spark-4",
                "module_stdout": "",
                "msg": "Module result deserialization failed: No start of json char found",
            },
            "the module did not run on the host, which is unreachable or gone "
            "(Error response from daemon: No such container: spark-4)",
        ),
        (
            {"unreachable": True, "msg": "Failed to connect to the host via ssh: timeout"},
            "host unreachable (Failed to connect",
        ),
        (
            {
                "rc": 2,
                "cmd": "ip -j -4 addr",
                "msg": "Error executing command.",
                "stdout": "",
                "stderr": "",
            },
            "ip could not be run on the host",
        ),
        (
            {"rc": 2, "cmd": "ping -c 1", "msg": "[Errno 2] No such file or directory: b'ping'"},
            "ping could not be run on the host",
        ),
        (
            {"rc": 127, "cmd": "docker info", "stderr": "docker: command not found"},
            "docker is not installed",
        ),
        ({"rc": 124, "cmd": "timeout 5 ping", "stderr": ""}, "timed out"),
        ({"msg": "Timeout (12s) waiting for privilege escalation prompt"}, "did not run (Timeout"),
        # A module (spark_node_info's pings) that answered: no exit code, and no error.
        ({"changed": False, "failed": False, "peers": {"10.0.30.2": {"ok": False}}}, ""),
        ({"failed": True, "msg": "ping size -28 is not positive"}, "did not run (ping size"),
        ("nothing", "left no result"),
    ],
)
def test_probe_error(result, expected):
    got = _probe.probe_error(result)
    if expected:
        assert expected in got
    else:
        assert got == ""


@pytest.mark.parametrize(
    ("key", "owner"),
    [
        ("NCCL_SOCKET_IFNAME", "sglang_nccl_socket_ifname"),
        ("NCCL_IB_GID_INDEX", "roce role"),
        ("MASTER_ADDR", "roce_ipv4"),
        ("MASTER_PORT", "dist_init_port"),
        ("PYTHONDONTWRITEBYTECODE", "Pitfall 6"),
        ("HF_ENDPOINT", "hf_endpoint"),
        ("HF_HUB_OFFLINE", "Hugging Face settings"),
        ("SPARKFLEET_MODEL_REVISION", "model_revision"),
        ("SGLANG_HOST_IP", "sglang_nccl_socket_ifname"),
        ("GLOO_SOCKET_IFNAME", "sglang_nccl_socket_ifname"),
        ("SGLANG_API_KEY", "sglang_api_key"),
        ("NCCL_DEBUG", None),
        ("TORCH_CUDA_ARCH_LIST", None),
        ("SGLANG_SM120_FLASHMLA_BACKEND", None),
    ],
)
def test_owned_env_keys(key, owner):
    got = _inventory_vars.owned_env_key(key)
    if owner is None:
        assert got is None
    else:
        assert owner in got


# --- host tools the stages rely on (issue 25): named with host, tool and fix --------------------

FANOUT_TOOLS = [
    {"kind": "program", "name": "rsync", "why": "the fan-out", "fix": "install rsync"},
    {"kind": "program", "name": "/usr/bin/rrsync", "why": "the fan-out key", "fix": "ship rrsync"},
    {"kind": "sshd_key_login", "name": "root", "why": "the head logs in", "fix": "admit it"},
    {"kind": "process", "name": "cron", "why": "the watchdog", "fix": "start cron"},
]
SSHD_OK = {
    "ok": True,
    "settings": {
        "permitrootlogin": "without-password",
        "pubkeyauthentication": "yes",
        "authenticationmethods": "any",
    },
}
TOOLS_OK = {
    "programs": {"rsync": "present", "/usr/bin/rrsync": "present"},
    "processes": {"cron": True},
    "sshd": SSHD_OK,
}


def tools_probe(**changes):
    probe = probe_with(**copy.deepcopy(TOOLS_OK))
    for key, value in changes.items():
        if isinstance(value, dict) and key in ("programs", "processes"):
            probe[key].update(value)
        else:
            probe[key] = value
    return probe


def sshd(**settings):
    return {"ok": True, "settings": dict(SSHD_OK["settings"], **settings)}


def test_a_node_with_every_tool_passes():
    assert _engine.host_problems("spark-2", SEED, tools_probe(), tools=FANOUT_TOOLS) == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"programs": {"rsync": "missing"}},
            "spark-2: rsync is not installed (the fan-out); fix: install rsync",
        ),
        (
            {"programs": {"/usr/bin/rrsync": "missing"}},
            "spark-2: /usr/bin/rrsync is not installed (the fan-out key); fix: ship rrsync",
        ),
        (
            {"processes": {"cron": False}},
            "spark-2: no cron process runs (the watchdog); fix: start cron",
        ),
        (
            {"sshd": sshd(permitrootlogin="no")},
            "spark-2: sshd has PermitRootLogin no, so root cannot log in with a key (the head logs "
            "in); fix: admit it",
        ),
        (
            {"sshd": sshd(pubkeyauthentication="no")},
            "spark-2: sshd has PubkeyAuthentication no, so root cannot log in with a key",
        ),
        (
            {"sshd": sshd(allowusers="tiger ops@10.0.0.*")},
            "spark-2: sshd's AllowUsers (tiger ops) does not admit root, so root cannot log in",
        ),
        (
            {"sshd": sshd(denyusers="r*")},
            "spark-2: sshd's DenyUsers matches root, so root cannot log in with a key",
        ),
        (
            {"sshd": sshd(authenticationmethods="publickey,password")},
            "spark-2: sshd requires AuthenticationMethods publickey,password, so root cannot",
        ),
        (
            {"sshd": {"ok": False, "error": "sshd is not installed"}},
            "spark-2: sshd's settings could not be read (sshd is not installed), so root",
        ),
    ],
)
def test_each_missing_host_tool_is_named_with_its_fix(changes, message):
    problems = _engine.host_problems("spark-2", SEED, tools_probe(**changes), tools=FANOUT_TOOLS)
    assert len(problems) == 1, problems
    assert problems[0].startswith(message), problems


@pytest.mark.parametrize(
    "settings",
    [
        {"permitrootlogin": "yes"},
        {"permitrootlogin": "prohibit-password"},
        {"allowusers": "root@10.0.30.* tiger"},
        {"authenticationmethods": "publickey password"},
    ],
)
def test_sshd_settings_that_admit_roots_key(settings):
    assert _engine.sshd_key_login_problem("root", sshd(**settings)) is None


def test_a_user_other_than_root_is_not_held_to_permitrootlogin():
    assert _engine.sshd_key_login_problem("weights", sshd(permitrootlogin="no")) is None
    assert _engine.sshd_key_login_problem("root", sshd(permitrootlogin="forced-commands-only"))


def test_no_tools_asked_no_tools_read():
    # A reading without the tool keys (the canary's host checks) passes with no tools asked.
    assert _engine.host_problems("spark-2", SEED, probe_with()) == []
    with pytest.raises(ValueError, match="unknown host tool kind"):
        _engine.tool_problems("spark-2", [{"kind": "daemon", "name": "x"}], {})
