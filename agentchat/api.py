"""What every API of the project shares, whichever app serves it: the one error shape."""

from __future__ import annotations

from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField(help_text="A sentence for a person.")
    code = serializers.CharField(help_text="A machine code: INVALID, AUTH_REQUIRED, NOT_FOUND, …")
