# SPDX-License-Identifier: MIT
"""The keyword table (_keywords.py) against the option list, and struct_size.

_options.py is src/option_list.h's table (test 'python-options' fails when
the committed copy differs from the list), so a field added to the list
fails here until a keyword sets it or NOT_EXPOSED says why none does.
"""

import ctypes
import inspect

import pytest

import libattn
from libattn import _capi, _keywords, _options
from libattn._capi import Options, Shape, struct_size_for

FIELDS = [row.name for row in _options.ROWS]
OPERATIONS = {"scores": libattn.scores, "weights": libattn.weights, "forward": libattn.forward,
              "backward": libattn.backward, "mask_apply": libattn.mask_apply,
              "merge": libattn.merge}


def test_every_field_has_a_keyword_or_a_reason():
    set_by = {}
    for k in _keywords.KEYWORDS:
        for field in k.fields:
            assert field in FIELDS, "keyword %s sets %r, not a field of src/option_list.h" \
                % (k.name, field)
            set_by.setdefault(field, []).append(k.name)
    for field, why in _keywords.NOT_EXPOSED.items():
        assert field in FIELDS, "NOT_EXPOSED names %r, not a field of src/option_list.h" % field
        assert field not in set_by, "%s is NOT_EXPOSED but keyword %s sets it" \
            % (field, set_by[field])
        assert why.strip(), "NOT_EXPOSED[%r] gives no reason" % field
    missing = [f for f in FIELDS if f not in set_by and f not in _keywords.NOT_EXPOSED]
    assert not missing, ("attn_options fields without a Python keyword: %s; add a Keyword to "
                         "libattn/_keywords.py, or say in NOT_EXPOSED why none" % missing)


def test_keywords_are_unique_and_name_known_operations():
    names = [k.name for k in _keywords.KEYWORDS]
    assert len(names) == len(set(names))
    for k in _keywords.KEYWORDS:
        assert k.ops and set(k.ops) <= set(OPERATIONS), (k.name, k.ops)
        assert k.doc.strip(), k.name
        # one of the hints the stub (gen_stub.py) and the torch operator read
        assert k.hint in _keywords.HINTS, (k.name, k.hint)


@pytest.mark.parametrize("op", sorted(OPERATIONS))
def test_signatures_list_the_table(op):
    # Each operation's signature and help() show the table's keywords it takes
    # (keyword-only, with the table's default) and no other option keyword.
    fn = OPERATIONS[op]
    params = inspect.signature(fn).parameters
    table = [k for k in _keywords.KEYWORDS if op in k.ops]
    for k in table:
        assert k.name in params, "%s() lacks %s" % (op, k.name)
        assert params[k.name].kind == inspect.Parameter.KEYWORD_ONLY
        assert params[k.name].default == k.default
        assert params[k.name].annotation == k.hint
        assert "\n%s " % k.name in fn.__doc__, "%s()'s docstring lacks %s" % (op, k.name)
    others = {k.name for k in _keywords.KEYWORDS} - {k.name for k in table}
    assert not others & set(params), (op, others & set(params))
    assert "_kw" not in params


def test_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError, match=r"forward\(\) got an unexpected keyword argument 'nope'"):
        libattn.forward([[1.0]], [[1.0]], [[1.0]], nope=1)
    with pytest.raises(TypeError, match=r"unexpected keyword argument '_kw'"):
        libattn.scores([[1.0]], [[1.0]], _kw={})


def size_of_minor(minor):
    """sizeof a 1.minor attn_options as a library of that version checks it:
    up to the first later field (the newest: the whole struct)."""
    later = [getattr(Options, r.name).offset for r in _options.ROWS if r.since > minor]
    return min(later) if later else ctypes.sizeof(Options)


def test_struct_size_is_the_oldest_version_with_every_set_field():
    assert struct_size_for(Options()) == size_of_minor(0)
    for row in _options.ROWS:
        if row.kind == "header":
            continue
        opt = Options()
        value = 8  # numbers and plain addresses; typed pointers are cast
        if row.ctype in ("int32*", "int64*", "tensor*"):
            value = ctypes.cast(value, dict(Options._fields_)[row.name])
        setattr(opt, row.name, value)
        assert struct_size_for(opt) == size_of_minor(row.since), row.name


def sized(**kw):
    opt, keep = _keywords.build(kw, Shape(2, 4, 2, 3, 5, 8, 8))
    _capi.OptionsArg.from_param(opt)
    del keep
    return opt.struct_size


def test_calls_without_1_1_fields_fit_a_1_0_library():
    assert sized(causal=True, scale=0.5, softcap=30.0, window=4, q_lens=[3, 2],
                 kv_lens=5, alibi=None, sinks=None, k_scale=0.0, v_scale=0.0, q_pos=None,
                 kv_splits=1) == size_of_minor(0)
    v11 = size_of_minor(1)
    assert sized(window=(4, 2)) == v11
    assert sized(alibi=0.5) == v11
    assert sized(sinks=[0.0] * 4) == v11
    assert sized(k_scale=2.0) == v11
    assert sized(q_pos=[1, 2]) == v11
    assert sized(kv_offsets=[0, 1]) == v11


def test_a_value_field_without_a_row_gets_a_default_keyword():
    """A new value option of src/option_list.h reaches Python with no row:
    simulated by leaving the softcap row out of the by-hand table."""
    by_hand = tuple(k for k in _keywords._BY_HAND if k.name != "softcap")
    auto = {k.name: k for k in _keywords._default_keywords(by_hand)}
    assert list(auto) == ["softcap"]
    k = auto["softcap"]
    assert k.fields == ("softcap",) and k.default == 0.0
    call = _keywords.Call(Shape(), {})
    k.convert(2.5, call)
    assert call.opt.softcap == 2.5
    with pytest.raises(ValueError, match="softcap: must be >= 0"):
        k.convert(-1.0, call)  # its rule, CAP, wants >= 0
    # the rows the table has now: none is left to the default
    assert not list(_keywords._default_keywords(_keywords._BY_HAND))
