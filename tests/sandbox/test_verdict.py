"""A program passes only when its code ran to the end, in every sandbox mode.

Each hostile program below gives a wrong answer and then tries to end the process with a
success status before the failed check is reported: `sys.exit(0)`, `raise SystemExit`,
`os._exit(0)`, an atexit handler, a replaced excepthook, a killed supervisor, a forged
completion line, a fork whose parent leaves cleanly. Under a verdict taken from the exit
status each of these passed; every one must fail, in every mode.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Sequence
from math import comb
from pathlib import Path

import psutil
import pytest
from fixtures.waiting import wait_for
from hostile_programs import HOSTILE
from test_code_tasks import TASKS as BUILTIN

from assay.models.dummy import DummyLM
from assay.requests.types import GenerateRequest
from assay.run.api import evaluate
from assay.sandbox import Limits, SandboxPolicy, run_many
from assay.sandbox.policy import using
from assay.sandbox.programs import count_passing, pass_at_ks

MODES = ["bwrap", "rlimits", "none"]
FAST = Limits(timeout_s=5.0, memory_mb=512)
CHECKS = "\nassert add(1, 2) == 3\nassert add(0, 0) == 0\n"
WRONG = "def add(a, b):\n    return a - b\n"


@pytest.mark.parametrize("mode", MODES)
def test_a_program_that_ends_before_its_checks_return_fails(mode):
    names = list(HOSTILE)
    programs = [HOSTILE[name] + WRONG + CHECKS for name in names]
    honest = ["def add(a, b):\n    return a + b\n" + CHECKS, WRONG + CHECKS]
    results = run_many([*honest, *programs], FAST, SandboxPolicy(mode))  # type: ignore[arg-type]
    right, wrong, *hostile = results
    assert right.passed and right.outcome == "passed", right.stderr
    assert not wrong.passed and wrong.outcome == "failed"
    passed = [name for name, result in zip(names, hostile, strict=True) if result.passed]
    assert passed == []
    assert all(r.outcome != "passed" for r in hostile)
    # The exit status is still 0 for the plain exits: the verdict is not read from it.
    assert hostile[names.index("sys.exit(0)")].returncode == 0
    assert "ended before its code returned" in hostile[names.index("os._exit(0)")].detail


@pytest.mark.parametrize("mode", MODES)
def test_output_and_exit_after_the_checks_returned_still_pass(mode):
    code = (
        "import atexit, os, sys\n"
        "print('out'); print('err', file=sys.stderr)\n"
        "atexit.register(lambda: os._exit(3))\n"
        "def add(a, b):\n    return a + b\n" + CHECKS
    )
    [result] = run_many([code], FAST, SandboxPolicy(mode))  # type: ignore[arg-type]
    assert result.passed and result.stdout == "out\n" and result.stderr == "err\n"


SCANNER = textwrap.dedent(
    """\
    import os
    readable, found = 0, []
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        for name in ('environ', 'cmdline'):
            try:
                data = open(f'/proc/{pid}/{name}', 'rb').read()
            except OSError:
                continue
            readable += 1
            if b'sk-planted' in data:
                found.append((pid, name, data[data.find(b'sk-planted'):][:40]))
    found += [k for k, v in os.environ.items() if 'sk-planted' in v]
    print('readable', readable, 'found', found)
    """
)

RUNNER = textwrap.dedent(
    """\
    import sys
    from assay.sandbox import Limits, SandboxPolicy, run_many
    code = sys.stdin.read()
    for mode in sys.argv[1:]:
        [r] = run_many([code], Limits(timeout_s=10), SandboxPolicy(mode))
        print(mode, r.outcome, r.stdout, r.stderr, flush=True)
    """
)


def test_planted_keys_appear_in_no_output_in_any_mode(tmp_path):
    """assay, started with API keys in its environment, runs a program that reads every
    /proc/PID/environ it can: in no mode does it find them."""
    env = {
        **os.environ,
        "OPENAI_API_KEY": "sk-planted-openai",
        "ANTHROPIC_API_KEY": "sk-planted-anthropic",
        "HF_TOKEN": "sk-planted-hf",
    }
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, *MODES],
        input=SCANNER,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[:2] for line in lines if line.split()[:1] in ([m] for m in MODES)] == [
        [mode, "passed"] for mode in MODES
    ]
    assert "sk-planted" not in done.stdout
    # The scan did read /proc (command lines at least): the test can fail.
    assert all(int(line.split()[3]) >= 1 for line in lines if line.startswith(tuple(MODES)))


DAEMON = textwrap.dedent(
    """\
    import os, sys, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            open('/proc/self/comm', 'w').write('assaydaemon')
            time.sleep(30)  # holds stdout and stderr open
            os._exit(0)
        os._exit(0)
    os.wait()
    print('started', flush=True)
    """
)


@pytest.mark.parametrize("mode", MODES)
def test_a_daemon_holding_stdout_neither_holds_the_run_nor_survives_it(mode):
    [result] = run_many([DAEMON], FAST, SandboxPolicy(mode))  # type: ignore[arg-type]
    # Passed: the run did not wait for the daemon's stdout (it would have timed out).
    assert result.passed and result.stdout == "started\n", result.stderr
    mine = wait_for(lambda: not psutil.Process().children(recursive=True))
    assert mine, psutil.Process().children(recursive=True)
    assert not [p for p in psutil.process_iter(["name"]) if p.info["name"] == "assaydaemon"]


KILLED = textwrap.dedent(
    """\
    import sys
    from assay.sandbox import Limits, SandboxPolicy, run_many
    print('running', flush=True)
    run_many([sys.stdin.read()], Limits(timeout_s=60), SandboxPolicy(sys.argv[1]))
    """
)


@pytest.mark.parametrize("mode", MODES)
def test_kill_9_of_assay_leaves_no_program_and_no_folder(tmp_path, mode):
    # A folder any uid may enter: run as root, the program gets a uid of its own.
    tmp_path = Path(tempfile.mkdtemp(prefix="assay-test-"))
    tmp_path.chmod(0o755)
    try:
        kill_assay_mid_run(tmp_path, mode)
    finally:
        shutil.rmtree(tmp_path)


def kill_assay_mid_run(
    tmp_path: Path, mode: str, python: Sequence[str] = (sys.executable,), **env_extra: str
) -> None:
    """Start assay (`python`, e.g. behind setpriv) running a program that starts two sleepers
    (one in a session of its own), kill -9 assay, and check that no sleeper is left."""
    marker = f"assay-orphan-{uuid.uuid4().hex}"
    program = (
        "import subprocess, sys, time\n"
        f"cmd = [sys.executable, '-c', 'import time; time.sleep(60)', '{marker}']\n"
        "subprocess.Popen(cmd, start_new_session=True)\n"
        "subprocess.Popen(cmd)\n"
        "time.sleep(60)\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path), **env_extra}
    assay = subprocess.Popen(
        [*python, "-c", KILLED, mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert assay.stdin is not None and assay.stdout is not None
    assay.stdin.write(program)
    assay.stdin.close()
    assert assay.stdout.readline() == "running\n"

    def programs() -> list[psutil.Process]:
        return [p for p in psutil.process_iter(["cmdline"]) if marker in (p.info["cmdline"] or [])]

    wait_for(lambda: len(programs()) >= 2)
    assert len(programs()) == 2
    os.kill(assay.pid, signal.SIGKILL)
    assay.wait()
    # The supervisors end their programs, then remove their folders: wait for both (bounded).
    wait_for(lambda: not (programs() or list(tmp_path.glob("assay-sandbox-*"))))
    left = programs()
    for proc in left:
        proc.kill()
    assert left == []
    assert not list(tmp_path.glob("assay-sandbox-*"))


# --- every route: the built-in humaneval_64, lm-eval's humaneval and mbpp YAMLs ---------------

lm_eval = pytest.importorskip("lm_eval")
LM_EVAL_TASKS = Path(lm_eval.__file__).parent / "tasks"

RIGHT_BODY = "    return a + b\n"
HOSTILE_BODIES = [textwrap.indent(code, "    ") + "    return a - b\n" for code in HOSTILE.values()]
ANSWERS = [RIGHT_BODY, *HOSTILE_BODIES]
"""HumanEval completions (the body of `add`): the right one, then every hostile one."""


class Cycling(DummyLM):
    """Answers the n-th request of a call with ANSWERS[n % len(ANSWERS)]."""

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str]:
        return [ANSWERS[i % len(ANSWERS)] for i in range(len(requests))]


class ByAttack(DummyLM):
    """Answers a prompt holding "(attack N)" with answer N (`full`: a whole MBPP program).
    The built-in mbpp's prompt holds its three few-shot examples first: the last mark counts."""

    def __init__(self, full: bool) -> None:
        super().__init__()
        self.full = full

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str]:
        out = []
        for request in requests:
            n = int(str(request.prompt).rsplit("(attack ", 1)[1].split(")")[0])
            out.append("def add(a, b):\n" + ANSWERS[n] if self.full else ANSWERS[n])
        return out


