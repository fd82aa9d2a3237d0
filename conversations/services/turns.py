"""What starts a run, under the conversation's gate: a new message, an edited one, another answer to the last
question, or more of an answer that stopped. Replaced messages are kept, marked superseded."""

from __future__ import annotations

from typing import Any, NamedTuple

from django.utils.translation import gettext as _

from agentchat.text import nesting

from .. import selectors
from ..exceptions import Invalid, NotFound
from ..models import AuditEvent, Conversation, Message
from .audit import audit_record
from .messages import message_append
from .settle import confirmations_supersede

# How deep a message's page context may nest. What a page shows is a shallow object; a deep one would be stored and
# then fail to travel to the sockets.
MAX_CONTEXT_DEPTH = 16


def context_too_deep(context: dict) -> str | None:
    """Why a message's page context, from a socket or the chat API, is refused for its depth; None when it is not."""
    if nesting(context) > MAX_CONTEXT_DEPTH:
        return _('"context" may nest at most %(levels)s levels.') % {"levels": MAX_CONTEXT_DEPTH}
    return None


class Turn(NamedTuple):
    """What a frame asks for. `kind` is "message", "edit", "regenerate" or "continue"; `message_id` is the
    message an edit replaces; `attachments` are Attachment rows the caller checked."""

    kind: str
    content: str = ""
    client_id: str | None = None
    attachments: tuple = ()
    metadata: dict[str, Any] | None = None
    message_id: int | None = None

    @property
    def asks(self) -> bool:
        """Whether it stores a question of the user's (the others answer one already stored)."""
        return self.kind in {"message", "edit"}


class Taken(NamedTuple):
    created: bool  # False: a message with this client_id was stored before (`message` is that one)
    message: Message | None  # the user's new message, to echo
    changed: list[Message]  # messages to show anew: results of settled decisions, then superseded ones


def turn_take(*, conversation: Conversation, user, turn: Turn) -> Taken:
    """The turn's writes, with the gate held: raises Invalid or NotFound, storing nothing, when it cannot be."""
    if turn.kind == "edit":
        return _edit(conversation, user, turn)
    if turn.kind == "regenerate":
        return _regenerate(conversation, user)
    if turn.kind == "continue":
        return _continue(conversation, user)
    settled = confirmations_supersede(conversation=conversation, actor=user)
    message, created = _ask(conversation, user, turn, turn.attachments, turn.metadata or {})
    return Taken(created, message, settled)


def _ask(conversation, user, turn: Turn, attachments, metadata: dict) -> tuple[Message, bool]:
    message, created = message_append(
        conversation=conversation,
        role=Message.Role.USER,
        content=turn.content,
        client_id=turn.client_id,
        actor=user,
        metadata=metadata,
    )
    if created and attachments:
        message.attachments.set(attachments)
    return message, created


def _edit(conversation: Conversation, user, turn: Turn) -> Taken:
    target = conversation.messages.filter(pk=turn.message_id).prefetch_related("attachments").first()
    if target is None:
        raise NotFound(_("There is no such message in this conversation."))
    if target.role != Message.Role.USER:
        raise Invalid(_("Only your own messages can be edited."))
    if target.superseded:
        raise Invalid(_("This message has been replaced already. Edit its newer version."))
    settled = confirmations_supersede(conversation=conversation, actor=user)
    replaced = _supersede(conversation, pk__gte=target.pk)
    metadata = {**(turn.metadata or {}), "context": target.metadata.get("context") or {}, "edits": target.pk}
    message, created = _ask(conversation, user, turn, list(target.attachments.all()), metadata)
    audit_record(
        kind=AuditEvent.Kind.MESSAGE_EDITED,
        actor=user,
        conversation=conversation,
        data={"message_id": message.pk, "replaces": target.pk},
    )
    return Taken(created, message, _unique(settled, replaced))


def _regenerate(conversation: Conversation, user) -> Taken:
    question = selectors.last_question(conversation)
    if question is None:
        raise Invalid(_("There is no answer to regenerate yet."))
    settled = confirmations_supersede(conversation=conversation, actor=user)
    replaced = _supersede(conversation, pk__gt=question.pk)
    audit_record(
        kind=AuditEvent.Kind.ANSWER_REGENERATED,
        actor=user,
        conversation=conversation,
        data={"message_id": question.pk, "replaced": [message.pk for message in replaced]},
    )
    return Taken(True, None, _unique(settled, replaced))


def _continue(conversation: Conversation, user) -> Taken:
    if selectors.pending_confirmations(conversation).exists():
        raise Invalid(_("A tool call is waiting for your decision. Approve or reject it first."))
    last = selectors.live_messages(conversation).last()
    if last is None:
        raise Invalid(_("There is nothing to continue yet."))
    if last.role == Message.Role.ASSISTANT and last.status == Message.Status.COMPLETE and not last.tool_calls:
        raise Invalid(_("The last answer is complete. Send a new message, or regenerate the answer."))
    audit_record(kind=AuditEvent.Kind.RUN_CONTINUED, actor=user, conversation=conversation, data={"after": last.pk})
    return Taken(True, None, [])


def _supersede(conversation: Conversation, **after: int) -> list[Message]:
    """Mark the live messages from a point on (`pk__gt` or `pk__gte`) superseded: under the gate, ids follow
    the order in which messages were stored. Each keeps, as metadata "replaced", the live message its branch
    followed (`after`, None at the conversation's start) and the branch's first message (`branch`): the chat
    page shows the branch as an earlier version of what comes after that message (docs/http-api.md)."""
    live = selectors.live_messages(conversation)
    replaced = list(live.filter(**after).prefetch_related("attachments"))
    if not replaced:
        return replaced
    mark = {
        "after": live.filter(pk__lt=replaced[0].pk).values_list("pk", flat=True).last(),
        "branch": replaced[0].pk,
    }
    for message in replaced:
        message.superseded = True
        message.metadata = {**message.metadata, "replaced": mark}
    Message.objects.bulk_update(replaced, ["superseded", "metadata"])
    return replaced


def _unique(settled: list[Message], replaced: list[Message]) -> list[Message]:
    """Results of settled decisions that the turn also superseded are shown once, superseded."""
    gone = {message.pk for message in replaced}
    return [message for message in settled if message.pk not in gone] + replaced
