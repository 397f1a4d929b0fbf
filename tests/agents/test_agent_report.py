"""`assay report` on agent runs, opened in Debian's chromium: each sample's transcript turn by
turn (messages, calls with their arguments, tool results, errors, tokens, seconds), the
agent-loop filters, and model and tool text that tries to be HTML or script left inert.

The expectations come from the samples files the runs wrote, never from the page's data.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from calc_agent import ScriptedCalculator, write_task
from fixtures.provider_fakes import FakeProviders

from assay.cli.main import main

SCRIPT = '</script><script>window.__pwned = "script"</script>'
IMAGE = '<img src=x onerror="window.__pwned = &quot;img&quot;">'
LOOP_TURNS = 60
"""Turns of the doc that never stops calling: its 121 records are more than the page draws
at once (100)."""


class HostileCalculator(ScriptedCalculator):
    """Doc a=1 answers with markup instead of the number; doc a=2 adds two strings of markup
    (the tool's result is markup too); doc a=3 sends arguments that are not JSON and hold a
    closing script tag, then gives up; doc a=4 calls add until the turn limit."""

    def calls(self, body: dict[str, Any]) -> list[tuple[str, Any]] | None:
        a, b, _, results = self._turn(body)
        if a == 2 and not results:
            return [("add", {"a": SCRIPT, "b": IMAGE})]
        if a == 2:
            return None
        if a == 3 and not results:
            return [("add", '{"a": "' + SCRIPT)]
        if a == 3:
            return None
        if a == 4:
            return [("add", {"a": a, "b": b})]
        return super().calls(body)

    def reply(self, body: dict[str, Any]) -> tuple[str, str | None]:
        a, _, _, results = self._turn(body)
        if a == 1 and len(results) >= 2:
            return IMAGE + SCRIPT, None
        return (results[-1] if results else ""), None


def _samples(out: Path) -> dict[int, dict[str, Any]]:
    (path,) = out.glob("samples_calc_agent*.jsonl")
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return {r["doc_id"]: r for r in records}


@pytest.mark.slow
def test_transcripts_render_turn_by_turn_filter_and_stay_inert(tmp_path):
    from playwright.sync_api import sync_playwright

    tasks = tmp_path / "tasks"
    write_task(tasks, n_docs=4, max_turns=LOOP_TURNS)
    runs = {"right": ScriptedCalculator(), "hostile": HostileCalculator()}
    for label, script in runs.items():
        with FakeProviders(reply=script.reply, calls=script.calls) as fake:
            args = [
                "run", "--model", "openai-chat", "--model-args",
                f"model=fake,base_url={fake.openai_url}", "--tasks", "calc_agent",
                "--include-path", str(tasks), "--output-dir", str(tmp_path / label),
                "--log-samples", "--no-progress",
            ]  # fmt: skip
            assert main(args) == 0
    page = tmp_path / "report.html"
    assert (
        main(["report", str(tmp_path / "right"), str(tmp_path / "hostile"), "-o", str(page)]) == 0
    )
    hostile = _samples(tmp_path / "hostile")
    text = page.read_text(encoding="utf-8")
    assert "window.__pwned" not in text  # the samples travel compressed, never as markup

    chromium = shutil.which("chromium")
    assert chromium, "chromium is not installed: `make test` installs Debian's chromium package"
    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        tab = browser.new_page()
        tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.goto(page.as_uri())
        tab.wait_for_selector('body[data-ready="1"]', timeout=120_000)

        def shown(how: str) -> list[int]:
            tab.select_option("#f-agent", how)
            return sorted(int(d) for d in tab.eval_on_selector_all(
                "details.sample", "ds => ds.map(d => d.dataset.doc)"
            ))  # fmt: skip

        def open_sample(doc: int) -> None:
            # The body is built by the details element's toggle event, which fires after the
            # click returns: wait for it rather than racing it on a busy machine.
            tab.click(f'details.sample[data-doc="{doc}"] > summary')
            tab.wait_for_selector(f'details.sample[data-doc="{doc}"] > .body', timeout=60_000)

        # Filters, from the hostile run's samples file (the right run has no failures).
        failed = [d for d, r in hostile.items() if r["transcript"]["tool_errors"] > 0]
        limited = [d for d, r in hostile.items() if r["transcript"]["stopped_by"] != "answer"]
        wrong = [d for d, r in hostile.items() if r["exact_match"] == 0]
        assert failed == [2] and limited == [3] and wrong == [0, 1, 2, 3]
        assert shown("failed") == failed
        assert shown("limit") == limited
        assert shown("wrong") == wrong
        assert shown("") == [0, 1, 2, 3]

        # Doc 1 (a=2): every turn drawn in order, the text exactly as the samples file has it.
        open_sample(1)
        columns = tab.locator('details.sample[data-doc="1"] .transcript')
        assert columns.count() == 2
        turns = hostile[1]["transcript"]["turns"]
        drawn = columns.nth(1).locator(".t-turn")
        assert drawn.count() == len(turns)
        assert [drawn.nth(i).get_attribute("class") for i in range(len(turns))] == [
            "t-turn t-prompt", "t-turn t-assistant", "t-turn t-tool", "t-turn t-assistant"
        ]  # fmt: skip
        call = turns[1]["tool_calls"][0]
        assert drawn.nth(1).locator(".t-name").inner_text() == "add"
        assert json.loads(drawn.nth(1).locator("pre").inner_text()) == call["arguments"]
        assert drawn.nth(2).locator("pre").inner_text() == turns[2]["content"] == SCRIPT + IMAGE
        role = drawn.nth(1).locator(".t-role").inner_text()
        assert f"{turns[1]['answer_tokens']} tokens" in role and " s" in role
        head = columns.nth(1).locator(".t-head").inner_text()
        assert "stopped by answer" in head and "1 tool calls (0 failed)" in head

        # Doc 2 (a=3): the unparseable call shown as the model wrote it, marked, and failed.
        open_sample(2)
        transcript = tab.locator('details.sample[data-doc="2"] .transcript').nth(1)
        raw = hostile[2]["transcript"]["turns"][1]["tool_calls"][0]["raw"]
        assert transcript.locator(".t-unparsed pre").inner_text() == raw
        assert transcript.locator(".t-tool.t-error").count() == 1
        badges = tab.locator('details.sample[data-doc="2"] > summary').inner_text()
        assert "hostile: 1 failed call" in badges

        # Doc 3 (a=4): the long loop drawn 100 turns at a time, the rest on request.
        open_sample(3)
        transcript = tab.locator('details.sample[data-doc="3"] .transcript').nth(1)
        total = len(hostile[3]["transcript"]["turns"])
        assert total == 1 + 2 * LOOP_TURNS
        assert transcript.locator(".t-turn").count() == 100
        while transcript.locator("button.t-more").count():
            transcript.locator("button.t-more").click()
        assert transcript.locator(".t-turn").count() == total
        assert (
            "hostile: hit max_turns"
            in tab.locator('details.sample[data-doc="3"] > summary').inner_text()
        )

        # Doc 0 (a=1): the final answer that is markup shown as text.
        open_sample(0)
        last = (
            tab.locator('details.sample[data-doc="0"] .transcript').nth(1).locator(".t-turn").last
        )
        assert last.locator("pre").inner_text() == IMAGE + SCRIPT

        # Nothing the model or a tool wrote became an element or ran.
        assert tab.evaluate("window.__pwned") is None
        assert tab.locator(".transcript img, .transcript script").count() == 0
        browser.close()
    assert errors == []
