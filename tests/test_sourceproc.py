"""The run job's source in a process of its own (sourceproc.py): what the consumer's lag and the verification
need comes back from it (when each commit ts left, the totals, the upstream state), a stop ends it at a
transaction boundary, and a failure or a death of the child reaches the parent as one error, never a hang."""

from __future__ import annotations

import os
import pickle
import threading
import time
from itertools import islice
from pathlib import Path

import pytest

from changefeed.eventline import EventReader, read_lines
from changefeed.job import RunOptions, RunReport, _Sent, default_sink, expected_lines, produce_source
from changefeed.sourceproc import SourceProcess
from changefeed.spark.verify import events_from_stream
from changefeed.upstream import final_state
from changefeed.workload import Workload


def start(opts: RunOptions, stop: threading.Event | None = None) -> tuple[SourceProcess, RunReport, _Sent, list[int]]:
    rep, sent, progress = RunReport(opts), _Sent(), []
    sink = default_sink(opts)
    (opts.work / "stream" / "changes").mkdir(parents=True)
    src = SourceProcess(produce_source, opts, sink, None, time.monotonic(), rep, sent, progress.append, stop)
    src.start()
    return src, rep, sent, progress


def finish(src: SourceProcess, seconds: float = 120) -> None:
    src.join(seconds)
    assert not src.is_alive(), "the source's process did not end"
    src.close()


def test_the_workload_produced_by_its_process_reports_what_the_thread_did(tmp_path: Path) -> None:
    opts = RunOptions(transactions=300, work=tmp_path)
    src, rep, sent, progress = start(opts)
    finish(src)
    assert src.failure is None
    assert src.proc.pid != os.getpid() and src.proc.exitcode == 0
    w = Workload(opts.seed, opts.transactions)
    events = list(w)
    assert rep.events == len(events) and rep.messages >= rep.events and rep.produce_seconds > 0
    assert progress[-1] == rep.events
    # the upstream state came back whole: the same expected lines as the workload made here
    assert src.state is not None
    assert list(expected_lines(src.state)) == list(expected_lines(w.state))
    # when each commit ts left: increasing, and the last one is the stream's last commit ts
    assert sent.ts == sorted(sent.ts) and sent.ts[-1] == events[-1].commit_ts
    # the stream the consumer reads holds what the workload made
    assert list(expected_lines(final_state(events_from_stream(default_sink(opts))))) == \
        list(expected_lines(w.state))


def test_a_stop_ends_the_source_at_a_transaction_boundary(tmp_path: Path) -> None:
    opts = RunOptions(transactions=100_000, work=tmp_path, rate=2_000)
    stop = threading.Event()
    src, rep, sent, _ = start(opts, stop)
    deadline = time.monotonic() + 60
    while not sent.ts and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sent.ts, "no event left the source's process in 60 s"
    stop.set()
    finish(src, 60)
    assert src.failure is None and rep.stopped and "stopped on request" in rep.stopped
    assert src.state is None  # the workload did not reach its end: the job recomputes the state it sent
    assert 0 < rep.events < 150_000
    # the stream ends with a whole transaction: its events are the workload's first `rep.events`
    made = list(islice(Workload(opts.seed, opts.transactions), rep.events + 1))
    assert made[rep.events - 1].commit_ts != made[rep.events].commit_ts
    got = final_state(events_from_stream(default_sink(opts)))
    assert list(expected_lines(got)) == list(expected_lines(final_state(made[: rep.events])))


def test_a_failure_in_the_source_reaches_the_parent_as_its_own_error(tmp_path: Path) -> None:
    opts = RunOptions(source=str(tmp_path / "no-such-events.jsonl"), work=tmp_path)
    src, rep, _, _ = start(opts)
    finish(src)
    assert isinstance(src.failure, FileNotFoundError), src.failure
    assert "no-such-events.jsonl" in str(src.failure)
    assert src.state is None and rep.events == 0


def test_a_killed_source_process_is_a_failure_not_a_hang(tmp_path: Path) -> None:
    opts = RunOptions(transactions=100_000, work=tmp_path, rate=1_000)
    src, _, sent, _ = start(opts)
    deadline = time.monotonic() + 60
    while not sent.ts and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sent.ts, "no event left the source's process in 60 s"
    src.proc.kill()
    finish(src, 30)
    assert isinstance(src.failure, RuntimeError) and "without a report" in str(src.failure), src.failure


