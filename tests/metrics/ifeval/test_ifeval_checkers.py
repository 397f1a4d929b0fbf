"""Every IFEval checker on passing and failing responses, with the official semantics.

Each case's expected verdict follows from reading Google's instruction_following_eval code
(unicode, CRLF line endings and markdown variants included); the strict path is used, so an
empty or blank response follows nothing.
"""

from __future__ import annotations

import pytest

from assay.metrics.ifeval import INSTRUCTION_DICT, InputExample, scoring

LEAST, LESS = "at least", "less than"

# (instruction id, kwargs, response, expected, what the case shows)
# fmt: off
CASES = [
    # keywords:existence: case-insensitive regex search for every keyword.
    ("keywords:existence", {"keywords": ["apple", "Pear"]}, "I like APPLES and a pear.", True, "substring, any case"),
    ("keywords:existence", {"keywords": ["apple", "Pear"]}, "I like apples.", False, "one keyword missing"),
    ("keywords:existence", {"keywords": ["straße", "apple"]}, "Die Straße, apple pie", True, "non-English keyword"),
    ("keywords:existence", {"keywords": ["colou?r"]}, "What a color", True, "keywords are regexes"),
    # keywords:frequency: non-overlapping, case-insensitive occurrences, substrings included.
    ("keywords:frequency", {"keyword": "data", "frequency": 3, "relation": LEAST}, "data, Data and DATA", True, "three occurrences"),
    ("keywords:frequency", {"keyword": "data", "frequency": 3, "relation": LEAST}, "data and database", False, "two occurrences"),
    ("keywords:frequency", {"keyword": "data", "frequency": 3, "relation": LEAST}, "data database metadata", True, "inside words too"),
    ("keywords:frequency", {"keyword": " data ", "frequency": 2, "relation": LESS}, "one data point", True, "keyword stripped"),
    ("keywords:frequency", {"keyword": "data", "frequency": 2, "relation": LESS}, "data data", False, "not less than"),
    # keywords:forbidden_words: whole words only.
    ("keywords:forbidden_words", {"forbidden_words": ["cat", "dog"]}, "A caterpillar and a hotdog.", True, "inside words is fine"),
    ("keywords:forbidden_words", {"forbidden_words": ["cat", "dog"]}, "My Cat sleeps.", False, "any case"),
    ("keywords:forbidden_words", {"forbidden_words": ["cat", "dog"]}, "The dog's bone", False, "apostrophe is a boundary"),
    ("keywords:forbidden_words", {"forbidden_words": ["cat"]}, "Die Katze schläft.", True, "non-English text"),
    # keywords:letter_frequency: the letter counted case-insensitively.
    ("keywords:letter_frequency", {"letter": "z", "let_frequency": 2, "let_relation": LEAST}, "Pizza", True, "two z"),
    ("keywords:letter_frequency", {"letter": "z", "let_frequency": 2, "let_relation": LEAST}, "Zebra", False, "one z"),
    ("keywords:letter_frequency", {"letter": "Z", "let_frequency": 2, "let_relation": LEAST}, "zZ", True, "letter lowered"),
    ("keywords:letter_frequency", {"letter": "a", "let_frequency": 3, "let_relation": LESS}, "banana", False, "three a"),
    ("keywords:letter_frequency", {"letter": "a", "let_frequency": 3, "let_relation": LESS}, "ÀÁÂ àáâ", True, "accents are other letters"),
    # language:response_language: langdetect, seeded.
    ("language:response_language", {"language": "de"}, "Das ist ein schöner Tag und wir gehen heute zusammen in den Park.", True, "German"),
    ("language:response_language", {"language": "de"}, "This is a beautiful day and we are going for a walk in the park.", False, "English"),
    ("language:response_language", {"language": "ja"}, "今日はとても良い天気ですね。公園に散歩に行きましょう。", True, "Japanese"),
    ("language:response_language", {"language": "ru"}, "Сегодня очень хорошая погода, и мы идём гулять в парк.", True, "Russian"),
    ("language:response_language", {"language": "de"}, "12345 !!! ???", True, "no letters: counted as followed"),
    # length_constraints:number_sentences: NLTK Punkt (English).
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": LESS}, "One. Two.", True, "two sentences"),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": LESS}, "One. Two. Three.", False, "three sentences"),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": LEAST}, "Dr. Smith arrived. He sat. Then he left.", True, "three, 'Dr.' is no end"),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": LEAST}, "Dr. Smith arrived. He sat down.", False, "two, 'Dr.' is no end"),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": LEAST}, "One.\r\nTwo.\r\nThree.", True, "CRLF lines"),
    # length_constraints:number_paragraphs: '***' dividers.
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "First para.\n***\nSecond para.", True, "two paragraphs"),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "First.\n***\n***\nSecond.", False, "empty middle paragraph"),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "***\nFirst\n***\nSecond\n***", True, "outer dividers ignored"),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "Only one.", False, "one paragraph"),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "First.\r\n***\r\nSecond.", True, "CRLF around divider"),
    # length_constraints:number_words: runs of \w.
    ("length_constraints:number_words", {"num_words": 5, "relation": LEAST}, "one two three four five", True, "five words"),
    ("length_constraints:number_words", {"num_words": 5, "relation": LEAST}, "one two three four", False, "four words"),
    ("length_constraints:number_words", {"num_words": 3, "relation": LESS}, "don't stop", False, "don't is two words"),
    ("length_constraints:number_words", {"num_words": 4, "relation": LEAST}, "naïve café über straße", True, "unicode letters"),
    ("length_constraints:number_words", {"num_words": 2, "relation": LESS}, "日本語のテキスト", True, "unspaced script: one run"),
    # length_constraints:nth_paragraph_first_word: '\n\n' paragraphs.
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "However"}, "Intro text.\n\nHowever, this works.", True, "punctuation cut"),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "however"}, "Intro.\n\nBut no.", False, "other first word"),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "however"}, 'Intro.\n\n"However this."', True, "leading quote stripped"),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "however"}, "Intro.\n\nHowever.\n\nExtra.", False, "three paragraphs"),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "however"}, "Intro.\r\n\r\nHowever yes.", False, "CRLF: no '\\n\\n'"),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 1, "first_word": "über"}, "Über alles.\n\nZweiter Absatz.", True, "non-ASCII first word"),
    # detectable_content:number_placeholders: [brackets] on one line.
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "Dear [name], at [address].", True, "two placeholders"),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "Dear [name].", False, "one placeholder"),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "[a\nb] and [c]", False, "no placeholder across lines"),
    # detectable_content:postscript.
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hello.\nP.S. See you.", True, "P.S. line"),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hello.\nPS see you", False, "no dots"),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hello.\np. s. bye", True, "lower case, one space"),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"}, "Text\nP.P.S. more", True, "P.P.S"),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"}, "Text\nP.S. more", False, "P.S. is not P.P.S"),
    # detectable_format:number_bullet_lists: exactly n '* ' or '-' lines.
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* one\n* two", True, "star bullets"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "- one\n- two\n- three", False, "three bullets"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* one\n- two", True, "mixed markers"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "**bold**\n* one", False, "bold line is no bullet"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* one\r\n* two\r\n", True, "CRLF lines"),
    # detectable_format:constrained_response.
    ("detectable_format:constrained_response", {}, "My answer is yes.", True, "an option"),
    ("detectable_format:constrained_response", {}, "My answer is Yes.", False, "case matters"),
    ("detectable_format:constrained_response", {}, "Hmm. My answer is maybe. Because.", True, "option inside text"),
    # detectable_format:number_highlighted_sections.
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "*one* and *two*", True, "two italics"),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "*one* and ** **", False, "blank bold ignored"),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "**bold one** and *two*", True, "bold counts"),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 1}, "*multi\nline*", False, "no highlight across lines"),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "*über* *日本*", True, "unicode highlights"),
    # detectable_format:multiple_sections.
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2}, "Section 1\nIntro\nSection 2\nBody", True, "two sections"),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2}, "SECTION 1\nIntro\nSECTION 2\nBody", False, "splitter is case-sensitive"),
    ("detectable_format:multiple_sections", {"section_spliter": " SECTION ", "num_sections": 2}, "SECTION 1\nIntro\nSECTION 2\nBody", True, "splitter stripped"),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2}, "Section 1 only", False, "one section"),
    # detectable_format:json_format.
    ("detectable_format:json_format", {}, '{"a": 1}', True, "bare JSON"),
    ("detectable_format:json_format", {}, '```json\n{"a": 1}\n```', True, "json fence"),
    ("detectable_format:json_format", {}, "```JSON\n[1, 2]\n```", True, "JSON fence"),
    ("detectable_format:json_format", {}, 'Here: {"a": 1}', False, "text before"),
    ("detectable_format:json_format", {}, '{"ключ": "значение"}', True, "unicode JSON"),
    # detectable_format:title.
    ("detectable_format:title", {}, "<<My Title>>\nText", True, "title"),
    ("detectable_format:title", {}, "<< >>\nText", False, "blank title"),
    ("detectable_format:title", {}, "<<Title\nbroken>>", False, "title across lines"),
    ("detectable_format:title", {}, "<<Заголовок>>", True, "non-English title"),
    # combination:two_responses.
    ("combination:two_responses", {}, "Answer A\n******\nAnswer B", True, "two answers"),
    ("combination:two_responses", {}, "Same\n******\nSame ", False, "identical answers"),
    ("combination:two_responses", {}, "A\n******\n******\nB", False, "empty middle answer"),
    ("combination:two_responses", {}, "******\nA\n******\nB\n******", True, "outer separators ignored"),
    # combination:repeat_prompt.
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a poem."}, "write a poem. Roses are red.", True, "repeated, any case"),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a poem."}, "Sure! Write a poem.", False, "words before"),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a poem."}, "  \nWrite a poem.", True, "leading blank ignored"),
    # startend:end_checker.
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, "Text. Any other questions?", True, "ends with phrase"),
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, 'Text. any other questions?"\n', True, "quote and case ignored"),
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, "Any other questions? Bye.", False, "words after"),
    # change_case:capital_word_frequency: nltk.word_tokenize tokens.
    ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": LEAST}, "USA and NASA", True, "two capital words"),
    ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": LEAST}, "Usa and nasa", False, "none"),
    ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": LEAST}, "I am OK", True, "'I' counts"),
    ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": LESS}, "A WELL-KNOWN fact", False, "hyphenated word is one token"),
    ("change_case:capital_word_frequency", {"capital_frequency": 1, "capital_relation": LEAST}, "ÜBER alles", True, "non-ASCII capitals"),
    # change_case:english_capital.
    ("change_case:english_capital", {}, "THIS IS A FULLY CAPITALIZED ENGLISH SENTENCE ABOUT THE WEATHER TODAY.", True, "English capitals"),
    ("change_case:english_capital", {}, "This is not capitalized at all, it is plain English.", False, "not capitals"),
    ("change_case:english_capital", {}, "DAS IST EIN DEUTSCHER SATZ ÜBER DAS WETTER VON HEUTE UND MORGEN.", False, "German capitals"),
    ("change_case:english_capital", {}, "12345", False, "nothing cased"),
    # change_case:english_lowercase.
    ("change_case:english_lowercase", {}, "this is an english sentence written entirely in lowercase letters.", True, "English lowercase"),
    ("change_case:english_lowercase", {}, "this has One capital letter in the middle of it.", False, "a capital"),
    ("change_case:english_lowercase", {}, "das ist ein deutscher satz über das wetter von heute und morgen.", False, "German lowercase"),
    # punctuation:no_comma.
    ("punctuation:no_comma", {}, "No commas here.", True, "no comma"),
    ("punctuation:no_comma", {}, "One, two", False, "a comma"),
    ("punctuation:no_comma", {}, "你好，世界", True, "fullwidth comma is not ','"),
    # startend:quotation.
    ("startend:quotation", {}, '"Quoted text"', True, "quoted"),
    ("startend:quotation", {}, '  "Quoted"  \n', True, "outer blanks ignored"),
    ("startend:quotation", {}, '"', False, "a lone quote"),
    ("startend:quotation", {}, "“Curly”", False, "curly quotes"),
]
# fmt: on


