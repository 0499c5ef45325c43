"""The binary formats of the data sets' public files, read as untrusted input: IDX (MNIST), the
NORB matrix format, MATLAB v5 variable headers, ``.npy`` headers inside an ``.npz``, and CIFAR's
pickled batches. Every reader checks a header before it allocates or inflates anything: nothing
beyond what the header announces and the file's own size can hold (a gzip or zip member at most
:data:`_DEFLATE_RATIO` times its compressed size; no data set's file more than
:data:`_MAX_DATA_BYTES` unless its format fixes the size); gzip streams are inflated only as far as
the header announces data; pickles may name nothing but plain containers and NumPy arrays, and a
CIFAR batch only the structure CIFAR's files have. Errors are ``ArgumentError`` naming the
argument and the file. :mod:`vaetransfer.data.loaders` builds data sets from what these return."""
from __future__ import annotations

import gzip
import io
import itertools
import math
import os
import pickle
import pickletools
import struct
import zipfile
import zlib

import numpy as np

from .._checks import type_error, value_error
from ..io import file_size, read_bounded


# ---------------------------------------------------------------- bounds on untrusted files
#: The most data (bytes) a compressed file of these sets may inflate to, unless its format fixes the
#: size (an uncompressed file's own size bounds it): the largest real one is SVHN's
#: extra_32x32.mat (1.6 GB of pixels).
_MAX_DATA_BYTES = 1 << 31
#: Deflate (gzip, zip, MATLAB's compression) inflates a byte to at most 1032 bytes: a stream whose
#: header announces more than that times its compressed size is truncated, whatever it holds.
_DEFLATE_RATIO = 1032
_CHUNK = 1 << 24  # bytes inflated at a time


def _check_data_size(shape, itemsize: int, stored: int, compressed: bool, argument: str, name: str,
                     limit: int = _MAX_DATA_BYTES) -> int:
    """The bytes of an array of ``shape`` announced by a header, checked before anything is
    allocated for it: ``stored`` bytes on disk hold exactly that many (``compressed=False``) or,
    deflated, at most :data:`_DEFLATE_RATIO` times as many and never more than ``limit``."""
    nbytes = math.prod(shape) * itemsize
    what = f"{nbytes} data bytes for dims {list(shape)}"
    if not compressed and nbytes != stored:
        raise value_error(argument, f"{name}: expected {what}, got {stored}")
    if compressed and nbytes > _DEFLATE_RATIO * stored:
        raise value_error(argument, f"{name}: the header announces {what}, more than {stored} compressed bytes "
                                    "can hold (the file is truncated or forged)")
    if compressed and nbytes > limit:
        raise value_error(argument, f"{name}: the header announces {what}, more than a file of this data set "
                                    f"holds (at most {limit})")
    return nbytes


def _read_exactly(f, shape, itemsize: int, argument: str, name: str) -> np.ndarray:
    """The bytes (uint8) of an array of ``shape`` from the stream ``f`` (its size already checked
    with :func:`_check_data_size`), then the stream's end: missing or trailing data is an
    ArgumentError (a gzip stream is inflated no further than one byte past the data)."""
    nbytes = math.prod(shape) * itemsize
    what = f"{nbytes} data bytes for dims {list(shape)}"
    out = np.empty(nbytes, np.uint8)
    view, got = memoryview(out), 0
    while got < nbytes:
        n = f.readinto(view[got:got + _CHUNK])
        if not n:
            raise value_error(argument, f"{name}: expected {what}, got {got} (the file is truncated)")
        got += n
    if f.read(1):
        raise value_error(argument, f"{name}: expected {what}, got more (trailing data)")
    return out


# Bytes per element of the numeric types of MATLAB's v5 format (miINT8 … miUINT64, miUTF*).
_MAT_TYPE_SIZES = {1: 1, 2: 1, 3: 2, 4: 2, 5: 4, 6: 4, 7: 4, 9: 8, 12: 8, 13: 8, 16: 1, 17: 2, 18: 4}
_MAT_NUMERIC_CLASSES = range(6, 16)  # mxDOUBLE_CLASS … mxUINT64_CLASS


