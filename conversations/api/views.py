from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import generics, mixins, renderers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from agentchat.agent.prompts import build_system_prompt
from agentchat.agent.providers import ProviderChatParams, ProviderChatResponse, get_provider
from agentchat.api import ErrorSerializer
from agentchat.errors import ApiError
from tools.registry import registry

from .. import selectors, services
from . import export, uploads
from .pagination import HistoryPagination
from .serializers import (
    ActiveRunSerializer,
    AgentChatRequestSerializer,
    AgentChatResponseSerializer,
    AttachmentSerializer,
    AttachmentUploadSerializer,
    ConversationCreateSerializer,
    ConversationFilterSerializer,
    ConversationListSerializer,
    ConversationRenameSerializer,
    ConversationSerializer,
    HistoryFilterSerializer,
    MessageSerializer,
    UnsupportedFileSerializer,
)

ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="The request is not valid."),
    401: OpenApiResponse(ErrorSerializer, description="Not signed in, or the token is invalid or expired."),
    404: OpenApiResponse(ErrorSerializer, description="No such conversation of yours."),
}


@extend_schema_view(
    list=extend_schema(
        parameters=[ConversationFilterSerializer], responses={200: ConversationListSerializer, **ERRORS}
    ),
    create=extend_schema(request=ConversationCreateSerializer, responses={201: ConversationSerializer, **ERRORS}),
    retrieve=extend_schema(responses={200: ConversationSerializer, **ERRORS}),
    partial_update=extend_schema(
        request=ConversationRenameSerializer, responses={200: ConversationSerializer, **ERRORS}
    ),
    destroy=extend_schema(
        description="Archive the conversation: nothing is deleted, pending confirmations are cleared.",
        responses={204: None, **ERRORS},
    ),
)
class ConversationViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    lookup_value_regex = "[0-9a-fA-F-]{36}"
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):
        if self.action == "list":
            filters = ConversationFilterSerializer(data=self.request.query_params)
            filters.is_valid(raise_exception=True)
            return selectors.conversations_for(self.request.user, **filters.validated_data)
        return selectors.conversations_for(self.request.user, archived=None)

    def get_serializer_class(self):
        return ConversationListSerializer if self.action == "list" else ConversationSerializer

    def _respond(self, conversation, status_code=status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=conversation.pk)
        return Response(ConversationSerializer(fresh).data, status=status_code)

    def create(self, request):
        serializer = ConversationCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        conversation = services.conversation_create(owner=request.user, **serializer.validated_data)
        return self._respond(conversation, status.HTTP_201_CREATED)

    def partial_update(self, request, pk=None):
        conversation = self.get_object()
        serializer = ConversationRenameSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        services.conversation_rename(conversation=conversation, actor=request.user, **serializer.validated_data)
        return self._respond(conversation)

    def destroy(self, request, pk=None):
        services.conversation_archive(conversation=self.get_object(), actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={200: ConversationSerializer, **ERRORS})
    @action(detail=True, methods=["post"])
    def restore(self, request, pk=None):
        conversation = services.conversation_restore(conversation=self.get_object(), actor=request.user)
        return self._respond(conversation)

    @extend_schema(parameters=[HistoryFilterSerializer], responses={200: MessageSerializer(many=True), **ERRORS})
    @action(detail=True, methods=["get"], pagination_class=HistoryPagination)
    def history(self, request, pk=None):
        """Messages oldest first, with tool calls, tool results and statuses; superseded ones too, unless
        include_superseded=false."""
        conversation = self.get_object()
        filters = HistoryFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        messages = selectors.history_for(conversation, **filters.validated_data)
        page = selectors.as_shown(conversation, self.paginate_queryset(messages))
        return self.get_paginated_response(MessageSerializer(page, many=True).data)

    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=["md", "json"], description="md (the default) or json")],
        responses={
            (200, "text/markdown"): OpenApiTypes.STR,
            (200, "application/json"): OpenApiTypes.OBJECT,
            **ERRORS,
        },
    )
    @action(detail=True, methods=["get"], renderer_classes=[export.MarkdownRenderer, renderers.JSONRenderer])
    def export(self, request, pk=None):
        """The whole conversation to take away: Markdown to read (roles, times, tool calls as code blocks,
        decisions with who made them), or JSON with every stored field of its messages and confirmations."""
        conversation = self.get_object()
        messages = selectors.as_shown(conversation, list(selectors.history_for(conversation)))
        if request.accepted_renderer.format == "json":
            data: Any = export.as_json(conversation, messages)
        else:
            data = export.as_markdown(conversation, messages)
        filename = f"conversation-{conversation.pk}.{request.accepted_renderer.format}"
        return Response(data, headers={"Content-Disposition": f'attachment; filename="{filename}"'})


