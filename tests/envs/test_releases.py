import pytest

from kit.common.errors import UnknownReleaseError, UsageError
from kit.envs import releases


def test_table_spans_every_supported_release():
    assert releases.known_names() == [
        "0.11.0",
        "1.0.0.post4",
        "1.1.0",
        "1.2.1",
        "1.3.1",
        "1.4.1",
        "1.5.1",
        "1.6.0",
        "1.7.0.post2",
        "1.8.0.post0",
        "1.9.1",
        "2.0.0a0",
        "2.0.0b1",
    ]


def test_0_11_saves_what_it_had():
    assert releases.get("0.11.0").apis == ("save_params", "module_checkpoint")


def test_2_0_releases_save_only_what_2_0_kept():
    for name in ("2.0.0a0", "2.0.0b1"):
        r = releases.get(name)
        assert r.apis == ("export", "save_parameters")
        assert r.system_libs == ("libgomp", "libquadmath") and r.fallback is None
        assert any("SymbolBlock.imports" in q for q in r.quirks)


@pytest.mark.parametrize(
    "name,python,numpy",
    [
        ("1.0.0.post4", "3.6", "1.13.3"),
        ("1.1.0", "3.6", "1.13.3"),
        ("1.2.1", "3.7", "1.14.6"),
        ("1.4.1", "3.7", "1.14.6"),
        ("1.5.1", "3.11", "1.23.5"),
        ("1.9.1", "3.11", "1.23.5"),
        ("2.0.0a0", "3.11", "1.23.5"),
        ("2.0.0b1", "3.11", "1.23.5"),
        ("0.11.0", "3.6", "1.13.3"),
    ],
)
def test_measured_python_and_numpy(name, python, numpy):
    r = releases.get(name)
    assert r.python == python
    assert r.requirements == (f"mxnet=={name}", f"numpy=={numpy}")
    assert r.kernel_name == f"mxnet-{name}"


def test_libquadmath_only_from_1_7():
    assert releases.get("1.6.0").system_libs == ("libgomp",)
    assert releases.get("1.7.0.post2").system_libs == ("libgomp", "libquadmath")


def test_fallbacks_follow_design():
    with_fallback = [n for n in releases.known_names() if releases.get(n).fallback]
    assert with_fallback == ["1.0.0.post4", "1.1.0", "1.3.1", "1.4.1"]
    fb = releases.get("1.4.1").fallback
    assert fb.python == "3.11" and fb.no_deps == ("mxnet==1.4.1",) and "numpy==1.23.5" in fb.requirements


def test_apis_per_release():
    assert releases.get("1.0.0.post4").apis == ("export", "save_params", "module_checkpoint")
    assert "save_parameters" in releases.get("1.2.1").apis


def test_ipykernel_pins():
    assert releases.ipykernel_for("3.6") == "ipykernel==5.5.6"
    assert releases.ipykernel_for("3.7") == "ipykernel==6.16.2"
    assert releases.ipykernel_for("3.11").startswith("ipykernel>=7")


def test_unknown_release_lists_known_ones():
    with pytest.raises(UnknownReleaseError) as e:
        releases.get("1.10.0")
    assert "1.0.0.post4" in str(e.value) and "1.9.1" in str(e.value) and "--wheel" in str(e.value)
    assert e.value.exit_code == 2


def test_custom_release_from_spec_and_wheel(tmp_path):
    r = releases.custom_release("rc1", python="3.11", spec="mxnet==1.9.1")
    assert r.requirements == ("mxnet==1.9.1", "numpy<1.24") and r.expected_version == "1.9.1" and r.custom
    wheel = tmp_path / "mxnet-1.9.2rc0-py3-none-manylinux2014_x86_64.whl"
    wheel.write_bytes(b"not really a wheel")
    r = releases.custom_release("local", python="3.11", wheel=str(wheel), pins=("numpy==1.23.5",))
    assert r.requirements == (str(wheel), "numpy==1.23.5") and r.expected_version == "1.9.2rc0"
    assert releases.Release.from_dict(r.to_dict()) == r


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(name="1.9.1", python="3.11", spec="mxnet==1.9.1"), "is a release in the table"),
        (dict(name="x", python="3.11"), "exactly one of"),
        (dict(name="x", python="3.11", spec="a", wheel="b"), "exactly one of"),
        (dict(name="x", python="eleven", spec="mxnet"), "--python-version"),
        (dict(name="x", python="3.11", wheel="/nonexistent/mxnet-1.0-py3-none-any.whl"), "wheel not found"),
        (dict(name="../evil", python="3.11", spec="mxnet"), "invalid environment name"),
    ],
)
def test_custom_release_errors(kwargs, message):
    name = kwargs.pop("name")
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        releases.custom_release(name, **kwargs)


def test_version_guessing():
    assert releases.version_from_spec("mxnet-mkl == 1.6.0") == "1.6.0"
    assert releases.version_from_spec("mxnet>=1.6") is None
    assert releases.version_from_wheel("not-a-wheel.tar.gz") is None
