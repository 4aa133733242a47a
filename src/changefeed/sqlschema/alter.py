"""ALTER TABLE: `_alter_spec` applies one specification (ADD, DROP, MODIFY, CHANGE, RENAME, ...) to a `_Work`."""

from __future__ import annotations

from .create import Key
from .definitions import (
    _accept_charset_kw,
    _charset_of_collation,
    _column_def,
    _default_value,
    _index_def,
    _is_index_item,
    _table_options,
)
from .tokens import _P, _split
from .work import _Work


def _alter_spec(w: _Work, p: _P, schema: str) -> Key | None:
    """One ALTER TABLE specification; returns the new name for RENAME [TO].

    `schema`: where an unqualified new name goes (MySQL: the current database).
    """
    if p.accept("ADD"):
        if p.accept("PARTITION"):
            return None
        if _is_index_item(p):
            spec = _index_def(p)
            if spec is not None:
                w.add_index(spec)
            return None
        p.accept("COLUMN")
        ine = p.accept_seq("IF", "NOT", "EXISTS")
        if p.is_op("("):
            for part in _split(p.group()):
                ip = _P(part, p.stmt)
                if _is_index_item(ip):
                    ispec = _index_def(ip)
                    if ispec is not None:
                        w.add_index(ispec)
                else:
                    w.add_column(_column_def(ip, ip.ident()), if_not_exists=ine)
            return None
        added = w.add_column(_column_def(p, p.ident()), if_not_exists=ine)
        if added is not None:
            w.place(added, p)
        return None
    if p.accept("DROP"):
        if p.accept_seq("PRIMARY", "KEY"):
            w.drop_index("PRIMARY")
        elif p.accept("INDEX", "KEY"):
            p.accept_seq("IF", "EXISTS")
            w.drop_index(p.ident())
        elif p.accept("CONSTRAINT"):
            p.accept_seq("IF", "EXISTS")
            name = p.ident()
            if name.lower() != "primary":
                w.drop_index(name)
        elif p.is_kw("FOREIGN", "CHECK", "PARTITION"):
            pass
        else:
            p.accept("COLUMN")
            if p.accept_seq("IF", "EXISTS"):
                col = w.find_orig(p.ident())
                if col is not None:
                    w.drop_column(col)
            else:
                w.drop_column(w.need(p.ident()))
        return None
    modify = p.accept("MODIFY")
    if modify or p.accept("CHANGE"):  # CHANGE [COLUMN] old new def; MODIFY [COLUMN] name def
        p.accept("COLUMN")
        if_exists = p.accept_seq("IF", "EXISTS")
        name = p.ident()
        col = w.find_orig(name)
        if col is None and if_exists:
            return None
        col = col or w.need(name)
        spec = _column_def(p, name if modify else p.ident())
        w.redefine(col, spec)
        w.place(col, p)
        return None
    if p.accept("RENAME"):
        if p.accept("COLUMN"):
            col = w.need(p.ident())
            p.expect("TO")
            col.name = p.ident()
        elif p.accept("INDEX", "KEY"):
            old = p.ident()
            p.expect("TO")
            new = p.ident()
            idx = w.find_index(old)
            if idx is not None and not idx.primary:
                if w.find_index(new) is not None and new.lower() != old.lower():
                    raise w.fail(f"duplicate key name {new!r}")
                idx.name = new
        else:
            p.accept("TO", "AS")
            return p.qname(schema)
        return None
    if p.accept("ALTER"):
        if p.is_kw("INDEX", "KEY", "CHECK", "CONSTRAINT"):
            return None
        p.accept("COLUMN")
        col = w.need(p.ident())
        if p.accept_seq("SET", "DEFAULT"):
            col.default = _default_value(p)
        elif p.accept_seq("DROP", "DEFAULT"):
            col.default = None
        return None
    if p.accept("CONVERT"):
        p.expect("TO")
        if not _accept_charset_kw(p):
            raise p.err("expected CHARACTER SET after CONVERT TO")
        tok = p.next()
        cs = w.charset if tok.up == "DEFAULT" else tok.value.lower()
        coll = None
        if p.accept("COLLATE"):
            coll = p.next().value.lower()
        if cs is None and coll is not None:
            cs = _charset_of_collation(coll)
        if cs is not None:
            w.convert(cs, coll)
        return None
    if p.is_kw("PARTITION", "REMOVE", "ORDER", "ALGORITHM", "LOCK", "FORCE"):
        return None
    # table options: only a new default charset/collation matters (for columns added later)
    cs, coll = _table_options(p)
    if cs is not None or coll is not None:
        if cs is None:
            cs = _charset_of_collation(coll)  # type: ignore[arg-type]
        w.charset, w.collate = cs, coll
    return None
