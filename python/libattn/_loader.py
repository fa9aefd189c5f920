# SPDX-License-Identifier: MIT
"""Finding and loading libattn.so.

Search order (the first library that loads and has the right major version
wins):

1. ``ATTN_LIBRARY``: a path to the library. When set it is the only
   candidate, so a wrong path is an error instead of a silent fallback.
2. Inside the package: a wheel (pyproject.toml, meson-python) carries the
   library next to this file, named by ``_config.LIBRARY_NAME``.
3. The prefix this package was installed into: meson writes ``_config.py``
   with the install-time prefix, libdir and site directory, so the package
   can find ``<prefix>/<libdir>/libattn.so.1`` even after the whole prefix
   was moved (``meson install --destdir``, relocated tarballs).
4. ``ctypes.util.find_library('attn')`` (the dynamic linker's search path).
5. A build tree: ``ATTN_BUILD_DIR/src/``, else ``build*/src/`` in the
   directories above this package (running from a source checkout).
"""

import ctypes
import ctypes.util
import glob
import os
import sys

# The major version of the C ABI this binding was written for.
ABI_MAJOR = 1


class LibraryError(OSError):
    """libattn could not be found, or only unusable copies were found."""


def _soname():
    if sys.platform == "darwin":
        return "libattn.%d.dylib" % ABI_MAJOR
    if sys.platform == "win32":
        return "attn-%d.dll" % ABI_MAJOR
    return "libattn.so.%d" % ABI_MAJOR


def _package_candidates():
    """The library a wheel carries inside the package (step 2)."""
    try:
        from . import _config
    except ImportError:  # running from a source checkout: no generated config
        return []
    name = getattr(_config, "LIBRARY_NAME", "") or _soname()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    return [path] if os.path.exists(path) else []


def _installed_candidates():
    try:
        from . import _config
    except ImportError:  # running from a source checkout: no generated config
        return []
    name = getattr(_config, "LIBRARY_NAME", "") or _soname()
    prefix = _config.PREFIX
    libdir = _config.LIBDIR
    if not os.path.isabs(libdir):
        libdir_rel = libdir
    else:
        libdir_rel = os.path.relpath(libdir, prefix) if libdir.startswith(prefix + os.sep) else None
    found = []
    # Relocatable guess: climb from the site directory we live in to the
    # prefix it was installed under, then go down into libdir.
    site_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    site_rel = os.path.relpath(_config.PYTHON_INSTALL_DIR, prefix)
    if libdir_rel is not None and not site_rel.startswith(os.pardir):
        parts = [p for p in site_rel.split(os.sep) if p and p != os.curdir]
        tail = site_dir.split(os.sep)[-len(parts):] if parts else []
        if tail == parts:
            moved_prefix = site_dir
            for _ in parts:
                moved_prefix = os.path.dirname(moved_prefix)
            found.append(os.path.join(moved_prefix, libdir_rel, name))
    absolute = os.path.join(prefix, libdir, name) if libdir_rel is not None else os.path.join(libdir, name)
    if absolute not in found:
        found.append(absolute)
    return [p for p in found if os.path.exists(p)]


def _build_tree_candidates():
    name = _soname()
    build_dir = os.environ.get("ATTN_BUILD_DIR")
    if build_dir:
        return [os.path.join(build_dir, "src", name)]
    here = os.path.dirname(os.path.abspath(__file__))
    found = []
    directory = os.path.dirname(here)
    for _ in range(3):
        found += glob.glob(os.path.join(directory, "build*", "src", name))
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    # Several build directories: take the most recently built library.
    found.sort(key=os.path.getmtime, reverse=True)
    return found


def _where(lib, fallback):
    """The file the dynamic linker actually mapped for `lib` (via dladdr)."""

    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]

    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
        dladdr.restype = ctypes.c_int
        info = DlInfo()
        address = ctypes.cast(lib.attn_version, ctypes.c_void_p)
        if dladdr(address, ctypes.byref(info)) and info.dli_fname:
            return os.path.realpath(os.fsdecode(info.dli_fname))
    except (AttributeError, OSError, TypeError):
        pass
    return fallback


def _check(path):
    """Load `path`; return (CDLL, real path) or raise LibraryError saying why not."""
    try:
        lib = ctypes.CDLL(path)
    except OSError as err:
        raise LibraryError("%s: cannot be loaded (%s)" % (path, err)) from None
    try:
        version_fn = lib.attn_version
    except AttributeError:
        raise LibraryError("%s: loaded, but it has no attn_version(): not libattn" % path) from None
    version_fn.argtypes = []
    version_fn.restype = ctypes.c_uint32
    version = version_fn()
    where = _where(lib, path)
    if version >> 16 != ABI_MAJOR:
        raise LibraryError(
            "%s: libattn %d.%d.%d found, but this binding needs major version %d"
            % (where, version >> 16, (version >> 8) & 0xFF, version & 0xFF, ABI_MAJOR))
    return lib, where


def load():
    """Return (ctypes.CDLL, path) of the first usable libattn."""
    explicit = os.environ.get("ATTN_LIBRARY")
    if explicit:
        try:
            return _check(explicit)
        except LibraryError as err:
            raise LibraryError("ATTN_LIBRARY=%s refused: %s" % (explicit, err)) from None

    tried = []
    candidates = [("inside the package", p) for p in _package_candidates()]
    candidates += [("installed prefix", p) for p in _installed_candidates()]
    system = ctypes.util.find_library("attn")
    if system:
        candidates.append(("ctypes.util.find_library('attn')", system))
    candidates += [("build tree", p) for p in _build_tree_candidates()]

    seen = set()
    for origin, path in candidates:
        if path in seen:
            continue
        seen.add(path)
        try:
            return _check(path)
        except LibraryError as err:
            tried.append("  %s: %s" % (origin, err))
    message = "libattn (ABI major %d) not found." % ABI_MAJOR
    if tried:
        message += " Refused:\n" + "\n".join(tried)
    else:
        message += " No candidate: set ATTN_LIBRARY to the path of %s, install libattn, " \
                   "or build it (meson) next to this package." % _soname()
    raise LibraryError(message)
