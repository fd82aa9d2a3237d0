// The form that edits a waiting call's arguments: its fields from the tool's JSON schema, and what a person entered,
// checked before it is sent (in English: node has no translation catalogue).
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { argumentFields, checkField, collectArguments } from "../../static/js/chat/arguments.js";

// As pydantic writes it for: dashboard_id: int = Field(ge=1, le=999); environment: Literal["staging", "production"];
// notify: bool = True; note: str = Field("", max_length=20); status: Literal["draft", "published"] | None = None.
const SCHEMA = {
  type: "object",
  additionalProperties: false,
  required: ["dashboard_id", "environment"],
  properties: {
    dashboard_id: { type: "integer", minimum: 1, maximum: 999, title: "Dashboard Id", description: "The dashboard's id." },
    environment: { enum: ["staging", "production"], type: "string", title: "Environment" },
    notify: { type: "boolean", default: true, title: "Notify" },
    note: { type: "string", maxLength: 20, default: "", title: "Note" },
    status: { anyOf: [{ enum: ["draft", "published"], type: "string" }, { type: "null" }], default: null },
  },
};
const ASKED = { dashboard_id: 42, environment: "production", notify: true, note: "" };

const field = (name) => argumentFields(SCHEMA, ASKED).find((item) => item.name === name);

describe("fields from the schema", () => {
  test("an enum is a choice, an integer a number, a boolean a checkbox, a string text, each with its value", () => {
    const fields = argumentFields(SCHEMA, ASKED);
    assert.deepEqual(
      fields.map(({ name, kind, required, value }) => [name, kind, required, value]),
      [
        ["dashboard_id", "integer", true, 42],
        ["environment", "choice", true, "production"],
        ["notify", "boolean", false, true],
        ["note", "string", false, ""],
        ["status", "choice", false, undefined],
      ],
    );
    assert.deepEqual([fields[0].minimum, fields[0].maximum, fields[0].description], [1, 999, "The dashboard's id."]);
    assert.deepEqual(fields[1].choices, ["staging", "production"]);
    assert.equal(fields[4].nullable, true);
  });

  test("an object, a list or a choice of types is left to the JSON editor", () => {
    const withNested = (property) => ({ type: "object", properties: { id: { type: "integer" }, extra: property } });
    assert.equal(argumentFields(withNested({ type: "array", items: { type: "string" } })), null);
    assert.equal(argumentFields(withNested({ $ref: "#/$defs/Filter" })), null);
    assert.equal(argumentFields(withNested({ type: "object" })), null);
    assert.equal(argumentFields(withNested({ anyOf: [{ type: "integer" }, { type: "string" }] })), null);
    assert.equal(argumentFields({ type: "object", properties: {} }), null);
    assert.equal(argumentFields(null), null);
  });
});

describe("checking what was entered", () => {
  test("numbers: whole, within the limits, and never text", () => {
    const id = field("dashboard_id");
    assert.deepEqual(checkField(id, "7"), { value: 7 });
    assert.deepEqual(checkField(id, "0"), { problem: "At least 1." });
    assert.deepEqual(checkField(id, "1000"), { problem: "At most 999." });
    assert.deepEqual(checkField(id, "1.5"), { problem: "Enter a whole number." });
    assert.deepEqual(checkField(id, "", true), { problem: "Enter a whole number." });
    assert.deepEqual(checkField({ ...id, kind: "number", exclusiveMinimum: 0, minimum: undefined }, "0"), {
      problem: "More than 0.",
    });
  });

  test("a required field cannot be left empty; an optional one is left out, so its default applies", () => {
    assert.deepEqual(checkField(field("dashboard_id"), "  "), { problem: "This is required." });
    assert.deepEqual(checkField(field("environment"), ""), { problem: "This is required." });
    assert.deepEqual(checkField(field("note"), ""), { value: undefined });
    assert.deepEqual(checkField(field("status"), ""), { value: undefined });
  });

  test("a choice is one of the enum's values, a checkbox true or false, text within its length", () => {
    assert.deepEqual(checkField(field("environment"), "0"), { value: "staging" });
    assert.deepEqual(checkField(field("environment"), "5"), { problem: "Choose one of the options." });
    assert.deepEqual(checkField(field("notify"), false), { value: false });
    assert.deepEqual(checkField(field("note"), "ship it"), { value: "ship it" });
    assert.deepEqual(checkField(field("note"), "x".repeat(21)), { problem: "At most 20 characters." });
  });

  test("the arguments, or every problem by field", () => {
    assert.deepEqual(
      collectArguments({ dashboard_id: { value: 7 }, environment: { value: "staging" }, note: { value: undefined } }),
      { args: { dashboard_id: 7, environment: "staging" } },
    );
    assert.deepEqual(collectArguments({ dashboard_id: { problem: "At least 1." }, environment: { value: "staging" } }), {
      problems: { dashboard_id: "At least 1." },
    });
  });
});