def mat_shapes(path: str, argument: str, wanted: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """The shapes of the ``wanted`` numeric variables of a MATLAB v5 file, read from its element
    tags, which are checked first: SciPy allocates whatever size a tag claims, so every variable's
    header (flags, dimensions, name) must fit inside its element, and a wanted variable's data must
    be exactly its dimensions' size (a compressed variable no more than :data:`_DEFLATE_RATIO`
    times its compressed size, nor :data:`_MAX_DATA_BYTES`)."""
    name, size = os.path.basename(path), file_size(path, argument)

    def bad(what: str):
        return value_error(argument, f"{name}: not a MATLAB v5 file SciPy can read safely ({what})")

    shapes = {}
    with open(path, "rb") as f:
        head = f.read(128)
        if len(head) < 128 or head[126:128] not in (b"IM", b"MI"):
            raise bad("no v5 header")
        order = "<" if head[126:128] == b"IM" else ">"
        if struct.unpack(order + "H", head[124:126])[0] != 0x0100:  # 0x0200: v7.3, an HDF5 file
            raise bad("not version 5")
        pos = 128
        while pos < size:
            f.seek(pos)
            kind, nbytes = struct.unpack(order + "II", f.read(8).ljust(8, b"\0"))
            if kind not in (14, 15) or nbytes > size - pos - 8:
                raise bad(f"an element of {nbytes} bytes at byte {pos}, in a file of {size}")
            if kind == 15:  # miCOMPRESSED: a zlib stream holding one miMATRIX; its header only is inflated
                try:
                    body = zlib.decompressobj().decompress(f.read(min(nbytes, 1 << 16)), 8 + 8192)
                except zlib.error as exc:
                    raise bad(f"a corrupt compressed variable: {exc}") from exc
                inner, length = struct.unpack(order + "II", body[:8].ljust(8, b"\0"))
                if inner != 14 or length > _DEFLATE_RATIO * nbytes:
                    raise bad(f"a compressed variable of {nbytes} bytes announcing {length}")
                body = body[8:]
            else:
                body, length = f.read(min(nbytes, 8192)), nbytes
            var, shape, data = _mat_header(body, length, order, bad)
            if var in wanted:
                if data is None:
                    raise bad(f"{var} is not a real numeric array")
                itemsize = _MAT_TYPE_SIZES[data[0]]
                if data[1] != math.prod(shape) * itemsize:
                    raise bad(f"{var} has {data[1]} data bytes for dims {list(shape)}")
                if kind == 15:
                    _check_data_size(shape, itemsize, nbytes, True, argument, name)
                shapes[var] = shape
            pos += 8 + nbytes
    return shapes


def _mat_header(body: bytes, length: int, order: str, bad):
    """(name, dims, (data type, data bytes) or None) of a miMATRIX element of ``length`` bytes
    whose first bytes are ``body``; sub-elements that do not fit in it are ``bad``."""
    pos, parts = 0, []
    for _ in range(4):  # array flags, dimensions, name, real part
        if pos + 8 > min(len(body), length):
            break
        kind, nbytes = struct.unpack(order + "II", body[pos:pos + 8])
        if kind >> 16:  # the small element format: the size in the upper half, the data in 4 bytes
            kind, nbytes, start, pos = kind & 0xFFFF, kind >> 16, pos + 4, pos + 8
        else:
            start, pos = pos + 8, pos + 8 + nbytes + (-nbytes % 8)
        if nbytes > length - start or (len(parts) < 3 and pos > len(body)):
            raise bad(f"a sub-element of {nbytes} bytes in a variable of {length}")
        parts.append((kind, nbytes, body[start:start + nbytes]))
    if len(parts) < 3 or parts[0][:2] != (6, 8) or parts[1][0] != 5 or parts[1][1] % 4 or parts[2][0] != 1:
        raise bad("a variable without array flags, dimensions and name")
    flags = struct.unpack(order + "I", parts[0][2][:4])[0]
    shape = struct.unpack(f"{order}{parts[1][1] // 4}i", parts[1][2])
    if min(shape, default=-1) < 0:
        raise bad(f"dimensions {list(shape)}")
    numeric = flags & 0xFF in _MAT_NUMERIC_CLASSES and not flags & 0x800 and len(parts) == 4
    data = parts[3][:2] if numeric and parts[3][0] in _MAT_TYPE_SIZES else None
    return parts[2][2].decode("latin1"), shape, data


def npz_headers(path: str, argument: str, limit: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """(shape, dtype) of each array of an ``.npz`` archive, from its ``.npy`` header, checked
    before any array is read (NumPy allocates what a header says): no Python objects, exactly
    the bytes the zip member declares, a member no larger than the archive or, deflated, than
    :data:`_DEFLATE_RATIO` times its compressed size, and no array over ``limit`` bytes."""
    name, size = os.path.basename(path), file_size(path, argument)
    members = []
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.filename.endswith(".npy"):
                    with archive.open(info) as f:  # inflates the header only
                        version = np.lib.format.read_magic(f)
                        if version not in ((1, 0), (2, 0)):
                            raise ValueError(f"{info.filename}: unsupported .npy format version {version}")
                        read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                else np.lib.format.read_array_header_2_0)
                        shape, _, dtype = read(f)
                        members.append((info, f.tell(), shape, dtype))
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as exc:
        raise value_error(argument, f"not a readable .npz file: {path!r} ({exc})") from exc
    out = {}
    for info, header, shape, dtype in members:
        member = f"{name}/{info.filename}"
        if dtype.hasobject:
            raise value_error(argument, f"{member}: an array of Python objects, which is never unpickled")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):  # others inflate further
            raise value_error(argument, f"{member}: compression method {info.compress_type}; expected stored or "
                                        "deflated members (np.savez, np.savez_compressed)")
        if info.compress_size > size:
            raise value_error(argument, f"{member}: {info.compress_size} bytes in an archive of {size}")
        _check_data_size(shape, dtype.itemsize, info.file_size - header, False, argument, member)
        if info.compress_type != zipfile.ZIP_STORED:
            _check_data_size(shape, dtype.itemsize, info.compress_size, True, argument, member, limit)
        out[info.filename[:-4]] = (shape, dtype)
    return out


