// Django's admin, fixed where axe-core finds it wrong and a stylesheet cannot help (tests/browser/test_accessibility.py).
(() => {
  // A table of inline rows scrolls sideways on a narrow screen (the admin's responsive.css): the keyboard reaches it
  // to scroll, as it does the chat's code blocks and tables, even when its rows have nothing to focus (read-only).
  // Its fields are named by their column's header, which the table does not tie to them; a row added with "Add
  // another" is a copy of one named here.
  for (const group of document.querySelectorAll('.inline-group[data-inline-type="tabular"]')) {
    group.tabIndex = 0;
    group.setAttribute("role", "region");
    group.setAttribute("aria-labelledby", group.id.replace(/-group$/, "-heading"));
    const headers = Array.from(group.querySelectorAll("thead th"), (header) => header.textContent.trim());
    for (const row of group.querySelectorAll("tbody tr.form-row")) {
      Array.from(row.cells).forEach((cell, column) => {
        for (const field of cell.querySelectorAll("input:not([type=hidden]), select, textarea")) {
          if (headers[column] && !field.labels.length) field.setAttribute("aria-label", headers[column]);
        }
      });
    }
  }
  // A two-box selector (filter_horizontal, drawn on load by SelectFilter2.js) names its search icons with aria-label
  // on a plain span, which ARIA forbids: an icon with a name is an image. Watched for, as inline rows add more.
  const name = () => {
    for (const icon of document.querySelectorAll(".search-label-icon[aria-label]:not([role])")) icon.setAttribute("role", "img");
  };
  new MutationObserver(name).observe(document.documentElement, { childList: true, subtree: true });
})();
