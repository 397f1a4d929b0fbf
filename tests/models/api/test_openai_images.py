"""`openai-chat` with images: `<image>` placeholders become OpenAI image content parts.

The translation is checked on plain values first, then on the wire: a loopback server records
each chat request's JSON body, and the image parts it received must decode to exactly the doc's
pixels (PNG data URLs), or carry the doc's URL unchanged.
"""

from __future__ import annotations

import base64
import io

import pytest

from assay.errors import ModelError
from assay.images import DocImage
from assay.models.api.openai import OpenAIChatLM
from assay.models.api.payloads import image_messages, with_image_urls
from assay.requests.types import GenerateRequest, GenParams


def _picture(color: tuple[int, int, int], size: tuple[int, int] = (6, 4)):
    from PIL import Image

    return Image.new("RGB", size, color)


RED, BLUE = _picture((255, 0, 0)), _picture((0, 0, 255), (3, 5))
URL = "https://example.com/chart.png"


def _png_data_url(image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _part(url: str, detail: str | None = None) -> dict:
    inner = {"url": url, **({"detail": detail} if detail else {})}
    return {"type": "image_url", "image_url": inner}


def _text(text: str) -> dict:
    return {"type": "text", "text": text}


def _sent(prompt, images, **options) -> list[dict]:
    return with_image_urls(image_messages(prompt, [DocImage(i) for i in images], **options))


def test_each_placeholder_becomes_the_next_image_part():
    assert _sent("Compare <image> with <image>.", [RED, URL]) == [
        {
            "role": "user",
            "content": [
                _text("Compare "),
                _part(_png_data_url(RED)),
                _text(" with "),
                _part(URL),
                _text("."),
            ],
        }
    ]


def test_not_interleaved_images_come_first_and_placeholders_leave_the_text():
    assert _sent("<image>Chart: <image>?", [RED, BLUE], interleave=False) == [
        {
            "role": "user",
            "content": [_part(_png_data_url(RED)), _part(_png_data_url(BLUE)), _text("Chart: ?")],
        }
    ]


def test_max_images_sends_the_first_images_and_drops_later_placeholders():
    assert _sent("A <image> B <image> C", [RED, BLUE], max_images=1, detail="low") == [
        {
            "role": "user",
            "content": [_text("A "), _part(_png_data_url(RED), "low"), _text(" B "), _text(" C")],
        }
    ]


def test_placeholders_are_counted_across_chat_messages():
    messages = (("system", "Be brief."), ("user", "<image> is red."), ("user", "And <image>?"))
    assert _sent(messages, [RED, BLUE]) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [_part(_png_data_url(RED)), _text(" is red.")]},
        {"role": "user", "content": [_text("And "), _part(_png_data_url(BLUE)), _text("?")]},
    ]


def test_without_placeholders_images_follow_the_last_user_message():
    messages = (("user", "Hi"), ("assistant", "Hello"), ("user", "What is shown?"))
    assert _sent(messages, [RED, BLUE], max_images=1)[-1] == {
        "role": "user",
        "content": [_text("What is shown?"), _part(_png_data_url(RED))],
    }


def test_a_text_request_is_sent_as_before():
    assert _sent("No images here <image>", []) == [
        {"role": "user", "content": "No images here <image>"}
    ]


def test_placeholders_and_images_must_pair_up():
    with pytest.raises(ModelError, match=r"2 <image> placeholder\(s\) for 1 image"):
        _sent("<image> and <image>", [RED])


def test_data_urls_pass_through_and_other_sources_are_encoded_as_png(tmp_path):
    path = tmp_path / "blue.png"
    BLUE.save(path)
    data_url = _png_data_url(RED).replace("image/png", "image/x-test")
    assert _sent("<image><image>", [data_url, str(path)])[0]["content"] == [
        _part(data_url),
        _part(_png_data_url(BLUE)),
    ]


