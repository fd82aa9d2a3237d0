"""The two JWTs a service sees: the agent's service token and, on every call, the user's identity (tools/identity.py).

Both are HS256, signed with the service's own secret (its `identity_secret_env`), so a service verifies
them with that one secret and can forge neither AgentChat's sessions nor another service's tokens:

    jwt.decode(token, SECRET, algorithms=["HS256"], audience="billing", issuer="agentchat",
               options={"require": ["exp", "iat", "sub", "aud", "iss"]})

then checks `token_type` ("identity" for the user, "service" for the agent).
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

from django.conf import settings

from tools.identity import ISSUER, sign

from .config import Service


def service_token(account, service: Service, *, now: float | None = None) -> tuple[str, datetime]:
    """A long-lived token saying "this is the agent, set up by `account`", and when it expires."""
    issued = int(now if now is not None else time.time())
    expires = issued + settings.SERVICE_TOKEN_DAYS * 24 * 60 * 60
    token = sign(
        {
            "iss": ISSUER,
            "aud": service.name,
            "sub": str(account.pk),
            "service": account.get_username(),
            "token_type": "service",
            "iat": issued,
            "exp": expires,
            "jti": uuid.uuid4().hex,
        },
        service,
    )
    return token, datetime.fromtimestamp(expires, tz=UTC)
