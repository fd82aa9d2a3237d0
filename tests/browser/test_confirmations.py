"""A dangerous call is one card: it asks for approval (approve, edit the arguments in a form or as JSON, reject
with a reason), and once decided keeps the record of who decided, when and with which arguments."""

from __future__ import annotations

import json
import re

from playwright.sync_api import expect

from conversations import services
from conversations.models import PendingConfirmation
from tests.fake_provider import Reply

from .conftest import screenshot
from .test_chat import open_chat

DEPLOY = ("browser_deploy", {"dashboard": "Sales", "environment": "production"}, "call_deploy")
RELEASE = ("browser_release", {"dashboard_id": 42, "environment": "production"}, "call_release")
CONFIGURE = ("browser_configure", {"dashboard": "Sales", "limits": {"rows": 100}}, "call_configure")
# "Approved by alice at <the browser's local time>, with these arguments:"
AT = r" at \S.+"


def ask(page, conversation, llm, call, *after: Reply):
    """The model asks for `call`; its card, once it waits for the owner."""
    llm.script(Reply(text="I will do it.", tool_calls=[call]), *after)
    open_chat(page, conversation)
    page.get_by_label("Message", exact=True).fill("Go ahead")
    page.keyboard.press("Enter")
    card = page.locator(f'.tool-card[data-tool-call-id="{call[2]}"]')
    expect(card.locator(".confirm-card")).to_be_visible()
    return card


def edit(page, conversation, llm, call, answer: str):
    """The model asks for `call`, and the owner opens Edit arguments: its card and the approval in it."""
    card = ask(page, conversation, llm, call, Reply(text=answer))
    approval = card.locator(".confirm-card")
    approval.get_by_role("button", name="Edit arguments").click()
    return card, approval


def test_a_card_that_arrives_at_the_end_of_a_long_conversation_is_scrolled_into_view(
    page, signed_in, conversation, llm
):
    for n in range(6):
        services.message_append(conversation=conversation, role="user", content=f"Question {n}")
        services.message_append(conversation=conversation, role="assistant", content=f"Answer {n}.\n\n" * 4)

    card = ask(page, conversation, llm, DEPLOY)

    expect(card.locator(".confirm-card").get_by_role("button", name="Approve")).to_be_in_viewport()


def test_approve_and_the_card_keeps_the_record(page, signed_in, conversation, llm):
    card = ask(page, conversation, llm, DEPLOY, Reply(text="Sales is **live** in production."))
    expect(card).to_have_attribute("data-state", "waiting")
    expect(card.locator(".tool-state")).to_have_text("Waiting for your approval")
    approval = card.locator(".confirm-card")
    expect(approval.get_by_text("Approval needed")).to_be_visible()
    expect(approval.locator(".confirm-args")).to_contain_text('"environment": "production"')
    expect(page.locator(".tool-card")).to_have_count(1)  # one card for the call, the approval inside it
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()  # the run waits for the owner, it is over
    screenshot(page, "confirmation-card")

    approval.get_by_role("button", name="Approve").click()
    expect(approval).to_have_count(0)
    record = card.locator(".tool-decision")
    expect(record.locator(".decision-line")).to_have_text(
        re.compile(rf"^Approved by alice{AT}, with these arguments:$")
    )
    expect(record.locator(".decision-args")).to_contain_text('"environment": "production"')
    expect(record).to_be_focused()
    expect(card).to_have_attribute("data-state", "ok")
    expect(page.locator(".msg-assistant").last.locator("strong")).to_have_text("live")
    expect(record).to_be_focused()  # still, once the server's own record has replaced the page's
    screenshot(page, "confirmation-approved")
    card.get_by_text("Output").click()
    expect(card.locator(".tool-output pre")).to_contain_text('"deployed": "Sales"')
    confirmation = PendingConfirmation.objects.get(tool_call_id="call_deploy")
    assert confirmation.status == "approved" and confirmation.decided_by == signed_in

    page.reload()
    line = page.locator('.tool-card[data-tool-call-id="call_deploy"] .decision-line')
    expect(line).to_have_text(re.compile(rf"^Approved by alice{AT}, with these arguments:$"))


