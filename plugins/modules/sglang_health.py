#!/usr/bin/python
# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_health
short_description: Wait for an SGLang server and smoke-test it
version_added: 0.1.0
description:
  - Checks an SGLang HTTP server from the node it runs on, so a server that listens on
    loopback only can be checked too. Uses the Python standard library only.
  - Runs the requested O(checks) in the order given. A failed C(health) check, a server
    that stops answering, or an HTTP 401 skips the checks after it.
  - Fails when any requested check fails, with a message naming the failed checks, the
    URL and the evidence, and still returns every check's evidence in RV(checks).
  - Never changes anything on the node or the server.
author: sparkfleet maintainers (@sparkfleet)
extends_documentation_fragment:
  - sparkfleet.serving.attributes
  - sparkfleet.serving.attributes.info_module
options:
  url:
    description:
      - Base URL of the SGLang HTTP server, without the C(/v1) suffix.
    type: str
    required: true
  api_key:
    description:
      - The key the server was started with (C(--api-key)), sent in an C(Authorization) header
        as a bearer token.
      - Leave unset for a server started without a key.
    type: str
  served_model_name:
    description:
      - The name the server serves the model under (C(--served-model-name)).
      - The C(models) check requires it among the served models; without it, any served
        model passes.
      - Sent as C(model) in every chat completion request, so required by the C(exact),
        C(math), C(short_max_tokens) and C(decode) checks.
    type: str
  checks:
    description:
      - The checks to run, in this order.
      - V(health) polls C(GET /health) until it answers HTTP 200 or O(timeout) runs out,
        retrying on refused connections, timeouts and HTTP 5xx.
      - V(models) requires O(served_model_name) among the C(data[].id) of C(GET /v1/models).
      - V(exact) asks at temperature 0 to reply with a fresh C(SPARKFLEET-<hex>) token and
        nothing else; passes when the stripped answer equals the token.
      - V(math) asks C(What is 17*19? Answer with the number only.); passes when the answer
        contains 323 as a whole number.
      - V(short_max_tokens) sends a chat completion with C(max_tokens) set to
        O(short_max_tokens) and requires HTTP 200 with non-empty text. On a speculative
        decoding cluster this is the live proof that the max-tokens clamp patch is in place.
      - V(decode) measures single-stream decode tokens/s over O(decode_runs) streamed
        completions and reports the median; time to the first token is excluded.
    type: list
    elements: str
    choices: [health, models, exact, math, short_max_tokens, decode]
    default: [health, models]
  timeout:
    description:
      - Seconds the V(health) check keeps retrying before it fails.
    type: int
    default: 900
  poll_interval:
    description:
      - Seconds between two V(health) attempts.
    type: int
    default: 5
  request_timeout:
    description:
      - Socket timeout in seconds for each request of the other checks, applied to the
        connection and to every read. A server that stays silent longer fails the check.
    type: int
    default: 120
  short_max_tokens:
    description:
      - C(max_tokens) of the V(short_max_tokens) check.
    type: int
    default: 8
  decode_runs:
    description:
      - Number of streamed completions the V(decode) check takes the median of.
    type: int
    default: 3
  decode_max_tokens:
    description:
      - C(max_tokens) of each V(decode) run.
    type: int
    default: 256
  chat_template_kwargs:
    description:
      - Sent as C(chat_template_kwargs) with every chat completion.
      - The default turns thinking off so a thinking model answers directly.
      - Set to V({}) to send none.
    type: dict
    default:
      enable_thinking: false
notes:
  - Requests go straight to O(url); proxy environment variables are ignored.
  - The checks generate text, so they put load on the server while they run.
seealso:
  - name: SGLang OpenAI-compatible API
    description: The endpoints the checks use.
    link: https://docs.sglang.io/docs/basic_usage/openai_api
"""

EXAMPLES = r"""
- name: Wait for the head to answer /health and serve the model
  sparkfleet.serving.sglang_health:
    url: http://127.0.0.1:8081
    api_key: "{{ sglang_api_key | default(omit) }}"
    served_model_name: qwen3.8-27b
    timeout: 900

- name: Smoke-test the service after a restart
  sparkfleet.serving.sglang_health:
    url: http://127.0.0.1:8081
    api_key: "{{ sglang_api_key | default(omit) }}"
    served_model_name: qwen3.8-27b
    checks: [health, models, exact, math, short_max_tokens]
    timeout: 60