def test_image_settings_are_checked_and_only_change_identity_when_set():
    plain = OpenAIChatLM(model="m", base_url="http://127.0.0.1:9/v1").identity()
    assert "max_images" not in plain["generation_defaults"]
    capped = OpenAIChatLM(model="m", base_url="http://127.0.0.1:9/v1", max_images=2).identity()
    assert capped["generation_defaults"]["max_images"] == 2
    with pytest.raises(Exception, match="image_detail"):
        OpenAIChatLM(model="m", image_detail="medium")


@pytest.mark.slow
def test_the_server_receives_the_image_parts_exactly(tiny_model_dir):
    from fixtures.openai_server import OpenAIStubServer
    from PIL import Image

    params = GenParams(until=("\n",), max_gen_toks=4)
    requests = [
        GenerateRequest("<image> What colour?", params, images=(DocImage(RED),)),
        GenerateRequest("Is <image> like <image>?", params, images=(DocImage(BLUE), DocImage(URL))),
        GenerateRequest("Plain text.", params),
    ]
    with OpenAIStubServer(tiny_model_dir, chat_script=lambda body: "blue") as server:
        lm = OpenAIChatLM(model="tiny", base_url=server.base_url, num_concurrent=1)
        assert lm.accepts_images
        assert [str(a) for a in lm.generate_until(requests)] == ["blue"] * 3
    by_text = {
        "".join(p["text"] for p in m[0]["content"] if p["type"] == "text")
        if isinstance(m[0]["content"], list)
        else m[0]["content"]: m[0]["content"]
        for m in server.chat_messages
    }
    assert by_text["Plain text."] == "Plain text."
    first = by_text[" What colour?"]
    assert first[1] == _text(" What colour?")
    header, _, payload = first[0]["image_url"]["url"].partition(",")
    assert header == "data:image/png;base64"
    received = Image.open(io.BytesIO(base64.b64decode(payload)))
    assert received.size == RED.size and received.tobytes() == RED.tobytes()
    assert by_text["Is  like ?"] == [
        _text("Is "),
        _part(_png_data_url(BLUE)),
        _text(" like "),
        _part(URL),
        _text("?"),
    ]


@pytest.mark.slow
def test_chartqa_reaches_the_server_with_each_doc_chart(tiny_model_dir, tmp_path):
    from dataclasses import replace

    from fixtures.openai_server import OpenAIStubServer

    from assay.run.evaluation import Evaluation
    from assay.run.settings import RunSettings
    from assay.tasks.registry import Registry

    rows = [
        {"image": RED, "query": "Which colour?", "label": ["red"], "human_or_machine": 0},
        {"image": BLUE, "query": "How tall?", "label": ["5"], "human_or_machine": 1},
    ]
    resolved = Registry().resolve(["chartqa"])
    (request,) = resolved.tasks
    request.config = replace(
        request.config, hf_repo=None, dataset_loader=lambda **_: {"test": rows}
    )
    with OpenAIStubServer(tiny_model_dir, chat_script=lambda body: "Final Answer: red") as server:
        lm = OpenAIChatLM(model="tiny", base_url=server.base_url, num_concurrent=1)
        run = RunSettings(model=lm, output_dir=tmp_path, show_progress=False, cache=False)
        results = Evaluation(resolved, run).run()
    assert results["results"]["chartqa"]["exact_match,none"] == 0.5
    sent = sorted(server.chat_bodies, key=lambda body: body["messages"][0]["content"][1]["text"])
    for body, row in zip(sent, sorted(rows, key=lambda r: r["query"]), strict=True):
        [message] = body["messages"]
        assert message["role"] == "user"
        image, text = message["content"]
        assert image == _part(_png_data_url(row["image"]))
        assert text["text"].startswith(row["query"] + "\nAnalyze the image and question")
        assert body["max_tokens"] == 512 and body["temperature"] == 0.0 and "stop" not in body
