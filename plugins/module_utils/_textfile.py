# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""node_exporter textfiles: the Prometheus text format, written whole.

The collection's programs on the nodes (the watchdog and sparkfleet-cluster on the head,
each rank's launcher) report through node_exporter's textfile collector. They share this
file, installed beside each of them: one exposition rule, one way to write (a temporary
file renamed over the old one, so node_exporter never reads half a file).

A textfile's own labels never take the names its scrape target carries (cluster, node, rank:
the monitoring role's file_sd): Prometheus would rename them exported_<name>. A series about
another node names it "host".
"""

from __future__ import annotations

import contextlib
import os


def metrics_text(families, prefix):
    """Prometheus text exposition of [(name, type, help, [(labels, value)])]."""
    lines = []
    for name, kind, text, samples in families:
        lines += [f"# HELP {prefix}{name} {text}", f"# TYPE {prefix}{name} {kind}"]
        for labels, value in samples:
            tags = ",".join(
                '{}="{}"'.format(
                    k, str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
                )
                for k, v in sorted(labels.items())
            )
            value = float(value)
            number = str(int(value)) if value.is_integer() else repr(round(value, 3))
            lines.append(
                f"{prefix}{name}{{{tags}}} {number}" if tags else f"{prefix}{name} {number}"
            )
    return "\n".join(lines) + "\n"


def write_textfile(directory, name, text):
    """Write <directory>/<name> whole, then rename it; None, or the OSError's text."""
    path = os.path.join(directory, name)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(directory, mode=0o755, exist_ok=True)
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return f"cannot write {path}: {exc}"
    return None
