"""Sweep matrices: a TOML file (docs/sweep.md) expanded into cells, each with a stable id.

A matrix has `[defaults]` and a list of `[[group]]` tables. In a group every key whose value is a list is
an axis; the group expands to the cartesian product of its axes, times its `variants` (a list of tables
merged over the group, for combinations that are not a product), times `repetitions`. Cells run
repetition-major (every cell's first repetition, then every second one, ...): a drift of the machine
during the sweep then hits every arm of a comparison alike instead of one arm's repetitions. A cell is
identified by a hash of its parameters (defaults filled in), so a re-run of the same matrix finds the
cells it already has. Any problem in a file is one SpinscopeError line naming the file and group, with
exit code EXIT_USAGE.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from spinscope.errors import SpinscopeError
from spinscope.lab.netcond import bandwidth_bytes
from spinscope.lab.params import ID_IF_SET, PARAMS

EXIT_USAGE = 2  # an invalid matrix (or option)

CHOICES = {"write_policy": ("spin", "epollout"), "poller": ("epoll", "poll", "select"),
           "keepalive": ("on", "off"), "net": ("loopback", "veth")}
GROUP_KEYS = {"name", "claims", "variants", "repetitions"}
TOP_KEYS = {"name", "description", "defaults", "group", "needs_full", "sequential"}
# [sequential]: more repetitions for the claims the planned ones leave unsettled (lab/sequential.py): `looks`
# (2-10: the planned repetitions and up to looks - 1 rounds of as many again), `budget_s` (seconds of extra cells).
MAX_LOOKS = 10
CELL_OVERHEAD_S = 1.5  # start, RTT sample, attach, stop: used for the time-left estimate
# More cells than a sweep can run (full.toml's ~960 take 3.5 h; this many, days): a matrix asking for more
# is a mistake (`repetitions = 100000000`), refused before a single cell is made.
MAX_CELLS = 20_000


@dataclass
class Cell:
    """One run of a reference server under load: every parameter of PARAMS (defaults filled in) plus
    `repetition`; the matrix group it came from and the claim tags it carries."""

    params: dict
    group: str
    claims: list = field(default_factory=list)

    @property
    def id(self) -> str:
        return cell_id(self.params)

    def estimate_s(self) -> float:
        """Seconds the cell takes to run (for the time-left estimate)."""
        return float(self.params["warmup"]) + float(self.params["duration"]) + CELL_OVERHEAD_S


@dataclass
class Matrix:
    """A parsed matrix file: its cells in file order, each once."""

    name: str
    description: str
    path: Path
    text: str
    cells: list
    needs_full: list = field(default_factory=list)  # claim ids this matrix declares it does not settle
    sequential: dict | None = None  # {"looks": K, "budget_s": S} (lab/sequential.py), None: the planned only


def cell_id(params: dict) -> str:
    """`ARCH-HASH`: a hash of every parameter (defaults filled in), stable across runs and machines."""
    canon = json.dumps({k: params.get(k) for k in sorted(PARAMS) if k not in ID_IF_SET or params.get(k) is not None}
                       | {"repetition": params.get("repetition", 0)},
                       sort_keys=True, separators=(",", ":"))
    return f"{params['arch']}-{hashlib.sha1(canon.encode()).hexdigest()[:10]}"


def _check_value(where: str, key: str, value) -> None:
    types, _ = PARAMS[key]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise SpinscopeError(f"{where}: {key} = {value!r}: expected {'/'.join(t.__name__ for t in types)}",
                             exit_code=EXIT_USAGE)
    if key in CHOICES and value not in CHOICES[key]:
        raise SpinscopeError(f"{where}: {key} = {value!r}: expected one of {', '.join(CHOICES[key])}",
                             exit_code=EXIT_USAGE)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        raise SpinscopeError(f"{where}: {key} = {value!r}: must be >= 0", exit_code=EXIT_USAGE)


def _expand_group(where: str, table: dict) -> list:
    """Cartesian product of the list-valued keys of `table` -> list of {key: scalar}."""
    axes = []
    for key, value in table.items():
        if key not in PARAMS:
            raise SpinscopeError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(PARAMS))})",
                                 exit_code=EXIT_USAGE)
        values = value if isinstance(value, list) else [value]
        if not values:
            raise SpinscopeError(f"{where}: {key} is an empty list", exit_code=EXIT_USAGE)
        for v in values:
            _check_value(where, key, v)
        axes.append([(key, v) for v in values])
    return [dict(combo) for combo in itertools.product(*axes)]


def _finish(where: str, params: dict) -> dict:
    """Defaults filled in, cross-parameter rules checked, numbers normalized (so ids are stable)."""
    full = {k: default for k, (_, default) in PARAMS.items()}
    full.update(params)
    if not full["arch"]:
        raise SpinscopeError(f"{where}: no arch", exit_code=EXIT_USAGE)
    if full["mix"]:
        full["path"] = None
    if full["net"] != "veth" and (full["bandwidth"] or full["delay_ms"]):
        raise SpinscopeError(f"{where}: bandwidth and delay_ms need net = \"veth\"", exit_code=EXIT_USAGE)
    if full["bandwidth"]:
        try:
            bandwidth_bytes(full["bandwidth"])
        except SpinscopeError as exc:
            raise SpinscopeError(f"{where}: {exc}", exit_code=EXIT_USAGE) from None
    if full["shards"] and full["net"] == "veth":  # the shards listen on the root namespace's loopback
        raise SpinscopeError(f"{where}: shards need net = \"loopback\"", exit_code=EXIT_USAGE)
    if (full["memory_max"] or full["drop_caches"]) and not full["file_set"]:
        raise SpinscopeError(f"{where}: memory_max and drop_caches need a file_set", exit_code=EXIT_USAGE)
    if full["file_set"]:
        from spinscope.lab.diskset import parse_file_set, parse_size
        try:
            parse_file_set(full["file_set"])
            if full["memory_max"]:
                parse_size(full["memory_max"])
        except ValueError as exc:
            raise SpinscopeError(f"{where}: {exc}", exit_code=EXIT_USAGE) from None
    if full["duration"] <= 0:
        raise SpinscopeError(f"{where}: duration must be > 0", exit_code=EXIT_USAGE)
    for key in ("server_cpus", "loadgen_cpus"):
        if full[key] is not None:
            full[key] = str(full[key])
    for key in ("duration", "warmup", "interval", "delay_ms"):
        full[key] = float(full[key])
    return full


@dataclass
class GroupShape:
    """A [[group]] checked but not expanded: enough to count its cells before making any."""

    name: str
    where: str
    claims: list
    repetitions: int
    base: dict  # the group's parameters (scalars and axes)
    variants: list

    def tables(self) -> list:
        """(where, parameters) of each variant merged over the group."""
        return [(self.where if variant == {} else f"{self.where} variant {index + 1}", {**self.base, **variant})
                for index, variant in enumerate(self.variants)]

    def cells(self) -> int:
        """The cells it asks for (a cell asked for twice counted twice): computed, not expanded."""
        return self.repetitions * sum(math.prod(len(v) if isinstance(v, list) else 1 for v in table.values())
                                      for _, table in self.tables())


def _group_shape(path: Path, index: int, group: dict, doc: dict) -> GroupShape:
    name = str(group.get("name", f"group{index + 1}"))
    where = f"{path}: group {name!r}"
    claims = group.get("claims", [])
    if isinstance(claims, str):
        claims = [claims]
    reps = group.get("repetitions", doc.get("defaults", {}).get("repetitions", 1))
    if not isinstance(reps, int) or isinstance(reps, bool) or reps < 1:
        raise SpinscopeError(f"{where}: repetitions must be an integer >= 1", exit_code=EXIT_USAGE)
    variants = group.get("variants", [{}])
    if not isinstance(variants, list) or not variants or not all(isinstance(v, dict) for v in variants):
        raise SpinscopeError(f"{where}: variants must be a non-empty list of tables", exit_code=EXIT_USAGE)
    base = {k: v for k, v in group.items() if k not in GROUP_KEYS}
    return GroupShape(name, where, list(claims), reps, base, variants)


def parse_matrix(path: str | Path) -> Matrix:
    """Read and expand a matrix file; any problem is one SpinscopeError line naming the file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SpinscopeError(f"{path}: cannot read: {exc.strerror or exc}", exit_code=EXIT_USAGE) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpinscopeError(f"{path}: not UTF-8 text (byte {exc.start}); a matrix is a TOML file",
                             exit_code=EXIT_USAGE) from None
    return parse_matrix_text(text, path)


