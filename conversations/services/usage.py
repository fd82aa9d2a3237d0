"""What answers cost: counted per user and day as each answer is stored."""

from __future__ import annotations

from django.db import connection
from django.utils import timezone

from agentchat.agent.providers import Usage

from ..models import TokenUsage
from ..sql import param, statement

# Today's row made, or added to, in one statement: two answers of one user ending at once cannot both make it.
ADD = """
INSERT INTO {TokenUsage} ({TokenUsage.user}, {TokenUsage.day}, {TokenUsage.prompt_tokens},
  {TokenUsage.completion_tokens}, {TokenUsage.answers})
VALUES (%s, %s, %s, %s, 1)
ON CONFLICT ({TokenUsage.user}, {TokenUsage.day}) DO UPDATE SET
  {TokenUsage.prompt_tokens} = {TokenUsage}.{TokenUsage.prompt_tokens} + EXCLUDED.{TokenUsage.prompt_tokens},
  {TokenUsage.completion_tokens} =
    {TokenUsage}.{TokenUsage.completion_tokens} + EXCLUDED.{TokenUsage.completion_tokens},
  {TokenUsage.answers} = {TokenUsage}.{TokenUsage.answers} + 1
"""


def usage_record(*, user_id, usage: Usage) -> None:
    """Add one answer's tokens to its user's total of today."""
    day = param(TokenUsage, "day", timezone.localdate())
    with connection.cursor() as cursor:
        cursor.execute(statement(ADD), [user_id, day, usage["prompt_tokens"], usage["completion_tokens"]])