def test_a_file_source_is_read_in_the_process_and_its_state_comes_back(tmp_path: Path) -> None:
    lines = tmp_path / "events.jsonl"
    from changefeed.eventline import EventWriter

    w = Workload(3, 120)
    writer = EventWriter()
    lines.write_bytes(b"".join(writer.line(e) + b"\n" for e in w))
    opts = RunOptions(source=str(lines), work=tmp_path / "work")
    opts.work.mkdir()
    src, rep, _, _ = start(opts)
    finish(src)
    assert src.failure is None and src.state is not None
    reader = EventReader()
    with open(lines, "rb") as f:
        again = final_state(reader.parse(line) for _, line in read_lines(f))
    assert list(expected_lines(src.state)) == list(expected_lines(again))


@pytest.mark.parametrize("seed", [1, 7])
def test_a_tables_columns_pickle_as_their_definition(seed: int) -> None:
    """What the state carries back: tables whose columns hold closures (normalizers, storers) pickle as their
    definition and make the same functions again."""
    w = Workload(seed, 50)
    for _ in w:
        pass
    for key, st in w.state.tables.items():
        again = pickle.loads(pickle.dumps(st.table))
        assert again.signature() == st.table.signature(), key
        for a, b in zip(st.table.columns, again.columns, strict=True):
            assert a == b and a.type == b.type
            for row in list(st.rows.values())[:5]:
                assert b.normalize(row.get(a.name)) == a.normalize(row.get(a.name))


def idle(*_args: object) -> None:
    """A source with nothing to send (a binlog source on a quiet database): it reports nothing, ever."""
    threading.Event().wait()


def test_the_source_process_ends_with_a_killed_parent(tmp_path: Path) -> None:
    """A parent killed (SIGKILL: no atexit) before the child produces, while it produces, or while it waits with
    nothing to report, leaves no orphan behind."""
    import signal
    import subprocess
    import sys

    for case in ("not started", "producing", "idle"):
        work = "idle" if case == "idle" else "produce_source"
        script = tmp_path / f"parent_{case.replace(' ', '_')}.py"
        script.write_text(
            "import sys, time\n"
            "from pathlib import Path\n"
            "from changefeed.job import RunOptions, RunReport, _Sent, default_sink, produce_source\n"
            "from changefeed.sourceproc import SourceProcess\n"
            "from tests.test_sourceproc import idle\n"
            "if __name__ == '__main__':\n"
            f"    opts = RunOptions(transactions=100_000, rate=500, work=Path({str(tmp_path / case)!r}))\n"
            "    (opts.work / 'stream' / 'changes').mkdir(parents=True)\n"
            f"    src = SourceProcess({work}, opts, default_sink(opts), None, time.monotonic(),\n"
            "                        RunReport(opts), _Sent(), lambda n: None, None)\n"
            f"    if {case != 'not started'}:\n"
            "        src.start()\n"
            "    print(src.proc.pid, flush=True)\n"
            "    time.sleep(600)\n")
        parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                                  env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                      p for p in (str(Path(__file__).resolve().parent.parent),
                                                  os.environ.get("PYTHONPATH")) if p)})
        try:
            child = int(parent.stdout.readline())  # type: ignore[union-attr]
            time.sleep(1.0)
            assert Path(f"/proc/{child}").exists()
        finally:
            parent.send_signal(signal.SIGKILL)
            parent.wait()
        deadline = time.monotonic() + 20
        while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
            try:  # reap it if it is ours (it is not: it was the killed parent's), else wait for init to
                os.waitpid(child, os.WNOHANG)
            except ChildProcessError:
                pass
            stat = Path(f"/proc/{child}/stat")
            if stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break  # a zombie has ended: only its parent (now init) can reap it
            time.sleep(0.1)
        alive = Path(f"/proc/{child}/stat")
        assert not alive.exists() or alive.read_text().rsplit(")", 1)[1].split()[0] == "Z", \
            f"the source's process outlived its killed parent ({case})"


def test_a_source_closed_before_it_started_sends_nothing(tmp_path: Path) -> None:
    """The consumer failed to start: the source's process ends without writing to the stream."""
    opts = RunOptions(transactions=50, work=tmp_path)
    (opts.work / "stream" / "changes").mkdir(parents=True)
    src = SourceProcess(produce_source, opts, default_sink(opts), None, time.monotonic(), RunReport(opts),
                        _Sent(), lambda _n: None, None)
    time.sleep(0.5)
    src.close()
    assert not src.proc.is_alive()
    assert not [p for p in (opts.work / "stream" / "changes").iterdir() if p.stat().st_size]
