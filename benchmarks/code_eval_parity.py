"""assay's code scores against evaluate's `code_eval`, doc by doc, on the same completions.

evaluate's code_eval metric (the one lm-eval's humaneval and mbpp YAMLs load) is not on PyPI
and its hub copy needs the network, so this script takes a folder holding it (code_eval.py
and execute.py, e.g. extracted from a checkout of huggingface/evaluate's metrics/code_eval)
and loads it with `evaluate.load(<folder>)`. Code execution is allowed for this process only.

Honest completions of five classes (correct, wrong, exception, timeout: a loop that never
ends, slow: right but returns after 3.5 s, past code_eval's 3 s) are scored

- by code_eval, as lm-eval builds its inputs (humaneval: header + completion against the
  tests and `check(entry_point)`; mbpp: the completion against the three asserts);
- by assay, through lm-eval's own humaneval.yaml (one greedy sample, pass@1),
  humaneval_64.yaml (8 samples per doc: pass@2 and pass@8, the ks 8 samples allow) and
  mbpp.yaml, on local rows, and through assay's built-in humaneval_64 (8 samples) and mbpp, in
  the sandbox `--sandbox` names.

It prints, per route, the programs of each class, how many verdicts agree (passed / failed /
timed out) and pass@k both sides, per doc and on average. Then a few programs on which the
two differ by design, or share a limit, each run on both sides.

    python benchmarks/code_eval_parity.py --code-eval-dir /tmp/code_eval [--sandbox auto]

Exit status 1 when an honest program's verdict or a doc's pass@k differs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.models.dummy import DummyLM
from assay.requests.types import GenerateRequest
from assay.run.api import evaluate
from assay.sandbox import Limits, SandboxPolicy, run_many
from assay.sandbox.programs import CODE_EVAL_TIMEOUT_S, STARTUP_S

HUMANEVAL_SAMPLES = 8
BUILTIN_KS = [2, 8]
"""humaneval_64's ks (lm-eval's YAML and the built-in task) that 8 samples allow; humaneval's
own k is 1."""

SLOW = "import time\ntime.sleep(3.5)\n"
"""Past code_eval's 3 s of run time, well inside assay's kill time: both must say timed out."""


@dataclass(frozen=True)
class Problem:
    """A function to write, its right body and its checks."""

    name: str
    signature: str
    body: str
    wrong: str
    checks: tuple[str, ...]

    def completions(self, classes: Sequence[str]) -> list[tuple[str, str]]:
        """(class, function body) for each class, each text distinct (a numbered comment)."""
        bodies = {
            "correct": self.body,
            "wrong": self.wrong,
            "exception": "    return undefined_name\n",
            "syntax": "    return (\n",
            "timeout": "    while True:\n        pass\n",
            "slow": "\n".join("    " + line for line in SLOW.splitlines()) + "\n" + self.body,
        }
        return [(kind, f"    # sample {i}\n" + bodies[kind]) for i, kind in enumerate(classes)]


PROBLEMS = [
    Problem("add", "add(a, b)", "    return a + b\n", "    return a - b\n",
            ("add(2, 3) == 5", "add(0, 0) == 0", "add(-1, 1) == 0")),
    Problem("square", "square(x)", "    return x * x\n", "    return x + x\n",
            ("square(3) == 9", "square(-2) == 4", "square(0) == 0")),
    Problem("first", "first(xs)", "    return xs[0]\n", "    return xs[-1]\n",
            ("first([1, 2]) == 1", "first('ab') == 'a'", "first([3]) == 3")),
    Problem("count_a", "count_a(s)", "    return s.count('a')\n", "    return len(s)\n",
            ("count_a('banana') == 3", "count_a('') == 0", "count_a('xyz') == 0")),
]  # fmt: skip

HUMANEVAL_MIX = [
    ["correct"] * 8,
    ["wrong", "wrong", "exception"] + ["correct"] * 5,
    ["timeout", "correct", "correct", "wrong", "syntax", "exception", "exception", "slow"],
    ["exception", "wrong", "wrong", "wrong", "wrong", "syntax", "timeout", "slow"],
]
"""Classes of each humaneval problem's 8 samples (pass counts 8, 5, 2 and 0); the first
ones, what humaneval.yaml's single greedy sample gets, are of four classes."""