BUILTIN_ROWS = """\
import json
from dataclasses import replace
from pathlib import Path

from assay.catalog.humaneval import TASKS_TABLE as HUMANEVAL
from assay.catalog.mbpp import TASKS_TABLE as MBPP


def rows(name):
    data = json.loads((Path(__file__).parent / f"{name}.json").read_text())
    return lambda **_: {"test": data}


TASKS_TABLE = [
    replace(HUMANEVAL[0], name="attack_humaneval", hf_repo=None, dataset_loader=rows("he")),
    replace(MBPP[0], name="attack_mbpp", hf_repo=None, dataset_loader=rows("mbpp")),
]
"""
"""The built-in humaneval (greedy) and mbpp on the rows the lm-eval YAMLs get below."""


def scored(
    lm: DummyLM, task: str, metric: str, folder: Path, mode: str, **kwargs: object
) -> tuple[float, list]:
    out = folder / "out"
    results = evaluate(
        lm,
        task,
        confirm_run_unsafe_code=True,
        sandbox=mode,  # type: ignore[arg-type]
        output_dir=out,
        log_samples=True,
        cache=False,
        show_progress=False,
        **kwargs,  # type: ignore[arg-type]
    )
    lines = (out / f"samples_{task}.jsonl").read_text().splitlines()
    assert metric in results["results"][task], results["results"][task]
    return results["results"][task][metric], [json.loads(line) for line in lines]


