"""JSON Schemas as pydantic models, for the arguments of tools whose schemas come from elsewhere (an OpenAPI
document, an MCP server). Validation is strict, as for every tool: an enum takes values of its own types only.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

MAX_DEPTH = 8
# A tool's own arguments: a key the schema does not name is refused; names and aliases are both taken.
ARGUMENTS = ConfigDict(extra="forbid", validate_by_name=True, validate_by_alias=True)


class UnsupportedSchema(Exception):
    """A schema this reader cannot turn into a model (such as one with a reference to another document)."""


def python_name(name: str, taken: set[str]) -> str:
    """A model field name for a name a schema uses (which may be `page-size`, `$filter` or `schema`)."""
    candidate = re.sub(r"\W", "_", name).strip("_") or "arg"
    if candidate[0].isdigit():
        candidate = f"p_{candidate}"
    if keyword.iskeyword(candidate) or hasattr(BaseModel, candidate):
        candidate = f"{candidate}_"
    unique, number = candidate, 2
    while unique in taken:
        unique, number = f"{candidate}_{number}", number + 1
    taken.add(unique)
    return unique


def _literal(values: list[str | int | bool]) -> Any:
    """An enum as a Literal that refuses true for 1, 1 for true and 1.0 for 1.

    Pydantic matches a literal by equality, strict or not; the type of the value must be one the enum has.
    """
    kinds = {type(value) for value in values}
    shown = [repr(value) for value in values]
    expected = f"{', '.join(shown[:-1])} or {shown[-1]}" if len(shown) > 1 else shown[0]

    def same_kind(value: Any) -> Any:
        if isinstance(value, int | float) and type(value) not in kinds:
            raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})
        return value

    return Annotated[Literal[tuple(values)], BeforeValidator(same_kind)]


class SchemaReader:
    """Turns the JSON Schemas of one document into pydantic annotations; local `$ref`s are followed."""

    def __init__(self, document: dict[str, Any]):
        self.document = document

    def resolve(self, node: Any) -> Any:
        seen: set[str] = set()
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#/") or ref in seen:
                raise UnsupportedSchema(f"the reference {ref!r} is not a local one this reader can follow")
            seen.add(ref)
            target: Any = self.document
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, dict) or part not in target:
                    raise UnsupportedSchema(f"the reference {ref!r} points at nothing")
                target = target[part]
            node = target
        return node

    def annotation(self, schema: Any, *, model_name: str, depth: int = 0, seen: frozenset[str] = frozenset()) -> Any:
        if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
            if schema["$ref"] in seen:
                return dict[str, Any]  # a schema that contains itself: one level is described, the rest is free
            seen = seen | {schema["$ref"]}
        schema = self.resolve(schema)
        if not isinstance(schema, dict) or depth > MAX_DEPTH:
            return Any
        nullable = schema.get("nullable") is True
        kind = schema.get("type")
        if isinstance(kind, list):
            nullable = nullable or "null" in kind
            kinds = [item for item in kind if item != "null"]
            kind = kinds[0] if len(kinds) == 1 else None
        annotation: Any
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            values = [value for value in schema["enum"] if value is not None]
            nullable = nullable or None in schema["enum"]
            if values and all(isinstance(value, str | int | bool) for value in values):
                annotation = _literal(values)
            else:
                annotation = Any
        elif isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
            annotation = self.annotation(schema["allOf"][0], model_name=model_name, depth=depth + 1, seen=seen)
        elif kind == "string":
            annotation = Annotated[str, Field(**self._limits(schema, "minLength", "maxLength"))]
        elif kind == "integer":
            annotation = Annotated[int, Field(**self._bounds(schema))]
        elif kind == "number":
            annotation = Annotated[float, Field(**self._bounds(schema))]
        elif kind == "boolean":
            annotation = bool
        elif kind == "array":
            items = self.annotation(
                schema.get("items", {}), model_name=f"{model_name}_item", depth=depth + 1, seen=seen
            )
            annotation = Annotated[list[items], Field(**self._limits(schema, "minItems", "maxItems"))]
        elif kind == "object" or (kind is None and isinstance(schema.get("properties"), dict)):
            annotation = self.object_model(schema, model_name=model_name, depth=depth + 1, seen=seen)
        else:
            annotation = Any
        return annotation | None if nullable and annotation is not Any else annotation

    def arguments_model(self, schema: Any, *, model_name: str) -> type[BaseModel]:
        """The model of a tool's arguments: the properties of an object schema, and no other key."""
        schema = self.resolve(schema)
        fields = self._fields(schema, model_name, depth=0, seen=frozenset()) if isinstance(schema, dict) else {}
        return create_model(model_name, __config__=ARGUMENTS, **fields)

    def object_model(self, schema: dict[str, Any], *, model_name: str, depth: int, seen: frozenset[str]) -> Any:
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            return dict[str, Any]
        extra = "forbid" if schema.get("additionalProperties") is False else "allow"
        config = ConfigDict(extra=extra, validate_by_name=True, validate_by_alias=True)
        return create_model(model_name, __config__=config, **self._fields(schema, model_name, depth, seen))

    def _fields(
        self, schema: dict[str, Any], model_name: str, depth: int, seen: frozenset[str]
    ) -> dict[str, tuple[Any, FieldInfo]]:
        properties = schema.get("properties")
        required = set(schema.get("required") or [])
        fields: dict[str, tuple[Any, FieldInfo]] = {}
        taken: set[str] = set()
        for name, prop in (properties if isinstance(properties, dict) else {}).items():
            if read_only(self.resolve(prop)):
                continue
            fields[python_name(name, taken)] = self.field(
                prop, alias=name, required=name in required, model_name=f"{model_name}_{name}", depth=depth, seen=seen
            )
        return fields

    def field(
        self,
        schema: Any,
        *,
        alias: str,
        required: bool,
        model_name: str,
        depth: int = 0,
        seen: frozenset[str] = frozenset(),
        description: str = "",
        after: Callable[[Any], Any] | None = None,
    ) -> tuple[Any, FieldInfo]:
        """One argument; `after` checks a valid value further (a path parameter stays one path segment)."""
        annotation = self.annotation(schema, model_name=model_name, depth=depth, seen=seen)
        schema = self.resolve(schema)
        if after is not None:
            annotation = Annotated[annotation, AfterValidator(after)]
        text = description or (schema.get("description", "") if isinstance(schema, dict) else "")
        if isinstance(schema, dict) and "default" in schema and not required:
            text = f"{text} (default: {json.dumps(schema['default'], default=str)})".strip()
        if required:
            return annotation, Field(..., alias=alias, description=text or None)
        # No default of the schema's is sent on its behalf: null means "leave it out".
        optional = annotation if annotation is Any else annotation | None
        return optional, Field(None, alias=alias, description=text or None)

    @staticmethod
    def _bounds(schema: dict[str, Any]) -> dict[str, Any]:
        bounds = {}
        if isinstance(schema.get("minimum"), int | float) and not isinstance(schema["minimum"], bool):
            bounds["ge"] = schema["minimum"]
        if isinstance(schema.get("maximum"), int | float) and not isinstance(schema["maximum"], bool):
            bounds["le"] = schema["maximum"]
        return bounds

    @staticmethod
    def _limits(schema: dict[str, Any], low: str, high: str) -> dict[str, Any]:
        limits = {}
        if isinstance(schema.get(low), int) and schema[low] >= 0:
            limits["min_length"] = schema[low]
        if isinstance(schema.get(high), int) and schema[high] >= 0:
            limits["max_length"] = schema[high]
        return limits


def read_only(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("readOnly") is True
