"""The loops behind encode, decode, schema and tail: lines or topic records through a codec, line by line."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any

import orjson

from .codecs import ConsumerDecoder, Encoder, make_decoder
from .errors import ChangefeedError, DecodeError
from .eventline import EventReader, EventWriter, LineSource, Message, message_from_line, message_to_line
from .linefiles import DeadLetter

if TYPE_CHECKING:
    from .config import CodecConfig
    from .sinkconfig import SinkURI
    from .transport.files import Record


def encode_lines(encoder: Encoder, lines: Iterable[tuple[int, bytes]], out: IO[bytes],
                 advance: Callable[[int], None], errors: str, dead: DeadLetter, direct: bool = True
                 ) -> tuple[int, int]:
    """Event lines to message lines; returns (events, messages). A bad line fails or is skipped per `errors`.
    Row lines of a table seen before go straight to their message line where the protocol has such a path."""
    reader = EventReader()
    n_events = n_msgs = 0
    fast = _line_encoder(encoder, reader) if direct else None
    taken = [0]  # lines the block tier took (each one event, one message)

    def count(inserts: int, n: int) -> None:
        taken[0] += n

    lines, advance = _with_blocks(lines, fast, "encode", out, advance, count)
    write = out.write
    for lineno, line in lines:
        advance(len(line) + 1)
        if fast is not None:
            msg_line = fast(line)
            if msg_line is not None:
                write(msg_line + b"\n")
                n_events += 1
                n_msgs += 1
                continue
        try:
            ev = reader.parse(line)
        except DecodeError as e:
            bad_line(e, lineno, line, errors, dead)
            continue
        try:
            msgs = encoder.encode(ev)
        except ChangefeedError as e:
            raise ChangefeedError(f"line {lineno}: {e}") from e
        n_events += 1
        for m in msgs:
            out.write(message_to_line(m) + b"\n")
        n_msgs += len(msgs)
    return n_events + taken[0], n_msgs + taken[0]


def bad_line(e: DecodeError, lineno: int, line: bytes, errors: str, dead: DeadLetter) -> None:
    """A line that does not parse: cliio's to record and report (loaded only then)."""
    from .cliio import bad_line as report

    report(e, lineno, line, errors, dead)


def finish_decoder(decoder: ConsumerDecoder, errors: str, dead: DeadLetter) -> None:
    """Messages a decoder still holds at the end (simple-protocol DML that never got its schema)."""
    try:
        decoder.finish()
    except DecodeError as e:
        if errors == "fail":
            raise
        for raw in decoder.take_pending():
            dead.put(0, message_to_line(Message(key=None, value=raw)), e)
        from .cliio import err

        err.print(f"[yellow]skipped:[/] {e}", highlight=False)


def _no_progress(n: int) -> None:
    """Progress already counted."""


def _with_blocks(lines: Iterable[tuple[int, bytes]], fast: Callable | None, way: str, out: IO[bytes],
                 advance: Callable[[int], None], taken: Callable[[int, int], None],
                 ) -> tuple[Iterable[tuple[int, bytes]], Callable[[int], None]]:
    """The lines left for the per-line tiers once the block tier (`way`: encode or decode; imported only when
    used, for the CLI's light start) took what it could, and the progress callback those lines advance (the
    blocks count their own)."""
    blocks = _blocks(lines, fast)
    if blocks is None:
        return lines, advance
    if way == "encode":
        from .canal.blocks import BlockEncoder as Tier
    else:
        from .canal.blockdecode import BlockDecoder as Tier  # type: ignore[assignment]
    tier = Tier(fast.__self__)  # type: ignore[union-attr]
    return _through_blocks(tier, blocks, out, advance, taken), _no_progress


def _blocks(lines: Iterable[tuple[int, bytes]], fast: Callable | None) -> Iterator[bytes] | None:
    """The input's blocks, where the input and the protocol's direct path can take them."""
    if fast is None or not isinstance(lines, LineSource):
        return None
    return lines.blocks()


def _through_blocks(tier: Any, blocks: Iterator[bytes], out: IO[bytes], advance: Callable[[int], None],
                    taken: Callable[[int, int], None]) -> Iterator[tuple[int, bytes]]:
    """Blocks through a block tier, its output written here (and counted by `taken`: inserts, lines); the
    lines it did not take are yielded, in order, for the per-line tiers, each after the lines before it were
    written. A block whose first lines are of a table the tier does not know yet goes on through the tier once
    the per-line tiers took one (`tier.ready()`); one whose converted lines a line in between made stale
    (`tier.valid()`: a decoder's table changed) goes on line by line."""
    write = out.write
    first = 1  # the number of the block's first line
    for block in blocks:
        advance(len(block) + 1)
        while block:
            whole, each, n, inserts = tier.block(block)
            if whole is not None:
                write(whole)
                taken(inserts, n)
                first += n
                break
            raw = block.split(b"\n")
            block = b""
            for i, line in enumerate(raw):
                got = each[i] if each is not None else None
                if got is not None:
                    write(got + b"\n")
                    taken(int(got.startswith(b'{"kind":"insert"')), 1)
                    continue
                line = line.strip()
                if not line:
                    continue
                yield first + i, line
                if each is not None and not tier.valid():
                    each = None
                elif each is None and tier.ready() and i + 1 < len(raw):  # a table's first line: the rest
                    block = b"\n".join(raw[i + 1:])
                    break
            first += i + 1