def local_yaml(folder: Path, name: str, include: Path, rows: list[dict]) -> None:
    (folder / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / f"{name}.yaml").write_text(
        f"include: {include}\ntask: {name}\ndataset_path: json\ndataset_name: null\n"
        "dataset_kwargs:\n  data_files:\n    test: rows.jsonl\n"
    )


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_every_route_scores_every_hostile_program_zero(tmp_path, mode):
    # Built-in humaneval_64: 64 samples cycle over the answers; only the right one passes.
    tasks = tmp_path / "example_tasks.py"
    tasks.write_text(BUILTIN)
    (tmp_path / "builtin").mkdir()
    value, samples = scored(
        Cycling(),
        "example_humaneval_64",
        "pass@2,create_test",
        tmp_path / "builtin",
        mode,
        custom_tasks=tasks,
    )
    rights = sum(1 for i in range(64) if i % len(ANSWERS) == 0)
    assert value == pytest.approx(1 - comb(64 - rights, 2) / comb(64, 2))
    outcomes = [e["outcome"] for s in samples for e in s["executions"]]
    assert outcomes.count("passed") == rights and len(outcomes) == 64

    # lm-eval's humaneval.yaml (its code_eval, served sandboxed), one row per answer.
    prompt = 'def add(a: int, b: int) -> int:\n    """Return a + b (attack {n})."""\n'
    test = (
        "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(0, 0) == 0\n"
    )
    he_rows = [
        {"task_id": f"t/{n}", "prompt": prompt.format(n=n), "canonical_solution": RIGHT_BODY,
         "test": test, "entry_point": "add"}
        for n in range(len(ANSWERS))
    ]  # fmt: skip
    folder = tmp_path / "humaneval"
    folder.mkdir()
    local_yaml(folder, "humaneval_local", LM_EVAL_TASKS / "humaneval" / "humaneval.yaml", he_rows)
    value, samples = scored(
        ByAttack(full=False),
        "humaneval_local",
        "pass@1,create_test",
        folder,
        mode,
        include_path=[folder, LM_EVAL_TASKS / "humaneval"],
    )
    by_row = {s["doc"]["task_id"]: s["pass@1"] for s in samples}
    assert by_row == {f"t/{n}": float(n == 0) for n in range(len(ANSWERS))}
    assert value == pytest.approx(1 / len(ANSWERS))

    # lm-eval's mbpp.yaml: the answer is a whole program.
    checks = ["assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert add(-1, 1) == 0"]
    rows = [
        {"task_id": 100 + n, "text": f"Add two numbers (attack {n}).", "code": "",
         "test_list": checks}
        for n in range(len(ANSWERS))
    ]  # fmt: skip
    folder = tmp_path / "mbpp"
    folder.mkdir()
    local_yaml(folder, "mbpp_local", LM_EVAL_TASKS / "mbpp" / "mbpp.yaml", rows)
    value, samples = scored(
        ByAttack(full=True),
        "mbpp_local",
        "pass_at_1,none",
        folder,
        mode,
        include_path=[folder, LM_EVAL_TASKS / "mbpp"],
    )
    by_row = {s["doc"]["task_id"]: s["pass_at_1"] for s in samples}
    assert by_row == {100 + n: float(n == 0) for n in range(len(ANSWERS))}

    # The built-in humaneval and mbpp, on the same rows.
    folder = tmp_path / "builtin_rows"
    folder.mkdir()
    (folder / "he.json").write_text(json.dumps(he_rows))
    (folder / "mbpp.json").write_text(json.dumps(rows))
    (folder / "attack_tasks.py").write_text(BUILTIN_ROWS)
    for task, metric, full, key, first in (
        ("attack_humaneval", "pass@1,create_test", False, "pass@1", "t/"),
        ("attack_mbpp", "pass_at_1,none", True, "pass_at_1", 100),
    ):
        value, samples = scored(
            ByAttack(full=full), task, metric, folder / task, mode,
            custom_tasks=folder / "attack_tasks.py",
        )  # fmt: skip
        by_row = {s["doc"]["task_id"]: s[key] for s in samples}
        ids = [f"t/{n}" if first == "t/" else 100 + n for n in range(len(ANSWERS))]
        assert by_row == {i: float(n == 0) for n, i in enumerate(ids)}, (task, by_row)
        assert value == pytest.approx(1 / len(ANSWERS))

    # The helpers a run_evals metric calls on its own programs.
    candidates = ["def add(a, b):\n" + answer for answer in ANSWERS]
    with using(SandboxPolicy(mode)):  # type: ignore[arg-type]
        assert [count_passing([c], CHECKS) for c in candidates] == [1] + [0] * len(HOSTILE)
        assert pass_at_ks(candidates, CHECKS, [1]) == {"pass@1": pytest.approx(1 / len(ANSWERS))}
