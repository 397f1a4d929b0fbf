"""BFCL tasks without bfcl-eval at hand: refusals, the leaderboard formulas, the answer
conversion, the guard on bfcl-eval's evaluating decoder, and conversation docs. Verdicts
against bfcl-eval itself: test_bfcl_parity.py (in its own environment)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from assay.catalog import bfcl
from assay.doc import Doc, OutputType
from assay.errors import ConfigError
from assay.metrics.bfcl import bfcl_eval_module, fc_model_result
from assay.metrics.bfcl_checker import UnsafeAnswer, refuse_evaluated_code
from assay.prompts.manager import PromptManager
from assay.requests.build import build_requests
from assay.requests.plan import Capabilities, GenerationPolicy, RequestPlan
from assay.requests.tools import ToolCall, ToolSpec, Turn
from assay.tasks.registry import Registry


def test_a_missing_bfcl_eval_is_refused_with_the_way_to_install_it():
    with pytest.raises(ConfigError, match=r"make bfcl-venv.*bfcl_eval_not_here"):
        bfcl_eval_module("bfcl_eval_not_here.utils")


@pytest.mark.parametrize("category", ["web_search_base", "memory_kv"])
def test_categories_assay_does_not_run_are_refused_with_the_reason(category):
    config = Registry().get(f"bfcl_fc_{category}")
    with pytest.raises(ConfigError, match=rf"BFCL's {category} is not run by assay: (it|its)"):
        config.validate()


def test_every_offline_category_has_both_modes():
    names = set(Registry().python_configs())
    for category in bfcl.OFFLINE:
        assert {f"bfcl_fc_{category}", f"bfcl_prompt_{category}"} <= names


def test_function_calling_answers_take_bfcl_evals_shape():
    calls = (
        ToolCall.parsed("math_factorial", '{"n": 5}'),
        ToolCall.parsed("f", '{"broken"'),
        ToolCall("g", '{"x":1}', raw=""),
    )
    assert fc_model_result(calls, "ignored") == [
        {"math_factorial": '{"n": 5}'},
        {"f": '{"broken"'},
        {"g": '{"x":1}'},
    ]
    assert fc_model_result((), "no call") == "no call"


def test_leaderboard_scores_follow_bfcls_formulas():
    accuracy = {
        "simple_python": (0.9, 400),
        "simple_java": (0.6, 100),
        "simple_javascript": (0.3, 50),
        "multiple": (0.8, 200),
        "parallel": (0.7, 200),
        "parallel_multiple": (0.5, 200),
        "irrelevance": (1.0, 240),
        "live_simple": (0.5, 200),
        "live_multiple": (1.0, 600),
        "live_parallel": (0.0, 100),
        # live_parallel_multiple not run: 0 over its 100 entries
        "live_irrelevance": (0.5, 800),
        "live_relevance": (0.25, 16),
    }
    sizes = {"live_parallel_multiple": 100}
    scores = bfcl.leaderboard_scores(accuracy, sizes)
    assert scores["non_live_simple"] == pytest.approx(0.6)
    assert scores["non_live"] == pytest.approx((0.6 + 0.8 + 0.7 + 0.5) / 4)
    assert scores["live"] == pytest.approx((100 + 600) / 1000)
    assert scores["irrelevance"] == pytest.approx(0.75)
    assert scores["relevance"] == 0.25
    expected = (0.1 * scores["non_live"] + 0.1 * scores["live"] + 0.1 * 0.75) / 1.0
    assert scores["overall"] == pytest.approx(expected)
    multi = {"multi_turn_base": (0.5, 200), "multi_turn_miss_func": (0.1, 200)}
    with_multi = bfcl.leaderboard_scores({**accuracy, **multi}, sizes)
    assert with_multi["multi_turn"] == pytest.approx(0.6 / 4)  # two of four not run: 0
    assert with_multi["overall"] == pytest.approx(expected + 0.3 * 0.6 / 4)


def _aggregate(group_name):
    group = Registry().group_configs()[group_name]
    return group.tasks, group.aggregate_metric_list[0]["aggregation"]


@pytest.mark.parametrize("mode", ["fc", "prompt"])
def test_leaderboard_groups_give_bfcls_non_live_and_overall_scores(mode):
    tasks, aggregate = _aggregate(f"bfcl_{mode}_overall")
    categories = [t.removeprefix(f"bfcl_{mode}_") for t in tasks]
    values = [(i + 1) / (len(tasks) + 3) for i in range(len(tasks))]  # all different
    sizes = [10 + 7 * i for i in range(len(tasks))]
    accuracy = {c: (v, n) for c, v, n in zip(categories, values, sizes, strict=True)}
    expected = bfcl.leaderboard_scores(accuracy, {})
    assert aggregate(values, sizes, True) == pytest.approx(expected["overall"])
    assert "multi_turn_base" in categories
    tasks, aggregate = _aggregate(f"bfcl_{mode}_non_live")
    n = len(tasks)
    assert aggregate(values[:n], sizes[:n], True) == pytest.approx(expected["non_live"])
    with pytest.raises(ConfigError, match="run them all"):
        aggregate(values[: n - 1], sizes[: n - 1], True)


def test_leaderboard_stderrs_weigh_each_categorys_stderr_by_its_weight_in_the_score():
    se = {
        "simple_python": (0.03, 400), "simple_java": (0.05, 100), "simple_javascript": (0.07, 50),
        "multiple": (0.02, 200), "parallel": (0.04, 200), "parallel_multiple": (0.06, 200),
        "irrelevance": (0.01, 240), "live_simple": (0.03, 200), "live_multiple": (0.02, 600),
        "live_parallel": (0.05, 100), "live_parallel_multiple": (0.04, 100),
        "live_irrelevance": (0.02, 800), "live_relevance": (0.1, 16),
    }  # fmt: skip
    out = bfcl.leaderboard_stderrs(se)
    v = {c: e**2 for c, (e, _) in se.items()}
    simple = v["simple_python"] + v["simple_java"] + v["simple_javascript"]
    assert out["non_live_simple"] == pytest.approx(simple**0.5 / 3)
    non_live = simple / 144 + (v["multiple"] + v["parallel"] + v["parallel_multiple"]) / 16
    assert out["non_live"] == pytest.approx(non_live**0.5)
    live_n = {c: se[c][1] for c in bfcl.LIVE_AST}
    live = sum((live_n[c] / 1000) ** 2 * v[c] for c in bfcl.LIVE_AST)
    assert out["live"] == pytest.approx(live**0.5)
    irrelevance = (v["irrelevance"] + v["live_irrelevance"]) / 4
    assert out["irrelevance"] == pytest.approx(irrelevance**0.5)
    assert out["relevance"] == pytest.approx(0.1)
    assert out["multi_turn"] == 0.0  # not run: the constant 0
    overall = 0.01 * (non_live + live + irrelevance)
    assert out["overall"] == pytest.approx(overall**0.5)


def test_leaderboard_stderrs_match_the_spread_of_simulated_scores():
    import numpy as np

    rng = np.random.default_rng(7)
    truth = {c: (0.2 + 0.04 * i, 30 + 11 * i) for i, c in enumerate(bfcl.OFFLINE)}
    se = {c: ((p * (1 - p) / n) ** 0.5, n) for c, (p, n) in truth.items()}
    predicted = bfcl.leaderboard_stderrs(se)
    draws = {c: rng.binomial(n, p, size=4000) / n for c, (p, n) in truth.items()}
    scores = [
        bfcl.leaderboard_scores({c: (float(draws[c][k]), n) for c, (_, n) in truth.items()})
        for k in range(4000)
    ]
    for part in ("non_live_simple", "non_live", "live", "irrelevance", "overall"):
        spread = float(np.std([s[part] for s in scores], ddof=1))
        assert predicted[part] == pytest.approx(spread, rel=0.06), part


@pytest.mark.parametrize("mode", ["fc", "prompt"])
def test_leaderboard_groups_carry_the_stderr_or_say_none(mode):
    from assay.results.summary import GroupSpec, group_entry

    group = Registry().group_configs()[f"bfcl_{mode}_overall"]
    spec = group.aggregate_metric_list[0]
    specs = [GroupSpec("bfcl_accuracy", ["none"], True, spec["aggregation"], spec["stderr"])]
    categories = [t.removeprefix(f"bfcl_{mode}_") for t in group.tasks]
    children = [
        {"bfcl_accuracy,none": 0.5, "bfcl_accuracy_stderr,none": 0.01 * (i + 1),
         "sample_len": 20 + i}
        for i in range(len(categories))
    ]  # fmt: skip
    entry = group_entry(group.name, None, children, specs)
    errors = {c: (0.01 * (i + 1), 20 + i) for i, c in enumerate(categories)}
    expected = bfcl.leaderboard_stderrs(errors, dict.fromkeys(bfcl.LIVE_AST, 0))["overall"]
    assert entry["bfcl_accuracy_stderr,none"] == pytest.approx(expected) and expected > 0
    children[0]["bfcl_accuracy_stderr,none"] = "N/A"  # a category of one doc
    assert group_entry(group.name, None, children, specs)["bfcl_accuracy_stderr,none"] == "N/A"


@pytest.mark.parametrize(
    "text",
    [
        "[f(a=60*60*24, b=-3+4.5, c='ab'*3)]",
        "f(a=2**10)",
        "[f(a=1/0)]",
        "not python ((",
    ],
)
def test_arithmetic_on_constants_is_left_to_bfcl_evals_decoder(text):
    refuse_evaluated_code(text)


@pytest.mark.parametrize(
    "text",
    [
        "[f(a=__import__('os').system('touch /tmp/assay-bfcl-pwned')+1)]",
        "[f(a=open('/etc/passwd').read()+'')]",
        "[f(a=9**9**9)]",
        "[f(a=2**100000)]",
        "[f(a='x'*10**12)]",
        "[f(a=(1<<10**9))]",
        "[f(a=[1]*3+[2])]",
    ],
)
def test_code_and_huge_values_are_never_evaluated(text):
    with pytest.raises(UnsafeAnswer, match="not evaluated"):
        refuse_evaluated_code(text)


def _conversation_doc(tools=()):
    return Doc(
        query="Q",
        conversation=(Turn("system", "S"), Turn("user", "Q")),
        tools=tools,
        id="0",
        task_name="t",
    )


def test_a_conversation_doc_is_refused_where_it_would_be_changed():
    plan = RequestPlan(
        "task t",
        OutputType.GENERATE_UNTIL,
        PromptManager(),
        GenerationPolicy({"until": []}, "\n\n"),
    )
    plain = Capabilities(backend="Plain", accepts_tools=False)
    with pytest.raises(ConfigError, match="--apply-chat-template"):
        build_requests(plan, _conversation_doc(), plain)
    tool = ToolSpec.of("f")
    with pytest.raises(ConfigError, match=r"offers 1 tool\(s\), but the Plain backend"):
        build_requests(plan, _conversation_doc((tool,)), plain)
    (instance,) = build_requests(
        plan, _conversation_doc((tool,)), replace(plain, accepts_tools=True)
    )
    assert instance.request.prompt == _conversation_doc().conversation
    assert instance.request.tools == (tool,)
    assert instance.arguments()["tools"] == [tool.as_dict()]
