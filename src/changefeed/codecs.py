"""Encoders and decoders by protocol name: the one place the CLI and pipelines get codecs from."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .config import IMPLEMENTED_PROTOCOLS, CodecConfig, ConfigError
from .errors import DecodeError
from .eventline import Message
from .model import Event, TableInfo

if TYPE_CHECKING:
    from .routing import TopicSource


class Encoder(Protocol):
    def encode(self, ev: Event) -> list[Message]: ...


class Decoder(Protocol):
    def decode(self, value: bytes | None, key: bytes | None = None) -> list[Event]: ...


# What some decoders can do beyond `decode`. A protocol's decoder declares an ability by having its methods
# (checked once, when `GuardedDecoder` wraps it); consumers ask the guarded decoder, which has them all.

@runtime_checkable
class Remembering(Protocol):
    """Learns table definitions seen earlier (a consumer resuming, or one running in pieces), in commit order."""

    def remember(self, t: TableInfo) -> None: ...


@runtime_checkable
class Buffering(Protocol):
    """Holds DML that came before its table's schema (the simple protocol), releasing it with a later message."""

    @property
    def pending(self) -> int:
        """How many messages wait for their schema."""
        ...

    def take_pending(self) -> list[bytes]:
        """The raw messages still waiting (for dead letters); the buffer is emptied."""
        ...

    def finish(self) -> None:
        """At the end of a stream: raises DecodeError if messages still wait."""
        ...


class ConsumerDecoder(Decoder, Protocol):
    """A decoder with every ability, those its protocol lacks doing nothing (what `make_decoder` gives)."""

    @property
    def remembers(self) -> bool:
        """Whether `remember` keeps anything."""
        ...

    def remember(self, t: TableInfo) -> None: ...

    @property
    def pending(self) -> int: ...

    def take_pending(self) -> list[bytes]: ...

    def finish(self) -> None: ...


def _not_yet(cfg: CodecConfig) -> ConfigError:
    return ConfigError(f"protocol {cfg.protocol} is not implemented yet (implemented: "
                       f"{', '.join(IMPLEMENTED_PROTOCOLS)})")


def _claim_check(cfg: CodecConfig) -> Any:
    if not cfg.claim_check:
        return None
    from .claimcheck import FileClaimCheck

    return FileClaimCheck(cfg.claim_check_storage_uri)


def _registry(cfg: CodecConfig) -> Any:
    if not cfg.schema_registry:
        raise ConfigError(f"protocol {cfg.protocol} needs a schema registry: --option schema-registry=http://host:port")
    from .avro import SchemaRegistry

    return SchemaRegistry(cfg.schema_registry, **registry_tls_args(cfg))


def registry_tls_args(cfg: CodecConfig) -> dict[str, Any]:
    """The SchemaRegistry keyword arguments of a config's registry TLS options (none for plain http)."""
    if not (cfg.schema_registry_ca or cfg.schema_registry_cert or cfg.schema_registry_insecure_skip_verify):
        return {}
    return {"ca": cfg.schema_registry_ca, "cert": cfg.schema_registry_cert, "key": cfg.schema_registry_key,
            "insecure": cfg.schema_registry_insecure_skip_verify}


def make_encoder(cfg: CodecConfig, *, clock_ms: Callable[[], int] | None = None,
                 clock_s: Callable[[], float] | None = None, bootstrap: bool = True,
                 topic: str | TopicSource | None = None) -> Encoder:
    """The protocol's encoder; for the simple protocol with its BOOTSTRAP cadence (unless bootstrap=False).

    `topic` (a topic expression, or the producer's router) names the topic of each table for the codecs
    whose schema subjects follow the topic (the Avro protocols)."""
    if cfg.protocol == "canal-json":
        from .canal import CanalJSONEncoder

        return CanalJSONEncoder(cfg, claim_check=_claim_check(cfg), clock_ms=clock_ms)
    if cfg.protocol == "simple":
        from .simple import Bootstrapper, BootstrappingEncoder, SimpleEncoder

        enc = SimpleEncoder(cfg, claim_check=_claim_check(cfg), clock_ms=clock_ms)
        if not bootstrap:
            return enc
        kw = {"clock": clock_s} if clock_s is not None else {}
        b = Bootstrapper(cfg.send_bootstrap_interval_in_sec, cfg.send_bootstrap_in_msg_count, **kw)
        return BootstrappingEncoder(enc, b, cfg.send_bootstrap_to_all_partition)
    if cfg.protocol == "avro":
        from .avro import AvroEncoder
        from .avro.encoder import DEFAULT_TOPIC

        return AvroEncoder(cfg, _registry(cfg), topic=topic or DEFAULT_TOPIC)
    if cfg.protocol == "debezium":
        from .debezium import DebeziumEncoder

        return DebeziumEncoder(cfg, clock_ms=clock_ms)
    if cfg.protocol == "debezium-avro":
        from .debezium.avro import DebeziumAvroEncoder

        return DebeziumAvroEncoder(cfg, _registry(cfg), topic=topic, clock_ms=clock_ms)
    raise _not_yet(cfg)


