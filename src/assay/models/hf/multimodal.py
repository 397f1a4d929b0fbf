"""`--model hf-multimodal`: transformers vision-language models, as lm-eval's hf-multimodal.

The model is an `AutoModelForImageTextToText` and its inputs come from its `AutoProcessor`,
with lm-eval 0.4.13's rules (`lm_eval/models/hf_vlms.py`):

- a prompt's `<image>` placeholders become the model's image token (`image_string`, else the
  text of `image_token_id`, else of the config's image_token_id), at most `max_images` of them;
  with --apply-chat-template the processor's own template renders each message's text and
  image parts instead (`interleave`: parts in the text's order; otherwise images first);
- each request's images are shrunk by `image_width` / `image_height` / `image_max_side`,
  capped at `max_images`, converted to RGB with `convert_img_format`, and processed with the
  text by the processor (`min_pixels` / `max_pixels` are processor options);
- generation encodes the prompt with its images, left-truncated to max_length - max_gen_toks;
  loglikelihood splits `processor(context + continuation)` after `processor(context)`'s
  tokens, as lm-eval's (disabled) multimodal loglikelihood does.

Requests without images are text requests, encoded as `--model hf` encodes them (lm-eval falls
back to its HF backend for them too). Scoring and generation share `--model hf`'s machinery: a
question's choices run their context once, and finished rows leave a generation batch; each
row's pixel values travel with it (`hf.inputs`). Rows with images never reuse the cross-doc
prefix cache, since equal image tokens may stand for different pictures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from assay.errors import ConfigError, ModelError
from assay.images import DocImage, content_parts, replace_placeholders, resize_image
from assay.models.args import Arg, typed_args
from assay.models.base import LM, ModelProvenance, register_model
from assay.models.hf.args import HF_ARGS, HFArgs
from assay.models.hf.generate import Generator
from assay.models.hf.inputs import ExtraInputs
from assay.models.hf.load import (
    _check_source,
    _guarded,
    _load_config,
    _pick_device,
    _use_physical_cores,
    configure_pad_token,
    fingerprint,
    resolve_max_length,
)
from assay.models.hf.memory import BatchSizer
from assay.models.hf.model import HuggingFaceLM
from assay.models.hf.score import Scorer
from assay.models.tokens import TokenizerView
from assay.prompts.chat import Message, TokenizerChatTemplate, template_sha256
from assay.requests.types import (
    GenerateRequest,
    Generation,
    LoglikelihoodRequest,
    LoglikelihoodResult,
)

BACKEND = "hf-multimodal"

_SHARED = (
    "pretrained", "revision", "tokenizer", "dtype", "device", "trust_remote_code", "max_length",
    "attn_implementation", "batch_size", "max_batch_size", "think_end_token",
    "think_start_token", "thinking_budget",
)  # fmt: skip
"""`--model hf` arguments that mean the same here."""

MULTIMODAL_ARGS: dict[str, Arg] = {
    **{name: HF_ARGS[name] for name in _SHARED},
    "image_token_id": Arg(int, None, nullable=True, minimum=0),
    "image_string": Arg(str, None, nullable=True),
    "interleave": Arg(bool, True),
    "max_images": Arg(int, 999, minimum=1),
    "convert_img_format": Arg(bool, False),
    "min_pixels": Arg(int, None, nullable=True, minimum=1),
    "max_pixels": Arg(int, None, nullable=True, minimum=1),
    "image_width": Arg(int, None, nullable=True, minimum=1),
    "image_height": Arg(int, None, nullable=True, minimum=1),
    "image_max_side": Arg(int, None, nullable=True, minimum=1),
}


@dataclass(frozen=True, slots=True)
class MultimodalArgs:
    """Validated model arguments of `--model hf-multimodal` (lm-eval's names and defaults)."""

    hf: HFArgs
    """The arguments shared with `--model hf` (pretrained, dtype, device, batch_size, ...)."""
    image_token_id: int | None = None
    """The image token's id, when the model config does not name it."""
    image_string: str | None = None
    """The image token's text (wins over image_token_id)."""
    interleave: bool = True
    """Chat template: image parts where the text says `<image>` (else all images first)."""
    max_images: int = 999
    """Images kept per request (the first ones); later placeholders are dropped."""
    convert_img_format: bool = False
    """Convert images to RGB before processing."""
    min_pixels: int | None = None
    """Processor option (Qwen2-VL style): fewest pixels an image is resized to."""
    max_pixels: int | None = None
    """Processor option (Qwen2-VL style): most pixels an image is resized to."""
    image_width: int | None = None
    """Shrink wider images to this width (keeping the aspect ratio)."""
    image_height: int | None = None
    """Shrink taller images to this height (keeping the aspect ratio)."""
    image_max_side: int | None = None
    """Shrink images whose longer side exceeds this."""


def parse_multimodal_args(raw: Mapping[str, Any]) -> MultimodalArgs:
    """Check `raw` (--model-args) and build MultimodalArgs; ConfigError naming the argument."""
    given = {k: v for k, v in raw.items() if v is not None}
    args = typed_args(BACKEND, given, MULTIMODAL_ARGS)
    if not args["pretrained"].strip():
        raise ConfigError(
            f"--model {BACKEND} needs pretrained=<model directory or hub id>, e.g. "
            "--model-args pretrained=llava-hf/llava-1.5-7b-hf."
        )
    if args["image_max_side"] and (args["image_width"] or args["image_height"]):
        raise ConfigError(
            f"--model {BACKEND}: image_max_side={args['image_max_side']} and "
            "image_width/image_height both resize images; give one of them (as lm-eval)."
        )
    hf = HFArgs(**{name: args.pop(name) for name in _SHARED})
    if isinstance(hf.batch_size, int) and hf.batch_size > hf.max_batch_size:
        raise ConfigError(
            f"--model {BACKEND}: batch_size={hf.batch_size} is larger than max_batch_size="
            f"{hf.max_batch_size}; max_batch_size only bounds batch_size=auto."
        )
    return MultimodalArgs(hf=hf, **args)


class ProcessorChatTemplate:
    """The processor's chat template, each message's `<image>` placeholders turned into image
    parts (lm-eval's hf-multimodal `apply_chat_template`)."""

    def __init__(self, processor: Any, max_images: int, interleave: bool, missing: str) -> None:
        self.template = TokenizerChatTemplate(processor, missing)
        self.max_images, self.interleave = max_images, interleave

    def __call__(
        self,
        messages: Sequence[Message],
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
    ) -> str:
        chat = [
            {
                "role": m["role"],
                "content": [
                    {"type": "text", "text": part} if isinstance(part, str) else {"type": "image"}
                    for part in content_parts(
                        m["content"], max_images=self.max_images, interleave=self.interleave
                    )
                ],
            }
            for m in messages
        ]
        return self.template(chat, add_generation_prompt, continue_final_message)  # type: ignore[arg-type]


class HFMultimodalLM(HuggingFaceLM):
    """A transformers image-text-to-text model behind assay's LM protocol.

    Text-only requests and rolling loglikelihoods behave as `--model hf` (inherited).
    """

    accepts_images = True
    backend_name = BACKEND
    accepts_tools = False

    def __init__(self, args: MultimodalArgs) -> None:
        # Not HuggingFaceLM.__init__: the model and its processor load differently.
        self.mm = args
        self.args = args.hf
        loaded = _load(args)
        self.model, self.processor = loaded["model"], loaded["processor"]
        self.tokenizer = self.processor.tokenizer
        self.device = loaded["device"]
        self.max_length = args.hf.max_length or resolve_max_length(
            self.model.config, self.tokenizer
        )
        self.batch_size = args.hf.batch_size
        self._fingerprint = loaded["fingerprint"]
        self._view = TokenizerView(self.tokenizer, None)
        self._sizer = BatchSizer(args.hf.batch_size, args.hf.max_batch_size, self.device)
        self.image_token = self._image_token()
        self._dtype_of_model = next(self.model.parameters()).dtype
        self._flat_images = getattr(self.model.config, "model_type", "") == "llava"
        self.scorer = Scorer(
            self.model, self.device, self.max_length, self._sizer, self.tokenizer.pad_token_id
        )
        eos = self.tokenizer.eos_token_id
        self._generator = Generator(
            self.model,
            self._view,
            self.device,
            self._sizer,
            eos_token_ids=self._eos_token_ids(),
            eos_text=self.tokenizer.decode([eos], skip_special_tokens=False)
            if eos is not None
            else "",
            pad_token_id=self.scorer.pad_id,
            think_end=self._think_end(args.hf.think_end_token),
            thinking=self._thinking(),
            think_start_id=self._single_token(args.hf.think_start_token),
        )

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        """log P(continuation | context, images) and greediness, per request, in request order."""
        text_only = [i for i, r in enumerate(requests) if not r.images]
        pairs: list[Any] = [None] * len(requests)
        extras: list[ExtraInputs | None] = [None] * len(requests)
        encoded = self._view.encode_pairs(
            [(requests[i].context, requests[i].continuation) for i in text_only]
        )
        for i, pair in zip(text_only, encoded, strict=True):
            pairs[i] = pair
        contexts: dict[tuple[str, tuple[DocImage, ...]], tuple[list[int], ExtraInputs]] = {}
        for i, r in enumerate(requests):
            if r.images:
                pairs[i], extras[i] = self._encode_pair(r, contexts)
        scores = self.scorer.score(pairs, extras)
        return [LoglikelihoodResult(lp, greedy) for lp, greedy in scores]

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        """Generations per request (its images shown), cut at the first stop string."""
        texts, groups = self._generation_groups(requests)
        out: list[Generation] = [Generation("")] * len(requests)
        for params, members in groups.items():
            # The fit-context rule keeps the prompt whole and generates what room it
            # leaves; lm-eval's left-truncates the prompt to make room for max_gen_toks.
            room = self.max_length - (1 if params.fit_context else params.max_gen_toks)
            prompts: list[list[int]] = [[]] * len(members)
            extras: list[ExtraInputs | None] = [None] * len(members)
            plain = [k for k, i in enumerate(members) if not requests[i].images]
            for k, ids in zip(
                plain,
                self._view.encode_prompts([texts[members[k]] for k in plain], room),
                strict=True,
            ):
                prompts[k] = ids
            for k, i in enumerate(members):
                if requests[i].images:
                    ids, extras[k] = self._encode(texts[i], requests[i].images)
                    prompts[k] = self._fitting(ids, room, "prompt")
            limits = (
                [min(params.max_gen_toks, self.max_length - len(p)) for p in prompts]
                if params.fit_context
                else None
            )
            generated = self._generator.generate(
                prompts,
                [texts[i] for i in members],
                params,
                [requests[i].sample_index for i in members],
                limits,
                extras,
            )
            for i, text in zip(members, generated, strict=True):
                out[i] = text
        return out

    def chat_template(self) -> ProcessorChatTemplate:  # type: ignore[override]
        """The processor's chat template, with image parts where prompts say `<image>`."""
        return ProcessorChatTemplate(
            self.processor,
            self.mm.max_images,
            self.mm.interleave,
            missing=f"--model {BACKEND}: the processor of "
            f"{self.args.tokenizer or self.args.pretrained!r} has no chat template; run without "
            "--apply-chat-template or give an instruction-tuned model's processor (tokenizer=...).",
        )

    @classmethod
    def unloaded(cls, model_args: Mapping[str, Any]) -> LM | None:
        """None: its identity holds the processor's image token, read as the model loads (the
        run builds it first)."""
        return None

    def provenance(self) -> ModelProvenance:
        """Model id, revision and hub commit, dtype, parameter count, processor and template."""
        out = super().provenance()
        out["backend"] = BACKEND
        out["chat_template_sha256"] = template_sha256(self.processor)
        return out

    def identity(self) -> dict[str, Any]:
        """Everything that changes this backend's outputs (the response cache keys on it)."""
        mm = self.mm
        return {
            **super().identity(),
            "backend": BACKEND,
            "image_token": self.image_token,
            "interleave": mm.interleave,
            "max_images": mm.max_images,
            "convert_img_format": mm.convert_img_format,
            "pixels": [mm.min_pixels, mm.max_pixels],
            "resize": [mm.image_width, mm.image_height, mm.image_max_side],
        }

    def _encode_pair(
        self,
        request: LoglikelihoodRequest,
        contexts: dict[tuple[str, tuple[DocImage, ...]], tuple[list[int], ExtraInputs]],
    ) -> tuple[tuple[list[int], list[int]], ExtraInputs]:
        """lm-eval's `_encode_multimodal_pair`: trailing spaces move to the continuation, and
        the continuation's tokens are those of context + continuation after the context's."""
        context, continuation = request.context, request.continuation
        stripped = context.rstrip()
        context, continuation = stripped, context[len(stripped) :] + continuation
        if not context:
            raise ModelError(
                f"--model {BACKEND}: a loglikelihood request with images has an empty context "
                "(acc_mutual_info's unconditioned score?); lm-eval's hf-multimodal refuses it "
                "too. Drop acc_mutual_info from the task's metrics."
            )
        key = (context, request.images)
        if key not in contexts:
            contexts[key] = self._encode(context, request.images)
        context_ids, extra = contexts[key]
        whole, _ = self._encode(context + continuation, request.images, keep_pixels=False)
        self._fitting(whole, self.max_length + 1, "context and continuation")
        return (context_ids, whole[len(context_ids) :]), extra

    def _fitting(self, ids: list[int], room: int, what: str) -> list[int]:
        """`ids` when they fit in `room` tokens; a request with images is never left-truncated
        (cutting image tokens would part them from their pixels), it is refused."""
        if len(ids) <= room:
            return ids
        raise ModelError(
            f"--model {BACKEND}: a {what} with images is {len(ids)} tokens (its images "
            f"included), more than the {room} that fit in max_length={self.max_length}; "
            "cutting it would drop image tokens. Raise max_length (model arg), lower "
            "max_gen_toks, or shrink the images (image_max_side, max_pixels)."
        )

    def _encode(
        self, text: str, images: Sequence[DocImage], keep_pixels: bool = True
    ) -> tuple[list[int], ExtraInputs]:
        """Token ids of `text` with its images (placeholders made image tokens) and the
        images' model inputs."""
        import torch

        mm = self.mm
        pictures = [
            resize_image(image.load(), mm.image_width, mm.image_height, mm.image_max_side)
            for image in images[: mm.max_images]
        ]
        if mm.convert_img_format:
            pictures = [p.convert("RGB") for p in pictures]
        text = replace_placeholders(text, self.image_token, mm.max_images)
        try:
            encoding = self.processor(
                text=[text],
                images=pictures if self._flat_images else [pictures],
                return_tensors="pt",
            )
        except (ValueError, TypeError) as exc:
            raise ModelError(
                f"--model {BACKEND}: the processor refused a prompt with {len(pictures)} "
                f"image(s): {exc}. Each image needs one `<image>` in the prompt (at most "
                f"max_images={mm.max_images}); prompt: {text[:200]!r}"
            ) from None
        ids = encoding.pop("input_ids")[0].tolist()
        encoding.pop("attention_mask", None)
        tensors = {}
        if keep_pixels:
            for name, value in encoding.items():
                value = torch.as_tensor(value)
                tensors[name] = (
                    value.to(self._dtype_of_model) if value.is_floating_point() else value
                )
        key = (tuple(image.sha256 for image in images[: mm.max_images]),)
        return ids, ExtraInputs(key, tensors)

    def _image_token(self) -> str:
        """The text of the model's image token, by lm-eval's rule."""
        if self.mm.image_string:
            return self.mm.image_string
        config = self.model.config
        token_id = (
            self.mm.image_token_id
            if self.mm.image_token_id is not None
            else getattr(config, "image_token_id", None)
            or getattr(config, "image_token_index", None)
        )
        if token_id is None:
            raise ConfigError(
                f"--model {BACKEND}: the model config of {self.args.pretrained!r} names no image "
                "token; pass image_token_id=<id> or image_string=<text> in --model-args."
            )
        return str(self.tokenizer.decode([int(token_id)], skip_special_tokens=False))


def _load(args: MultimodalArgs) -> dict[str, Any]:
    """Processor and model on the chosen device; ModelError on any failure."""
    import torch

    hf = args.hf
    device = _pick_device(hf.device)
    _check_source(hf.pretrained, "pretrained")
    if hf.tokenizer:
        _check_source(hf.tokenizer, "tokenizer")
    _use_physical_cores(device)
    config = _guarded("read the model config of", hf.pretrained, _load_config, hf.pretrained, hf)
    source = hf.tokenizer or hf.pretrained
    processor = _guarded("load the processor of", source, _load_processor, source, args)
    dtype = "auto" if hf.dtype == "auto" else getattr(torch, hf.dtype)
    model = _guarded("load the weights of", hf.pretrained, _load_model, hf, dtype, device)
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    configure_pad_token(processor.tokenizer)
    return {
        "model": model,
        "processor": processor,
        "device": device,
        "fingerprint": fingerprint(hf, config),
    }


def _load_processor(source: str, args: MultimodalArgs) -> Any:
    from transformers import AutoProcessor

    pixels = {
        name: value
        for name, value in (("min_pixels", args.min_pixels), ("max_pixels", args.max_pixels))
        if value
    }
    processor = AutoProcessor.from_pretrained(
        source, revision=args.hf.revision, trust_remote_code=args.hf.trust_remote_code, **pixels
    )
    if getattr(processor, "tokenizer", None) is None:
        raise ModelError(
            f"--model {BACKEND}: {source!r} has a {type(processor).__name__}, not a processor "
            "with a tokenizer and an image processor; give a vision-language model's directory."
        )
    return processor


def _load_model(hf: HFArgs, dtype: Any, device: Any) -> Any:
    from transformers import AutoModelForImageTextToText

    kwargs: dict[str, Any] = {
        "revision": hf.revision,
        "trust_remote_code": hf.trust_remote_code,
        "dtype": dtype,
    }
    if hf.attn_implementation is not None:
        kwargs["attn_implementation"] = hf.attn_implementation
    return AutoModelForImageTextToText.from_pretrained(hf.pretrained, **kwargs).to(device)


@register_model(BACKEND)
def hf_multimodal(**model_args: Any) -> HFMultimodalLM:
    """`--model hf-multimodal --model-args pretrained=DIR_OR_ID[,max_images=N,interleave=...]`.

    Arguments are checked before anything is loaded; see `MultimodalArgs` for the list.
    """
    return HFMultimodalLM(parse_multimodal_args(model_args))