_NORB_TYPES = {0x1E3D4C51: np.float32, 0x1E3D4C53: np.float64, 0x1E3D4C54: np.int32, 0x1E3D4C55: np.uint8,
               0x1E3D4C56: np.int16}



def read_norb_matrix(path: str | os.PathLike, *, argument: str = "path") -> np.ndarray:
    """One matrix in the binary format of the NORB data sets (``*.mat``, optionally
    gzip-compressed ``*.mat.gz``): a little-endian int32 magic number giving the element
    type (0x1E3D4C55 uint8, 0x1E3D4C54 int32, 0x1E3D4C56 int16, 0x1E3D4C51 float32,
    0x1E3D4C53 float64), an int32 ``ndim``, ``max(ndim, 3)`` int32 dimensions (the unused
    ones 1), then the elements in row-major order. Uncompressed files are memory-mapped; the
    header is checked against the file as :func:`read_idx` does."""
    path = os.fspath(path)
    size, name, compressed = file_size(path, argument), os.path.basename(path), path.endswith(".gz")
    try:
        with (gzip.open(path, "rb") if compressed else open(path, "rb")) as f:
            head = f.read(8)
            if len(head) < 8:
                raise value_error(argument, f"{name}: too short for a NORB header")
            magic, ndim = struct.unpack("<Ii", head)
            if magic not in _NORB_TYPES:
                raise value_error(argument, f"{name}: unknown NORB magic number {magic:#010x}")
            if not 1 <= ndim <= 16:
                raise value_error(argument, f"{name}: bad number of dimensions {ndim}")
            stored = max(ndim, 3)
            raw_dims = f.read(4 * stored)
            if len(raw_dims) < 4 * stored:
                raise value_error(argument, f"{name}: truncated header")
            dims = struct.unpack(f"<{stored}i", raw_dims)[:ndim]
            if min(dims) < 0:
                raise value_error(argument, f"{name}: negative dimension in {list(dims)}")
            dtype = np.dtype(_NORB_TYPES[magic]).newbyteorder("<")
            offset = 8 + 4 * stored
            _check_data_size(dims, dtype.itemsize, size - (0 if compressed else offset), compressed, argument, name)
            if compressed:
                return _read_exactly(f, dims, dtype.itemsize, argument, name).view(dtype).reshape(dims)
    except (OSError, EOFError, zlib.error) as exc:  # not gzip data, a corrupt or truncated stream
        raise value_error(argument, f"{name}: unreadable ({exc})") from exc
    if math.prod(dims) == 0:
        return np.zeros(dims, dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=tuple(dims))



