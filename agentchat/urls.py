from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.i18n import JavaScriptCatalog
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework_simplejwt.views import TokenObtainPairView, TokenRefreshView

from agentchat.health import healthz
from tools.api import AgentToolsView
from tools.http.api import ServiceTokenView

# The split view serves Swagger UI's start-up script as a file of its own, as the CSP refuses inline script. Its
# page keeps one inline <style> (page margin and background), allowed on that page alone by its hash.
SWAGGER_UI_STYLE = "'sha256-MMpT0iDxyjALd9PdfepImGX3DBfJPXZ4IlDWdPAgtn0='"
api_docs = csp_update({"style-src": SWAGGER_UI_STYLE})(SpectacularSwaggerSplitView.as_view(url_name="schema"))

urlpatterns = [
    path("", include("conversations.urls")),
    path("jsi18n/", JavaScriptCatalog.as_view(), name="javascript-catalog"),
    path("healthz", healthz, name="healthz"),
    path("accounts/login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("admin/", admin.site.urls),
    path("api/auth/token/", TokenObtainPairView.as_view(), name="token_obtain_pair"),
    path("api/auth/token/refresh/", TokenRefreshView.as_view(), name="token_refresh"),
    path("api/auth/service-token/", ServiceTokenView.as_view(), name="service_token"),
    path("api/agent/tools", AgentToolsView.as_view(), name="agent-tools"),
    path("api/", include("conversations.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", api_docs, name="api-docs"),
]

handler404 = "agentchat.errors.not_found"
handler500 = "agentchat.errors.server_error"