- name: Measure single-stream decode speed
  sparkfleet.serving.sglang_health:
    url: http://127.0.0.1:8081
    served_model_name: qwen3.8-27b
    checks: [health, decode]
    decode_runs: 5
    decode_max_tokens: 512
  register: __bench

- name: Show the median
  ansible.builtin.debug:
    msg: "{{ __bench.decode_tokens_per_s }} tok/s"
"""

RETURN = r"""
passed:
  description: Whether every requested check passed.
  returned: always
  type: bool
  sample: true
decode_tokens_per_s:
  description:
    - Median single-stream decode tokens/s of the V(decode) runs that produced a rate.
    - V(null) when V(decode) was not requested or no run produced a rate.
  returned: always
  type: float
  sample: 107.6
checks:
  description:
    - Evidence per requested check, keyed by check name.
    - Every entry has the keys C(passed), C(elapsed_s), C(status) and C(detail), and
      C(skipped=true) when an earlier failure stopped the run; the other keys depend on
      the check.
  returned: always
  type: dict
  contains:
    health:
      description: Result of the V(health) check.
      returned: when requested
      type: dict
      contains:
        passed:
          description: Whether C(/health) answered HTTP 200 in time.
          type: bool
          returned: always
        skipped:
          description: Present and true when an earlier check stopped the run.
          type: bool
          returned: when skipped
        elapsed_s: &elapsed_s
          description: Seconds the check took.
          type: float
          returned: always
        status:
          description: HTTP status of the last attempt, V(null) when it got no answer.
          type: int
          returned: always
        detail: &detail
          description: V(ok), or why the check failed or was skipped.
          type: str
          returned: always
        attempts:
          description: Number of requests sent.
          type: int
          returned: when run
        waited_s:
          description: Seconds from the first attempt to the last answer or give-up.
          type: float
          returned: when run
        error:
          description: The last reason an attempt did not pass.
          type: str
          returned: when failed
      sample:
        passed: true
        elapsed_s: 12.41
        status: 200
        detail: ok
        attempts: 3
        waited_s: 12.4
    models:
      description: Result of the V(models) check.
      returned: when requested
      type: dict
      contains:
        passed:
          description: Whether the expected model is served.
          type: bool
          returned: always
        elapsed_s: *elapsed_s
        status:
          description: HTTP status of C(GET /v1/models).
          type: int
          returned: always
        detail: *detail
        model_ids:
          description: The C(data[].id) values the server listed.
          type: list
          elements: str
          returned: when the server listed models
        expected:
          description: O(served_model_name).
          type: str
          returned: when the server listed models
        excerpt:
          description: Up to 200 characters of an unexpected answer body.
          type: str
          returned: on an unexpected answer
      sample:
        passed: true
        elapsed_s: 0.01
        status: 200
        detail: ok
        model_ids: [qwen3.8-27b]
        expected: qwen3.8-27b
    exact:
      description: Result of the V(exact) check.
      returned: when requested
      type: dict
      contains:
        passed:
          description: Whether the stripped answer equals the token.
          type: bool
          returned: always
        elapsed_s: *elapsed_s
        status:
          description: HTTP status of the chat completion.
          type: int
          returned: always
        detail: *detail
        expected:
          description: The token the model was asked to repeat.
          type: str
          returned: when run
        excerpt:
          description: Up to 200 characters of the answer (or of the body on an HTTP error).
          type: str
          returned: when answered
        finish_reason: &finish_reason
          description: C(choices[0].finish_reason).
          type: str
          returned: on HTTP 200
        completion_tokens: &completion_tokens
          description: C(usage.completion_tokens).
          type: int
          returned: on HTTP 200
      sample:
        passed: true
        elapsed_s: 0.42
        status: 200
        detail: ok
        expected: SPARKFLEET-1F0A9C3E
        excerpt: SPARKFLEET-1F0A9C3E
        finish_reason: stop
        completion_tokens: 9
    math:
      description: Result of the V(math) check; same keys as RV(checks.exact), with
        C(expected) V(323).
      returned: when requested
      type: dict
      sample:
        passed: true
        elapsed_s: 0.2
        status: 200
        detail: ok
        expected: "323"
        excerpt: "323"
        finish_reason: stop
        completion_tokens: 4
    short_max_tokens:
      description: Result of the V(short_max_tokens) check.
      returned: when requested
      type: dict
      contains:
        passed:
          description: Whether the short request answered HTTP 200 with text.
          type: bool
          returned: always
        elapsed_s: *elapsed_s
        status:
          description: HTTP status of the chat completion, V(null) when it got no answer.
          type: int
          returned: always
        detail: *detail
        max_tokens:
          description: The C(max_tokens) sent.
          type: int
          returned: when run
        finish_reason: *finish_reason
        completion_tokens: *completion_tokens
        clamp_observed:
          description: Whether the server generated more tokens than C(max_tokens), as a
            server with the max-tokens clamp does.
          type: bool
          returned: on HTTP 200
        excerpt:
          description: Up to 200 characters of the text.
          type: str
          returned: when answered
      sample:
        passed: true
        elapsed_s: 0.3
        status: 200
        detail: ok
        max_tokens: 8
        finish_reason: length
        completion_tokens: 16
        clamp_observed: true
        excerpt: 1 2 3 4 5 6 7 8
    decode:
      description: Result of the V(decode) check.
      returned: when requested
      type: dict
      contains:
        passed:
          description: Whether every run streamed to C([DONE]) and produced a rate.
          type: bool
          returned: always
        elapsed_s: *elapsed_s
        status:
          description: HTTP status of the last run.
          type: int
          returned: always
        detail: *detail
        max_tokens:
          description: The C(max_tokens) of each run.
          type: int
          returned: when run
        tokens_per_s:
          description: Median over the runs; the same value as RV(decode_tokens_per_s).
          type: float
          returned: when run
        usage_reported:
          description: Whether every run ended with a usage chunk; when not, the rate
            counts text chunks instead of tokens.
          type: bool
          returned: when run
        runs:
          description: One entry per run.
          type: list
          elements: dict
          returned: when run
          contains:
            tokens_per_s:
              description: (completion_tokens - 1) / decode_s, V(null) when not measurable.
              type: float
            completion_tokens:
              description: Tokens from the usage chunk, or the text chunk count without it.
              type: int
            chunks:
              description: Streamed chunks that carried text.
              type: int
            usage_reported:
              description: Whether the stream ended with a usage chunk.
              type: bool
            finish_reason:
              description: The last C(finish_reason) streamed.
              type: str
            decode_s:
              description: Seconds from the first to the last text chunk.
              type: float
            ttft_s:
              description: Seconds from sending the request to the first text chunk.
              type: float
            complete:
              description: Whether the stream ended with the C([DONE]) event.
              type: bool
      sample:
        passed: true
        elapsed_s: 7.9
        status: 200
        detail: ok
        max_tokens: 256
        tokens_per_s: 107.6
        usage_reported: true
        runs:
          - tokens_per_s: 107.6
            completion_tokens: 256
            chunks: 256
            usage_reported: true
            finish_reason: length
            decode_s: 2.37
            ttft_s: 0.21
            complete: true
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.serving.plugins.module_utils._health import (
    CHECK_NAMES,
    DEFAULT_CHECKS,
    argument_spec,
    runner_from_params,
    validate_params,
)


def main():
    checks_option = dict(
        type="list", elements="str", choices=list(CHECK_NAMES), default=list(DEFAULT_CHECKS)
    )
    module = AnsibleModule(
        argument_spec=argument_spec(
            {"checks": checks_option, "timeout": dict(type="int", default=900)}
        ),
        supports_check_mode=True,
    )
    params = module.params

    errors = validate_params(params)
    if errors:
        module.fail_json(
            msg="; ".join(errors), changed=False, passed=False, decode_tokens_per_s=None, checks={}
        )

    report = runner_from_params(
        params,
        timeout=params["timeout"],
        poll_interval=params["poll_interval"],
        decode_runs=params["decode_runs"],
    ).run(params["checks"])

    result = dict(
        changed=False,
        passed=report["passed"],
        decode_tokens_per_s=report["decode_tokens_per_s"],
        checks=report["checks"],
    )
    if not report["passed"]:
        module.fail_json(msg=report["msg"], **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