class GuardedDecoder:
    """A protocol decoder whose every failure is a DecodeError: a message of an unexpected shape (a list
    where an object is expected, a number past any range) must become a dead letter, never a traceback.
    The decoders check the shapes they rely on; this catches what they do not."""

    def __init__(self, inner: Decoder, protocol: str) -> None:
        self.inner = inner
        self.protocol = protocol
        self._remembering = inner if isinstance(inner, Remembering) else None
        self._buffering = inner if isinstance(inner, Buffering) else None

    def decode(self, value: bytes | None, key: bytes | None = None) -> list[Event]:
        try:
            return self.inner.decode(value, key)
        except DecodeError:
            raise
        except (RecursionError, MemoryError) as e:
            raise DecodeError(f"{self.protocol} message too deeply nested or too large ({type(e).__name__})",
                              offset=0) from None
        except Exception as e:  # noqa: BLE001 - any other failure is the message's shape: say what broke
            raise DecodeError(f"malformed {self.protocol} message ({type(e).__name__}: {e})",
                              field=_field_of(e), offset=0) from None

    # the inner decoder's abilities (Remembering, Buffering), or nothing to do
    @property
    def remembers(self) -> bool:
        return self._remembering is not None

    def remember(self, t: TableInfo) -> None:
        if self._remembering is not None:
            self._remembering.remember(t)

    @property
    def pending(self) -> int:
        return self._buffering.pending if self._buffering is not None else 0

    def take_pending(self) -> list[bytes]:
        return self._buffering.take_pending() if self._buffering is not None else []

    def finish(self) -> None:
        if self._buffering is not None:
            self._buffering.finish()


def _field_of(e: Exception) -> str | None:
    """The JSON field a KeyError names (a missing field); others do not say."""
    if isinstance(e, KeyError) and e.args and isinstance(e.args[0], str):
        return e.args[0]
    return None


def make_decoder(cfg: CodecConfig) -> ConsumerDecoder:
    """The protocol's decoder, guarded: any input gives events or a DecodeError."""
    return GuardedDecoder(_make_decoder(cfg), cfg.protocol)


def _make_decoder(cfg: CodecConfig) -> Decoder:
    if cfg.protocol == "canal-json":
        from .canal import CanalJSONDecoder
        from .claimcheck import FileClaimCheck

        # without a configured storage a file:// location is read as written
        reader = FileClaimCheck(cfg.claim_check_storage_uri)
        return CanalJSONDecoder(cfg, claim_check=reader)
    if cfg.protocol == "simple":
        from .claimcheck import FileClaimCheck
        from .simple import SimpleDecoder

        return SimpleDecoder(cfg, claim_check=FileClaimCheck(cfg.claim_check_storage_uri))
    if cfg.protocol == "avro":
        from .avro import AvroDecoder

        return AvroDecoder(cfg, _registry(cfg))
    if cfg.protocol == "debezium":
        from .debezium import DebeziumDecoder

        return DebeziumDecoder(cfg)
    if cfg.protocol == "debezium-avro":
        from .debezium.avro import DebeziumAvroDecoder

        return DebeziumAvroDecoder(cfg, _registry(cfg))
    raise _not_yet(cfg)
