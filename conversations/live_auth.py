"""Open chat sockets hear at once when their user's rights change, on every process.

Each signed-in socket is in its user's group on the channel layer. Signing out, a save of the user, and a
change of the user's permissions or groups send that group an event once the change is committed; each
socket then checks its user again (conversations.consumers).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import m2m_changed, post_save, pre_delete
from django.http import HttpRequest

from . import selectors

logger = logging.getLogger(__name__)

# A socket whose session signed out closes; it is the only one of its user that does.
SIGNED_OUT = "auth.signed_out"
# Every socket of the user checks the user again, and closes if they may no longer act or their permissions differ.
CHANGED = "auth.changed"


def user_group(user_id) -> str:
    return f"user.{user_id}"


def connect() -> None:
    user_model = get_user_model()
    user_logged_out.connect(_signed_out, dispatch_uid="conversations.live_auth.signed_out")
    post_save.connect(_user_saved, sender=user_model, dispatch_uid="conversations.live_auth.user_saved")
    pre_delete.connect(_group_deleted, sender=Group, dispatch_uid="conversations.live_auth.group_deleted")
    for through in (user_model.user_permissions.through, user_model.groups.through, Group.permissions.through):
        m2m_changed.connect(
            _permissions_changed, sender=through, dispatch_uid=f"conversations.live_auth.{through._meta.label}"
        )


def _signed_out(sender, request: HttpRequest, user, **kwargs) -> None:
    session_key = request.session.session_key if hasattr(request, "session") else None
    if user is not None and session_key:
        _push([user.pk], {"type": SIGNED_OUT, "session_key": session_key})


def _user_saved(sender, instance, created: bool, update_fields: frozenset[str] | None, **kwargs) -> None:
    # Every sign-in saves last_login: no right changes with it.
    if created or (update_fields is not None and update_fields <= {"last_login"}):
        return
    _push([instance.pk], {"type": CHANGED})


def _permissions_changed(sender, instance, action: str, pk_set: set | None, **kwargs) -> None:
    # add() and remove() send pk_set; clear() does not, so its users are found before the rows go.
    if action in {"post_add", "post_remove", "pre_clear"}:
        _push(_users_reached(sender, instance, pk_set), {"type": CHANGED})


def _group_deleted(sender, instance: Group, **kwargs) -> None:
    _push(selectors.user_ids_with("groups", [instance.pk]), {"type": CHANGED})


def _users_reached(sender, instance, pk_set: set | None) -> set:
    """The users whose permissions a change of `sender`'s rows between `instance` and `pk_set` (None: all) touches."""
    user_model = get_user_model()
    if isinstance(instance, user_model):
        return {instance.pk}
    if sender is Group.permissions.through:
        if isinstance(instance, Group):
            return selectors.user_ids_with("groups", [instance.pk])
        if pk_set is None:  # a permission taken from every group
            return selectors.user_ids_with("groups__permissions", [instance.pk])
        return selectors.user_ids_with("groups", pk_set)
    if pk_set is None:  # a permission or a group taken from every user
        relation = "groups" if sender is user_model.groups.through else "user_permissions"
        return selectors.user_ids_with(relation, [instance.pk])
    return set(pk_set)


def _push(user_ids, event: dict[str, Any]) -> None:
    for user_id in user_ids:
        transaction.on_commit(partial(_send, user_group(user_id), event))


def _send(group: str, event: dict[str, Any]) -> None:
    # Never fails the change itself (an admin's save): a socket that misses the event is still checked at its
    # next message or decision.
    try:
        async_to_sync(get_channel_layer().group_send)(group, event)
    except Exception:
        logger.exception("could not tell the sockets of %s that their user's rights changed", group)
