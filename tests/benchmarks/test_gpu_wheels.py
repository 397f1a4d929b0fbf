"""The wheels `make gpu-wheels` puts in .whl/ cover what benchmarks/gpu_check.py imports beyond
the GPU machine's image.

The image is emulated here: a folder linking only the image's packages (and their own
dependencies, as this venv's metadata declares them) from this venv, on a Python started
without its site-packages (-S). The wheels are installed as on the GPU machine (--target, no
index, no dependencies, tags of Python 3.12), and assay, lm_eval and datasets must import from
them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHEELS = ROOT / ".whl"
LIST = ROOT / "benchmarks" / "gpu_wheels.txt"
IMAGE = [
    "torch",
    "transformers",
    "accelerate",
    "tokenizers",
    "safetensors",
    "pandas",
    "pyarrow",
    "numpy",
    "pyyaml",
    "jinja2",
    "requests",
    "tqdm",
    "xxhash",
    "sacrebleu",
    "scikit-learn",
    "rich",
]
"""What the GPU machine has installed (benchmarks/gpu_wheels.txt says the same)."""
LIMIT_MIB = 60

pytestmark = pytest.mark.skipif(
    not WHEELS.is_dir(), reason=".whl/ is absent: run `make gpu-wheels` (it downloads them)"
)


def pinned() -> dict[str, str]:
    lines = [line.strip() for line in LIST.read_text().splitlines()]
    pins = dict(line.split("==") for line in lines if line and not line.startswith("#"))
    return {re.sub(r"[-_.]+", "_", name.lower()): version for name, version in pins.items()}


def image_closure() -> set[str]:
    """The image's packages and everything they require (as installed in this venv)."""
    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = list(IMAGE)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop().lower())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = distribution(name).requires or []
        except PackageNotFoundError:
            continue
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def link_image(folder: Path) -> None:
    """Link the top-level modules of the image's installed distributions into `folder`."""
    folder.mkdir()
    for name in image_closure():
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        tops = {f.parts[0] for f in dist.files or () if not f.parts[0].startswith("..")}
        for top in tops:
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (folder / top).exists():
                (folder / top).symlink_to(source)


def test_every_pinned_wheel_and_assay_are_there_within_the_size_limit():
    files = sorted(WHEELS.glob("*.whl"))
    found = {
        re.sub(r"[-_.]+", "_", f.name.split("-")[0].lower()): f.name.split("-")[1] for f in files
    }
    assert {name: found.get(name) for name in pinned()} == pinned()
    assert "assay" in found
    assert sum(f.stat().st_size for f in files) < LIMIT_MIB * 2**20


def test_the_wheels_install_and_import_beside_the_image_alone(tmp_path):
    site, image = tmp_path / "site", tmp_path / "image"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
         "--target", str(site), "--python-version", "3.12", "--implementation", "cp",
         "--only-binary=:all:", *map(str, sorted(WHEELS.glob("*.whl")))],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    link_image(image)
    code = (
        "import assay, lm_eval, datasets, assay.models.hf.model, lm_eval.models.huggingface\n"
        "print(assay.__file__, lm_eval.__file__, datasets.__file__, sep='\\n')"
    )
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{image}"}
    done = subprocess.run(
        [sys.executable, "-S", "-c", code],
        env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert all(path.startswith(str(site)) for path in done.stdout.split())