MBPP_CLASSES = ["correct", "wrong", "exception", "syntax", "timeout", "slow"]
"""One mbpp doc per (problem, class) pair below, one completion each."""


def humaneval_rows() -> list[dict[str, Any]]:
    rows = []
    for n, p in enumerate(PROBLEMS):
        test = "def check(candidate):\n" + "".join(
            f"    assert {c.replace(p.name + '(', 'candidate(', 1)}\n" for c in p.checks
        )
        rows.append({
            "task_id": f"parity/{n}",
            "prompt": f'def {p.signature}:\n    """{p.name} (problem {n})."""\n',
            "canonical_solution": p.body,
            "test": test,
            "entry_point": p.name,
        })  # fmt: skip
    return rows


def mbpp_docs() -> list[tuple[str, Problem, str]]:
    """(class, problem, whole program) per mbpp doc."""
    docs = []
    for i, kind in enumerate(MBPP_CLASSES * 2):
        p = PROBLEMS[i % len(PROBLEMS)]
        [(_, body)] = p.completions([kind])
        docs.append((kind, p, f"def {p.signature}:\n" + body))
    return docs


def mbpp_rows() -> list[dict[str, Any]]:
    return [
        {"task_id": 500 + i, "text": f"Write {p.name} (problem {i}).", "code": "",
         "test_list": [f"assert {c}" for c in p.checks]}
        for i, (_, p, _) in enumerate(mbpp_docs())
    ]  # fmt: skip


class Table(DummyLM):
    """Answers the prompt holding "(problem N)" with completion N's `sample_index`-th text."""

    def __init__(self, answers: dict[int, list[str]]) -> None:
        super().__init__()
        self.answers = answers

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str]:
        out = []
        for request in requests:
            n = int(str(request.prompt).rsplit("(problem ", 1)[1].split(")")[0])
            out.append(self.answers[n][request.sample_index])
        return out


# --- code_eval's side -----------------------------------------------------------------------


def load_code_eval(folder: Path) -> tuple[Any, Any]:
    """evaluate's code_eval metric from `folder`, and its module's pass@k estimator."""
    os.environ["HF_ALLOW_CODE_EVAL"] = "1"  # this process only: the metric refuses without it
    import evaluate

    metric = evaluate.load(str(folder))
    module = importlib.import_module(type(metric).__module__)
    return metric, module.estimate_pass_at_k


def code_eval_side(
    metric: Any, estimator: Any, predictions: list[list[str]], references: list[str],
    ks: Sequence[int],
) -> tuple[list[list[str]], list[dict[int, float]]]:  # fmt: skip
    """code_eval's verdict per program ("passed", "failed", "timed out") and pass@k per doc."""
    import numpy as np

    _, results = metric.compute(predictions=predictions, references=references, k=list(ks))
    verdicts, per_doc = [], []
    for i, candidates in enumerate(predictions):
        ran = [r for _, r in sorted(results[i], key=lambda pair: pair[0])]
        verdicts.append([_hf_kind(r["result"]) for r in ran])
        c = sum(r["passed"] for r in ran)
        n = len(candidates)
        per_doc.append({k: float(estimator(np.array([n]), np.array([c]), k)[0]) for k in ks})
    return verdicts, per_doc


def _hf_kind(result: str) -> str:
    return result if result in ("passed", "timed out") else "failed"


def _assay_kind(outcome: str) -> str:
    return {"passed": "passed", "timed_out": "timed out"}.get(outcome, "failed")


# --- assay's side ---------------------------------------------------------------------------

