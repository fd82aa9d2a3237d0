from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from tools.dashboards import demo as dashboards_demo

DEMO_USERS = [
    # username, password, is_superuser
    ("alice", "alice-demo", False),
    ("bob", "bob-demo", False),
    ("admin", "admin-demo", True),
]


class Command(BaseCommand):
    help = "Create the demo users and data. Safe to run again: nothing a person changed is overwritten."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--url", default="http://127.0.0.1:8000/", help="where the server is, to say where to sign in"
        )

    @transaction.atomic
    def handle(self, *args, url: str, **options) -> None:
        User = get_user_model()
        rows, created_users = [], set()
        for username, password, is_superuser in DEMO_USERS:
            user, created = User.objects.get_or_create(
                username=username,
                defaults={"is_superuser": is_superuser, "is_staff": is_superuser, "email": f"{username}@example.com"},
            )
            if created:
                user.set_password(password)
                user.save(update_fields=["password"])
                created_users.add(username)
            shown = password if user.check_password(password) else "(changed by its owner)"
            rows.append((username, shown, "administrator" if user.is_superuser else "user"))

        self.stdout.write(f"Demo users (sign in at {url}):")
        for username, shown, role in rows:
            self.stdout.write(f"  {username:<8} {shown:<24} {role}")

        dashboards = dashboards_demo.load(created_users=created_users)
        self.stdout.write(
            f"Demo dashboards: {dashboards.dashboards} in the catalogue, {dashboards.with_problems} with validation "
            f"problems ({'loaded now' if dashboards.loaded else 'left as they were'}). "
            "Dashboard tools: alice may use them all, bob may only search and read."
        )
