"""The confirmation card: approve, edit the arguments, reject with a reason."""

from __future__ import annotations

import json

from playwright.sync_api import expect

from conversations.models import PendingConfirmation
from tests.fake_provider import Reply

from .conftest import screenshot
from .test_chat import open_chat

DEPLOY = ("browser_deploy", {"dashboard": "Sales", "environment": "production"}, "call_deploy")


def ask_for_deployment(page, conversation, llm, *after: Reply):
    llm.script(Reply(text="I will deploy it.", tool_calls=[DEPLOY]), *after)
    open_chat(page, conversation)
    page.get_by_label("Message", exact=True).fill("Deploy the Sales dashboard to production")
    page.keyboard.press("Enter")
    card = page.locator(".confirm-card")
    expect(card).to_be_visible()
    return card


def test_approve_a_deployment_and_see_the_result(page, signed_in, conversation, llm):
    card = ask_for_deployment(page, conversation, llm, Reply(text="Sales is **live** in production."))
    expect(card.get_by_text("Approval needed")).to_be_visible()
    expect(card.locator(".tool-name")).to_have_text("browser_deploy")
    expect(card.locator(".confirm-args")).to_contain_text('"environment": "production"')
    tool = page.locator('.tool-card[data-tool-call-id="call_deploy"]')
    expect(tool).to_have_attribute("data-state", "waiting")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()  # the run waits for the owner, it is over
    screenshot(page, "confirmation-card")

    card.get_by_role("button", name="Approve").click()
    expect(card).to_be_hidden()
    expect(tool).to_have_attribute("data-state", "ok")
    tool.get_by_text("Output").click()
    expect(tool.locator(".tool-output pre")).to_contain_text('"deployed": "Sales"')
    expect(page.locator(".msg-assistant").last.locator("strong")).to_have_text("live")
    assert PendingConfirmation.objects.get(tool_call_id="call_deploy").status == "approved"


def test_edit_the_arguments_in_the_json_editor_then_run(page, signed_in, conversation, llm):
    card = ask_for_deployment(page, conversation, llm, Reply(text="Deployed to staging instead."))
    card.get_by_role("button", name="Edit arguments").click()
    editor = card.get_by_label("Arguments (JSON)")
    expect(editor).to_be_focused()
    editor.fill('{"dashboard": "Sales", "environment": ')
    expect(card.locator(".field-error")).to_contain_text("Not valid JSON")
    expect(card.get_by_role("button", name="Run with these arguments")).to_be_disabled()
    editor.fill(json.dumps({"dashboard": "Sales", "environment": "staging"}))
    expect(card.locator(".field-error")).to_be_empty()
    screenshot(page, "confirmation-edit")
    card.get_by_role("button", name="Run with these arguments").click()

    tool = page.locator('.tool-card[data-tool-call-id="call_deploy"]')
    expect(tool).to_have_attribute("data-state", "ok")
    expect(tool.locator(".tool-output pre")).to_contain_text('"environment": "staging"', use_inner_text=False)
    confirmation = PendingConfirmation.objects.get(tool_call_id="call_deploy")
    assert (confirmation.status, confirmation.edited_args["environment"]) == ("edited", "staging")


def test_reject_with_a_reason_the_model_reads(page, signed_in, conversation, llm):
    card = ask_for_deployment(page, conversation, llm, Reply(text="Understood, I will not deploy."))
    card.get_by_role("button", name="Reject").click()
    card.get_by_label("Reason (optional, the agent reads it)").fill("Not on a Friday")
    card.locator(".confirm-reject").get_by_role("button", name="Reject").click()

    tool = page.locator('.tool-card[data-tool-call-id="call_deploy"]')
    expect(tool).to_have_attribute("data-state", "rejected")
    expect(tool.locator(".tool-state")).to_have_text("Rejected")
    expect(page.locator(".msg-assistant").last).to_contain_text("I will not deploy")
    tool_message = next(m for m in llm.requests[-1].messages if m["role"] == "tool")
    assert "Not on a Friday" in tool_message["content"]

    # The server draws the same card after a reload.
    page.reload()
    expect(page.locator('.tool-card[data-tool-call-id="call_deploy"] .tool-state')).to_have_text("Rejected")
    expect(page.locator(".confirm-card")).to_have_count(0)


def test_a_pending_confirmation_is_shown_again_after_a_reload(page, signed_in, conversation, llm):
    ask_for_deployment(page, conversation, llm)
    page.reload()
    card = page.locator(".confirm-card")
    expect(card).to_be_visible()
    expect(page.locator('.tool-card[data-tool-call-id="call_deploy"]')).to_have_attribute("data-state", "waiting")
    # Card and tool card sit together.
    assert page.locator(".tool-card + .confirm-card").count() == 1
