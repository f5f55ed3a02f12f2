"""A text-completion connection in the browser (issue 28): set one up from the llama.cpp preset, chat
through it, and read in Peek Prompt the raw text it was sent. Desktop and phone."""

import re

from playwright.sync_api import Page, expect

from tests.support.model_server import Reply


def test_set_up_a_text_completion_connection_and_chat_through_it(page: Page, live, models, shot):
    page.goto(f"{live.url}/connections/new?preset=llamacpp_text")
    form = page.locator("#connection-form")
    fieldset = form.locator("#text-completion")
    expect(fieldset).to_be_visible()
    expect(fieldset.get_by_label("Endpoint")).to_have_value("llamacpp")
    expect(fieldset.get_by_label("Instruct template")).to_have_value("ChatML")
    form.get_by_role("textbox", name="Base URL").fill(models.root_url)
    form.get_by_label("Model", exact=True).fill("test-model")
    fieldset.get_by_label("Instruct template").select_option("Llama 3 Instruct")
    fieldset.scroll_into_view_if_needed()
    shot("text-connection")
    # Another API type hides the fieldset; coming back shows it as it was.
    form.get_by_label("API type").select_option("openai")
    expect(fieldset).to_be_hidden()
    form.get_by_label("API type").select_option("text")
    expect(fieldset.get_by_label("Instruct template")).to_have_value("Llama 3 Instruct")
    form.get_by_role("button", name=re.compile("^Save")).click()
    expect(page.get_by_text("llama.cpp (text completion)").first).to_be_visible()

    with live.client() as c:
        aria = c.post("/api/characters", json={"name": "Aria", "first_mes": "Aria waves."}).json()
        chat_id = c.post("/api/chats", json={"character_ids": [aria["id"]]}).json()["id"]
    page.goto(f"{live.url}/chats/{chat_id}")
    models.script(Reply(text="*Aria tunes her lute.*", chunk_size=4))
    page.fill("#composer-input", "Play something.")
    page.click("#send-button")
    last = page.locator("article.msg-assistant").last
    expect(last).to_contain_text("Aria tunes her lute.")
    expect(last).to_be_in_viewport()
    sent = models.last_request.json["prompt"]
    assert sent.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    page.click("#peek-button")
    raw = page.locator("#peek-dialog #prompt-raw")
    expect(raw).to_contain_text("Raw prompt, as sent")
    expect(raw.locator("pre")).to_contain_text("<|start_header_id|>user<|end_header_id|>")
    shot("peek-raw")
