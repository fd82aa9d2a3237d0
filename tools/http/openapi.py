# Over 400 lines: the whole translation of an OpenAPI document into validated operations, kept in one place.
"""An OpenAPI 3 document read into operations, each with a pydantic model of its arguments.

The arguments of an operation are its path and query parameters plus, for a JSON request body that is
an object, the body's properties side by side with them (or one `body` argument for any other body).
Header and cookie parameters are left out: the call sets its own headers.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import yaml
from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel, create_model
from pydantic.fields import FieldInfo

from tools.schemas import ARGUMENTS, SchemaReader, UnsupportedSchema, python_name, read_only

from .config import Service

logger = logging.getLogger(__name__)

METHODS = ("get", "head", "post", "put", "patch", "delete")
SAFE_METHODS = {"GET", "HEAD"}
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_DOCUMENT_BYTES = 10 * 1024 * 1024
MAX_DESCRIPTION = 1000


class UnsupportedOperation(UnsupportedSchema):
    """An operation that cannot become a tool; it is skipped with a warning."""


@dataclass(frozen=True)
class Operation:
    name: str  # the operationId, or one derived from the method and path
    method: str
    path: str
    description: str
    args_model: type[BaseModel]
    path_params: tuple[str, ...]
    query_params: tuple[str, ...]
    # "fields": the body's properties are arguments; "whole": the `body` argument is the body.
    body: Literal["fields", "whole"] | None = None
    body_fields: tuple[str, ...] = ()

    @property
    def is_safe(self) -> bool:
        return self.method in SAFE_METHODS


# --- reading the document ----------------------------------------------------------------------


def parse_document(text: str | bytes, *, label: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except ValueError:
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ImproperlyConfigured(f"{label}: the OpenAPI document is neither JSON nor YAML ({exc}).") from None
    if not isinstance(document, dict):
        raise ImproperlyConfigured(f"{label}: the OpenAPI document is not an object.")
    version = str(document.get("openapi", ""))
    if not version.startswith("3."):
        raise ImproperlyConfigured(f"{label}: only OpenAPI 3 documents are supported (no 'openapi: 3.x' found).")
    if not isinstance(document.get("paths"), dict):
        raise ImproperlyConfigured(f"{label}: the OpenAPI document has no paths.")
    return document


def read_document(service: Service) -> dict[str, Any]:
    """The service's document from its file, or fetched from its URL (with the service token, on its own host)."""
    label = str(service)
    if not service.openapi_is_url:
        path = Path(service.openapi)
        try:
            if path.stat().st_size > MAX_DOCUMENT_BYTES:
                raise ImproperlyConfigured(f"{label}: the OpenAPI document {path} is larger than 10 MB.")
            text = path.read_bytes()
        except OSError as exc:
            raise ImproperlyConfigured(f"{label}: cannot read the OpenAPI document {path}: {exc.strerror}.") from None
        return parse_document(text, label=label)

    headers = {"Accept": "application/json, application/yaml;q=0.9, */*;q=0.1"}
    if service.token and httpx.URL(service.openapi).netloc == httpx.URL(service.base_url).netloc:
        headers["Authorization"] = f"Bearer {service.token}"
    try:
        with httpx.Client(timeout=service.timeout, follow_redirects=True) as client:
            response = client.get(service.openapi, headers=headers)
    except httpx.HTTPError as exc:
        raise ImproperlyConfigured(f"{label}: could not fetch {service.openapi}: {type(exc).__name__}.") from None
    if response.status_code != 200:
        raise ImproperlyConfigured(f"{label}: {service.openapi} answered {response.status_code}.")
    if len(response.content) > MAX_DOCUMENT_BYTES:
        raise ImproperlyConfigured(f"{label}: the OpenAPI document at {service.openapi} is larger than 10 MB.")
    return parse_document(response.content, label=label)


# --- names ---------------------------------------------------------------------------------------


def derived_name(method: str, path: str) -> str:
    """`get_invoices_invoice_id` for GET /invoices/{invoice_id}: for operations without an operationId."""
    words = re.findall(r"[A-Za-z0-9]+", path)
    return "_".join([method.lower(), *words])


def tool_name(service: str, operation: str) -> str:
    """`<service>_<operation>` in the characters (and length) every provider accepts."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", f"{service}_{operation}")[:64]


def path_segment(value: Any) -> Any:
    """A path parameter stays one segment under the base URL: no '..', no URL of its own."""
    if isinstance(value, str):
        stripped = value.strip()
        if not stripped:
            raise ValueError("must not be empty")
        if any(part in {".", ".."} for part in re.split(r"[/\\]", stripped)):
            raise ValueError("must not contain '.' or '..' path segments")
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", stripped) or stripped.startswith(("//", "\\\\")):
            raise ValueError("must be a value, not a URL")
    return value


# --- operations ----------------------------------------------------------------------------------


def _json_body(builder: SchemaReader, operation: dict[str, Any]) -> tuple[dict[str, Any] | None, bool]:
    """The JSON body's schema and whether a body is required; None when there is no JSON body."""
    body = builder.resolve(operation.get("requestBody"))
    if not isinstance(body, dict):
        return None, False
    required = body.get("required") is True
    content = body.get("content") or {}
    for media_type, media in content.items():
        base = media_type.split(";")[0].strip().lower()
        if base == "application/json" or base.endswith("+json"):
            return builder.resolve((media or {}).get("schema") or {}), required
    if required:
        raise UnsupportedOperation(f"its request body is not JSON ({', '.join(content) or 'no content'})")
    return None, False


