"""canal-json: TiCDC's flavour of Alibaba Canal's flat JSON messages.

The encoder and decoder are loaded when first named (the decoder brings the schema tracker): `changefeed encode`
starts without the decoder's modules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .decoder import CanalJSONDecoder
    from .encoder import CanalJSONEncoder

__all__ = ["CanalJSONDecoder", "CanalJSONEncoder"]


def __getattr__(name: str) -> Any:
    if name == "CanalJSONDecoder":
        from .decoder import CanalJSONDecoder

        return CanalJSONDecoder
    if name == "CanalJSONEncoder":
        from .encoder import CanalJSONEncoder

        return CanalJSONEncoder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
