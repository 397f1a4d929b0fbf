"""Doc images: what a multimodal doc carries, how it is identified, and lm-eval's `<image>` rules.

A doc's images may be PIL images, file paths, encoded bytes, or the `{"bytes", "path"}` dicts of
an undecoded `datasets.Image` feature. Each becomes a `DocImage`, which decodes its source only
when asked: a path or bytes are read again for each use rather than kept decoded, so a task's
images do not all sit in memory at once.

An image's identity is the sha256 of its decoded pixels (mode, size and raw bytes), so the same
picture given as a PIL image, a PNG file or PNG bytes is one image: requests with it are
deduplicated and cached together, and samples files name it by that digest and its size,
never by its pixels.

Prompts mark where images go with lm-eval's placeholder `<image>`; the backend replaces it by
its own image token (`replace_placeholders`) or turns the text into chat content parts
(`content_parts`), keeping at most `max_images` images.
"""

from __future__ import annotations

import base64
import hashlib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from assay.errors import DataError

if TYPE_CHECKING:
    from PIL import Image as PILImage

IMAGE_PLACEHOLDER = "<image>"
"""Where an image goes in a prompt (lm-eval's DEFAULT_IMAGE_PLACEHOLDER)."""


class ImageRef(TypedDict):
    """How samples files and reports name an image: never its pixels."""

    sha256: str
    """sha256 of the decoded pixels (see `DocImage.sha256`); of the URL text for a URL."""
    size: NotRequired[list[int]]
    """[width, height] in pixels (absent for a URL: it is never fetched)."""
    url: NotRequired[str]
    """The image's http(s) URL, when it was given as one."""


class DocImage:
    """One image of a doc, decoded on demand.

    Args:
        source: a PIL image, a path (str or Path), encoded bytes (PNG, JPEG, ...), a
            `{"bytes": ..., "path": ...}` dict as `datasets.Image(decode=False)` gives, a
            `data:image/...;base64,` URL, or an http(s) URL. An http(s) URL is never fetched:
            API backends pass it through, local backends refuse it.

    Two DocImages are equal when their pixels are: requests compare and hash by `sha256`.
    """

    __slots__ = ("_digest", "_size", "source")

    def __init__(self, source: Any) -> None:
        self.source = source
        self._digest: str | None = None
        self._size: tuple[int, int] | None = None

    @property
    def url(self) -> str | None:
        """The http(s) URL the image was given as (None for any other source)."""
        src = self.source
        return src if isinstance(src, str) and src.startswith(_REMOTE) else None

    def load(self) -> PILImage.Image:
        """The image, decoded (a PIL image source is returned as is)."""
        from PIL import Image

        src = self.source
        if isinstance(src, Image.Image):
            return src
        if self.url is not None:
            raise DataError(
                f"image {self.url!r} is a URL: assay never downloads images. API backends "
                "pass URLs through; for a local model, give the file or its bytes."
            )
        if isinstance(src, str) and src.startswith("data:"):
            src = base64.b64decode(src.partition(",")[2])
        if isinstance(src, dict):
            src = src.get("bytes") or src.get("path")
        if isinstance(src, bytes | bytearray):
            image = Image.open(io.BytesIO(src))
        else:
            image = Image.open(Path(src))
        image.load()  # read now: the file handle is not kept open
        return image

    @property
    def sha256(self) -> str:
        """sha256 of the decoded pixels: mode, width x height, then the raw pixel bytes (of the
        URL's text for an http(s) URL)."""
        if self._digest is None and self.url is not None:
            self._digest = hashlib.sha256(f"url:{self.url}".encode()).hexdigest()
        if self._digest is None:
            image = self.load()
            h = hashlib.sha256(f"{image.mode}:{image.width}x{image.height}:".encode())
            h.update(image.tobytes())
            self._digest, self._size = h.hexdigest(), image.size
        return self._digest

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) in pixels (decodes the image; a URL has none and raises)."""
        if self._size is None:
            self.sha256  # noqa: B018 - decodes once and records the size with the digest
        assert self._size is not None
        return self._size

    def reference(self) -> ImageRef:
        """What samples files record: the digest and the size (the digest and URL of a URL)."""
        if self.url is not None:
            return {"sha256": self.sha256, "url": self.url}
        return {"sha256": self.sha256, "size": list(self.size)}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DocImage) and other.sha256 == self.sha256

    def __hash__(self) -> int:
        return hash(self.sha256)

    def __repr__(self) -> str:
        return f"DocImage({self.reference()})"


_REMOTE = ("http://", "https://")


def is_image_source(value: Any) -> bool:
    """Whether `value` is something `DocImage` can hold (without decoding it)."""
    if isinstance(value, DocImage | bytes | bytearray | Path):
        return True
    if isinstance(value, dict):
        return bool(value.get("bytes") or value.get("path"))
    if isinstance(value, str):
        return True
    return _is_pil(value)


def _is_pil(value: Any) -> bool:
    # PIL is imported only when something that may be a PIL image is seen.
    if type(value).__module__.split(".")[0] != "PIL":
        return False
    from PIL import Image

    return isinstance(value, Image.Image)


def as_doc_images(value: Any, where: str) -> list[DocImage]:
    """A doc's images as DocImages: one image or a list of them (nested lists are flattened,
    None entries dropped, as lm-eval drops the None of a missing feature).

    A value that is not an image (a number, a dict without bytes or path, ...) raises a
    DataError naming `where`. A path that does not exist is refused here, not mid-run.
    """
    items = value if isinstance(value, list | tuple) else [value]
    out: list[DocImage] = []
    for i, item in enumerate(items):
        if item is None:
            continue
        if isinstance(item, list | tuple):
            out += as_doc_images(item, f"{where}[{i}]")
            continue
        if isinstance(item, DocImage):
            out.append(item)
            continue
        if not is_image_source(item):
            raise DataError(
                f"{where}: image {i} is a {type(item).__name__} ({str(item)[:80]!r}), not an "
                "image. Give PIL images, file paths, encoded image bytes, or datasets' "
                "{'bytes', 'path'} dicts."
            )
        path: str | Path | None = item if isinstance(item, Path) else None
        if isinstance(item, str) and not item.startswith((*_REMOTE, "data:")):
            path = item
        if isinstance(item, dict) and not item.get("bytes"):
            path = item.get("path")
        if path is not None and not Path(path).is_file():
            raise DataError(f"{where}: image {i} is the path {str(path)!r}, which is not a file.")
        out.append(DocImage(item))
    return out


def image_reference(value: Any) -> Any:
    """An image-like value of a dataset row as samples files write it: a PIL image or a
    DocImage as its ImageRef, encoded bytes as their sha256 and length; anything else as is."""
    if isinstance(value, DocImage):
        return value.reference()
    if isinstance(value, bytes | bytearray):
        return {"sha256": hashlib.sha256(value).hexdigest(), "n_bytes": len(value)}
    if _is_pil(value):
        return DocImage(value).reference()
    return value


def replace_placeholders(text: str, image_token: str, max_images: int) -> str:
    """lm-eval's `replace_placeholders`: the first `max_images` `<image>` placeholders become
    `image_token`; later ones stay as written (or vanish when the token is `<image>` itself)."""
    parts = text.split(IMAGE_PLACEHOLDER)
    out: list[str] = []
    for count, part in enumerate(parts[:-1]):
        out.append(part)
        if count < max_images:
            out.append(image_token)
        elif image_token != IMAGE_PLACEHOLDER:
            out.append(IMAGE_PLACEHOLDER)
    out.append(parts[-1])
    return "".join(out)


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image's place among a message's content parts (the i-th image of the request)."""

    index: int


