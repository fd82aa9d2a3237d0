"""A conversation taken away: Markdown that reads well, or JSON that keeps every stored field."""

from __future__ import annotations

import json
import re
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from rest_framework import renderers, serializers

from agentchat.sentences import translate

from ..models import Conversation, Message, PendingConfirmation
from .serializers import MessageSerializer

ROLES = {
    Message.Role.USER: gettext_lazy("You"),
    Message.Role.ASSISTANT: gettext_lazy("Assistant"),
    Message.Role.TOOL: gettext_lazy("Tool"),
    "system": gettext_lazy("System"),
}


class MarkdownRenderer(renderers.BaseRenderer):
    """`?format=md`. An error (a dict, not the document) is written as JSON, in the API's one error shape."""

    media_type = "text/markdown"
    format = "md"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data if isinstance(data, str) else json.dumps(data)


class ConfirmationExportSerializer(serializers.ModelSerializer):
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    message = serializers.PrimaryKeyRelatedField(read_only=True)
    result = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta:
        model = PendingConfirmation
        exclude = ["conversation", "args_hash"]


def as_json(conversation: Conversation, messages: list[Message]) -> dict[str, Any]:
    confirmations = conversation.confirmations.select_related("decided_by").order_by("created_at")
    return {
        "conversation": {
            "id": str(conversation.pk),
            "title": conversation.title,
            "created_at": conversation.created_at.isoformat(),
            "updated_at": conversation.updated_at.isoformat(),
            "is_archived": conversation.is_archived,
            "archived_at": conversation.archived_at.isoformat() if conversation.archived_at else None,
        },
        "messages": MessageSerializer(messages, many=True).data,
        "confirmations": ConfirmationExportSerializer(confirmations, many=True).data,
    }


def as_markdown(conversation: Conversation, messages: list[Message]) -> str:
    """In the reader's language; what the people and the model wrote stays as written."""
    decisions = {item.tool_call_id: item for item in conversation.confirmations.select_related("decided_by")}
    parts = [f"# {conversation.title or _('Conversation')}", _("Exported %(when)s.") % {"when": _when(timezone.now())}]
    for message in messages:
        heading = f"**{ROLES.get(message.role, message.role)}** · {_when(message.created_at)}"
        parts.append(heading + (_(" · replaced by a later version") if message.superseded else ""))
        if message.role == Message.Role.TOOL:
            outcome = message.outcome or _("done")
            parts.append(f"`{message.tool_name}` ({outcome}):\n\n{_fenced(message.content)}")
        elif message.content:
            parts.append(message.content)
        for call in message.tool_calls or []:
            arguments = _fenced(json.dumps(call["args"], indent=2, sort_keys=True), "json")
            parts.append(_("Calls %(tool)s:") % {"tool": f"`{call['name']}`"} + f"\n\n{arguments}")
            if (decision := decisions.get(call["id"])) is not None:
                parts.append(_decision(decision))
        if message.status in (Message.Status.INTERRUPTED, Message.Status.FAILED):
            reason = translate(message.error) if message.error else _("no reason given")
            ended = _("Interrupted") if message.status == Message.Status.INTERRUPTED else _("Failed")
            parts.append(f"_{ended}: {reason}_")
    return "\n\n".join(parts) + "\n"


def _decision(decision: PendingConfirmation) -> str:
    """The decision quoted under its call, as the call's card on the page records it."""
    Status = PendingConfirmation.Status
    if decision.status == Status.PENDING:
        return "> " + _("Waiting for a decision.")
    if decision.status == Status.SUPERSEDED:
        return "> " + _("Replaced by a new message before anyone decided: not run.")
    if decision.status == Status.EXPIRED:
        return "> " + _("Expired before anyone decided: not run.") + (f" {decision.reason}" if decision.reason else "")
    words = {
        Status.APPROVED: _("Approved by %(who)s at %(when)s"),
        Status.EDITED: _("Edited by %(who)s at %(when)s"),
        Status.REJECTED: _("Rejected by %(who)s at %(when)s"),
    }[decision.status]
    who = decision.decided_by.get_username() if decision.decided_by else _("someone")
    line = "> " + words % {"who": who, "when": _when(decision.decided_at) if decision.decided_at else "?"}
    if decision.status == Status.REJECTED:
        return line + (f": {decision.reason}" if decision.reason else _(", without a reason."))
    ran = decision.edited_args if decision.status == Status.EDITED else decision.args
    arguments = f"`{json.dumps(ran, sort_keys=True, ensure_ascii=False)}`"
    line += _(", with the arguments %(arguments)s") % {"arguments": arguments}
    return line + (_(". Reason: %(reason)s") % {"reason": decision.reason} if decision.reason else ".")


def _when(moment) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _fenced(text: str, info: str = "") -> str:
    """A code block that no run of backticks inside `text` can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"
