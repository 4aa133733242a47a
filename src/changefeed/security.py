"""TiCDC's Kafka security options (sink URI or `[sink.kafka-config]`) as each client's own settings.

One reading of `enable-tls`, `ca`, `cert`, `key`, `insecure-skip-verify`, `sasl-user`, `sasl-password`,
`sasl-mechanism` and the GSSAPI/OAUTHBEARER parameters, given to librdkafka (producer, admin client, `tail`,
`verify --against kafka://`) and to Spark's Kafka source (the Java client), so the two sides of a stream
connect the same way. What a client cannot do is refused in one line before anything connects. Every secret
read here is remembered for redaction (redact.py).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .redact import remember, remember_options

SECURITY_KEYS = (
    "enable-tls", "ca", "cert", "key", "insecure-skip-verify", "sasl-user", "sasl-password", "sasl-mechanism",
    "sasl-gssapi-auth-type", "sasl-gssapi-keytab-path", "sasl-gssapi-kerberos-config-path",
    "sasl-gssapi-service-name", "sasl-gssapi-user", "sasl-gssapi-password", "sasl-gssapi-realm",
    "sasl-gssapi-disable-pafxfast", "sasl-oauth-client-id", "sasl-oauth-client-secret", "sasl-oauth-token-url",
    "sasl-oauth-scopes", "sasl-oauth-grant-type", "sasl-oauth-audience", "kafka-client-id",
)
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")
_OAUTH_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


def _true(v: str | None) -> bool:
    return (v or "").strip().lower() in ("true", "1", "yes", "on")


def _jaas_quote(v: str) -> str:
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class KafkaSecurity:
    """The security options of one Kafka endpoint, checked."""

    options: Mapping[str, str]
    scheme_tls: bool = False  # kafka+ssl://

    def get(self, key: str, default: str = "") -> str:
        return self.options.get(key, default)

    @property
    def tls(self) -> bool:
        """TLS when asked (enable-tls=true, kafka+ssl://) or implied by a CA or a client certificate."""
        return self.scheme_tls or _true(self.get("enable-tls")) or bool(self.get("ca") or self.get("cert"))

    @property
    def mechanism(self) -> str | None:
        m = self.get("sasl-mechanism").strip().upper().replace("_", "-")
        if m:
            return m
        return "PLAIN" if self.get("sasl-user") else None

    @property
    def protocol(self) -> str:
        if self.mechanism:
            return "SASL_SSL" if self.tls else "SASL_PLAINTEXT"
        return "SSL" if self.tls else "PLAINTEXT"

    @property
    def insecure(self) -> bool:
        return _true(self.get("insecure-skip-verify"))

    def check(self) -> KafkaSecurity:
        m = self.mechanism
        if m is not None and m not in MECHANISMS:
            raise ConfigError(f"sasl-mechanism={self.get('sasl-mechanism')!r}: expected one of {', '.join(MECHANISMS)}")
        if m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and not self.get("sasl-user"):
            raise ConfigError(f"sasl-mechanism={m} needs sasl-user= and sasl-password=")
        if m == "GSSAPI":
            auth = self.get("sasl-gssapi-auth-type", "user").lower()
            if auth not in ("keytab", "user"):
                raise ConfigError(f"sasl-gssapi-auth-type={auth!r}: expected keytab or user")
            if auth == "user":
                raise ConfigError("sasl-gssapi-auth-type=user (a Kerberos password) is not supported by the Kafka "
                                  "clients changefeed uses: use sasl-gssapi-auth-type=keytab with "
                                  "sasl-gssapi-keytab-path=")
            if not self.get("sasl-gssapi-keytab-path") or not self.get("sasl-gssapi-user"):
                raise ConfigError("sasl-mechanism=GSSAPI needs sasl-gssapi-keytab-path= and sasl-gssapi-user=")
        if m == "OAUTHBEARER":
            for k in ("sasl-oauth-client-id", "sasl-oauth-client-secret", "sasl-oauth-token-url"):
                if not self.get(k):
                    raise ConfigError(f"sasl-mechanism=OAUTHBEARER needs {k}=")
            grant = self.get("sasl-oauth-grant-type", "client_credentials")
            if grant != "client_credentials":
                raise ConfigError(f"sasl-oauth-grant-type={grant!r}: only client_credentials is supported")
            if self.get("sasl-oauth-audience"):
                raise ConfigError("sasl-oauth-audience is not supported by the Kafka clients changefeed uses "
                                  "(librdkafka and Kafka's Java client send no audience)")
        for k in ("ca", "cert", "key", "sasl-gssapi-keytab-path", "sasl-gssapi-kerberos-config-path"):
            if self.get(k) and not Path(self.get(k)).is_file():
                raise ConfigError(f"{k}={self.get(k)}: no such file")
        if bool(self.get("cert")) != bool(self.get("key")):
            raise ConfigError("cert= and key= go together (a client certificate and its private key)")
        return self


def kafka_security(options: Mapping[str, str], scheme: str = "kafka") -> KafkaSecurity:
    """The security options among a URI's (or a TOML's) parameters, checked, their secrets remembered."""
    picked = {k: v for k, v in options.items() if k in SECURITY_KEYS}
    remember_options(picked)
    return KafkaSecurity(picked, scheme_tls=scheme.lower() == "kafka+ssl").check()


def librdkafka_config(sec: KafkaSecurity) -> dict[str, Any]:
    """The settings of a confluent-kafka client (without bootstrap.servers)."""
    conf: dict[str, Any] = {}
    if sec.get("kafka-client-id"):
        conf["client.id"] = sec.get("kafka-client-id")
    if sec.protocol != "PLAINTEXT":
        conf["security.protocol"] = sec.protocol
    m = sec.mechanism
    if m:
        conf["sasl.mechanism"] = m
    if m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        conf["sasl.username"] = sec.get("sasl-user")
        conf["sasl.password"] = sec.get("sasl-password")
    elif m == "GSSAPI":
        conf["sasl.kerberos.service.name"] = sec.get("sasl-gssapi-service-name", "kafka")
        conf["sasl.kerberos.keytab"] = sec.get("sasl-gssapi-keytab-path")
        conf["sasl.kerberos.principal"] = _principal(sec)
    elif m == "OAUTHBEARER":
        conf["sasl.oauthbearer.method"] = "oidc"
        conf["sasl.oauthbearer.client.id"] = sec.get("sasl-oauth-client-id")
        conf["sasl.oauthbearer.client.secret"] = sec.get("sasl-oauth-client-secret")
        conf["sasl.oauthbearer.token.endpoint.url"] = sec.get("sasl-oauth-token-url")
        if sec.get("sasl-oauth-scopes"):
            conf["sasl.oauthbearer.scope"] = " ".join(sec.get("sasl-oauth-scopes").split(","))
    for ours, theirs in (("ca", "ssl.ca.location"), ("cert", "ssl.certificate.location"),
                         ("key", "ssl.key.location")):
        if sec.get(ours):
            conf[theirs] = sec.get(ours)
    if sec.insecure:
        conf["enable.ssl.certificate.verification"] = False
        conf["ssl.endpoint.identification.algorithm"] = "none"
    return conf


def _principal(sec: KafkaSecurity) -> str:
    user, realm = sec.get("sasl-gssapi-user"), sec.get("sasl-gssapi-realm")
    return f"{user}@{realm}" if realm and "@" not in user else user


def _pkcs8(path: str) -> str:
    """A client key as Kafka's Java client takes it in PEM: PKCS#8, unencrypted."""
    text = Path(path).read_text()
    if "-----BEGIN PRIVATE KEY-----" not in text:
        raise ConfigError(f"key={path}: Kafka's Java client (Spark) takes an unencrypted PKCS#8 PEM key "
                          f"(-----BEGIN PRIVATE KEY-----): openssl pkcs8 -topk8 -nocrypt -in {path} -out KEY.pem")
    remember(text.strip())
    return text


def spark_kafka_options(sec: KafkaSecurity) -> dict[str, str]:
    """The options of Spark's Kafka source (Kafka's Java client), `kafka.`-prefixed."""
    o: dict[str, str] = {}
    if sec.get("kafka-client-id"):
        o["client.id"] = sec.get("kafka-client-id")
    if sec.protocol != "PLAINTEXT":
        o["security.protocol"] = sec.protocol
    m = sec.mechanism
    if m:
        o["sasl.mechanism"] = m
    if m == "PLAIN" or (m or "").startswith("SCRAM"):
        module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if m == "PLAIN" else
                  "org.apache.kafka.common.security.scram.ScramLoginModule")
        o["sasl.jaas.config"] = (f"{module} required username={_jaas_quote(sec.get('sasl-user'))} "
                                 f"password={_jaas_quote(sec.get('sasl-password'))};")
    elif m == "GSSAPI":
        o["sasl.kerberos.service.name"] = sec.get("sasl-gssapi-service-name", "kafka")
        o["sasl.jaas.config"] = ("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
                                 f"keyTab={_jaas_quote(sec.get('sasl-gssapi-keytab-path'))} "
                                 f"principal={_jaas_quote(_principal(sec))};")
    elif m == "OAUTHBEARER":
        o["sasl.login.callback.handler.class"] = _OAUTH_HANDLER
        o["sasl.oauthbearer.token.endpoint.url"] = sec.get("sasl-oauth-token-url")
        scope = " ".join(sec.get("sasl-oauth-scopes").split(","))
        o["sasl.jaas.config"] = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                                 f"clientId={_jaas_quote(sec.get('sasl-oauth-client-id'))} "
                                 f"clientSecret={_jaas_quote(sec.get('sasl-oauth-client-secret'))}"
                                 + (f" scope={_jaas_quote(scope)}" if scope else "") + ";")
    if sec.get("ca"):
        o["ssl.truststore.type"] = "PEM"
        o["ssl.truststore.location"] = sec.get("ca")
    if sec.get("cert"):
        o["ssl.keystore.type"] = "PEM"
        o["ssl.keystore.certificate.chain"] = Path(sec.get("cert")).read_text()
        o["ssl.keystore.key"] = _pkcs8(sec.get("key"))
    if sec.insecure:  # the Java client has no switch to trust any certificate: only the host name check goes
        o["ssl.endpoint.identification.algorithm"] = ""
    remember(o.get("sasl.jaas.config"))
    return {f"kafka.{k}": v for k, v in o.items()}


