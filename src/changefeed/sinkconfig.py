"""Sink URIs and changefeed TOML files, spelled as TiCDC spells them.

`kafka://host:port[,host:port]/topic?protocol=canal-json&partition-num=3&...` and
`file:///dir/topic?protocol=...` (the last path segment is the default topic; the folder before it holds
every topic). Codec options are accepted in the URI too. Unknown URI parameters, and TOML keys this
project does not support, are errors that name them.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from .config import OPTIONS, CodecConfig, ConfigError, build_config, warn_once
from .redact import remember, remember_options
from .routing import ColumnSelector, DispatchRule, Partitioner, Router, TopicExpression
from .security import SECURITY_KEYS, registry_tls
from .tablefilter import ColumnFilter, TableFilter

# Kafka sink parameters TiCDC knows (pkg/config/sink.go, pkg/sink/kafka/options.go)
KAFKA_PARAMS = {
    "protocol", "partition-num", "replication-factor", "kafka-version", "kafka-client-id", "compression",
    "auto-create-topic", "dial-timeout", "write-timeout", "read-timeout", "required-acks", "max-batch-size",
    "enable-tls", "ca", "cert", "key", "insecure-skip-verify", "sasl-user", "sasl-password", "sasl-mechanism",
    "sasl-gssapi-auth-type", "sasl-gssapi-keytab-path", "sasl-gssapi-kerberos-config-path",
    "sasl-gssapi-service-name", "sasl-gssapi-user", "sasl-gssapi-password", "sasl-gssapi-realm",
    "sasl-gssapi-disable-pafxfast", "sasl-oauth-client-id", "sasl-oauth-client-secret", "sasl-oauth-token-url",
    "sasl-oauth-scopes", "sasl-oauth-grant-type", "sasl-oauth-audience", "schema-registry",
}
FILE_PARAMS = {"protocol", "partition-num"}
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass
class SinkURI:
    scheme: str  # kafka | file
    brokers: list[str]
    folder: Path | None
    topic: str
    protocol: str
    partition_num: int = 3
    replication_factor: int = 1
    compression: str = "none"
    kafka: dict[str, str] = field(default_factory=dict)  # TLS, SASL and other client settings, passed through
    codec_options: dict[str, str] = field(default_factory=dict)


def parse_sink_uri(uri: str) -> SinkURI:
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme not in ("kafka", "kafka+ssl", "file"):
        raise ConfigError(f"sink URI {uri!r}: scheme {parts.scheme!r} is not supported (kafka:// or file://)")
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    known = (KAFKA_PARAMS if scheme != "file" else FILE_PARAMS) | set(OPTIONS)
    unknown = sorted(k for k in params if k not in known)
    if unknown:  # TiCDC's sink binds the parameters it knows and ignores the rest
        warn_once(f"sink URI: parameter(s) {', '.join(unknown)} ignored (not TiCDC sink or codec options)")
    protocol = params.get("protocol", "")
    if not protocol:
        raise ConfigError("sink URI: protocol= is missing (canal-json, simple, avro, debezium, debezium-avro)")
    path = unquote(parts.path)
    if scheme == "file":
        if not path or path.endswith("/"):
            raise ConfigError(f"sink URI {uri!r}: file:///folder/topic — the last path segment is the topic")
        p = Path(path)
        folder, topic, brokers = p.parent, p.name, []
    else:
        topic = path.strip("/")
        if not topic or "/" in topic:
            raise ConfigError(f"sink URI {uri!r}: kafka://host:port/topic — one topic name after the host")
        brokers = [b for b in (parts.netloc.rsplit("@", 1)[-1]).split(",") if b]
        if not brokers:
            raise ConfigError(f"sink URI {uri!r}: no broker address")
        folder = None
    compression = params.get("compression", "none").lower()
    if compression not in COMPRESSIONS:
        raise ConfigError(f"sink URI: compression={compression!r}: expected one of {', '.join(COMPRESSIONS)}")

    def positive(name: str, default: int) -> int:
        raw = params.get(name)
        if raw is None:
            return default
        try:
            v = int(raw)
        except ValueError:
            raise ConfigError(f"sink URI: {name}={raw!r} is not a number") from None
        if v <= 0:
            raise ConfigError(f"sink URI: {name} must be positive")
        return v

    codec = {k: v for k, v in params.items() if k in OPTIONS}
    kafka = {k: v for k, v in params.items() if k in KAFKA_PARAMS and k not in ("protocol", "partition-num",
                                                                                 "replication-factor",
                                                                                 "compression")}
    if scheme == "kafka+ssl":
        kafka.setdefault("enable-tls", "true")
    if parts.password:
        remember(unquote(parts.password))
    remember_options(params)
    return SinkURI(scheme="file" if scheme == "file" else "kafka", brokers=brokers, folder=folder, topic=topic,
                   protocol=protocol, partition_num=positive("partition-num", 3),
                   replication_factor=positive("replication-factor", 1), compression=compression, kafka=kafka,
                   codec_options=codec)


# ------------------------------------------------------------------------------------------------
# changefeed TOML
# ------------------------------------------------------------------------------------------------

_SINK_KEYS = {
    "protocol": None, "dispatchers": None, "column-selectors": None,
    "delete-only-output-handle-key-columns": "delete-only-output-handle-key-columns",
    "send-bootstrap-interval-in-sec": "send-bootstrap-interval-in-sec",
    "send-bootstrap-in-msg-count": "send-bootstrap-in-msg-count",
    "send-bootstrap-to-all-partition": "send-bootstrap-to-all-partition",
    "only-output-updated-columns": "only-output-updated-columns",
    "content-compatible": "content-compatible", "encoder-concurrency": None, "terminator": None,
    "date-separator": None, "enable-partition-separator": None, "kafka-config": None,
    "debezium": None, "open": None, "safe-mode": None, "schema-registry": "schema-registry",
    # TiCDC's own keys for other downstreams or its internals: taken, and ignored with a warning when set
    "transaction-atomicity": None, "csv": None, "file-index-digit": None, "enable-kafka-sink-v2": None,
    "pulsar-config": None, "mysql-config": None, "cloud-storage-config": None, "advance-timeout-in-sec": None,
    "send-all-bootstrap-at-start": None,
}
# [sink] keys that change nothing here (storage/MySQL/Pulsar downstreams, TiCDC's own tuning)
_IGNORED_SINK_KEYS = ("encoder-concurrency", "terminator", "date-separator", "enable-partition-separator", "safe-mode",
                      "csv", "file-index-digit", "enable-kafka-sink-v2", "pulsar-config", "mysql-config",
                      "cloud-storage-config", "advance-timeout-in-sec", "send-all-bootstrap-at-start", "open")
_TOP_KEYS = {"case-sensitive", "force-replicate", "check-gc-safe-point", "enable-sync-point", "bdr-mode",
             "sync-point-interval", "sync-point-retention", "memory-quota", "sink", "filter", "mounter",
             "scheduler", "integrity", "consistent", "changefeed-error-stuck-duration", "sql-mode",
             "enable-table-monitor", "ignore-ineligible-table", "synced-status", "enable-old-value",
             "spark",  # [spark]: the consumer's Spark settings (spark/settings.py), not TiCDC's
             "lake",  # [lake]: catalog, database-prefix, table-format of the consumer's tables (spark/apply/names.py)
             "consumer"}  # [consumer]: consume's options (consumerconfig.py), not TiCDC's


@dataclass
class ChangefeedConfig:
    protocol: str | None
    codec_options: dict[str, str]
    rules: list[DispatchRule]
    column_selectors: list[tuple[TableFilter, list[str]]]
    force_replicate: bool = False
    kafka: dict[str, str] = field(default_factory=dict)  # [sink.kafka-config]'s TLS and SASL settings


def _rule(i: int, d: dict[str, Any]) -> DispatchRule:
    unknown = sorted(set(d) - {"matcher", "topic", "partition", "index", "columns", "dispatcher"})
    if unknown:
        raise ConfigError(f"[sink] dispatchers[{i}]: unsupported key(s) {', '.join(unknown)}")
    matcher = d.get("matcher")
    if not isinstance(matcher, list) or not matcher:
        raise ConfigError(f"[sink] dispatchers[{i}]: matcher must be a list of table-filter rules")
    topic = d.get("topic")
    partition = d.get("partition", d.get("dispatcher", "default"))
    return DispatchRule(TableFilter(matcher), TopicExpression(topic) if topic else None,
                        Partitioner(partition, index=d.get("index", ""), columns=d.get("columns")))


def load_changefeed_toml(path: str | Path) -> ChangefeedConfig:
    try:
        doc = tomllib.loads(Path(path).read_text())
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not TOML: {e}") from None
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unsupported key(s) {', '.join(unknown)}")
    sink = doc.get("sink", {})
    unknown = sorted(set(sink) - set(_SINK_KEYS))
    if unknown:
        raise ConfigError(f"{path}: [sink] has unsupported key(s) {', '.join(unknown)}")
    opts: dict[str, str] = {}
    _atomicity(path, sink.get("transaction-atomicity", ""))
    ignored = [k for k in _IGNORED_SINK_KEYS if k in sink]
    if ignored:
        warn_once(f"{path}: [sink] {', '.join(ignored)} ignored (they apply to TiCDC's other downstreams)")
    if _integrity(path, doc.get("integrity", {})):
        opts["enable-row-checksum"] = "true"
    for key, opt in _SINK_KEYS.items():
        if opt and key in sink:
            opts[opt] = str(sink[key]).lower() if isinstance(sink[key], bool) else str(sink[key])
    kc = sink.get("kafka-config", {})
    for sect, keys in (("codec-config", ("encoding-format", "avro-decimal-handling-mode",
                                         "avro-bigint-unsigned-handling-mode", "avro-enable-watermark",
                                         "enable-tidb-extension", "max-batch-size")),
                       ("large-message-handle", ("large-message-handle-option", "large-message-handle-compression",
                                                 "claim-check-storage-uri", "claim-check-raw-value"))):
        sub = kc.get(sect, {})
        extra = sorted(set(sub) - set(keys))
        if extra:
            raise ConfigError(f"{path}: [sink.kafka-config.{sect}] has unsupported key(s) {', '.join(extra)}")
        for k in keys:
            if k == "max-batch-size" and k in sub:  # TiCDC batches open-protocol/craft messages only
                _positive(path, f"[sink.kafka-config.{sect}] {k}", sub[k])
                warn_once(f"{path}: [sink.kafka-config.{sect}] {k} ignored (TiCDC's open protocol and craft only)")
            elif k in sub:
                opts[k] = str(sub[k]).lower() if isinstance(sub[k], bool) else str(sub[k])
    kafka = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in kc.items() if k in SECURITY_KEYS}
    remember_options(kafka)
    if "max-message-bytes" in kc:
        opts["max-message-bytes"] = str(kc["max-message-bytes"])
    dbz = sink.get("debezium", {})
    if "output-old-value" in dbz:
        opts["debezium-output-old-value"] = str(dbz["output-old-value"]).lower()
    rules = [_rule(i, d) for i, d in enumerate(sink.get("dispatchers", []) or [])]
    selectors = []
    for i, cs in enumerate(sink.get("column-selectors", []) or []):
        if not isinstance(cs.get("matcher"), list) or not isinstance(cs.get("columns"), list):
            raise ConfigError(f"{path}: [sink] column-selectors[{i}] needs matcher = [...] and columns = [...]")
        selectors.append((TableFilter(cs["matcher"]), list(cs["columns"])))
    return ChangefeedConfig(protocol=sink.get("protocol"), codec_options=opts, rules=rules,
                            column_selectors=selectors, force_replicate=bool(doc.get("force-replicate", False)),
                            kafka=kafka)


def _positive(path: str | Path, what: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{path}: {what} must be a positive integer, got {value!r}")


def _atomicity(path: str | Path, level: object) -> None:
    """TiCDC's MQ sinks take `none` (and the unset default); `table` only a MySQL sink can honour."""
    if level in ("", "none"):
        return
    if level == "table":
        raise ConfigError(f"{path}: transaction-atomicity = \"table\": table level atomicity is not supported by "
                          "kafka scheme (TiCDC's message); use \"none\"")
    raise ConfigError(f"{path}: transaction-atomicity = {level!r}: expected \"none\" (or \"table\" for a MySQL sink)")


