# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The engine's own argument parser on a rank's launch arguments, before anything stops.

The launcher's ``check`` runs ``PARSE`` in a throwaway container of the rank's image (no
GPU, no network, nothing of the node mounted): it builds the parser the way
``python -m sglang.launch_server`` does (``load_plugins()`` where the release has it, then
``argparse.ArgumentParser()`` and ``ServerArgs.add_cli_args``) and parses the rank's
arguments with it, printing one ``MARK`` line. Pure functions, standard library only:
installed beside the launcher on every node (with ``_profile_schema.py``, which names the
profile field behind a flag), unit-tested from the checkout.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess

# Where a node keeps its verdicts (in the launcher's state directory, the directory of
# sglang_node_stopped_mark), how many, and how long one parse may take.
CACHE = "engine-args.json"
KEEP = 16
TIMEOUT_S = 90
MARK = "sparkfleet-argcheck: "
# The API key shim (_engine.API_KEY_SHIM) puts the key first; the check never sees it.
API_KEY_FLAG = "--api-key"
API_KEY_PLACEHOLDER = "<sglang_api_key>"
API_KEY_SOURCE = "the variable sglang_api_key"
EXTRA_ARGS = "the profile field extra_args"

# Run by the image's interpreter: argv is the rank's launch_server arguments.
PARSE = r"""
import argparse, json, sys
MARK = "sparkfleet-argcheck: "
def say(**out):
    print(MARK + json.dumps(out), flush=True)
    sys.exit(0)
try:
    try:
        from sglang.srt.plugins import load_plugins
    except ImportError:
        load_plugins = None
    if load_plugins is not None:
        load_plugins()
    from sglang.srt.server_args import ServerArgs
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
except Exception as exc:
    say(unavailable=(type(exc).__name__ + ": " + str(exc))[:300])
class Refused(Exception):
    pass
def error(message):
    raise Refused(message)
parser.error = error
try:
    _known, unknown = parser.parse_known_args(sys.argv[1:])
except Refused as exc:
    say(refused=str(exc))
if unknown:
    say(refused="unrecognized arguments: " + " ".join(unknown), unknown=unknown)
say(ok=True)
"""
# Part of every cache key: a changed PARSE parses again.
PARSE_ID = hashlib.sha256(PARSE.encode()).hexdigest()[:12]
ARGUMENT = re.compile(r"^argument ([^:\s]+(?:/[^:\s]+)*):")
REQUIRED = re.compile(r"^the following arguments are required: (.*)$")
# allow_abbrev: a flag the release no longer has, but a prefix of two it has.
AMBIGUOUS = re.compile(r"^ambiguous option: ([^=\s]+)")


def server_argv(command):
    """The launch_server arguments of a rank's command, None when it is not one.

    ``command`` is what the image runs: the interpreter and its options, then ``-m
    sglang.launch_server`` or ``-c <the API key shim>`` (which puts ``--api-key`` first, from
    the environment), then the arguments. The key is never read: a placeholder stands in.
    """
    command = [str(arg) for arg in command]
    for i, arg in enumerate(command[:-1]):
        if arg == "-m" and command[i + 1] == "sglang.launch_server":
            return command[i + 2 :]
        if arg == "-c":
            rest = command[i + 2 :]
            if API_KEY_FLAG in command[i + 1]:
                rest = [API_KEY_FLAG, API_KEY_PLACEHOLDER, *rest]
            return rest
    return None


def docker_argv(python, image_id, argv, name):
    """``docker`` arguments of the throwaway parse: nothing started, no network, no GPU."""
    return [
        "run",
        "--rm",
        "--name",
        name,
        "--label",
        "sparkfleet.argcheck=1",
        "--network",
        "none",
        "--entrypoint",
        str(python),
        str(image_id),
        "-c",
        PARSE,
        *[str(arg) for arg in argv],
    ]


