"""The compiled core: build facts and the shared C++ → Python argument-error path."""
import pytest
import torch

import vaetransfer
from vaetransfer import _C


def test_build_info_reports_the_build():
    info = vaetransfer.build_info()
    assert info["torch"] == torch.__version__
    assert torch.__version__.startswith(info["torch_compiled"])  # compiled against the installed torch
    assert isinstance(info["cuda"], bool)
    assert info["torch_cuda"] == torch.version.cuda
    if not torch.version.cuda:  # a CPU torch never gets the CUDA sources
        assert info["cuda"] is False and info["cuda_available"] is False
        assert info["cuda_architectures"] == info["cuda_compiler"] == info["torch_cuda_compiled"] == ""
    else:
        assert info["torch_cuda_compiled"] == torch.version.cuda  # the CUDA of the torch compiled against
        assert not info["cuda"] or info["cuda_compiler"].split(".")[0] == torch.version.cuda.split(".")[0]
    assert info["compiler"].split()[0] in {"GNU", "Clang", "AppleClang"}
    assert info["cplusplus"] >= 202002  # C++20
    assert info["num_threads"] == torch.get_num_threads()
    assert info["parallel_backend"].startswith("OpenMP")
    major, minor, _ = (int(x) for x in info["eigen"].split("."))
    assert (major, minor) >= (3, 3)


def test_num_threads_follows_torch():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert vaetransfer.build_info()["num_threads"] == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("as_type_error", [False, True])
def test_cpp_argument_checks_reach_python_named(as_type_error):
    expected = TypeError if as_type_error else ValueError
    cls = vaetransfer.ArgumentTypeError if as_type_error else vaetransfer.ArgumentError
    with pytest.raises(expected, match="argument 'beta'") as info:
        _C._check_argument("beta", as_type_error)
    assert isinstance(info.value, cls)
    assert info.value.argument == "beta"


def test_python_side_errors_share_the_classes():
    from vaetransfer._checks import type_error, value_error

    v, t = value_error("n", "expected > 0"), type_error("x", "expected a tensor")
    assert isinstance(v, ValueError) and isinstance(v, vaetransfer.ArgumentError) and v.argument == "n"
    assert isinstance(t, TypeError) and isinstance(t, vaetransfer.ArgumentTypeError) and t.argument == "x"
    assert str(v) == "argument 'n': expected > 0"
