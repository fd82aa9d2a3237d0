"""The chat socket (docs/protocol.md): frames in → runs; run events out, with nothing missed and nothing twice."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import time
import uuid
from typing import Any

from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import translation
from django.utils.functional import Promise
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop
from rest_framework_simplejwt.exceptions import TokenError
from rest_framework_simplejwt.settings import api_settings as jwt_settings
from rest_framework_simplejwt.tokens import AccessToken

from agentchat import tasks
from agentchat.sentences import reader_language, token_problem
from agentchat.text import unstorable

from . import live_auth, runs, selectors, services
from .exceptions import AccessRefused, ChatError, Invalid
from .models import AuditEvent
from .ratelimit import SlidingWindow
from .runs import confirmation_frame, conversation_group
from .runs.db import database_sync_to_async

logger = logging.getLogger(__name__)

MAX_FRAME_BYTES = 1024 * 1024
AUTH_TIMEOUT = 10.0
MAX_CLIENT_ID = 64
# Frames of any kind one socket may send in FRAME_WINDOW seconds before it is told to slow down.
MAX_FRAMES = 120
FRAME_WINDOW = 10.0
# The signed-in chat sockets of each user on this process.
OPEN_SOCKETS: collections.Counter = collections.Counter()
# How long a joining socket waits for the live run's own snapshot before it reads the last flushed text.
SNAPSHOT_TIMEOUT = 2.0

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
# Any other code makes the page reconnect (daphne refuses 1011 from an application).
CLOSE_SERVER_ERROR = 4500

# Frames that act for the user are preceded by a check of the user as the database has them now; a frame that
# starts a run (message, edit, regenerate, continue) makes that check in the trip to the database that stores
# what it asks (RunManager.submit).
CHECKED_FIRST = {"confirm"}
# Why a socket's user may no longer act (selectors.socket_access), as the socket is told and closed.
REFUSALS = {
    "gone": ("AUTH_REQUIRED", gettext_lazy("This account no longer exists."), CLOSE_UNAUTHENTICATED),
    "signed_out": ("AUTH_REQUIRED", gettext_lazy("Your session has ended. Sign in again."), CLOSE_UNAUTHENTICATED),
    "inactive": ("FORBIDDEN", gettext_lazy("This account has been deactivated."), CLOSE_FORBIDDEN),
    # Other permissions than the socket opened with, given or taken away: a reloaded page matches them.
    "permissions": (
        "FORBIDDEN",
        gettext_lazy("Your permissions have changed. Reload the page to continue with them."),
        CLOSE_FORBIDDEN,
    ),
}


@database_sync_to_async
def _user_from_token(raw: str):
    """The active user a valid access token names, and the token's expiry (a Unix time); or why not, in English."""
    try:
        token = AccessToken(raw)
    except TokenError as exc:
        return None, token_problem(str(exc.args[0]) if exc.args else "")
    user = (
        get_user_model().objects.filter(**{jwt_settings.USER_ID_FIELD: token.get(jwt_settings.USER_ID_CLAIM)}).first()
    )
    if user is None or not user.is_active:
        return None, gettext_noop("The account is not active.")
    return (user, token["exp"]), ""


@database_sync_to_async
def _access(user_id, session_key: str | None) -> selectors.SocketAccess:
    return selectors.socket_access(user_id, session_key)


@database_sync_to_async
def _conversation(user, conversation_id):
    return selectors.conversation_for(user, conversation_id)


@database_sync_to_async
def _pending(conversation) -> list[dict[str, Any]]:
    return [confirmation_frame(confirmation) for confirmation in selectors.pending_confirmations(conversation)]


@database_sync_to_async
def _active(conversation) -> bool:
    conversation.refresh_from_db()
    return selectors.conversation_active_run(conversation)["active"]


@database_sync_to_async
def _streaming_text(conversation) -> dict[str, Any] | None:
    """The last flushed text of a run whose process did not answer in time."""
    return selectors.streaming_snapshot(conversation)


@database_sync_to_async
def _audit_auth_failure(reason: str, path: str) -> None:
    services.audit_record(kind=AuditEvent.Kind.AUTH_FAILED, data={"reason": reason, "path": path, "via": "websocket"})


def page_language(scope) -> str:
    """The language of the page that opened the socket."""
    accept = dict(scope.get("headers", [])).get(b"accept-language", b"").decode("latin-1")
    return reader_language(scope.get("cookies", {}), accept)


