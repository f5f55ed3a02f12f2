"""Issue 11 item 3: Test connection needs no name, and the models it lists become a pickable list
under the Model field. Desktop and phone."""

from playwright.sync_api import Page, expect


def test_test_connection_without_a_name_fills_the_model_list(page: Page, live, models, shot):
    page.goto(live.url + "/connections/new?preset=custom")
    page.fill("input[name=name]", "")
    page.fill("input[name=base_url]", models.base_url)
    page.fill("input[name=model]", "")
    page.get_by_role("button", name="Test connection").click()
    result = page.locator("#test-result")
    expect(result.locator(".notice-ok")).to_be_visible()
    expect(result).not_to_contain_text("Name")
    options = page.locator("datalist#model-options option")
    expect(options).to_have_count(len(models.models))
    assert options.evaluate_all("els => els.map(e => e.value)") == list(models.models)
    shot("models-listed")
    # Picking one from the list fills the field (the list is the datalist the input names).
    assert page.locator("input[name=model]").get_attribute("list") == "model-options"
    with live.client() as c:
        assert c.get("/api/connections").json() == []  # testing saved nothing
