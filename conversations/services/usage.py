"""What answers cost: counted per user and day as each answer is stored."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from agentchat.agent.providers import Usage

from ..models import TokenUsage


def usage_record(*, user_id, usage: Usage) -> None:
    """Add one answer's tokens to its user's total of today."""
    day = timezone.localdate()
    added = {
        "prompt_tokens": F("prompt_tokens") + usage["prompt_tokens"],
        "completion_tokens": F("completion_tokens") + usage["completion_tokens"],
        "answers": F("answers") + 1,
    }
    today = TokenUsage.objects.filter(user_id=user_id, day=day)
    if today.update(**added):
        return
    try:
        with transaction.atomic():
            TokenUsage.objects.create(user_id=user_id, day=day, answers=1, **usage)
    except IntegrityError:  # another answer of theirs made today's row first
        today.update(**added)
