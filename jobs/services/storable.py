"""Text PostgreSQL can store: it refuses a NUL character and an unpaired surrogate in any
text or jsonb value, so both are refused at intake and replaced in what binaries print."""

from __future__ import annotations

import re

# a Python str holds a character past U+FFFF as one code point, so any surrogate is unpaired
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable(value: object) -> str | None:
    """The first character in a JSON value the database cannot store (as `U+XXXX`), or None:
    a NUL or a lone surrogate (valid JSON escapes both) in any key or string, however deep."""
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
        elif isinstance(item, str) and (found := _UNSTORABLE.search(item)):
            return f"U+{ord(found.group()):04X}"
    return None


def storable(text: str) -> str:
    """`text` with each NUL and lone surrogate replaced by U+FFFD, as undecodable bytes are."""
    return _UNSTORABLE.sub("\ufffd", text)
