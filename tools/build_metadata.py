"""The wheel's version and dependencies name the torch it is compiled against (a scikit-build-core
dynamic-metadata provider, pyproject.toml's [[tool.dynamic-metadata]]).

The compiled core is tied to one torch's C++ ABI, so, as PyG's extensions do, the version carries
that torch in its local label (``0.1.0+torch2.13.0.cpu``, ``0.1.0+torch2.11.0.cu130``) and the
wheel requires exactly that torch release (``torch==2.13.0``, which any local build of it — +cpu,
+cu130 — satisfies). The torch is the one the build imports: build with --no-build-isolation (or
``python -m build --no-isolation``) in the environment that has it.
"""
from __future__ import annotations

BASE_VERSION = "0.1.0"  #: the package's own version, before the torch label


def torch_label() -> tuple[str, str]:
    """(release, variant) of the torch this build compiles against: ("2.13.0", "cpu")."""
    import torch

    release, _, local = torch.__version__.partition("+")
    variant = local or (f"cu{torch.version.cuda.replace('.', '')}" if torch.version.cuda else "cpu")
    return release, variant


def dynamic_metadata(settings, project):
    release, variant = torch_label()
    return {"version": f"{BASE_VERSION}+torch{release}.{variant}", "dependencies": [f"torch=={release}"]}
