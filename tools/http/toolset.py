"""Each operation of a configured service as a Tool: `<service>_<operationId>`, safe when GET or HEAD."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel

from tools.registry import Tool, ToolContext, ToolRegistry, ToolSource

from .client import call_operation
from .config import Service
from .openapi import TOOL_NAME, Operation, operations, read_document, tool_name

logger = logging.getLogger(__name__)

# The tool's own deadline is a backstop behind the call's: the call's clearer error should win.
TIMEOUT_MARGIN = 5.0
RETRY_AFTER = 30.0


def _check_names(service: Service, found: list[Operation]) -> None:
    known = {operation.name for operation in found}
    for key in ("operations", "safe_operations", "confirm_operations"):
        listed = getattr(service, key) or frozenset()
        unknown = sorted(listed - known)
        if unknown:
            raise ImproperlyConfigured(
                f"{service}: {key} names operations its OpenAPI document does not have: {', '.join(unknown)}."
            )
    both = sorted(service.safe_operations & service.confirm_operations)
    if both:
        raise ImproperlyConfigured(f"{service}: {', '.join(both)} cannot be both safe and in need of confirmation.")


def _needs_confirmation(service: Service, operation: Operation) -> bool:
    if operation.name in service.confirm_operations:
        return True
    if operation.name in service.safe_operations:
        return False
    return not operation.is_safe


def make_tool(service: Service, operation: Operation) -> Tool:
    async def call(args: BaseModel, ctx: ToolContext) -> Any:
        return await call_operation(service, operation, args, ctx)

    name = tool_name(service.name, operation.name)
    call.__name__ = call.__qualname__ = name
    return Tool(
        name=name,
        description=operation.description,
        args_model=operation.args_model,
        func=call,
        requires_confirmation=_needs_confirmation(service, operation),
        permission=service.permission,
        timeout=service.timeout + TIMEOUT_MARGIN,
        source=ToolSource("http", service.name),
    )


def build_tools(service: Service, document: dict[str, Any]) -> list[Tool]:
    """The service's tools from its OpenAPI document; a config naming operations it lacks is an error."""
    found = operations(document, service=service.name, label=str(service))
    _check_names(service, found)
    if service.operations is not None:
        found = [operation for operation in found if operation.name in service.operations]
    tools: dict[str, Tool] = {}
    for operation in found:
        tool = make_tool(service, operation)
        if not TOOL_NAME.match(tool.name):
            raise ImproperlyConfigured(f"{service}: {tool.name!r} is not a usable tool name.")
        if tool.name in tools:
            raise ImproperlyConfigured(
                f"{service}: two operations make the tool name {tool.name!r}; give them distinct operationIds."
            )
        tools[tool.name] = tool
    return list(tools.values())


def service_tools(service: Service) -> list[Tool]:
    return build_tools(service, read_document(service))


class LazyService:
    """A service whose OpenAPI document is behind a URL: fetched once, at the first lookup of any tool.

    A failed fetch (service down, document unusable) is logged; the next lookup after RETRY_AFTER seconds
    tries again, so an outage of the service at start-up does not cost its tools for good.
    """

    def __init__(self, service: Service):
        self.service = service
        self._lock = threading.Lock()
        self._failed_at: float | None = None

    def __repr__(self) -> str:
        return f"<HTTP service {self.service.name} from {self.service.openapi}>"

    def __call__(self) -> list[Tool] | None:
        with self._lock:
            if self._failed_at is not None and time.monotonic() - self._failed_at < RETRY_AFTER:
                return None
            try:
                return service_tools(self.service)
            except ImproperlyConfigured as exc:
                self._failed_at = time.monotonic()
                logger.error("%s; its tools are not available (trying again in %g s)", exc, RETRY_AFTER)
                return None


def register_services(registry: ToolRegistry, services: list[Service]) -> None:
    """Tools of services with an OpenAPI file now (errors stop start-up); those behind a URL when first needed."""
    for service in services:
        if not service.token:
            logger.warning("%s: %s is not set; its tools will fail until it is.", service, service.token_env)
        if service.openapi_is_url:
            registry.add_source(LazyService(service))
            continue
        for tool in service_tools(service):
            try:
                registry.register(tool)
            except ValueError as exc:
                raise ImproperlyConfigured(f"{service}: {exc}") from None
