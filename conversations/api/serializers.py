from __future__ import annotations

from typing import Any

from django.db.models import prefetch_related_objects
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentchat.api import ErrorSerializer
from agentchat.sentences import translate
from agentchat.text import unstorable

from ..decisions import Decision, message_decision
from ..markdown import render_markdown
from ..models import Attachment, Conversation, Message
from ..search import Match, match_of
from ..services import context_too_deep


class UsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()


class ConversationSerializer(serializers.ModelSerializer):
    message_count = serializers.IntegerField(read_only=True)
    usage = serializers.SerializerMethodField(
        help_text="The tokens its answers cost, as their providers reported them (answers without a report count 0)."
    )

    @extend_schema_field(UsageSerializer)
    def get_usage(self, conversation: Conversation) -> dict[str, int]:
        return {"prompt_tokens": conversation.prompt_tokens, "completion_tokens": conversation.completion_tokens}

    class Meta:
        model = Conversation
        fields = ["id", "title", "created_at", "updated_at", "message_count", "usage", "is_archived", "archived_at"]
        read_only_fields = ["id", "created_at", "updated_at", "is_archived", "archived_at"]


class MatchSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="A few words of the message around what was found, as plain text.")
    highlights = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField(), min_length=2, max_length=2),
        help_text="Each word found: [start, end) in `text`, counted in characters (Unicode code points).",
    )


class ConversationListSerializer(ConversationSerializer):
    match = serializers.SerializerMethodField(
        help_text="With `search`: where the newest message that has the words matched; null for a match by title, "
        "and without `search`."
    )

    @extend_schema_field(MatchSerializer(allow_null=True))
    def get_match(self, conversation: Conversation) -> Match | None:
        return match_of(conversation)

    class Meta(ConversationSerializer.Meta):
        fields = [*ConversationSerializer.Meta.fields, "match"]


class ConversationCreateSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class ConversationRenameSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200)


class ConversationFilterSerializer(serializers.Serializer):
    archived = serializers.BooleanField(
        required=False, default=False, help_text="true for the archive, false (default) for active conversations."
    )
    search = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=200,
        help_text="Conversations whose title contains it, or one of whose messages (yours and the assistant's, "
        "not superseded ones) has all its words.",
    )


TIMESTAMP = serializers.DateTimeField()


class MessageSerializer(serializers.ModelSerializer):
    # As text: these frames also go out over the socket, whose JSON encoder knows no UUID.
    attachments = serializers.PrimaryKeyRelatedField(many=True, read_only=True, pk_field=serializers.UUIDField())
    html = serializers.SerializerMethodField(
        help_text="An assistant message's content as sanitized HTML (rendered Markdown); empty for other roles."
    )
    files = serializers.SerializerMethodField(help_text="The attachments' names, kinds and sizes, for showing them.")
    decision = serializers.SerializerMethodField(
        help_text="A tool message whose call waited for its owner: what was decided, by whom, when, with which "
        "arguments; null otherwise."
    )
    error = serializers.SerializerMethodField(
        help_text="For an answer that failed or was stopped: what happened, in the reader's language."
    )

    def get_decision(self, message: Message) -> Decision | None:
        return message_decision(message, self.context.setdefault("decisions", {}))

    def get_error(self, message: Message) -> str:
        return translate(message.error)

    def get_html(self, message: Message) -> str:
        return render_markdown(message.content) if message.role == Message.Role.ASSISTANT else ""

    def get_files(self, message: Message) -> list[dict]:
        return [
            {"id": str(item.pk), "name": item.original_name, "kind": item.kind, "size": item.size}
            for item in message.attachments.all()
        ]

    def to_representation(self, message: Message) -> dict[str, Any]:
        # The declared fields, read directly: every message frame of the socket is one of these, and DRF's
        # field-by-field path cost more than the rest of taking a message in (docs/benchmarks.md).
        if "attachments" not in getattr(message, "_prefetched_objects_cache", {}):
            prefetch_related_objects([message], "attachments")  # once, for both fields that show them
        data: dict[str, Any] = {}
        for name in self.Meta.fields:
            if method := getattr(self, f"get_{name}", None):
                data[name] = method(message)
            elif name == "attachments":
                data[name] = [str(item.pk) for item in message.attachments.all()]
            elif name == "created_at":
                data[name] = TIMESTAMP.to_representation(message.created_at)
            else:
                data[name] = getattr(message, name)
        return data

    class Meta:
        model = Message
        fields = [
            "id",
            "role",
            "content",
            "tool_calls",
            "tool_call_id",
            "tool_name",
            "is_error",
            "outcome",
            "status",
            "error",
            "superseded",
            "usage",
            "client_id",
            "attachments",
            "files",
            "created_at",
            "metadata",
            "html",
            "decision",
        ]
        read_only_fields = fields


