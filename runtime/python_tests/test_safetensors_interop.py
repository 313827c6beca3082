"""Files written by the runtime load in the reference `safetensors` package.

Runs fsdprt-write-example (path in FSDPRT_WRITE_EXAMPLE, set by CTest) and
reads its output with safetensors' numpy API. numpy has no bfloat16, so the
BF16 tensor is checked from the raw bytes at the offsets the header gives.
"""
import json
import os
import struct
import subprocess

import pytest

np = pytest.importorskip("numpy")
safetensors = pytest.importorskip("safetensors")
from safetensors import safe_open  # noqa: E402


@pytest.fixture
def example_file(tmp_path):
    tool = os.environ.get("FSDPRT_WRITE_EXAMPLE")
    if not tool or not os.path.exists(tool):
        pytest.skip("FSDPRT_WRITE_EXAMPLE does not name the built tool")
    path = tmp_path / "example.safetensors"
    subprocess.run([tool, str(path)], check=True)
    return path


def test_names_shapes_values(example_file):
    with safe_open(str(example_file), framework="numpy") as f:
        assert sorted(f.keys()) == [
            "counts", "half", "ids", "layers.0.bias", "layers.0.weight"]
        assert f.metadata() == {"step": "3"}
        weight = f.get_tensor("layers.0.weight")
        assert weight.dtype == np.float32 and weight.shape == (2, 3)
        np.testing.assert_array_equal(
            weight, np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5)
        half = f.get_tensor("half")
        assert half.dtype == np.float16 and half.shape == (2, 2)
        np.testing.assert_array_equal(
            half, np.array([[0.5, -1.5], [65504.0, 2.0**-24]], np.float16))
        ids = f.get_tensor("ids")
        assert ids.dtype == np.int64
        np.testing.assert_array_equal(ids, [0, 1, -7, 1 << 40])
        counts = f.get_tensor("counts")
        assert counts.dtype == np.int32
        np.testing.assert_array_equal(counts, [3, -4])


def test_bf16_bytes_and_header_layout(example_file):
    data = example_file.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    assert (8 + n) % 8 == 0, "data section should start 8-byte aligned"
    header = json.loads(data[8:8 + n])
    bias = header["layers.0.bias"]
    assert bias["dtype"] == "BF16" and bias["shape"] == [3]
    begin, end = bias["data_offsets"]
    raw = np.frombuffer(data[8 + n + begin:8 + n + end], dtype="<u2")
    # bf16 is the top half of an f32: widen and compare with RNE-rounded
    # values (0.3 rounds to 0x3e9a).
    widened = (raw.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(
        widened, np.array([1.0, -2.0, 0.30078125], np.float32))
