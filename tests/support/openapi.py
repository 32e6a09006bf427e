"""Check an API answer against a schema of the OpenAPI document: just the parts it uses
(type, nullable types, enum, required, properties without extras, items, $ref)."""

from __future__ import annotations

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value, type_name: str) -> bool:
    if type_name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _TYPES[type_name])


def conforms(value, schema: dict, document: dict, path: str = "$") -> list[str]:
    """What is wrong with `value` under `schema` (empty when it conforms)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return conforms(value, document["components"]["schemas"][name], document, path)
    problems = []
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(_is(value, t) for t in types):
            return [f"{path}: {value!r} is not {types}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} not in {schema['enum']}")
    if isinstance(value, dict) and "properties" in schema:
        props = schema["properties"]
        problems += [f"{path}: missing {k}" for k in schema.get("required", []) if k not in value]
        if schema.get("additionalProperties") is False:
            problems += [f"{path}: undocumented {k}" for k in value if k not in props]
        for key, item in value.items():
            if key in props:
                problems += conforms(item, props[key], document, f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += conforms(item, schema["items"], document, f"{path}[{i}]")
    return problems
