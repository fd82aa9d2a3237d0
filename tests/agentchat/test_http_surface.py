from __future__ import annotations

import pytest
import yaml

pytestmark = pytest.mark.django_db


def test_openapi_schema_describes_the_api(client):
    response = client.get("/api/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    assert schema["openapi"].startswith("3.")
    paths = schema["paths"]
    for path in [
        "/api/auth/token/",
        "/api/auth/token/refresh/",
        "/api/assistant/conversations/",
        "/api/assistant/conversations/{id}/",
        "/api/assistant/conversations/{id}/restore/",
        "/api/assistant/conversations/{id}/history/",
        "/api/agent/conversations/{id}/active",
    ]:
        assert path in paths, path
    assert "delete" in paths["/api/assistant/conversations/{id}/"]
    assert "put" not in paths["/api/assistant/conversations/{id}/"]
    listed = {p["name"] for p in paths["/api/assistant/conversations/"]["get"]["parameters"]}
    assert {"archived", "search", "page"} <= listed


def test_a_message_says_in_the_schema_which_fields_may_be_null(client):
    message = yaml.safe_load(client.get("/api/schema/").content)["components"]["schemas"]["Message"]["properties"]

    assert message["decision"]["nullable"] is True
    assert set(message["decision"]["required"]) == {"status", "decided_by", "decided_at", "args", "reason"}
    assert message["decision"]["properties"]["decided_by"]["nullable"] is True


def test_docs_page_is_served_from_local_assets(client):
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html
    for asset in ["swagger-ui-bundle.js", "swagger-ui.css"]:
        url = f"/static/drf_spectacular_sidecar/swagger-ui-dist/{asset}"
        assert url in html
        assert client.get(url).status_code == 200


def test_unknown_api_path_is_a_json_404(client):
    response = client.get("/api/does-not-exist/")
    assert response.status_code == 404
    assert response.json() == {"error": "Not found.", "code": "NOT_FOUND"}


def test_unknown_page_is_an_html_404(client):
    response = client.get("/does-not-exist/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
