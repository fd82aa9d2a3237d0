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