BUILTIN = """\
from dataclasses import replace

from assay.catalog.humaneval import TASKS_TABLE as HUMANEVAL
from assay.catalog.mbpp import TASKS_TABLE as MBPP

ROWS = {rows}


def loader(name):
    return lambda **_: {{"test": ROWS[name]}}


TASKS_TABLE = [
    replace(HUMANEVAL[1], name="builtin_humaneval", hf_repo=None, num_samples={samples},
            dataset_loader=loader("humaneval")),
    replace(MBPP[0], name="builtin_mbpp", hf_repo=None, dataset_loader=loader("mbpp")),
]
"""


def assay_side(
    lm: DummyLM, task: str, folder: Path, sandbox: str, metrics: Sequence[str],
    **kwargs: Any,
) -> tuple[list[list[str]], list[dict[str, float]]]:  # fmt: skip
    """assay's verdict per program and each doc's `metrics`, in doc order."""
    out = folder / f"out_{task}"
    evaluate(
        lm, task, confirm_run_unsafe_code=True, sandbox=sandbox, output_dir=out,
        log_samples=True, cache=False, show_progress=False, **kwargs,
    )  # fmt: skip
    samples = [
        json.loads(line) for line in (out / f"samples_{task}.jsonl").read_text().splitlines()
    ]
    samples.sort(key=lambda s: s["doc_id"])
    verdicts = [[_assay_kind(e["outcome"]) for e in s["executions"]] for s in samples]
    return verdicts, [{m: float(s[m]) for m in metrics} for s in samples]


def lm_eval_yaml(folder: Path, name: str, include: Path, rows: list[dict], extra: str) -> None:
    (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / f"{name}.yaml").write_text(
        f"include: {include}\ntask: {name}\ndataset_path: json\ndataset_name: null\n"
        f"dataset_kwargs:\n  data_files:\n    test: {name}.jsonl\n{extra}"
    )


# --- comparison -----------------------------------------------------------------------------


@dataclass
class Route:
    """One assay route compared with code_eval."""

    name: str
    classes: list[list[str]]
    hf_verdicts: list[list[str]]
    assay_verdicts: list[list[str]]
    hf_scores: list[dict[int, float]]
    assay_scores: list[dict[str, float]]
    ks: Sequence[int]

    def disagreements(self) -> list[str]:
        found = []
        for doc, (h, a) in enumerate(zip(self.hf_verdicts, self.assay_verdicts, strict=True)):
            if h != a:
                found.append(f"{self.name} doc {doc}: code_eval {h} / assay {a}")
            for k in self.ks:
                hf, ours = self.hf_scores[doc][k], self.assay_scores[doc][f"pass@{k}"]
                if abs(hf - ours) > 1e-12:
                    found.append(f"{self.name} doc {doc} pass@{k}: code_eval {hf} / assay {ours}")
        return found

    def row(self) -> str:
        programs = Counter(kind for doc in self.classes for kind in doc)
        pairs = [
            (h, a)
            for hs, as_ in zip(self.hf_verdicts, self.assay_verdicts, strict=True)
            for h, a in zip(hs, as_, strict=True)
        ]
        agree = sum(h == a for h, a in pairs)
        means = []
        for k in self.ks:
            hf = sum(d[k] for d in self.hf_scores) / len(self.hf_scores)
            ours = sum(d[f"pass@{k}"] for d in self.assay_scores) / len(self.assay_scores)
            same = sum(
                abs(h[k] - a[f"pass@{k}"]) <= 1e-12
                for h, a in zip(self.hf_scores, self.assay_scores, strict=True)
            )
            means.append(f"pass@{k} {hf:.4f} / {ours:.4f} ({same}/{len(self.hf_scores)} docs)")
        classes = ", ".join(f"{kind} {programs[kind]}" for kind in sorted(programs))
        return (
            f"| {self.name} | {len(self.classes)} | {classes} | {agree}/{len(pairs)} | "
            f"{'; '.join(means)} |"
        )


