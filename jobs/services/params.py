"""The params the node agent itself reads (workers/agent/runner.py): checked at intake, since
a value it cannot use would fail each try on a node after the job started, and a suffix
naming another directory would put the output there. Other params go to the binary as sent.
"""

from __future__ import annotations

import re

from jobs.services.errors import ValidationFailed

MAX_SEED = 2**63 - 1  # a signed 64-bit integer: what the frameworks' generators take
SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,10}")  # a file's extension, never a path


def check_params(params: dict) -> None:
    """Refuse a `seed` that is no integer in 0..MAX_SEED, or an `output_suffix` not SUFFIX."""
    if "seed" in params and _seed(params["seed"]) is None:
        raise ValidationFailed(f"params.seed must be an integer 0..{MAX_SEED}",
                               code="invalid_seed", field="params")
    if "output_suffix" in params:
        suffix = params["output_suffix"]
        if not isinstance(suffix, str) or not SUFFIX.fullmatch(suffix):
            raise ValidationFailed("params.output_suffix must be '.' then 1 to 10 letters or "
                                   "digits, such as '.mp4'", code="invalid_output_suffix",
                                   field="params")


def _seed(value: object) -> int | None:
    """The seed the node reads with int(): an integer, or its digits as a string (as clients
    sent it before this check); None for what int() refuses or a bool, float, out of range."""
    if isinstance(value, str) and value.isascii() and value.isdecimal() and len(value) <= 19:
        value = int(value)
    if type(value) is not int or not 0 <= value <= MAX_SEED:
        return None
    return value