def strict_verdict(instruction_id: str, kwargs: dict, response: str) -> bool:
    inp = InputExample(key=1, instruction_id_list=[instruction_id], prompt="P", kwargs=[kwargs])
    return scoring.test_instruction_following_strict(inp, response).follow_instruction_list[0]


@pytest.mark.parametrize(
    ("instruction_id", "kwargs", "response", "expected"),
    [case[:4] for case in CASES],
    ids=[f"{case[0]}-{case[4]}" for case in CASES],
)
def test_checker_verdict(instruction_id, kwargs, response, expected):
    assert strict_verdict(instruction_id, kwargs, response) is expected


def test_every_instruction_has_passing_and_failing_cases():
    passing = {case[0] for case in CASES if case[3]}
    failing = {case[0] for case in CASES if not case[3]}
    assert passing == failing == set(INSTRUCTION_DICT)
    assert len(INSTRUCTION_DICT) == 25


# kwargs of a passing case per instruction, for the empty-response tests.
FIRST_PASSING = {}
for _id, _kwargs, _response, _expected, _ in CASES:
    if _expected:
        FIRST_PASSING.setdefault(_id, (_kwargs, _response))


@pytest.mark.parametrize("instruction_id", sorted(INSTRUCTION_DICT))
@pytest.mark.parametrize("blank", ["", " ", "\n\t \r\n"])
def test_blank_response_follows_nothing(instruction_id, blank):
    kwargs, passing_response = FIRST_PASSING[instruction_id]
    assert strict_verdict(instruction_id, kwargs, passing_response) is True
    assert strict_verdict(instruction_id, kwargs, blank) is False


@pytest.mark.parametrize("instruction_id", sorted(INSTRUCTION_DICT))
def test_checker_args_are_its_build_keywords(instruction_id):
    import inspect

    checker_cls = INSTRUCTION_DICT[instruction_id]
    parameters = inspect.signature(checker_cls.build).parameters
    keyword_only = [p.name for p in parameters.values() if p.kind is p.KEYWORD_ONLY]
    assert tuple(keyword_only) == checker_cls.ARGS
