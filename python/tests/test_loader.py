# SPDX-License-Identifier: MIT
"""Finding the library, and refusing the wrong one with a clear message."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import libattn

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(libattn.__file__)))
PROBE = "import libattn; print(libattn.library_path()); print(libattn.version())"


def run_probe(env_changes, cwd):
    env = dict(os.environ)
    env.update(env_changes)
    env["PYTHONPATH"] = PYTHON_DIR
    for key in [k for k, v in env_changes.items() if v is None]:
        env.pop(key)
    return subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)


def test_attn_library_missing_file(tmp_path):
    missing = str(tmp_path / "nowhere" / "libattn.so.1")
    run = run_probe({"ATTN_LIBRARY": missing}, tmp_path)
    assert run.returncode != 0
    assert "LibraryError" in run.stdout and missing in run.stdout
    assert "cannot be loaded" in run.stdout


def fake_library(tmp_path, body):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a fake library")
    src = tmp_path / "fake.c"
    src.write_text(textwrap.dedent(body))
    lib = tmp_path / "libattn.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return str(lib)


def test_wrong_major_is_refused(tmp_path):
    lib = fake_library(tmp_path, """
        unsigned attn_version(void) { return (2u << 16) | (3u << 8) | 4u; }
    """)
    run = run_probe({"ATTN_LIBRARY": lib}, tmp_path)
    assert run.returncode != 0, run.stdout
    assert "libattn 2.3.4 found" in run.stdout
    assert "needs major version 1" in run.stdout
    assert os.path.realpath(lib) in run.stdout


def test_not_libattn_is_refused(tmp_path):
    lib = fake_library(tmp_path, "int something_else(void) { return 0; }\n")
    run = run_probe({"ATTN_LIBRARY": lib}, tmp_path)
    assert run.returncode != 0
    assert "no attn_version()" in run.stdout and lib in run.stdout


def test_build_dir_fallback(tmp_path):
    # Without ATTN_LIBRARY, ATTN_BUILD_DIR/src/libattn.so.1 is found (unless
    # an installed copy or the dynamic linker comes first).
    real = libattn.library_path()
    build = tmp_path / "build-x" / "src"
    build.mkdir(parents=True)
    os.symlink(real, str(build / "libattn.so.1"))
    run = run_probe({"ATTN_LIBRARY": None, "ATTN_BUILD_DIR": str(tmp_path / "build-x")},
                    tmp_path)
    assert run.returncode == 0, run.stdout
    lines = run.stdout.split("\n")
    assert lines[1] == libattn.version()
    import ctypes.util
    if ctypes.util.find_library("attn") is None:
        assert os.path.realpath(lines[0]) == os.path.realpath(real)


def test_build_config_and_built_isas():
    """attn_build_config names the version and the ISA tables attn_isa_built says are there."""
    import libattn
    line = libattn.build_config()
    assert line.startswith("libattn " + libattn.version())
    isas = line.split("ISAs:")[1].split(";")[0].split()
    for name in libattn.isa_names():
        assert libattn.isa_built(name) == (name in isas), (name, line)
        if libattn.isa_available(name):
            assert libattn.isa_built(name), name
    assert libattn.isa_built("scalar")


def test_isa_support():
    """isa_support's three answers agree with isa_built and isa_available."""
    import libattn
    for name in libattn.isa_names():
        sup = libattn.isa_support(name)
        assert sup["built"] == libattn.isa_built(name), (name, sup)
        if libattn.isa_available(name):
            assert all(sup.values()), (name, sup)
        else:
            assert not all(sup.values()) or not libattn.isa_available("avx512"), (name, sup)
    assert all(libattn.isa_support("scalar").values())
