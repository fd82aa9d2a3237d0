from __future__ import annotations

import asyncio
import threading

import pytest
from django.contrib.auth.models import Permission
from pydantic import BaseModel, Field

from tools.registry import Tool, ToolArgs, ToolArgumentsError, ToolContext, ToolRegistry, ToolTimeout


class AssetArgs(ToolArgs):
    assetId: str  # the seed's own argument name
    language: str = Field("en", description="Language of the transcript.")


class NoArgs(ToolArgs):
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
    schema = registry.all()[0].schema()
    assert schema["name"] == "transcribe_video"
    assert schema["parameters"]["type"] == "object"
    assert schema["parameters"]["required"] == ["assetId"]
    assert schema["parameters"]["properties"]["assetId"]["type"] == "string"
    assert schema["parameters"]["properties"]["language"]["description"] == "Language of the transcript."


@pytest.mark.django_db
def test_schemas_list_only_what_the_user_may_use(registry, alice):
    assert [tool.name for tool in registry.permitted(alice)] == ["transcribe_video"]
    alice.user_permissions.add(Permission.objects.get(codename="delete_conversation"))
    alice = type(alice).objects.get(pk=alice.pk)  # permissions are cached per user object
    assert [tool.name for tool in registry.permitted(alice)] == ["transcribe_video", "purge"]


@pytest.mark.django_db
def test_inactive_user_gets_no_permissioned_tools(registry, admin_user):
    assert len(registry.permitted(admin_user)) == 2
    admin_user.is_active = False
    assert [tool.name for tool in registry.permitted(admin_user)] == ["transcribe_video"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({"assetId": 123}, "assetId: expected a string, got 123"),
        ({}, "assetId: required, but missing"),
        ({"assetId": "a", "language": ["en"]}, 'language: expected a string, got ["en"]'),
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


# --- strict arguments ---------------------------------------------------------------------------


class Point(ToolArgs):
    x: float
    y: float = 0.0


class PlotArgs(ToolArgs):
    count: int = Field(1, ge=1)
    scale: float = 1.0
    title: str = "Untitled"
    visible: bool = True
    colour: str | None = "blue"
    note: str | None = None
    points: list[Point] = Field(default_factory=list)


@pytest.fixture
def plot():
    registry = ToolRegistry()

    @registry.tool
    def plot(args: PlotArgs, ctx: ToolContext) -> str:
        """Plot points."""
        return "plotted"

    return plot


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"count": True}, "count: expected a whole number, got true"),
        ({"count": "42"}, 'count: expected a whole number, got "42"'),
        ({"count": 42.0}, "count: expected a whole number, got 42.0"),
        ({"scale": "1.5"}, 'scale: expected a number, got "1.5"'),
        ({"title": 5}, "title: expected a string, got 5"),
        ({"visible": "yes"}, 'visible: expected true or false, got "yes"'),
        ({"visible": 1}, "visible: expected true or false, got 1"),
        ({"points": {"x": 1}}, 'points: expected a list, got {"x": 1}'),
        ({"points": [3]}, "points.0: expected an object, got 3"),
        ({"points": [{}]}, "points.0.x: required, but missing"),
        ({"count": 0}, "count: Input should be greater than or equal to 1"),
        ({"size": 3}, "size: unknown argument (known: count, scale, title, visible, colour, note, points)"),
        ({"points": [{"x": 1, "z": 2}]}, "points.0.z: unknown key (known: x, y)"),
        ({"count": float("nan")}, "expected plain JSON values (no NaN or Infinity)."),
    ],
)
def test_arguments_of_the_wrong_type_are_refused_not_converted(plot, args, message):
    with pytest.raises(ToolArgumentsError) as caught:
        plot.validate(args)
    assert str(caught.value) == f"Invalid arguments for plot: {message}"


def test_every_offending_field_is_named_in_one_message(plot):
    with pytest.raises(ToolArgumentsError) as caught:
        plot.validate({"count": "2", "colour": 3, "shape": "dot"})
    assert str(caught.value) == (
        'Invalid arguments for plot: count: expected a whole number, got "2"; colour: expected a string, got 3; '
        "shape: unknown argument (known: count, scale, title, visible, colour, note, points)"
    )


def test_a_whole_number_is_a_number(plot):
    args = plot.validate({"scale": 2, "points": [{"x": 1}]})
    assert plot.normalise(args)["scale"] == 2.0 and plot.normalise(args)["points"] == [{"x": 1.0, "y": 0.0}]


def test_normalised_arguments_show_the_defaults_and_leave_out_what_says_nothing(plot):
    assert plot.normalise(plot.validate({})) == {
        "count": 1,
        "scale": 1.0,
        "title": "Untitled",
        "visible": True,
        "colour": "blue",
        "points": [],
    }
    # None where the default is something else is a choice the caller made: it stays.
    assert plot.normalise(plot.validate({"colour": None, "note": "n"}))["colour"] is None
    assert plot.normalise(plot.validate({"colour": None, "note": "n"}))["note"] == "n"


@pytest.mark.parametrize(
    "args", [{}, {"colour": None}, {"note": "n", "points": [{"x": 1}, {"x": 2.5, "y": -1}]}, {"count": 3}]
)
def test_normalised_arguments_validate_to_the_same_arguments(plot, args):
    valid = plot.validate(args)
    normalised = plot.normalise(valid)
    assert plot.validate(normalised) == valid
    assert plot.normalise(plot.validate(normalised)) == normalised


class LaxArgs(BaseModel):
    city: str


def test_a_model_that_lets_unknown_keys_through_cannot_be_registered():
    registry = ToolRegistry()
    refused = (
        r"weather: the arguments model must be a pydantic model that forbids unknown keys \(derive it from ToolArgs"
    )
    with pytest.raises(TypeError, match=refused):

        @registry.tool
        def weather(args: LaxArgs, ctx: ToolContext) -> str:
            """Tell the weather."""

    with pytest.raises(TypeError, match="weather: the arguments model"):
        registry.register(Tool(name="weather", description="x", args_model=LaxArgs, func=lambda a, c: None))
    assert not registry.has("weather")


def test_examples_are_checked_as_strictly_as_calls():
    registry = ToolRegistry()
    with pytest.raises(TypeError, match=r"plot: example 'Plot 3 points' has bad arguments: .*count: expected a whole"):

        @registry.tool(examples=[("Plot 3 points", {"count": "3"})])
        def plot(args: PlotArgs, ctx: ToolContext) -> str:
            """Plot points."""

    assert not registry.has("plot")
