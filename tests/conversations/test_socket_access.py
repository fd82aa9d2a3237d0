"""The user a socket acts as, read again at every turn: the same permissions Django's auth backends give, read in
one statement when ModelBackend is the only backend that grants any, and nothing more asked of the database for the
tools the user may use."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.backends import BaseBackend
from django.contrib.auth.models import Group, Permission
from django.contrib.sessions.backends.signed_cookies import SessionStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from conversations import selectors
from tools.registry import registry

pytestmark = pytest.mark.django_db


def fresh(user):
    return get_user_model().objects.get(pk=user.pk)


def test_permissions_of_the_user_and_of_their_groups_as_django_gives_them(alice, django_assert_num_queries):
    alice.user_permissions.set([Permission.objects.get(codename="view_group")])
    team = Group.objects.create(name="team")
    team.permissions.set(
        [Permission.objects.get(codename="change_group"), Permission.objects.get(codename="view_group")]
    )
    alice.groups.add(team)

    with django_assert_num_queries(2):  # the user, their permissions
        access = selectors.socket_access(alice.pk, None)

    assert access.permissions == frozenset(fresh(alice).get_all_permissions())
    assert {"auth.view_group", "auth.change_group"} <= access.permissions
    with django_assert_num_queries(0):
        tools = registry.permitted(access.user)
    assert [tool.name for tool in tools] == [tool.name for tool in registry.permitted(fresh(alice))]
    assert access.user.has_perm("auth.change_group") and not access.user.has_perm("auth.delete_group")


def test_a_superuser_has_every_permission(admin_user):
    access = selectors.socket_access(admin_user.pk, None)

    assert access.permissions == frozenset(fresh(admin_user).get_all_permissions())
    assert len(access.permissions) == Permission.objects.count()


def test_a_user_with_no_permission_has_none(bob):
    bob.user_permissions.clear()

    assert selectors.socket_access(bob.pk, None).permissions == frozenset(fresh(bob).get_all_permissions())


class GrantsReports(BaseBackend):
    def get_all_permissions(self, user_obj, obj=None):
        return {"reports.view_report"}


def test_another_backend_that_grants_permissions_is_asked_too(alice, settings):
    settings.AUTHENTICATION_BACKENDS = [
        *settings.AUTHENTICATION_BACKENDS,
        f"{__name__}.GrantsReports",
    ]

    access = selectors.socket_access(alice.pk, None)

    assert "reports.view_report" in access.permissions
    assert access.permissions == frozenset(fresh(alice).get_all_permissions())


def test_a_user_gone_or_deactivated_is_refused(alice):
    assert selectors.socket_access(10**9, None).refusal == "gone"
    alice.is_active = False
    alice.save()
    assert selectors.socket_access(alice.pk, None).refusal == "inactive"


def test_a_session_signs_the_socket_in_until_it_expires_and_its_store_is_asked_too(alice, client, settings):
    client.force_login(alice)
    session_key = client.session.session_key

    assert selectors.socket_access(alice.pk, session_key).user == alice
    Session.objects.filter(session_key=session_key).update(expire_date=timezone.now() - timedelta(seconds=1))
    assert selectors.socket_access(alice.pk, session_key).refusal == "signed_out"

    # A store other than the database's is asked as Django asks it: the signed cookie carries the session itself.
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
    cookie = SessionStore()
    cookie.update({SESSION_KEY: str(alice.pk), BACKEND_SESSION_KEY: settings.AUTHENTICATION_BACKENDS[0]})
    cookie[HASH_SESSION_KEY] = alice.get_session_auth_hash()
    cookie.save()
    assert selectors.socket_access(alice.pk, cookie.session_key).user == alice
    assert selectors.socket_access(alice.pk, cookie.session_key + "x").refusal == "signed_out"
