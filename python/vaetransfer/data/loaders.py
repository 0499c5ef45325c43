"""Readers for the public files of dSprites, Cars3D, SmallNORB, CelebA, (Fashion-)MNIST, CIFAR-10
and SVHN, and scikit-learn's digits: nothing is downloaded, bring the files. Every reader returns a
:class:`~vaetransfer.data.Dataset` (images with a channel axis, the files' labels and factors as
factor classes) and refuses malformed files with an ``ArgumentError`` naming the argument and the
file. A file is untrusted: its header is read and checked first, and nothing is allocated or
inflated beyond what the header announces and the file's own size can hold (a gzip or zip member
at most :data:`_DEFLATE_RATIO` times its compressed size; no data set's file more than
:data:`_MAX_DATA_BYTES` unless its format fixes the size); gzip streams are inflated only as far as
the header announces data; pickles may name nothing but plain containers and NumPy arrays, and a
CIFAR batch only the structure CIFAR's files have."""
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
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from .._checks import check_flag, type_error, value_error
from .dataset import Dataset, Indices, _is_int, _rows
from ..io import file_size, inside, read_bounded
from .dsprites import DSPRITES_COUNT, DSPRITES_FACTORS, DSPRITES_SIZES


# ---------------------------------------------------------------- bounds on untrusted files
#: The most data (bytes) a compressed file of these sets may inflate to, unless its format fixes the
#: size (an uncompressed file's own size bounds it): the largest real one is SVHN's
#: extra_32x32.mat (1.6 GB of pixels).
_MAX_DATA_BYTES = 1 << 31
#: Deflate (gzip, zip, MATLAB's compression) inflates a byte to at most 1032 bytes: a stream whose
#: header announces more than that times its compressed size is truncated, whatever it holds.
_DEFLATE_RATIO = 1032
_CHUNK = 1 << 24  # bytes inflated at a time
_MAX_TEXT_BYTES = 1 << 28  # a text file of these sets: CelebA's attribute list is 26 MB
_MAX_IMAGE_PIXELS = 1 << 24  # an image file's (Pillow decodes what its header announces)


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


