#!/usr/bin/env python3
"""Build the twin's model repositories: small real files as git repos with LFS.

Layout olah serves offline: <root>/models/<org>/<repo>, a git repository whose tree
holds Git LFS pointers for the weights and whose .git/lfs/objects holds the objects,
exactly what `git lfs` leaves in a clone. Every byte and every commit date is fixed,
so the commit shas are the same on every machine and inventories can pin them.
git-lfs itself is not needed to *write* that layout (a pointer is three text lines),
which keeps the image to Debian's git.

Usage: build_repos.py ROOT   (prints "<org>/<repo> <revision-name> <commit sha>" lines)
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys

AUTHOR = {
    "GIT_AUTHOR_NAME": "sparksim",
    "GIT_AUTHOR_EMAIL": "sparksim@twin.invalid",
    "GIT_COMMITTER_NAME": "sparksim",
    "GIT_COMMITTER_EMAIL": "sparksim@twin.invalid",
}
LFS_SUFFIXES = (".safetensors", ".bin")

CHAT_TEMPLATE = """{%- for message in messages %}
{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}
"""


def pseudo_random(seed: str, size: int) -> bytes:
    """Deterministic bytes (sha256 in counter mode)."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f"{seed}:{counter}".encode()).digest()
        counter += 1
    return bytes(out[:size])


def safetensors(tensors: dict[str, tuple[list[int], str]]) -> bytes:
    """A real safetensors file: u64 header length, JSON header, BF16 data."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, (shape, seed) in sorted(tensors.items()):
        count = 1
        for dim in shape:
            count *= dim
        data = pseudo_random(seed, count * 2)
        header[name] = {
            "dtype": "BF16",
            "shape": shape,
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + b"".join(blobs)


def git(repo: str, *args: str, env: dict | None = None) -> str:
    full_env = dict(os.environ, **AUTHOR, **(env or {}))
    return subprocess.run(
        ["git", "-C", repo, *args], check=True, capture_output=True, text=True, env=full_env
    ).stdout.strip()


def write_tree(repo: str, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = os.path.join(repo, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if name.endswith(LFS_SUFFIXES):
            oid = hashlib.sha256(data).hexdigest()
            obj_dir = os.path.join(repo, ".git", "lfs", "objects", oid[:2], oid[2:4])
            os.makedirs(obj_dir, exist_ok=True)
            with open(os.path.join(obj_dir, oid), "wb") as handle:
                handle.write(data)
            pointer = (
                f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {len(data)}\n"
            )
            data = pointer.encode()
        with open(path, "wb") as handle:
            handle.write(data)


def build(root: str, repo_id: str, commits: list[tuple[str, str, dict[str, bytes]]]) -> list[str]:
    repo = os.path.join(root, "models", *repo_id.split("/"))
    os.makedirs(repo, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", repo], check=True)
    attributes = "".join(f"*{s} filter=lfs diff=lfs merge=lfs -text\n" for s in LFS_SUFFIXES)
    lines = []
    for index, (tag, message, files) in enumerate(commits):
        write_tree(repo, {".gitattributes": attributes.encode(), **files})
        git(repo, "add", "-A")
        date = f"2026-01-0{index + 1}T00:00:00+0000"
        git(
            repo,
            "commit",
            "-q",
            "-m",
            message,
            env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
        )
        git(repo, "tag", tag)
        lines.append(f"{repo_id} {tag} {git(repo, 'rev-parse', 'HEAD')}")
    return lines


def main_model(version: int) -> dict[str, bytes]:
    hidden = 64
    shards = {
        "model-00001-of-00002.safetensors": {
            "model.embed_tokens.weight": ([4096, hidden], "embed"),
            "model.layers.0.mlp.up_proj.weight": ([hidden * 4, hidden], "l0-up"),
        },
        "model-00002-of-00002.safetensors": {
            "model.layers.1.mlp.up_proj.weight": ([hidden * 4, hidden], f"l1-up-v{version}"),
            "lm_head.weight": ([4096, hidden], "lm_head"),
        },
    }
    files = {name: safetensors(t) for name, t in shards.items()}
    index = {
        "metadata": {"total_size": sum(len(v) for v in files.values())},
        "weight_map": {t: name for name, ts in shards.items() for t in ts},
    }
    config = {
        "architectures": ["SparksimForCausalLM"],
        "model_type": "sparksim",
        "hidden_size": hidden,
        "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16",
        "sparksim_weights_version": version,
    }
    vocab = {f"w{i}": i for i in range(512)}
    files.update(
        {
            "config.json": (json.dumps(config, indent=2) + "\n").encode(),
            "model.safetensors.index.json": (
                json.dumps(index, indent=2, sort_keys=True) + "\n"
            ).encode(),
            "tokenizer.json": (
                json.dumps({"version": "1.0", "model": {"type": "WordLevel", "vocab": vocab}})
                + "\n"
            ).encode(),
            "tokenizer_config.json": (
                b'{"model_max_length": 32768, "tokenizer_class": "PreTrainedTokenizerFast"}\n'
            ),
            "chat-template-sglang.jinja": CHAT_TEMPLATE.encode(),
        }
    )
    return files


def draft_model() -> dict[str, bytes]:
    config = {
        "architectures": ["DFlashDraftModel"],
        "model_type": "sparksim-draft",
        "hidden_size": 64,
    }
    return {
        "config.json": (json.dumps(config, indent=2) + "\n").encode(),
        "model.safetensors": safetensors({"fc.weight": ([1024, 64], "draft-fc")}),
    }


def main() -> int:
    root = sys.argv[1]
    lines = build(
        root,
        "RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead",
        [
            ("v1", "Twin weights v1", main_model(1)),
            ("v2", "Twin weights v2: layer 1 retrained", main_model(2)),
        ],
    )
    lines += build(root, "z-lab/Qwen3.8-27B-DFlash2", [("v1", "Twin DFlash2 draft", draft_model())])
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