@extend_schema_view(
    get=extend_schema(responses={200: AttachmentSerializer(many=True), **ERRORS}),
    post=extend_schema(
        request={"multipart/form-data": AttachmentUploadSerializer},
        responses={
            201: AttachmentSerializer,
            **ERRORS,
            413: OpenApiResponse(ErrorSerializer, description="The file is larger than 10 MB."),
            415: OpenApiResponse(
                UnsupportedFileSerializer, description="Not a supported format: the list says which are."
            ),
            422: OpenApiResponse(
                ErrorSerializer, description="The file is not what it claims to be, or cannot be read."
            ),
            503: OpenApiResponse(ErrorSerializer, description="The server is reading too many files; try again."),
        },
    ),
)
class AttachmentsView(generics.ListAPIView):
    """A conversation's files: list them, or upload one (multipart field `file`), which is read before it is kept."""

    serializer_class = AttachmentSerializer
    parser_classes = [MultiPartParser]

    def initialize_request(self, request, *args, **kwargs):
        # Before anything reads the body: even authentication may (a session's CSRF check reads the form).
        self.upload_limit = uploads.limit_uploads(request)
        return super().initialize_request(request, *args, **kwargs)

    def conversation(self):
        # A draft too: the start page attaches files to one before its first message (docs/pages.md).
        conversations = selectors.conversations_for(self.request.user, archived=None, drafts=True)
        return get_object_or_404(conversations, pk=self.kwargs["pk"])

    def get_queryset(self):
        return selectors.attachments_for(self.conversation().pk, self.request.user)

    def post(self, request, pk):
        conversation = self.conversation()
        declared = uploads.declared_length(request)
        if self.upload_limit.body_too_large(declared):
            self._refuse(conversation, size=declared or 0)
        upload = request.FILES.get("file")
        if self.upload_limit.exceeded:
            self._refuse(conversation, size=declared or 0)
        if upload is None:
            raise ValidationError({"file": [_("Attach the file in the multipart field named 'file'.")]})
        if conversation.is_archived:
            raise ApiError(_("This conversation is archived. Restore it to attach files."), code="INVALID")
        attachment = services.attachment_upload(conversation=conversation, owner=request.user, upload=upload)
        return Response(AttachmentSerializer(attachment).data, status=status.HTTP_201_CREATED)

    def _refuse(self, conversation, *, size: int):
        """Too large: audited with what is known before the file was read (not its name, nor its hash)."""
        error = uploads.too_large()
        services.attachment_reject(conversation=conversation, owner=self.request.user, name="", size=size, error=error)
        raise error


class ActiveRunView(APIView):
    """Whether a run is live in this conversation right now, on any process (the multi-tab gate)."""

    @extend_schema(responses={200: ActiveRunSerializer, **ERRORS})
    def get(self, request, pk):
        conversation = get_object_or_404(selectors.conversations_for(request.user, archived=None), pk=pk)
        return Response(ActiveRunSerializer(selectors.conversation_active_run(conversation)).data)


class AgentChatView(APIView):
    """One provider turn with the tools you may use; no tool is executed (the shell's contract)."""

    @extend_schema(
        request=AgentChatRequestSerializer,
        responses={
            200: AgentChatResponseSerializer,
            400: ERRORS[400],
            401: ERRORS[401],
            502: OpenApiResponse(ErrorSerializer, description="The provider failed or is not configured."),
        },
    )
    def post(self, request):
        body = AgentChatRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        tools = registry.permitted(request.user)
        params = ProviderChatParams(
            messages=body.validated_data["messages"],
            system_prompt=build_system_prompt(body.validated_data["context"]),
            tools=[tool.schema() for tool in tools],
            withheld=[tool.schema() for tool in registry.withheld(tools)],
        )
        answer = async_to_sync(_provider_chat)(params)
        return Response({"content": answer.content, "toolCalls": answer.tool_calls})


async def _provider_chat(params: ProviderChatParams) -> ProviderChatResponse:
    # The provider is taken on the event loop that runs the call, whose own it then is: made in this request's thread
    # (which runs none) it would be a new client each time, its connection opened for one request and never closed.
    return await get_provider().chat(params)