_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}

def read_idx(path: str | os.PathLike, *, argument: str = "path") -> np.ndarray:
    """One array in the IDX format of MNIST and Fashion-MNIST (``*-ubyte``, or gzip-compressed
    ``*-ubyte.gz``): two zero bytes, a type byte (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
    0x0D float32, 0x0E float64), the number of dimensions, big-endian int32 dimensions, then the
    big-endian elements in row-major order. The header is read first and the data it announces
    must fit the file (a ``.gz`` stream is inflated only that far, and to at most
    :data:`_MAX_DATA_BYTES`); malformed files, missing or trailing data raise ``ArgumentError``
    naming ``argument``."""
    if not isinstance(path, (str, os.PathLike)):
        raise type_error(argument, f"expected a path, got {type(path).__name__}")
    path = os.fspath(path)
    size, name, compressed = file_size(path, argument), os.path.basename(path), path.endswith(".gz")
    try:
        with (gzip.open(path, "rb") if compressed else open(path, "rb")) as f:
            head = f.read(4)
            if len(head) < 4 or head[0] != 0 or head[1] != 0 or head[2] not in _IDX_TYPES:
                raise value_error(argument, f"{name}: not an IDX file (bad magic number {head.hex()})")
            ndim = head[3]
            raw_dims = f.read(4 * ndim)
            if ndim < 1 or len(raw_dims) < 4 * ndim:
                raise value_error(argument, f"{name}: truncated IDX header")
            dims = struct.unpack(f">{ndim}i", raw_dims)
            if min(dims) < 0:
                raise value_error(argument, f"{name}: negative dimension in {list(dims)}")
            dtype = np.dtype(_IDX_TYPES[head[2]])
            _check_data_size(dims, dtype.itemsize, size - (0 if compressed else 4 + 4 * ndim), compressed, argument,
                             name)
            body = _read_exactly(f, dims, dtype.itemsize, argument, name)
    except (OSError, EOFError, zlib.error) as exc:  # not gzip data, a corrupt or truncated stream
        raise value_error(argument, f"{name}: unreadable ({exc})") from exc
    return body.view(dtype).astype(dtype.newbyteorder("="), copy=False).reshape(dims)



# ---------------------------------------------------------------- CIFAR's pickled batches
#: A CIFAR batch file is 31 MB (CIFAR-100's training file, the largest of the format, 155 MB).
_MAX_PICKLE_BYTES = 1 << 28
#: Pickle opcodes a batch may hold: about four per row (its label and file name), 40,000 in a
#: CIFAR-10 batch. Each opcode can push a reference, so their number bounds the objects built.
_MAX_PICKLE_OPS = 1 << 20


class _CheckedArray(np.ndarray):
    """An array a data file's pickle builds: its state (shape, dtype, bytes) must describe exactly
    the bytes it brings, with no Python objects, before NumPy takes it."""

    def __setstate__(self, state):
        shape, dtype, _, raw = state[-4:] if isinstance(state, tuple) and len(state) in (4, 5) else (None,) * 4
        if not (isinstance(shape, tuple) and all(isinstance(d, int) and d >= 0 for d in shape)
                and isinstance(dtype, np.dtype) and not dtype.hasobject and isinstance(raw, bytes)
                and math.prod(shape) * dtype.itemsize == len(raw)):
            raise pickle.UnpicklingError("an array whose shape and dtype do not match the bytes it holds")
        super().__setstate__(state)


