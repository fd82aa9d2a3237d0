from __future__ import annotations

import asyncio
import json

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from agentchat.agent.calls import ToolAccess
from agentchat.agent.orchestrator import AgentRun
from agentchat.agent.prompts import build_system_prompt
from agentchat.agent.providers import ProviderError, get_provider
from tools.registry import ToolContext, registry


class Command(BaseCommand):
    help = (
        "Run one agent turn from the shell with the configured provider and print what happens. "
        "Nothing is stored; tools that need a confirmation are not run."
    )

    def add_arguments(self, parser):
        parser.add_argument("prompt")
        parser.add_argument("--user", help="run the tools with this user's permissions (default: no permissions)")
        parser.add_argument("--context", type=json.loads, default={}, help="page context, e.g. '{\"focus\": {...}}'")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print every event as one JSON line")

    def handle(self, *args, prompt: str, user: str | None, context: dict, as_json: bool, **options) -> None:
        person = None
        if user:
            person = get_user_model().objects.filter(username=user).first()
            if person is None:
                raise CommandError(f"No user named {user!r}.")
        try:
            provider = get_provider()
        except ProviderError as exc:
            raise CommandError(exc.message) from None
        run = AgentRun(
            provider=provider,
            tools=registry.permitted(person),
            access=ToolAccess.direct(registry, ToolContext(user=person, page_context=context)),
            system_prompt=build_system_prompt(context),
            max_rounds=settings.AGENT_MAX_ROUNDS,
        )
        asyncio.run(self._show(run, prompt, as_json=as_json))

    async def _show(self, run: AgentRun, prompt: str, *, as_json: bool) -> None:
        async for event in run.events([{"role": "user", "content": prompt}]):
            frame = event.frame()
            if as_json:
                self.stdout.write(json.dumps(frame, ensure_ascii=False, default=str))
            elif event.type == "token":
                self.stdout.write(event.delta, ending="")
                self.stdout.flush()
            elif event.type == "assistant_message":
                self.stdout.write("")
            elif event.type != "run_finished":
                details = {key: value for key, value in frame.items() if key not in {"type", "run_id", "seq"}}
                self.stdout.write(self.style.NOTICE(f"[{event.type}] {details}"))
            else:
                self.stdout.write(self.style.SUCCESS(f"[{event.status}] {event.error}".rstrip()))
