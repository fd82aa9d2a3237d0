// Approvals: a call that waits for its owner shows, in its own card, Approve, Edit arguments (a form built from the
// tool's schema, or a JSON editor) and Reject with a reason. Once decided, the approval gives way to the record of
// the decision on the same card. One decision at a time is on its way; an error frame may answer it.

import { argumentFields, checkField, collectArguments } from "./arguments.js";
import { clone, findBy } from "./dom.js";
import { pretty } from "./format.js";
import { fill, gettext } from "./i18n.js";

const DECIDED = { approve: "approved", edit: "edited", reject: "rejected" };

export class Confirmations {
  constructor(list, cards, socket, username = "") {
    this.list = list;
    this.cards = cards;
    this.socket = socket;
    this.username = username; // who decides in this tab, for the record drawn before the server's own arrives
    this.pending = null; // the decision sent last, until its answer: {confirmationId, toolCallId, decision, args, reason}
  }

  find(confirmationId) {
    return findBy(this.list, ".confirm-card", "confirmation-id", confirmationId);
  }

  /** The open confirmations as `ready` lists them: the other approvals go, these are drawn. */
  sync(open) {
    const ids = new Set(open.map((item) => item.confirmation_id));
    for (const approval of this.list.querySelectorAll(".confirm-card")) {
      if (!ids.has(approval.dataset.confirmationId)) approval.remove();
    }
    for (const item of open) this.require(item);
  }

  /** A call waiting for the owner: `confirm_required`, or an open confirmation of `ready`. */
  require(item) {
    const card = this.cards.card(item.tool_call_id, item.tool, item.input);
    this.cards.setState(card, "waiting");
    this.render(card, item);
  }

  /**
   * The call went on (it started, ended, or was replaced): its approval goes. On the tab that decided, the record
   * of that decision is drawn at once if the server's has not come yet, and takes the focus.
   */
  remove(toolCallId) {
    const approval = findBy(this.list, ".confirm-card", "tool-call-id", toolCallId);
    const focused = Boolean(approval?.contains(document.activeElement));
    approval?.remove();
    const mine = this.pending?.toolCallId === toolCallId ? this.pending : null;
    if (!mine) return;
    this.pending = null;
    const card = this.cards.find(toolCallId);
    if (!card) return;
    const record =
      card.querySelector(".tool-decision") ||
      this.cards.setDecision(card, {
        status: DECIDED[mine.decision],
        decided_by: this.username,
        decided_at: new Date().toISOString(),
        args: mine.args,
        reason: mine.reason,
      });
    const active = document.activeElement;
    if (focused || !active || active === document.body) record?.focus();
  }

  render(card, item) {
    if (this.find(item.confirmation_id)) return;
    const approval = clone("confirm-card");
    const id = `confirm-${item.confirmation_id}`;
    const argsText = pretty(item.input ?? {});
    approval.dataset.confirmationId = item.confirmation_id;
    approval.dataset.toolCallId = item.tool_call_id;
    approval.setAttribute("aria-labelledby", id);
    approval.querySelector(".confirm-title").id = id;
    approval.querySelector(".tool-name").textContent = item.tool;
    approval.querySelector(".confirm-args").textContent = argsText;

    const editForm = approval.querySelector(".confirm-edit");
    const fields = argumentFields(item.schema, item.input);
    const readArguments = fields ? fieldsEditor(editForm, id, fields) : jsonEditor(editForm, id, argsText);
    const rejectForm = approval.querySelector(".confirm-reject");
    const reason = rejectForm.querySelector("input");
    reason.id = `${id}-reason`;
    rejectForm.querySelector("label").htmlFor = reason.id;

    approval.querySelector(".approve").addEventListener("click", () => this.decide(approval, "approve", {}, item.input));
    approval.querySelector(".edit").addEventListener("click", () => this.openPanel(approval, editForm));
    approval.querySelector(".reject").addEventListener("click", () => this.openPanel(approval, rejectForm));
    for (const cancel of approval.querySelectorAll(".cancel")) cancel.addEventListener("click", () => this.openPanel(approval, null));
    editForm.addEventListener("submit", (event) => {
      event.preventDefault();
      const args = readArguments();
      if (args) this.decide(approval, "edit", { args }, args);
    });
    rejectForm.addEventListener("submit", (event) => {
      event.preventDefault();
      const said = reason.value.trim();
      this.decide(approval, "reject", { reason: said }, item.input, said);
    });
    card.querySelector(".tool-head").after(approval);
  }

  openPanel(approval, panel) {
    for (const form of approval.querySelectorAll(".confirm-panel")) form.hidden = form !== panel;
    approval.querySelector(".edit").setAttribute("aria-expanded", String(panel?.classList.contains("confirm-edit") || false));
    approval.querySelector(".reject").setAttribute("aria-expanded", String(panel?.classList.contains("confirm-reject") || false));
    panel?.querySelector("textarea, input, select")?.focus();
  }

  /** `args` and `reason`: what the record says until the server's own arrives. */
  decide(approval, decision, extra, args, reason = "") {
    const error = approval.querySelector(".confirm-error");
    error.textContent = "";
    const sent = this.socket.send({ type: "confirm", confirmation_id: approval.dataset.confirmationId, decision, ...extra });
    if (!sent) {
      error.textContent = gettext("Not connected: your decision was not sent. Try again when the connection is back.");
      return;
    }
    const { confirmationId, toolCallId } = approval.dataset;
    this.pending = { confirmationId, toolCallId, decision, args, reason };
    // Its buttons wait for the answer, disabled: the focus waits on the approval rather than fall to the page.
    approval.focus();
    approval.classList.add("deciding");
    for (const button of approval.querySelectorAll("button")) button.disabled = true;
  }

