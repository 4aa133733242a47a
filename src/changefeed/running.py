"""The `run` command's workflow (cli.py holds only its options): the folders it may use, Spark, the graceful
stop, the metrics server, the progress bars, and the closing report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.progress import BarColumn, Progress, TextColumn

from .cliio import command_spark, err
from .consuming import serve_metrics_for
from .runreport import RunBars, print_run
from .stopping import GracefulStop, jvm_ignores_sigterm
from .workdir import open_folder, open_lake

if TYPE_CHECKING:
    from .job import RunOptions


def run_main_job(ro: RunOptions, *, lake: str | None, work: Path, fresh: bool, master: str | None,
                 conf: list[str] | None, config: Path | None, debug: bool, metrics_port: int | None,
                 metrics_host: str, health_timeout: float, warm_up: bool | None = None) -> bool:
    """Source -> encoder -> transport -> Spark -> Delta -> verify, with bars and the report; True when it verified.
    Nothing is removed from a folder but what an earlier run made there."""
    from .job import run as run_job

    if lake:
        open_lake(ro.lake_uri or lake)  # a local lake: refused, in one line, when it holds the user's files
    folder = open_folder(work, "--work")  # one line, and nothing removed, if it holds the user's files
    if fresh:
        folder.clear("--work")  # only what an earlier run made there
    from .spark.warmup import announce_and_warm, jvm_launched, should_warm_up

    launched = jvm_launched()
    spark_dir = folder.claim("spark")
    with jvm_ignores_sigterm():  # before the bars: the JVM's output goes to the work folder
        spark = command_spark(master, spark_dir, debug, conf, config)
    stop = GracefulStop().install()  # the source stops; the consumer applies what it sent
    metrics, server = serve_metrics_for(spark, str(ro.lake), metrics_port, metrics_host, health_timeout)
    try:
        # a paced source (--rate) is a live stream whose lag is the point; without one the workload is sent at once
        # and drained as a backlog, which a warm-up would only lengthen (the README's first command). A stop during
        # the warm-up ends it; the run then stops as it would.
        if should_warm_up(warm_up, launched, live=ro.rate is not None):
            announce_and_warm(spark, spark_dir, lambda line: err.print(line, highlight=False), stop.requested.is_set)
        with Progress(TextColumn("{task.description:<8}"), BarColumn(), TextColumn("{task.fields[info]}"),
                      console=err, transient=False) as bar:
            rep = run_job(spark, ro, RunBars(bar), stop=stop.requested,
                          on_report=metrics.batch if metrics is not None else None)
    finally:
        if server is not None:
            server.close()
    print_run(rep)
    return rep.verification is not None and rep.verification.ok
