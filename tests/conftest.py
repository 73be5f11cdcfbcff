import gin
import pytest
import torch


@pytest.fixture(autouse=True)
def _isolate(tmp_path, monkeypatch):
    """Fresh gin state, saves under a temporary folder, and small thread counts per test."""
    gin.clear_config()
    monkeypatch.setenv("SSAC_SAVE", str(tmp_path / "saves"))
    torch.manual_seed(0)
    yield
    gin.clear_config()


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module of tiny-network tests: faster than several on a busy
    machine (OpenMP threads spin on shared cores). Use with
    ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
