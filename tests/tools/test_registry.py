from __future__ import annotations

import asyncio
import threading

import pytest
from django.contrib.auth.models import Permission
from pydantic import BaseModel, Field

from tools.registry import ToolArgumentsError, ToolContext, ToolRegistry, ToolTimeout


class AssetArgs(BaseModel):
    assetId: str  # the seed's own argument name
    language: str = Field("en", description="Language of the transcript.")


class NoArgs(BaseModel):
    pass


@pytest.fixture
def registry():
    registry = ToolRegistry()

    @registry.tool
    def transcribe_video(args: AssetArgs, ctx: ToolContext) -> dict:
        """Transcribe the audio track of a video asset.

        Returns the transcript text.
        """
        return {"asset": args.assetId, "thread": threading.current_thread().name}

    @registry.tool(permission="conversations.delete_conversation", requires_confirmation=True, timeout=5)
    def purge(args: NoArgs, ctx: ToolContext) -> str:
        """Delete everything."""
        return "gone"

    return registry


def test_register_get_has_all(registry):
    assert registry.has("transcribe_video") and not registry.has("nope")
    tool = registry.get("transcribe_video")
    assert tool.description == "Transcribe the audio track of a video asset.\n\nReturns the transcript text."
    assert not tool.requires_confirmation and tool.permission is None and tool.timeout == 30
    purge = registry.get("purge")
    assert purge.requires_confirmation and purge.permission == "conversations.delete_conversation"
    assert [tool.name for tool in registry.all()] == ["transcribe_video", "purge"]
    with pytest.raises(KeyError):
        registry.get("nope")


def test_schemas_are_provider_agnostic_json_schema(registry):
    schema = registry.to_tool_schemas()[0]
    assert schema["name"] == "transcribe_video"
    assert schema["parameters"]["type"] == "object"
    assert schema["parameters"]["required"] == ["assetId"]
    assert schema["parameters"]["properties"]["assetId"]["type"] == "string"
    assert schema["parameters"]["properties"]["language"]["description"] == "Language of the transcript."


@pytest.mark.django_db
def test_schemas_list_only_what_the_user_may_use(registry, alice):
    assert [s["name"] for s in registry.to_tool_schemas(alice)] == ["transcribe_video"]
    alice.user_permissions.add(Permission.objects.get(codename="delete_conversation"))
    alice = type(alice).objects.get(pk=alice.pk)  # permissions are cached per user object
    assert [s["name"] for s in registry.to_tool_schemas(alice)] == ["transcribe_video", "purge"]


@pytest.mark.django_db
def test_inactive_user_gets_no_permissioned_tools(registry, admin_user):
    assert len(registry.to_tool_schemas(admin_user)) == 2
    admin_user.is_active = False
    assert [s["name"] for s in registry.to_tool_schemas(admin_user)] == ["transcribe_video"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({"assetId": 123}, "assetId: Input should be a valid string"),
        ({}, "assetId: Field required"),
        ({"assetId": "a", "language": ["en"]}, "language"),
        ("not an object", "expected a JSON object"),
    ],
)
def test_validation_names_the_offending_field(registry, args, fragment):
    with pytest.raises(ToolArgumentsError) as info:
        registry.get("transcribe_video").validate(args)
    assert fragment in str(info.value) and "transcribe_video" in str(info.value)


def test_valid_arguments_become_the_model(registry):
    args = registry.get("transcribe_video").validate({"assetId": "a-1"})
    assert args == AssetArgs(assetId="a-1", language="en")


async def test_sync_tools_run_in_a_worker_thread(registry):
    tool = registry.get("transcribe_video")
    result = await tool.run(tool.validate({"assetId": "a-1"}), ToolContext(user=None))
    assert result["asset"] == "a-1"
    assert result["thread"] != threading.main_thread().name


async def test_every_tool_has_a_timeout():
    registry = ToolRegistry()

    @registry.tool(timeout=0.1)
    async def slow(args: NoArgs, ctx: ToolContext) -> str:
        """Take a long time."""
        await asyncio.sleep(5)
        return "late"

    with pytest.raises(ToolTimeout, match=r"slow did not finish within 0\.1 s"):
        await slow.run(NoArgs(), ToolContext(user=None))


def test_a_tool_needs_a_model_and_a_docstring():
    registry = ToolRegistry()
    with pytest.raises(TypeError, match="pydantic model"):

        @registry.tool
        def untyped(args, ctx):
            """Do things."""

    with pytest.raises(TypeError, match="docstring"):

        @registry.tool
        def undocumented(args: NoArgs, ctx: ToolContext):
            pass


def test_names_are_unique(registry):
    with pytest.raises(ValueError, match="registered already"):

        @registry.tool(name="purge")
        def another(args: NoArgs, ctx: ToolContext) -> str:
            """Another purge."""


def test_a_tool_declared_slow_or_allowed_over_30_seconds_runs_in_the_background():
    registry = ToolRegistry()

    @registry.tool(slow=True)
    def rebuild_index(args: NoArgs, ctx: ToolContext) -> str:
        """Rebuild the search index."""
        return "done"

    @registry.tool(timeout=31)
    def export_all(args: NoArgs, ctx: ToolContext) -> str:
        """Export every dashboard."""
        return "done"

    @registry.tool(timeout=30)
    def quick_export(args: NoArgs, ctx: ToolContext) -> str:
        """Export one dashboard."""
        return "done"

    assert [tool.name for tool in registry.all() if tool.in_background] == ["rebuild_index", "export_all"]