def _integrity(path: str | Path, section: object) -> bool:
    """The [integrity] section, as TiCDC validates it: True when row checksums are to be written.

    TiCDC sets its codec config's EnableRowChecksum from integrity-check-level = "correctness"; the simple
    and avro encoders then write each row's checksums (the other protocols carry none).
    """
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [integrity] must be a table")
    extra = sorted(set(section) - {"integrity-check-level", "corruption-handle-level"})
    if extra:
        raise ConfigError(f"{path}: [integrity] has unsupported key(s) {', '.join(extra)}")
    level = section.get("integrity-check-level", "none")
    if level not in ("none", "correctness"):
        raise ConfigError(f"{path}: [integrity] integrity-check-level = {level!r}: expected \"none\" or "
                          "\"correctness\"")
    handle = section.get("corruption-handle-level", "warn")
    if handle not in ("warn", "error"):
        raise ConfigError(f"{path}: [integrity] corruption-handle-level = {handle!r}: expected \"warn\" or "
                          "\"error\"")
    return level == "correctness"


def resolve(uri: str, toml_path: str | Path | None = None) -> tuple[SinkURI, CodecConfig, Router]:
    """Sink URI + optional TOML: the codec configuration and the router (the URI's options win)."""
    sink = parse_sink_uri(uri)
    cf = load_changefeed_toml(toml_path) if toml_path else None
    protocol = sink.protocol
    if cf and cf.protocol and cf.protocol != protocol:
        raise ConfigError(f"the sink URI says protocol={protocol} and the config file says {cf.protocol}")
    if cf:  # the URI's settings win over the TOML's
        sink.kafka = {**cf.kafka, **sink.kafka}
    opts = dict(cf.codec_options if cf else {})
    opts.update(sink.codec_options)
    opts.update(_registry_tls(opts, sink.kafka))
    if opts.get("enable-row-checksum") == "true" and protocol not in OPTIONS["enable-row-checksum"].protocols:
        warn_once(f"[integrity] integrity-check-level = \"correctness\": protocol {protocol} carries no row "
                  "checksum (TiCDC writes them with the simple and avro protocols only)")
    cfg = build_config(protocol, {k: v for k, v in opts.items()
                                  if protocol in OPTIONS[k].protocols or k in sink.codec_options})
    if cf and cf.force_replicate:  # TiCDC's codec config refuses these with force-replicate (tables without keys)
        if protocol == "avro":
            raise ConfigError("force-replicate must be disabled, when using avro protocol")
        if cfg.handle_key_only:
            raise ConfigError('force-replicate must be disabled, when the large message handle option is set to '
                              '"handle-key-only"')
        if cfg.delete_only_output_handle_key_columns:
            raise ConfigError('force-replicate must be disabled when configuration '
                              '"delete-only-output-handle-key-columns" is true.')
    selector = ColumnSelector([(m, ColumnFilter(cols)) for m, cols in cf.column_selectors] if cf else None)
    router = Router(sink.topic, cf.rules if cf else [], partition_num=sink.partition_num, column_selector=selector)
    return sink, cfg, router


