import numpy as np
import pytest
import torch


@pytest.fixture(autouse=True)
def _seeded():
    """Every test starts from the same global RNG state."""
    torch.manual_seed(0)
    np.random.seed(0)
    yield
