"""Attaching files in a real browser, at desktop and phone sizes: pick files with the paperclip (by
keyboard), see their chips, a refused file says why, remove one, send, and the message shows the files,
which download."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.conftest import add_character, add_connection, new_chat
from tests.e2e.test_accessibility_browser import _violations
from tests.support.pdfs import make_pdf
from tests.support.sight import expect_in_sight
from tests.support.waiting import wait_for


def test_attach_send_show_and_download(page: Page, live, models, shot, tmp_path):
    with live.client() as api:
        add_connection(api, models)
        chat = new_chat(api, [add_character(api, "Aria")["id"]])
    pdf = tmp_path / "lighthouse log.pdf"
    pdf.write_bytes(make_pdf(["Day one: calm seas.", "Day two: fog.", "Day three: a storm."]))
    code = tmp_path / "greet.py"
    code.write_text('def greet(name):\n    return f"Hello, {name}!"\n')
    extra = tmp_path / "extra.txt"
    extra.write_text("not needed after all")
    photo = tmp_path / "photo.png"
    photo.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

    # Playwright turns file-chooser interception on with a message it does not wait for, when the
    # first "filechooser" listener is added: added inside expect_file_chooser, it raced the Enter below
    # (one phone run in many saw the chooser open before interception was on). A listener for the whole
    # page turns it on here, long before.
    page.on("filechooser", lambda _chooser: None)
    page.goto(f"{live.url}/chats/{chat['id']}")
    expect_in_sight(page, "#attach-button")
    # The paperclip is a button on the keyboard path: Enter on it opens the file picker.
    page.focus("#composer-input")
    page.keyboard.press("Shift+Tab")
    expect(page.locator("#attach-button")).to_be_focused()
    with page.expect_file_chooser() as chooser:
        page.keyboard.press("Enter")
    chooser.value.set_files([str(pdf), str(code), str(extra)])
    chips = page.locator("#composer-files .file-chip[data-attachment-id]")
    expect(chips).to_have_count(3)
    expect(page.locator("#composer-files")).to_contain_text("lighthouse log.pdf")
    expect(page.locator("#composer-files")).to_contain_text("3 pages")

    # A file that is neither a PDF nor text is refused, with the reason, and leaves no chip.
    page.set_input_files("#attach-input", str(photo))
    toast = page.locator(".toast", has_text="Sugo reads PDFs and text files; this file is neither.")
    expect(toast).to_be_visible()
    expect(page.locator("#composer-files .file-chip")).to_have_count(3)

    # Taking one back removes its chip and the upload.
    page.get_by_role("button", name="Remove extra.txt").click()
    expect(chips).to_have_count(2)
    page.fill("#composer-input", "Here is the log and the script.")
    expect_in_sight(page, "#composer-files")
    shot("composer")
    assert _violations(page) == set()  # axe: the paperclip, the chips and their Remove buttons

    page.click("#send-button")
    sent = page.locator("article.msg-user").last
    expect(sent.locator(".file-chip")).to_have_count(2)
    expect(sent).to_contain_text("lighthouse log.pdf")
    expect(sent).to_contain_text("greet.py")
    expect(page.locator("#composer-files")).to_be_hidden()
    expect(page.locator("article.msg-assistant").last).to_contain_text("Echo: Here is the log")
    expect_in_sight(page, f"#msg-{sent.get_attribute('data-id')} .file-chip")
    with live.client() as api:
        # The removed upload is gone (its DELETE went out without waiting), the others are sent.
        wait_for(lambda: len(api.get(f"/api/chats/{chat['id']}/attachments").json()) == 2)
        files = api.get(f"/api/chats/{chat['id']}/attachments").json()
    assert sorted(f["name"] for f in files) == ["greet.py", "lighthouse log.pdf"]
    assert all(f["message_id"] == int(sent.get_attribute("data-id")) for f in files)
    shot("message")
    assert _violations(page) == set()

    # The chip downloads the file as it was sent.
    with page.expect_download() as download:
        sent.locator(".file-chip", has_text="lighthouse log.pdf").click()
    assert download.value.suggested_filename == "lighthouse log.pdf"
    assert open(download.value.path(), "rb").read() == pdf.read_bytes()

    # After a reload the message still shows its files.
    page.reload()
    expect(page.locator("article.msg-user").last.locator(".file-chip")).to_have_count(2)
