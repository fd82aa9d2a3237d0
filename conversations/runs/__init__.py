"""Live runs: one per conversation, as its own asyncio task, stored in batches and fanned out to every socket.

Every frame of a run goes to the conversation's group on the channel layer, so every socket of the
conversation, on any process, gets the same frames in the same order. The run itself listens on a
control group of its own: a `cancel` or a newcomer's request for the text so far reaches it from
any process. All state lives in the database; a run's process only holds what it is streaming.
"""

from __future__ import annotations

from agentchat.agent.providers import get_provider
from tools.registry import registry

from .frames import confirmation_frame, conversation_group, message_frame
from .manager import RunManager

manager = RunManager(registry=registry, provider_factory=get_provider)

__all__ = ["RunManager", "confirmation_frame", "conversation_group", "manager", "message_frame"]