def codec_options(uri: str, protocol: str | None = None,
                  extra: dict[str, str] | None = None) -> tuple[str, dict[str, str]]:
    """The protocol and codec options a consumer of `uri` decodes with: the URI's codec parameters (its sink
    parameters say nothing about decoding), `protocol` and `extra` winning. Unknown parameters are ignored with a
    warning, as TiCDC ignores them."""
    params = dict(parse_qsl(urlsplit(uri).query, keep_blank_values=True)) if "://" in uri else {}
    proto = protocol or params.pop("protocol", None)
    params.pop("protocol", None)
    unknown = sorted(k for k in params if k not in OPTIONS and k not in KAFKA_PARAMS | FILE_PARAMS)
    if unknown:
        warn_once(f"URI {uri.split('?', 1)[0]}: parameter(s) {', '.join(unknown)} ignored (not TiCDC sink or codec "
                  "options)")
    kafka = {k: v for k, v in params.items() if k in SECURITY_KEYS}
    remember_options(kafka)
    params = {k: v for k, v in params.items() if k in OPTIONS}
    params.update(_registry_tls({**params, **(extra or {})}, kafka))
    if not proto:
        raise ConfigError("no protocol: --protocol P or ?protocol=P in the URI")
    params.update(extra or {})
    return proto, params


def _registry_tls(opts: dict[str, str], kafka: dict[str, str]) -> dict[str, str]:
    """An https registry's TLS options, the Kafka endpoint's by default (TiCDC uses one credential for both)."""
    if not opts.get("schema-registry", "").lower().startswith("https://"):
        return {}
    return {k: v for k, v in registry_tls({**kafka, **opts}).items() if k not in opts}


def kafka_settings(uri: str, toml_path: str | Path | None = None) -> dict[str, str]:
    """A Kafka URI's TLS/SASL settings, over those of a changefeed TOML's [sink.kafka-config]."""
    params = dict(parse_qsl(urlsplit(uri).query, keep_blank_values=True)) if "://" in uri else {}
    out = dict(load_changefeed_toml(toml_path).kafka) if toml_path else {}
    out.update({k: v for k, v in params.items() if k in SECURITY_KEYS})
    if urlsplit(uri).scheme.lower() == "kafka+ssl":
        out.setdefault("enable-tls", "true")
    remember_options(out)
    return out
