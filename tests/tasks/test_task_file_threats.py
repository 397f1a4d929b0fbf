"""Task files are data: their templates render in Jinja's sandbox, their aliases are bounded.

A template may read its row and use lm-eval's filters and Jinja's globals (the prompts are
byte-identical to lm-eval's own environment), but not reach Python through an object's
internals nor change what it is given; a YAML of nested aliases is refused naming the file.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from assay.errors import TaskConfigError
from assay.tasks._yaml_io import read_yaml
from assay.tasks.registry import Registry
from assay.tasks.task import Task

ROW = {"question": "What is 2+2?", "answer": "four", "options": ["three", "four"]}


def task_folder(tmp_path: Path, doc_to_text: str) -> tuple[Path, Path]:
    """A named folder whose task includes a base YAML from a folder not named anywhere."""
    outside, named = tmp_path / "outside", tmp_path / "named"
    outside.mkdir()
    named.mkdir()
    (named / "data.jsonl").write_text(json.dumps(ROW) + "\n")
    (outside / "base.yaml").write_text(
        "dataset_path: json\noutput_type: generate_until\ntest_split: test\n"
        f"doc_to_text: {json.dumps(doc_to_text)}\ndoc_to_target: answer\n"
    )
    (named / "task.yaml").write_text(
        textwrap.dedent(
            f"""\
            include: {outside / "base.yaml"}
            task: injected
            dataset_kwargs:
              data_files:
                test: {named / "data.jsonl"}
            """
        )
    )
    return named, outside


INJECTIONS = [
    "{{ cycler.__init__.__globals__.os.system('touch {marker}') }}",
    "{{ lipsum.__globals__['os'].system('touch {marker}') }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}{{ joiner.__init__.__globals__ }}",
    "{{ namespace.__init__.__globals__.os.popen('touch {marker}').read() }}",
    "{% set xs = options %}{{ xs.append('leak') }}{{ question }}",
    "{{ question.__class__.__base__.__subclasses__() }}",
    "{{ (cycler,) | map(attribute='__init__') | map(attribute='__globals__') | list }}",
    "{{ [cycler] | join(attribute='__init__') }}",
    "{{ '{0.__class__}'.format(question) }}",
    # A name built at render time: only the sandbox, rendering the row, can refuse it.
    "{% set k = '__cla' ~ 'ss__' %}{{ question[k].__base__ }}{{ question[k] }}",
]


@pytest.mark.parametrize("template", INJECTIONS)
def test_a_template_cannot_reach_python_or_change_its_row(tmp_path, template):
    marker = tmp_path / "ran.txt"
    named, _ = task_folder(tmp_path, template.replace("{marker}", str(marker)))
    with pytest.raises(TaskConfigError, match=r"task.yaml|base.yaml|injected") as caught:
        # Refused when the file loads where the template shows it, else when a row renders.
        Task(Registry([named], builtins=False).get("injected")).first_doc()
    assert "doc_to_text" in str(caught.value) and "sandbox" in str(caught.value)
    assert not marker.exists()


def test_a_template_cannot_build_an_unbounded_prompt(tmp_path):
    named, _ = task_folder(tmp_path, "{{ 'x' * 1000000000 }}{{ question }}")
    with pytest.raises(TaskConfigError, match="repetition of more than"):
        Task(Registry([named], builtins=False).get("injected")).first_doc()


UNBOUNDED = {
    "~ concatenation": (
        "{% set a = 'x' * 9999999 %}{% set b = a ~ a ~ a ~ a %}{{ b|length }}{{ question }}",
        "concatenation of more than",
    ),
    "+ concatenation": (
        "{% set a = 'x' * 9999999 %}{% set b = a + a %}{{ b|length }}{{ question }}",
        "concatenation of more than",
    ),
    "nested range loops": (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
        "{{ question }}",
        "range\\(\\) calls yielding more than",
    ),
}


@pytest.mark.parametrize("case", list(UNBOUNDED))
def test_a_template_cannot_build_unbounded_text_or_loops(tmp_path, case):
    template, refused = UNBOUNDED[case]
    named, _ = task_folder(tmp_path, template)
    with pytest.raises(TaskConfigError, match=refused):
        Task(Registry([named], builtins=False).get("injected")).first_doc()


@pytest.mark.parametrize("template", INJECTIONS[:-1])
def test_validate_without_data_refuses_a_template_that_shows_its_reach(tmp_path, template, capsys):
    from assay.cli.main import main

    named, _ = task_folder(tmp_path, template.replace("{marker}", str(tmp_path / "ran")))
    code = main(["validate", "--no-data", "--include-path", str(named), "-t", "injected"])
    captured = capsys.readouterr()
    assert code != 0 and "reaches outside the row" in captured.out + captured.err


TEMPLATES = [
    "Question: {{question}}\nAnswer:",
    "{{ question | replace('?', '') | upper }} {{ answer | regex_replace('o+', '0') }}",
    "{% for o in options %}{{ loop.index }}. {{ o | title }}\n{% endfor %}",
    "{{ range(3) | list }} {{ dict(a=1) }} {{ options | join(', ') }} {{ options | length }}",
    "{% set ns = namespace(n=0) %}{% for o in options %}{% set ns.n = ns.n + 1 %}{% endfor %}"
    "{{ ns.n }} {{ question.split(' ') | last }} {{ '%s!' | format(answer) }}",
    "{{ question[:4] }}{{ options[-1] }}{{ 'x' if answer == 'four' else 'y' }}\n\n",
    "{{ answer | truncate(3, True, '') }}{{ options | map('upper') | list }}{{ cycler(1, 2).next() }}",
]


@pytest.mark.parametrize("template", TEMPLATES)
def test_prompts_match_lm_evals_environment_byte_for_byte(tmp_path, template):
    lm_eval_utils = pytest.importorskip("lm_eval.utils")
    named, _ = task_folder(tmp_path, template)
    (named / "base.yaml").write_text((tmp_path / "outside" / "base.yaml").read_text())
    task_yaml = named / "task.yaml"
    task_yaml.write_text(task_yaml.read_text().replace(str(tmp_path / "outside"), str(named)))
    doc = Task(Registry([named], builtins=False).get("injected")).first_doc()
    assert doc.query == lm_eval_utils.apply_template(template, dict(ROW))


def laughs(levels: int) -> str:
    lines = ["task: laughs", 'l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for n in range(1, levels):
        lines.append(f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 8)}]")
    return "\n".join(lines) + "\ndataset_path: json\noutput_type: generate_until\n"


def test_nested_aliases_are_refused_naming_the_file(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(laughs(10))  # 8 ** 10: about a billion values
    with pytest.raises(TaskConfigError, match=r"laughs\.yaml: its YAML aliases .* expand to"):
        read_yaml(path)
    # A few aliases, as real task files use them, still load.
    path.write_text(laughs(3))
    assert len(read_yaml(path)["l2"]) == 8


def test_aliases_of_one_long_string_are_refused_under_the_node_bound(tmp_path):
    # 900 x 1,000 aliases of a 20 kB string: under a million values, 18 GB of text.
    path = tmp_path / "wide.yaml"
    row = "[" + ", ".join(["*s"] * 1000) + "]"
    path.write_text(
        "task: wide\ndataset_path: json\noutput_type: generate_until\nmetadata:\n"
        f"  s: &s {'x' * 20_000}\n  row: &row {row}\n"
        f"  rows: [{', '.join(['*row'] * 900)}]\n"
    )
    with pytest.raises(TaskConfigError, match=r"wide\.yaml: .* characters of text, more than"):
        read_yaml(path)
