"""deploy/nginx.conf.template as shipped: nginx in front of two server processes sharing PostgreSQL and Redis.

Run in CI's second pass (REDIS_URL set, nginx installed by .ci/run); skipped where either is missing.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import string
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.core.management import call_command
from rest_framework_simplejwt.tokens import AccessToken

from conversations import services
from tests.fake_provider import Reply
from tests.servers import BASE_DIR, HOST, RemoteSocket, free_port
from tools.documents.limits import MAX_UPLOAD_BYTES

from .test_front_door import post, upload_path

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("close_thread_connections"),
    pytest.mark.skipif(NGINX is None, reason="nginx is not installed (.ci/run installs it)"),
    pytest.mark.skipif(not django_settings.REDIS_URL, reason="two processes behind nginx share Redis: set REDIS_URL"),
]

MAIN = """
daemon off;
master_process off;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 256; }}
http {{
    include /etc/nginx/mime.types;
    access_log {root}/access.log;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    include {root}/agentchat.conf;
}}
"""


class Nginx:
    def __init__(self, root: Path, upstreams: list, static_root: Path):
        self.root = root
        self.upstreams = upstreams
        self.port = free_port()
        template = string.Template((BASE_DIR / "deploy" / "nginx.conf.template").read_text())
        site = template.safe_substitute(
            AGENTCHAT_LISTEN=f"{HOST}:{self.port}",
            AGENTCHAT_SERVER_NAME=HOST,
            AGENTCHAT_DAPHNE_1=f"{HOST}:{upstreams[0].port}",
            AGENTCHAT_DAPHNE_2=f"{HOST}:{upstreams[1].port}",
            AGENTCHAT_STATIC_ROOT=str(static_root),
        )
        assert "${AGENTCHAT" not in site
        (root / "agentchat.conf").write_text(site)
        (root / "nginx.conf").write_text(MAIN.format(root=root))
        self.process = subprocess.Popen(  # noqa: S603 - nginx with our config
            [NGINX, "-c", str(root / "nginx.conf"), "-p", str(root)], stderr=subprocess.PIPE
        )

    # What RemoteSocket and post() need of a server.
    @property
    def http_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    origin = http_url

    def ws_url(self, path: str) -> str:
        return f"ws://{HOST}:{self.port}{path}"

    def get(self, path: str) -> tuple[int, dict[str, str], bytes]:
        with urllib.request.urlopen(self.http_url + path, timeout=10) as answer:  # noqa: S310 - loopback
            return answer.status, dict(answer.headers), answer.read()

    def wait_ready(self) -> None:
        for _ in range(100):
            if self.process.poll() is not None:
                raise RuntimeError(self.process.stderr.read().decode())
            try:
                self.get("/healthz")
                return
            except OSError:
                pass
            subprocess.run(["sleep", "0.05"], check=True)  # noqa: S607
        raise RuntimeError("nginx did not answer")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGQUIT)
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture
def nginx(daphnes, tmp_path, settings):
    servers = daphnes(2)
    static_root = tmp_path / "static"
    settings.STATIC_ROOT = str(static_root)
    call_command("collectstatic", interactive=False, verbosity=0)
    front = Nginx(tmp_path, servers, static_root)
    try:
        front.wait_ready()
        yield front
    finally:
        front.stop()
        print((tmp_path / "error.log").read_text() if (tmp_path / "error.log").exists() else "")


async def test_chat_through_nginx_reaches_both_processes(nginx, fake_llm, alice):
    conversation = await sync_to_async(services.conversation_create)(owner=alice)
    token = str(AccessToken.for_user(alice))
    path = f"/ws/chat/{conversation.pk}/"
    # nginx takes turns between the two processes: two sockets land on different ones.
    first = await RemoteSocket.open(nginx, path, token=token)
    second = await RemoteSocket.open(nginx, path, token=token)
    try:
        fake_llm.script(Reply(text="Hello through the proxy, streamed in pieces."))
        await first.send({"type": "message", "content": "Hi", "client_id": "via-nginx"})
        for socket in (first, second):
            frames = await socket.receive_until("run_finished")
            text = "".join(frame["delta"] for frame in frames if frame["type"] == "token")
            assert text == "Hello through the proxy, streamed in pieces."
            assert frames[-1]["status"] == "completed"
        assert all("WSCONNECT /ws/chat/" in server.tail() for server in nginx.upstreams)
    finally:
        await first.close()
        await second.close()


async def test_uploads_static_files_and_health_through_nginx(nginx, alice):
    conversation = await sync_to_async(services.conversation_create)(owner=alice)
    token = str(AccessToken.for_user(alice))

    def upload(data: bytes) -> tuple[int, dict]:
        boundary = "agentchat-boundary"
        body = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="sales.csv"\r\n'
                f"Content-Type: text/csv\r\n\r\n"
            ).encode()
            + data
            + f"\r\n--{boundary}--\r\n".encode()
        )
        request = urllib.request.Request(  # noqa: S310 - loopback
            nginx.http_url + upload_path(conversation),
            data=body,
            method="POST",
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json",
                "Content-Type": f"multipart/form-data; boundary={boundary}",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    status, body = await asyncio.to_thread(upload, b"region,amount\nNorth,10\nSouth,20\n")
    assert (status, body["kind"]) == (201, "csv")
    # Nearly the whole 10 MB passes nginx; one byte more than the body limit does not reach the servers. (Rows of
    # some length: millions of tiny ones take longer to read than a slow machine allows a CSV.)
    row = b"North Sea harbour and its warehouses,1234567.89\n"
    status, body = await asyncio.to_thread(upload, b"a,b\n" + row * ((MAX_UPLOAD_BYTES - 4) // len(row)))
    assert status == 201, body
    (status, body), _ = await post(
        nginx,
        upload_path(conversation),
        {"Content-Type": "multipart/form-data; boundary=x", "Content-Length": str(60 << 20)},
    )
    assert (status, body["code"]) == (413, "TOO_LARGE")

    status, headers, script = await asyncio.to_thread(nginx.get, "/static/js/chat.js")
    assert status == 200
    assert script == (BASE_DIR / "static" / "js" / "chat.js").read_bytes()
    assert headers["Cache-Control"] == "no-cache"

    status, _, health = await asyncio.to_thread(nginx.get, "/healthz")
    assert status == 200
    assert json.loads(health)["database"] == "ok"
