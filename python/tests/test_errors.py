# SPDX-License-Identifier: MIT
"""Bad arguments: Python-side ValueError/TypeError naming the argument, and
AttnError for what only the library can judge (outputs then untouched)."""

import numpy as np
import pytest

import libattn


def qkv(batch=2, hq=4, hk=2, lq=3, lk=5, d=8, dv=8):
    rng = np.random.default_rng(7)
    return (rng.standard_normal((batch, hq, lq, d)).astype(np.float32),
            rng.standard_normal((batch, hk, lk, d)).astype(np.float32),
            rng.standard_normal((batch, hk, lk, dv)).astype(np.float32))


def raises(exc, match, fn, *args, **kwargs):
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)


def test_shape_errors():
    q, k, v = qkv()
    raises(ValueError, r"^q: expected", libattn.forward, q[0, 0, 0], k, v)
    raises(ValueError, r"^q: expected", libattn.forward, q[None], k, v)
    raises(ValueError, r"^k: .* 3 dimensions but q has 4", libattn.forward, q, k[0], v)
    raises(ValueError, r"^v: .* 3 dimensions but q has 4", libattn.forward, q, k, v[0])
    raises(ValueError, r"^k: head_dim 7", libattn.scores, q, k[..., :7])
    raises(ValueError, r"^k: batch 1", libattn.scores, q, k[:1])
    raises(ValueError, r"^k: 3 heads do not divide q's 4", libattn.forward, q,
           np.zeros((2, 3, 5, 8), np.float32), np.zeros((2, 3, 5, 8), np.float32))
    raises(ValueError, r"^v: shape", libattn.forward, q, k, v[:, :, :4])
    # an empty length is a problem with no rows (test_empty.py); rows of no values are not
    raises(ValueError, r"^q: .* rows of no values", libattn.forward, q[..., :0], k, v)
    raises(ValueError, r"^v: .* rows of no values", libattn.forward, q, k, v[..., :0])
    raises(TypeError, r"^v: an array is required", libattn.forward, q, k, None)


def test_dtype_errors():
    q, k, v = qkv()
    raises(TypeError, r"^q: dtype int32", libattn.forward, q.astype(np.int32), k, v)
    raises(TypeError, r"^k: dtype complex64", libattn.scores, q, k.astype(np.complex64))
    raises(TypeError, r"^q: uint16 array: pass dtype='bf16'", libattn.scores,
           q.view(np.uint16)[..., ::2].copy(), k)
    raises(ValueError, r"^dtype: ", libattn.scores, q, k, dtype="f32")
    raises(ValueError, r"^dtype: unknown dtype", libattn.scores, q, k, dtype="fp8")
    raises(TypeError, r"^mask: a mask must be bool", libattn.scores, q, k,
           mask=np.zeros((3, 5), np.float32))
    raises(TypeError, r"^bias: expected a float array", libattn.scores, q, k,
           bias=np.zeros((3, 5), np.int32))


def test_mask_bias_shape_errors():
    q, k, v = qkv()
    raises(ValueError, r"^mask: shape \(4, 5\) does not broadcast to \(2, 4, 3, 5\)",
           libattn.forward, q, k, v, mask=np.ones((4, 5), bool))
    raises(ValueError, r"^bias: shape \(3, 3, 5\) does not broadcast", libattn.weights, q, k,
           bias=np.zeros((3, 3, 5), np.float32))
    raises(ValueError, r"^mask: 5 dimensions", libattn.scores, q, k,
           mask=np.ones((1, 2, 4, 3, 5), bool))


def test_option_errors():
    q, k, v = qkv()
    raises(ValueError, r"^q_lens\[1\] = -1 is outside \[0, 3\]", libattn.forward, q, k, v,
           q_lens=[3, -1])
    raises(ValueError, r"^kv_lens\[0\] = 6 is outside \[0, 5\]", libattn.forward, q, k, v,
           kv_lens=[6, 1])
    raises(ValueError, r"^kv_lens: 3 lengths for a batch of 2", libattn.forward, q, k, v,
           kv_lens=[1, 2, 3])
    raises(TypeError, r"^q_lens\[0\]: expected an int", libattn.forward, q, k, v,
           q_lens=[1.5, 2])
    raises(TypeError, r"^kv_lens: expected integers", libattn.forward, q, k, v,
           kv_lens=np.array([1.0, 2.0]))
    raises(ValueError, r"^scale: must be a finite", libattn.forward, q, k, v, scale=float("nan"))
    raises(ValueError, r"^scale: must be a finite", libattn.forward, q, k, v, scale=1e39)
    raises(ValueError, r"^softcap: must be >= 0", libattn.forward, q, k, v, softcap=-1.0)
    raises(ValueError, r"^softcap: must be a finite", libattn.scores, q, k,
           softcap=float("inf"))
    raises(TypeError, r"^scale: expected a number", libattn.scores, q, k, scale="1")
    raises(ValueError, r"^window: must be >= 0", libattn.forward, q, k, v, window=-2)
    raises(TypeError, r"^window: expected an int", libattn.forward, q, k, v, window=2.5)
    raises(ValueError, r"^threads: must be >= 0", libattn.forward, q, k, v, threads=-1)
    raises(TypeError, r"^threads: expected an int", libattn.forward, q, k, v, threads="4")
    raises(TypeError, r"^causal: expected a bool", libattn.forward, q, k, v, causal="yes")
    # An int length applies to every batch entry.
    w = libattn.weights(q, k, kv_lens=2)
    assert np.all(w[..., 2:] == 0) and np.all(w[..., :2] > 0)


def test_output_errors():
    q, k, v = qkv()
    raises(ValueError, r"^out: shape \(2, 4, 3, 7\), expected \(2, 4, 3, 8\)",
           libattn.forward, q, k, v, out=np.zeros((2, 4, 3, 7), np.float32))
    raises(TypeError, r"^out: must already be f32", libattn.forward, q, k, v,
           out=np.zeros((2, 4, 3, 8)))
    ro = np.zeros((2, 4, 3, 8), np.float32)
    ro.flags.writeable = False
    raises(ValueError, r"^out: the array is read-only", libattn.forward, q, k, v, out=ro)
    raises(ValueError, r"^out: the innermost dimension must be contiguous",
           libattn.forward, q, k, v, out=np.zeros((2, 4, 3, 16), np.float32)[..., ::2])
    raises(ValueError, r"^out: an output cannot broadcast", libattn.forward, q, k, v,
           out=np.lib.stride_tricks.as_strided(np.zeros((1, 4, 3, 8), np.float32),
                                               shape=(2, 4, 3, 8), strides=(0, 96, 32, 4)))
    # Scores written over the input they are computed from.
    qq = np.zeros((1, 1, 4, 4), np.float32)
    raises(ValueError, r"^out: overlaps q", libattn.scores, qq, qq, out=qq)
    # mask_apply is in place: it needs a writable float32 table.
    table = np.zeros((2, 3, 4))
    raises(TypeError, r"^scores: must already be f32", libattn.mask_apply, table, causal=True)
    table32 = np.zeros((2, 3, 4), np.float32)
    table32.flags.writeable = False
    raises(ValueError, r"^scores: the array is read-only", libattn.mask_apply, table32)
    raises(ValueError, r"^scores: expected", libattn.mask_apply, np.zeros(4, np.float32))
    raises(TypeError, r"^scores: is written to, so it must be a NumPy array",
           libattn.mask_apply, [[0.0, 1.0]], causal=True)
    raises(TypeError, r"^out: is written to", libattn.softmax, [1.0, 2.0], out=[0.0, 0.0])
    raises(ValueError, r"^dp: shape", libattn.softmax_backward, np.zeros((2, 3), np.float32),
           np.zeros((3, 2), np.float32))
    shared = np.zeros((2, 4), np.float32)
    raises(ValueError, r"^out: overlaps p", libattn.softmax_backward, shared[:, :3],
           np.zeros((2, 3), np.float32), out=shared[:, 1:])
    raises(ValueError, r"^out: overlaps x", libattn.softmax, shared[:, :3], out=shared[:, 1:])


def test_output_sharing_a_buffer_with_an_input_is_rejected():
    # attn.h: an output whose address range meets an input's is ATTN_ERR_STRIDE,
    # even when the two views interleave without sharing elements.
    buf = np.zeros((1, 1, 4, 8), np.float32)
    q = buf[..., :4]
    q[...] = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4) / 16
    scores_out = buf[..., 4:]
    before = buf.copy()
    with pytest.raises(libattn.AttnError) as err:
        libattn.scores(q, q.copy(), out=scores_out)
    assert err.value.status == libattn.Status.ERR_STRIDE
    assert np.array_equal(buf, before)
    # separate buffers are fine
    out = np.zeros((1, 1, 4, 4), np.float32)
    libattn.scores(q, q.copy(), out=out)
    assert np.isfinite(out).all() and np.any(out != 0)


def test_library_errors_leave_outputs_untouched():
    # head_dim above ATTN_MAX_HEAD_DIM: only the library knows its limit.
    q = np.zeros((1, 1, 2, 4097), np.float32)
    out = np.full((1, 1, 2, 4097), 7.0, np.float32)
    with pytest.raises(libattn.AttnError) as err:
        libattn.forward(q, q, q, out=out)
    e = err.value
    assert e.status == libattn.Status.ERR_UNSUPPORTED
    assert e.function == "attn_forward"
    assert e.message and e.message in str(e) and "ATTN_ERR_UNSUPPORTED" in str(e)
    assert np.all(out == 7.0)
    with pytest.raises(libattn.AttnError):
        libattn.scores(q, q)


def test_isa_errors():
    raises(ValueError, r"^isa: unknown name 'mmx'", libattn.isa_select, "mmx")
    raises(ValueError, r"^isa: unknown name", libattn.isa_available, "pentium")
    raises(TypeError, r"^isa: expected a name", libattn.isa_select, 3.0)


def test_library_error_carries_the_detail():
    # libattn 1.5's attn_last_error: which argument, with its values. The
    # binding checks what it can first; the folded FP8 score scale
    # (scale * k_scale must be a normal float) only the library checks
    import numpy as np
    q = np.ones((1, 2, 4, 8), np.float32)
    k = libattn.quantize(q, "fp8")
    with pytest.raises(libattn.AttnError) as err:
        libattn.forward(q, k, k, kv_dtype="fp8", scale=1e-20, k_scale=1e-20)
    e = err.value
    if libattn._capi.has("attn_last_error"):
        assert "k_scale" in e.detail and e.detail in str(e), str(e)
        assert e.detail.startswith("attn_forward: ")
        # the precise line first, then the status and its sentence
        assert str(e).startswith(e.detail + " (ATTN_ERR_ARG: " + e.message), str(e)


def test_library_error_text_leads_with_the_precise_line():
    q = np.zeros((1, 1, 2, 4097), np.float32)
    with pytest.raises(libattn.AttnError) as err:
        libattn.forward(q, q, q)
    e = err.value
    if not libattn._capi.has("attn_last_error"):
        pytest.skip("the loaded libattn has no attn_last_error (1.5)")
    assert e.detail.startswith("attn_forward: ") and "4097" in e.detail
    assert str(e).startswith(e.detail), str(e)
    assert "ATTN_ERR_UNSUPPORTED" in str(e) and e.message in str(e)
    # a failure without a detail of its own leads with function: sentence
    with pytest.raises(libattn.AttnError) as err:
        libattn._capi.check(libattn.Status.ERR_NOMEM, "attn_example")
    assert str(err.value).startswith("attn_example: " + err.value.message + " (ATTN_ERR_NOMEM)")
