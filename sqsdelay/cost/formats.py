"""Which format a cost input is in: a file's by its name, a local folder's by the data files
in it. The event log's inputs and the bill are told apart the same way (their suffixes
differ), and a folder is read as Spark reads it: by the data files at any depth.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from sqsdelay.cost import localpaths
from sqsdelay.errors import InvalidInput


def format_of_name(path: str, suffixes: Mapping[str, str]) -> str | None:
    """The format the name says, by its last suffix with `.gz` and `.snappy` aside and case
    aside (`BILL.CSV`, `cur.csv.gz`, `part-0.snappy.parquet`); None when it says none."""
    name = path.rstrip("/").rsplit("/", 1)[-1].lower()
    name = name.removesuffix(".gz").removesuffix(".snappy")
    dot = name.rfind(".")
    return suffixes.get(name[dot:]) if dot >= 0 else None


def formats_inside(folder: str, suffixes: Mapping[str, str]) -> set[str]:
    """The formats of the data files in a local folder, at any depth. Files Spark skips
    (`_SUCCESS`, `.crc` checksums: names starting with `_` or `.`) and files of no known
    format (AWS Data Exports' JSON manifests) are not data."""
    return {
        fmt
        for _, _, files in os.walk(folder)
        for name in files
        if not name.startswith(("_", ".")) and (fmt := format_of_name(name, suffixes)) is not None
    }


def format_of(
    paths: Sequence[str],
    suffixes: Mapping[str, str],
    *,
    what: str,
    option: str,
    otherwise: str | None = None,
) -> str:
    """The one format of `paths` (`what`: "input" or "bill"): a path's by its name; a local
    folder's by its data files; any other path's (a remote folder, a file whose name says no
    format) is `otherwise`, or without one is refused naming `option`, which gives it."""
    found = set()
    for path in paths:
        fmt = format_of_name(path, suffixes)
        if fmt is None and localpaths.certainly_local(path) and os.path.isdir(path):
            inside = sorted(formats_inside(path, suffixes))
            if len(inside) != 1:
                held = (
                    f"files of several formats ({', '.join(inside)})"
                    if inside
                    else f"no {' or '.join(suffixes)} files (.gz too)"
                )
                raise InvalidInput(
                    f"the {what} folder {path} holds {held}: give the folder of one format's "
                    f"data files, or {option}"
                )
            fmt = inside[0]
        if fmt is None:
            if otherwise is None:
                raise InvalidInput(
                    f"cannot tell the format of {path!r} from its name: give {option}"
                )
            fmt = otherwise
        found.add(fmt)
    if len(found) != 1:
        mixed = ", ".join(sorted(found))
        raise InvalidInput(f"the {what}s mix formats ({mixed}): give one format per run")
    return found.pop()
