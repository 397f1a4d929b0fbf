"""The hostile-program families every code route is checked against (`test_verdict.py`, and
lighteval's LiveCodeBench metric in tests/tasks/from_lighteval/side/check_code_metrics.py).

Each is code run before a wrong answer: it tries to end the process with a success status, or
to forge the pass, before the failed check is reported. Under a verdict taken from the exit
status (or from the program's own interpreter) each of these passed; every one must fail.
"""

from __future__ import annotations

HOSTILE = {
    "sys.exit(0)": "import sys\nsys.exit(0)\n",
    "raise SystemExit(0)": "raise SystemExit(0)\n",
    "os._exit(0)": "import os\nos._exit(0)\n",
    "atexit os._exit": "import atexit, os\natexit.register(lambda: os._exit(0))\n",
    "excepthook": "import os, sys\nsys.excepthook = lambda *a: os._exit(0)\n",
    "threading excepthook + exit in thread": (
        "import os, threading\n"
        "threading.excepthook = lambda *a: os._exit(0)\n"
        "threading.Thread(target=lambda: os._exit(0)).start()\n"
    ),
    "builtins and os patched": (
        "import builtins, os, sys\n"
        "real = os._exit\n"
        "builtins.exit = builtins.quit = sys.exit = lambda *a: real(0)\n"
        "os._exit = os.abort = lambda *a: real(0)\n"
        "sys.excepthook = lambda *a: exit(1)\n"
    ),
    "forged completion line": (
        "import os, sys\n"
        "for n in ('0' * 32, 'f' * 32, ''):\n"
        "    os.write(2, b'\\x00assay-sandbox-done ' + n.encode() + b'\\n')\n"
        "    os.write(1, b'\\x00assay-sandbox-done ' + n.encode() + b'\\n')\n"
        "os._exit(0)\n"
    ),
    "fork, parent leaves cleanly": ("import os\nif os.fork():\n    os.wait()\n    os._exit(0)\n"),
    "kills its parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
    "SIGKILLs itself": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "fds 0-2 closed": "import os\nfor fd in (0, 1, 2):\n    os.close(fd)\n",
    "stdout and stderr redirected, pass lines printed": (
        "import os, sys\n"
        "r, w = os.pipe()\n"
        "print('passed'); print('passed', file=sys.stderr)\n"
        "os.dup2(w, 1); os.dup2(w, 2)\n"
    ),
    "AssertionError, print and abs replaced": (
        "import builtins\n"
        "builtins.AssertionError = type('Quiet', (Exception,), {})\n"
        "builtins.print = builtins.abs = lambda *a, **k: 0\n"
    ),
    "the harness's frames searched for the verdict": (
        "import os, sys\n"
        "f = sys._getframe()\n"
        "while f is not None:\n"
        "    for v in list(f.f_locals.values()):\n"
        "        if isinstance(v, bytes) and b'assay-sandbox-done' in v:\n"
        "            os.write(2, v)\n"
        "            os._exit(0)\n"
        "    f = f.f_back\n"
    ),
    "signal handler exits": (
        "import os, signal\n"
        "signal.signal(signal.SIGALRM, lambda *a: os._exit(0))\n"
        "signal.setitimer(signal.ITIMER_REAL, 0.001)\n"
        "import time\ntime.sleep(1)\n"
    ),
    # The verdict's own audit event, raised by a C callable while the bootstrap's frame is the
    # calling one: put where the bootstrap reports the failure, it used to write the pass.
    "os.write replaced by a done-event partial": (
        "import functools, os, sys\n"
        "os.write = functools.partial(sys.audit, 'assay.sandbox.done', 0)\n"
    ),
    "builtins replaced by done-event partials": (
        "import builtins, functools, sys\n"
        "done = functools.partial(sys.audit, 'assay.sandbox.done', 0)\n"
        "for name in ('getattr', 'str', 'type', 'len', 'id', 'isinstance'):\n"
        "    setattr(builtins, name, done)\n"
    ),
    "its own exception answers with done-event partials": (
        "import functools, sys\n"
        "done = functools.partial(sys.audit, 'assay.sandbox.done', 0)\n"
        "class Meta(type):\n"
        "    __name__ = property(done)\n"
        "    __module__ = property(done)\n"
        "Evil = Meta('Evil', (OSError,), {'__str__': done, '__repr__': done, '__del__': done,\n"
        "            'errno': property(done), 'strerror': property(done),\n"
        "            'args': property(done), 'filename': property(done)})\n"
        "raise Evil()\n"
    ),
    "builtin exception carrying done-event partials": (
        "import functools, sys\n"
        "done = functools.partial(sys.audit, 'assay.sandbox.done', 0)\n"
        "Text = type('Text', (str,), {'__str__': done, 'replace': done, '__add__': done})\n"
        "Number = type('Number', (int,), {'__str__': done, '__repr__': done})\n"
        "error = OSError(Number(5), Text('x'), Text('y'))\n"
        "error.errno = Number(5)\n"
        "raise error\n"
    ),
    "signal handler is a done-event partial, alarms during the report": (
        "import functools, signal, sys\n"
        "signal.signal(signal.SIGALRM, functools.partial(sys.audit, 'assay.sandbox.done', 0))\n"
        "signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0001)\n"
    ),
    "threads raise the done event all along": (
        "import _thread, functools, sys, threading\n"
        "done = functools.partial(sys.audit, 'assay.sandbox.done', 0)\n"
        "def spin():\n"
        "    for _ in range(10 ** 6):\n"
        "        done()\n"
        "threading.Thread(target=spin, daemon=True).start()\n"
    ),
    "the bootstrap's globals rewritten": (
        "import functools, sys\n"
        "done = functools.partial(sys.audit, 'assay.sandbox.done', 0)\n"
        "f = sys._getframe()\n"
        "while f is not None:\n"
        "    if '_guard' in f.f_globals:\n"
        "        for name in ('REPORT_MARKER', 'REPORT_SEPARATOR', '_DONE_EVENT', 'contextlib'):\n"
        "            f.f_globals[name] = done\n"
        "        f.f_locals.update(write=done, leave=done)\n"
        "    f = f.f_back\n"
        "sys.exc_info = lambda: (None, None, None)\n"
    ),
    "audit event named by a str subclass": (
        "import sys\n"
        "Name = type('Name', (str,), {'__eq__': lambda s, o: True, '__hash__': str.__hash__})\n"
        "sys.audit(Name('assay.sandbox.done'), 0)\n"
        "def f():\n"
        "    sys.audit(Name('assay.sandbox.done'), 0)\n"
        "f()\n"
    ),
    # Code of the program's own that runs while the verdict's hook runs (a signal handler is
    # handled in whatever frame is current; a gc callback runs wherever the collector does):
    # it walks the frames it finds for the done line, in variables and in code constants.
    "signal handler searches the interrupted frames": (
        "import os, signal, sys\n"
        "def search(f):\n"
        "    while f is not None:\n"
        "        found = list(f.f_locals.values())\n"
        "        try:\n"
        "            found += list(f.f_code.co_consts)\n"
        "        except BaseException:\n"
        "            pass\n"
        "        for v in found:\n"
        "            if isinstance(v, bytes) and b'assay-sandbox-done' in v:\n"
        "                os.write(2, v)\n"
        "                os._exit(0)\n"
        "        f = f.f_back\n"
        "signal.signal(signal.SIGALRM, lambda n, frame: search(frame))\n"
        "signal.setitimer(signal.ITIMER_REAL, 0.00005, 0.00005)\n"
        "import gc\n"
        "gc.callbacks.append(lambda *a: search(sys._getframe(1)))\n"
        "gc.set_threshold(1)\n"
        "for _ in range(20000):\n"
        "    try:\n"
        "        open('/nonexistent-assay-path')\n"
        "    except OSError:\n"
        "        pass\n"
        "signal.setitimer(signal.ITIMER_REAL, 0)\n"
        "gc.callbacks.clear()\n"
    ),
}
