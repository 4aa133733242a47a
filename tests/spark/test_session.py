"""The Spark session the pipeline runs on: Delta, Kafka and Avro all load from the cached jars."""

from __future__ import annotations

import uuid

from changefeed.sinkconfig import parse_sink_uri
from changefeed.transport.kafka import KafkaTransport


def test_delta_merge_and_time_travel(spark, tmp_path):
    from delta.tables import DeltaTable

    path = str(tmp_path / "orders")
    spark.createDataFrame([(1, "new"), (2, "new")], "id long, status string").write.format("delta").save(path)
    changes = spark.createDataFrame([(2, "paid"), (3, "new")], "id long, status string")
    (DeltaTable.forPath(spark, path).alias("t").merge(changes.alias("c"), "t.id = c.id")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    now = {r.id: r.status for r in spark.read.format("delta").load(path).collect()}
    assert now == {1: "new", 2: "paid", 3: "new"}
    before = spark.read.format("delta").option("versionAsOf", 0).load(path)
    assert sorted(r.id for r in before.collect()) == [1, 2]


def test_kafka_source_reads_what_the_transport_wrote(spark, kafka_broker):
    topic = f"s{uuid.uuid4().hex[:8]}"
    t = KafkaTransport(parse_sink_uri(f"kafka://{kafka_broker}/{topic}?protocol=canal-json&partition-num=2"), 1 << 20)
    for i in range(10):
        t.send(topic, i % 2, str(i).encode(), f"v{i}".encode())
    t.flush()
    rows = (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka_broker)
            .option("subscribe", topic).option("startingOffsets", "earliest").load()
            .selectExpr("partition", "offset", "CAST(value AS STRING) AS v").collect())
    assert sorted((r.partition, r.offset, r.v) for r in rows) == sorted(
        (i % 2, i // 2, f"v{i}") for i in range(10))


def test_from_avro_reads_what_fastavro_wrote(spark):
    """The pipeline decodes Avro on the JVM: Spark's from_avro must read the bytes our encoders write."""
    import io
    import json

    import fastavro
    from pyspark.sql.avro.functions import from_avro

    schema = '{"type":"record","name":"r","fields":[{"name":"id","type":"long"},{"name":"s","type":["null","string"]}]}'
    parsed = fastavro.parse_schema(json.loads(schema))
    blobs = []
    for rec in ({"id": 1, "s": "a"}, {"id": -2, "s": None}):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, rec)
        blobs.append((buf.getvalue(),))
    df = spark.createDataFrame(blobs, "b binary").select(from_avro("b", schema).alias("r"))
    assert sorted((r.r.id, r.r.s) for r in df.collect()) == [(-2, None), (1, "a")]


def test_local_files_are_written_without_starting_processes(spark, tmp_path):
    """scripts/niofs (built by the set-up): Hadoop's local file system without the `chmod`/`readlink` processes
    it starts for each file and each Delta log rename when libhadoop is absent; the files keep the usual modes."""
    import os
    import stat

    jvm = spark._jvm
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), spark._jsc.hadoopConfiguration())
    assert fs.getRawFileSystem().getClass().getName() == "changefeed.niofs.NioRawLocalFileSystem", \
        "the session does not use scripts/niofs: did ./scripts/setup build .cache/niofs (it needs a JDK)?"
    path = str(tmp_path / "t")
    df = spark.createDataFrame([(1, "a")], "id long, v string")
    df.write.format("delta").save(path)
    for _ in range(10):  # ten commits: each a data file, a log file and a checksum file, created and renamed
        df.write.format("delta").mode("append").save(path)
    assert spark.read.format("delta").load(path).count() == 11
    log = tmp_path / "t" / "_delta_log"
    modes = {stat.S_IMODE(os.stat(p).st_mode) for p in [*log.glob("*.json"), *(tmp_path / "t").glob("*.parquet")]}
    assert modes == {0o644}, modes
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o755
    # the same JVM was launched with the small-machine memory defaults (a long run's resident size: bench/soak.py)
    from pathlib import Path

    from changefeed.spark.session import SMALL_MACHINE_ENV

    runtime = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    args = list(runtime.getInputArguments())
    assert {"-XX:+UseSerialGC", "-XX:MinHeapFreeRatio=40", "-XX:MaxHeapFreeRatio=60",
            "-XX:SoftRefLRUPolicyMSPerMB=100"} <= set(args), args
    from ..conftest import shared_jvm_options

    added = shared_jvm_options().split()  # tests/conftest.py: the shared session's JIT, after ours
    assert added and set(added) <= set(args), args
    from changefeed.spark.classcache import archive

    built = archive()  # the class-data archive, when the set-up built it for this JDK and these jars: mapped
    assert (built is None) == (not any(a.startswith("-XX:SharedArchiveFile=") for a in args)), (built, args)
    if built is not None:
        assert f"-XX:SharedArchiveFile={built}" in args
        assert "sharing" in jvm.java.lang.System.getProperty("java.vm.info")
    assert spark.sparkContext.getConf().get("spark.cleaner.periodicGC.interval") == "1min"
    # a big result sent to the driver directly, not through the block manager (the driver merge's collect)
    assert jvm.org.apache.spark.util.Utils.byteStringAsBytes(
        spark.sparkContext.getConf().get("spark.task.maxDirectResultSize")) == 64 << 20
    assert jvm.org.apache.spark.SparkEnv.get().memoryManager().pageSizeBytes() == 1 << 20  # a broadcast's least
    env = dict(e.split("=", 1) for e in Path(f"/proc/{runtime.getPid()}/environ").read_text().split("\0") if "=" in e)
    assert all(env.get(k) == v for k, v in SMALL_MACHINE_ENV.items()), {k: env.get(k) for k in SMALL_MACHINE_ENV}
    # ... and only that JVM: this process's other children (a source, a registry) keep the user's environment
    assert not set(SMALL_MACHINE_ENV) & set(os.environ), {k: os.environ.get(k) for k in SMALL_MACHINE_ENV}


def test_a_cache_is_planned_in_its_own_session(spark):
    """`caching.cache_in_session`: a persisted DataFrame's cached plan keeps the DataFrame's session; Spark would
    otherwise plan it in a clone, and Spark 4.0.1 never frees a clone (SPARK-54753: a long run's driver heap grew
    by one per cache, bench/RESULTS.md)."""
    from pyspark.sql import SparkSession

    from changefeed.spark.caching import CACHE_IN_SESSION, cache_in_session

    session = SparkSession(spark.sparkContext, spark._jsparkSession.newSession())  # the fixture's own stays as it is
    assert sorted(cache_in_session(session)) == sorted(CACHE_IN_SESSION)
    assert cache_in_session(session) == []  # set already: nothing set again
    df = session.range(5).selectExpr("id * 2 AS x").persist()
    try:
        assert df.count() == 5
        cached = spark._jsparkSession.sharedState().cacheManager().lookupCachedData(df._jdf).get()
        planned_in = cached.cachedRepresentation().cacheBuilder().cachedPlan().session()
        assert planned_in.sessionUUID() == session._jsparkSession.sessionUUID()
    finally:
        df.unpersist()
