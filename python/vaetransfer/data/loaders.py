"""Readers for the public files of dSprites, Cars3D, SmallNORB, CelebA, (Fashion-)MNIST, CIFAR-10
and SVHN, and scikit-learn's digits: nothing is downloaded, bring the files. Every reader returns a
:class:`~vaetransfer.data.Dataset` (images with a channel axis, the files' labels and factors as
factor classes) and refuses malformed files with an ``ArgumentError`` naming the argument and the
file. Files are untrusted: their formats are read by :mod:`vaetransfer.data.formats`, which checks
every header and size before it allocates or inflates anything."""
from __future__ import annotations

import math
import os
from dataclasses import replace
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from .._checks import check_flag, is_int, type_error, value_error
from .dataset import Dataset, Indices, dataset_from_tensor, label_tensor, row_indices
from ..io import file_size, inside
from .formats import mat_shapes, npz_headers, read_cifar_batch, read_idx, read_norb_matrix
from .dsprites import DSPRITES_COUNT, DSPRITES_FACTORS, DSPRITES_SIZES

_MAX_TEXT_BYTES = 1 << 28  # a text file of these sets: CelebA's attribute list is 26 MB
_MAX_IMAGE_PIXELS = 1 << 24  # an image file's (Pillow decodes what its header announces)


# ---------------------------------------------------------------- dSprites (.npz)
def load_dsprites_npz(path: str | os.PathLike, indices: Indices = None) -> Dataset:
    """Reads the public ``dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz`` (keys ``imgs`` uint8
    [N, 64, 64], ``latents_values`` float64 [N, 6], ``latents_classes`` int64 [N, 6]) into the
    form of :func:`~vaetransfer.data.dsprites`: images [N, 1, 64, 64], ``factor_values`` the
    file's ``latents_values``, ``factors`` its ``latents_classes``."""
    path = os.fspath(path)
    # The shapes come from the headers, checked before any array is read: at most the public
    # file's rows (its images are 3 GB inflated).
    headers = npz_headers(path, "path", DSPRITES_COUNT * 64 * 64)
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
    # values outside what the format holds are refused, never wrapped (a float 300.7 cast to uint8 is 44)
    if pixels.dtype != np.uint8:
        if not (np.issubdtype(pixels.dtype, np.integer) or np.issubdtype(pixels.dtype, np.floating)) or pixels.size and (
                not np.isfinite(pixels).all() or pixels.min() < 0 or pixels.max() > 255
                or not np.array_equal(pixels, np.round(pixels))):
            raise value_error("path", f"expected imgs of whole numbers in 0..255 (uint8), got {pixels.dtype} values "
                                      "outside that")
    if values.size and not np.isfinite(values).all():
        raise value_error("path", "expected finite latents_values, got NaN or infinite ones")
    if classes.size and classes.min() < 0:
        raise value_error("path", f"expected latents_classes >= 0, got {int(classes.min())}")
    rows = row_indices(indices, n)
    return Dataset(torch.from_numpy(np.ascontiguousarray(pixels[rows.numpy()], dtype=np.uint8)).unsqueeze(1),
                   factors=torch.from_numpy(np.ascontiguousarray(classes[rows.numpy()], dtype=np.int64)),
                   factor_values=torch.from_numpy(np.ascontiguousarray(values[rows.numpy()], dtype=np.float64)),
                   factor_names=DSPRITES_FACTORS, factor_sizes=DSPRITES_SIZES, scale=1.0, name="dsprites")


# ---------------------------------------------------------------- your arrays (.npy / .npz)
#: keys an .npz archive's examples and labels are looked up by, in order
ARRAY_IMAGE_KEYS = ("x", "images", "imgs", "X", "data")
ARRAY_LABEL_KEYS = ("y", "labels", "targets", "Y")
_MAX_ARRAY_BYTES = 1 << 34  # 16 GiB: what one array may announce before it is read


def _npy_header(path: str, argument: str) -> tuple[tuple[int, ...], np.dtype]:
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = read(f)
            header = f.tell()
    except (OSError, ValueError, EOFError) as exc:
        raise value_error(argument, f"not a readable .npy file: {path!r} ({exc})") from exc
    if dtype.hasobject:
        raise value_error(argument, f"{path!r}: an array of Python objects, which is never unpickled")
    stored = file_size(path, argument) - header
    if math.prod(shape) * dtype.itemsize != stored:
        raise value_error(argument, f"{path!r}: the header announces {list(shape)} {dtype} "
                                    f"({math.prod(shape) * dtype.itemsize} bytes) but {stored} bytes follow it")
    return shape, dtype