class ChatConsumer(AsyncJsonWebsocketConsumer):
    async def __call__(self, scope, receive, send) -> None:
        # Every handler speaks the page's language, and so does each run a handler starts: its task copies this
        # context (docs/protocol.md#language).
        with translation.override(page_language(scope)):
            try:
                await super().__call__(scope, receive, send)
            except Exception:
                # Most often the channel layer failing (Redis restarting): the socket's group is gone with it and it
                # would hear nothing more. Closed at once, the page reconnects and loads what it missed.
                logger.exception("chat socket closed after an error")
                try:
                    await send({"type": "websocket.close", "code": CLOSE_SERVER_ERROR})  # failing, the server closes
                finally:
                    with contextlib.suppress(Exception):
                        await self.disconnect(CLOSE_SERVER_ERROR)

    async def dispatch(self, message) -> None:
        # Channels closes stale database connections before every handler, in its one database thread: for each
        # token each socket receives, behind every run's queries. This consumer's database work runs in
        # database_sync_to_async, which closes them itself, so a frame only goes out.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def connect(self) -> None:
        self.user = None
        self.session_key: str | None = None  # of a socket signed in by its session cookie
        self.permissions: frozenset[str] = frozenset()
        self.refused = False
        self.conversation = None
        self.joined: list[str] = []
        self.ready = False
        self.backlog: list[dict[str, Any]] = []
        self.seen: tuple[str, int] | None = None  # (run_id, seq) that `ready` already covered
        self.timers: list[asyncio.Task] = []
        self.frames = SlidingWindow(MAX_FRAMES, seconds=FRAME_WINDOW)
        await self.accept()
        user = self.scope.get("user")
        if user is not None and user.is_authenticated:
            await self._authenticated(user, self.scope["session"].session_key)
        else:
            self.timers.append(asyncio.create_task(self._close_after(AUTH_TIMEOUT, _("Sign in within 10 seconds."))))

    async def disconnect(self, code) -> None:
        for timer in self.timers:
            tasks.cancel(timer)
        if self.user is not None and self.conversation is not None:
            OPEN_SOCKETS[self.user.pk] -= 1
            self.conversation = None
        for group in self.joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    # --- frames in ---------------------------------------------------------------------------------

    async def receive(self, text_data=None, bytes_data=None) -> None:
        if self.refused:  # closing: what the client sent meanwhile is not taken
            return
        size = len(text_data.encode()) if text_data is not None else len(bytes_data or b"")
        if size > MAX_FRAME_BYTES:
            await self._error("TOO_LARGE", _("Frames may be at most 1 MiB."))
            return
        if text_data is None:
            await self._error("INVALID", _("Frames are JSON text, not binary."))
            return
        if not self.frames.allow():
            await self._error("RATE_LIMITED", _("Too many frames. Slow down."))
            return
        try:
            frame = json.loads(text_data)
        except (ValueError, RecursionError):
            await self._error("INVALID", _("The frame is not valid JSON."))
            return
        if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
            await self._error("INVALID", _('Every frame is a JSON object with a "type".'))
            return
        if (refused := unstorable(frame)) is not None:
            await self._error("INVALID", _unstorable_said(refused))
            return
        await self.receive_json(frame)

    async def receive_json(self, content: dict[str, Any], **kwargs) -> None:
        kind = content["type"]
        if self.user is None:
            if kind == "auth":
                await self._auth(content)
            else:
                await self._error("AUTH_REQUIRED", _('Authenticate first with {"type": "auth", "token": ...}.'))
            return
        handler = {
            "message": self._message,
            "edit": self._edit,
            "regenerate": self._answer_again,
            "continue": self._answer_again,
            "cancel": self._cancel,
            "confirm": self._confirm,
            "ping": self._ping,
        }.get(kind)
        if handler is None:
            await self._error("INVALID", _("Unknown frame type %(type)s.") % {"type": repr(kind)})
            return
        if kind in CHECKED_FIRST and not await self._still_allowed():
            return
        try:
            await handler(content)
        except ChatError as exc:
            await self._error(exc.code, exc.message)
        except AccessRefused as refused:
            await self._refuse(*REFUSALS[refused.refusal])

    async def _auth(self, frame: dict[str, Any]) -> None:
        token = frame.get("token")
        found, reason = (
            await _user_from_token(token) if isinstance(token, str) and token else (None, gettext_noop("No token."))
        )
        if found is None:
            await _audit_auth_failure(reason, self.scope.get("path", ""))
            told = _("Authentication failed: %(reason)s") % {"reason": _(reason)}
            await self._refuse("AUTH_REQUIRED", told, CLOSE_UNAUTHENTICATED)
            return
        user, expires = found
        await self._authenticated(user)
        if self.user is not None:
            remaining = expires - time.time()
            self.timers.append(asyncio.create_task(self._close_after(remaining, _("The token has expired."))))

    async def _message(self, frame: dict[str, Any]) -> None:
        content, client_id = _content(frame), _client_id(frame)
        attachments = [] if frame.get("attachments") is None else frame["attachments"]
        context = {} if frame.get("context") is None else frame["context"]
        if not isinstance(attachments, list) or not all(_is_uuid(item) for item in attachments):
            raise Invalid(_('"attachments" must be a list of attachment ids.'))
        if not isinstance(context, dict):
            raise Invalid(_('"context" must be an object.'))
        if (too_deep := services.context_too_deep(context)) is not None:
            raise Invalid(too_deep)
        turn = services.Turn(
            "message", content, client_id, attachments=tuple(attachments), metadata={"context": context}
        )
        await self._take(turn)

    async def _edit(self, frame: dict[str, Any]) -> None:
        message_id = frame.get("message_id")
        if not isinstance(message_id, int) or isinstance(message_id, bool) or message_id < 1:
            raise Invalid(_('"message_id" must be the id of one of your messages.'))
        await self._take(services.Turn("edit", _content(frame), _client_id(frame), message_id=message_id))

    async def _answer_again(self, frame: dict[str, Any]) -> None:
        await self._take(services.Turn(frame["type"], client_id=_client_id(frame)))

    async def _take(self, turn: services.Turn) -> None:
        echo = await runs.manager.submit(
            conversation=self.conversation,
            user=self.user,
            turn=turn,
            session_key=self.session_key,
            permissions=self.permissions,
        )
        if echo is not None:  # seen before: answered once, echoed to the sender again
            await self.send_json(echo)

    async def _cancel(self, frame: dict[str, Any]) -> None:
        await runs.manager.cancel(self.conversation)

    async def _confirm(self, frame: dict[str, Any]) -> None:
        decision, args, reason = frame.get("decision"), frame.get("args"), frame.get("reason") or ""
        if not _is_uuid(frame.get("confirmation_id")):
            raise Invalid(_('"confirmation_id" must be the id of a confirmation.'))
        if decision not in {"approve", "reject", "edit"}:
            raise Invalid(_('"decision" must be "approve", "reject" or "edit".'))
        if decision == "edit" and not isinstance(args, dict):
            raise Invalid(_('An "edit" needs the new arguments as an object in "args".'))
        if not isinstance(reason, str):
            raise Invalid(_('"reason" must be a string.'))
        await runs.manager.decide(
            conversation=self.conversation,
            user=self.user,
            confirmation_id=frame["confirmation_id"],
            decision=decision,
            args=args if decision == "edit" else None,
            reason=reason[:2000],
        )

    async def _ping(self, frame: dict[str, Any]) -> None:
        await self.send_json({"type": "pong"})

    # --- joining: `ready`, then the live frames, with no gap and no repeat ------------------------

    async def _authenticated(self, user, session_key: str | None = None) -> None:
        # Join first, then check: a change after the check is pushed to this socket, an earlier one is seen by it.
        await self._join(live_auth.user_group(user.pk))
        access = await _access(user.pk, session_key)
        if access.user is None:
            await self._refuse(*REFUSALS[access.refusal])
            return
        conversation = await _conversation(access.user, self.scope["url_route"]["kwargs"]["conversation_id"])
        if conversation is None:
            await self._refuse("NOT_FOUND", _("There is no such conversation of yours."), CLOSE_NOT_FOUND)
            return
        if OPEN_SOCKETS[access.user.pk] >= settings.WS_SOCKETS_PER_USER:
            message = _("You have too many chats open at once. Close some, then reload this page.")
            await self._refuse("RATE_LIMITED", message, CLOSE_FORBIDDEN)
            return
        OPEN_SOCKETS[access.user.pk] += 1
        self.user, self.conversation = access.user, conversation
        self.session_key, self.permissions = session_key, access.permissions
        for timer in self.timers:
            tasks.cancel(timer)
        # Join first, then ask: every frame after the answer reaches this socket, earlier ones are in it.
        await self._join(conversation_group(conversation.pk))
        await self.channel_layer.joined(conversation_group(conversation.pk))
        if await _active(conversation):
            await runs.manager.request_snapshot(conversation, self.channel_name)
            self.timers.append(asyncio.create_task(self._ready_without_snapshot()))
        else:
            await self._send_ready(None)
            await runs.manager.resume(conversation=conversation, user=self.user)

    async def _ready_without_snapshot(self) -> None:
        await asyncio.sleep(SNAPSHOT_TIMEOUT)
        if not self.ready:
            await self._send_ready(await _streaming_text(self.conversation))

    async def run_snapshot(self, event: dict[str, Any]) -> None:
        if not self.ready:
            await self._send_ready(event["run"])

    async def _send_ready(self, run: dict[str, Any] | None) -> None:
        self.seen = (run["run_id"], run["seq"]) if run else None
        await self.send_json(
            {
                "type": "ready",
                "conversation_id": str(self.conversation.pk),
                "run": run,
                "pending_confirmations": await _pending(self.conversation),
            }
        )
        self.ready = True
        for event in self.backlog:
            await self._forward(event)
        self.backlog.clear()

    async def run_event(self, event: dict[str, Any]) -> None:
        if self.ready:
            await self._forward(event)
        else:
            self.backlog.append(event)

    async def _forward(self, event: dict[str, Any]) -> None:
        """A run's frame, already JSON (Recorder.send), unless `ready` covered it."""
        if self.seen and event["run_id"] == self.seen[0] and event["seq"] <= self.seen[1]:
            return
        await self.send(text_data=event["text"])

    # --- the user's rights, checked again ------------------------------------------------------

    async def _still_allowed(self) -> bool:
        """Reload the user: the socket acts only with the rights its user has now, never with cached ones."""
        access = await _access(self.user.pk, self.session_key)
        if access.user is None:
            await self._refuse(*REFUSALS[access.refusal])
            return False
        if access.permissions != self.permissions:
            await self._refuse(*REFUSALS["permissions"])
            return False
        self.user = access.user
        return True

    async def auth_signed_out(self, event: dict[str, Any]) -> None:
        if not self.refused and self.session_key is not None and event["session_key"] == self.session_key:
            await self._refuse("AUTH_REQUIRED", _("You signed out."), CLOSE_UNAUTHENTICATED)

    async def auth_changed(self, event: dict[str, Any]) -> None:
        if not self.refused:
            await self._still_allowed()

    # --- helpers ---------------------------------------------------------------------------------

    async def _join(self, group: str) -> None:
        await self.channel_layer.group_add(group, self.channel_name)
        self.joined.append(group)

    async def _error(self, code: str, message: str | Promise) -> None:
        await self.send_json({"type": "error", "code": code, "message": str(message)})

    async def _refuse(self, code: str, message: str | Promise, close_code: int) -> None:
        self.refused = True
        await self._error(code, message)
        await self.close(code=close_code)

    async def _close_after(self, seconds: float, message: str) -> None:
        await asyncio.sleep(max(seconds, 0))
        await self._refuse("AUTH_REQUIRED", message, CLOSE_UNAUTHENTICATED)


def _content(frame: dict[str, Any]) -> str:
    if not isinstance(content := frame.get("content"), str):
        raise Invalid(_('"content" must be a string.'))
    return content


def _client_id(frame: dict[str, Any]) -> str | None:
    client_id = frame.get("client_id")
    if client_id is not None and not (isinstance(client_id, str) and 0 < len(client_id) <= MAX_CLIENT_ID):
        raise Invalid(_('"client_id" must be a string of 1 to %(most)s characters.') % {"most": MAX_CLIENT_ID})
    return client_id


def _is_uuid(value) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return isinstance(value, str)


def _unstorable_said(what: str) -> str:
    if what == "nul":  # PostgreSQL stores it in neither text nor jsonb, and SQLite would keep what PostgreSQL refuses
        return _("Text in a frame cannot hold the NUL character (\\u0000).")
    return _("Text in a frame cannot hold a lone surrogate (\\ud800 to \\udfff): it is not a character.")
