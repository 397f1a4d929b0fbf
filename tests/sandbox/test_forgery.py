"""A program cannot forge its pass from inside its own interpreter.

The bootstrap's verdict (`_child.py`) is written by an audit hook that alone holds the nonce:
a program that walks the harness's frames (sys._getframe, a traceback's frames, inspect), the
garbage collector, trace functions, ctypes, its own /proc/PID/mem (by name or through a link)
or its parent's memory from a fresh interpreter finds nothing to forge with, in every mode.
Honest programs that use the standard library's frame-reading helpers (namedtuple,
dataclasses, typing, enum, logging, traceback, inspect, warnings) still pass.
"""

from __future__ import annotations

import textwrap

import pytest

from assay.sandbox import Limits, SandboxPolicy, run_many

MODES = ["bwrap", "rlimits", "none"]
LIMITS = Limits(timeout_s=20.0, memory_mb=1024)
WRONG = "def add(a, b):\n    return a - b\n\nassert add(1, 2) == 3\n"
WRITE = "os.write(2, found); os._exit(0)\n"
"""Each attack ends by writing what it found and leaving with status 0."""

SCAN = textwrap.dedent(
    """\
    import os, re
    def scan(pid, mem_path=None):
        found = []
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        with open(mem_path or f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            for line in maps:
                start, end = (int(x, 16) for x in line.split()[0].split("-"))
                if "r" not in line.split()[1] or end - start > 1 << 28:
                    continue
                try:
                    mem.seek(start)
                    data = mem.read(end - start)
                except OSError:
                    continue
                found += re.findall(rb"\\x00assay-sandbox-done [0-9a-f]{16,}\\n", data)
        return found[0]
    """
)

ATTACKS = {
    "caller frames' locals": (
        "import os, sys\n"
        "f = sys._getframe()\n"
        "while f is not None and 'done' not in f.f_locals:\n    f = f.f_back\n"
        "found = f.f_locals['done']\n"
    ),
    "a traceback's frames": (
        "import os\ntry:\n    1 / 0\nexcept ZeroDivisionError as e:\n    f = e.__traceback__.tb_frame\n"
        "while f is not None and 'done' not in f.f_locals:\n    f = f.f_back\n"
        "found = f.f_locals['done']\n"
    ),
    "inspect.stack()": (
        "import inspect, os\n"
        "found = [i.frame.f_locals['done'] for i in inspect.stack() if 'done' in i.frame.f_locals][0]\n"
    ),
    "the garbage collector": (
        "import gc, os\n"
        "cells = [o for o in gc.get_objects() if type(o).__name__ == 'function' and o.__closure__]\n"
        "found = [c.cell_contents for f in cells for c in f.__closure__\n"
        "         if isinstance(c.cell_contents, bytes) and b'done' in c.cell_contents][0]\n"
    ),
    "the guard's own frame, from its refusal's traceback": (
        "import gc, os\n"
        "found = b''\n"
        "try:\n    gc.get_objects()\nexcept BaseException as e:\n    tb = e.__traceback__\n"
        "    while tb is not None:\n"
        "        found = tb.tb_frame.f_locals.get('done', found)\n        tb = tb.tb_next\n"
    ),
    "a str subclass's method run by the guard": (
        "import os, sys\n"
        "stolen = []\n"
        "class Path(str):\n"
        "    def rfind(self, *a):\n"
        "        f = sys._getframe()\n"
        "        while f is not None:\n"
        "            stolen.extend(v for v in f.f_locals.values() if isinstance(v, bytes))\n"
        "            f = f.f_back\n"
        "        return str.rfind(self, *a)\n"
        "try:\n    open(Path('/nonexistent/x'))\nexcept OSError:\n    pass\n"
        "found = b''.join(s for s in stolen if b'assay-sandbox-done' in s)\n"
    ),
    "a trace function": (
        "import os, sys\nseen = []\nsys.settrace(lambda *a: seen.append(a) or None)\nfound = b''\n"
    ),
    "ctypes": "import ctypes, os\nfound = ctypes.string_at(id(0), 8)\n",
    "its own memory file": SCAN + "found = scan(os.getpid())\n",
    "its own memory file through a link": (
        SCAN + "os.symlink(f'/proc/{os.getpid()}/mem', 'm')\nfound = scan(os.getpid(), 'm')\n"
    ),
    "its memory from a child interpreter": (
        "import os, subprocess, sys\n"
        f"code = {SCAN + 'import sys; sys.stdout.buffer.write(scan(os.getppid()))'!r}\n"
        "ran = subprocess.run([sys.executable, '-I', '-c', code], capture_output=True)\n"
        "os.write(2, ran.stderr[-300:])\n"
        "found = ran.stdout\n"
    ),
}


