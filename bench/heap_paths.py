"""What keeps objects alive in a JVM heap dump: the shortest path from a GC root to each instance of a class.

    .venv/bin/python bench/heap_paths.py DUMP.hprof CLASS [CLASS ...] [--most N] [--top N]

`jmap -dump:live,format=b,file=DUMP.hprof PID` (or `jcmd PID GC.heap_dump DUMP.hprof`) writes the dump; no Eclipse
MAT or VisualVM on this machine, so this reads the HPROF format itself (its records: class dumps, instances, object
arrays, GC roots) and walks the object graph breadth first from the roots, so each object's path is a shortest one.
Printed per class given (a class name, or a prefix ending in `*`): its instances, and for up to --most of them the
chain root -> ... -> instance, each step as `Class.field` (an array: `Class[index]`); then the --top classes by
shallow bytes, for a diff between two dumps (`--top` alone: only that). A class object counts as a root (its
statics), as MAT treats the system class loader's classes.
"""

from __future__ import annotations

import argparse
import mmap
import struct
import sys
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# HPROF basic types: size in bytes (2: an object id, its size given in the header)
SIZES = {4: 1, 5: 2, 6: 4, 7: 8, 8: 1, 9: 2, 10: 4, 11: 8}
ROOT_SKIP = {0xFF: 0, 0x01: 1, 0x02: 8, 0x03: 8, 0x04: 4, 0x05: 0, 0x06: 4, 0x07: 0, 0x08: 8}  # bytes after the id
ROOT_NAMES = {0xFF: "unknown", 0x01: "JNI global", 0x02: "JNI local", 0x03: "Java frame", 0x04: "native stack",
              0x05: "system class", 0x06: "thread block", 0x07: "monitor", 0x08: "thread"}


@dataclass
class Heap:
    idsize: int = 8
    names: dict[int, str] = field(default_factory=dict)  # string id -> text
    class_names: dict[int, str] = field(default_factory=dict)  # class object id -> name (dots)
    supers: dict[int, int] = field(default_factory=dict)
    fields: dict[int, list[tuple[str, int]]] = field(default_factory=dict)  # class -> its own instance fields
    statics: dict[int, list[tuple[str, int]]] = field(default_factory=dict)  # class -> (static field, object)
    cls: dict[int, int] = field(default_factory=dict)  # object -> class (instances and object arrays)
    size: dict[int, int] = field(default_factory=dict)  # object -> shallow bytes
    refs: dict[int, list[int]] = field(default_factory=dict)  # object -> objects it refers to (in field order)
    raw: dict[int, tuple[int, int]] = field(default_factory=dict)  # instance -> (offset, length) of its field bytes
    prims: Counter[str] = field(default_factory=Counter)  # primitive array type -> bytes
    prim_count: Counter[str] = field(default_factory=Counter)
    prim_size: dict[int, tuple[str, int]] = field(default_factory=dict)  # primitive array -> (type, bytes)
    roots: dict[int, str] = field(default_factory=dict)
    skip: dict[int, set[int]] = field(default_factory=dict)  # class -> indexes of its layout left out (a referent)
    mm: Any = None  # the dump, mapped: instances' field values are read from it

    def name(self, obj: int) -> str:
        if obj in self.class_names:
            return f"class {self.class_names[obj]}"
        if obj in self.cls:
            return self.class_names.get(self.cls[obj], "?")
        if obj in self.prim_size:
            return self.prim_size[obj][0]
        return "?"

    def declared(self, c: int) -> list[tuple[int, str]]:
        """Per field of `layout(c)`: the class that declares it and its name's string id."""
        out: list[tuple[int, str]] = []
        while c:
            out += [(c, n) for n, _t in self.fields.get(c, [])]
            c = self.supers.get(c, 0)
        return out

    def layout(self, c: int) -> list[tuple[str, int]]:
        """All instance fields of class `c` in dump order: its own, then its superclass's, ..."""
        out: list[tuple[str, int]] = []
        while c:
            out += self.fields.get(c, [])
            c = self.supers.get(c, 0)
        return out


PRIM_NAMES = {4: "boolean[]", 5: "char[]", 6: "float[]", 7: "double[]", 8: "byte[]", 9: "short[]", 10: "int[]",
              11: "long[]"}