def parse(python, image_id, argv, name, timeout=TIMEOUT_S):
    """(verdict, None) of the engine's parse in a throwaway container, or (None, why)."""
    docker = shutil.which("docker") or "docker"
    try:
        proc = subprocess.Popen(
            [docker, *docker_argv(python, image_id, argv, name)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = proc.communicate(timeout=timeout)
    except OSError as exc:
        return None, f"docker: {exc}"
    except subprocess.TimeoutExpired:
        subprocess.run(
            [docker, "rm", "-f", name],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        proc.kill()
        proc.communicate()
        return None, f"no answer in {timeout} s"
    answer = verdict(out.decode("utf-8", "replace"))
    if answer is None or "unavailable" in answer:
        lines = err.decode("utf-8", "replace").strip().splitlines()
        return None, (answer or {}).get("unavailable") or (lines[-1] if lines else "no answer")
    return answer, None


def check(image, image_id, command, state_dir, name, flags):
    """The engine's word on a rank's command: (refusal or None, why the parse could not run
    or None). A verdict is kept per (image id, arguments) in ``state_dir``; a parse that
    cannot run (an image without the module, a timeout) is no refusal: the start itself is
    the engine's last word. ``flags``: the profile schema's ``server_flags()``."""
    argv = server_argv(command)
    if argv is None:
        return None, None
    key = cache_key(image_id, argv)
    path = os.path.join(state_dir or ".", CACHE)
    answer = recall(path, key)
    if answer is None:
        python = str(command[0]) if command else "python3"
        answer, why = parse(python, image_id, argv, name)
        if answer is None:
            return None, f"the engine's argument parse could not run in {image}: {why}"
        remember(path, key, image_id, answer, KEEP)
    if "refused" in answer:
        return refusal(image, image_id, argv, flags, answer), None
    return None, None


def cache_key(image_id, argv):
    """What a verdict is kept under: the image id, the arguments and the parse itself."""
    text = json.dumps([PARSE_ID, str(image_id), [str(arg) for arg in argv]])
    return hashlib.sha256(text.encode()).hexdigest()


def _kept(path):
    try:
        with open(path, encoding="utf-8") as handle:
            entries = json.load(handle)
    except (OSError, ValueError):
        return []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def recall(path, key):
    """The verdict kept under ``key`` in the JSON file ``path``, None when there is none."""
    return next((e.get("answer") for e in _kept(path) if e.get("key") == key), None)


def remember(path, key, image_id, answer, keep):
    """Keep a verdict (newest first, at most ``keep``); a file that cannot be written is
    not an error (the next check parses again)."""
    entries = [{"key": key, "image_id": str(image_id), "answer": answer}]
    entries += [e for e in _kept(path) if e.get("key") != key]
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as handle:
            json.dump(entries[:keep], handle)
        os.replace(path + ".tmp", path)
    except OSError:
        return False
    return True


def verdict(stdout):
    """The parse's answer: {"ok": True}, {"refused": message[, "unknown": tokens]} or
    {"unavailable": why}; None when it printed none (it could not run)."""
    for line in reversed((stdout or "").splitlines()):
        if line.startswith(MARK):
            try:
                answer = json.loads(line[len(MARK) :])
            except ValueError:
                return None
            return answer if isinstance(answer, dict) else None
    return None


def flag_sources(argv, flags):
    """What produced each flag of ``argv``: [(index, flag, source)] in order.

    ``flags``: the profile schema's (field, flag) in launch order (``server_flags()``). The
    profile's flags come first, in that order; the first flag out of it, and everything after
    it, is ``extra_args`` (appended as given); the API key shim's ``--api-key`` comes first.
    """
    order = {flag: (i, field) for i, (field, flag) in enumerate(flags)}
    out, last, extra = [], -1, False
    for index, arg in enumerate(argv):
        if not arg.startswith("--"):
            continue
        if index == 0 and arg == API_KEY_FLAG:
            out.append((index, arg, API_KEY_SOURCE))
            continue
        position = order.get(arg)
        if extra or position is None or position[0] <= last:
            extra = True
            out.append((index, arg, EXTRA_ARGS))
            continue
        last = position[0]
        out.append((index, arg, field_source(position[1])))
    return out


def field_source(field):
    """How a refusal names what renders a schema row: the profile field, or a derived flag."""
    if field.startswith("__"):
        return {
            "__node_rank": "spark_rank (the node's rank)",
            "__dist_init_addr": "rank 0's roce_ipv4 and the profile field dist_init_port",
        }.get(field, field)
    return f"the profile field {field}"


def refused_arguments(argv, flags, answer):
    """[(argument as given, source)] the parser refused, in argv order.

    ``answer``: a refused ``verdict``. Unrecognized tokens are matched to argv in order (a
    value goes with the flag before it); another error names its argument (``argument
    --x/--y: ...``, ``ambiguous option: --x could match ...``) or the arguments it requires.
    """
    sources = flag_sources(argv, flags)
    by_index = {index: (flag, source) for index, flag, source in sources}
    unknown = answer.get("unknown")
    if unknown:
        out, start = [], 0
        for token in unknown:
            token = str(token)
            if token in argv[start:]:
                index = argv.index(token, start)
                start = index + 1
                if index in by_index:
                    out.append([token, by_index[index][1]])
                elif out:
                    out[-1][0] += " " + token
                else:
                    out.append([token, EXTRA_ARGS])
        return [tuple(pair) for pair in out]
    message = str(answer.get("refused") or "")
    named = ARGUMENT.match(message) or AMBIGUOUS.match(message)
    if named:
        names = named.group(1).split("/")
        for index, flag, source in sources:
            if flag in names or any(flag.startswith(n + "=") for n in names):
                value = argv[index + 1] if index + 1 < len(argv) else ""
                shown = f"{flag} {value}" if value and not value.startswith("--") else flag
                return [(shown, source)]
        return [(names[0], "no field (the flag is not rendered)")]
    required = REQUIRED.match(message)
    if required:
        owner = {flag: field_source(field) for field, flag in flags}
        return [
            (name, f"{owner.get(name, 'no field')}, which renders none")
            for name in required.group(1).replace(",", " ").split()
            if name.startswith("-")
        ]
    return []


def refusal(image, image_id, argv, flags, answer):
    """The launcher's refusal: the image, each argument it refused and what rendered it."""
    pairs = refused_arguments(argv, flags, answer)
    named = "; ".join(f"{arg} ({source})" for arg, source in pairs) or "its arguments"
    return (
        f"the engine in image {image} ({str(image_id)[:19]}) refuses {named}: its own "
        f"parser says 'launch_server: error: {answer.get('refused')}'; fix: drop or rename "
        "the field for this release (sglang_profile_overrides), or choose an image whose "
        "SGLang accepts it"
    )
