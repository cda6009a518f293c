"""The "model": deterministic answers, whitespace tokens, local weights only."""

from __future__ import annotations

import itertools
import json
import os
import re

DEFAULT_CONTEXT_LEN = 32768
DEFAULT_MAX_NEW_TOKENS = 128  # upstream SamplingParams default

_EXACT = re.compile(r"exactly[^:]*:\s*(\S+)", re.IGNORECASE)
_PRODUCT = re.compile(r"(\d+)\s*[*\u00d7x]\s*(\d+)")
_COUNT = re.compile(r"count from 1 to (\d+)", re.IGNORECASE)
_FILLER = (
    "the quick brown fox jumps over the lazy dog while a patient engineer watches the cluster "
    "decode one token after another"
)


class ModelError(Exception):
    pass


def tokens(text):
    """Whitespace tokenization: the twin's tokens are words."""
    return str(text or "").split()


def answer(prompt):
    """(iterator of output words, natural_end) for a prompt.

    natural_end is False for filler, which runs until max_new_tokens.
    """
    text = str(prompt or "")
    match = _EXACT.search(text)
    if match:
        return iter([match.group(1)]), True
    match = _PRODUCT.search(text)
    if match:
        return iter([str(int(match.group(1)) * int(match.group(2)))]), True
    match = _COUNT.search(text)
    if match:
        return iter(str(i) for i in range(1, int(match.group(1)) + 1)), True
    return itertools.cycle(_FILLER.split()), False


def chat_prompt(messages):
    """Flatten chat messages; the last user message is what the answer keys on."""
    parts, last_user = [], ""
    for message in messages or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        content = str(content or "")
        parts.append(content)
        if isinstance(message, dict) and message.get("role") == "user":
            last_user = content
    return " ".join(parts), last_user


def check_model_path(path):
    """Weights must be a local directory (the twin has no Hugging Face access)."""
    if path and os.path.isdir(path):
        return
    raise ModelError(
        "OSError: We couldn't connect to 'https://huggingface.co' to load the files, and "
        f"couldn't find them in the cached files. It looks like {path} is not the path to a "
        "directory containing a file named config.json. Checkout your internet connection or "
        "see how to run the library in offline mode at "
        "'https://huggingface.co/docs/transformers/installation#offline-mode'."
    )


def hf_cache_has(repo_id, revision=None):
    """True when repo_id (at revision, if given) is in the local Hugging Face cache."""
    hub = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface"), "hub"
    )
    snapshots = os.path.join(hub, "models--" + repo_id.replace("/", "--"), "snapshots")
    if not os.path.isdir(snapshots):
        return False
    if revision:
        return os.path.isdir(os.path.join(snapshots, revision))
    return bool(os.listdir(snapshots))


def hf_cache_snapshot(repo_id, revision=None):
    """The cached snapshot of repo_id at revision when every file in it resolves, else None.

    Like huggingface_hub offline: a revision that is not a commit is looked up in refs/.
    """
    hub = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface"), "hub"
    )
    root = os.path.join(hub, "models--" + repo_id.replace("/", "--"))
    commit = revision or "main"
    if not re.match(r"^[0-9a-f]{40}$", commit):
        try:
            with open(os.path.join(root, "refs", commit), encoding="utf-8") as handle:
                commit = handle.read().strip()
        except OSError:
            return None
    snapshot = os.path.join(root, "snapshots", commit)
    if not os.path.isfile(os.path.join(snapshot, "config.json")):
        return None
    for dirpath, _dirs, names in os.walk(snapshot):
        for name in names:
            if not os.path.exists(os.path.join(dirpath, name)):  # dangling blob link
                return None
    return snapshot


def check_model_revision(path, revision):
    """The staged model at path must be the pinned revision (its sparkfleet manifest says so)."""
    if not revision:
        return
    manifest = os.path.join(path, ".sparkfleet-manifest.json")
    try:
        with open(manifest, encoding="utf-8") as handle:
            staged = json.load(handle).get("commit")
    except (OSError, ValueError, AttributeError):
        staged = None
    if staged != revision:
        raise ModelError(
            f"ValueError: the model at {path} is revision {staged or 'unknown (no manifest)'}, "
            f"the launch pins {revision}"
        )


def check_chat_template(template):
    """A template given as a file must exist (SGLang fails at boot otherwise)."""
    if (
        template
        and (template.endswith(".jinja") or "/" in template)
        and not os.path.isfile(template)
    ):
        raise ModelError(f"FileNotFoundError: chat template {template} does not exist")


def model_config(path):
    """config.json of a local model dir ({} when absent or unreadable)."""
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def context_length(path, override=None):
    if override:
        return int(override)
    config = model_config(path)
    for key in ("max_position_embeddings", "max_sequence_length", "seq_length"):
        value = config.get(key)
        if isinstance(value, int) and value > 0:
            return value
    text_config = config.get("text_config")
    if isinstance(text_config, dict) and isinstance(
        text_config.get("max_position_embeddings"), int
    ):
        return text_config["max_position_embeddings"]
    return DEFAULT_CONTEXT_LEN


def wrong(word):
    """A wrongly accepted draft token: the last character moves on by one."""
    if not word:
        return word
    last = word[-1]
    if last.isdigit():
        return word[:-1] + str((int(last) + 1) % 10)
    if last.isalpha():
        return word[:-1] + ("a" if last in "zZ" else chr(ord(last) + 1))
    return word + "~"
