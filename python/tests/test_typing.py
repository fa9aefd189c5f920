# SPDX-License-Identifier: MIT
"""The package's types as a type checker sees them (PEP 561: py.typed and the
generated stubs __init__.pyi and torch.pyi).

typing/good.py, calls a user writes, must pass `mypy --strict`; each line of
typing/bad.py marked `# error: <text>` must get an error containing <text>
and no other line any (so a keyword missing from the stub, a wrong hint or
a stub that mypy ignores all fail). typing/good_torch.py and bad_torch.py do
the same for libattn.torch, against typing/fake_torch (the few torch names
they use: mypy reads the real torch for over a minute);
ATTN_MYPY_REAL_TORCH=1 checks them against the installed torch instead.
Needs Debian's mypy (build.sh installs it with the test packages); skipped
where it is missing.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

import libattn

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(os.path.abspath(libattn.__file__))


FAKE_TORCH = os.path.join(HERE, "typing", "fake_torch")


def _mypy(path):
    exe = shutil.which("mypy")
    if exe is None:
        pytest.skip("mypy is not installed (Debian: apt-get install mypy)")
    # the package under test, wherever it lies (a source tree, a staged
    # install, a venv's site-packages, which mypy refuses on MYPYPATH): a
    # link to it in a folder of its own
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(PACKAGE, os.path.join(tmp, "libattn"))
        paths = [tmp] if os.environ.get("ATTN_MYPY_REAL_TORCH") else [tmp, FAKE_TORCH]
        env = dict(os.environ, MYPYPATH=os.pathsep.join(paths))
        run = subprocess.run([exe, "--strict", "--no-error-summary", "--no-incremental",
                              "--cache-dir", os.devnull, "--python-executable", sys.executable,
                              path], env=env, capture_output=True, text=True, check=False)
    return run.returncode, run.stdout + run.stderr


def test_package_is_typed():
    assert os.path.isfile(os.path.join(PACKAGE, "py.typed"))
    assert os.path.isfile(os.path.join(PACKAGE, "__init__.pyi"))
    assert os.path.isfile(os.path.join(PACKAGE, "torch.pyi"))


@pytest.mark.parametrize("name", ["good.py", "good_torch.py"])
def test_user_calls_check(name):
    rc, text = _mypy(os.path.join(HERE, "typing", name))
    assert rc == 0, text


@pytest.mark.parametrize("name", ["bad.py", "bad_torch.py"])
def test_wrong_calls_are_refused(name):
    path = os.path.join(HERE, "typing", name)
    with open(path, encoding="utf-8") as f:
        wanted = {n: m.group(1) for n, line in enumerate(f, 1)
                  for m in [re.search(r"# error: (.*)$", line)] if m}
    assert len(wanted) >= 5
    rc, text = _mypy(path)
    assert rc == 1, text
    got = {}
    for line in text.splitlines():
        m = re.match(r".*%s:(\d+): error: (.*)" % re.escape(name), line)
        if m:
            got.setdefault(int(m.group(1)), []).append(m.group(2))
        else:
            assert ": note: " in line, line  # an error elsewhere (the stub itself)
    assert set(got) == set(wanted), text
    for n, needle in wanted.items():
        assert any(needle in e for e in got[n]), (n, needle, got[n])
