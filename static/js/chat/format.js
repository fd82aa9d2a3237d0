// Words and numbers for the page, without the DOM: JSON for reading, file sizes, the browser's check of a file.

import { fill, gettext } from "./i18n.js";

/** JSON indented for reading (a string that is JSON is parsed first); anything else as text. */
export function pretty(value) {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

/** A moment as lists and records show it, in `lang`: the time alone on its day, the day and time in its year, the whole
 * date before. */
export function moment(when, now, lang) {
  const thisYear = when.getFullYear() === now.getFullYear();
  const today = thisYear && when.getMonth() === now.getMonth() && when.getDate() === now.getDate();
  const parts = today
    ? { timeStyle: "short" }
    : thisYear
      ? { month: "short", day: "numeric", hour: "numeric", minute: "2-digit" }
      : { dateStyle: "medium", timeStyle: "short" };
  return new Intl.DateTimeFormat(lang, parts).format(when);
}

export function formatSize(bytes) {
  if (bytes < 1024) return fill(gettext("%(n)s B"), { n: bytes });
  if (bytes < 1024 * 1024) return fill(gettext("%(n)s KB"), { n: Math.round(bytes / 1024) });
  return fill(gettext("%(n)s MB"), { n: (bytes / (1024 * 1024)).toFixed(1) });
}

/** Why a file is refused before uploading it ({name, size} against the page's upload rules), or "". */
export function fileProblem(file, rules) {
  const dot = file.name.lastIndexOf(".");
  const extension = dot >= 0 ? file.name.slice(dot).toLowerCase() : "";
  const { maxBytes } = rules;
  if (!(rules.extensions || []).includes(extension)) {
    return fill(gettext("%(name)s: this kind of file is not supported. Attach PDF, XLSX, CSV, JSON, PNG or JPEG files."), { name: file.name });
  }
  if (file.size > maxBytes) {
    return fill(gettext("%(name)s is larger than %(limit)s MB."), { name: file.name, limit: Math.round(maxBytes / (1024 * 1024)) });
  }
  if (file.size === 0) return fill(gettext("%(name)s is empty."), { name: file.name });
  return "";
}

export function newClientId() {
  if (globalThis.crypto && typeof crypto.randomUUID === "function") return crypto.randomUUID();
  return `c-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 12)}`;
}
