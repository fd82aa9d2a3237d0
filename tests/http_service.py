"""A small real REST service on 127.0.0.1 (a billing system) that checks both of the agent's tokens.

    with BillingService(secret=SECRET) as billing:
        billing.base_url            # http://127.0.0.1:<port>/api
        billing.write_openapi(tmp_path / "billing.json")
        billing.requests[-1]        # what arrived: method, raw path, query, headers, body, verified claims

The service token must be a JWT of token_type "service" and the identity header one of token_type
"identity", both HS256 with `secret`, audience "billing", issuer "agentchat" and unexpired — verified
here with PyJWT alone, as a real service would. Its rules: bob may not read invoices (403); invoice 404
does not exist; /slow takes `slow_seconds`; /broken is a 500; /openapi.json serves the document.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt

from tests.loopback import LoopbackService

AUDIENCE = "billing"
ISSUER = "agentchat"
IDENTITY_HEADER = "X-User-Token"
SECRET = "billing-identity-secret-0123456789abcdef"
TOKEN_ENV = "TEST_BILLING_TOKEN"
SECRET_ENV = "TEST_BILLING_SECRET"

OPENAPI: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "Billing", "version": "1"},
    "servers": [{"url": "https://ignored.example/api"}],
    "paths": {
        "/invoices": {
            "get": {
                "operationId": "listInvoices",
                "summary": "List invoices.",
                "description": "Newest first.",
                "parameters": [
                    {
                        "name": "status",
                        "in": "query",
                        "schema": {"type": "string", "enum": ["open", "paid"]},
                        "description": "Only invoices with this status.",
                    },
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100}},
                    {"name": "tag", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
                ],
            },
        },
        "/invoices/{invoice_id}": {
            "parameters": [{"$ref": "#/components/parameters/InvoiceId"}],
            "get": {"operationId": "getInvoice", "summary": "Get one invoice."},
            "delete": {"summary": "Cancel an invoice."},
        },
        "/invoices/{invoice_id}/refunds": {
            "parameters": [{"$ref": "#/components/parameters/InvoiceId"}],
            "post": {
                "operationId": "createRefund",
                "summary": "Refund part of an invoice.",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Refund"}}},
                },
            },
        },
        "/invoices/search": {
            "post": {
                "operationId": "searchInvoices",
                "summary": "Search invoices by text.",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["text"],
                                "properties": {"text": {"type": "string"}, "paid": {"type": "boolean"}},
                            }
                        }
                    },
                },
            },
        },
        "/documents/{name}": {
            "get": {
                "operationId": "getDocument",
                "summary": "Read a document by its name.",
                "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
            },
        },
        "/whoami": {"get": {"operationId": "whoAmI", "summary": "Who the service thinks is calling."}},
        "/slow": {"get": {"operationId": "slowReport", "summary": "A report that takes its time."}},
        "/broken": {"get": {"operationId": "brokenReport", "summary": "A report that always fails."}},
        "/moved": {"get": {"operationId": "movedReport", "summary": "A report that moved elsewhere."}},
    },
    "components": {
        "parameters": {
            "InvoiceId": {
                "name": "invoice_id",
                "in": "path",
                "required": True,
                "description": "The invoice's number.",
                "schema": {"type": "integer"},
            },
        },
        "schemas": {
            "Refund": {
                "type": "object",
                "required": ["amount"],
                "properties": {
                    "id": {"type": "integer", "readOnly": True},
                    "amount": {"type": "number", "minimum": 0.01, "description": "How much to give back."},
                    "reason": {"type": "string", "maxLength": 200},
                    "notify": {"type": "boolean"},
                },
            },
        },
    },
}


@dataclass
class Arrived:
    method: str
    path: str  # the raw path, as sent (percent-encoding kept)
    query: dict[str, list[str]]
    headers: dict[str, str]  # names lower-cased
    body: Any
    claims: dict[str, Any] = field(default_factory=dict)  # the verified identity token's
    service_claims: dict[str, Any] = field(default_factory=dict)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format, *args) -> None:
        pass

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _verify(self, token: str, token_type: str) -> dict[str, Any]:
        claims = jwt.decode(
            token,
            self.server.service.secret,
            algorithms=["HS256"],
            audience=AUDIENCE,
            issuer=ISSUER,
            options={"require": ["exp", "iat", "sub", "aud", "iss"]},
        )
        if claims.get("token_type") != token_type:
            raise jwt.InvalidTokenError(f"not a {token_type} token")
        return claims

    def _handle(self) -> None:
        service = self.server.service
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        arrived = Arrived(
            method=self.command,
            path=parts.path,
            query=parse_qs(parts.query),
            headers={name.lower(): value for name, value in self.headers.items()},
            body=json.loads(raw) if raw else None,
        )
        service.record(arrived)
        route = parts.path.removeprefix("/api")
        if route == "/openapi.json":
            self._send(200, OPENAPI)
            return
        if not parts.path.startswith("/api/"):
            self._send(404, {"error": "Nothing outside /api here."})
            return

        bearer = arrived.headers.get("authorization", "")
        try:
            arrived.service_claims = self._verify(bearer.removeprefix("Bearer "), "service")
        except jwt.InvalidTokenError as exc:
            # Like some real services, it quotes what it was sent: the agent must not pass that on.
            self._send(401, {"error": f"Bad service token {bearer.removeprefix('Bearer ')}: {exc}"})
            return
        try:
            arrived.claims = self._verify(arrived.headers.get(IDENTITY_HEADER.lower(), ""), "identity")
        except jwt.InvalidTokenError as exc:
            self._send(401, {"error": f"Bad identity token: {exc}"})
            return
        user = arrived.claims["username"]

        if route == "/whoami":
            self._send(200, {"user": user, "sub": arrived.claims["sub"], "agent": arrived.service_claims["service"]})
        elif route == "/slow":
            service.stopping.wait(service.slow_seconds)
            self._send(200, {"report": "late"})
        elif route == "/broken":
            self._send(500, {"detail": "The billing database is down."})
        elif route == "/moved":
            self.send_response(302)
            self.send_header("Location", "http://evil.invalid/steal")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif route == "/invoices" and self.command == "GET":
            self._send(200, {"invoices": [{"id": 7, "status": "open", "owner": user}], "query": arrived.query})
        elif route == "/invoices/search" and self.command == "POST":
            self._send(200, {"found": [7], "searched": arrived.body})
        elif route.startswith("/invoices/"):
            self._invoice(route, user, arrived)
        elif route.startswith("/documents/"):
            self._send(200, {"document": route.removeprefix("/documents/")})
        else:
            self._send(404, {"error": f"No route {route}."})

    def _invoice(self, route: str, user: str, arrived: Arrived) -> None:
        parts = route.split("/")  # ["", "invoices", "<id>", ("refunds")]
        if user == "bob":
            self._send(403, {"error": "bob may not see invoices.", "code": "FORBIDDEN"})
        elif parts[2] == "404":
            self._send(404, {"error": "No invoice 404."})
        elif len(parts) == 4 and parts[3] == "refunds" and self.command == "POST":
            self._send(201, {"refunded": arrived.body, "invoice": int(parts[2])})
        elif len(parts) == 3 and self.command == "DELETE":
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif len(parts) == 3:
            self._send(200, {"id": int(parts[2]), "status": "open", "owner": user, "amount": 120.5})
        else:
            self._send(404, {"error": f"No route {route}."})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, service: BillingService):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.service = service

    def handle_error(self, request, client_address) -> None:
        pass  # a client that gave up on /slow is part of the script


class BillingService(LoopbackService):
    server_class = _Server

    def __init__(self, *, secret: str, slow_seconds: float = 3.0):
        super().__init__()
        self.secret = secret
        self.slow_seconds = slow_seconds
        self.requests: list[Arrived] = []
        self._lock = threading.Lock()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.origin}/api"

    def record(self, arrived: Arrived) -> None:
        with self._lock:
            self.requests.append(arrived)

    def calls(self, path_prefix: str = "/api/") -> list[Arrived]:
        """What reached the API (not the OpenAPI document)."""
        with self._lock:
            return [r for r in self.requests if r.path.startswith(path_prefix) and r.path != "/api/openapi.json"]

    def write_openapi(self, path: Path) -> Path:
        path.write_text(json.dumps(OPENAPI))
        return path


def agent_token(secret: str = SECRET, *, lifetime: int = 3600, account: str = "agent-svc") -> str:
    """A service token as /api/auth/service-token/ issues them, minted here with PyJWT alone."""
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "99", "service": account, "token_type": "service"}
    return jwt.encode({**claims, "iat": now, "exp": now + lifetime}, secret, algorithm="HS256")


def billing_entry(service: BillingService, openapi: str, **overrides: Any) -> dict[str, Any]:
    """The HTTP_SERVICES entry for the running service."""
    return {
        "name": AUDIENCE,
        "base_url": service.base_url,
        "openapi": openapi,
        "token_env": TOKEN_ENV,
        "identity_secret_env": SECRET_ENV,
        "timeout": 1,
        **overrides,
    }