@pytest.mark.parametrize("mode", MODES)
def test_forging_the_verdict_from_inside_fails(mode):
    programs = [code + WRITE + WRONG for code in ATTACKS.values()]
    results = run_many(programs, LIMITS, SandboxPolicy(mode))  # type: ignore[arg-type]
    assert [n for n, r in zip(ATTACKS, results, strict=True) if r.passed] == []
    why = {n: r.stderr + r.detail for n, r in zip(ATTACKS, results, strict=True)}
    # Each failed for the reason it should: nothing to find, or refused by the guard.
    for name, expected in STOPPED_BY.items():
        assert expected in why[name], (name, why[name][-400:])


STOPPED_BY = {
    "caller frames' locals": "'NoneType' object has no attribute 'f_locals'",
    "a traceback's frames": "'NoneType' object has no attribute 'f_locals'",
    "inspect.stack()": "IndexError",
    "the garbage collector": "gc.get_objects is not allowed to the program",
    "the guard's own frame, from its refusal's traceback": "gc.get_objects is not allowed",
    "a str subclass's method run by the guard": "the program ended before its code returned",
    "a trace function": "sys.settrace is not allowed to the program",
    "ctypes": "is not allowed to the program",
    "its own memory file": "open is not allowed to the program",
    "its own memory file through a link": "open is not allowed to the program",
    "its memory from a child interpreter": "Permission denied",
}
"""Why each attack fails: the nonce is in no frame; the rest is refused (the child
interpreter is denied its parent's memory by the kernel, and leaves with nothing)."""


HONEST = textwrap.dedent(
    """\
    import collections, dataclasses, enum, inspect, logging, traceback, typing, warnings
    from fractions import Fraction

    Point = collections.namedtuple("Point", "x y")
    T = typing.TypeVar("T")

    @dataclasses.dataclass(frozen=True)
    class Box(typing.Generic[T]):
        item: T

    class Colour(enum.Enum):
        RED = 1

    logging.basicConfig(level=logging.INFO)
    logging.getLogger("p").info("logged from %s", "the program")
    warnings.warn("a warning")
    try:
        raise ValueError("x")
    except ValueError:
        text = traceback.format_exc()
    assert "ValueError" in text and inspect.signature(lambda a, b=1: 0).parameters["b"]

    def add(a: int, b: int) -> int:
        return Box(Point(a, b)).item.x + b + 0 * Colour.RED.value + int(Fraction(0))

    assert add(1, 2) == 3
    assert add(0, 0) == 0
    """
)

CANONICAL = [
    # HumanEval/0, HumanEval/2, HumanEval/12 and MBPP 2's canonical solutions with their checks.
    "from typing import List\n\ndef has_close_elements(numbers: List[float], threshold: float)"
    " -> bool:\n    for idx, elem in enumerate(numbers):\n        for idx2, elem2 in "
    "enumerate(numbers):\n            if idx != idx2:\n                distance = abs(elem - "
    "elem2)\n                if distance < threshold:\n                    return True\n\n"
    "    return False\n\nassert has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)\n"
    "assert not has_close_elements([1.0, 2.0, 3.0], 0.5)\n",
    "def truncate_number(number: float) -> float:\n    return number % 1.0\n\n"
    "assert abs(truncate_number(1.33) - 0.33) < 1e-6\n",
    "from typing import List, Optional\n\ndef longest(strings: List[str]) -> Optional[str]:\n"
    "    if not strings:\n        return None\n\n    maxlen = max(len(x) for x in strings)\n"
    "    for s in strings:\n        if len(s) == maxlen:\n            return s\n\n"
    "assert longest([]) is None\nassert longest(['x', 'yyy', 'zzz']) == 'yyy'\n",
    "def similar_elements(test_tup1, test_tup2):\n  res = tuple(set(test_tup1) & "
    "set(test_tup2))\n  return (res) \n\nassert set(similar_elements((3, 4, 5, 6),(5, 7, 4, "
    "10))) == set((4, 5))\n",
]


@pytest.mark.parametrize("mode", MODES)
def test_honest_programs_that_read_frames_through_the_standard_library_pass(mode):
    results = run_many([HONEST, *CANONICAL], LIMITS, SandboxPolicy(mode))  # type: ignore[arg-type]
    assert [r.outcome for r in results] == ["passed"] * len(results), [
        r.stderr[-400:] for r in results
    ]
    assert "logged from the program" in results[0].stderr and "a warning" in results[0].stderr
