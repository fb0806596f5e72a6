import json
import os
import tempfile

from kit.kernel.runtime.fingerprint import cpu_info, fingerprint


def test_cpu_info_reads_model_and_known_flags():
    with tempfile.NamedTemporaryFile("w", suffix=".cpuinfo", delete=False) as f:
        f.write("processor\t: 0\nmodel name\t: Test CPU 9000\nflags\t\t: fpu sse4_2 avx avx2 weird\n")
    try:
        info = cpu_info(f.name)
    finally:
        os.unlink(f.name)
    assert info["model"] == "Test CPU 9000"
    assert info["flags"] == ["sse4_2", "avx", "avx2"]


def test_fingerprint_is_json_and_keeps_release_name():
    os.environ["MXNET_FINGERPRINT_TEST"] = "1"
    try:
        info = json.loads(json.dumps(fingerprint("1.7.0.post2")))
    finally:
        del os.environ["MXNET_FINGERPRINT_TEST"]
    assert info["release"] == "1.7.0.post2"
    assert info["env"]["MXNET_FINGERPRINT_TEST"] == "1"
    assert info["python"].count(".") == 2
    assert "numpy" in info and "mxnet" in info
