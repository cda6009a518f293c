# Copyright (c) 2026, sparkfleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""RoCE GID table: read it from sysfs, parse ``show_gids``, pick the data-plane entry.

Pure logic for the ``roce_gid_info`` module (standard library only, no AnsibleModule).

A row is a dict with the columns ``show_gids`` prints:
``hca`` (str), ``port`` (int), ``index`` (int), ``gid`` (8 groups of 4 hex digits),
``ipv4`` (the address of an IPv4-mapped GID, else ``""``), ``version`` (``v1``/``v2``
as ``show_gids`` prints it, ``""`` when the type is unreadable) and ``netdev``
(``""`` when unreadable).

Like ``show_gids``, a table leaves out empty slots: the zero GID and the bare
``fe80::`` prefix. The link-local default GIDs (``fe80::<EUI-64>``) are listed but are
never a candidate for an IPv4 address.
"""

from __future__ import annotations

import ipaddress
import os
import re

ROW_KEYS = ("hca", "port", "index", "gid", "ipv4", "version", "netdev")

_EMPTY_GIDS = (ipaddress.IPv6Address("::"), ipaddress.IPv6Address("fe80::"))
_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[A-Za-z]|\([A-Z0-9])")
_DOTTED = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_VERSION = re.compile(r"^[Vv]\d+$")
_TYPE_VERSION = re.compile(r"[Vv].*")


class GidError(Exception):
    """Base class; the message is meant for the operator as it stands."""


class GidTableError(GidError):
    """The sysfs GID table root is missing, unreadable or holds no HCA."""


class GidSelectionError(GidError):
    """No entry, or more than one entry, fits the requested address and version."""


class ShowGidsParseError(GidError):
    """``show_gids`` printed something this parser does not understand."""


def validate_ipv4(address):
    """Return ``address`` in canonical dotted-quad form or raise GidError."""
    try:
        return str(ipaddress.IPv4Address(str(address).strip()))
    except ValueError:
        raise GidError(f"address {address!r} is not an IPv4 address") from None


def _gid_address(gid):
    try:
        return ipaddress.IPv6Address(gid)
    except ValueError:
        return None


def gid_ipv4(gid):
    """The IPv4 address of an IPv4-mapped GID (``::ffff:a.b.c.d``), else ``""``."""
    address = _gid_address(gid)
    mapped = address.ipv4_mapped if address is not None else None
    return str(mapped) if mapped is not None else ""


def is_link_local(gid):
    """True for a GID in fe80::/10."""
    address = _gid_address(gid)
    return bool(address is not None and address.is_link_local)


def is_empty_gid(gid):
    """True for the slots ``show_gids`` skips: the zero GID and bare ``fe80::``."""
    address = _gid_address(gid)
    if address is None:
        return not gid.strip("0:")
    return address in _EMPTY_GIDS


def gid_version(type_text):
    """``v1``/``v2`` from a ``gid_attrs/types`` text, the way ``show_gids`` cuts it."""
    match = _TYPE_VERSION.search(type_text or "")
    return match.group(0).strip() if match else ""


def _read(path):
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        # Real sysfs answers EINVAL for the attributes of an empty slot; a test tree
        # simply has no file there. Either way the attribute is unknown.
        return None


def _numeric_entries(path):
    try:
        names = os.listdir(path)
    except OSError:
        return []
    return sorted(int(name) for name in names if name.isdigit())


def _gids_dir(root, hca, port):
    return os.path.join(root, hca, "ports", str(port), "gids")


def list_hcas(root):
    """Names of the HCAs under ``root`` that have at least one port with a GID table.

    Raises GidTableError, naming ``root``, when it is missing, unreadable or has none.
    """
    if not os.path.isdir(root):
        raise GidTableError(f"{root}: GID table root does not exist or is not a directory")
    try:
        names = sorted(os.listdir(root))
    except OSError as exc:
        raise GidTableError(f"{root}: cannot list HCAs: {exc.strerror or exc}") from None
    hcas = [
        name
        for name in names
        if not name.startswith(".")
        and any(
            os.path.isdir(_gids_dir(root, name, port))
            for port in _numeric_entries(os.path.join(root, name, "ports"))
        )
    ]
    if not hcas:
        raise GidTableError(
            f"{root}: no HCA with a GID table (looked for <hca>/ports/<port>/gids/<index>)"
        )
    return hcas


def read_table(root):
    """Every non-empty GID of every HCA and port under ``root``, as rows.

    Sorted by HCA name, then port and index numerically. Unreadable GID, type or
    netdev files are tolerated. Raises GidTableError when ``root`` holds no HCA.
    """
    rows = []
    for hca in list_hcas(root):
        ports_dir = os.path.join(root, hca, "ports")
        for port in _numeric_entries(ports_dir):
            port_dir = os.path.join(ports_dir, str(port))
            for index in _numeric_entries(os.path.join(port_dir, "gids")):
                gid = _read(os.path.join(port_dir, "gids", str(index)))
                if not gid or is_empty_gid(gid):
                    continue
                gid = gid.lower()
                type_text = _read(os.path.join(port_dir, "gid_attrs", "types", str(index)))
                netdev = _read(os.path.join(port_dir, "gid_attrs", "ndevs", str(index)))
                rows.append(
                    {
                        "hca": hca,
                        "port": port,
                        "index": index,
                        "gid": gid,
                        "ipv4": gid_ipv4(gid),
                        "version": gid_version(type_text),
                        "netdev": netdev or "",
                    }
                )
    return rows


def _int_field(value, what, lineno, line):
    if not value.isdigit():
        raise ShowGidsParseError(
            f"show_gids line {lineno}: {what} {value!r} is not a number: {line!r}"
        )
    return int(value)


def _split_line(line, lineno):
    """(dev, port, index, gid, ipv4, version, netdev) strings of one show_gids row."""
    fields = [field.strip() for field in line.split("\t")]
    if len(fields) >= 7 and all(fields[:4]):
        # show_gids writes "<ipv4> \t<ver>\t<ndev>" or "\t\t<ver>\t<ndev>" after the
        # GID, so the last two tab fields are the version and the netdev even when
        # either one is empty (unreadable type or ndev file).
        ipv4 = " ".join(field for field in fields[4:-2] if field)
        if not ipv4 or _DOTTED.match(ipv4):
            return (*fields[:4], ipv4, fields[-2], fields[-1])
    tokens = line.split()
    if len(tokens) < 4:
        raise ShowGidsParseError(f"show_gids line {lineno}: fewer than 4 columns: {line!r}")
    rest = tokens[4:]
    ipv4 = rest.pop(0) if rest and _DOTTED.match(rest[0]) else ""
    version = rest.pop(0) if rest and _VERSION.match(rest[0]) else ""
    netdev = rest.pop(0) if rest else ""
    if rest:
        raise ShowGidsParseError(f"show_gids line {lineno}: unexpected columns {rest}: {line!r}")
    return (*tokens[:4], ipv4, version, netdev)


def parse_show_gids(text):
    """Rows from the output of ``show_gids`` (header, dashes, rows, ``n_gids_found=N``).

    Columns may be separated by tabs (as the script prints them) or by spaces.
    Raises ShowGidsParseError on a malformed row, a missing trailer, or a trailer
    whose count differs from the number of rows.
    """
    rows = []
    found = None
    for lineno, raw in enumerate(_ANSI.sub("", text or "").splitlines(), 1):
        line = raw.strip("\r\n")
        words = line.split()
        if not words:
            continue
        if words[0].startswith("n_gids_found="):
            value = words[0].split("=", 1)[1]
            found = _int_field(value, "n_gids_found", lineno, line)
            continue
        if words[0] == "DEV" or not words[0].strip("-"):
            continue
        dev, port, index, gid, ipv4, version, netdev = _split_line(line, lineno)
        rows.append(
            {
                "hca": dev,
                "port": _int_field(port, "port", lineno, line),
                "index": _int_field(index, "index", lineno, line),
                "gid": gid.lower(),
                "ipv4": ipv4,
                "version": version,
                "netdev": netdev,
            }
        )
    if found is None:
        raise ShowGidsParseError("show_gids printed no n_gids_found= trailer (output cut short?)")
    if found != len(rows):
        raise ShowGidsParseError(
            f"show_gids reports n_gids_found={found} but lists {len(rows)} GIDs"
        )
    return rows


def _where(row):
    return f"{row['hca']} port {row['port']} index {row['index']}"


def compare(rows_a, rows_b, names=("sysfs", "show_gids")):
    """Differences between two tables, one sentence each; ``[]`` when they agree.

    Rows are matched by (hca, port, index) and compared on gid, version and netdev
    (``ipv4`` is derived from the GID, and show_gids derives it more loosely).
    """
    name_a, name_b = names
    table_a = {(r["hca"], r["port"], r["index"]): r for r in rows_a}
    table_b = {(r["hca"], r["port"], r["index"]): r for r in rows_b}
    out = []
    for key in sorted(set(table_a) | set(table_b)):
        a, b = table_a.get(key), table_b.get(key)
        if b is None:
            out.append(f"{_where(a)}: {a['gid']} ({a['version']}) is listed by {name_a} only")
        elif a is None:
            out.append(f"{_where(b)}: {b['gid']} ({b['version']}) is listed by {name_b} only")
        else:
            for field in ("gid", "version", "netdev"):
                if a[field].lower() != b[field].lower():
                    out.append(
                        f"{_where(a)}: {field} is {a[field]!r} in {name_a}"
                        f" but {b[field]!r} in {name_b}"
                    )
    return out


def describe(row):
    """One GID as ``v1 at rocep1s0f0 port 1 index 2 (10.0.30.9, enp1s0f0np0)``."""
    what = ", ".join(part for part in (row["ipv4"] or row["gid"], row["netdev"]) if part)
    return f"{row['version'] or 'unknown type'} at {_where(row)} ({what})"


def select(rows, address, version, hca=None, hcas=None):
    """The single row carrying RoCE ``v<version>`` for IPv4 ``address``.

    ``hca`` limits the search to one HCA; ``hcas`` names the HCAs present (default:
    those in ``rows``), so that an HCA with an empty table still counts as searched.
    The address must match exactly (10.0.30.1 is not 10.0.30.10). Raises
    GidSelectionError, naming the address, when no row or several rows fit.
    """
    address = validate_ipv4(address)
    if version not in (1, 2):
        raise GidSelectionError(f"{address}: RoCE version {version!r} is not 1 or 2")
    want = f"v{version}"
    known = sorted(set(hcas) if hcas is not None else {row["hca"] for row in rows})
    if hca and hca not in known:
        raise GidSelectionError(
            f"{address}: hca {hca} not found; HCAs present: {', '.join(known) or 'none'}"
        )
    searched = [hca] if hca else known
    in_scope = [row for row in rows if row["hca"] in searched]
    carrying = [row for row in in_scope if row["ipv4"] == address and not is_link_local(row["gid"])]
    matches = [row for row in carrying if row["version"].lower() == want]

    if len(matches) == 1:
        return dict(matches[0])

    if matches:
        listed = ", ".join(f"{_where(row)} ({row['netdev'] or 'no netdev'})" for row in matches)
        message = f"{address}: {len(matches)} RoCE {want} GIDs match: {listed}; "
        if not hca and len({row["hca"] for row in matches}) > 1:
            message += "set hca (inventory: roce_hca) to the HCA of the data-plane NIC"
        else:
            message += "the address is assigned more than once; remove the duplicate"
        raise GidSelectionError(message)

    parts = [f"{address}: no RoCE {want} GID on {', '.join(searched) or 'any HCA'}"]
    if carrying:
        parts.append("found " + ", ".join(describe(row) for row in carrying))
    else:
        parts.append(f"no GID carries {address} (is it configured on the RoCE netdev?)")
    elsewhere = [
        row
        for row in rows
        if row["hca"] not in searched and row["ipv4"] == address and row["version"].lower() == want
    ]
    if elsewhere:
        parts.append(
            ", ".join(describe(row) for row in elsewhere) + f" is outside the hca filter {hca}"
        )
    ipv4_rows = [row for row in in_scope if row["ipv4"]]
    parts.append("IPv4 GIDs present: " + (", ".join(describe(row) for row in ipv4_rows) or "none"))
    raise GidSelectionError("; ".join(parts))