def parse_matrix_text(text: str, path: Path = Path("<matrix>")) -> Matrix:
    """Expand the matrix in `text` (`path` names it in errors)."""
    import tomllib  # Python >= 3.11; only the sweep needs it

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpinscopeError(f"{path}: not valid TOML: {exc}", exit_code=EXIT_USAGE) from None
    unknown = set(doc) - TOP_KEYS
    if unknown:
        raise SpinscopeError(f"{path}: unknown top-level key(s) {', '.join(sorted(unknown))} "
                             f"(known: {', '.join(sorted(TOP_KEYS))})", exit_code=EXIT_USAGE)
    defaults = doc.get("defaults", {})
    if not isinstance(defaults, dict):
        raise SpinscopeError(f"{path}: [defaults] must be a table", exit_code=EXIT_USAGE)
    for key, value in defaults.items():
        if key == "repetitions":
            continue  # checked per group
        if key not in PARAMS or isinstance(value, list):
            raise SpinscopeError(f"{path}: [defaults] {key}: unknown key or a list (axes belong in groups)",
                                 exit_code=EXIT_USAGE)
        _check_value(f"{path}: [defaults]", key, value)
    groups = doc.get("group", [])
    if not isinstance(groups, list) or not groups or not all(isinstance(g, dict) for g in groups):
        raise SpinscopeError(f"{path}: no [[group]] tables (a matrix needs at least one)", exit_code=EXIT_USAGE)
    shapes = [_group_shape(path, index, group, doc) for index, group in enumerate(groups)]
    asked = sum(shape.cells() for shape in shapes)
    if asked > MAX_CELLS:
        raise SpinscopeError(f"{path}: the matrix asks for {asked:,} cells, more than the {MAX_CELLS:,} a sweep "
                             "takes (axes × variants × repetitions of every group)", exit_code=EXIT_USAGE)
    cells: dict = {}
    for shape in shapes:
        for vwhere, table in shape.tables():
            for combo in _expand_group(vwhere, table):
                params = _finish(vwhere, {**{k: v for k, v in defaults.items() if k != "repetitions"}, **combo})
                for rep in range(shape.repetitions):
                    cell = Cell(params={**params, "repetition": rep}, group=shape.name, claims=list(shape.claims))
                    if cell.id in cells:  # the same cell asked for twice: run once, keep both tags
                        known = cells[cell.id]
                        known.claims += [c for c in shape.claims if c not in known.claims]
                    else:
                        cells[cell.id] = cell
    ordered = sorted(cells.values(), key=lambda c: c.params["repetition"])  # stable: file order within one
    return Matrix(name=str(doc.get("name", path.stem)), description=str(doc.get("description", "")),
                  path=path, text=text, cells=ordered, needs_full=_needs_full(path, doc),
                  sequential=_sequential(path, doc))


