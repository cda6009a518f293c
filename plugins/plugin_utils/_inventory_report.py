# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What every offline inventory check shares: the report it writes to, how it reads a value.

Every problem is reported as ``<host>: <variable> <what is wrong>; fix: <how>``
(plugins/plugin_utils/_inventory.py runs the checks).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


class Report:
    """Errors (launch refused) and warnings (operator told loudly)."""

    def __init__(self):
        self.errors = []
        self.warnings = []

    def error(self, host, variable, problem, fix):
        self.errors.append(f"{host}: {variable} {problem}; fix: {fix}")

    def warn(self, host, variable, problem, advice):
        self.warnings.append(f"{host}: {variable} {problem}; {advice}")


def as_ipv4(value):
    """``value`` as an IPv4 address, or None when it is not one."""
    try:
        return ipaddress.IPv4Address(str(value))
    except (ipaddress.AddressValueError, ValueError):
        return None


def as_network(value):
    """``value`` as an IPv4 network (no host bits set), or None when it is not one."""
    try:
        return ipaddress.IPv4Network(str(value), strict=True)
    except (ipaddress.AddressValueError, ipaddress.NetmaskValueError, ValueError):
        return None


def as_count(value):
    """``value`` as a non-negative integer (an int or a string of digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def url_problem(value):
    """Why ``value`` is not an http(s) URL with a host (None when it is one)."""
    text = str(value)
    try:
        parts = urlsplit(text)
    except ValueError as exc:
        return f"{text!r} is not a URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return f"{text!r} is not an http(s) URL" + ("" if parts.scheme else " (it has no scheme)")
    if not parts.hostname:
        return f"{text!r} names no host"
    return None


def is_loopback(host):
    """Whether ``host`` (a name or an address) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