def test_edit_the_arguments_in_a_form_checked_before_it_is_sent(page, signed_in, conversation, llm):
    card, approval = edit(page, conversation, llm, RELEASE, "Released to staging instead.")
    dashboard = approval.get_by_label("dashboard_id")
    expect(dashboard).to_be_focused()
    expect(dashboard).to_have_attribute("type", "number")
    expect(dashboard).to_have_value("42")
    environment = approval.get_by_label("environment")
    expect(environment.locator("option")).to_have_text(["staging", "production"])
    expect(environment).to_have_value("1")
    expect(approval.get_by_label("notify")).to_be_checked()
    expect(approval.get_by_label("note")).to_have_value("")
    expect(approval.get_by_text("Where to release it.")).to_be_visible()  # the schema's description

    dashboard.fill("0")
    approval.get_by_label("note").fill("")
    approval.get_by_role("button", name="Run with these arguments").click()
    expect(approval.locator(".arg-integer .field-error")).to_have_text("At least 1.")
    expect(dashboard).to_have_attribute("aria-invalid", "true")
    expect(dashboard).to_be_focused()
    screenshot(page, "confirmation-edit-form")
    assert PendingConfirmation.objects.get(tool_call_id="call_release").status == "pending"  # nothing was sent

    dashboard.fill("7")
    environment.select_option("staging")
    approval.get_by_label("notify").uncheck()
    approval.get_by_role("button", name="Run with these arguments").click()

    record = card.locator(".tool-decision")
    expect(record.locator(".decision-line")).to_have_text(re.compile(rf"^Edited by alice{AT}, to these arguments:$"))
    expect(record).to_be_focused()
    expect(card).to_have_attribute("data-state", "ok")
    expect(record.locator(".decision-args")).to_contain_text('"environment": "staging"')
    expect(record.locator(".decision-args")).to_contain_text('"notify": false')
    confirmation = PendingConfirmation.objects.get(tool_call_id="call_release")
    assert confirmation.status == "edited"
    assert confirmation.edited_args == {"dashboard_id": 7, "environment": "staging", "notify": False, "note": ""}

    page.reload()
    record = page.locator('.tool-card[data-tool-call-id="call_release"] .tool-decision')
    expect(record.locator(".decision-line")).to_have_text(re.compile(rf"^Edited by alice{AT}, to these arguments:$"))
    expect(record.locator(".decision-args")).to_contain_text('"dashboard_id": 7')
    screenshot(page, "confirmation-edited-after-reload")


def test_an_object_argument_is_edited_as_json(page, signed_in, conversation, llm):
    card, approval = edit(page, conversation, llm, CONFIGURE, "Limits set.")
    editor = approval.get_by_label("Arguments (JSON)")
    expect(editor).to_be_focused()
    editor.fill('{"dashboard": "Sales", "limits": ')
    expect(approval.locator(".field-error")).to_contain_text("Not valid JSON")
    expect(approval.get_by_role("button", name="Run with these arguments")).to_be_disabled()
    editor.fill(json.dumps({"dashboard": "Sales", "limits": {"rows": "many"}}))
    expect(approval.locator(".field-error")).to_be_empty()
    approval.get_by_role("button", name="Run with these arguments").click()
    # The server holds an edit to the tool's contract, and says which field does not fit.
    expect(approval.locator(".confirm-error")).to_contain_text("limits.rows: expected a whole number")
    expect(approval.get_by_role("button", name="Approve")).to_be_enabled()

    editor.fill(json.dumps({"dashboard": "Sales", "limits": {"rows": 500}}))
    approval.get_by_role("button", name="Run with these arguments").click()
    expect(card).to_have_attribute("data-state", "ok")
    expect(card.locator(".tool-decision .decision-args")).to_contain_text('"rows": 500')
    expect(card.locator(".tool-output pre")).to_contain_text('"rows": 500', use_inner_text=False)


def test_reject_with_a_reason_and_the_card_says_who_and_why(page, signed_in, conversation, llm):
    card = ask(page, conversation, llm, DEPLOY, Reply(text="Understood, I will not deploy."))
    approval = card.locator(".confirm-card")
    approval.get_by_role("button", name="Reject").click()
    approval.get_by_label("Reason (optional, the agent reads it)").fill("not <b>today</b>")
    approval.locator(".confirm-reject").get_by_role("button", name="Reject").click()

    record = card.locator(".tool-decision")
    expect(record.locator(".decision-line")).to_have_text(re.compile(rf"^Rejected by alice{AT}: not <b>today</b>$"))
    expect(record).to_be_focused()
    expect(card).to_have_attribute("data-state", "rejected")
    expect(card.locator(".tool-state")).to_have_text("Rejected")
    expect(card.get_by_text("Output")).to_be_hidden()  # no "Error: rejected by the user…"
    expect(page.locator(".msg-assistant").last).to_contain_text("I will not deploy")
    tool_message = next(m for m in llm.requests[-1].messages if m["role"] == "tool")
    assert "not <b>today</b>" in tool_message["content"]
    screenshot(page, "confirmation-rejected")

    # The server draws the same card after a reload.
    page.reload()
    card = page.locator('.tool-card[data-tool-call-id="call_deploy"]')
    expect(card.locator(".tool-state")).to_have_text("Rejected")
    expect(card.locator(".decision-line")).to_have_text(re.compile(rf"^Rejected by alice{AT}: not <b>today</b>$"))
    expect(page.locator(".confirm-card")).to_have_count(0)


def test_a_new_message_instead_of_a_decision_is_recorded_on_the_card(page, signed_in, conversation, llm):
    card = ask(page, conversation, llm, DEPLOY, Reply(text="All right, something else then."))
    page.get_by_label("Message", exact=True).fill("Never mind")
    page.keyboard.press("Enter")
    expect(card.locator(".confirm-card")).to_have_count(0)
    expect(card.locator(".decision-line")).to_have_text("Replaced by a new message before anyone decided: not run.")
    expect(card).to_have_attribute("data-state", "cancelled")
    page.reload()
    expect(page.locator(".decision-line")).to_have_text("Replaced by a new message before anyone decided: not run.")


def test_a_pending_confirmation_is_shown_again_after_a_reload(page, signed_in, conversation, llm):
    ask(page, conversation, llm, DEPLOY)
    page.reload()
    card = page.locator('.tool-card[data-tool-call-id="call_deploy"]')
    expect(card.locator(".confirm-card")).to_be_visible()
    expect(card).to_have_attribute("data-state", "waiting")
    expect(page.locator(".tool-card")).to_have_count(1)
