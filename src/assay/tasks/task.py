"""Task: a TaskConfig with its data: loads splits, filters and dedupes rows, yields Docs.

Over 500 lines and still one job: every step between a config and the docs a run reads
(split choice, loading, row checks, dedupe, few-shot pools) works on the same loaded rows.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import InitVar, dataclass, field, replace
from typing import Any

from assay.doc import Doc, OutputType
from assay.errors import DataError, TaskConfigError
from assay.hub import needs_hub, offline_unless_reachable
from assay.images import as_doc_images
from assay.seeds import DEFAULT_FEWSHOT_SEED
from assay.tasks._lazy_docs import LazyMapped, processed
from assay.tasks.config import TaskConfig
from assay.tasks.fewshot import peer_selection, select_fewshots

log = logging.getLogger(__name__)

_NETWORK_HINTS = ("offline", "connection", "resolve", "couldn't reach", "max retries", "network")


def fewshot_count(
    config: TaskConfig, task_string: int | None = None, run: int | None = None
) -> int:
    """How many few-shot examples each doc of `config` gets: the one place the rule lives.

    In order, the first that applies:
    1. an lm-eval YAML that writes `num_fewshot: 0` keeps 0, whatever is asked (lm-eval's rule;
       `TaskConfig.num_fewshots_fixed`);
    2. the count of the task string that named the task (`gsm8k|5`, `suite|task|3`):
       it names this one task, so it wins over the run-wide value;
    3. the run's value: `assay run --num-fewshot`, `evaluate(num_fewshot=...)`, `assay tasks
       show --num-fewshot`;
    4. the task's own default, `TaskConfig.num_fewshots` (a Python config's field; an lm-eval
       YAML's `num_fewshot`, lm-eval's 0 where it writes none; a converted task's 0 for a task
       string without a count).
    """
    if config.num_fewshots_fixed:
        return config.num_fewshots
    for asked in (task_string, run):
        if asked is not None:
            return asked
    return config.num_fewshots


@dataclass
class Task:
    """A task ready to produce docs.

    `num_fewshot` is the few-shot count in effect, resolved once by whoever builds the task
    with `fewshot_count` (the run plan, `assay tasks show`); the task takes it as given, as
    `shots`. Left out, it is the config's own count.
    """

    config: TaskConfig
    num_fewshot: InitVar[int | None] = None
    fewshot_seed: int | None = DEFAULT_FEWSHOT_SEED
    keep_self: bool = False
    """lm-eval's rule exactly: a doc drawn as its own few-shot example (from the evaluated
    split, where lm-eval does not drop it) stays; by default it is replaced."""
    replaced_self: list[int] = field(default_factory=list, repr=False)
    """Doc ids whose own row was drawn among their few-shot examples and replaced (the last
    `docs()` call's, lm-eval selector only): where assay's prompts differ from lm-eval's."""
    _splits: dict[str, Any] = field(default_factory=dict, repr=False)
    _eval: Sequence[dict[str, Any]] | None = field(default=None, repr=False)
    _pool: Sequence[dict[str, Any]] | None = field(default=None, repr=False)
    shots: int = field(init=False)
    """Number of few-shot examples per doc."""

    def __post_init__(self, num_fewshot: int | None) -> None:
        self.shots = self.config.num_fewshots if num_fewshot is None else num_fewshot

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def output_type(self) -> OutputType:
        return self.config.resolved_output_type

    # ------------------------------------------------------------------ data
    def load(self) -> Task:
        """Load every split the task needs (idempotent)."""
        if self._eval is not None:
            return self
        cfg = self.config
        splits = self._load_splits()
        if cfg.hf_filter is not None:
            splits = {k: _apply(v, "filter", cfg.hf_filter, cfg, k) for k, v in splits.items()}
        missing = [s for s in cfg.evaluation_splits if s not in splits]
        if missing:
            raise DataError(
                f"{cfg.where()}: evaluation split(s) {missing} not in the dataset; available "
                f"splits: {sorted(splits)}. Fix 'evaluation_splits' (YAML: test_split / "
                "validation_split)."
            )
        self._splits = splits
        rows = [self._processed(split) for split in cfg.evaluation_splits]
        self._eval = rows[0] if len(rows) == 1 else _Concat(rows)
        if len(self._eval) == 0:
            raise DataError(f"{cfg.where()}: the evaluation split is empty; nothing to evaluate.")
        if cfg.original_num_docs >= 0 and cfg.original_num_docs != len(self._eval):
            raise DataError(
                f"{cfg.where()}: 'original_num_docs' says {cfg.original_num_docs} docs but the "
                f"dataset has {len(self._eval)}. The data changed: check the revision."
            )
        return self

    def _load_splits(self) -> dict[str, Any]:
        cfg = self.config
        if cfg.dataset_loader is not None:
            try:
                loaded = cfg.dataset_loader(**cfg.metadata, **cfg.dataset_kwargs)
            except Exception as exc:  # user code: report it with the task's name
                raise DataError(f"{cfg.where()}: the custom dataset loader failed: {exc}") from exc
            return dict(loaded)
        if needs_hub(cfg.hf_repo):
            offline_unless_reachable()
        import datasets

        datasets.disable_progress_bars()
        _keep_progress_lock()
        kwargs = dict(cfg.dataset_kwargs)
        if cfg.hf_data_files is not None:
            _check_local_files(cfg)
            kwargs["data_files"] = cfg.hf_data_files
        if cfg.hf_revision is not None:
            kwargs["revision"] = cfg.hf_revision
        kwargs.pop("trust_remote_code", None)
        try:
            loaded = datasets.load_dataset(cfg.hf_repo, cfg.hf_subset, **kwargs)
        except FileNotFoundError as exc:
            raise DataError(f"{cfg.where()}: data files not found: {exc}") from None
        except Exception as exc:
            text = str(exc)
            if any(h in text.lower() for h in _NETWORK_HINTS) or any(
                os.environ.get(v) for v in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")
            ):
                raise DataError(
                    f"{cfg.where()}: dataset {cfg.hf_repo!r} (subset {cfg.hf_subset!r}, revision "
                    f"{cfg.hf_revision or 'main'!r}) is not in the local Hugging Face cache and the "
                    "hub cannot be reached. Pre-download it on a machine with network:\n"
                    f'  python -c "import datasets; {_load_call(cfg, kwargs)}"\n'
                    "then copy ~/.cache/huggingface over and run with HF_DATASETS_OFFLINE=1. Or "
                    f"{_local_files_recipe(cfg)}\nCause: {text.splitlines()[0]}"
                ) from None
            files = f" (data files: {cfg.hf_data_files})" if cfg.hf_data_files else ""
            raise DataError(
                f"{cfg.where()}: could not load dataset {cfg.hf_repo!r}{files}: {_causes(exc)}"
            ) from None
        return dict(loaded)

    def _processed(self, split: str, process: Any = None, pool: bool = False) -> Any:
        """A split after `process` (default: the task's process_docs).

        Row-wise process_docs maps run only over the rows read (`_lazy_docs`): `--limit 1`
        maps one block, not the whole split. A few-shot pool keeps the blocks it mapped (its
        rows are drawn in any order); evaluation rows are read in order, one block held.
        """
        process = process or self.config.process_docs
        rows = self._splits[split]
        if process is None:
            return rows
        lazy = processed(rows, process, f"{self.config.where()}: split {split!r}", keep=pool)
        return (
            lazy if lazy is not None else _apply(rows, "process_docs", process, self.config, split)
        )

    def eval_rows(self) -> Sequence[dict[str, Any]]:
        """The evaluation rows after process_docs and hf_filter."""
        return self.load()._eval  # type: ignore[return-value]

    def fewshot_split(self) -> str | None:
        """The split few-shot examples come from (None: explicit samples or no pool)."""
        cfg = self.config
        if cfg.few_shots_split is not None:
            return cfg.few_shots_split
        if cfg.fewshot_samples is not None:
            return None
        for candidate in ("train", "validation", "test"):
            if candidate in cfg.hf_avail_splits and candidate in self.load()._splits:
                return candidate
        return cfg.evaluation_splits[0]

    def fewshot_rows(self) -> Sequence[dict[str, Any]]:
        """The few-shot pool."""
        if self._pool is None:
            cfg = self.config
            if cfg.fewshot_samples is not None:
                samples = cfg.fewshot_samples
                self._pool = list(samples() if callable(samples) else samples)
            else:
                split = self.fewshot_split()
                if split not in self.load()._splits:
                    raise DataError(
                        f"{cfg.where()}: few-shot split {split!r} not in the dataset; available: "
                        f"{sorted(self._splits)}."
                    )
                pool = self._processed(split, cfg.fewshot_process_docs, pool=True)
                self._pool = pool if isinstance(pool, LazyMapped | list) else list(pool)
        return self._pool

    # ------------------------------------------------------------------ docs
    def doc_indices(self, limit: int | float | None = None) -> list[int]:
        """Indices of the eval rows to evaluate: the first `limit` (a float < 1 is a fraction),
        as lm-eval's --limit; no limit means `effective_num_docs`, else every row."""
        total = len(self.eval_rows())
        if limit is None and self.config.effective_num_docs >= 0:
            limit = self.config.effective_num_docs
        if limit is None:
            count = total
        elif isinstance(limit, float) and limit < 1.0:
            count = int(-(-total * limit // 1))
        else:
            count = min(int(limit), total)
        return list(range(count))

    def make_doc(self, row: dict[str, Any], index: int, *, fewshot: bool = False) -> Doc | None:
        """Run the prompt function on a row and fill unset fields from the task defaults."""
        cfg = self.config
        fn = (
            cfg.fewshot_prompt_function
            if fewshot and cfg.fewshot_prompt_function
            else cfg.prompt_function
        )
        try:
            if cfg.row_extras:
                doc = fn({**row, "__few_shots": fewshot, "__index": index}, cfg.name)
            else:
                doc = fn(row, cfg.name)
        except TaskConfigError:
            raise
        except Exception as exc:
            raise DataError(
                f"{cfg.where()}: could not build the prompt of row {index}"
                f"{' of the few-shot pool' if fewshot else ''}: {type(exc).__name__}: "
                f"{str(exc).rstrip('.')}. "
                f"Row: {_short(row)}"
            ) from None
        if doc is None:
            return None
        if not isinstance(doc, Doc):
            raise TaskConfigError(
                f"{cfg.where()}: the prompt function returned {type(doc).__name__}, not a Doc."
            )
        doc = self._with_defaults(doc, row, index)
        if doc.images:
            where = f"{cfg.where()}: row {index}{' of the few-shot pool' if fewshot else ''}"
            doc.images = as_doc_images(doc.images, f"{where}: images")
        self._check_doc(doc, index, fewshot)
        return doc

    def _check_doc(self, doc: Doc, index: int, fewshot: bool) -> None:
        """Reject doc fields set by the prompt function that assay cannot honour."""
        cfg = self.config
        where = f"{cfg.where()}: the prompt function's doc for row {index}" + (
            " of the few-shot pool" if fewshot else ""
        )
        if fewshot:
            return  # how an example is queried does not matter: it is only rendered
        if doc.use_logits:
            raise TaskConfigError(
                f"{where} sets use_logits=True, but assay backends return no logits and no "
                "assay metric reads them. Leave Doc.use_logits False."
            )
        expected = cfg.sampling_method
        conflicting = [m for m in doc.sampling_methods if m != expected]
        if conflicting:
            raise TaskConfigError(
                f"{where} asks for sampling_methods {[str(m) for m in conflicting]}, but the "
                f"task's output type {cfg.resolved_output_type.value} queries every doc with "
                f"{expected}. Leave Doc.sampling_methods empty, or set the task's output_type "
                "(or metrics) to match."
            )

    def _with_defaults(self, doc: Doc, row: dict[str, Any], index: int) -> Doc:
        cfg = self.config
        # Values the prompt function set win over task defaults.
        return replace(
            doc,
            id=doc.id or str(index),
            task_name=cfg.name,
            row=doc.row if doc.row is not None else row,
            sampling_methods=doc.sampling_methods or [cfg.sampling_method],
            generation_size=doc.generation_size
            if doc.generation_size is not None
            else cfg.generation_size,
            stop_sequences=doc.stop_sequences
            if doc.stop_sequences is not None
            else (list(cfg.stop_sequence) if cfg.stop_sequence is not None else None),
            num_samples=doc.num_samples if doc.num_samples is not None else (cfg.num_samples or 1),
        )

    def docs(self, indices: Sequence[int]) -> Iterator[tuple[int, Doc]]:
        """(doc_id, Doc) for the given eval-row indices, each with its few-shot examples."""
        rows = _BlockReader.wrap(self.eval_rows())
        shots = self.shots
        cfg = self.config
        fewshot_cache: dict[int, Doc] = {}
        selector = cfg.few_shots_select or "lm_eval"
        peer = peer_selection(selector)
        if shots and peer is not None:
            plan = iter(peer.plan(self, selector, shots, rows, fewshot_cache))
        elif shots:
            pool = self.fewshot_rows()
            exclude_self = self.fewshot_split() in cfg.evaluation_splits and not self.keep_self
            self.replaced_self = []
            # lm-eval's stream draws for every doc before the ones evaluated, so replay from 0.
            last = max(indices) + 1 if indices else 0
            plan = select_fewshots(
                selector,
                pool,
                (rows[i] for i in range(last)),
                shots,
                seed=cfg.fewshot_seed if cfg.fewshot_seed is not None else self.fewshot_seed,
                task=cfg.name,
                exclude_self=exclude_self,
                drop_equal=cfg.fewshot_drop_equal,
                replaced=self.replaced_self,
                sorting_class=self._sorting_class(pool, fewshot_cache)
                if selector == "balanced"
                else None,
            )
        wanted = set(indices)
        seen: set[tuple[Any, ...]] = set()
        for i in range(max(indices) + 1 if indices else 0):
            picks = next(plan) if shots else []
            if i not in wanted:
                continue
            doc = self.make_doc(rows[i], i)
            if doc is None:
                continue
            if cfg.must_remove_duplicate_docs:
                key = (doc.query, tuple(doc.choices), str(doc.gold_index), doc.instruction)
                if key in seen:
                    continue
                seen.add(key)
            if picks:
                doc.fewshot_samples = [self._pool_doc(j, fewshot_cache) for j in picks]
            yield i, doc

    def kept_pool_doc(self, j: int, cache: dict[int, Doc]) -> Doc | None:
        """Few-shot pool row `j` as a Doc (kept in `cache`), None when the prompt function skips
        it."""
        if j not in cache:
            doc = self.make_doc(self.fewshot_rows()[j], j, fewshot=True)
            if doc is None:
                return None
            cache[j] = doc
        return cache[j]

    def eval_docs(self) -> Iterator[Doc]:
        """Every evaluation doc, with its few-shot examples."""
        return (doc for _, doc in self.docs(self.doc_indices()))

    def fewshot_docs(self) -> list[Doc]:
        """The few-shot pool as Docs."""
        cache: dict[int, Doc] = {}
        return [self._pool_doc(j, cache) for j in range(len(self.fewshot_rows()))]

    def first_doc(self) -> Doc | None:
        """The first eval doc with its few-shot examples (None if the prompt function skips it).

        Building it loads the few-shot pool and runs the prompt function on real rows, so a
        wrong few-shot split, a pool smaller than the shots, a doc field assay cannot honour or
        a template that breaks on the data fails before any model is built.
        """
        return next((doc for _, doc in self.docs(self.doc_indices(1))), None)

    def _pool_doc(self, j: int, cache: dict[int, Doc]) -> Doc:
        if j not in cache:
            doc = self.make_doc(self.fewshot_rows()[j], j, fewshot=True)
            if doc is None:
                raise DataError(
                    f"{self.config.where()}: few-shot row {j} was skipped by the prompt function."
                )
            cache[j] = doc
        return cache[j]

    def _sorting_class(self, pool: Sequence[dict[str, Any]], cache: dict[int, Doc]):
        def label(j: int) -> str:
            doc = self._pool_doc(j, cache)
            return doc.fewshot_sorting_class or (doc.get_golds() or [""])[0]

        return label


class _BlockReader(Sequence[dict[str, Any]]):
    """Rows of a `datasets.Dataset` read a block at a time, for reading in index order.

    Indexing a Dataset row by row decodes a one-row Arrow table per row, which costs far more
    than the row itself; a slice decodes a whole block at once. Only one block is held, so
    memory stays flat however large the dataset.
    """

    BLOCK = 1000

    def __init__(self, rows: Any) -> None:
        self.rows = rows
        self.start = 0
        self.block: list[Any] = []

    @classmethod
    def wrap(cls, rows: Sequence[dict[str, Any]]) -> Sequence[dict[str, Any]]:
        """`rows` itself unless it is an unformatted Dataset (whose slices are dicts of lists)."""
        plain = hasattr(rows, "column_names") and getattr(rows, "format", {}).get("type") is None
        return cls(rows) if plain else rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):
        if not self.start <= i < self.start + len(self.block):
            if not 0 <= i < len(self.rows):
                raise IndexError(i)
            columns = self.rows[i : i + self.BLOCK]
            names = list(columns)
            self.start = i
            self.block = [dict(zip(names, values)) for values in zip(*columns.values())]
        return self.block[i - self.start]


class _Concat(Sequence[dict[str, Any]]):
    """Several splits evaluated as one sequence (`TaskConfig.evaluation_splits`)."""

    def __init__(self, parts: list[Sequence[dict[str, Any]]]) -> None:
        self.parts = [_BlockReader.wrap(p) for p in parts]

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts)

    def __getitem__(self, i):
        for part in self.parts:
            if i < len(part):
                return part[i]
            i -= len(part)
        raise IndexError(i)


def _apply(rows: Any, what: str, fn: Any, cfg: TaskConfig, split: str) -> Any:
    try:
        if what == "filter":
            return rows.filter(fn) if hasattr(rows, "filter") else [r for r in rows if fn(r)]
        return fn(rows)
    except Exception as exc:
        raise DataError(
            f"{cfg.where()}: {what} failed on split {split!r}: {type(exc).__name__}: {exc}"
        ) from None


def _load_call(cfg: TaskConfig, kwargs: dict[str, Any]) -> str:
    """The datasets.load_dataset(...) call a task makes, as Python source."""
    args = [repr(cfg.hf_repo)]
    if cfg.hf_subset is not None:
        args.append(repr(cfg.hf_subset))
    args += [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"datasets.load_dataset({', '.join(args)})"


def _local_files_recipe(cfg: TaskConfig) -> str:
    """How to point this task at local files instead of the hub."""
    splits = list(dict.fromkeys([*cfg.evaluation_splits, *filter(None, [cfg.few_shots_split])]))
    files = ", ".join(f"{s!r}: '{cfg.name}/{s}.jsonl'" for s in splits)
    if cfg.raw_config is not None:
        return (
            f"point the YAML at local files: dataset_path: json, dataset_kwargs: "
            f"{{data_files: {{{files}}}}}."
        )
    module = getattr(cfg.prompt_function, "__module__", "") or ""
    if module.startswith("assay.catalog."):
        return (
            "replace the built-in task by a custom task file reading local files (rows as the "
            "hub's), then give that file to the run (--custom-tasks local_tasks.py on the "
            'command line, custom_tasks="local_tasks.py" in evaluate()):\n'
            "  # local_tasks.py\n"
            "  from dataclasses import replace\n"
            f"  from {module} import TASKS_TABLE as BUILTIN\n"
            f"  TASKS_TABLE = [replace(next(c for c in BUILTIN if c.name == {cfg.name!r}), "
            f'hf_repo="json", hf_subset=None, hf_revision=None, hf_data_files={{{files}}})]'
        )
    return f'set hf_repo="json", hf_subset=None and hf_data_files={{{files}}} in its TaskConfig.'


def _check_local_files(cfg: TaskConfig) -> None:
    """Empty local data files fail inside datasets with a bare StopIteration: name them here."""
    files = cfg.hf_data_files
    values = files.values() if isinstance(files, dict) else [files]
    for value in values:
        for item in value if isinstance(value, list | tuple) else [value]:
            local = isinstance(item, str) and "://" not in item and os.path.isfile(item)
            if local and os.path.getsize(str(item)) == 0:
                raise DataError(f"{cfg.where()}: data file {item} is empty; nothing to evaluate.")


_PROGRESS_LOCK_GUARD = threading.Lock()


def _keep_progress_lock() -> None:
    """Give datasets' tqdm class a lock for good, once, before any load starts.

    datasets resolves data files through tqdm's thread_map, which creates the class lock when it
    is missing and deletes it when done; tasks loading in parallel threads then race and fail
    with "AttributeError: ... '_lock'". A lock that already exists is restored, never deleted.
    """
    from datasets.utils.tqdm import tqdm as datasets_tqdm

    with _PROGRESS_LOCK_GUARD:
        if "_lock" not in vars(datasets_tqdm):
            datasets_tqdm.set_lock(datasets_tqdm.get_lock())


def _causes(exc: BaseException) -> str:
    """The error and what caused it (datasets wraps the parser's error, which names the row)."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(parts) < 4:
        seen.add(id(current))
        text = str(current).strip()
        if text and text not in parts:
            parts.append(text)
        current = current.__cause__ or current.__context__
    return ": ".join(parts) or type(exc).__name__


def _short(row: dict[str, Any]) -> str:
    text = repr(row)
    return text if len(text) < 300 else text[:300] + "..."
