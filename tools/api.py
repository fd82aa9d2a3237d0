"""GET /api/agent/tools: the tools the signed-in user may use, as the agent is offered them."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from agentchat.api import ErrorSerializer

from .registry import Tool, registry


class ToolSourceSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=["builtin", "http", "mcp"],
        help_text="builtin: written in AgentChat; http: an operation of an HTTP service; mcp: a tool of an MCP server.",
    )
    name = serializers.CharField(help_text="The app of a built-in tool, or the configured service or server.")


class AgentToolSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField(help_text="What the model is told the tool does.")
    requires_confirmation = serializers.BooleanField(help_text="A call waits for your approval before it runs.")
    parameters = serializers.JSONField(help_text="The JSON Schema of the arguments; unknown keys are refused.")
    source = ToolSourceSerializer()


def tool_data(tool: Tool) -> dict[str, Any]:
    if tool.source is not None:
        source = {"kind": tool.source.kind, "name": tool.source.name}
    else:
        module = getattr(tool.func, "__module__", None) or ""
        app = apps.get_containing_app_config(module) if module else None
        source = {"kind": "builtin", "name": app.label if app else module}
    return {
        "name": tool.name,
        "description": tool.description,
        "requires_confirmation": tool.requires_confirmation,
        "parameters": tool.schema()["parameters"],
        "source": source,
    }


class AgentToolsView(APIView):
    """The tools you may use: the ones the agent is offered when it answers you, each with its arguments."""

    @extend_schema(
        responses={
            200: AgentToolSerializer(many=True),
            401: OpenApiResponse(ErrorSerializer, description="Not signed in, or the token is invalid or expired."),
        },
    )
    def get(self, request):
        tools = registry.permitted(request.user)
        return Response(AgentToolSerializer([tool_data(tool) for tool in tools], many=True).data)
