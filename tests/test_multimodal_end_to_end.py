"""Docs with images end to end through the CLI: lm-eval YAML (`doc_to_image` as a feature, a
list and a !function) and a Python TaskConfig, on the dummy backend (which takes images and
scores by their content hash).

Expected image references are computed here from the pixels drawn; expected accuracies from
the dummy model asked directly.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from assay import Doc, TaskConfig
from assay.cli.main import main
from assay.images import DocImage
from assay.models.dummy import DummyLM
from assay.requests.types import LoglikelihoodRequest
from assay.run.evaluation import Evaluation
from assay.run.settings import RunSettings
from assay.tasks.registry import Resolved, TaskRequest

COLORS = ["red", "green", "blue", "white"]


def draw(color: str, size=(6, 4)) -> Image.Image:
    image = Image.new("RGB", size, color)
    ImageDraw.Draw(image).line((0, 0, size[0] - 1, size[1] - 1), fill="black")
    return image


def pixels_sha(image: Image.Image) -> str:
    return hashlib.sha256(
        f"{image.mode}:{image.width}x{image.height}:".encode() + image.tobytes()
    ).hexdigest()


YAML = """\
task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: rows.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "<image>What colour is this?\\nAnswer:"
doc_to_target: label
doc_to_choice: "{{{{choices}}}}"
doc_to_image: {images}
metric_list:
  - metric: acc
metadata:
  version: 1.0
"""

UTILS = """
from PIL import Image, ImageDraw


def doc_to_image(row):
    image = Image.new("RGB", (6, 4), row["color"])
    ImageDraw.Draw(image).line((0, 0, 5, 3), fill="black")
    return [image]
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    rows = []
    for i, color in enumerate(COLORS):
        path = tmp_path / f"{color}.png"
        draw(color).save(path)
        rows.append({"img": str(path), "color": color, "choices": COLORS, "label": i})
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "utils.py").write_text(UTILS)
    for name, images in [
        ("by_feature", "img"),
        ("by_list", "[img, img]"),
        ("by_function", "!function utils.doc_to_image"),
        ("by_template", '"{{ [img] }}"'),
    ]:
        (tmp_path / f"{name}.yaml").write_text(YAML.format(name=name, images=images))
    return tmp_path


def run(folder: Path, out: Path, task: str, *extra: str) -> list[dict]:
    code = main(
        ["run", "--include-path", str(folder), "--tasks", task, "--model", "dummy",
         "--output-dir", str(out), "--no-progress", "--log-samples", *extra]
    )  # fmt: skip
    assert code == 0
    lines = (out / f"samples_{task}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def expected_acc(images_per_doc: list[list[Image.Image]]) -> float:
    lm, hits = DummyLM(), 0
    for label, images in enumerate(images_per_doc):
        refs = tuple(DocImage(i) for i in images)
        context = "<image>What colour is this?\nAnswer:"
        scores = lm.loglikelihood([LoglikelihoodRequest(context, " " + c, refs) for c in COLORS])
        best = max(range(len(COLORS)), key=lambda k: scores[k].logprob)
        hits += best == label
    return hits / len(images_per_doc)


@pytest.mark.parametrize(
    ("task", "copies"), [("by_feature", 1), ("by_list", 2), ("by_function", 1), ("by_template", 1)]
)
def test_yaml_doc_to_image_reaches_requests_and_samples_by_reference(
    folder, tmp_path, task, copies
):
    records = run(folder, tmp_path / "out", task)
    for record, color in zip(records, COLORS, strict=True):
        visual = record["arguments"]["gen_args_0"]["arg_2"]["visual"]
        assert visual == [{"sha256": pixels_sha(draw(color)), "size": [6, 4]}] * copies
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    acc = results["results"][task]["acc,none"]
    assert acc == pytest.approx(expected_acc([[draw(c)] * copies for c in COLORS]))


def test_a_changed_image_is_not_served_from_the_cache(folder, tmp_path):
    cache = str(tmp_path / "cache.sqlite")
    first = run(folder, tmp_path / "a", "by_feature", "--cache", cache)
    draw("black").save(folder / "red.png")  # doc 0's picture changes, its text does not
    second = run(folder, tmp_path / "b", "by_feature", "--cache", cache)
    assert first[1]["resps"] == second[1]["resps"]
    assert first[0]["resps"] != second[0]["resps"]
    lm = DummyLM()
    context = "<image>What colour is this?\nAnswer:"
    new = lm.loglikelihood([LoglikelihoodRequest(context, " red", (DocImage(draw("black")),))])
    assert float(second[0]["resps"][0][0][0]) == pytest.approx(new[0].logprob)


def test_python_task_with_pil_images_in_rows(tmp_path):
    rows = [{"color": c, "picture": draw(c), "label": i} for i, c in enumerate(COLORS)]

    def prompt(row, task_name):
        return Doc(
            "<image>What colour is this?\nAnswer:", COLORS, row["label"], images=[row["picture"]]
        )

    config = TaskConfig(
        name="colors",
        prompt_function=prompt,
        dataset_loader=lambda **_: {"validation": rows},
        metrics=["acc"],
    )
    out = tmp_path / "out"
    settings = RunSettings(model="dummy", output_dir=out, log_samples=True, show_progress=False)
    results = Evaluation(Resolved([TaskRequest(config)]), settings).run()
    assert results["results"]["colors"]["acc,none"] == pytest.approx(
        expected_acc([[draw(c)] for c in COLORS])
    )
    text = (out / "samples_colors.jsonl").read_text()
    first = json.loads(text.splitlines()[0])
    # the row's PIL image is written as its reference, never as pixels or a repr with an address
    assert first["doc"]["picture"] == {"sha256": pixels_sha(draw("red")), "size": [6, 4]}
    assert "PIL" not in text


def test_doc_to_image_of_the_wrong_kind_is_refused_naming_the_file(folder, tmp_path, capsys):
    (folder / "bad.yaml").write_text(YAML.format(name="bad", images="3"))
    code = main(["run", "--include-path", str(folder), "--tasks", "bad", "--model", "dummy"])
    assert code == 2
    err = capsys.readouterr().err
    assert "bad.yaml" in err and "'doc_to_image' must be a feature name" in err and "int 3" in err


def test_a_text_only_backend_refuses_image_docs(folder, tmp_path, capsys, tiny_model_dir):
    code = main(
        ["run", "--include-path", str(folder), "--tasks", "by_feature", "--model", "hf",
         "--model-args", f"pretrained={tiny_model_dir}", "--no-progress"]
    )  # fmt: skip
    assert code == 2
    assert (
        "has 1 image(s), but the HuggingFaceLM backend takes text only" in capsys.readouterr().err
    )


def test_a_text_only_backend_is_refused_before_its_model_loads(
    folder, tmp_path, capsys, tiny_model_dir, monkeypatch
):
    from assay.models.hf.model import HuggingFaceLM

    def never(*args, **kwargs):
        raise AssertionError("the model was built before the refusal")

    monkeypatch.setattr(HuggingFaceLM, "__init__", never)
    code = main(
        ["run", "--include-path", str(folder), "--tasks", "by_feature", "--model", "hf",
         "--model-args", f"pretrained={tiny_model_dir}", "--no-progress"]
    )  # fmt: skip
    assert code == 2
    assert (
        "has 1 image(s), but the HuggingFaceLM backend takes text only" in capsys.readouterr().err
    )
