"""bench/heap_paths.py over a small HPROF file written here by the format's rules (no JVM): the shortest path from a
GC root, a Reference's referent left out of the strong graph, what only some objects keep alive, and the fields
of a class found in its superclasses too."""

from __future__ import annotations

import importlib.util
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_heap_paths", ROOT / "bench" / "heap_paths.py")
assert _spec and _spec.loader
hp = importlib.util.module_from_spec(_spec)
sys.modules["bench_heap_paths"] = hp  # dataclasses look their module up
_spec.loader.exec_module(hp)

OBJ, INT, LONG = 2, 10, 11


class Dump:
    """An HPROF 1.0.2 file with 8-byte ids: strings and classes as records, the heap in one segment."""

    def __init__(self) -> None:
        self.records = bytearray()
        self.heap = bytearray()
        self.ids: dict[str, int] = {}
        self.next_id = 0x1000

    def id(self, name: str) -> int:
        if name not in self.ids:
            self.next_id += 8
            self.ids[name] = self.next_id
        return self.ids[name]

    def string(self, text: str) -> int:
        sid = self.id("str:" + text)
        body = struct.pack(">Q", sid) + text.encode()
        self.records += struct.pack(">BII", 0x01, 0, len(body)) + body
        return sid

    def klass(self, name: str, sup: str | None, fields: list[tuple[str, int]],
              statics: list[tuple[str, int, int]] = ()) -> None:
        cid = self.id(name)
        body = struct.pack(">IQIQ", 1, cid, 0, self.string(name))
        self.records += struct.pack(">BII", 0x02, 0, len(body)) + body
        self.heap += struct.pack(">BQIQQQQQQI", 0x20, cid, 0, self.id(sup) if sup else 0, 0, 0, 0, 0, 0, 0)
        self.heap += struct.pack(">H", 0)  # constant pool
        self.heap += struct.pack(">H", len(statics))
        for fname, t, value in statics:
            self.heap += struct.pack(">QB", self.string(fname), t) + struct.pack(">Q" if t == OBJ else ">i", value)
        self.heap += struct.pack(">H", len(fields))
        for fname, t in fields:
            self.heap += struct.pack(">QB", self.string(fname), t)

    def instance(self, name: str, cls: str, values: list[tuple[int, int]]) -> int:
        """`values`: (type, value) in dump order (the class's own fields, then its superclass's)."""
        data = b"".join(struct.pack(">Q" if t == OBJ else ">i", v) for t, v in values)
        self.heap += struct.pack(">BQIQI", 0x21, self.id(name), 0, self.id(cls), len(data)) + data
        return self.id(name)

    def objects(self, name: str, cls: str, items: list[int]) -> None:
        self.heap += struct.pack(">BQIIQ", 0x22, self.id(name), 0, len(items), self.id(cls))
        self.heap += b"".join(struct.pack(">Q", i) for i in items)

    def longs(self, name: str, n: int) -> None:
        self.heap += struct.pack(">BQIIB", 0x23, self.id(name), 0, n, LONG) + bytes(8 * n)

    def root(self, name: str) -> None:  # a JNI global: the object and the JNI reference's id
        self.heap += struct.pack(">BQQ", 0x01, self.id(name), 0x99)

    def write(self, path: Path) -> None:
        head = b"JAVA PROFILE 1.0.2\0" + struct.pack(">IQ", 8, 0)
        seg = struct.pack(">BII", 0x1C, 0, len(self.heap)) + bytes(self.heap)
        path.write_bytes(head + bytes(self.records) + seg + struct.pack(">BII", 0x2C, 0, 0))


def sample(tmp_path: Path) -> tuple[Path, Dump]:
    """root -> a Holder -> (next) another Holder -> (data) a long[1000]; the first Holder's `base` field, declared
    by its superclass, -> a Leaf; a root Object[] -> the second Holder too (a longer way round is not taken: the
    array's path is one step, so the second Holder is reached through it); a WeakReference -> a Leaf no one else
    holds; a class's static -> a Leaf."""
    d = Dump()
    d.klass("java/lang/Object", None, [])
    d.klass("java/lang/ref/Reference", "java/lang/Object", [("referent", OBJ)])
    d.klass("java/lang/ref/WeakReference", "java/lang/ref/Reference", [])
    d.klass("app/Base", "java/lang/Object", [("base", OBJ)])
    d.klass("app/Holder", "app/Base", [("next", OBJ), ("count", INT), ("data", OBJ)])
    d.klass("app/Leaf", "java/lang/Object", [])
    d.klass("[Ljava/lang/Object;", "java/lang/Object", [])
    d.klass("app/Registry", "java/lang/Object", [], statics=[("only", OBJ, d.id("static-leaf"))])
    d.instance("leaf", "app/Leaf", [])
    d.instance("weak-leaf", "app/Leaf", [])
    d.instance("static-leaf", "app/Leaf", [])
    d.longs("page", 1000)
    d.instance("second", "app/Holder", [(OBJ, 0), (INT, 7), (OBJ, d.id("page")), (OBJ, 0)])
    d.instance("first", "app/Holder", [(OBJ, d.id("second")), (INT, 1), (OBJ, 0), (OBJ, d.id("leaf"))])
    d.instance("weak", "java/lang/ref/WeakReference", [(OBJ, d.id("weak-leaf"))])
    d.objects("array", "[Ljava/lang/Object;", [d.id("weak"), d.id("second")])
    d.root("first")
    d.root("array")
    path = tmp_path / "small.hprof"
    d.write(path)
    return path, d


def test_paths_from_the_roots(tmp_path):
    path, d = sample(tmp_path)
    h = hp.read(path)
    assert h.class_names[d.id("[Ljava/lang/Object;")] == "java.lang.Object[]"
    seen = hp.parents(h)
    # a field declared by the superclass, found after the class's own
    assert hp.path(h, seen, d.id("leaf")) == ["[root: JNI global] app.Holder", "app.Holder.base"]
    # the second Holder: through the array (the first root's way is as short; breadth first keeps the first found)
    second = hp.path(h, seen, d.id("second"))
    assert len(second) == 2 and second[0].startswith("[root: JNI global]")
    assert hp.path(h, seen, d.id("page"))[-1] == "app.Holder.data"
    assert hp.path(h, seen, d.id("static-leaf")) == ["[root: class] class app.Registry", "class app.Registry.only"]
    # a referent is no strong path
    assert d.id("weak-leaf") not in seen
    assert hp.path(h, seen, d.id("weak-leaf"))[0].startswith("(no strong path")


def test_retained_bytes(tmp_path):
    path, d = sample(tmp_path)
    h = hp.read(path)
    # the second Holder is held by the first and by the array: neither alone keeps it
    alone, _ = hp.retained(h, {d.id("first")})
    assert alone == h.size[d.id("first")] + h.size[d.id("leaf")]
    both, by = hp.retained(h, {d.id("first"), d.id("array")})
    assert by["long[]"] == 8 * 1000 + 16
    assert both == sum(h.size[d.id(n)] for n in ("first", "array", "second", "leaf", "weak")) + 8 * 1000 + 16