ContentPart = str | ImagePart
"""A chat message's content as parts: text, or where an image goes."""


def content_parts(
    text: str, *, max_images: int, interleave: bool = True, start: int = 0
) -> list[ContentPart]:
    """A message's text as content parts, as lm-eval's hf-multimodal builds chat messages.

    interleave: text split at each `<image>`, with an image part in place of each of the first
    `max_images` placeholders (empty text pieces dropped; later placeholders vanish).
    Not interleaved: one image part per placeholder (at most `max_images`), then the whole text
    with every placeholder removed. Image parts count from `start` (the images of earlier
    messages).
    """
    count = text.count(IMAGE_PLACEHOLDER)
    if not interleave:
        images: list[ContentPart] = [ImagePart(start + i) for i in range(min(max_images, count))]
        return [*images, text.replace(IMAGE_PLACEHOLDER, "")]
    out: list[ContentPart] = []
    pieces = text.split(IMAGE_PLACEHOLDER)
    for i, piece in enumerate(pieces):
        if piece:
            out.append(piece)
        if i < len(pieces) - 1 and i < max_images:
            out.append(ImagePart(start + i))
    return out


def message_parts(
    messages: Sequence[tuple[str, str]],
    n_images: int,
    *,
    max_images: int = 999,
    interleave: bool = True,
) -> list[tuple[str, list[ContentPart]]]:
    """A chat's (role, text) messages as (role, content parts), images numbered in order of
    appearance across the messages (the order of `Request.images`).

    A chat whose text has no `<image>` at all while the request has `n_images` images gets them
    after the text of its last user message, as multimodal prompts built without placeholders
    put them
    (`[text, image, image, ...]`), at most `max_images`.
    """
    if n_images and not any(IMAGE_PLACEHOLDER in text for _, text in messages):
        last_user = max((i for i, (role, _) in enumerate(messages) if role == "user"), default=-1)
        images: list[ContentPart] = [ImagePart(i) for i in range(min(n_images, max_images))]
        return [
            (role, [text, *images] if i == last_user else [text])
            for i, (role, text) in enumerate(messages)
        ]
    out: list[tuple[str, list[ContentPart]]] = []
    seen = 0
    for role, text in messages:
        parts = content_parts(text, max_images=max_images, interleave=interleave, start=seen)
        seen += sum(isinstance(p, ImagePart) for p in parts)
        out.append((role, parts))
    return out


def resize_image(
    image: PILImage.Image,
    width: int | None = None,
    height: int | None = None,
    max_side: int | None = None,
) -> PILImage.Image:
    """lm-eval's `resize_image` (hf-multimodal's image_width / image_height / image_max_side):
    only ever shrinks, keeps the aspect ratio, sizes rounded down and at least 1 pixel.

    Both width and height: fit inside the box; one of them: scale to it; max_side: the longer
    side becomes max_side. An image already within bounds is returned as is.
    """
    w, h = image.size
    if width is not None and height is not None:
        if w <= width and h <= height:
            return image
        ratio = min(width / w, height / h)
        new = (int(w * ratio), int(h * ratio))
    elif width is not None:
        if w <= width:
            return image
        new = (width, int(h / w * width))
    elif height is not None:
        if h <= height:
            return image
        new = (int(w / h * height), height)
    elif max_side is not None:
        if max(w, h) <= max_side:
            return image
        new = (max_side, int(h / w * max_side)) if w > h else (int(w / h * max_side), max_side)
    else:
        return image
    return image.resize((max(1, new[0]), max(1, new[1])))