def decode_lines(decoder: ConsumerDecoder, lines: Iterable[tuple[int, bytes]], out: IO[bytes],
                 advance: Callable[[int], None], errors: str, dead: DeadLetter, direct: bool = True
                 ) -> tuple[int, Counter[str]]:
    """Message lines to event lines; returns (messages, events per kind). Messages the decoder still holds at
    the end are left to the caller (`finish_decoder`)."""
    writer = EventWriter()
    kinds: Counter[str] = Counter()
    n_msgs = 0
    fast = _line_decoder(decoder) if direct else None
    taken = [0]  # messages the block tier took (each one row event)

    def count(inserts: int, n: int) -> None:
        taken[0] += n
        kinds["insert"] += inserts
        kinds["delete"] += n - inserts

    lines, advance = _with_blocks(lines, fast, "decode", out, advance, count)
    write = out.write
    for lineno, line in lines:
        advance(len(line) + 1)
        if fast is not None:
            got = fast(line)
            if got is not None:
                kinds[got[0]] += 1
                write(got[1] + b"\n")
                n_msgs += 1
                continue
        try:
            m = message_from_line(line)
            events = decoder.decode(m.value, m.key)
        except DecodeError as e:
            bad_line(e, lineno, line, errors, dead)
            continue
        n_msgs += 1
        for ev in events:
            kinds[ev.kind.value] += 1
            out.write(writer.line(ev) + b"\n")
    return n_msgs + taken[0], +kinds


def _line_encoder(encoder: Encoder, reader: EventReader) -> Callable[[bytes], bytes | None] | None:
    """The protocol's direct event-line -> message-line path (canal-json), or None."""
    from .canal import CanalJSONEncoder

    if type(encoder) is not CanalJSONEncoder:
        return None
    from .canal.lines import LineEncoder

    direct = LineEncoder(encoder, reader.tables_by_text)
    return direct.line if direct.enabled else None


def _line_decoder(decoder: ConsumerDecoder) -> Callable[[bytes], tuple[str, bytes] | None] | None:
    """The protocol's direct message-line -> event-line path (canal-json), or None."""
    from .canal import CanalJSONDecoder

    inner = getattr(decoder, "inner", decoder)  # GuardedDecoder's: the direct path raises nothing of its own
    if type(inner) is not CanalJSONDecoder:
        return None
    from .canal.lines import LineDecoder

    direct = LineDecoder(inner)
    return direct.line if direct.enabled else None


def write_avro_schemas(cfg: CodecConfig, lines: Iterable[tuple[int, bytes]], out: IO[bytes]) -> None:
    """The key and value Avro schemas of every table (and table version) the event lines carry, once each."""
    from .avro.schema import key_schema, value_schema

    reader = EventReader()
    seen: set[tuple] = set()
    for lineno, line in lines:
        try:
            ev = reader.parse(line)
        except DecodeError as e:
            raise e.located(f"line {lineno}") from None
        for t in (ev.table, ev.pre_table):
            if t is None or not t.columns or t.signature() in seen:
                continue
            seen.add(t.signature())
            out.write(orjson.dumps({"schema": t.schema, "table": t.table,
                                    "key": key_schema(t, cfg), "value": value_schema(t, cfg)}) + b"\n")


def topic_records(sink: SinkURI) -> Iterator[Record]:
    """Every record of the sink's topic, from its files or its Kafka brokers (read lazily, as iterated)."""
    from .transport.files import read_topic

    if sink.scheme != "file":
        from .transport.kafka import read_topic as read_kafka
    return read_topic(sink.folder, sink.topic) if sink.scheme == "file" else read_kafka(  # type: ignore
        sink, sink.topic)


def tail_lines(records: Iterable[Record], cfg: CodecConfig, out: IO[bytes]) -> tuple[int, int]:
    """Topic records decoded, a decoder per partition, to event lines with topic, partition and offset added;
    returns (events, partitions)."""
    writer = EventWriter()
    decoders: dict[int, object] = {}
    n = 0
    for rec in records:
        dec = decoders.get(rec.partition)
        if dec is None:
            dec = decoders[rec.partition] = make_decoder(cfg)  # a consumer per partition
        try:
            events = dec.decode(rec.value, rec.key)  # type: ignore[attr-defined]
        except DecodeError as e:
            raise e.located(f"{rec.topic}/{rec.partition}@{rec.offset}") from None
        for ev in events:
            obj = orjson.loads(writer.line(ev))
            obj.update(topic=rec.topic, partition=rec.partition, offset=rec.offset)
            out.write(orjson.dumps(obj) + b"\n")
            n += 1
    return n, len(decoders)
