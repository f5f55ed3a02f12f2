"""What the user waits for is in sight: an element wholly inside the window, and on top where it is drawn
(not scrolled away inside a panel, not under the sticky Save bar or the message box)."""

from __future__ import annotations

from playwright.sync_api import Error, Page

# The same test as static/app.js's inSight: the box inside the window, and the topmost element at its
# corners and centre inside it (a scroll container's clipping and an overlay both fail it).
IN_SIGHT = """el => {
  const r = el.getBoundingClientRect();
  if (!r.width || !r.height || r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth) return false;
  const pad = Math.min(8, r.width / 4, r.height / 4);  // inside rounded corners, which take no hits
  return [[r.left + pad, r.top + pad], [r.right - pad, r.top + pad], [r.left + pad, r.bottom - pad],
          [r.right - pad, r.bottom - pad], [(r.left + r.right) / 2, (r.top + r.bottom) / 2]]
    .every(([x, y]) => el.contains(document.elementFromPoint(x, y)));
}"""

_WHERE = """sel => {
  const el = document.querySelector(sel);
  if (!el) return "not on the page";
  const r = el.getBoundingClientRect();
  const top = document.elementFromPoint((r.left + r.right) / 2, Math.min(Math.max((r.top + r.bottom) / 2, 0), innerHeight - 1));
  return `at top ${Math.round(r.top)}, bottom ${Math.round(r.bottom)} of a ${innerHeight}-px window; `
    + `drawn over it: ${top ? top.tagName + "#" + top.id + "." + top.className : "nothing"}`;
}"""


def expect_in_sight(page: Page, selector: str, *, timeout: float = 15_000) -> None:
    """Wait until the element `selector` is in sight; fail saying where it is and what covers it."""
    try:
        page.wait_for_function(
            f"sel => {{ const el = document.querySelector(sel); return !!el && ({IN_SIGHT})(el); }}",
            arg=selector,
            timeout=timeout,
        )
    except Error as err:
        raise AssertionError(f"{selector} is not in sight: {page.evaluate(_WHERE, selector)}") from err


def in_sight(page: Page, selector: str) -> bool:
    """Whether the element `selector` is in sight now."""
    return page.evaluate(
        f"sel => {{ const el = document.querySelector(sel); return !!el && ({IN_SIGHT})(el); }}", selector
    )
