"""An AppCDS archive (the JVM's class-data sharing) of the classes a consumer loads, for the JVM changefeed launches.

Why: a JVM Spark just launched loads ~15,000 classes from jars for its first micro-batch (Spark's, Delta's, the
connectors'), parsing and verifying each; with the classes mapped from an archive made once, loading them is
nearly free. JDK 13+ writes such an archive at a JVM's exit (`-XX:ArchiveClassesAtExit`): the set-up runs the
warm-up's stream (spark/warmup.py) once in a JVM so launched (`python -m changefeed.spark.warmup`), into
`.cache/cds/<key>.jsa`, the key a digest of the java binary and of every jar on the session's class path. A local
session changefeed launches gets `-XX:SharedArchiveFile=` only when the archive of the current key is there; a
changed JDK, a new jar or a removed archive means no archive (and the set-up builds the new one). The JVM checks
the archive itself too (its JDK, the class path's jars by size and time, each class's bytes): one that does not fit
is not used, and the JVM runs as without it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# the connector jars and niofs' jar: session.py takes them from here
JARS = Path(os.environ.get("CHANGEFEED_SPARK_JARS", ROOT / ".cache" / "spark-jars"))
NIOFS = ROOT / ".cache" / "niofs"
FOLDER = Path(os.environ.get("CHANGEFEED_CDS_DIR", ROOT / ".cache" / "cds"))
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # an archive that does not fit is not worth a warning on the terminal


def java_binary() -> Path | None:
    """The java spark-submit launches: JAVA_HOME's, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else (Path(w) if (w := shutil.which("java")) else None)
    return found.resolve() if found is not None and found.exists() else None


def class_path() -> list[Path]:
    """The jars a local session's JVM loads classes from: pyspark's, the connectors', niofs'."""
    import pyspark

    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    return [*jars, *sorted(JARS.glob("*.jar")), *sorted(NIOFS.glob("niofs-*.jar"))]


def key() -> str | None:
    """A digest of what the archive depends on (the JVM, its library, each jar's name, size and time); None without
    a java."""
    java = java_binary()
    if java is None:
        return None
    h = hashlib.sha256(str(java).encode())
    for f in [java, *java.parent.parent.glob("lib/server/libjvm.so"), *class_path()]:
        st = f.stat()
        h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def archive(folder: Path = FOLDER) -> Path | None:
    """The archive of the current key, when the set-up built it."""
    if os.environ.get("CHANGEFEED_CDS") == "0":
        return None
    k = key()
    path = folder / f"classes-{k}.jsa" if k else None
    return path if path is not None and path.is_file() else None


def java_options(folder: Path = FOLDER) -> str:
    """The JVM options that use the archive, or "" when there is none for the current JVM and jars."""
    path = archive(folder)
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path is not None else ""