def _sequential(path: Path, doc: dict) -> dict | None:
    """The matrix's [sequential] table: {"looks": 2..MAX_LOOKS, "budget_s": > 0}, None when absent."""
    seq = doc.get("sequential")
    if seq is None:
        return None
    if not isinstance(seq, dict) or set(seq) != {"looks", "budget_s"}:
        raise SpinscopeError(f"{path}: [sequential] takes looks and budget_s", exit_code=EXIT_USAGE)
    looks, budget = seq["looks"], seq["budget_s"]
    if isinstance(looks, bool) or not isinstance(looks, int) or not 2 <= looks <= MAX_LOOKS:
        raise SpinscopeError(f"{path}: [sequential] looks must be an integer from 2 to {MAX_LOOKS}",
                             exit_code=EXIT_USAGE)
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 0:
        raise SpinscopeError(f"{path}: [sequential] budget_s must be a number of seconds > 0", exit_code=EXIT_USAGE)
    return {"looks": looks, "budget_s": float(budget)}


def _needs_full(path: Path, doc: dict) -> list:
    """The matrix's `needs_full`: ids of claims (lab/claims.py) it runs too few points of to settle."""
    from spinscope.lab.claims import CLAIMS  # with pandas and the criteria: imported only to check the ids

    ids = doc.get("needs_full", [])
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise SpinscopeError(f"{path}: needs_full must be a list of claim ids", exit_code=EXIT_USAGE)
    unknown = [i for i in ids if i not in {c.id for c in CLAIMS}]
    if unknown:
        raise SpinscopeError(f"{path}: needs_full: unknown claim id(s) {', '.join(unknown)}", exit_code=EXIT_USAGE)
    return list(ids)


def describe(p: dict) -> str:
    """A cell's main parameters in a few words (the sweep's progress lines and --list)."""
    parts = [p["arch"]]
    for key in ("workers", "sndbuf", "write_policy", "poller", "backlog"):
        if p[key] is not None:
            parts.append(f"{key}={p[key]}")
    parts.append(f"mix={p['mix']}" if p["mix"] else p["path"])
    parts.append(f"c={p['concurrency']}")
    for key in ("rate", "burst", "rcvbuf", "bandwidth"):
        if p[key] is not None:
            parts.append(f"{key}={p[key]}")
    if p["keepalive"] != "on":
        parts.append("keepalive=off")
    if p["net"] != "loopback":
        parts.append(p["net"] + (f" +{p['delay_ms']:g}ms" if p["delay_ms"] else ""))
    if p.get("repetition"):
        parts.append(f"rep {p['repetition']}")
    return " ".join(parts)
