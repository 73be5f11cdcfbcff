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
