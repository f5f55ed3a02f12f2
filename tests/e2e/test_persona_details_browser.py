"""The persona's details every character reads (pronouns, form of address; the time zone once personas
keep one) on the Personas page, at desktop and phone sizes: set by hand, saved, read back, a value too
long refused with its sentence where the user looks and nothing stored; a new persona gets them too."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.e2e.test_feedback_browser import seen


def _persona(live, name: str) -> dict:
    with live.client() as c:
        return next(p for p in c.get("/api/personas").json() if p["name"] == name)


def test_persona_details_are_set_by_hand_and_a_bad_one_is_refused_in_sight(page: Page, live, shot):
    with live.client() as c:
        c.post("/api/personas", json={"name": "Mara", "description": "A harbour pilot."})
    page.goto(live.url + "/personas")
    card = page.locator(".persona-card").first
    card.get_by_label("Pronouns").fill("she/her")
    card.get_by_label("Form of address").fill("formal")
    card.get_by_label("Time zone").fill("Europe/Lisbon")
    card.get_by_role("button", name="Save").click()
    status = page.locator("#persona-list").get_by_role("status")
    expect(status).to_have_text("Saved.")
    assert seen(status) == "seen"
    card = page.locator(".persona-card").first
    expect(card.get_by_label("Pronouns")).to_have_value("she/her")
    expect(card.get_by_label("Form of address")).to_have_value("formal")
    mara = _persona(live, "Mara")
    assert (mara["pronouns"], mara["form_of_address"]) == ("she/her", "formal")
    shot("details-saved")

    card.get_by_label("Form of address").fill(
        "formal, with the full title every single time, please and thanks"
    )
    card.get_by_role("button", name="Save").click()
    toast = page.locator("#toasts .toast-error")
    expect(toast).to_have_text("Form of address is 64 characters long; at most 60 are kept.")
    expect(toast).to_be_in_viewport()
    shot("details-refused")
    assert _persona(live, "Mara")["form_of_address"] == "formal"

    form = page.locator("#new-persona-form")
    form.get_by_label("Name").fill("Edda")
    form.get_by_label("Pronouns").fill("they/them")
    form.get_by_role("button", name="Add persona").click()
    expect(page.locator("#new-persona-form").get_by_role("status")).to_have_text("Added Edda.")
    expect(page.locator(".persona-card")).to_have_count(2)
    assert _persona(live, "Edda")["pronouns"] == "they/them"
    expect(page.locator("#new-persona-form").get_by_label("Pronouns")).to_have_value("")
    shot("persona-added")