def _description(operation: dict[str, Any], method: str, path: str) -> str:
    summary = str(operation.get("summary") or "").strip()
    details = str(operation.get("description") or "").strip()
    text = "\n\n".join(part for part in (summary, details) if part) or f"{method} {path}"
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1].rstrip() + "…"


def build_operation(
    builder: SchemaReader, *, service: str, path: str, method: str, item: dict[str, Any], operation: dict[str, Any]
) -> Operation:
    name = str(operation.get("operationId") or "").strip() or derived_name(method, path)
    model_name = tool_name(service, name)
    parameters: dict[tuple[str, str], dict[str, Any]] = {}
    for raw in [*(item.get("parameters") or []), *(operation.get("parameters") or [])]:
        parameter = builder.resolve(raw)
        if isinstance(parameter, dict) and isinstance(parameter.get("name"), str):
            parameters[(parameter["name"], parameter.get("in", ""))] = parameter

    fields: dict[str, tuple[Any, FieldInfo]] = {}
    taken: set[str] = set()
    names: set[str] = set()
    path_params: list[str] = []
    query_params: list[str] = []
    for (name_, location), parameter in parameters.items():
        if location not in {"path", "query"}:
            if location == "header" and parameter.get("required"):
                raise UnsupportedOperation(f"it requires the header {name_!r}")
            continue
        if name_ in names:
            raise UnsupportedOperation(f"two parameters are called {name_!r}")
        names.add(name_)
        required = location == "path" or parameter.get("required") is True
        fields[python_name(name_, taken)] = builder.field(
            parameter.get("schema") or {},
            alias=name_,
            required=required,
            model_name=f"{model_name}_{name_}",
            description=str(parameter.get("description") or ""),
            after=path_segment if location == "path" else None,
        )
        (path_params if location == "path" else query_params).append(name_)
    missing = set(re.findall(r"\{([^{}]+)\}", path)) - set(path_params)
    if missing:
        raise UnsupportedOperation(f"the path parameters {', '.join(sorted(missing))} are not described")

    body_kind: Literal["fields", "whole"] | None = None
    body_fields: list[str] = []
    schema, body_required = _json_body(builder, operation)
    if schema is not None:
        properties = schema.get("properties") if isinstance(schema, dict) else None
        required_props = set(schema.get("required") or []) if isinstance(schema, dict) else set()
        writable = {name_: prop for name_, prop in (properties or {}).items() if not read_only(builder.resolve(prop))}
        if writable and not names & set(writable) and schema.get("additionalProperties") is not True:
            body_kind = "fields"
            for prop_name, prop in writable.items():
                fields[python_name(prop_name, taken)] = builder.field(
                    prop,
                    alias=prop_name,
                    required=body_required and prop_name in required_props,
                    model_name=f"{model_name}_{prop_name}",
                )
                body_fields.append(prop_name)
        else:
            if "body" in names:
                raise UnsupportedOperation("a parameter is called 'body', the name its request body would take")
            body_kind = "whole"
            fields[python_name("body", taken)] = builder.field(
                schema, alias="body", required=body_required, model_name=f"{model_name}_body",
                description="The request body.",
            )  # fmt: skip

    return Operation(
        name=name,
        method=method.upper(),
        path=path,
        description=_description(operation, method.upper(), path),
        args_model=create_model(model_name, __config__=ARGUMENTS, **fields),
        path_params=tuple(path_params),
        query_params=tuple(query_params),
        body=body_kind,
        body_fields=tuple(body_fields),
    )


def operations(document: dict[str, Any], *, service: str, label: str) -> list[Operation]:
    """Every operation of the document that can be a tool; the others are logged and left out."""
    builder = SchemaReader(document)
    found: list[Operation] = []
    for path, raw_item in document["paths"].items():
        try:
            item = builder.resolve(raw_item)
        except UnsupportedSchema as exc:
            logger.warning("%s: %s is left out: %s", label, path, exc)
            continue
        if not isinstance(item, dict) or not isinstance(path, str) or not path.startswith("/"):
            continue
        for method in METHODS:
            operation = item.get(method)
            if not isinstance(operation, dict):
                continue
            try:
                found.append(
                    build_operation(builder, service=service, path=path, method=method, item=item, operation=operation)
                )
            except UnsupportedSchema as exc:
                logger.warning("%s: %s %s is left out: %s", label, method.upper(), path, exc)
    return found
