"""The identity JWT that goes with each call a toolset makes for a user, so that what it calls can act as that user.

HS256, signed with a secret shared with that one service or server (never SECRET_KEY), so it can forge neither
AgentChat's sessions nor another's tokens. Verified with that secret alone:

    jwt.decode(token, SECRET, algorithms=["HS256"], audience="billing", issuer="agentchat",
               options={"require": ["exp", "iat", "sub", "aud", "iss"]})

then `token_type == "identity"`.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Protocol

import jwt
from django.conf import settings

ISSUER = "agentchat"
ALGORITHM = "HS256"


class Audience(Protocol):
    """Who a token is for: a configured service or server, by its name, with the secret it shares with AgentChat."""

    @property
    def name(self) -> str: ...

    @property
    def identity_secret(self) -> str: ...


def sign(claims: dict[str, Any], audience: Audience) -> str:
    return jwt.encode(claims, audience.identity_secret, algorithm=ALGORITHM)


def identity_token(user, audience: Audience, *, now: float | None = None) -> str:
    """A short-lived token naming the user the agent acts for, for `audience` only."""
    issued = int(now if now is not None else time.time())
    return sign(
        {
            "iss": ISSUER,
            "aud": audience.name,
            "sub": str(user.pk),
            "username": user.get_username(),
            "token_type": "identity",
            "iat": issued,
            "exp": issued + settings.HTTP_IDENTITY_TOKEN_SECONDS,
            "jti": uuid.uuid4().hex,
        },
        audience,
    )
