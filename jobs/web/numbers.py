"""Whole numbers a dashboard page reads from a query or a form, where `str.isdigit()` would
let through what `int()` refuses ("²", "①", or more than 4300 digits)."""

from __future__ import annotations

MAX_DIGITS = 18  # past any id, count or limit we keep, and inside a bigint


def whole_number(text: str) -> int | None:
    """`text` as a non-negative whole number of at most MAX_DIGITS ASCII digits; else None."""
    if 0 < len(text) <= MAX_DIGITS and text.isascii() and text.isdigit():
        return int(text)
    return None
