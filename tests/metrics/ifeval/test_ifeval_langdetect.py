"""assay's language detection gives exactly what langdetect.detect gives with seed 0."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langdetect import DetectorFactory, LangDetectException, detect

from assay.metrics.ifeval._langdetect import detect_language

TEXTS = [
    "This is a perfectly ordinary English sentence about the weather.",
    "THIS IS AN ENGLISH SENTENCE IN CAPITAL LETTERS ABOUT THE WEATHER.",
    "NO WAY",
    "ok",
    "Das ist ein schöner Tag und wir gehen in den Park.",
    "C'est une belle journée et nous allons au parc.",
    "Hoy es un día hermoso y vamos al parque.",
    "Сегодня очень хорошая погода.",
    "今日はとても良い天気ですね。",
    "今天天气很好，我们去公园吧。",
    "오늘은 날씨가 정말 좋네요.",
    "आज मौसम बहुत अच्छा है।",
    "Hôm nay trời rất đẹp và chúng tôi đi dạo trong công viên.",
    "Tiếng Việt với dấu tổ hợp: Tiếng Việt",
    "See https://example.com/path?q=1 or mail me at someone@example.org today.",
    "Mixed English and Deutsch: the Straße is long und schön.",
    "*Bold* claims, **stronger** claims\n- bullet one\n- bullet two",
    "ÀÉÎÕÜ àéîõü ßø",
    "Ζωή είναι ωραία.",
    "مرحبا بالعالم",
    "x" * 12000,
]


@pytest.fixture
def seeded(monkeypatch):
    monkeypatch.setattr(DetectorFactory, "seed", 0)


def reference(text: str) -> str | None:
    try:
        return detect(text)
    except LangDetectException:
        return None


@pytest.mark.parametrize("text", TEXTS)
def test_same_answer_as_langdetect(seeded, text):
    assert detect_language(text) == reference(text)


@pytest.mark.parametrize("text", ["", "   ", "12345 !!! ???", "\n\n"])
def test_no_features_is_none(seeded, text):
    assert reference(text) is None
    assert detect_language(text) is None


@settings(max_examples=40)
@given(
    st.text(alphabet=st.sampled_from(list("aeiouAEIOU tnrsTNRS.,\nßéüøаяжçñ日本한")), max_size=60)
)
def test_same_answer_as_langdetect_on_generated_text(text):
    previous = DetectorFactory.seed
    DetectorFactory.seed = 0
    try:
        assert detect_language(text) == reference(text)
    finally:
        DetectorFactory.seed = previous