def read(path: Path) -> Heap:
    """The dump's classes, objects and references (one pass over the file; instance fields decoded afterwards,
    once every class's layout is known)."""
    h = Heap()
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    end = mm.find(b"\0") + 1
    h.idsize = struct.unpack_from(">I", mm, end)[0]
    ids = h.idsize
    idfmt = ">Q" if ids == 8 else ">I"
    SIZES[2] = ids
    pos = end + 4 + 8
    instances: list[tuple[int, int, int, int]] = []  # (object, class, offset, length)
    name_ids: dict[int, int] = {}  # class -> its name's string id
    total = len(mm)
    while pos < total:
        tag = mm[pos]
        length = struct.unpack_from(">I", mm, pos + 5)[0]
        body = pos + 9
        if tag == 0x01:
            sid = struct.unpack_from(idfmt, mm, body)[0]
            h.names[sid] = mm[body + ids:body + length].decode("utf-8", "replace")
        elif tag == 0x02:
            cid = struct.unpack_from(idfmt, mm, body + 4)[0]
            nid = struct.unpack_from(idfmt, mm, body + 8 + ids)[0]
            name_ids[cid] = nid
        elif tag in (0x0C, 0x1C):
            _segment(h, mm, body, body + length, instances, idfmt)
        pos = body + length
    h.class_names = {c: _java_name(h.names.get(n, "?")) for c, n in name_ids.items()}
    # a Reference's referent (weak, soft, phantom, a finalizer's) keeps nothing alive: left out of the graph
    ref_class = next((c for c, n in h.class_names.items() if n == "java.lang.ref.Reference"), 0)
    skip: dict[int, set[int]] = {}
    layouts: dict[int, list[tuple[str, int]]] = {}
    for obj, c, off, n in instances:
        lay = layouts.get(c)
        if lay is None:
            lay = layouts[c] = h.layout(c)
            skip[c] = {i for i, (d, n) in enumerate(h.declared(c)) if d == ref_class
                       and h.names.get(int(n)) == "referent"}
        refs = []
        p = off
        for i, (_name, t) in enumerate(lay):
            if t == 2:
                r = struct.unpack_from(idfmt, mm, p)[0]
                if r and i not in skip.get(c, ()):
                    refs.append(r)
            p += SIZES[t]
        h.refs[obj] = refs
        h.raw[obj] = (off, n)
    h.mm = mm
    h.skip = skip
    return h


def _java_name(jvm: str) -> str:
    """`java/lang/String` -> `java.lang.String`, `[Ljava/lang/Object;` -> `java.lang.Object[]`, `[J` -> `long[]`."""
    dims = len(jvm) - len(jvm.lstrip("["))
    base = jvm[dims:]
    if dims:
        base = base[1:-1] if base.startswith("L") else {"Z": "boolean", "C": "char", "F": "float", "D": "double",
                                                         "B": "byte", "S": "short", "I": "int", "J": "long"}[base]
    return base.replace("/", ".") + "[]" * dims


