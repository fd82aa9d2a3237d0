"""PNG and JPEG with Pillow, no other decoder allowed, a pixel limit checked from the header before decoding.

The image is decoded whole (a truncated or damaged file fails here, not later), and a copy at most
Limits.vision_side pixels on its longest side is written for vision-capable models.
"""

from __future__ import annotations

from PIL import Image, UnidentifiedImageError

from .exceptions import Unreadable
from .parsed import Parsed, Source

FORMATS = {"png": "PNG", "jpeg": "JPEG"}


def describe(meta: dict) -> str:
    return f"{meta['format']} image, {meta['width']:,} × {meta['height']:,} pixels, colour mode {meta['mode']}" + (
        ", with transparency" if meta.get("transparency") else ""
    )


def _transparent(image: Image.Image) -> bool:
    return image.mode in {"RGBA", "LA", "PA"} or "transparency" in image.info


def parse(source: Source, kind: str) -> Parsed:
    limits = source.limits
    # Our limit is checked from the header below; Pillow's own would only warn before twice its value.
    Image.MAX_IMAGE_PIXELS = None
    name = FORMATS[kind]
    try:
        with Image.open(source.path, formats=[name]) as image:
            width, height = image.size
            if width * height > limits.max_pixels:
                raise Unreadable(
                    f"The image is {width:,} × {height:,} pixels ({width * height / 1e6:,.0f} megapixels); at "
                    f"most {limits.max_pixels / 1e6:,.0f} megapixels are accepted (a decompression bomb?)."
                )
            image.load()
            meta = {
                "format": name,
                "width": width,
                "height": height,
                "mode": image.mode,
                "transparency": _transparent(image),
            }
            _vision_copy(image, source, limits.vision_side)
    except UnidentifiedImageError:
        raise Unreadable(f"The file starts like a {name} but is not a readable {name} image.") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise Unreadable(f"The {name} image is damaged or cut short ({exc}).") from None
    return Parsed(
        kind=kind,
        text=f"[Image: {describe(meta)}.]",
        meta=meta,
        index={"media_type": "image/png" if meta["transparency"] else "image/jpeg"},
    )


def _vision_copy(image: Image.Image, source: Source, side: int) -> None:
    copy = image.copy()
    copy.thumbnail((side, side))
    if _transparent(image):
        copy.convert("RGBA").save(source.content, format="PNG", optimize=True)
    else:
        copy.convert("RGB").save(source.content, format="JPEG", quality=85)