def _metric_keys(metrics: dict[str, float]) -> dict[str, float]:
    """pass@k keys as assay's samples hold them ("pass_at_1" for mbpp)."""
    return {("pass@1" if key == "pass_at_1" else key): value for key, value in metrics.items()}


HOSTILE = {
    "sys.exit(0) before a wrong answer": "import sys\nsys.exit(0)\n",
    "os._exit(0) before a wrong answer": "import os\nos._exit(0)\n",
    "atexit handler exits 0": "import atexit, os\natexit.register(lambda: os._exit(0))\n",
    "excepthook exits 0": "import os, sys\nsys.excepthook = lambda *a: os._exit(0)\n",
    "forges the verdict from its own interpreter (frames)": (
        "import os, sys\n"
        "f = sys._getframe()\n"
        "while f is not None:\n"
        "    done = f.f_locals.get('done')\n"
        "    result = f.f_locals.get('result')\n"
        "    if isinstance(done, bytes):\n"
        "        os.write(2, done)\n"
        "        os._exit(0)\n"
        "    if hasattr(result, 'append'):\n"
        "        result.append('passed')\n"
        "    f = f.f_back\n"
    ),
}
"""Code run before a wrong `add`: each must fail on both sides, except the last, which reads
the verdict from the interpreter it shares with the checks: code_eval's result list is in its
frames; assay's nonce is in no frame (its bootstrap's audit hook holds it)."""

DIFFERENT = {
    "right, after calling os.getcwd()": "import os\nos.getcwd()\n",
    "right, after exit handlers are looked up": "assert callable(exit)\n",
    "right, after 20 MB of output": "print('x' * (20 * 2**20))\n",
}
"""Code run before a right `add`: code_eval's in-process guard (os.getcwd, exit ... set to
None) fails the first two; assay's 16 MiB output cap fails the third."""

ADD_CHECKS = "\nassert add(2, 3) == 5\nassert add(0, 0) == 0\n"


