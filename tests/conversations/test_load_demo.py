"""`manage.py load_demo`: the demo users, idempotent, never overwriting what a person changed."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from conversations.management.commands.load_demo import DEMO_USERS

pytestmark = pytest.mark.django_db

User = get_user_model()


def load_demo() -> str:
    out = StringIO()
    call_command("load_demo", stdout=out)
    return out.getvalue()


def printed_line(output: str, username: str) -> str:
    lines = [line for line in output.splitlines() if line.split()[:1] == [username]]
    assert len(lines) == 1, output
    return lines[0]


def test_creates_the_demo_users_with_their_passwords():
    load_demo()

    alice, bob, admin = (User.objects.get(username=name) for name in ("alice", "bob", "admin"))
    for user in (alice, bob):
        assert not user.is_staff
        assert not user.is_superuser
    assert admin.is_superuser
    assert admin.is_staff
    for username, password, _ in DEMO_USERS:
        assert User.objects.get(username=username).check_password(password)
    assert [u for u, _, _ in DEMO_USERS] == ["alice", "bob", "admin"]


def test_running_twice_creates_no_duplicates_and_prints_the_users():
    load_demo()
    output = load_demo()

    assert User.objects.count() == len(DEMO_USERS)
    for username, password, is_superuser in DEMO_USERS:
        assert User.objects.filter(username=username).count() == 1
        line = printed_line(output, username)
        assert password in line
        assert ("administrator" if is_superuser else "user") in line.split()


def test_a_password_changed_by_its_owner_is_kept():
    load_demo()
    alice = User.objects.get(username="alice")
    alice.set_password("alice-own-secret-42")
    alice.save()

    output = load_demo()

    alice.refresh_from_db()
    assert alice.check_password("alice-own-secret-42")
    assert not alice.check_password("alice-demo")
    line = printed_line(output, "alice")
    assert "(changed by its owner)" in line
    assert "alice-demo" not in output
    assert "alice-own-secret-42" not in output
    assert "bob-demo" in printed_line(output, "bob")
    assert User.objects.count() == len(DEMO_USERS)
