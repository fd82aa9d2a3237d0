from __future__ import annotations

from rest_framework import serializers

from ..models import Conversation, Message


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
    attachments = serializers.PrimaryKeyRelatedField(many=True, read_only=True)

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
            "status",
            "client_id",
            "attachments",
            "created_at",
            "metadata",
        ]
        read_only_fields = fields


class ActiveRunSerializer(serializers.Serializer):
    active = serializers.BooleanField()
    run_id = serializers.UUIDField(allow_null=True)
    since = serializers.DateTimeField(allow_null=True)


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField(help_text="A sentence for a person.")
    code = serializers.CharField(help_text="A machine code: INVALID, AUTH_REQUIRED, NOT_FOUND, …")


class ToolCallSerializer(serializers.Serializer):
    id = serializers.CharField(max_length=128)
    name = serializers.CharField(max_length=128)
    args = serializers.DictField()


class AgentChatMessageSerializer(serializers.Serializer):
    """The shell's ChatMessage, camelCase names and all (seed 000)."""

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