def _mat_shapes(path: str, argument: str, wanted: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
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


def _npz_headers(path: str, argument: str, limit: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
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

# ---------------------------------------------------------------- dSprites (.npz)
def load_dsprites_npz(path: str | os.PathLike, indices: Indices = None) -> Dataset:
    """Reads the public ``dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz`` (keys ``imgs`` uint8
    [N, 64, 64], ``latents_values`` float64 [N, 6], ``latents_classes`` int64 [N, 6]) into the
    form of :func:`~vaetransfer.data.dsprites`: images [N, 1, 64, 64], ``factor_values`` the
    file's ``latents_values``, ``factors`` its ``latents_classes``."""
    path = os.fspath(path)
    # The shapes come from the headers, checked before any array is read: at most the public
    # file's rows (its images are 3 GB inflated).
    headers = _npz_headers(path, "path", DSPRITES_COUNT * 64 * 64)
    missing = {"imgs", "latents_values", "latents_classes"} - set(headers)
    if missing:
        raise value_error("path", f"expected keys imgs, latents_values, latents_classes; missing {sorted(missing)}")
    shape = headers["imgs"][0]
    n = shape[0] if shape else 0
    if len(shape) != 3 or shape[1:] != (64, 64) or n > DSPRITES_COUNT:
        raise value_error("path", f"expected imgs of shape [N, 64, 64] with N <= {DSPRITES_COUNT}, got {list(shape)}")
    for name in ("latents_values", "latents_classes"):
        if headers[name][0] != (n, 6):
            raise value_error("path", f"expected {name} of shape [{n}, 6], got {list(headers[name][0])}")
    if not np.issubdtype(headers["latents_classes"][1], np.integer):
        raise value_error("path", f"expected integer latents_classes, got {headers['latents_classes'][1]}")
    try:
        with np.load(path, allow_pickle=False) as archive:
            pixels, values, classes = archive["imgs"], archive["latents_values"], archive["latents_classes"]
    except (OSError, ValueError, zipfile.BadZipFile, zlib.error) as exc:  # a corrupt member (bad CRC, truncated)
        raise value_error("path", f"not a readable .npz file: {path!r} ({exc})") from exc
    rows = _rows(indices, n)
    return Dataset(torch.from_numpy(np.ascontiguousarray(pixels[rows.numpy()], dtype=np.uint8)).unsqueeze(1),
                   factors=torch.from_numpy(np.ascontiguousarray(classes[rows.numpy()], dtype=np.int64)),
                   factor_values=torch.from_numpy(np.ascontiguousarray(values[rows.numpy()], dtype=np.float64)),
                   factor_names=DSPRITES_FACTORS, factor_sizes=DSPRITES_SIZES, scale=1.0, name="dsprites")


# ---------------------------------------------------------------- Cars3D, SmallNORB, CelebA
CARS3D_FACTORS = ("object", "elevation", "azimuth")
SMALLNORB_FACTORS = ("category", "instance", "elevation", "azimuth", "lighting")
SMALLNORB_SIZES = (5, 10, 9, 18, 6)
SMALLNORB_CATEGORIES = ("animal", "human", "airplane", "truck", "car")
SMALLNORB_SPLITS = ("training", "testing")
# Element type of a NORB binary matrix by its magic number (the file's first int32, little-endian).
_NORB_TYPES = {0x1E3D4C51: np.float32, 0x1E3D4C53: np.float64, 0x1E3D4C54: np.int32, 0x1E3D4C55: np.uint8,
               0x1E3D4C56: np.int16}


def _check_image_size(image_size, argument: str = "image_size") -> int | None:
    if image_size is None:
        return None
    if not _is_int(image_size):
        raise type_error(argument, f"expected an int or None, got {type(image_size).__name__}")
    if image_size < 1:
        raise value_error(argument, f"expected a size >= 1, got {image_size}")
    return int(image_size)


def _check_folder(path, argument: str) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise type_error(argument, f"expected a path, got {type(path).__name__}")
    folder = os.fspath(path)
    if not os.path.isdir(folder):
        raise value_error(argument, f"no such folder: {folder!r}")
    return folder


def _resize_area(images: np.ndarray | torch.Tensor, size: int | None) -> torch.Tensor:
    """uint8 [N, C, H, W] resized to [N, C, size, size] by area averaging (exact block means
    when the size divides H and W); unchanged when ``size`` is None or already the size."""
    x = torch.as_tensor(np.ascontiguousarray(images) if isinstance(images, np.ndarray) else images)
    if size is None or tuple(x.shape[-2:]) == (size, size) or x.shape[0] == 0:
        return x.contiguous()
    y = torch.nn.functional.interpolate(x.float(), size=(size, size), mode="area")
    return y.round_().clamp_(0, 255).to(torch.uint8)


def load_cars3d(path: str | os.PathLike, *, indices: Indices = None, images: bool = True,
                image_size: int | None = 64) -> Dataset:
    """Reads the Cars3D folder of the public data (``cars/`` of Reed et al.'s archive): one
    MATLAB ``.mat`` file per car, each holding ``im``, uint8 [H, W, 3, 24, 4] (128×128 RGB
    renders for 24 azimuths × 4 elevations). Files are taken in sorted name order (the
    ``object`` factor); row ``object · 96 + elevation · 24 + azimuth``. ``indices`` selects rows
    (only the files they need are read); ``images=False`` reads no file; ``image_size`` (64,
    the input of the paper's models; None keeps the files' size) resizes by area averaging.
    Needs scipy (``scipy.io.loadmat``). Images uint8 [N, 3, S, S] (scale 1/255); factors
    :data:`CARS3D_FACTORS` (``object`` has one class per file); ``extras["files"]``: the file of
    each ``object`` class.
    """
    folder = _check_folder(path, "path")
    images = check_flag(images, "images")
    size = _check_image_size(image_size)
    files = sorted(f for f in os.listdir(folder) if f.endswith(".mat") and os.path.isfile(os.path.join(folder, f)))
    if not files:
        raise value_error("path", f"no .mat files in {folder!r}")
    rows = _rows(indices, 96 * len(files))
    classes = torch.stack([rows // 96, rows % 96 // 24, rows % 24], 1)
    pixels = None
    if images:
        try:
            from scipy.io import loadmat
        except ImportError as exc:
            raise ImportError("load_cars3d reads MATLAB .mat files with scipy.io.loadmat: install scipy "
                              "(pip install scipy)") from exc
        objects = classes[:, 0]
        for obj in torch.unique(objects).tolist():
            file = os.path.join(folder, files[obj])
            shape = _mat_shapes(file, "path", ("im",)).get("im")  # its size checked before SciPy reads it
            im = None
            if shape is not None and len(shape) == 5 and shape[2:] == (3, 24, 4):
                try:
                    im = loadmat(file, variable_names=["im"]).get("im")
                except Exception as exc:  # scipy raises several types for a bad file
                    raise value_error("path", f"{files[obj]}: not a readable .mat file ({exc})") from exc
            if not isinstance(im, np.ndarray) or im.shape != shape or im.dtype != np.uint8:
                got = f"{im.dtype} {list(im.shape)}" if isinstance(im, np.ndarray) else (
                    f"dims {list(shape)}" if shape is not None else "no 'im'")
                raise value_error("path", f"{files[obj]}: expected 'im' uint8 [H, W, 3, 24, 4], got {got}")
            # [H, W, channel, azimuth, elevation] → [elevation · 24 + azimuth, channel, H, W]
            per_car = _resize_area(np.transpose(im, (4, 3, 2, 0, 1)).reshape(96, 3, *im.shape[:2]), size)
            if pixels is None:
                pixels = torch.empty((len(rows), *per_car.shape[1:]), dtype=torch.uint8)
            elif per_car.shape[1:] != pixels.shape[1:]:
                raise value_error("path", f"{files[obj]}: image size {list(im.shape[:2])} differs from the other files'")
            sel = (objects == obj).nonzero().squeeze(1)
            pixels[sel] = per_car[rows[sel] % 96]
        if pixels is None:  # no rows selected
            pixels = torch.empty((0, 3, size or 128, size or 128), dtype=torch.uint8)
    return Dataset(pixels, factors=classes, factor_names=CARS3D_FACTORS, factor_sizes=(len(files), 4, 24),
                   scale=1.0 / 255.0, name="cars3d", extras={"files": tuple(files)})


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


def _norb_file(folder: str, split: str, kind: str) -> str:
    found = sorted(f for f in os.listdir(folder)
                   if f.startswith("smallnorb-") and (f.endswith(f"-{split}-{kind}.mat") or
                                                      f.endswith(f"-{split}-{kind}.mat.gz")))
    if len(found) != 1:
        what = "no file" if not found else f"{len(found)} files ({found})"
        raise value_error("path", f"expected one smallnorb-*-{split}-{kind}.mat[.gz] in {folder!r}, found {what}")
    return os.path.join(folder, found[0])


def load_smallnorb(path: str | os.PathLike, split: str = "training", *, indices: Indices = None,
                   images: bool = True, image_size: int | None = 64, camera: int | None = 0) -> Dataset:
    """Reads SmallNORB from the original files (LeCun et al. 2004) in the folder ``path``:
    ``smallnorb-5x46789x9x18x6x2x96x96-training-{dat,cat,info}.mat`` (or ``...-testing-...``,
    each possibly ``.gz``) in the NORB binary format (:func:`read_norb_matrix`): ``dat`` uint8
    [N, 2, 96, 96] (the stereo pair), ``cat`` int32 [N] (category 0–4), ``info`` int32 [N, 4]
    (instance 0–9, elevation 0–8, azimuth 0, 2, ..., 34, lighting 0–5). ``indices`` selects
    rows; ``images=False`` does not read ``dat``; ``image_size`` (64, the input of the paper's
    models; None keeps 96) resizes by area averaging. Images uint8 [N, 1, S, S] of one
    ``camera`` (0 or 1; the convention of the disentanglement literature), or the stereo pair as
    [N, 2, S, S] with ``camera=None`` (scale 1/255). Factors :data:`SMALLNORB_FACTORS`
    (category: :data:`SMALLNORB_CATEGORIES`), in the files' row order; factor values: elevation
    30° + 5° · class, azimuth 20° · class (the file's 0..34 times 10°), the others their class.
    ``extras["split"]``.
    """
    folder = _check_folder(path, "path")
    if not isinstance(split, str):
        raise type_error("split", f"expected one of {list(SMALLNORB_SPLITS)}, got {type(split).__name__}")
    if split not in SMALLNORB_SPLITS:
        raise value_error("split", f"expected one of {list(SMALLNORB_SPLITS)}, got {split!r}")
    images = check_flag(images, "images")
    size = _check_image_size(image_size)
    if camera is not None and not _is_int(camera):
        raise type_error("camera", f"expected 0, 1 or None, got {type(camera).__name__}")
    if camera not in (0, 1, None):
        raise value_error("camera", f"expected 0, 1 or None, got {camera}")
    cameras = [0, 1] if camera is None else [int(camera)]
    cat = read_norb_matrix(_norb_file(folder, split, "cat"))
    info = read_norb_matrix(_norb_file(folder, split, "info"))
    if cat.ndim != 1 or cat.dtype != np.int32:
        raise value_error("path", f"expected the cat file to hold int32 [N], got {cat.dtype} {list(cat.shape)}")
    n = cat.shape[0]
    if info.shape != (n, 4) or info.dtype != np.int32:
        raise value_error("path", f"expected the info file to hold int32 [{n}, 4], got {info.dtype} {list(info.shape)}")
    info = np.asarray(info, dtype=np.int64)
    classes = np.stack([cat.astype(np.int64), info[:, 0], info[:, 1], info[:, 2] // 2, info[:, 3]], 1)
    if n and ((classes < 0).any() or (classes >= np.array(SMALLNORB_SIZES)).any() or (info[:, 2] % 2).any()):
        raise value_error("path", "expected category 0–4, instance 0–9, elevation 0–8, azimuth 0, 2, ..., 34 and "
                                  "lighting 0–5 in the cat/info files")
    rows = _rows(indices, n)
    classes = torch.from_numpy(classes)[rows]
    values = classes.double()
    values[:, 2] = 30.0 + 5.0 * values[:, 2]
    values[:, 3] = 20.0 * values[:, 3]
    pixels = None
    if images:
        dat = read_norb_matrix(_norb_file(folder, split, "dat"))
        if dat.ndim != 4 or dat.shape[:2] != (n, 2) or dat.dtype != np.uint8:
            raise value_error("path", f"expected the dat file to hold uint8 [{n}, 2, H, W], got {dat.dtype} "
                                      f"{list(dat.shape)}")
        height, width = (size, size) if size else dat.shape[2:]
        pixels = torch.empty((len(rows), len(cameras), height, width), dtype=torch.uint8)
        for start in range(0, len(rows), 2048):  # a chunk at a time: the file is memory-mapped
            chunk = rows[start:start + 2048]
            pixels[start:start + len(chunk)] = _resize_area(np.asarray(dat[chunk.numpy()][:, cameras]), size)
    return Dataset(pixels, factors=classes, factor_values=values, factor_names=SMALLNORB_FACTORS,
                   factor_sizes=SMALLNORB_SIZES, scale=1.0 / 255.0, name="smallnorb", extras={"split": split})


def read_celeba_attributes(path: str | os.PathLike, *, argument: str = "attr_file"
                           ) -> tuple[tuple[str, ...], tuple[str, ...], np.ndarray]:
    """Parses ``list_attr_celeba.txt``: a count N, a line of attribute names, then N lines
    ``filename v1 ... vK`` with each v in {−1, 1}. Returns (filenames, attribute names,
    int8 [N, K] values). The count is checked against the file's size before rows are read."""
    path = os.fspath(path)
    size = file_size(path, argument, _MAX_TEXT_BYTES)
    with open(path, encoding="utf-8", errors="replace") as f:
        head = [f.readline().split(), f.readline().split()]
        if not head[1] or len(head[0]) != 1 or not head[0][0].isdigit():
            raise value_error(argument, "expected a first line with the number of images, then the attribute names")
        n, names = int(head[0][0]), tuple(head[1])
        if n * (2 * len(names) + 2) > size:  # a row is at least a name, K values and their separators
            raise value_error(argument, f"the header announces {n} images, more than its {size} bytes can list")
        filenames, values = [], np.empty((n, len(names)), np.int8)
        for number, line in enumerate(f, 3):
            row = line.split()
            if not row:
                continue
            if len(filenames) == n:
                raise value_error(argument, f"the header announces {n} images, the file lists more (line {number})")
            if len(row) != len(names) + 1:
                raise value_error(argument, f"line {number}: expected a filename and {len(names)} values, got "
                                            f"{len(row)} fields")
            try:
                row_values = [int(v) for v in row[1:]]
            except ValueError as exc:
                raise value_error(argument, f"line {number}: expected integer attribute values ({exc})") from exc
            if any(v not in (-1, 1) for v in row_values):
                raise value_error(argument, f"line {number}: expected attribute values -1 or 1")
            values[len(filenames)] = row_values
            filenames.append(row[0])
    if len(filenames) != n:
        raise value_error(argument, f"the header announces {n} images, the file lists {len(filenames)}")
    return tuple(filenames), names, values


def load_celeba(image_dir: str | os.PathLike, attr_file: str | os.PathLike | None = None, *,
                indices: Indices = None, images: bool = True, image_size: int | None = 64,
                crop: int | None = 148) -> Dataset:
    """Reads aligned CelebA (Liu et al. 2015): the images of ``image_dir``
    (``img_align_celeba/``, 178×218 JPEGs) named by ``attr_file`` (``list_attr_celeba.txt``;
    default: that name in ``image_dir`` or its parent). Each image is centre-cropped to
    ``crop`` × ``crop`` (148, the usual crop of the face; None keeps the whole image), then
    resized to ``image_size`` (64; None keeps the size) by area averaging. ``indices`` selects
    rows of the attribute list; ``images=False`` reads only the attributes. Needs Pillow.
    Images uint8 [N, 3, S, S] (scale 1/255); one binary factor per attribute of the list (40 in
    the public file), in its column order: ``factors`` 1 where the attribute is present, else 0,
    ``factor_values`` the file's ±1; ``row_extras["filenames"]``: the image of each row.
    """
    folder = _check_folder(image_dir, "image_dir")
    images = check_flag(images, "images")
    size = _check_image_size(image_size)
    crop = _check_image_size(crop, "crop")
    if attr_file is None:
        candidates = [os.path.join(folder, "list_attr_celeba.txt"),
                      os.path.join(os.path.dirname(os.path.abspath(folder)), "list_attr_celeba.txt")]
        attr_file = next((c for c in candidates if os.path.isfile(c)), None)
        if attr_file is None:
            raise value_error("attr_file", f"not given, and no list_attr_celeba.txt in {folder!r} or its parent")
    elif not isinstance(attr_file, (str, os.PathLike)):
        raise type_error("attr_file", f"expected a path, got {type(attr_file).__name__}")
    filenames, names, attributes = read_celeba_attributes(attr_file)
    rows = _rows(indices, len(filenames))
    values = torch.from_numpy(attributes.astype(np.float64))[rows]
    classes = (values > 0).long()
    picked = tuple(filenames[i] for i in rows.tolist())
    pixels = None
    if images:
        try:
            from PIL import Image
        except ImportError as exc:
            raise ImportError("load_celeba reads images with Pillow: install it (pip install pillow)") from exc

        def read(name: str) -> torch.Tensor:
            file = inside(folder, name, "image_dir", os.path.basename(attr_file))
            try:
                with Image.open(file) as im:  # reads the header: the pixels are decoded only if not too many
                    width, height = im.size
                    rgb = np.asarray(im.convert("RGB")) if width * height <= _MAX_IMAGE_PIXELS else None
            except (OSError, ValueError) as exc:
                raise value_error("image_dir", f"{name}: not a readable image ({exc})") from exc
            if rgb is None:
                raise value_error("image_dir", f"{name}: {width}×{height} pixels, more than {_MAX_IMAGE_PIXELS} (a "
                                               "CelebA image has 178×218)")
            if crop is not None:
                h, w = rgb.shape[:2]
                if crop > min(h, w):
                    raise value_error("crop", f"{crop} exceeds the size {w}×{h} of {name}")
                top, left = (h - crop) // 2, (w - crop) // 2
                rgb = rgb[top:top + crop, left:left + crop]
            return _resize_area(rgb.transpose(2, 0, 1)[None], size)[0]

        pixels = None
        with ThreadPoolExecutor(max_workers=max(1, torch.get_num_threads())) as pool:
            for i, im in enumerate(pool.map(read, picked)):
                if pixels is None:
                    pixels = torch.empty((len(picked), *im.shape), dtype=torch.uint8)
                elif im.shape != pixels.shape[1:]:
                    raise value_error("image_size", f"{picked[i]} is {list(im.shape[1:])}, the first image "
                                                    f"{list(pixels.shape[2:])}: give crop or image_size")
                pixels[i] = im
        if pixels is None:
            side = size or crop or 0
            pixels = torch.empty((0, 3, side, side), dtype=torch.uint8)
    return Dataset(pixels, factors=classes, factor_values=values, factor_names=names, factor_sizes=(2,) * len(names),
                   scale=1.0 / 255.0, name="celeba", row_extras={"filenames": picked})


# ---------------------------------------------------------------- MNIST and Fashion-MNIST (IDX files)
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
MNIST_SPLITS = {"train": "train", "test": "t10k"}
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                         "Ankle boot")


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


def _class_labelled(images: torch.Tensor | None, classes: torch.Tensor, name: str, extras: dict) -> Dataset:
    """Rows of a 10-class file set: the class as the one factor, ``label``."""
    return Dataset(images, factors=classes, factor_names=("label",), factor_sizes=(10,), scale=1.0 / 255.0, name=name,
                   extras=extras)


def _idx_file(folder: str, stem: str) -> str:
    for candidate in (stem, stem + ".gz"):
        full = os.path.join(folder, candidate)
        if os.path.isfile(full):
            return full
    raise value_error("path", f"expected {stem} or {stem}.gz in {folder!r}")


def load_mnist(path: str | os.PathLike, split: str = "train", *, indices: Indices = None, images: bool = True,
               name: str = "mnist") -> Dataset:
    """Reads MNIST (LeCun et al. 1998) or Fashion-MNIST (Xiao et al. 2017; same file names and
    format) from the folder ``path``: ``{train,t10k}-images-idx3-ubyte`` and
    ``{train,t10k}-labels-idx1-ubyte``, each possibly ``.gz`` (:func:`read_idx`). ``split``:
    ``"train"`` (60,000) or ``"test"`` (10,000); ``indices`` picks rows; ``name`` labels the data
    (``"fashion_mnist"`` for Fashion-MNIST, whose classes are :data:`FASHION_MNIST_CLASSES`).
    Images uint8 [N, 1, 28, 28] (scale 1/255); one factor, ``label`` (10 classes), in the files'
    row order; ``extras["split"]``."""
    folder = _check_folder(path, "path")
    if split not in MNIST_SPLITS:
        raise value_error("split", f"expected one of {list(MNIST_SPLITS)}, got {split!r}")
    prefix = MNIST_SPLITS[split]
    labels = read_idx(_idx_file(folder, f"{prefix}-labels-idx1-ubyte"), argument="path")
    if labels.ndim != 1:
        raise value_error("path", f"{prefix}-labels: expected a 1-D array of labels, got shape {list(labels.shape)}")
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise value_error("path", f"{prefix}-labels: expected labels 0..9, got {int(labels.min())}..{int(labels.max())}")
    rows = _rows(indices, len(labels))
    pixels = None
    if images:
        raw = read_idx(_idx_file(folder, f"{prefix}-images-idx3-ubyte"), argument="path")
        if raw.ndim != 3 or raw.shape[0] != len(labels) or raw.dtype != np.uint8:
            raise value_error("path", f"{prefix}-images: expected uint8 [{len(labels)}, H, W] matching the labels, "
                                      f"got {raw.dtype} {list(raw.shape)}")
        pixels = torch.from_numpy(raw[rows.numpy()].copy()).unsqueeze(1)
    classes = torch.from_numpy(labels.astype(np.int64))[rows].unsqueeze(1).contiguous()
    return _class_labelled(pixels, classes, name, {"split": split})


# ---------------------------------------------------------------- CIFAR-10, SVHN, scikit-learn's digits
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


def _read_cifar_batch(path: str) -> tuple[np.ndarray, np.ndarray]:
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


CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
CIFAR10_SPLITS = {"train": tuple(f"data_batch_{i}" for i in range(1, 6)), "test": ("test_batch",)}


def load_cifar10(path: str | os.PathLike, split: str = "train", *, indices: Indices = None,
                 images: bool = True) -> Dataset:
    """Reads CIFAR-10 (Krizhevsky 2009) from its python version, the folder
    ``cifar-10-batches-py``: ``data_batch_1`` … ``data_batch_5`` (``split="train"``, 50,000 rows)
    or ``test_batch`` (``"test"``, 10,000), each a pickled dict with ``data`` (uint8 [10000, 3072],
    the red, green and blue planes of each image in row-major order) and ``labels``. Only plain
    containers and NumPy arrays are unpickled (a pickle can name any code). Images come out
    uint8 [N, 3, 32, 32] (scale 1/255), with one factor, ``label``; ``indices`` picks rows.
    ``extras``: ``classes`` (:data:`CIFAR10_CLASSES`) and ``split``."""
    folder = _check_folder(path, "path")
    if split not in CIFAR10_SPLITS:
        raise value_error("split", f"expected one of {list(CIFAR10_SPLITS)}, got {split!r}")
    parts = []
    for stem in CIFAR10_SPLITS[split]:
        full = os.path.join(folder, stem)
        if not os.path.isfile(full):
            raise value_error("path", f"expected {stem} in {folder!r}")
        parts.append(_read_cifar_batch(full))
    x = np.concatenate([p[0] for p in parts])
    y = torch.from_numpy(np.concatenate([p[1] for p in parts]))
    rows = _rows(indices, len(y))
    pixels = torch.from_numpy(x[rows.numpy()].copy()) if images else None
    classes = y[rows].unsqueeze(1).contiguous()
    return _class_labelled(pixels, classes, "cifar10", {"classes": CIFAR10_CLASSES, "split": split})


SVHN_SPLITS = ("train", "test", "extra")
_DIGITS = tuple(str(d) for d in range(10))
#: The rows of :func:`load_sklearn_digits`.
SKLEARN_DIGITS_COUNT = 1797


def load_svhn(path: str | os.PathLike, split: str = "train", *, indices: Indices = None,
              images: bool = True) -> Dataset:
    """Reads SVHN's cropped digits (Netzer et al. 2011) from ``{split}_32x32.mat`` in the folder
    ``path`` (a MATLAB file read with SciPy): ``X`` uint8 [32, 32, 3, N] and ``y`` [N, 1] with the
    digit 0 stored as 10 (mapped back to 0 here). ``split``: ``"train"`` (73,257), ``"test"``
    (26,032) or ``"extra"``. Images come out uint8 [N, 3, 32, 32] (scale 1/255), with one factor,
    ``label``; ``indices`` picks rows. ``extras``: ``classes`` (the digits) and ``split``."""
    folder = _check_folder(path, "path")
    if split not in SVHN_SPLITS:
        raise value_error("split", f"expected one of {list(SVHN_SPLITS)}, got {split!r}")
    full = os.path.join(folder, f"{split}_32x32.mat")
    if not os.path.isfile(full):
        raise value_error("path", f"expected {split}_32x32.mat in {folder!r}")
    import scipy.io

    shapes = _mat_shapes(full, "path", ("X", "y"))  # their sizes checked before SciPy reads them
    if shapes.keys() != {"X", "y"}:
        raise value_error("path", f"{split}_32x32.mat: expected the variables X and y")
    if len(shapes["X"]) != 4 or shapes["X"][:3] != (32, 32, 3) or math.prod(shapes["y"]) != shapes["X"][3]:
        raise value_error("path", f"{split}_32x32.mat: expected X [32, 32, 3, N] and y [N, 1], got dims "
                                  f"{list(shapes['X'])} and {list(shapes['y'])}")
    try:
        mat = scipy.io.loadmat(full, variable_names=["X", "y"])
    except (ValueError, TypeError, OSError, NotImplementedError) as exc:  # SciPy: NotImplementedError for v7.3 (HDF5)
        raise value_error("path", f"{split}_32x32.mat: unreadable MATLAB file ({exc})") from exc
    if "X" not in mat or "y" not in mat:
        raise value_error("path", f"{split}_32x32.mat: expected the variables X and y")
    x, y = np.asarray(mat["X"]), np.asarray(mat["y"]).reshape(-1).astype(np.int64)
    if x.dtype != np.uint8 or x.ndim != 4 or x.shape[:3] != (32, 32, 3) or x.shape[3] != len(y):
        raise value_error("path", f"{split}_32x32.mat: expected X uint8 [32, 32, 3, {len(y)}], "
                                  f"got {x.dtype} {list(x.shape)}")
    if y.size and (y.min() < 1 or y.max() > 10):
        raise value_error("path", f"{split}_32x32.mat: expected labels 1..10 (10 for the digit 0), "
                                  f"got {int(y.min())}..{int(y.max())}")
    rows = _rows(indices, len(y))
    pixels = None
    if images:
        pixels = torch.from_numpy(np.ascontiguousarray(x[..., rows.numpy()].transpose(3, 2, 0, 1)))
    classes = torch.from_numpy(y % 10)[rows].unsqueeze(1).contiguous()
    return _class_labelled(pixels, classes, "svhn", {"classes": _DIGITS, "split": split})


def load_sklearn_digits(*, image_size: int = 32, channels: int = 3, indices: Indices = None,
                        images: bool = True) -> Dataset:
    """The 1,797 handwritten digits shipped with scikit-learn (``sklearn.datasets.load_digits``:
    8×8, 17 grey levels, from the UCI optical-recognition set): a small real cross domain.
    Values 0..16 are scaled to 0..255, resized bilinearly to ``image_size`` (default 32; None
    keeps 8×8) and repeated to ``channels`` (3 for RGB networks, or 1); uint8 [N, channels, s, s]
    (scale 1/255), with one factor, ``label``; ``extras``: ``classes`` (the digits) and ``split``
    (``"all"``)."""
    size = _check_image_size(image_size)
    if not _is_int(channels) or channels not in (1, 3):
        raise value_error("channels", f"expected 1 or 3, got {channels!r}")
    images = check_flag(images, "images")
    from sklearn.datasets import load_digits

    d = load_digits()
    y = torch.from_numpy(np.asarray(d.target, dtype=np.int64))
    rows = _rows(indices, len(y))
    pixels = None
    if images:
        x = torch.from_numpy(np.asarray(d.images, dtype=np.float32))[rows].unsqueeze(1) * (255.0 / 16.0)
        if size is not None and size != 8:
            x = torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
        pixels = x.round_().clamp_(0, 255).to(torch.uint8).expand(-1, channels, -1, -1).contiguous()
    classes = y[rows].unsqueeze(1).contiguous()
    return _class_labelled(pixels, classes, "sklearn_digits", {"classes": _DIGITS, "split": "all"})