def _reconstruct(subtype, shape, dtype):
    # NumPy pickles every array as _reconstruct(ndarray, (0,), b'b') filled in by __setstate__.
    if subtype is not np.ndarray or tuple(shape) != (0,):
        raise pickle.UnpicklingError("an array that NumPy's pickling does not write")
    return _CheckedArray((0,), np.uint8)


def _scalar(dtype, data=None):
    if not isinstance(dtype, np.dtype) or dtype.hasobject or not isinstance(data, bytes) or len(data) != dtype.itemsize:
        raise pickle.UnpicklingError("a NumPy scalar whose dtype does not match its bytes")
    return np.frombuffer(data, dtype)[0]


def _latin1(text, encoding="latin1"):
    # Protocol 2 pickles bytes as _codecs.encode(str, 'latin1'); no other codec is needed.
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"refusing _codecs.encode with {encoding!r}")
    return text.encode("latin1")


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles plain containers and NumPy arrays only: a pickle can run any code it names, so
    a data file may name nothing else, and the arrays and scalars it builds are checked."""

    _ALLOWED = {("numpy.core.multiarray", "_reconstruct"): _reconstruct,
                ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
                ("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype,
                ("numpy.core.multiarray", "scalar"): _scalar, ("numpy._core.multiarray", "scalar"): _scalar,
                ("_codecs", "encode"): _latin1}

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return self._ALLOWED[module, name]
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a data file")


def read_cifar_batch(path: str) -> tuple[np.ndarray, np.ndarray]:
    name = os.path.basename(path)
    raw = read_bounded(path, "path", _MAX_PICKLE_BYTES)
    try:  # the opcodes are counted before any is run
        ops = sum(1 for _ in itertools.islice(pickletools.genops(raw), _MAX_PICKLE_OPS + 1))
        d = _ArrayUnpickler(io.BytesIO(raw), encoding="bytes").load() if ops <= _MAX_PICKLE_OPS else None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError, KeyError,
            IndexError) as exc:
        raise value_error("path", f"{name}: not a CIFAR-10 python batch ({exc})") from exc
    if ops > _MAX_PICKLE_OPS:
        raise value_error("path", f"{name}: more than {_MAX_PICKLE_OPS} pickle opcodes; not a CIFAR-10 python batch")
    # Only the structure of CIFAR's files is taken, and nothing in it is walked further than that
    # structure (references to one shared list can describe billions of values in a few bytes).
    if not isinstance(d, dict) or not all(isinstance(k, (bytes, str)) for k in d):
        raise value_error("path", f"{name}: expected a dict batch with string keys, got {type(d).__name__}")
    d = {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in d.items()}
    if "data" not in d or "labels" not in d:
        raise value_error("path", f"{name}: expected the keys 'data' and 'labels', got {sorted(d)[:10]}")
    x, y = d["data"], d["labels"]
    if not isinstance(x, np.ndarray) or x.dtype != np.uint8 or x.ndim != 2 or x.shape[1] != 3072:
        got = f"{x.dtype} {list(x.shape)}" if isinstance(x, np.ndarray) else f"a {type(x).__name__}"
        raise value_error("path", f"{name}: expected data, a uint8 array [N, 3072], got {got}")
    n = x.shape[0]
    if isinstance(y, np.ndarray) and y.ndim == 1 and y.dtype.kind in "iu":
        y = y.astype(np.int64)
    elif isinstance(y, list) and all(type(v) is int and -(1 << 62) < v < 1 << 62 for v in y):
        y = np.array(y, dtype=np.int64)
    else:
        raise value_error("path", f"{name}: expected labels, a list of ints, got a {type(y).__name__}")
    if len(y) != n:
        raise value_error("path", f"{name}: expected {n} labels (one per row of data [{n}, 3072]), got {len(y)}")
    if y.size and (y.min() < 0 or y.max() > 9):
        raise value_error("path", f"{name}: expected labels 0..9, got {int(y.min())}..{int(y.max())}")
    return x.view(np.ndarray).reshape(-1, 3, 32, 32), y


