"""canal-json: TiCDC's flavour of Alibaba Canal's flat JSON messages."""

from .decoder import CanalJSONDecoder
from .encoder import CanalJSONEncoder

__all__ = ["CanalJSONDecoder", "CanalJSONEncoder"]