  /**
   * An error frame while a decision is on its way answers that decision: it is shown on its approval, which can
   * be used again. True when nothing else is to be said (a refusal, which closes the socket, is said too).
   */
  failed(code, text, refused) {
    if (!this.pending) return false;
    const approval = this.find(this.pending.confirmationId);
    this.pending = null;
    if (!approval) return false;
    approval.classList.remove("deciding");
    for (const button of approval.querySelectorAll("button")) button.disabled = false;
    approval.querySelector(".confirm-error").textContent = text;
    if (code === "CHECKPOINT_EXPIRED") approval.classList.add("expired");
    return !refused;
  }
}

/** The edit panel as a JSON editor, checked as one types; gives back the reader of its arguments (null: not JSON). */
function jsonEditor(form, id, argsText) {
  const editor = form.querySelector("textarea");
  const error = form.querySelector(".json-field .field-error");
  const run = form.querySelector("button[type=submit]");
  editor.id = `${id}-args`;
  editor.rows = Math.min(Math.max(argsText.split("\n").length, 3), 16);
  editor.value = argsText;
  error.id = `${id}-json-error`;
  editor.setAttribute("aria-describedby", error.id);
  form.querySelector(".json-field label").htmlFor = editor.id;
  const check = () => {
    try {
      const value = JSON.parse(editor.value);
      if (value === null || typeof value !== "object" || Array.isArray(value)) throw new Error(gettext("the arguments must be a JSON object"));
      error.textContent = "";
      editor.removeAttribute("aria-invalid");
      run.disabled = false;
      return value;
    } catch (problem) {
      error.textContent = fill(gettext("Not valid JSON: %(problem)s"), { problem: problem.message });
      editor.setAttribute("aria-invalid", "true");
      run.disabled = true;
      return null;
    }
  };
  editor.addEventListener("input", check);
  return check;
}

/**
 * The edit panel as a form, one control per argument; gives back the reader of its arguments, which shows what is
 * wrong next to each field and focuses the first, and gives null, while anything is.
 */
function fieldsEditor(form, id, fields) {
  form.querySelector(".json-field").remove();
  const fieldset = form.querySelector(".arg-fields");
  fieldset.hidden = false;
  const rows = fields.map((field, index) => argumentRow(field, `${id}-arg-${index}`));
  fieldset.append(...rows.map((row) => row.node));
  return () => {
    const checks = Object.fromEntries(rows.map((row) => [row.field.name, row.check()]));
    const { args, problems = {} } = collectArguments(checks);
    for (const row of rows) row.show(problems[row.field.name] || "");
    rows.find((row) => problems[row.field.name])?.control.focus();
    return args ?? null;
  };
}

function argumentRow(field, id) {
  const node = document.createElement("div");
  node.className = `arg-field arg-${field.kind}`;
  node.classList.toggle("required", field.required);
  const label = document.createElement("label");
  const name = document.createElement("code");
  name.textContent = field.name;
  label.append(name);
  label.htmlFor = id;
  const checkbox = field.kind === "boolean" && !field.nullable;
  const control = checkbox ? checkboxControl(field) : field.kind === "choice" || field.kind === "boolean" ? selectControl(field) : inputControl(field);
  control.id = id;
  control.required = field.required;
  if (checkbox) label.prepend(control, " ");
  node.append(label);
  if (!checkbox) node.append(control);
  const described = [];
  if (field.description) {
    const hint = document.createElement("p");
    hint.className = "hint";
    hint.id = `${id}-hint`;
    hint.textContent = field.description;
    node.append(hint);
    described.push(hint.id);
  }
  const error = document.createElement("p");
  error.className = "field-error";
  error.id = `${id}-error`;
  error.setAttribute("aria-live", "polite");
  node.append(error);
  control.setAttribute("aria-describedby", [...described, error.id].join(" "));

  const check = () => checkField(field, checkbox ? control.checked : control.value, Boolean(control.validity?.badInput));
  const show = (problem) => {
    error.textContent = problem;
    if (problem) control.setAttribute("aria-invalid", "true");
    else control.removeAttribute("aria-invalid");
  };
  // A problem is said on Run; once mended as one types it goes. Said on leaving the field instead, it would move
  // the button away from under a click that is leaving it for the button.
  control.addEventListener("input", () => {
    if (error.textContent && !check().problem) show("");
  });
  return { node, control, field, check, show };
}

function checkboxControl(field) {
  const control = document.createElement("input");
  control.type = "checkbox";
  control.checked = field.value === true;
  return control;
}

function selectControl(field) {
  const control = document.createElement("select");
  const options = field.kind === "choice"
    ? field.choices.map((choice, index) => [String(index), String(choice), choice === field.value])
    : [["true", gettext("yes"), field.value === true], ["false", gettext("no"), field.value === false]];
  const chosen = options.some(([, , selected]) => selected);
  if (!field.required || !chosen) options.unshift(["", field.required ? gettext("Choose…") : gettext("(not set)"), !chosen]);
  for (const [value, text, selected] of options) control.append(new Option(text, value, selected, selected));
  return control;
}

function inputControl(field) {
  const control = document.createElement("input");
  control.autocomplete = "off";
  if (field.kind === "string") {
    control.type = "text";
    if (typeof field.maxLength === "number") control.maxLength = field.maxLength;
  } else {
    control.type = "number";
    control.step = field.kind === "integer" ? "1" : "any";
    if (typeof field.minimum === "number") control.min = String(field.minimum);
    if (typeof field.maximum === "number") control.max = String(field.maximum);
  }
  if (field.value !== undefined && field.value !== null) control.value = String(field.value);
  return control;
}
