"""One call of an operation: only under the service's base URL, with both tokens, every failure a clear sentence."""

from __future__ import annotations

import asyncio
import json
import re
from http import HTTPStatus
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
from pydantic import BaseModel

from tools.identity import identity_token
from tools.registry import ToolContext

from .config import Service
from .exceptions import ServiceCallError, ServiceNotConfigured
from .openapi import Operation, path_segment

MAX_RESPONSE_BYTES = 1024 * 1024
MAX_ERROR_CHARS = 300
USER_AGENT = "AgentChat"


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_text(item) for item in value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def build_url(service: Service, operation: Operation, values: dict[str, Any]) -> str:
    """The base URL plus the operation's path, each parameter one percent-encoded segment."""

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if values.get(name) is None:
            raise ServiceCallError(f"The path parameter {name} is missing.")
        try:
            text = path_segment(_text(values[name]))
        except ValueError as exc:
            raise ServiceCallError(f"The path parameter {name} {exc}.") from None
        return quote(text, safe="")

    path = re.sub(r"\{([^{}]+)\}", fill, operation.path)
    url = f"{service.base_url}/{path.lstrip('/')}"
    # Belt and braces: whatever a parameter held, the call stays on the base URL's origin and path.
    base, built = httpx.URL(service.base_url + "/"), httpx.URL(url)
    if (built.scheme, built.netloc) != (base.scheme, base.netloc) or not built.raw_path.startswith(base.raw_path):
        raise ServiceCallError(f"The call would leave {service.name}'s base URL; it was not made.")
    return url


def _query(operation: Operation, values: dict[str, Any]) -> list[tuple[str, Any]]:
    query: list[tuple[str, Any]] = []
    for name in operation.query_params:
        if name not in values:
            continue
        value = values[name]
        items = value if isinstance(value, list) else [value]
        query += [(name, json.dumps(item) if isinstance(item, dict) else item) for item in items]
    return query


def _body(operation: Operation, values: dict[str, Any]) -> Any:
    if operation.body == "whole":
        return values.get("body")
    if operation.body == "fields":
        return {name: values[name] for name in operation.body_fields if name in values}
    return None


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1].rstrip() + "…"


def _service_message(response: httpx.Response, content: bytes) -> str:
    """The service's own short explanation: `error`, `detail`, `message`… of a JSON body, or a plain-text body."""
    content_type = response.headers.get("content-type", "").lower()
    if "json" in content_type:
        try:
            body = json.loads(content)
        except ValueError:
            return ""
        for _ in range(3):
            if isinstance(body, dict):
                found = next((body[key] for key in ("error", "detail", "message", "title") if body.get(key)), None)
                if found is None:
                    return ""
                body = found
            elif isinstance(body, list) and body:
                body = body[0]
            else:
                break
        return _short(body) if isinstance(body, str) else ""
    if content_type.startswith("text/plain"):
        return _short(content.decode("utf-8", "replace"))
    return ""


def _failure(service: Service, response: httpx.Response, content: bytes, secrets: list[str]) -> ServiceCallError:
    status = response.status_code
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "error"
    if 300 <= status < 400:
        return ServiceCallError(f"{service.name} answered {status} {phrase}: a redirect, which is not followed.")
    said = _service_message(response, content)
    for secret in secrets:
        said = said.replace(secret, "[hidden]")
    if status == 401:
        what = f"{service.name} did not accept the agent's credentials (401 {phrase})"
    elif status == 403:
        what = f"{service.name} refused: this user may not do that (403 {phrase})"
    elif status == 404:
        what = f"{service.name} found nothing there (404 {phrase})"
    elif status < 500:
        what = f"{service.name} rejected the request ({status} {phrase})"
    else:
        what = f"{service.name} failed on its side ({status} {phrase})"
    return ServiceCallError(f"{what}: {said}" if said else f"{what}.")


async def _read(response: httpx.Response, service: Service) -> bytes:
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise ServiceCallError(
                f"{service.name} answered with more than 1 MiB; ask for less (a filter, or a smaller page)."
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _result(response: httpx.Response, content: bytes) -> Any:
    if not content:
        return {"status": response.status_code}
    if "json" in response.headers.get("content-type", "").lower():
        try:
            return json.loads(content)
        except ValueError:
            pass
    return content.decode(response.encoding or "utf-8", "replace")


async def call_operation(service: Service, operation: Operation, args: BaseModel, ctx: ToolContext) -> Any:
    """Call the operation for `ctx.user`; the answer's JSON (or text), or ServiceCallError with a clear sentence."""
    if not service.token:
        raise ServiceNotConfigured(f"{service.name} is not configured: {service.token_env} is not set.")
    user = ctx.user
    if user is None or not getattr(user, "is_authenticated", False):
        raise ServiceCallError(f"{service.name} is only called on behalf of a signed-in user.")
    values = args.model_dump(mode="json", by_alias=True, exclude_none=True)
    url = build_url(service, operation, values)
    identity = identity_token(user, service)
    headers = {
        "Authorization": f"Bearer {service.token}",
        service.identity_header: identity,
        "Accept": "application/json",
        "User-Agent": USER_AGENT,
    }
    body = _body(operation, values)
    request: dict[str, Any] = {"params": _query(operation, values), "headers": headers}
    if operation.body is not None and body is not None:
        request["json"] = body
    try:
        # One deadline for the whole exchange: httpx's own timeouts are per step and restart with each chunk.
        async with (
            asyncio.timeout(service.timeout),
            httpx.AsyncClient(timeout=service.timeout, follow_redirects=False) as client,
            client.stream(operation.method, url, **request) as response,
        ):
            content = await _read(response, service)
    except (TimeoutError, httpx.TimeoutException):
        raise ServiceCallError(f"{service.name} did not answer within {service.timeout:g} s.") from None
    except httpx.HTTPError as exc:
        host = urlsplit(service.base_url).netloc
        raise ServiceCallError(f"Could not reach {service.name} at {host}: {exc or type(exc).__name__}.") from None
    if not 200 <= response.status_code < 300:
        raise _failure(service, response, content, [service.token, identity])
    return _result(response, content)
