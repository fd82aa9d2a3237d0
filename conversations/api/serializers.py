from __future__ import annotations

from rest_framework import serializers

from agentchat.api import ErrorSerializer

from ..markdown import render_markdown
from ..models import Attachment, Conversation, Message


class ConversationSerializer(serializers.ModelSerializer):
    message_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Conversation
        fields = ["id", "title", "created_at", "updated_at", "message_count", "is_archived", "archived_at"]
        read_only_fields = ["id", "created_at", "updated_at", "is_archived", "archived_at"]


class ConversationCreateSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class ConversationRenameSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200)


class ConversationFilterSerializer(serializers.Serializer):
    archived = serializers.BooleanField(
        required=False, default=False, help_text="true for the archive, false (default) for active conversations."
    )
    search = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)


class MessageSerializer(serializers.ModelSerializer):
    # As text: these frames also go out over the socket, whose JSON encoder knows no UUID.
    attachments = serializers.PrimaryKeyRelatedField(many=True, read_only=True, pk_field=serializers.UUIDField())
    html = serializers.SerializerMethodField(
        help_text="An assistant message's content as sanitized HTML (rendered Markdown); empty for other roles."
    )
    files = serializers.SerializerMethodField(help_text="The attachments' names, kinds and sizes, for showing them.")

    def get_html(self, message: Message) -> str:
        return render_markdown(message.content) if message.role == Message.Role.ASSISTANT else ""

    def get_files(self, message: Message) -> list[dict]:
        return [
            {"id": str(item.pk), "name": item.original_name, "kind": item.kind, "size": item.size}
            for item in message.attachments.all()
        ]

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
            "client_id",
            "attachments",
            "files",
            "created_at",
            "metadata",
            "html",
        ]
        read_only_fields = fields


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
            raise serializers.ValidationError({"toolCallId": "A tool message needs the id of the call it answers."})
        if data.get("toolCalls") and data["role"] != "assistant":
            raise serializers.ValidationError({"toolCalls": "Only assistant messages carry tool calls."})
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
