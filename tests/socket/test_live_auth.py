"""An open socket keeps only the rights its user has now.

Every `message` and `confirm` frame is preceded by a check of the user as the database has them; signing
out, a save of the user and a change of their permissions are pushed to every socket of that user, on
every process. Each story has two sides: a frame sent before the push arrives is refused with nothing
stored, and the push itself closes the sockets that are still open.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.request
from html.parser import HTMLParser
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group, Permission, update_last_login
from django.db import transaction
from django.test import Client

from agentchat.asgi import application
from conversations import consumers, live_auth, services
from conversations.models import Message, PendingConfirmation
from tests.fake_provider import Reply
from tools.dashboards import demo, permissions
from tools.dashboards.models import Deployment

from .conftest import TIMEOUT, Socket, needs_postgres_and_redis

pytestmark = pytest.mark.django_db(transaction=True)

DEPLOY_42 = {"dashboard_id": 42, "environment": "production"}
DEACTIVATED = {"type": "error", "code": "FORBIDDEN", "message": "This account has been deactivated."}
SIGNED_OUT = {"type": "error", "code": "AUTH_REQUIRED", "message": "You signed out."}
SESSION_ENDED = {"type": "error", "code": "AUTH_REQUIRED", "message": "Your session has ended. Sign in again."}
PERMISSIONS_CHANGED = {
    "type": "error",
    "code": "FORBIDDEN",
    "message": "Your permissions have changed. Reload the page to continue with them.",
}


# --- helpers ------------------------------------------------------------------------------------------


class HeldPushes:
    """The events the signal receivers send, held back until `release()`: what a socket does meanwhile is
    what it does when its frame arrives before the push does."""

    def __init__(self, send):
        self.send = send
        self.held: list[tuple[str, dict[str, Any]]] = []

    def hold(self, group: str, event: dict[str, Any]) -> None:
        self.held.append((group, event))

    async def release(self) -> None:
        assert self.held, "no change was pushed"
        for group, event in self.held:
            await sync_to_async(self.send)(group, event)
        self.held.clear()


@pytest.fixture
def held_pushes(monkeypatch) -> HeldPushes:
    pushes = HeldPushes(live_auth._send)
    monkeypatch.setattr(live_auth, "_send", pushes.hold)
    return pushes


def session_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
async def cookie_sockets():
    """Ready sockets signed in by a session cookie, as the page's are; disconnected at the end."""
    opened: list[WebsocketCommunicator] = []

    async def open_socket(conversation, client: Client) -> Socket:
        headers = [
            (b"origin", b"http://localhost:8000"),
            (b"host", b"localhost:8000"),
            (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
        ]
        communicator = WebsocketCommunicator(application, f"/ws/chat/{conversation.pk}/", headers=headers)
        opened.append(communicator)
        connected, _ = await communicator.connect(timeout=TIMEOUT)
        assert connected
        socket = Socket(communicator)
        assert (await socket.receive())["type"] == "ready"
        return socket

    yield open_socket
    for communicator in opened:
        await communicator.disconnect()


async def expect_refused(socket: Socket, frame: dict[str, Any], close_code: int) -> None:
    assert await socket.receive() == frame
    assert await socket.communicator.receive_output(timeout=TIMEOUT) == {"type": "websocket.close", "code": close_code}


async def still_works(socket: Socket) -> None:
    """A ping sent after the change is answered: whatever was pushed before it has been handled."""
    await socket.send({"type": "ping"})
    assert await socket.receive() == {"type": "pong"}


@database_sync_to_async
def stored_messages(conversation) -> list[int]:
    return list(Message.objects.filter(conversation=conversation).values_list("pk", flat=True))


@sync_to_async
def deactivate(user) -> None:
    with transaction.atomic():
        user.is_active = False
        user.save()


def message(content: str = "Deploy dashboard 42", client_id: str = "after-the-change") -> dict[str, Any]:
    return {"type": "message", "content": content, "client_id": client_id}


# --- deactivation --------------------------------------------------------------------------------------


async def test_deactivation_refuses_the_next_message_and_closes_every_socket(
    held_pushes, sockets, cookie_sockets, conversation, alice
):
    first = await sockets(conversation, alice)
    second = await sockets(conversation, alice)
    in_the_browser = await cookie_sockets(conversation, await sync_to_async(session_client)(alice))

    await deactivate(alice)
    await first.send(message())
    await expect_refused(first, DEACTIVATED, consumers.CLOSE_FORBIDDEN)
    assert await stored_messages(conversation) == []

    await held_pushes.release()
    await expect_refused(second, DEACTIVATED, consumers.CLOSE_FORBIDDEN)
    await expect_refused(in_the_browser, DEACTIVATED, consumers.CLOSE_FORBIDDEN)
    assert await stored_messages(conversation) == []


async def test_deactivation_reaches_an_open_socket_once_committed(sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    await deactivate(alice)
    await expect_refused(socket, DEACTIVATED, consumers.CLOSE_FORBIDDEN)


async def test_deactivation_in_the_admin_closes_the_socket(sockets, conversation, alice, admin_user):
    socket = await sockets(conversation, alice)
    response = await sync_to_async(lambda: deactivate_in_the_admin(session_client(admin_user), alice))()
    assert response.status_code == 302, response.content[:2000]
    await expect_refused(socket, DEACTIVATED, consumers.CLOSE_FORBIDDEN)


async def test_an_unreachable_channel_layer_is_logged_and_the_admin_still_saves(
    monkeypatch, caplog, sockets, conversation, alice, admin_user
):
    class DownLayer:
        async def group_send(self, group: str, event: dict[str, Any]) -> None:
            raise ConnectionError("Redis is restarting")

    socket = await sockets(conversation, alice)
    monkeypatch.setattr(live_auth, "get_channel_layer", DownLayer)
    with caplog.at_level(logging.ERROR, logger="conversations.live_auth"):
        response = await sync_to_async(lambda: deactivate_in_the_admin(session_client(admin_user), alice))()

    assert response.status_code == 302, response.content[:2000]
    await sync_to_async(alice.refresh_from_db)()
    assert alice.is_active is False
    assert [r.exc_info[0] for r in caplog.records if r.name == "conversations.live_auth"] == [ConnectionError]
    # The socket did not hear of it, and still acts for no one.
    await socket.send(message())
    await expect_refused(socket, DEACTIVATED, consumers.CLOSE_FORBIDDEN)
    assert await stored_messages(conversation) == []


# --- signing out ---------------------------------------------------------------------------------------


async def test_signing_out_closes_that_sessions_sockets_only(held_pushes, sockets, cookie_sockets, conversation, alice):
    browser = await sync_to_async(session_client)(alice)
    first = await cookie_sockets(conversation, browser)
    second = await cookie_sockets(conversation, browser)
    other_browser = await cookie_sockets(conversation, await sync_to_async(session_client)(alice))
    script = await sockets(conversation, alice)

    response = await sync_to_async(browser.post)("/accounts/logout/")
    assert response.status_code == 302
    await first.send(message())
    await expect_refused(first, SESSION_ENDED, consumers.CLOSE_UNAUTHENTICATED)
    assert await stored_messages(conversation) == []

    await held_pushes.release()
    await expect_refused(second, SIGNED_OUT, consumers.CLOSE_UNAUTHENTICATED)
    await still_works(other_browser)
    await still_works(script)


async def test_client_logout_reaches_the_open_socket(cookie_sockets, conversation, alice):
    browser = await sync_to_async(session_client)(alice)
    socket = await cookie_sockets(conversation, browser)
    await sync_to_async(browser.logout)()
    await expect_refused(socket, SIGNED_OUT, consumers.CLOSE_UNAUTHENTICATED)


# --- a new password --------------------------------------------------------------------------------------


@sync_to_async
def change_password(user) -> None:
    user.set_password("a-new-password")
    user.save()


async def test_a_new_password_ends_the_sessions_sockets_but_not_a_token(
    held_pushes, sockets, cookie_sockets, conversation, alice
):
    browser = await sync_to_async(session_client)(alice)
    first = await cookie_sockets(conversation, browser)
    second = await cookie_sockets(conversation, browser)
    script = await sockets(conversation, alice)

    await change_password(alice)
    await first.send(message())
    await expect_refused(first, SESSION_ENDED, consumers.CLOSE_UNAUTHENTICATED)
    assert await stored_messages(conversation) == []

    await held_pushes.release()
    await expect_refused(second, SESSION_ENDED, consumers.CLOSE_UNAUTHENTICATED)
    await still_works(script)


# --- saves that change no right ---------------------------------------------------------------------------


async def test_signing_in_elsewhere_keeps_the_socket_open(cookie_sockets, conversation, alice):
    socket = await cookie_sockets(conversation, await sync_to_async(session_client)(alice))
    await sync_to_async(update_last_login)(None, alice)  # what every sign-in saves
    await sync_to_async(session_client)(alice)
    await still_works(socket)


async def test_a_save_that_changes_no_right_keeps_the_socket_open(cookie_sockets, sockets, conversation, alice):
    in_the_browser = await cookie_sockets(conversation, await sync_to_async(session_client)(alice))
    script = await sockets(conversation, alice)

    @sync_to_async
    def rename() -> None:
        alice.first_name = "Alice"
        alice.save()

    await rename()
    await still_works(in_the_browser)
    await still_works(script)


# --- permissions ---------------------------------------------------------------------------------------


@sync_to_async
def give(user, *names: str) -> None:
    user.user_permissions.add(*demo.permission_rows(names))


@pytest.fixture
async def catalogue(alice) -> None:
    """The demo dashboards; alice may do everything with them."""
    await sync_to_async(demo.load)()
    await give(alice, *permissions.ALL)


async def test_permissions_removed_after_use_refuse_the_decision_and_close_every_socket(
    held_pushes, llm, sockets, conversation, alice, catalogue
):
    asking = await sockets(conversation, alice)
    llm.script(Reply(tool_calls=[("deploy_dashboard", DEPLOY_42, "call_deploy")]))
    await asking.send(message("Deploy dashboard 42 to production", "ask"))
    frames = await asking.receive_until("run_finished")
    [confirm] = [frame for frame in frames if frame["type"] == "confirm_required"]
    deciding = await sockets(conversation, alice)
    listening = await sockets(conversation, alice)
    stored = await stored_messages(conversation)

    @sync_to_async
    def take_deploy_away() -> None:
        alice.user_permissions.remove(*demo.permission_rows([permissions.DEPLOY]))

    await take_deploy_away()
    await deciding.send({"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "approve"})
    await expect_refused(deciding, PERMISSIONS_CHANGED, consumers.CLOSE_FORBIDDEN)
    await asking.send(message())
    await expect_refused(asking, PERMISSIONS_CHANGED, consumers.CLOSE_FORBIDDEN)

    await held_pushes.release()
    await expect_refused(listening, PERMISSIONS_CHANGED, consumers.CLOSE_FORBIDDEN)
    assert await database_sync_to_async(lambda: list(Deployment.objects.filter(deployed_by=alice)))() == []
    pending = await database_sync_to_async(PendingConfirmation.objects.get)(pk=confirm["confirmation_id"])
    assert pending.status == PendingConfirmation.Status.PENDING
    assert await stored_messages(conversation) == stored
    assert len(llm.requests) == 1


def _group_with(name: str, *users) -> Group:
    group = Group.objects.create(name="deployers")
    group.permissions.add(*demo.permission_rows([name]))
    group.user_set.add(*users)
    return group


def _deploy() -> Permission:
    [permission] = demo.permission_rows([permissions.DEPLOY])
    return permission


def _make_superuser(user) -> None:
    user.is_superuser = True
    user.save()


# Each way the admin or code changes what a user may do: (setup before the socket opens, the change).
PERMISSION_CHANGES = {
    "permission-removed": (
        lambda alice: alice.user_permissions.add(_deploy()),
        lambda alice: alice.user_permissions.remove(_deploy()),
    ),
    "permission-given": (lambda alice: None, lambda alice: alice.user_permissions.add(_deploy())),
    "permissions-cleared": (
        lambda alice: alice.user_permissions.add(_deploy()),
        lambda alice: alice.user_permissions.clear(),
    ),
    "permission-taken-from-everyone": (
        lambda alice: alice.user_permissions.add(_deploy()),
        lambda alice: _deploy().user_set.clear(),
    ),
    "left-the-group": (
        lambda alice: _group_with(permissions.DEPLOY, alice),
        lambda alice: alice.groups.clear(),
    ),
    "removed-from-the-group": (
        lambda alice: _group_with(permissions.DEPLOY, alice),
        lambda alice: Group.objects.get(name="deployers").user_set.remove(alice),
    ),
    "group-lost-the-permission": (
        lambda alice: _group_with(permissions.DEPLOY, alice),
        lambda alice: Group.objects.get(name="deployers").permissions.remove(_deploy()),
    ),
    "permission-taken-from-the-group": (
        lambda alice: _group_with(permissions.DEPLOY, alice),
        lambda alice: _deploy().group_set.clear(),
    ),
    "group-deleted": (
        lambda alice: _group_with(permissions.DEPLOY, alice),
        lambda alice: Group.objects.get(name="deployers").delete(),
    ),
    "made-superuser": (lambda alice: None, _make_superuser),
}


@pytest.mark.parametrize("change", PERMISSION_CHANGES.values(), ids=PERMISSION_CHANGES.keys())
async def test_a_change_of_permissions_closes_the_users_sockets(sockets, conversation, alice, bob, change):
    setup, make_change = change
    await sync_to_async(setup)(alice)
    socket = await sockets(conversation, alice)
    bobs = await sockets(await sync_to_async(services.conversation_create)(owner=bob), bob)

    await sync_to_async(make_change)(alice)

    await expect_refused(socket, PERMISSIONS_CHANGED, consumers.CLOSE_FORBIDDEN)
    await still_works(bobs)


# --- two processes -----------------------------------------------------------------------------------------


class _FormFields(HTMLParser):
    """What a browser posts from the form with id `form_id`: its inputs, checked boxes and selected options."""

    def __init__(self, form_id: str):
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.select: str | None = None
        self.fields: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self.inside = found.get("id") == self.form_id
        elif not self.inside:
            return
        elif tag == "input" and found.get("name") and found.get("type") not in {"submit", "button", "file"}:
            if found.get("type") not in {"checkbox", "radio"}:
                self.fields.append((found["name"], found.get("value") or ""))
            elif "checked" in found:
                self.fields.append((found["name"], found.get("value") or "on"))
        elif tag == "select":
            self.select = found.get("name")
        elif tag == "option" and self.select and "selected" in found:
            self.fields.append((self.select, found.get("value") or ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self.select = None


def deactivation_posted(change_form_html: str) -> str:
    """The admin's change form of a user as it was served, with "Active" unticked and saved."""
    form = _FormFields("user_form")
    form.feed(change_form_html)
    assert ("is_active", "on") in form.fields, form.fields
    return urlencode([field for field in form.fields if field[0] != "is_active"] + [("_save", "Save")])


def deactivate_in_the_admin(admin: Client, user):
    path = f"/admin/auth/user/{user.pk}/change/"
    page = admin.get(path)
    assert page.status_code == 200
    return admin.post(path, deactivation_posted(page.content.decode()), "application/x-www-form-urlencoded")


def deactivate_over_http(server, admin_session: str, user) -> str:
    """The admin's change form, fetched and posted over HTTP like a browser; the URL the save led to."""
    url = f"{server.http_url}/admin/auth/user/{user.pk}/change/"  # http://127.0.0.1 only
    page = urllib.request.Request(url, headers={"Cookie": f"sessionid={admin_session}"})  # noqa: S310
    with urllib.request.urlopen(page, timeout=10) as response:  # noqa: S310
        cookies = SimpleCookie()
        for header in response.headers.get_all("Set-Cookie") or []:
            cookies.load(header)
        body = deactivation_posted(response.read().decode())
    save = urllib.request.Request(  # noqa: S310
        url,
        data=body.encode(),
        headers={
            "Cookie": f"sessionid={admin_session}; csrftoken={cookies['csrftoken'].value}",
            "Content-Type": "application/x-www-form-urlencoded",
        },
        method="POST",
    )
    with urllib.request.urlopen(save, timeout=10) as response:  # noqa: S310 - follows the redirect after saving
        return response.geturl()


@needs_postgres_and_redis
@pytest.mark.usefixtures("close_thread_connections")
async def test_a_deactivation_in_the_admin_of_one_process_closes_the_socket_on_another(
    daphnes, remote_sockets, conversation, alice, admin_user
):
    a, b = await asyncio.to_thread(daphnes, 2)
    socket = await remote_sockets(b, conversation, alice)
    admin_session = await sync_to_async(lambda: session_client(admin_user).cookies["sessionid"].value)()

    landed = await asyncio.to_thread(deactivate_over_http, a, admin_session, alice)

    assert landed == f"{a.http_url}/admin/auth/user/"
    assert await socket.receive(timeout=10) == DEACTIVATED
    async with asyncio.timeout(10):
        await socket.connection.wait_closed()
    assert socket.connection.close_code == consumers.CLOSE_FORBIDDEN
    await sync_to_async(alice.refresh_from_db)()
    assert alice.is_active is False
