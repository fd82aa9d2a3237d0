// The form that edits a waiting call's arguments, without the DOM: its fields, read from the tool's JSON schema
// (a choice for an enum, a number for an integer, a checkbox for a boolean, text for a string), and what a person
// entered, checked against it in their language before it is sent. The server checks again.

import { fill, gettext, ngettext } from "./i18n.js";

/**
 * The fields of `schema` (the tool's parameters, a JSON Schema object), each with its value in `args`; null when
 * one of them is not a plain value (an object, a list, a choice of types), which only the JSON editor can edit.
 */
export function argumentFields(schema, args = {}) {
  const properties = schema?.properties;
  if (!properties || typeof properties !== "object" || !Object.keys(properties).length) return null;
  const required = new Set(schema.required || []);
  const fields = [];
  for (const [name, property] of Object.entries(properties)) {
    const field = plainField(name, property || {}, required.has(name));
    if (!field) return null;
    fields.push({ ...field, value: args?.[name] });
  }
  return fields;
}

function plainField(name, property, required) {
  let type = property;
  let nullable = false;
  if (Array.isArray(property.anyOf)) {
    const kinds = property.anyOf.filter((item) => item?.type !== "null");
    if (kinds.length !== 1) return null;
    nullable = kinds.length < property.anyOf.length;
    type = kinds[0];
  }
  const field = { name, required, nullable, description: property.description || "" };
  const choices = Array.isArray(type.enum) ? type.enum : "const" in type ? [type.const] : null;
  if (choices) {
    if (!choices.every((choice) => ["string", "number", "boolean"].includes(typeof choice))) return null;
    return { ...field, kind: "choice", choices };
  }
  if (type.type === "integer" || type.type === "number") {
    const { minimum, maximum, exclusiveMinimum, exclusiveMaximum } = type;
    return { ...field, kind: type.type, minimum, maximum, exclusiveMinimum, exclusiveMaximum };
  }
  if (type.type === "boolean") return { ...field, kind: "boolean" };
  if (type.type === "string") return { ...field, kind: "string", minLength: type.minLength, maxLength: type.maxLength };
  return null;
}

/**
 * What a field's control holds, checked: {value} (undefined leaves the argument out, so its default applies), or
 * {problem} in words. `entered`: a checkbox's state for a boolean that must be set; otherwise the control's text
 * (a choice's index, "true"/"false" for a boolean that may be left unset). `bad`: the browser could not read the
 * number typed.
 */
export function checkField(field, entered, bad = false) {
  if (field.kind === "boolean" && !field.nullable) return { value: Boolean(entered) };
  const text = typeof entered === "string" ? entered.trim() : "";
  if (bad) return { problem: numberProblem(field) };
  if (!text) return field.required ? { problem: gettext("This is required.") } : { value: undefined };
  if (field.kind === "choice") {
    const index = Number(text);
    return Number.isInteger(index) && index >= 0 && index < field.choices.length
      ? { value: field.choices[index] }
      : { problem: gettext("Choose one of the options.") };
  }
  if (field.kind === "boolean") return { value: text === "true" };
  if (field.kind === "integer" || field.kind === "number") return checkNumber(field, text);
  return checkText(field, text);
}

function numberProblem(field) {
  return field.kind === "integer" ? gettext("Enter a whole number.") : gettext("Enter a number.");
}

function checkNumber(field, text) {
  const value = Number(text);
  if (!Number.isFinite(value) || (field.kind === "integer" && !Number.isInteger(value))) {
    return { problem: numberProblem(field) };
  }
  const limits = [
    [field.minimum, (limit) => value < limit, gettext("At least %(limit)s.")],
    [field.exclusiveMinimum, (limit) => value <= limit, gettext("More than %(limit)s.")],
    [field.maximum, (limit) => value > limit, gettext("At most %(limit)s.")],
    [field.exclusiveMaximum, (limit) => value >= limit, gettext("Less than %(limit)s.")],
  ];
  for (const [limit, outside, words] of limits) {
    if (typeof limit === "number" && outside(limit)) return { problem: fill(words, { limit }) };
  }
  return { value };
}

function checkText(field, text) {
  const length = [...text].length;
  if (typeof field.minLength === "number" && length < field.minLength) {
    const words = ngettext("At least %(limit)s character.", "At least %(limit)s characters.", field.minLength);
    return { problem: fill(words, { limit: field.minLength }) };
  }
  if (typeof field.maxLength === "number" && length > field.maxLength) {
    const words = ngettext("At most %(limit)s character.", "At most %(limit)s characters.", field.maxLength);
    return { problem: fill(words, { limit: field.maxLength }) };
  }
  return { value: text };
}

/** The arguments from every field's check ({name: {value} or {problem}}): {args}, or {problems} by field name. */
export function collectArguments(checks) {
  const args = {};
  const problems = {};
  for (const [name, check] of Object.entries(checks)) {
    if (check.problem) problems[name] = check.problem;
    else if (check.value !== undefined) args[name] = check.value;
  }
  return Object.keys(problems).length ? { problems } : { args };
}
