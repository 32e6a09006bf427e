"""JSON schemas of serializer fields, with the limits they enforce, and the building blocks
of the answers jobs/api/openapi.py writes out."""

from __future__ import annotations

from rest_framework import serializers


def nullable(schema: dict) -> dict:
    return {**schema, "type": [schema["type"], "null"]}


def obj(properties: dict, optional: tuple[str, ...] = ()) -> dict:
    return {"type": "object", "properties": properties, "additionalProperties": False,
            "required": [k for k in properties if k not in optional]}


STR, INT, BOOL = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
NUMBER = {"type": "number"}
TIME = {"type": "string", "format": "date-time"}
ANY_OBJECT = {"type": "object"}


def field_schema(field: serializers.Field) -> dict:
    """The JSON schema of one serializer field, with the limits it enforces."""
    schema = _value_schema(field)
    if field.help_text:
        schema["description"] = str(field.help_text)
    return nullable(schema) if field.allow_null else schema


def _value_schema(field: serializers.Field) -> dict:
    if isinstance(field, serializers.BooleanField):
        return dict(BOOL)
    if isinstance(field, serializers.IntegerField):
        schema = dict(INT)
        for key, value in (("minimum", field.min_value), ("maximum", field.max_value)):
            if value is not None:
                schema[key] = value
        return schema
    if isinstance(field, serializers.FloatField):
        return dict(NUMBER)
    if isinstance(field, serializers.DictField):
        if isinstance(field.child, serializers.CharField):  # labels; params take anything
            return {**ANY_OBJECT, "additionalProperties": field_schema(field.child)}
        return dict(ANY_OBJECT)
    if isinstance(field, serializers.ListField):
        schema = {"type": "array", "items": field_schema(field.child)}
        if field.max_length is not None:
            schema["maxItems"] = field.max_length
        if field.min_length:
            schema["minItems"] = field.min_length
        return schema
    if isinstance(field, serializers.ChoiceField):
        return {"type": "string", "enum": list(field.choices)}
    if isinstance(field, serializers.CharField):
        schema = dict(STR)
        if field.max_length is not None:
            schema["maxLength"] = field.max_length
        if not field.allow_blank:
            schema["minLength"] = 1
        if isinstance(field, serializers.SlugField):
            schema["pattern"] = r"^[-a-zA-Z0-9_]*$"
        return schema
    raise TypeError(f"no schema for {type(field).__name__}")


def request_schema(serializer: serializers.Serializer) -> dict:
    fields = {name: f for name, f in serializer.fields.items() if not f.read_only}
    return {"type": "object", "properties": {n: field_schema(f) for n, f in fields.items()},
            "required": [n for n, f in fields.items() if f.required]}
