# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The modules' side of _health: the shared options, the runner they build, and the
runner settings the canary's boot and decode runs borrow."""

from __future__ import annotations

import pytest

from ansible_collections.sparkfleet.serving.plugins.module_utils import _canary, _health

SHARED = {
    "url": dict(type="str", required=True),
    "api_key": dict(type="str", no_log=True),
    "served_model_name": dict(type="str"),
    "poll_interval": dict(type="int", default=5),
    "request_timeout": dict(type="int", default=120),
    "short_max_tokens": dict(type="int", default=8, no_log=False),
    "decode_runs": dict(type="int", default=3),
    "decode_max_tokens": dict(type="int", default=256, no_log=False),
    "chat_template_kwargs": dict(type="dict", default={"enable_thinking": False}),
}


def test_argument_spec_alone_is_the_shared_options_in_order():
    spec = _health.argument_spec()
    assert spec == SHARED
    assert list(spec) == list(SHARED)


def test_argument_spec_places_the_modules_own_options_and_amends_shared_ones():
    spec = _health.argument_spec(
        {"boot_timeout": dict(type="int", default=1200)},
        {"boot_only": dict(type="bool", default=False)},
        served_model_name={"required": True},
        poll_interval={"default": 2},
    )
    assert list(spec) == [
        "url",
        "api_key",
        "served_model_name",
        "boot_timeout",
        "poll_interval",
        "request_timeout",
        "short_max_tokens",
        "decode_runs",
        "decode_max_tokens",
        "boot_only",
        "chat_template_kwargs",
    ]
    assert spec["served_model_name"] == dict(type="str", required=True)
    assert spec["poll_interval"] == dict(type="int", default=2)
    # Each call builds its own dicts: an amendment does not leak into the next module.
    assert _health.argument_spec() == SHARED


def test_argument_spec_refuses_an_option_twice():
    with pytest.raises(TypeError):
        _health.argument_spec({"url": dict(type="str")})


def test_runner_from_params_builds_client_and_runner():
    params = {
        "url": "http://127.0.0.1:8081/",
        "api_key": "k",
        "served_model_name": "m",
        "request_timeout": 7,
        "decode_max_tokens": 64,
        "short_max_tokens": 4,
        "chat_template_kwargs": {},
    }
    runner = _health.runner_from_params(params, timeout=30, decode_runs=2)
    assert isinstance(runner, _health.HealthRunner)
    assert (runner.client.url, runner.client.api_key) == ("http://127.0.0.1:8081", "k")
    assert runner.client.request_timeout == 7
    assert (runner.model, runner.decode_max_tokens, runner.short_max_tokens) == ("m", 64, 4)
    assert runner.chat_template_kwargs == {}
    assert (runner.timeout, runner.decode_runs, runner.poll_interval) == (30, 2, 5)


def test_settings_apply_for_the_block_and_are_restored_even_on_error():
    runner = _health.HealthRunner(_health.SGLangClient("http://127.0.0.1:1"))
    with runner.settings(timeout=3, alive=print) as same:
        assert same is runner
        assert (runner.timeout, runner.alive) == (3, print)
    assert (runner.timeout, runner.alive) == (900, None)
    with pytest.raises(RuntimeError), runner.settings(decode_runs=1):
        raise RuntimeError("boom")
    assert runner.decode_runs == 3


def test_the_canary_boot_leaves_the_runners_settings_as_they_were():
    runner = _health.HealthRunner(_health.SGLangClient("http://127.0.0.1:1"), timeout=60)
    probe = _canary.CandidateProbe(runner, boot_timeout=0.1, poll_interval=0.05)
    assert not probe.boot()["ok"]
    assert (runner.timeout, runner.poll_interval, runner.alive) == (60, 5, None)
    assert runner.poll_request_timeout is None
