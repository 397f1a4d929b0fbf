"""`assay report`: the page built from two real runs, opened in headless Chromium.

The expectations come from the run folders themselves (results.json, the samples files) and
from `assay compare --json`, never from the report's own data.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

from assay.cli.main import main
from assay.errors import ConfigError
from assay.results.readers import read_run
from assay.results.report import build_report

TASKS_DIR = Path(__file__).parents[1] / "data" / "lm_eval_parity" / "tasks"
TASKS = "parity_mc_same_split,parity_gen_regex"


def chromium() -> str:
    """Debian's chromium, which `make test` installs."""
    path = shutil.which("chromium")
    assert path, "chromium is not installed: `make test` installs Debian's chromium package"
    return path


def open_page(page: Path, fragment: str) -> tuple[str, list[str]]:
    """The page's DOM once its script has drawn everything, and every error the browser
    reported (console errors and uncaught exceptions)."""
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium(),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        tab = browser.new_page()
        tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.goto(page.as_uri() + fragment)
        tab.wait_for_selector('body[data-plotted="1"][data-ready="1"]', timeout=120_000)
        dom = tab.content()
        browser.close()
    return dom, errors


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same tasks run by two differently seeded dummy models (so some docs flip)."""
    root = tmp_path_factory.mktemp("report_runs")
    for seed in (1, 2):
        code = main(
            [
                "run",
                "--model",
                "dummy",
                "--model-args",
                f"seed={seed}",
                "--include-path",
                str(TASKS_DIR),
                "--tasks",
                TASKS,
                "--log-samples",
                "--output-dir",
                str(root / f"seed{seed}"),
            ]
        )
        assert code == 0
    return root / "seed1", root / "seed2"


def expected_flips(a: Path, b: Path) -> set[tuple[str, str, int]]:
    """(task, filter, doc id) whose first reported metric differs between the two runs."""
    results = json.loads((a / "results.json").read_text())["results"]
    flips = set()
    for task in TASKS.split(","):
        primary = next(k for k in results[task] if "," in k and "_stderr" not in k).split(",")[0]
        lines_a = [json.loads(x) for x in (a / f"samples_{task}.jsonl").read_text().splitlines()]
        by_key = {(r["filter"], r["doc_id"]): r for r in lines_a}
        for line in (b / f"samples_{task}.jsonl").read_text().splitlines():
            record = json.loads(line)
            other = by_key[(record["filter"], record["doc_id"])]
            if record[primary] != other[primary]:
                flips.add((task, record["filter"], record["doc_id"]))
    return flips


@pytest.mark.slow
def test_the_report_opens_in_chromium_and_shows_the_runs(two_runs, tmp_path):
    a, b = two_runs
    page = tmp_path / "report.html"
    assert main(["report", str(a), str(b), "-o", str(page)]) == 0
    assert main(["compare", str(a), str(b), "--json", str(tmp_path / "compare.json")]) == 0
    comparisons = json.loads((tmp_path / "compare.json").read_text())["comparisons"]

    dom, errors = open_page(page, "#flipped")
    assert errors == []

    # The summary table shows each run's numbers as results.json has them.
    for run in (a, b):
        results = json.loads((run / "results.json").read_text())["results"]
        for task, entry in results.items():
            for key, value in entry.items():
                if "," not in key or "_stderr" in key:
                    continue
                metric, flt = key.split(",")
                row = re.search(
                    rf'<tr class="" data-task="{task}" data-metric="{metric}" '
                    rf'data-filter="{flt}">(.*?)</tr>',
                    dom,
                    re.S,
                )
                assert row is not None, (task, metric, flt)
                cell = re.search(
                    rf'data-run="{run.name}"><span class="value">([^<]*)</span>', row.group(1)
                )
                assert cell is not None
                shown = float(cell.group(1))
                assert shown == pytest.approx(value, abs=5e-5)

    # The forest plot draws one interval per compared metric with an interval.
    with_interval = [c for c in comparisons if c["ci_low"] is not None]
    assert len(with_interval) == len(comparisons) > 0
    assert dom.count('class="errorbar"') == len(with_interval)

    # "#flipped" shows exactly the docs whose score differs between the runs.
    shown_flips = {
        (html.unescape(task), html.unescape(flt), int(doc))
        for task, doc, flt in re.findall(
            r'<details class="sample" data-task="([^"]*)" data-doc="(\d+)" '
            r'data-filter="([^"]*)" data-flipped="true"',
            dom,
        )
    }
    assert shown_flips == expected_flips(a, b)
    assert shown_flips, "the seeds should make some docs flip"
    assert 'data-flipped="false"' not in dom


def test_one_run_has_no_comparison_and_labels_must_differ(two_runs):
    a, _ = two_runs
    page = build_report([read_run(a)])
    assert '"comparisons": []' in page
    assert "parity_mc_same_split" in page
    with pytest.raises(ConfigError, match="labels must differ"):
        build_report([read_run(a), read_run(a)])


def test_lm_eval_run_folders_make_a_report_with_their_comparison():
    fixtures = Path(__file__).parents[1] / "data" / "lm_eval_runs"
    runs = [read_run(fixtures / name) for name in ("dummy_seed1", "dummy_seed2")]
    page = build_report(runs)
    data = json.loads(
        re.search(r'id="page-data" type="application/json">(.*?)</script>', page, re.S)[1]
    )
    assert [r["layout"] for r in data["runs"]] == ["lm-eval", "lm-eval"]
    assert {c["task"] for c in data["comparisons"]} == {*runs[0].tasks(), *runs[0].groups()}


@pytest.mark.slow
def test_samples_with_images_show_their_references(tmp_path):
    from PIL import Image

    from assay.images import DocImage

    pictures = [Image.new("RGB", (5, 3), color) for color in ("red", "blue")]
    for i, picture in enumerate(pictures):
        picture.save(tmp_path / f"{i}.png")
    rows = [{"img": str(tmp_path / f"{i}.png"), "label": i} for i in range(2)]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "pics.yaml").write_text(
        "task: pics\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: rows.jsonl\n"
        "test_split: test\noutput_type: multiple_choice\ndoc_to_text: '<image>Colour?'\n"
        "doc_to_target: label\ndoc_to_choice: ['red', 'blue']\ndoc_to_image: img\n"
    )
    out = tmp_path / "run"
    assert main(["run", "--model", "dummy", "--include-path", str(tmp_path), "--tasks", "pics",
                 "--log-samples", "--output-dir", str(out)]) == 0  # fmt: skip
    page = tmp_path / "report.html"
    assert main(["report", str(out), "-o", str(page)]) == 0
    dom, errors = open_page(page, "")
    assert errors == []
    for picture in pictures:
        digest = DocImage(picture).sha256
        assert f"images: {digest[:12]} 5x3" in dom


def _long_provenance_copy(run: Path, into: Path) -> Path:
    """`run` with a long unbroken provenance value, as a long model path or chat template
    hash list would be."""
    shutil.copytree(run, into)
    results = json.loads((into / "results.json").read_text())
    results["provenance"]["backend"]["tokenizer"] = "/very/long/path/" + "x" * 600
    (into / "results.json").write_text(json.dumps(results))
    return into


@pytest.mark.slow
def test_the_page_wraps_provenance_shows_choices_and_draws_plots_before_load(two_runs, tmp_path):
    from playwright.sync_api import sync_playwright

    a, b = two_runs
    b = _long_provenance_copy(b, tmp_path / "seed2long")
    page = tmp_path / "report.html"
    assert main(["report", str(a), str(b), "-o", str(page)]) == 0
    records = [
        json.loads(line)
        for line in (a / "samples_parity_mc_same_split.jsonl").read_text().splitlines()
    ]
    record = next(r for r in records if r["doc_id"] == 0)
    gold = int(record["target"])
    choices = [request["arg_1"] for request in record["arguments"].values()]
    scores = [float(r[0]) for r in record["filtered_resps"]]

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium(),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        tab = browser.new_page(viewport={"width": 1280, "height": 900})
        tab.goto(page.as_uri(), wait_until="load")
        # Plots are drawn by the load event, so a screenshot or print taken then shows them.
        assert tab.evaluate("document.querySelectorAll('svg.chart').length") > 0
        shot = tab.locator("#forest").screenshot()
        from io import BytesIO

        from PIL import Image

        pixels = Image.open(BytesIO(shot)).convert("L")
        assert sum(1 for v in pixels.getdata() if v < 200) > 500, "the forest plot is blank"
        tab.emulate_media(media="print")
        pdf = tab.pdf()
        assert (
            len(pdf) > 10_000 and tab.evaluate("document.querySelectorAll('svg.chart').length") > 0
        )
        tab.emulate_media(media="screen")

        # "What differs": the long value wraps inside its column, the last column stays on screen.
        tab.wait_for_selector('body[data-ready="1"]', timeout=120_000)
        width = tab.evaluate("document.documentElement.clientWidth")
        cells = tab.locator("table.differs td")
        assert cells.count() >= 3
        right = max(
            cells.nth(i).bounding_box()["x"] + cells.nth(i).bounding_box()["width"]
            for i in range(cells.count())
        )
        assert right <= width

        # Rows whose statistics could not all be estimated are marked, with their footnotes.
        assert main(["compare", str(a), str(b), "--json", str(tmp_path / "c.json")]) == 0
        noted = [
            c for c in json.loads((tmp_path / "c.json").read_text())["comparisons"] if "note" in c
        ]
        assert noted, "the dummy runs score 0 on every generation doc in both runs"
        footnotes = tab.locator("#comparisons ul.footnotes li")
        assert footnotes.count() == len(noted)
        assert noted[0]["note"] in footnotes.nth(0).inner_text()
        intervals = tab.locator("#comparisons td.ci").all_inner_texts()
        assert sum(text.endswith("†") for text in intervals) == len(noted)
        assert "[0.0000, 0.0000]" not in intervals

        # A multiple-choice sample: the target as its choice text, gold and picked marked,
        # log-likelihoods rounded with their full precision on hover.
        sample = tab.locator('details.sample[data-task="parity_mc_same_split"][data-doc="0"]')
        sample.locator("summary").click()
        body = sample.locator(".body")
        assert body.locator("pre.target").inner_text() == f"#{gold} {json.dumps(choices[gold])}"
        gold_row = body.locator("tr.gold")
        assert gold_row.count() == 1 and gold_row.get_attribute("data-choice") == str(gold)
        assert gold_row.locator(".choice").inner_text() == choices[gold].strip()
        picked = body.locator(f'td.picked[data-run="{a.name}"]')
        row = picked.locator("xpath=..").get_attribute("data-choice")
        assert row == str(scores.index(max(scores)))
        number = picked.locator(".n")
        assert float(number.get_attribute("title")) == max(scores)
        assert number.inner_text() == f"{max(scores):.4f}"
        assert record["filtered_resps"][0][0] not in body.inner_text()  # no raw digits shown
        browser.close()


@pytest.mark.slow
def test_the_report_shows_how_generations_ended_and_filters_on_it(tmp_path):
    from fixtures import reasoning_runs

    n = 12
    reasoning_runs.write_task(tmp_path, n)
    # Per run, the docs whose generation hit the token cap, and those of them still thinking.
    ended = {
        "capped": {"truncated": {0, 1, 2, 3, 4}, "unclosed": {0, 1}},
        "roomy": {"truncated": {5}, "unclosed": set()},
    }
    runs = [
        reasoning_runs.replay_run(tmp_path, name, n, docs["truncated"], docs["unclosed"])
        for name, docs in ended.items()
    ]
    page = tmp_path / "report.html"
    assert main(["report", *map(str, runs), "-o", str(page)]) == 0

    for how in ("truncated", "unclosed"):
        dom, errors = open_page(page, f"#ending={how}")
        assert errors == []
        # Each run's rates, with the counts this test made.
        for name, docs in ended.items():
            cells = dict(
                re.findall(rf'<td class="num ({how})" data-run="{name}">([^<]*)</td>', dom)
            )
            count = len(docs[how])
            assert cells[how] == f"{100 * count / n:.1f}% ({count}/{n})"
        # The browser lists exactly the docs that some run ended that way.
        pattern = r'<details class="sample" data-task="think_cmp" data-doc="(\d+)"'
        shown = {int(doc) for doc in re.findall(pattern, dom)}
        assert shown == set().union(*(docs[how] for docs in ended.values()))


LINK = "<a href='https://evil.example/'>click</a><img src=x onerror=alert(1)>"


def _hostile_run(folder: Path, seed: int, n: int) -> Path:
    """A run folder (assay's layout) whose task name and cluster values hold markup."""
    import random

    task = f"task {LINK}"
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    records = []
    for doc_id in range(n):
        prompt = "Q" * (10 + doc_id) + "\nA:"
        acc = float(rng.random() < 0.5)
        records.append(
            {"doc_id": doc_id, "doc": {"q": doc_id}, "target": "0", "filter": "none",
             "arguments": {"gen_args_0": {"arg_0": prompt, "arg_1": " x"}},
             "resps": [[["-1.0", "False"]]], "filtered_resps": [["-1.0", "False"]],
             "metrics": ["acc"], "acc": acc, "cluster": f"c{doc_id % 2} {LINK}",
             "doc_hash": str(doc_id), "prompt_hash": prompt, "target_hash": "0"}
        )  # fmt: skip
    from assay.results.layout import safe_name

    lines = "".join(json.dumps(r) + "\n" for r in records)
    (folder / f"samples_{safe_name(task)}.jsonl").write_text(lines)
    mean = sum(r["acc"] for r in records) / n
    results = {
        "results": {task: {"alias": task, "acc,none": mean, "acc_stderr,none": 0.1}},
        "configs": {task: {"task": task}},
        "n-samples": {task: {"original": n, "effective": n}},
        "config": {"model": "synthetic", "model_args": f"seed={seed}"},
    }
    (folder / "results.json").write_text(json.dumps(results))
    return folder


def test_task_charts_count_what_the_samples_hold():
    from assay.results.report import task_charts

    view = {"metrics": {"acc": 1.0}, "arguments": {}, "cluster": "c1"}
    entries = [
        {"runs": [view, {**view, "metrics": {"acc": 0.0}}]},
        {"runs": [{**view, "cluster": "c2"}, None]},
    ]
    charts = task_charts("t", "acc", entries, ["a", "b"])
    distribution = charts["distribution"]
    assert distribution["categories"] == ["0", "1"]
    assert [s["values"] for s in distribution["series"]] == [[0, 2], [1, 0]]
    by_cluster = charts["by_cluster"]
    assert by_cluster["categories"] == ["c1", "c2"]
    assert [s["values"] for s in by_cluster["series"]] == [[1.0, 1.0], [0.0, None]]


@pytest.mark.slow
def test_task_names_labels_and_clusters_with_markup_show_as_text(tmp_path):
    """Names come from task files, run labels from the command line and clusters from the
    data: in tables and charts they show as written and never become links, images or script."""
    from playwright.sync_api import sync_playwright

    runs = [str(_hostile_run(tmp_path / f"run{seed}", seed, 24)) for seed in (1, 2)]
    page = tmp_path / "report.html"
    labels = f"a {LINK},b"
    assert main(["report", *runs, "--labels", labels, "-o", str(page)]) == 0
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium(),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        tab = browser.new_page()
        dialogs: list[str] = []
        tab.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        tab.goto(page.as_uri())
        tab.wait_for_selector('body[data-plotted="1"][data-ready="1"]', timeout=120_000)
        assert tab.evaluate("document.querySelectorAll('main a, main img').length") == 0
        assert tab.evaluate("document.querySelectorAll('#plots svg.chart').length") == 3
        assert tab.evaluate("document.querySelectorAll('#forest g.errorbar').length") == 1
        # Each chart names the task, the runs and the clusters in full (titles, hover texts).
        texts = tab.evaluate(
            "[...document.querySelectorAll('svg.chart title')].map((t) => t.textContent)"
        )
        assert any(t == f"task {LINK}: acc per doc" for t in texts)
        assert f"a {LINK}" in texts
        assert any(t.startswith(f"c0 {LINK}") or t == f"c0 {LINK}" for t in texts)
        assert LINK in tab.locator("#summary").inner_text()
        browser.close()
    assert dialogs == []