def jvm_properties(sec: KafkaSecurity) -> dict[str, str]:
    """JVM-wide properties a Java Kafka client needs (Kerberos' krb5.conf), set on the driver's JVM."""
    path = sec.get("sasl-gssapi-kerberos-config-path")
    return {"java.security.krb5.conf": path} if sec.mechanism == "GSSAPI" and path else {}


# --- the schema registry ---------------------------------------------------------------------------------

REGISTRY_TLS_KEYS = ("schema-registry-ca", "schema-registry-cert", "schema-registry-key",
                     "schema-registry-insecure-skip-verify")


def registry_tls(options: Mapping[str, str]) -> dict[str, str]:
    """The registry's TLS options for a Kafka endpoint's: its own `schema-registry-*` ones, else the endpoint's
    `ca` / `cert` / `key` / `insecure-skip-verify` (TiCDC uses one credential for Kafka and the registry)."""
    out = {k: options[k] for k in REGISTRY_TLS_KEYS if options.get(k)}
    for k in ("ca", "cert", "key", "insecure-skip-verify"):
        if options.get(k) and f"schema-registry-{k}" not in out:
            out[f"schema-registry-{k}"] = options[k]
    return out


def registry_ssl_context(ca: str = "", cert: str = "", key: str = "", insecure: bool = False) -> ssl.SSLContext:
    """The TLS context of an https registry: its CA (else the system's), a client certificate, or no check."""
    try:
        ctx = ssl.create_default_context(cafile=ca or None)
        if cert:
            ctx.load_cert_chain(cert, key or None)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"schema registry TLS ({ca or cert}): {e}") from None
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx
