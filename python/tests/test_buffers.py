# SPDX-License-Identifier: MIT
"""libattn.Tensor: flat buffers without NumPy, and with it."""

import array
import os
import subprocess
import sys

import numpy as np

import libattn
from conftest import Reference, assert_close

HERE = os.path.dirname(os.path.abspath(__file__))


def test_without_numpy():
    # A fresh interpreter where `import numpy` fails.
    run = subprocess.run([sys.executable, os.path.join(HERE, "nonumpy_check.py")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, env=dict(os.environ))
    assert run.returncode == 0, run.stdout
    assert "ok: flat-buffer API without NumPy" in run.stdout


def test_tensor_over_numpy_buffers(rng):
    q = rng.standard_normal((2, 3, 4, 8)).astype(np.float32)
    k = rng.standard_normal((2, 3, 5, 8)).astype(np.float32)
    v = rng.standard_normal((2, 3, 5, 8)).astype(np.float32)
    ref = Reference(q, k, v, causal=True)
    tq, tk, tv = (libattn.Tensor(x.reshape(-1), x.shape) for x in (q, k, v))
    out = libattn.forward(tq, tk, tv, causal=True)
    assert isinstance(out, libattn.Tensor)
    assert_close(out.numpy(), ref.out, ref.out_tol, "Tensor forward")
    assert np.array_equal(np.array(out.tolist(), dtype=np.float32), out.numpy())
    # Mixed: NumPy q gives NumPy results.
    mixed = libattn.forward(q, tk, tv, causal=True)
    assert isinstance(mixed, np.ndarray) and np.array_equal(mixed, out.numpy())


def test_tensor_views_with_offset():
    data = array.array("f", range(20))
    t = libattn.Tensor(data, (2, 3), strides=(5, 1), offset=2)
    assert t.tolist() == [[2.0, 3.0, 4.0], [7.0, 8.0, 9.0]]
    assert np.array_equal(t.numpy(), [[2, 3, 4], [7, 8, 9]])
    p = libattn.softmax(t)
    want = np.exp(np.array([[2, 3, 4], [7, 8, 9]], float) - [[4], [9]])
    want /= want.sum(axis=1, keepdims=True)
    assert np.allclose(p.numpy(), want, rtol=2e-6, atol=0)
    empty = libattn.Tensor.empty((2, 2), "bf16")
    assert empty.dtype == libattn.DType.BF16 and empty.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert "shape=(2, 3)" in repr(t)
