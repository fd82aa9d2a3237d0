// Django's JavaScript catalogue (/jsi18n/) defines gettext and ngettext; without it (node's tests) the English stands.

export const gettext = (text) => (typeof globalThis.gettext === "function" ? globalThis.gettext(text) : text);

export const ngettext = (singular, plural, count) =>
  typeof globalThis.ngettext === "function" ? globalThis.ngettext(singular, plural, count) : count === 1 ? singular : plural;

export const fill = (text, values) => text.replace(/%\((\w+)\)s/g, (match, key) => (key in values ? String(values[key]) : match));
