"""From an OpenAPI document to tools: names, descriptions, argument schemas, validation, what needs confirmation."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ImproperlyConfigured

from tools.http.openapi import operations, tool_name
from tools.http.toolset import build_tools
from tools.registry import ToolArgumentsError

NAMES = {
    "billing_listInvoices",
    "billing_getInvoice",
    "billing_delete_invoices_invoice_id",  # no operationId: named from the method and path
    "billing_createRefund",
    "billing_searchInvoices",
    "billing_getDocument",
    "billing_whoAmI",
    "billing_slowReport",
    "billing_brokenReport",
    "billing_movedReport",
}


def parameters(tools, name: str) -> dict:
    return tools.get(name).schema()["parameters"]


def test_every_operation_is_a_tool_named_service_operation(tools):
    assert {tool.name for tool in tools.all()} == NAMES
    assert tools.get("billing_getInvoice").description == "Get one invoice."
    assert tools.get("billing_listInvoices").description == "List invoices.\n\nNewest first."
    assert tools.get("billing_delete_invoices_invoice_id").description == "Cancel an invoice."
    for tool in tools.all():
        assert tool.timeout == 1 + 5 and tool.permission is None


def test_path_and_query_parameters_with_their_types(tools):
    one = parameters(tools, "billing_getInvoice")
    assert one["required"] == ["invoice_id"]
    assert one["properties"]["invoice_id"]["type"] == "integer"
    assert one["properties"]["invoice_id"]["description"] == "The invoice's number."  # through a $ref
    assert one["additionalProperties"] is False

    listing = parameters(tools, "billing_listInvoices")
    assert "required" not in listing
    status, limit, tag = (listing["properties"][name]["anyOf"][0] for name in ("status", "limit", "tag"))
    assert status == {"type": "string", "enum": ["open", "paid"]}
    assert limit == {"type": "integer", "minimum": 1, "maximum": 100}
    assert tag == {"type": "array", "items": {"type": "string"}}
    assert listing["properties"]["status"]["description"] == "Only invoices with this status."


def test_a_json_body_s_properties_are_arguments_beside_the_path_ones(tools):
    refund = parameters(tools, "billing_createRefund")
    assert refund["required"] == ["invoice_id", "amount"]
    properties = refund["properties"]
    assert set(properties) == {"invoice_id", "amount", "reason", "notify"}  # `id` is readOnly
    assert properties["amount"]["type"] == "number" and properties["amount"]["minimum"] == 0.01
    assert properties["reason"]["anyOf"][0] == {"type": "string", "maxLength": 200}
    assert properties["notify"]["anyOf"][0] == {"type": "boolean"}
    assert parameters(tools, "billing_searchInvoices")["required"] == ["text"]


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("billing_getInvoice", {}, "invoice_id: required, but missing"),
        ("billing_getInvoice", {"invoice_id": "seven"}, 'invoice_id: expected a whole number, got "seven"'),
        ("billing_getInvoice", {"invoice_id": "7"}, 'invoice_id: expected a whole number, got "7"'),
        ("billing_getInvoice", {"invoice_id": True}, "invoice_id: expected a whole number, got true"),
        ("billing_getInvoice", {"invoice_id": 7.0}, "invoice_id: expected a whole number, got 7.0"),
        ("billing_getInvoice", {"invoice_id": 7, "owner": "x"}, "owner: unknown argument (known: invoice_id)"),
        ("billing_listInvoices", {"status": "void"}, 'status: must be one of open, paid, not "void"'),
        ("billing_listInvoices", {"limit": 0}, "limit: Input should be greater than or equal to 1"),
        ("billing_listInvoices", {"limit": "5"}, 'limit: expected a whole number, got "5"'),
        ("billing_listInvoices", {"tag": "a"}, 'tag: expected a list, got "a"'),
        ("billing_listInvoices", {"tags": ["a"]}, "tags: unknown argument (known: status, limit, tag)"),
        ("billing_createRefund", {"invoice_id": 7}, "amount: required, but missing"),
        ("billing_createRefund", {"invoice_id": 7, "amount": 0}, "amount: Input should be greater than or equal"),
        ("billing_createRefund", {"invoice_id": 7, "amount": "10"}, 'amount: expected a number, got "10"'),
        ("billing_createRefund", {"invoice_id": 7, "amount": 1, "reason": "x" * 201}, "reason: String should have"),
        ("billing_createRefund", {"invoice_id": 7, "amount": 1, "notify": 1}, "notify: expected true or false, got 1"),
        ("billing_searchInvoices", {"paid": True}, "text: required, but missing"),
    ],
)
def test_arguments_are_validated_before_any_call_and_errors_name_the_field(tools, billing, name, args, expected):
    with pytest.raises(ToolArgumentsError) as caught:
        tools.get(name).validate(args)
    assert expected in str(caught.value)
    assert billing.calls() == []


def test_valid_arguments_pass(tools):
    tool = tools.get("billing_listInvoices")
    assert tool.normalise(tool.validate({"status": "open", "limit": 5, "tag": ["a"]})) == {
        "status": "open",
        "limit": 5,
        "tag": ["a"],
    }
    refund = tools.get("billing_createRefund")
    assert refund.normalise(refund.validate({"invoice_id": 7, "amount": 10})) == {"invoice_id": 7, "amount": 10.0}


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("billing_listInvoices", {}),
        ("billing_listInvoices", {"status": "paid", "limit": 100, "tag": ["a", "b"]}),
        ("billing_getInvoice", {"invoice_id": 7}),
        ("billing_delete_invoices_invoice_id", {"invoice_id": 7}),
        ("billing_createRefund", {"invoice_id": 7, "amount": 1, "reason": "late", "notify": False}),
        ("billing_searchInvoices", {"text": "acme", "paid": None}),
        ("billing_getDocument", {"name": "a b"}),
        ("billing_whoAmI", {}),
    ],
)
def test_normalised_arguments_validate_to_the_same_arguments(tools, name, args):
    tool = tools.get(name)
    valid = tool.validate(args)
    normalised = tool.normalise(valid)
    assert tool.validate(normalised) == valid
    assert tool.normalise(tool.validate(normalised)) == normalised
    assert None not in normalised.values()  # a parameter left out says as much as a null, and is what is sent


def test_get_and_head_are_safe_the_rest_needs_confirmation(tools):
    asks = {tool.name for tool in tools.all() if tool.requires_confirmation}
    assert asks == {"billing_createRefund", "billing_searchInvoices", "billing_delete_invoices_invoice_id"}


def test_the_config_says_which_operations_are_safe_asked_or_offered(make_registry):
    tools = make_registry(safe_operations=["searchInvoices"], confirm_operations=["getInvoice"])
    assert not tools.get("billing_searchInvoices").requires_confirmation
    assert tools.get("billing_getInvoice").requires_confirmation
    assert tools.get("billing_createRefund").requires_confirmation

    only = make_registry(operations=["getInvoice", "delete_invoices_invoice_id"], permission="auth.view_user")
    assert {tool.name for tool in only.all()} == {"billing_getInvoice", "billing_delete_invoices_invoice_id"}
    assert {tool.permission for tool in only.all()} == {"auth.view_user"}


# --- documents of every shape ----------------------------------------------------------------------


def document(paths: dict, **extra) -> dict:
    return {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": paths, **extra}


def test_names_services_use_that_python_cannot(make_services):
    doc = document(
        {
            "/items": {
                "post": {
                    "operationId": "find items/v2",
                    "parameters": [
                        {"name": "page-size", "in": "query", "schema": {"type": ["integer", "null"]}},
                        {"name": "$filter", "in": "query", "required": True, "schema": {"type": "string"}},
                        {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/merge-patch+json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["schema"],
                                    "properties": {"schema": {"type": "string"}, "class": {"type": "integer"}},
                                }
                            }
                        },
                    },
                }
            }
        }
    )
    [service] = make_services()
    [tool] = build_tools(service, doc)
    assert tool.name == "billing_find_items_v2"
    schema = tool.schema()["parameters"]
    assert set(schema["properties"]) == {"page-size", "$filter", "schema", "class"}  # the header is the call's
    assert sorted(schema["required"]) == ["$filter", "schema"]
    args = tool.validate({"page-size": 3, "$filter": "a eq 1", "schema": "v1", "class": 2})
    assert args.model_dump(by_alias=True) == {"page-size": 3, "$filter": "a eq 1", "schema": "v1", "class": 2}
    assert tool.normalise(args) == {"page-size": 3, "$filter": "a eq 1", "schema": "v1", "class": 2}
    assert tool.validate(tool.normalise(args)) == args
    # Python's names for them are taken too, and normalised to the service's.
    by_name = tool.validate({"page_size": 3, "filter": "a eq 1", "schema_": "v1"})
    assert tool.normalise(by_name) == {"page-size": 3, "$filter": "a eq 1", "schema": "v1"}
    with pytest.raises(ToolArgumentsError) as caught:
        tool.validate({"pagesize": 3, "$filter": "a eq 1", "schema": "v1"})
    assert str(caught.value) == (
        "Invalid arguments for billing_find_items_v2: "
        "pagesize: unknown argument (known: page-size, $filter, schema, class)"
    )


def test_other_bodies_are_one_body_argument(make_services):
    doc = document(
        {
            "/tags/{id}": {
                "put": {
                    "operationId": "setTags",
                    "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"type": "array", "items": {"type": "string"}}}},
                    },
                }
            }
        }
    )
    [service] = make_services()
    [tool] = build_tools(service, doc)
    schema = tool.schema()["parameters"]
    assert schema["required"] == ["id", "body"]
    assert schema["properties"]["body"]["type"] == "array"
    assert tool.requires_confirmation


def test_operations_that_cannot_be_tools_are_left_out_with_a_warning(make_services, caplog):
    doc = document(
        {
            "/upload": {
                "post": {
                    "operationId": "upload",
                    "requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {}}}},
                }
            },
            "/things/{id}": {"get": {"operationId": "getThing"}},
            "/remote": {"get": {"operationId": "remote", "parameters": [{"$ref": "other.yaml#/p"}]}},
            "/fine": {"get": {"operationId": "fine", "summary": "Fine."}},
        }
    )
    [service] = make_services()
    assert [tool.name for tool in build_tools(service, doc)] == ["billing_fine"]
    assert "POST /upload is left out: its request body is not JSON (multipart/form-data)" in caplog.text
    assert "GET /things/{id} is left out: the path parameters id are not described" in caplog.text
    assert "GET /remote is left out" in caplog.text


def test_names_that_collide_after_cleaning_are_an_error(make_services):
    doc = document({"/a": {"get": {"operationId": "get a"}}, "/b": {"get": {"operationId": "get_a"}}})
    [service] = make_services()
    with pytest.raises(ImproperlyConfigured, match="two operations make the tool name 'billing_get_a'"):
        build_tools(service, doc)


def test_tool_names_fit_every_provider():
    assert tool_name("billing", "x" * 100) == "billing_" + "x" * 56
    assert tool_name("billing", "läuft.gut") == "billing_l_uft_gut"


def test_nested_objects_and_recursive_schemas(make_services):
    doc = document(
        {
            "/nodes": {
                "post": {
                    "operationId": "addNode",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}},
                    },
                }
            }
        },
        components={
            "schemas": {
                "Node": {
                    "type": "object",
                    "required": ["label"],
                    "properties": {
                        "label": {"type": "string"},
                        "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
                        "meta": {"type": "object", "properties": {"weight": {"type": "number"}}},
                    },
                }
            }
        },
    )
    [service] = make_services()
    [tool] = build_tools(service, doc)
    args = tool.validate({"label": "root", "children": [{"label": "leaf"}], "meta": {"weight": 2}})
    assert args.model_dump(mode="json", by_alias=True, exclude_none=True) == {
        "label": "root",
        "children": [{"label": "leaf"}],
        "meta": {"weight": 2.0},
    }
    assert tool.normalise(args) == {"label": "root", "children": [{"label": "leaf"}], "meta": {"weight": 2.0}}
    assert tool.validate(tool.normalise(args)) == args
    with pytest.raises(ToolArgumentsError, match=r"children\.0\.label: required, but missing"):
        tool.validate({"label": "root", "children": [{}]})
    json.dumps(tool.schema())  # a schema the provider can be sent


def test_nested_objects_follow_the_service_s_additional_properties_and_enums_their_own_types(make_services):
    doc = document(
        {
            "/jobs": {
                "post": {
                    "operationId": "addJob",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["priority"],
                                    "properties": {
                                        "priority": {"type": "integer", "enum": [1, 2, 3]},
                                        "urgent": {"type": "boolean", "enum": [True]},
                                        "owner": {
                                            "type": "object",
                                            "additionalProperties": False,
                                            "properties": {"name": {"type": "string"}},
                                        },
                                        "labels": {"type": "object", "properties": {"team": {"type": "string"}}},
                                    },
                                }
                            }
                        },
                    },
                }
            }
        }
    )
    [service] = make_services()
    [tool] = build_tools(service, doc)
    args = tool.validate({"priority": 2, "urgent": True, "owner": {"name": "Ann"}, "labels": {"team": "a", "cost": 7}})
    normalised = tool.normalise(args)
    assert normalised == {"priority": 2, "urgent": True, "owner": {"name": "Ann"}, "labels": {"team": "a", "cost": 7}}
    assert tool.validate(normalised) == args

    def refusal(args: dict) -> str:
        with pytest.raises(ToolArgumentsError) as caught:
            tool.validate(args)
        return str(caught.value).removeprefix("Invalid arguments for billing_addJob: ")

    assert refusal({"priority": True}) == "priority: must be one of 1, 2, 3, not true"
    assert refusal({"priority": 2.0}) == "priority: must be one of 1, 2, 3, not 2.0"
    assert refusal({"priority": "2"}) == 'priority: must be one of 1, 2, 3, not "2"'
    assert refusal({"priority": 1, "urgent": 1}) == "urgent: must be true, not 1"
    assert (
        refusal({"priority": 1, "owner": {"name": "Ann", "email": "a@x"}}) == "owner.email: unknown key (known: name)"
    )
    assert refusal({"priority": 1, "owner": "Ann"}) == 'owner: expected an object, got "Ann"'


def test_operations_reads_every_method(make_services):
    from tests.http_service import OPENAPI

    found = operations(OPENAPI, service="billing", label="billing")
    assert {(op.method, op.path) for op in found} >= {("GET", "/invoices"), ("DELETE", "/invoices/{invoice_id}")}
