"""The change that takes a pending job's what-if: the body of a `PATCH /api/v1/jobs/{id}`.

The policy says a relaxation in words (jobs/policy/explain.py, stored as the job's
`pending_what_if`); a client should not parse words, so the API hands it this instead.
"""

from __future__ import annotations

import re
from typing import Any

from jobs.policy.explain import FEWER_GPUS, FEWER_GPUS_SOONER, OTHER_TYPE, OTHER_TYPE_SOONER


def _pattern(template: str) -> re.Pattern[str]:
    """The template with each {name} a group that matches what the policy put there."""
    parts = re.split(r"\{(\w+)\}", template)  # text, name, text, name, ..., text
    return re.compile("".join(re.escape(part) if i % 2 == 0 else f"(?P<{part}>.+?)"
                              for i, part in enumerate(parts)) + r"\Z")


_OTHER_TYPES = [_pattern(OTHER_TYPE), _pattern(OTHER_TYPE_SOONER)]
_FEWER_GPUS = [_pattern(FEWER_GPUS), _pattern(FEWER_GPUS_SOONER)]


def relaxation(what_if: str, gpu_types: list[str]) -> dict[str, Any] | None:
    """`{"gpu_types": [...the job's, the other]}` or `{"gpus": n}`; None for no what-if."""
    for pattern in _OTHER_TYPES:
        if match := pattern.match(what_if):
            return {"gpu_types": [*gpu_types, match["gpu_type"]]}
    for pattern in _FEWER_GPUS:
        if match := pattern.match(what_if):
            return {"gpus": int(match["gpus"])}
    return None
