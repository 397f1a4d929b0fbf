"""The run's torch seed reaches torch when only the deferred model load imports it.

`assay run` seeds torch's global generator before its first request, as lm-eval does. With the
`hf` backend, torch is first imported by the model's load (in a background thread while the
run plans its requests, or at the first request with ASSAY_OVERLAP_LOAD=0), and a load may
draw from the generator itself: the seed is applied once the backend is built, so the first
request sees the seeded generator either way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_TASK = """\
task: toy_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {rows}
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{q}}}}\\nAnswer:"
doc_to_choice: ["yes", "no"]
doc_to_target: "{{{{label}}}}"
metric_list:
  - metric: acc
"""

# A load that draws from torch's generator (as the random init of weights a checkpoint lacks
# does), torch's next draws recorded at the first loglikelihood call, then the CLI.
_PROBE = """
import json, sys
assert "torch" not in sys.modules, "torch imported before the run"
from assay.models.hf.model import HuggingFaceLM
init = HuggingFaceLM.__init__
def drawing_init(self, *args, **kwargs):
    import torch
    torch.rand(3)
    init(self, *args, **kwargs)
HuggingFaceLM.__init__ = drawing_init
inner = HuggingFaceLM.loglikelihood
def first(self, requests):
    if not hasattr(HuggingFaceLM, "_drawn"):
        import torch
        HuggingFaceLM._drawn = torch.rand(4).tolist()
        print("DRAWN=" + json.dumps(HuggingFaceLM._drawn), flush=True)
    return inner(self, requests)
HuggingFaceLM.loglikelihood = first
from assay.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("overlap", ["1", "0"], ids=["background_load", "load_at_first_request"])
def test_the_torch_seed_reaches_a_model_loaded_after_planning(tmp_path, tiny_model_dir, overlap):
    import torch

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    rows = tasks / "rows.jsonl"
    rows.write_text('{"q": "sky blue?", "label": 0}\n{"q": "fire cold?", "label": 1}\n')
    (tasks / "toy_mc.yaml").write_text(_TASK.format(rows=rows), encoding="utf-8")
    args = ["run", "--model", "hf", "--model-args", f"pretrained={tiny_model_dir},device=cpu"]
    args += ["--tasks", "toy_mc", "--include-path", str(tasks), "--seed", "0,1,77,3"]
    args += ["--no-progress", "--output-dir", str(tmp_path / "out"), "--no-cache"]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "ASSAY_OVERLAP_LOAD": overlap, "HF_HUB_OFFLINE": "1"},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("DRAWN="))
    expected = torch.rand(4, generator=torch.Generator().manual_seed(77)).tolist()
    assert json.loads(line.removeprefix("DRAWN=")) == expected
