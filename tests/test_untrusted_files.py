"""Untrusted files are bounded before they are read: each tiny hostile file ("bomb") below used to
make a reader allocate gigabytes (or reach outside its folder); each is now refused, from its
header or structure, with an error naming the argument and the file.

Each bomb is loaded in a child process under an address-space limit and a timeout, so a
regression shows up as a MemoryError or a timeout in that child, never as a swapping test run.
Importing torch and vaetransfer takes about 0.7 GB of address space; the limit leaves room for
that and for the small valid files, not for what the bombs ask (3 GB to 32 GB)."""
from __future__ import annotations

import gzip
import json
import os
import pickle
import resource
import shutil
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch

import vaetransfer as vt
from vaetransfer import data
from vaetransfer.text import T5, T5Config, Tokenizer, corpus, train_tokenizer

from test_domains import _norb_bytes, _write_idx
from test_labelled_domains import _write_cifar

LIMIT = 2 << 30   # bytes of address space for a child
TIMEOUT = 30      # seconds


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def _refused(code: str, argument: str, *words: str) -> str:
    """Runs ``code`` in a child process under LIMIT and TIMEOUT; it must fail with an
    ArgumentError naming ``argument`` whose message has ``words`` (not a MemoryError, not a
    timeout). Returns the error line."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MALLOC_ARENA_MAX="2")  # thread arenas count as address space
    child = subprocess.run([sys.executable, "-c", code], preexec_fn=_limit_memory, env=env,
                           capture_output=True, text=True, timeout=TIMEOUT)
    error = (child.stderr.strip().splitlines() or [""])[-1]
    assert child.returncode != 0, child.stdout
    assert "MemoryError" not in child.stderr, error
    assert error.startswith("vaetransfer._C.ArgumentError: ") and f"argument '{argument}'" in error, child.stderr
    for word in words:
        assert word in error, error
    return error


def _zeros_gzip(header: bytes, inflated: int) -> bytes:
    """``header`` then ``inflated`` zero bytes, gzip-compressed about 1000:1 (gzip members may be
    concatenated: one compressed block of zeros, repeated)."""
    chunk = 16 << 20
    zeros = gzip.compress(bytes(chunk), 9)
    return gzip.compress(header) + zeros * (inflated // chunk)


# ---------------------------------------------------------------- IDX (MNIST) and NORB, gzip-compressed
def _mnist_bomb(folder, rows: int, inflated: int):
    """MNIST's training files: 10 valid labels, and images whose header announces ``rows`` rows
    of 28 × 28 followed by ``inflated`` zero bytes (3 MB compressed)."""
    _write_idx(folder / "train-labels-idx1-ubyte.gz", np.arange(10, dtype=np.uint8), 0x08)
    header = bytes([0, 0, 0x08, 3]) + struct.pack(">3i", rows, 28, 28)
    (folder / "train-images-idx3-ubyte.gz").write_bytes(_zeros_gzip(header, inflated))


def test_gzip_idx_announcing_gigabytes_is_refused_from_its_header(tmp_path):
    _mnist_bomb(tmp_path, rows=3_900_000, inflated=3 << 30)  # 3 GB announced, and there
    _refused(f"from vaetransfer import data; data.load_mnist({str(tmp_path)!r})", "path",
             "train-images-idx3-ubyte.gz", "header announces 3057600000 data bytes")


def test_gzip_idx_is_inflated_no_further_than_its_header_announces(tmp_path):
    _mnist_bomb(tmp_path, rows=10, inflated=3 << 30)  # 7,840 bytes announced, 3 GB there
    _refused(f"from vaetransfer import data; data.load_mnist({str(tmp_path)!r})", "path",
             "train-images-idx3-ubyte.gz", "trailing data")


def test_gzip_norb_is_inflated_no_further_than_its_header_announces(tmp_path):
    header = struct.pack("<5i", 0x1E3D4C55, 3, 10, 96, 96)  # 92,160 bytes announced, 3 GB there
    (tmp_path / "dat.mat.gz").write_bytes(_zeros_gzip(header, 3 << 30))
    _refused(f"from vaetransfer import data; data.read_norb_matrix({str(tmp_path / 'dat.mat.gz')!r})", "path",
             "dat.mat.gz", "trailing data")


def test_valid_gzip_idx_and_norb_files_still_load(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (3, 28, 28), dtype=np.uint8)
    _write_idx(tmp_path / "x.idx.gz", images, 0x08)
    np.testing.assert_array_equal(data.read_idx(tmp_path / "x.idx.gz"), images)
    values = np.arange(12, dtype=np.int32).reshape(3, 4) - 5
    (tmp_path / "info.mat.gz").write_bytes(gzip.compress(_norb_bytes(values, 0x1E3D4C54)))
    np.testing.assert_array_equal(data.read_norb_matrix(tmp_path / "info.mat.gz"), values)
    header = struct.pack("<5i", 0x1E3D4C55, 3, 1 << 20, 96, 96)  # 9.7 GB announced in a 60-byte file
    (tmp_path / "dat.mat.gz").write_bytes(gzip.compress(header + bytes(1024)))
    with pytest.raises(vt.ArgumentError, match="dat.mat.gz: the header announces 9663676416 data bytes .* more than"):
        data.read_norb_matrix(tmp_path / "dat.mat.gz")
    for cut, word in ((-3, "truncated"), (None, "trailing data")):  # missing or extra data, named
        raw = bytes([0, 0, 0x08, 3]) + struct.pack(">3i", 3, 28, 28) + images.tobytes()
        raw = raw[:cut] if cut else raw + b"\0"
        (tmp_path / "bad.idx.gz").write_bytes(gzip.compress(raw))
        with pytest.raises(vt.ArgumentError, match=f"argument 'path': bad.idx.gz: .*{word}"):
            data.read_idx(tmp_path / "bad.idx.gz")


# ---------------------------------------------------------------- CIFAR-10 pickles
def _shared_list_pickle(k: int = 256, depth: int = 4) -> bytes:
    """A CIFAR batch whose ``data`` is ``depth`` levels of lists of ``k`` references to the level
    below: k**depth = 4.3 billion values (32 GB as int64) in 2 KB."""
    out = bytearray(b"\x80\x02}q\x00(U\x04data")  # PROTO 2, EMPTY_DICT, BINPUT 0, MARK, 'data'
    for d in range(depth):
        item = b"K\x00" if d == 0 else b"h%c" % (d - 1)  # BININT1 0, or BINGET of the level below
        out += b"]q%c(" % d + item * k + b"e"  # EMPTY_LIST, BINPUT d, MARK, k items, APPENDS
        if d < depth - 1:
            out += b"0"  # POP: only the top level is the value
    return bytes(out + b"U\x06labels]K\x00au.")  # 'labels': [0]; SETITEMS; STOP


def test_cifar_pickle_of_shared_references_is_refused(tmp_path):
    (tmp_path / "test_batch").write_bytes(_shared_list_pickle())
    _refused(f"from vaetransfer import data; data.load_cifar10({str(tmp_path)!r}, 'test')", "path",
             "test_batch", "uint8 array [N, 3072], got a list")


def _python2_batch(x: np.ndarray, labels: list[int]) -> bytes:
    """A batch as CIFAR's own files are written: Python 2's pickle (strings as BINSTRING), protocol 2."""
    def string(b: bytes) -> bytes:
        return b"T" + struct.pack("<i", len(b)) + b
    array = (b"cnumpy.core.multiarray\n_reconstruct\nq\x01cnumpy\nndarray\nq\x02K\x00\x85U\x01b\x87Rq\x03("
             b"K\x01J" + struct.pack("<i", x.shape[0]) + b"M\x00\x0c\x86cnumpy\ndtype\nq\x04U\x02u1K\x00K\x01\x87Rq\x05"
             b"(K\x03U\x01|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89" + string(x.tobytes()) + b"tb")
    label_list = b"](" + b"".join(b"K" + bytes([v]) for v in labels) + b"e"
    return b"\x80\x02}q\x00(U\x04data" + array + b"U\x06labels" + label_list + b"U\x0bbatch_label" + string(b"x") + b"u."


def test_cifar_pickle_structure_and_sizes_are_checked(tmp_path):
    _write_cifar(tmp_path, rows_per_batch=2)
    assert data.load_cifar10(tmp_path, "test").images.shape == (2, 3, 32, 32)  # valid batches still load
    x = np.random.default_rng(0).integers(0, 256, (3, 3072), dtype=np.uint8)
    (tmp_path / "test_batch").write_bytes(_python2_batch(x, [7, 0, 9]))  # as the downloaded files are
    batch = data.load_cifar10(tmp_path, "test")
    assert np.array_equal(batch.images.reshape(3, -1).numpy(), x) and batch.factors[:, 0].tolist() == [7, 0, 9]

    def refused(obj_or_bytes, *words):
        raw = obj_or_bytes if isinstance(obj_or_bytes, bytes) else pickle.dumps(obj_or_bytes, protocol=2)
        (tmp_path / "test_batch").write_bytes(raw)
        with pytest.raises(vt.ArgumentError, match="argument 'path': test_batch") as info:
            data.load_cifar10(tmp_path, "test")
        assert all(w in str(info.value) for w in words), info.value

    x = np.zeros((2, 3072), np.uint8)
    refused({b"data": x, b"labels": [[0] * 4] * 2}, "a list of ints")  # shared lists as labels
    refused({b"data": x, b"labels": [0]}, "expected 2 labels")
    refused({b"data": x.tolist(), b"labels": [0, 1]}, "got a list")  # no nested lists as data
    refused({b"data": np.zeros(2, object), b"labels": [0, 1]}, "do not match")  # no Python objects
    # an array whose state announces 8 GB and brings 16 bytes: shape (2, 8) → (2**30, 8)
    raw = pickle.dumps({b"data": np.zeros((2, 8), np.uint8), b"labels": [0, 1]}, protocol=2)
    shape = b"K\x02K\x08\x86"  # BININT1 2, BININT1 8, TUPLE2
    assert raw.count(shape) == 1
    refused(raw.replace(shape, b"J" + struct.pack("<i", 1 << 30) + b"K\x08\x86"), "do not match")
    refused(b"\x80\x02(" + b"N" * (1 << 20) + b"l.", "pickle opcodes")  # a million references
    (tmp_path / "test_batch").write_bytes(b"\0" * 64)
    os.truncate(tmp_path / "test_batch", (1 << 28) + 1)  # sparse: larger than any CIFAR batch
    with pytest.raises(vt.ArgumentError, match="test_batch: 268435457 bytes, more than"):
        data.load_cifar10(tmp_path, "test")


# ---------------------------------------------------------------- npz and MATLAB files
def _npy_header(shape, descr="|u1") -> bytes:
    import io

    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": descr, "fortran_order": False, "shape": shape})
    return out.getvalue()


def test_npz_member_announcing_more_than_it_holds_is_refused(tmp_path):
    path = tmp_path / "dsprites.npz"
    with zipfile.ZipFile(path, "w") as z:  # imgs.npy announces dSprites' 3 GB and brings 16 bytes
        z.writestr("imgs.npy", _npy_header((737280, 64, 64)) + bytes(16))
        z.writestr("latents_values.npy", _npy_header((737280, 6), "<f8") + bytes(16))
        z.writestr("latents_classes.npy", _npy_header((737280, 6), "<i8") + bytes(16))
    _refused(f"from vaetransfer import data; data.load_dsprites_npz({str(path)!r})", "path",
             "dsprites.npz/imgs.npy", "expected 3019898880 data bytes")


def test_mat_element_announcing_more_than_the_file_is_refused(tmp_path):
    import scipy.io

    x = np.zeros((32, 32, 3, 2), np.uint8)
    scipy.io.savemat(tmp_path / "test_32x32.mat", {"X": x, "y": np.ones((2, 1), np.uint8)})
    assert data.load_svhn(tmp_path, "test").images.shape == (2, 3, 32, 32)  # the valid file loads
    raw = bytearray((tmp_path / "test_32x32.mat").read_bytes())
    tag = raw.find(struct.pack("<II", 2, x.size))  # X's data: miUINT8, 6144 bytes
    raw[tag + 4:tag + 8] = struct.pack("<I", 0xFFFFFFF0)  # now 4 GB, which SciPy would allocate
    (tmp_path / "test_32x32.mat").write_bytes(raw)
    _refused(f"from vaetransfer import data; data.load_svhn({str(tmp_path)!r}, 'test')", "path",
             "test_32x32.mat", "sub-element of 4294967280 bytes")


# ---------------------------------------------------------------- T5 folders
def _t5_folder(folder, **config_changes):
    """A small real T5 folder (config.json and model.safetensors), config.json then changed."""
    config = T5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=24, num_layers=2, num_heads=3,
                      relative_attention_num_buckets=8, relative_attention_max_distance=12)
    T5(config, seed=0).save_pretrained(folder)
    hf = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**hf, **config_changes}))
    return folder


def test_t5_config_is_bounded_and_checked_against_the_checkpoint_before_building(tmp_path):
    folder = _t5_folder(tmp_path / "t5", num_layers=10**7)  # 15–20 s and > 5 GB before: then MemoryError
    _refused(f"from vaetransfer.text import T5; T5.from_pretrained({str(folder)!r})", "folder",
             "config.json", "num_layers = 10000000")


@pytest.mark.parametrize("changes, words", [
    ({"num_layers": 3}, "num_layers = 3, the checkpoint 2 encoder blocks"),
    ({"num_decoder_layers": 5}, "num_decoder_layers = 5, the checkpoint 2 decoder blocks"),
    ({"d_model": 32}, "config.json implies (12, 32)"),
    ({"d_ff": 25}, "config.json implies (25, 16)"),
    ({"num_heads": 4, "d_kv": 3}, "config.json implies (8, 4)"),
    ({"vocab_size": 65}, "'shared.weight' has shape (64, 16), config.json implies (65, 16)"),
    ({"relative_attention_num_buckets": 9}, "config.json implies (9, 3)"),
    ({"feed_forward_proj": "gated-gelu"}, "missing tensors: ['decoder.block.0.layer.2.DenseReluDense.wi_0.weight'"),
    ({"tie_word_embeddings": False}, "missing tensors: ['lm_head.weight']"),
    ({"d_ff": 1 << 30}, "d_ff = 1073741824 is not an int in the sane range"),
    ({"num_heads": "3"}, "num_heads = '3' is not an int"),
    ({"eos_token_id": 64}, "eos_token_id = 64 is not a token id in [0, 64)"),
])
def test_every_shape_of_the_config_must_match_the_checkpoint(tmp_path, changes, words):
    with pytest.raises(vt.ArgumentError, match="argument 'folder'") as info:
        T5.from_pretrained(_t5_folder(tmp_path, **changes))
    assert words in str(info.value)


@pytest.mark.parametrize("where", ["relative", "absolute"])
def test_safetensors_index_naming_a_file_outside_the_folder_is_refused(tmp_path, where):
    from safetensors import safe_open

    folder = _t5_folder(tmp_path / "model")
    outside = tmp_path / "outside.safetensors"  # a valid checkpoint: it would load
    (folder / "model.safetensors").rename(outside)
    with safe_open(outside, "pt") as f:
        names = list(f.keys())
    shard = "../outside.safetensors" if where == "relative" else str(outside)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {n: shard for n in names}}))
    _refused(f"from vaetransfer.text import T5; T5.from_pretrained({str(folder)!r})", "folder",
             "model.safetensors.index.json", f"names {shard!r}, which is outside the folder")


def test_sharded_checkpoints_inside_the_folder_still_load_and_corrupt_indexes_are_named(tmp_path):
    from safetensors.torch import load_file, save_file

    folder = _t5_folder(tmp_path / "model")
    state = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    names = sorted(state)
    shards = {n: f"model-0000{1 + i % 2}-of-00002.safetensors" for i, n in enumerate(names)}
    for shard in set(shards.values()):
        save_file({n: state[n] for n in names if shards[n] == shard}, folder / shard)
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": shards}))
    loaded = T5.from_pretrained(folder)
    assert all(torch.equal(loaded.state_dict()[n], state[n]) for n in names)
    # A link the folder's owner made is followed (a Hugging Face cache's shards link to ../../blobs).
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    for shard in set(shards.values()):
        (folder / shard).rename(blobs / shard)
        os.symlink(blobs / shard, folder / shard)
    assert all(torch.equal(T5.from_pretrained(folder).state_dict()[n], state[n]) for n in names)
    for weight_map, words in [({**shards, names[0]: "sub/../../x.safetensors"}, "outside the folder"),
                              ({**shards, names[0]: shards[names[1]]}, "does not match"),
                              ([1, 2], "expected 'weight_map'"),
                              ({names[0]: 3}, "expected 'weight_map'")]:
        index.write_text(json.dumps({"weight_map": weight_map}))
        with pytest.raises(vt.ArgumentError, match="argument 'folder': .*model.safetensors.index.json") as info:
            T5.from_pretrained(folder)
        assert words in str(info.value)
    index.write_text(json.dumps({"weight_map": shards})[:40])  # truncated
    with pytest.raises(vt.ArgumentError, match="model.safetensors.index.json' is corrupt"):
        T5.from_pretrained(folder)
    (folder / "config.json").write_text('{"d_model": 1')  # truncated
    with pytest.raises(vt.ArgumentError, match="config.json' is corrupt"):
        T5.from_pretrained(folder)


def test_pytorch_model_bin_is_read_memory_mapped_and_legacy_files_are_refused(tmp_path):
    folder = _t5_folder(tmp_path / "model")
    from safetensors.torch import load_file

    state = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin")
    assert torch.equal(T5.from_pretrained(folder).state_dict()["shared.weight"], state["shared.weight"])
    torch.save(state, folder / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    with pytest.raises(vt.ArgumentError, match="argument 'folder': .*pytorch_model.bin is not a PyTorch zip"):
        T5.from_pretrained(folder)


# ---------------------------------------------------------------- tokenizer folders
@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer(corpus.generate(300, seed=0).sentences, folder=folder, vocab_size=300, extra_ids=10)
    return folder


def test_tokenizer_config_asking_for_a_billion_sentinels_is_refused(tokenizer_folder, tmp_path):
    (tmp_path / "spiece.model").write_bytes((tokenizer_folder / "spiece.model").read_bytes())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"extra_ids": 10**9}))  # 10 s, then MemoryError before
    _refused(f"from vaetransfer.text import Tokenizer; Tokenizer.from_pretrained({str(tmp_path)!r})", "folder",
             "tokenizer_config.json", "extra_ids = 1000000000")


def test_corrupt_tokenizer_files_are_named(tokenizer_folder, tmp_path):
    for name in ("spiece.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (tmp_path / name).write_bytes((tokenizer_folder / name).read_bytes())
    assert Tokenizer.from_pretrained(tmp_path).vocab_size == 300  # the valid folder loads
    cases = [("spiece.model", "sentencepiece", "spiece.model' is corrupt: not a SentencePiece model"),
             ("tokenizer.json", "tokenizers", "tokenizer.json' is not a tokenizers file"),
             ("tokenizer_config.json", "auto", "tokenizer_config.json' is corrupt (not valid JSON"),
             ("special_tokens_map.json", "auto", "special_tokens_map.json' is corrupt (not valid JSON")]
    for name, backend, words in cases:
        good = (tmp_path / name).read_bytes()
        (tmp_path / name).write_bytes(good[:len(good) // 2])  # truncated
        with pytest.raises(vt.ArgumentError, match="argument 'folder'") as info:
            Tokenizer.from_pretrained(tmp_path, backend=backend)
        assert words in str(info.value)
        (tmp_path / name).write_bytes(good)
    (tmp_path / "special_tokens_map.json").write_text("[]")
    with pytest.raises(vt.ArgumentError, match="special_tokens_map.json' is corrupt: expected an object"):
        Tokenizer.from_pretrained(tmp_path)
