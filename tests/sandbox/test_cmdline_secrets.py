"""A secret on assay's command line is not readable by the programs it runs.

/proc/PID/cmdline is world-readable; under `--sandbox rlimits` and `none` the program runs as
the user, outside any namespace, so it reads every process's command line. assay rewrites the
secret values of its own once parsed (`assay.cli._argv`); the program below reads every
command line it can and prints what it finds reversed, which no output scrubber would catch.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from assay.cli._argv import hidden_command_line

SECRETS = ("sk-planted-arg", "pw-planted-url", "tok-planted-flag")
ARGS = [
    "--model-args",
    f"model=m,api_key={SECRETS[0]},base_url=http://user:{SECRETS[1]}@127.0.0.1:9/v1",
    "--api-key",
    SECRETS[2],
]

SCANNER = textwrap.dedent(
    """\
    import os
    readable, found = 0, []
    for pid in os.listdir('/proc'):
        if pid.isdigit():
            try:
                data = open(f'/proc/{pid}/cmdline', 'rb').read()
            except OSError:
                continue
            readable += 1
            for secret in (b'sk-planted-arg', b'pw-planted-url', b'tok-planted-flag'):
                if secret in data:
                    found.append(secret[::-1].decode())
    print('readable', readable, 'found', found)
    """
)

RUNNER = textwrap.dedent(
    """\
    import sys
    from assay.cli._argv import hide_secrets_in_command_line
    from assay.sandbox import Limits, SandboxPolicy, run_many
    hide = sys.argv[1] == 'hide'
    print('rewritten', hide and hide_secrets_in_command_line(), flush=True)
    code = sys.stdin.read()
    for mode in ('rlimits', 'none'):
        [r] = run_many([code], Limits(timeout_s=10), SandboxPolicy(mode))
        print(mode, r.outcome, r.stdout.strip(), r.stderr.strip(), flush=True)
    """
)


def _scan(hide: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, hide, *ARGS],
        input=SCANNER,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("hide", ["hide", "keep"])
def test_programs_under_rlimits_and_none_cannot_read_a_secret_argument(hide):
    out = _scan(hide)
    lines = out.splitlines()
    assert lines[0] == f"rewritten {hide == 'hide'}"
    runs = [line.split() for line in lines[1:]]
    assert [words[:2] for words in runs] == [["rlimits", "passed"], ["none", "passed"]], out
    assert all(int(words[3]) > 1 for words in runs)  # it read command lines (assay's too)
    reversed_secrets = [s[::-1] for s in SECRETS]
    if hide == "hide":
        assert not any(s in out for s in (*SECRETS, *reversed_secrets)), out
    else:  # the control: the same scan finds the secrets when assay leaves its argv alone
        assert all(s in out for s in reversed_secrets), out


def test_the_rewritten_command_line_keeps_everything_but_the_secrets():
    words = [w.encode() for w in ["python", "-m", "assay", "run", *ARGS, "--limit", "2"]]
    hidden = hidden_command_line(words)
    assert [len(h) <= len(w) for h, w in zip(hidden, words, strict=True)] == [True] * len(words)
    assert hidden[:4] == words[:4] and hidden[-2:] == words[-2:]
    assert hidden[4:-2] == [
        b"--model-args",
        b"model=m,api_key=***,base_url=http://***@127.0.0.1:9/v1",
        b"--api-key",
        b"***",
    ]
    # A secret shorter than the placeholder is cut, never shown.
    assert hidden_command_line([b"api_key=ab"]) == [b"api_key=**"]
    assert hidden_command_line([b"plain", b"words"]) == [b"plain", b"words"]
    # The flag and its value in one word, as argparse also reads it.
    assert hidden_command_line([b"--model_args=model=m,api_key=sk-abcdef12"]) == [
        b"--model_args=model=m,api_key=***"
    ]


def test_the_assay_command_hides_its_secret_arguments_once_parsed():
    """The `assay` entry point (argv=None: the process's own command line) rewrites it; the
    command fails afterwards (unknown task) and the rewrite has happened already."""
    script = (
        "from assay.cli.main import main\n"
        "code = main()\n"
        "print(code, open('/proc/self/cmdline', 'rb').read().replace(b'\\0', b' ').strip())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, "tasks", "show", "--model-args", ARGS[1], "no_such_task"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    code, shown = done.stdout.split(" ", 1)
    assert code == "2", done.stderr
    assert "model=m,api_key=***,base_url=http://***@127.0.0.1:9/v1" in shown
    assert not any(s in shown for s in SECRETS), shown