class HistoryFilterSerializer(serializers.Serializer):
    include_superseded = serializers.BooleanField(
        required=False,
        default=True,
        help_text="false for the live branch only, without answers regenerated and questions edited since.",
    )


class ActiveRunSerializer(serializers.Serializer):
    active = serializers.BooleanField()
    run_id = serializers.UUIDField(allow_null=True)
    since = serializers.DateTimeField(allow_null=True)


class ToolCallSerializer(serializers.Serializer):
    id = serializers.CharField(max_length=128)
    name = serializers.CharField(max_length=128)
    args = serializers.DictField()


class AgentChatMessageSerializer(serializers.Serializer):
    """The shell's ChatMessage, camelCase names and all."""

    role = serializers.ChoiceField(choices=["system", "user", "assistant", "tool"])
    content = serializers.CharField(allow_blank=True, trim_whitespace=False)
    toolCalls = ToolCallSerializer(many=True, required=False)
    toolCallId = serializers.CharField(max_length=128, required=False)
    name = serializers.CharField(max_length=128, required=False)

    def to_internal_value(self, data):
        """Checked, then turned into the engine's ChatMessage shape."""
        data = super().to_internal_value(data)
        if data["role"] == "tool" and not data.get("toolCallId"):
            raise serializers.ValidationError({"toolCallId": _("A tool message needs the id of the call it answers.")})
        if data.get("toolCalls") and data["role"] != "assistant":
            raise serializers.ValidationError({"toolCalls": _("Only assistant messages carry tool calls.")})
        message = {"role": data["role"], "content": data["content"]}
        if data.get("toolCalls"):
            message["tool_calls"] = [dict(call) for call in data["toolCalls"]]
        if data["role"] == "tool":
            message["tool_call_id"] = data["toolCallId"]
            message["name"] = data.get("name", "")
        return message


class AgentChatRequestSerializer(serializers.Serializer):
    messages = AgentChatMessageSerializer(many=True, allow_empty=False)
    context = serializers.DictField(required=False, default=dict)

    def validate_context(self, context: dict) -> dict:
        """As a message frame's page context: shallow, and only text that can be stored."""
        if (too_deep := context_too_deep(context)) is not None:
            raise serializers.ValidationError(too_deep)
        if (refused := unstorable(context)) == "nul":
            raise serializers.ValidationError(_("The context cannot hold the NUL character (\\u0000)."))
        if refused == "surrogate":
            raise serializers.ValidationError(
                _("The context cannot hold a lone surrogate (\\ud800 to \\udfff): it is not a character.")
            )
        return context


class AgentChatResponseSerializer(serializers.Serializer):
    content = serializers.CharField()
    toolCalls = ToolCallSerializer(many=True)


class AttachmentSerializer(serializers.ModelSerializer):
    class Meta:
        model = Attachment
        fields = ["id", "original_name", "kind", "size", "sha256", "parse_status", "meta", "created_at"]
        read_only_fields = fields


class AttachmentUploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="PDF, XLSX, CSV, JSON, PNG or JPEG; at most 10 MB.")


class UnsupportedFileSerializer(ErrorSerializer):
    supported = serializers.ListField(child=serializers.CharField(), help_text="The formats accepted.")