def _segment(h: Heap, mm: mmap.mmap, pos: int, end: int, instances: list[tuple[int, int, int, int]],
             idfmt: str) -> None:
    ids = h.idsize
    u4 = struct.Struct(">I")
    while pos < end:
        sub = mm[pos]
        pos += 1
        if sub in ROOT_SKIP:
            obj = struct.unpack_from(idfmt, mm, pos)[0]
            h.roots.setdefault(obj, ROOT_NAMES[sub])
            pos += ids + (ids if sub == 0x01 else ROOT_SKIP[sub])
        elif sub == 0x20:
            cid = struct.unpack_from(idfmt, mm, pos)[0]
            sup = struct.unpack_from(idfmt, mm, pos + ids + 4)[0]
            h.supers[cid] = sup
            pos += 7 * ids + 4
            pos += 4  # the instance size
            ncp = struct.unpack_from(">H", mm, pos)[0]
            pos += 2
            for _ in range(ncp):
                t = mm[pos + 2]
                pos += 3 + SIZES[t]
            nst = struct.unpack_from(">H", mm, pos)[0]
            pos += 2
            st = []
            for _ in range(nst):
                nid = struct.unpack_from(idfmt, mm, pos)[0]
                t = mm[pos + ids]
                if t == 2:
                    r = struct.unpack_from(idfmt, mm, pos + ids + 1)[0]
                    if r:
                        st.append((str(nid), r))
                pos += ids + 1 + SIZES[t]
            h.statics[cid] = st
            nf = struct.unpack_from(">H", mm, pos)[0]
            pos += 2
            fl = []
            for _ in range(nf):
                nid = struct.unpack_from(idfmt, mm, pos)[0]
                fl.append((str(nid), mm[pos + ids]))
                pos += ids + 1
            h.fields[cid] = fl
        elif sub == 0x21:
            obj = struct.unpack_from(idfmt, mm, pos)[0]
            c = struct.unpack_from(idfmt, mm, pos + ids + 4)[0]
            n = u4.unpack_from(mm, pos + 2 * ids + 4)[0]
            off = pos + 2 * ids + 8
            h.cls[obj] = c
            h.size[obj] = n + 16
            instances.append((obj, c, off, n))
            pos = off + n
        elif sub == 0x22:
            obj = struct.unpack_from(idfmt, mm, pos)[0]
            n = u4.unpack_from(mm, pos + ids + 4)[0]
            c = struct.unpack_from(idfmt, mm, pos + ids + 8)[0]
            off = pos + 2 * ids + 8
            fmt = f">{n}{'Q' if ids == 8 else 'I'}"
            h.cls[obj] = c
            h.size[obj] = 16 + n * ids
            h.refs[obj] = list(struct.unpack_from(fmt, mm, off))
            pos = off + n * ids
        elif sub == 0x23:
            obj = struct.unpack_from(idfmt, mm, pos)[0]
            n = u4.unpack_from(mm, pos + ids + 4)[0]
            t = mm[pos + ids + 8]
            nbytes = n * SIZES[t]
            h.prims[PRIM_NAMES[t]] += nbytes + 16
            h.prim_count[PRIM_NAMES[t]] += 1
            h.prim_size[obj] = (PRIM_NAMES[t], nbytes + 16)
            pos += ids + 9 + nbytes
        else:
            raise ValueError(f"unknown heap dump sub-record 0x{sub:02x} at {pos - 1}")


def retained(h: Heap, objs: set[int]) -> tuple[int, Counter[str]]:
    """Bytes that only `objs` keep alive (theirs included): what a breadth-first walk from the roots that does
    not pass through them leaves unreached, less what was unreached anyway; and those bytes by class."""
    def reach(avoid: set[int]) -> set[int]:
        seen = {r for r in list(h.roots) + list(h.class_names) if r not in avoid}
        todo = deque(seen)
        while todo:
            o = todo.popleft()
            for r in [r for _n, r in h.statics.get(o, ())] + h.refs.get(o, []):
                if r not in seen and r not in avoid:
                    seen.add(r)
                    todo.append(r)
        return seen

    everything = reach(set())
    rest = reach(objs)
    by: Counter[str] = Counter()
    for o in everything - rest:
        size = h.prim_size[o][1] if o in h.prim_size else h.size.get(o, 0)
        by[h.name(o)] += size
    return sum(by.values()), by


def parents(h: Heap) -> dict[int, tuple[int, int]]:
    """Breadth first from the GC roots and every class (its statics): object -> (parent, index of the reference in
    the parent's list; -1-i for the i-th static of a class). The root objects' parent is 0."""
    seen: dict[int, tuple[int, int]] = {}
    todo: deque[int] = deque()
    for r in list(h.roots) + list(h.class_names):
        if r not in seen:
            seen[r] = (0, 0)
            todo.append(r)
    while todo:
        o = todo.popleft()
        for i, (_n, r) in enumerate(h.statics.get(o, ())):
            if r not in seen:
                seen[r] = (o, -1 - i)
                todo.append(r)
        for i, r in enumerate(h.refs.get(o, ())):
            if r not in seen:
                seen[r] = (o, i)
                todo.append(r)
    return seen


def step(h: Heap, parent: int, index: int) -> str:
    """The reference `parent` -> child as `Class.field`, `Class[i]` or `class X.static`."""
    if index < 0:
        nid = h.statics[parent][-1 - index][0]
        return f"class {h.class_names.get(parent, '?')}.{h.names.get(int(nid), nid)}"
    c = h.cls.get(parent, 0)
    name = h.class_names.get(c, "?")
    if name.endswith("[]"):
        return f"{name} [{index}]"
    # the i-th non-null reference kept in the graph: which field it was
    off, _n = h.raw[parent]
    idfmt = ">Q" if h.idsize == 8 else ">I"
    skip = h.skip.get(c, set())
    p, k = off, 0
    for j, (fname, t) in enumerate(h.layout(c)):
        if t == 2 and j not in skip:
            if struct.unpack_from(idfmt, h.mm, p)[0]:
                if k == index:
                    return f"{name}.{h.names.get(int(fname), fname)}"
                k += 1
        p += SIZES[t]
    return f"{name}.?{index}"


