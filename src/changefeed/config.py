"""Codec options, spelled as in TiCDC's sink URI (`enable-tidb-extension=true`, ...).

One `CodecConfig` holds every codec option, as TiCDC's `common.Config` does; each option names the
protocols it applies to. What TiCDC refuses is refused (a value that does not parse, max-message-bytes <= 0,
a large-message option a protocol cannot carry); what TiCDC accepts and ignores (an option of another protocol,
a parameter it does not know) is accepted with a one-line warning, so a TiCDC user's sink URI works unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from .errors import ConfigError

_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """A one-line warning, once per process: configs are built again in every Spark task."""
    if message not in _WARNED:
        _WARNED.add(message)
        import logging  # (loaded when first needed: the codec commands start without it)

        logging.getLogger("changefeed.config").warning(message)

PROTOCOLS = ("canal-json", "simple", "avro", "debezium", "debezium-avro")
IMPLEMENTED_PROTOCOLS = PROTOCOLS

DEFAULT_MAX_MESSAGE_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class OptionSpec:
    name: str
    attr: str
    kind: str  # bool | int | str | choice
    protocols: tuple[str, ...]
    choices: tuple[str, ...] = ()


_ALL = PROTOCOLS
_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("enable-tidb-extension", "enable_tidb_extension", "bool",
               ("canal-json", "avro", "debezium", "debezium-avro")),
    OptionSpec("content-compatible", "content_compatible", "bool", ("canal-json",)),
    OptionSpec("only-output-updated-columns", "only_output_updated_columns", "bool", ("canal-json",)),
    OptionSpec("delete-only-output-handle-key-columns", "delete_only_output_handle_key_columns", "bool", _ALL),
    OptionSpec("max-message-bytes", "max_message_bytes", "int", _ALL),
    OptionSpec("large-message-handle-option", "large_message_handle_option", "choice", _ALL,
               ("none", "handle-key-only", "claim-check")),
    OptionSpec("large-message-handle-compression", "large_message_handle_compression", "choice", _ALL,
               ("none", "snappy", "lz4")),
    OptionSpec("claim-check-storage-uri", "claim_check_storage_uri", "str", _ALL),
    OptionSpec("claim-check-raw-value", "claim_check_raw_value", "bool", _ALL),
    OptionSpec("output-row-key", "output_row_key", "bool", ("canal-json",)),
    OptionSpec("encoding-format", "encoding_format", "choice", ("simple",), ("json", "avro")),
    OptionSpec("send-bootstrap-interval-in-sec", "send_bootstrap_interval_in_sec", "int", ("simple",)),
    OptionSpec("send-bootstrap-in-msg-count", "send_bootstrap_in_msg_count", "int", ("simple",)),
    OptionSpec("send-bootstrap-to-all-partition", "send_bootstrap_to_all_partition", "bool", ("simple",)),
    OptionSpec("avro-decimal-handling-mode", "avro_decimal_handling_mode", "choice", ("avro", "debezium-avro"),
               ("precise", "string")),
    OptionSpec("avro-bigint-unsigned-handling-mode", "avro_bigint_unsigned_handling_mode", "choice",
               ("avro", "debezium-avro"), ("long", "string")),
    OptionSpec("avro-enable-watermark", "avro_enable_watermark", "bool", ("avro", "debezium-avro")),
    # ticdc: the before image of an UPDATE or DELETE in a `_ticdc_before` field (deletes then a full value)
    OptionSpec("avro-include-before-value", "avro_include_before_value", "bool", ("avro",)),
    OptionSpec("schema-registry", "schema_registry", "str", ("avro", "debezium-avro")),
    # an https registry's TLS (security.py); by default the Kafka endpoint's ca / cert / key / insecure-skip-verify
    OptionSpec("schema-registry-ca", "schema_registry_ca", "str", ("avro", "debezium-avro")),
    OptionSpec("schema-registry-cert", "schema_registry_cert", "str", ("avro", "debezium-avro")),
    OptionSpec("schema-registry-key", "schema_registry_key", "str", ("avro", "debezium-avro")),
    OptionSpec("schema-registry-insecure-skip-verify", "schema_registry_insecure_skip_verify", "bool",
               ("avro", "debezium-avro")),
    OptionSpec("debezium-disable-schema", "debezium_disable_schema", "bool", ("debezium",)),
    OptionSpec("debezium-output-old-value", "debezium_output_old_value", "bool", ("debezium", "debezium-avro")),
    OptionSpec("cluster-id", "cluster_id", "str", ("debezium", "debezium-avro")),
    OptionSpec("debezium-output-ddl-and-watermark", "debezium_output_ddl_and_watermark", "bool",
               ("debezium", "debezium-avro")),
    # ticdc: the DML's transaction start TSO in `source.start_ts` (declared in the source schema)
    OptionSpec("debezium-include-start-ts", "debezium_include_start_ts", "bool", ("debezium",)),
    OptionSpec("time-zone", "time_zone", "str", _ALL),
    # TiCDC's codec config EnableRowChecksum: set from the changefeed's [integrity] integrity-check-level =
    # "correctness" (sinkconfig.py); only the simple and avro encoders write checksums
    OptionSpec("enable-row-checksum", "enable_row_checksum", "bool", ("simple", "avro")),
)
OPTIONS: dict[str, OptionSpec] = {o.name: o for o in _OPTIONS}


@dataclass(slots=True)
class CodecConfig:
    protocol: str = "canal-json"
    enable_tidb_extension: bool = False
    content_compatible: bool = False
    only_output_updated_columns: bool = False
    delete_only_output_handle_key_columns: bool = False
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    large_message_handle_option: str = "none"
    large_message_handle_compression: str = "none"
    claim_check_storage_uri: str = ""
    claim_check_raw_value: bool = False
    output_row_key: bool = False
    encoding_format: str = "json"
    send_bootstrap_interval_in_sec: int = 120
    send_bootstrap_in_msg_count: int = 10000
    send_bootstrap_to_all_partition: bool = True
    avro_decimal_handling_mode: str = "precise"
    avro_bigint_unsigned_handling_mode: str = "long"
    avro_enable_watermark: bool = False
    schema_registry: str = ""
    schema_registry_ca: str = ""
    schema_registry_cert: str = ""
    schema_registry_key: str = ""
    schema_registry_insecure_skip_verify: bool = False
    debezium_disable_schema: bool = False
    debezium_output_old_value: bool = True
    cluster_id: str = "default"
    debezium_output_ddl_and_watermark: bool = True  # false: row changes only, as the spec's TiCDC version
    debezium_include_start_ts: bool = False
    avro_include_before_value: bool = False
    time_zone: str = "UTC"
    enable_row_checksum: bool = False
    explicit: frozenset[str] = field(default_factory=frozenset)

    @property
    def handle_key_only(self) -> bool:
        return self.large_message_handle_option == "handle-key-only"

    @property
    def claim_check(self) -> bool:
        return self.large_message_handle_option == "claim-check"


def _convert(spec: OptionSpec, raw: Any) -> Any:
    if spec.kind == "bool":
        if isinstance(raw, bool):
            return raw
        s = str(raw).strip().lower()
        if s in ("true", "1", "yes", "on"):
            return True
        if s in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"option {spec.name}: expected true or false, got {raw!r}")
    if spec.kind == "int":
        try:
            v = int(str(raw).strip())
        except ValueError:
            raise ConfigError(f"option {spec.name}: expected an integer, got {raw!r}") from None
        if v < 0:
            raise ConfigError(f"option {spec.name}: must not be negative, got {v}")
        return v
    if spec.kind == "choice":
        s = str(raw).strip().lower()
        if s not in spec.choices:
            raise ConfigError(f"option {spec.name}: expected one of {', '.join(spec.choices)}, got {raw!r}")
        return s
    return str(raw)


def check_protocol(protocol: str) -> str:
    p = protocol.strip().lower()
    if p not in PROTOCOLS:
        raise ConfigError(f"unknown protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")
    return p


def parse_option_pairs(pairs: list[str]) -> dict[str, str]:
    """`K=V` strings (the CLI's --option) into a dict; a pair without '=' is an error naming it."""
    out: dict[str, str] = {}
    for p in pairs:
        if "=" not in p:
            raise ConfigError(f"option {p!r} is not of the form KEY=VALUE")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def build_config(protocol: str, options: dict[str, Any] | None = None) -> CodecConfig:
    """Validate options for a protocol as TiCDC's config validation does."""
    protocol = check_protocol(protocol)
    cfg = CodecConfig(protocol=protocol)
    applied = []
    for key, raw in (options or {}).items():
        spec = OPTIONS.get(key)
        if spec is None:  # TiCDC binds the parameters it knows and ignores the rest
            warn_once(f"option {key} is not a codec option changefeed knows: ignored, as TiCDC ignores it "
                      f"(codec options: {', '.join(sorted(OPTIONS))})")
            continue
        if protocol not in spec.protocols:  # TiCDC takes it and its encoder never reads it
            warn_once(f"option {key} is ignored for protocol {protocol}, as TiCDC ignores it (it applies to "
                      f"{', '.join(spec.protocols)})")
            continue
        setattr(cfg, spec.attr, _convert(spec, raw))
        applied.append(key)
    cfg.explicit = frozenset(applied)
    if cfg.content_compatible:
        cfg.only_output_updated_columns = True  # TiCDC: content-compatible implies it
    if cfg.large_message_handle_option != "none":
        if protocol == "canal-json" and not cfg.enable_tidb_extension:
            raise ConfigError(f"large-message-handle-option={cfg.large_message_handle_option} with protocol "
                              "canal-json needs enable-tidb-extension=true")
        if protocol not in ("canal-json", "simple"):
            raise ConfigError(f"large-message-handle-option={cfg.large_message_handle_option} is not supported "
                              f"by protocol {protocol}")
        if cfg.claim_check and not cfg.claim_check_storage_uri:
            raise ConfigError("large-message-handle-option=claim-check needs claim-check-storage-uri")
    if cfg.max_message_bytes <= 0:
        raise ConfigError("option max-message-bytes must be positive")
    if protocol == "avro" and cfg.enable_row_checksum and not (
            cfg.enable_tidb_extension and cfg.avro_decimal_handling_mode == "string"
            and cfg.avro_bigint_unsigned_handling_mode == "string"):
        # TiCDC's common.Config.Validate: the checksum needs the extension fields and exact text values
        raise ConfigError('avro protocol with row level checksum should set "enable-tidb-extension" to "true", '
                          'and set "avro-decimal-handling-mode" to "string" and "avro-bigint-unsigned-handling-mode" '
                          'to "string"')
    return cfg


def option_names() -> list[str]:
    return [f.name for f in fields(CodecConfig)]
