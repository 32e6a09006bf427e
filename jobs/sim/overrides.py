"""Tier and policy settings changed from the command line, to measure them before an
operator changes them in the service.

    --tier free:guaranteed_share=0.05,start_slo_s=1800   fields of a default tier
    --set reserve_share=0.25                             a PolicyConfig field

Values take the field's annotated type (int, float, bool, or `none` where optional); a
tier or field that does not exist is an error, not a silent no-op. The workloads name the
tiers their jobs belong to, so tiers are changed, not added.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from jobs.policy.types import PolicyConfig, TierSpec


def apply_tiers(specs: list[str], tiers: dict[str, TierSpec]) -> dict[str, TierSpec]:
    """`tiers` with each `NAME:field=value,...` applied."""
    out = dict(tiers)
    for spec in specs:
        name, sep, body = spec.partition(":")
        name = name.strip()
        if not name or not sep or not body:
            raise ValueError(f"--tier {spec!r}: expected NAME:field=value[,field=value]")
        if name not in out:
            raise ValueError(f"--tier {name}: no such tier (tiers: {', '.join(out)})")
        out[name] = replace(out[name], **_parse(body, TierSpec, f"--tier {name}", {"name"}))
    return out


def apply_config(specs: list[str], config: PolicyConfig) -> PolicyConfig:
    """`config` with each `field=value` applied."""
    changes: dict[str, Any] = {}
    for spec in specs:
        changes.update(_parse(spec, PolicyConfig, "--set"))
    return replace(config, **changes)


def _parse(body: str, cls: type, where: str, skip: frozenset | set = frozenset()) -> dict:
    written = _annotations(cls)
    known = {f.name: written[f.name] for f in fields(cls) if f.name not in skip}
    out = {}
    for part in body.split(","):
        key, sep, raw = (s.strip() for s in part.partition("="))
        if key not in known or not sep:
            raise ValueError(f"{where}: unknown field {key!r} (fields: {', '.join(known)})")
        out[key] = _value(raw, known[key], f"{where} {key}")
    return out


def _annotations(cls: type) -> dict[str, str]:
    """Each field's annotation as its source writes it ("float | None"), read from the source
    itself: the classes of a compiled policy (`bin/build-policy`) keep only the types mypyc
    stores the fields as, and an optional float is stored as any object."""
    package, _, name = cls.__module__.rpartition(".")
    # the package's own file: a compiled module's __file__ names no real place
    source = Path(str(sys.modules[package].__file__)).with_name(name + ".py")
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            return {stmt.target.id: ast.unparse(stmt.annotation) for stmt in node.body
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)}
    raise LookupError(f"no class {cls.__name__} in {source}")


def _value(raw: str, kind: str, where: str) -> Any:
    """`raw` read as the field's annotated type: bool, int, float, or None where optional."""
    word = raw.lower()
    try:
        if word == "none" and "None" in kind:
            return None
        if kind == "bool":
            if word not in ("true", "false"):
                raise ValueError
            return word == "true"
        if kind == "int":
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
    except ValueError:
        pass
    raise ValueError(f"{where}: cannot read {raw!r} as {kind}")