def path(h: Heap, seen: dict[int, tuple[int, int]], obj: int) -> list[str]:
    out = []
    o = obj
    while True:
        p, i = seen.get(o, (0, 0))
        if o not in seen:
            out.append(f"(no strong path: only weakly or softly reachable) {h.name(o)}")
            break
        if not p:
            out.append(f"[root: {h.roots.get(o, 'class')}] {h.name(o)}")
            break
        out.append(step(h, p, i))
        o = p
    return out[::-1]


def prefix(h: Heap, seen: dict[int, tuple[int, int]], obj: int, k: int,
           memo: dict[int, tuple[str, ...]]) -> tuple[str, ...]:
    """The first `k` steps of `obj`'s path from its root (array indices left out), memoized per object."""
    chain = []
    o = obj
    while o not in memo:
        chain.append(o)
        p, _i = seen.get(o, (0, 0))
        if not p:
            memo[o] = (f"[{h.roots.get(o, 'class' if o in h.class_names else 'weak only')}] {h.name(o)}",)
            chain.pop()
            break
        o = p
    for c in reversed(chain):
        p, i = seen[c]
        above = memo[p]
        memo[c] = above if len(above) >= k else above + (step(h, p, i).split(" [")[0],)
    return memo[obj]


def matches(name: str, pattern: str) -> bool:
    return name.startswith(pattern[:-1]) if pattern.endswith("*") else name == pattern


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dump", type=Path)
    ap.add_argument("classes", nargs="*")
    ap.add_argument("--most", type=int, default=5, help="paths printed per class")
    ap.add_argument("--top", type=int, default=0, help="classes by shallow bytes")
    ap.add_argument("--by-path", type=int, default=0, metavar="K",
                    help="every object's bytes summed by the first K steps of its path from a root: who holds them")
    ap.add_argument("--retained", action="append", default=[],
                    help="a class (or prefix*): the bytes only its instances keep alive (repeatable)")
    args = ap.parse_args()
    h = read(args.dump)
    print(f"{len(h.cls) + len(h.prim_size):,} objects, {len(h.class_names):,} classes, {len(h.roots):,} roots",
          file=sys.stderr)
    if args.top:
        by: Counter[str] = Counter()
        count: Counter[str] = Counter()
        for o, c in h.cls.items():
            by[h.class_names.get(c, "?")] += h.size[o]
            count[h.class_names.get(c, "?")] += 1
        by.update(h.prims)
        count.update(h.prim_count)
        for name, b in by.most_common(args.top):
            print(f"{b / 2**20:9.2f} MB {count[name]:>9,}  {name}")
    if args.by_path:
        seen = parents(h)
        holders: Counter[tuple[str, ...]] = Counter()
        memo: dict[int, tuple[str, ...]] = {}
        for o in list(h.cls) + list(h.prim_size):
            size = h.prim_size[o][1] if o in h.prim_size else h.size.get(o, 0)
            holders[prefix(h, seen, o, args.by_path, memo)] += size
        for steps, b in holders.most_common(args.top or 20):
            print(f"{b / 2**20:9.2f} MB  " + " > ".join(steps))
    for pattern in args.retained:
        objs = {o for o, c in h.cls.items() if matches(h.class_names.get(c, "?"), pattern)}
        total, by = retained(h, objs)
        print(f"\n{pattern}: {len(objs)} instances retain {total / 2**20:.2f} MB: "
              + ", ".join(f"{n} {b / 2**20:.2f}" for n, b in by.most_common(6)))
    if not args.classes:
        return
    seen = parents(h)
    for pattern in args.classes:
        objs = [o for o, c in h.cls.items() if matches(h.class_names.get(c, "?"), pattern)]
        print(f"\n{pattern}: {len(objs)} instances")
        shapes: Counter[tuple[str, ...]] = Counter()
        for o in objs:
            p = path(h, seen, o)
            shapes[tuple(s.split(" [")[0] for s in p)] += 1
        for shape, n in shapes.most_common(args.most):
            print(f"  {n} x:")
            for s in shape:
                print(f"      {s}")


if __name__ == "__main__":
    main()