def differences(metric: Any, sandbox: str) -> list[str]:
    """One line per program of HOSTILE and DIFFERENT: code_eval's verdict and assay's."""
    programs = {name: code + "def add(a, b):\n    return a - b\n" for name, code in HOSTILE.items()}
    programs |= {
        name: code + "def add(a, b):\n    return a + b\n" for name, code in DIFFERENT.items()
    }
    texts = [code + ADD_CHECKS for code in programs.values()]
    _, hf = metric.compute(predictions=[[t] for t in texts], references=[""] * len(texts), k=[1])
    limits = Limits(timeout_s=CODE_EVAL_TIMEOUT_S + STARTUP_S, run_s=CODE_EVAL_TIMEOUT_S)
    ours = run_many(texts, limits, SandboxPolicy(sandbox))  # type: ignore[arg-type]
    return [
        f"| {name} | {hf[i][0][1]['result'][:40]!s} | {r.outcome}"
        f"{f' ({r.detail})' if r.detail else ''} |"
        for i, (name, r) in enumerate(zip(programs, ours, strict=True))
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--code-eval-dir",
        type=Path,
        required=True,
        help="folder holding evaluate's code_eval metric (code_eval.py, execute.py)",
    )
    parser.add_argument("--sandbox", default="auto", help="assay's --sandbox (default auto)")
    args = parser.parse_args(argv)  # fmt: skip
    if not (args.code_eval_dir / "code_eval.py").is_file():
        print(f"--code-eval-dir {args.code_eval_dir}: no code_eval.py there.", file=sys.stderr)
        return 2
    import lm_eval

    lm_eval_tasks = Path(lm_eval.__file__).parent / "tasks"
    metric, estimator = load_code_eval(args.code_eval_dir)

    he_rows = humaneval_rows()
    he = [p.completions(mix) for p, mix in zip(PROBLEMS, HUMANEVAL_MIX, strict=True)]
    he_lm = Table({n: [body for _, body in doc] for n, doc in enumerate(he)})
    he_classes = [[kind for kind, _ in doc] for doc in he]
    he_programs = [
        [row["prompt"] + body for _, body in doc] for row, doc in zip(he_rows, he, strict=True)
    ]
    he_tests = [f"{row['test']}\ncheck({row['entry_point']})" for row in he_rows]
    he_hf = code_eval_side(metric, estimator, he_programs, he_tests, BUILTIN_KS)
    he_first_hf = code_eval_side(metric, estimator, [p[:1] for p in he_programs], he_tests, [1])
    mb = mbpp_docs()
    mb_rows = mbpp_rows()
    mb_lm = Table({n: [program] for n, (_, _, program) in enumerate(mb)})
    mb_classes = [[kind] for kind, _, _ in mb]
    mb_hf = code_eval_side(
        metric, estimator, [[program] for _, _, program in mb],
        ["\n".join(row["test_list"]) for row in mb_rows], [1],
    )  # fmt: skip

    routes = []
    with tempfile.TemporaryDirectory(prefix="assay-parity-") as tmp:
        folder = Path(tmp)
        humaneval_yamls = lm_eval_tasks / "humaneval"
        lm_eval_yaml(folder, "humaneval_parity", humaneval_yamls / "humaneval.yaml", he_rows, "")
        lm_eval_yaml(
            folder, "humaneval_64_parity", humaneval_yamls / "humaneval_64.yaml", he_rows,
            f"repeats: {HUMANEVAL_SAMPLES}\n",
        )  # fmt: skip
        lm_eval_yaml(folder, "mbpp_parity", lm_eval_tasks / "mbpp" / "mbpp.yaml", mb_rows, "")
        include = [folder, lm_eval_tasks / "humaneval", lm_eval_tasks / "mbpp"]
        (folder / "builtin_tasks.py").write_text(
            BUILTIN.format(
                rows=repr({"humaneval": he_rows, "mbpp": mb_rows}), samples=HUMANEVAL_SAMPLES
            )
        )
        for name, lm, classes, hf, ks_, task, metrics, kwargs in [
            ("lm-eval humaneval.yaml", he_lm, [c[:1] for c in he_classes], he_first_hf, [1],
             "humaneval_parity", ["pass@1"], {"include_path": include}),
            ("lm-eval humaneval_64.yaml (8 samples)", he_lm, he_classes, he_hf, BUILTIN_KS,
             "humaneval_64_parity", [f"pass@{k}" for k in BUILTIN_KS], {"include_path": include}),
            ("built-in humaneval_64 (8 samples)", he_lm, he_classes, he_hf, BUILTIN_KS,
             "builtin_humaneval", [f"pass@{k}" for k in BUILTIN_KS],
             {"custom_tasks": folder / "builtin_tasks.py"}),
            ("lm-eval mbpp.yaml", mb_lm, mb_classes, mb_hf, [1], "mbpp_parity", ["pass_at_1"],
             {"include_path": include}),
            ("built-in mbpp", mb_lm, mb_classes, mb_hf, [1], "builtin_mbpp", ["pass_at_1"],
             {"custom_tasks": folder / "builtin_tasks.py"}),
        ]:  # fmt: skip
            verdicts, scores = assay_side(lm, task, folder, args.sandbox, metrics, **kwargs)
            routes.append(
                Route(name, classes, hf[0], verdicts, hf[1], [_metric_keys(s) for s in scores], ks_)
            )

    print(f"assay --sandbox {args.sandbox} against code_eval from {args.code_eval_dir}")
    print("\n| route | docs | programs per class | same verdict | pass@k code_eval / assay |")
    print("|---|---|---|---|---|")
    for route in routes:
        print(route.row())
    print("\n| program | code_eval | assay |\n|---|---|---|")
    for line in differences(metric, args.sandbox):
        print(line)
    problems = [line for route in routes for line in route.disagreements()]
    for line in problems:
        print("DIFFERS:", line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
