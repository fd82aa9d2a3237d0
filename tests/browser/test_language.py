"""On the Russian page the server's own sentences are Russian too: how an answer ended, why a file was refused."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.fake_provider import Reply

from .conftest import screenshot
from .test_chat import open_chat

EXE = b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff\x00\x00" + bytes(46)


def test_the_russian_page_says_the_servers_sentences_in_russian(page, context, server, signed_in, conversation, llm):
    context.add_cookies([{"name": "django_language", "value": "ru", "url": server.http_url}])
    llm.script(Reply(status=401))
    open_chat(page, conversation)
    page.get_by_label("Сообщение", exact=True).fill("Привет")
    page.keyboard.press("Enter")

    failed = page.locator('.msg-assistant[data-status="failed"] .msg-status')
    said = "Провайдер модели отклонил учётные данные (HTTP 401)."
    expect(failed).to_contain_text("Ответ не удалось завершить.")
    expect(failed.locator(".msg-error")).to_have_text(said)
    screenshot(page, "failed-answer-russian")

    # Stored in English, it is said again in Russian when the page is drawn by the server.
    page.reload()
    expect(page.locator('.msg-assistant[data-status="failed"] .msg-error')).to_have_text(said)

    page.locator("#file-input").set_input_files(
        files=[{"name": "invoice.pdf", "mimeType": "application/pdf", "buffer": EXE}]
    )
    chip = page.locator("#attachments .chip", has_text="invoice.pdf")
    expect(chip.locator(".chip-status")).to_have_text(
        "не удалось прочитать: invoice.pdf выдаёт себя за другой формат: по имени это PDF-файл, а на деле — "
        "программа Windows (EXE). Поддерживаются: PDF, XLSX, CSV, JSON, PNG, JPEG."
    )