def load_arrays(path: str | os.PathLike, labels: str | os.PathLike | None = None, *, argument: str = "path") -> Dataset:
    """Your own examples from NumPy files: an ``.npy`` array [N, *input_shape] (``labels``: an
    optional ``.npy`` of N integer class labels), or an ``.npz`` archive holding the examples under
    one of :data:`ARRAY_IMAGE_KEYS` (or as its only array) and, optionally, labels under one of
    :data:`ARRAY_LABEL_KEYS`. uint8 examples get scale 1/255 when they exceed 1 (as
    :func:`~vaetransfer.data.as_dataset`); floating ones are used as they are. Headers are checked
    before anything is read; arrays of Python objects are refused (never unpickled)."""
    path = os.fspath(path)
    name = os.path.splitext(os.path.basename(path))[0]
    y = None
    if path.endswith(".npz"):
        headers = npz_headers(path, argument, _MAX_ARRAY_BYTES)
        key = next((k for k in ARRAY_IMAGE_KEYS if k in headers), None)
        if key is None and len(headers) == 1:
            key = next(iter(headers))
        if key is None:
            raise value_error(argument, f"{path!r}: expected the examples under one of {list(ARRAY_IMAGE_KEYS)} (or "
                                        f"as the only array), found {sorted(headers)}")
        label_key = next((k for k in ARRAY_LABEL_KEYS if k in headers), None)
        if labels is not None and label_key is not None:
            raise value_error("labels", f"given twice: {path!r} holds {label_key!r} already")
        try:
            with np.load(path, allow_pickle=False) as archive:
                x = archive[key]
                y = archive[label_key] if label_key is not None else None
        except (OSError, ValueError, zipfile.BadZipFile, zlib.error) as exc:
            raise value_error(argument, f"not a readable .npz file: {path!r} ({exc})") from exc
    elif path.endswith(".npy"):
        _npy_header(path, argument)
        x = np.load(path, allow_pickle=False)
    else:
        raise value_error(argument, f"expected a .npy or .npz file, got {path!r}")
    if labels is not None:
        labels = os.fspath(labels)
        if not labels.endswith(".npy"):
            raise value_error("labels", f"expected a .npy file of class labels, got {labels!r}")
        _npy_header(labels, "labels")
        y = np.load(labels, allow_pickle=False)
    if x.ndim < 2 or len(x) == 0:
        raise value_error(argument, f"{path!r}: expected examples [N, ...] with N >= 1, got shape {list(x.shape)}")
    if not (np.issubdtype(x.dtype, np.floating) or x.dtype == np.uint8):
        raise value_error(argument, f"{path!r}: expected uint8 or floating examples, got {x.dtype}")
    if y is not None:
        if y.shape != (len(x),) or not np.issubdtype(y.dtype, np.integer):
            raise value_error("labels", f"expected {len(x)} integer class labels, got {y.dtype} {list(y.shape)}")
        if y.min() < 0:
            raise value_error("labels", f"expected class labels >= 0, got {int(y.min())}")
    ds = dataset_from_tensor(torch.from_numpy(np.ascontiguousarray(x)))
    labels = {"labels": label_tensor(torch.from_numpy(y.astype(np.int64))), "num_classes": None} if y is not None else {}
    return replace(ds, name=name, **labels)


# ---------------------------------------------------------------- Cars3D, SmallNORB, CelebA
CARS3D_FACTORS = ("object", "elevation", "azimuth")
SMALLNORB_FACTORS = ("category", "instance", "elevation", "azimuth", "lighting")
SMALLNORB_SIZES = (5, 10, 9, 18, 6)
SMALLNORB_CATEGORIES = ("animal", "human", "airplane", "truck", "car")
SMALLNORB_SPLITS = ("training", "testing")
# Element type of a NORB binary matrix by its magic number (the file's first int32, little-endian).
def _check_image_size(image_size, argument: str = "image_size") -> int | None:
    if image_size is None:
        return None
    if not is_int(image_size):
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
    rows = row_indices(indices, 96 * len(files))
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
            shape = mat_shapes(file, "path", ("im",)).get("im")  # its size checked before SciPy reads it
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
    if camera is not None and not is_int(camera):
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
    rows = row_indices(indices, n)
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
    rows = row_indices(indices, len(filenames))
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
MNIST_SPLITS = {"train": "train", "test": "t10k"}
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                         "Ankle boot")


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
    rows = row_indices(indices, len(labels))
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
        parts.append(read_cifar_batch(full))
    x = np.concatenate([p[0] for p in parts])
    y = torch.from_numpy(np.concatenate([p[1] for p in parts]))
    rows = row_indices(indices, len(y))
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

    shapes = mat_shapes(full, "path", ("X", "y"))  # their sizes checked before SciPy reads them
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
    rows = row_indices(indices, len(y))
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
    if not is_int(channels) or channels not in (1, 3):
        raise value_error("channels", f"expected 1 or 3, got {channels!r}")
    images = check_flag(images, "images")
    from sklearn.datasets import load_digits

    d = load_digits()
    y = torch.from_numpy(np.asarray(d.target, dtype=np.int64))
    rows = row_indices(indices, len(y))
    pixels = None
    if images:
        x = torch.from_numpy(np.asarray(d.images, dtype=np.float32))[rows].unsqueeze(1) * (255.0 / 16.0)
        if size is not None and size != 8:
            x = torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
        pixels = x.round_().clamp_(0, 255).to(torch.uint8).expand(-1, channels, -1, -1).contiguous()
    classes = y[rows].unsqueeze(1).contiguous()
    return _class_labelled(pixels, classes, "sklearn_digits", {"classes": _DIGITS, "split": "all"})
