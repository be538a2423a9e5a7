"""A small JSON Schema subset: the one description of params, used to validate and to publish."""

from __future__ import annotations

from typing import Any

from braind.errors import InvalidParams

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def obj(required: tuple[str, ...] = (), **properties: dict[str, Any]) -> dict[str, Any]:
    """An object schema that refuses unknown properties."""
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def string(description: str, **extra: Any) -> dict[str, Any]:
    """A string property."""
    return {"type": "string", "description": description, **extra}


def turn_id(description: str, max_length: int, maximum: int) -> dict[str, Any]:
    """A string or a non-negative integer: an id compared as given, so 1 and "1" differ."""
    return {
        "type": ["string", "integer"],
        "description": description,
        "minLength": 1,
        "maxLength": max_length,
        "minimum": 0,
        "maximum": maximum,
    }


def integer(description: str, minimum: int, maximum: int) -> dict[str, Any]:
    """An integer property with its range."""
    return {"type": "integer", "description": description, "minimum": minimum, "maximum": maximum}


def boolean(description: str) -> dict[str, Any]:
    """A boolean property."""
    return {"type": "boolean", "description": description}


def strings(description: str, max_items: int = 64) -> dict[str, Any]:
    """An array of strings."""
    return {"type": "array", "description": description, "items": {"type": "string"}, "maxItems": max_items}


def validate(schema: dict[str, Any], params: Any) -> dict[str, Any]:
    """Check params against an object schema; raise InvalidParams naming the first bad one."""
    if not isinstance(params, dict):
        raise InvalidParams("invalid_params", "params must be an object")
    properties = schema["properties"]
    unknown = sorted(set(params) - set(properties))
    if unknown:
        raise InvalidParams("invalid_params", f"unknown param {unknown[0]!r}; allowed: {', '.join(properties)}")
    for name in schema["required"]:
        if name not in params:
            raise InvalidParams("invalid_params", f"missing required param {name!r}")
    for name, value in params.items():
        _check(name, properties[name], value)
    return params


def _check(name: str, spec: dict[str, Any], value: Any) -> None:
    """Check one value's type, range, choices and items."""
    if spec.get("type") == "object" and "properties" in spec:
        validate(spec, value)
        return
    kinds = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
    kind = next((k for k in kinds if _is(value, k)), None)
    if kind is None:
        raise InvalidParams("invalid_params", f"param {name!r} must be of type {' or '.join(kinds)}")
    if kind == "integer" and "minimum" in spec and not spec["minimum"] <= value <= spec["maximum"]:
        raise InvalidParams("invalid_params", f"param {name!r} must be {spec['minimum']} to {spec['maximum']}")
    if kind == "string" and not spec.get("minLength", 0) <= len(value) <= spec.get("maxLength", len(value)):
        raise InvalidParams(
            "invalid_params", f"param {name!r} must be {spec.get('minLength', 0)} to {spec['maxLength']} characters"
        )
    if "enum" in spec and value not in spec["enum"]:
        raise InvalidParams("invalid_params", f"param {name!r} must be one of {', '.join(spec['enum'])}")
    if isinstance(value, list):
        _check_items(name, spec, value)


def _is(value: Any, kind: str) -> bool:
    """Whether a value is of a JSON Schema type (a bool is no integer)."""
    return isinstance(value, _TYPES[kind]) and not (kind == "integer" and isinstance(value, bool))


def _check_items(name: str, spec: dict[str, Any], value: list[Any]) -> None:
    """Check an array's length and item types."""
    if len(value) > spec.get("maxItems", 1 << 16):
        raise InvalidParams("invalid_params", f"param {name!r} has more than {spec['maxItems']} items")
    for item in value:
        if spec.get("items"):
            _check(f"{name}[]", spec["items"], item)
