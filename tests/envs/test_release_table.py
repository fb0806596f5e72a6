"""Choosing and resolving releases on the host: the table, custom builds, environment folders found on disk,
and the order releases sort in. No environment is built and nothing is run."""

from __future__ import annotations

import json

import pytest

from kit.common import versions
from kit.common.errors import UnknownReleaseError, UsageError
from kit.envs import releases
from kit.envs.manager import MARKER, EnvManager
from kit.home import KitHome

TABLE = releases.known_names()  # tests/envs/test_releases.py pins the exact list


@pytest.fixture
def manager(tmp_path):
    return EnvManager(KitHome(tmp_path / "home"))


def fake_env(manager, name, release=None, python=True, marker_text=None):
    """An environment folder as a build leaves it: a marker (unless ``release`` and ``marker_text`` are None)
    and, when ``python``, a bin/python."""
    path = manager.home.env_dir(name)
    (path / "bin").mkdir(parents=True)
    if python:
        (path / "bin" / "python").write_text("")
    if marker_text is not None:
        (path / MARKER).write_text(marker_text)
    elif release is not None:
        (path / MARKER).write_text(json.dumps({"release": release.to_dict(), "fallback": False}))
    return path


# -- the table ----------------------------------------------------------------------------------
def test_known_names_are_the_table_in_release_order():
    assert sorted(releases.RELEASES, key=versions.sort_key) == TABLE
    assert (TABLE[0], TABLE[-1], len(TABLE)) == ("0.11.0", "2.0.0b1", 13)


def test_an_unknown_release_is_refused_with_every_known_one_listed():
    with pytest.raises(UnknownReleaseError) as e:
        releases.get("1.9.2")
    err = e.value
    assert isinstance(err, UsageError) and err.exit_code == 2
    assert err.message == "unknown MXNet release '1.9.2'"
    assert err.hint.startswith("known releases: " + ", ".join(TABLE) + "; ")
    assert "--name NAME --wheel PATH or --spec 'mxnet==X'" in err.hint


@pytest.mark.parametrize("name", ["1.9.1", "1.4.1", "2.0.0b1"])
def test_a_table_release_survives_its_marker_round_trip(name):
    r = releases.get(name)
    assert releases.Release.from_dict(json.loads(json.dumps(r.to_dict()))) == r


def test_a_custom_candidate_gets_its_version_from_the_spec_and_default_pins():
    r = releases.custom_release("rc-build", python="3.11", spec="  mxnet==2.0.0rc1  ")
    assert r.name == "rc-build" and r.kernel_name == "mxnet-rc-build"
    assert r.requirements == ("mxnet==2.0.0rc1", "numpy<1.24") and r.expected_version == "2.0.0rc1"
    assert (r.custom, r.source, r.quirks) == (True, "spec", ("custom build",))
    assert r.system_libs == ("libgomp", "libquadmath") and r.fallback is None
    assert r.apis == ("export", "save_parameters")  # what 2.0 saves


def test_a_custom_candidate_without_a_pinned_version_can_save_with_every_api():
    r = releases.custom_release("nightly", python="3.10", spec="mxnet>=1.9", pins=("NumPy == 1.23.5",))
    assert r.expected_version is None
    assert r.requirements == ("mxnet>=1.9", "NumPy == 1.23.5")  # a numpy pin of any spelling replaces the default
    assert r.apis == ("export", "save_parameters", "save_params", "module_checkpoint")
    told = releases.custom_release("told", python="3.11", spec="mxnet>=1.9", expected_version="1.9.1")
    assert told.expected_version == "1.9.1" and told.apis == releases.get("1.9.1").apis


# -- resolving a name ---------------------------------------------------------------------------
def test_resolve_gives_the_table_release_without_looking_at_the_home(manager):
    assert not manager.home.root.exists()
    for name in TABLE:
        assert manager.resolve(name) is releases.RELEASES[name]


def test_resolve_finds_a_custom_release_created_earlier(manager):
    custom = releases.custom_release("rc-build", python="3.11", spec="mxnet==1.9.2rc0")
    fake_env(manager, "rc-build", custom)
    resolved = manager.resolve("rc-build")
    assert resolved == custom and resolved.custom and resolved.expected_version == "1.9.2rc0"


@pytest.mark.parametrize("marker_text", [None, "{half a marker"])
def test_resolve_refuses_an_unknown_name_even_with_a_folder_that_has_no_marker(manager, marker_text):
    fake_env(manager, "rc-build", marker_text=marker_text)  # an interrupted build, or a broken marker
    with pytest.raises(UnknownReleaseError) as e:
        manager.resolve("rc-build")
    assert e.value.message == "unknown MXNet release 'rc-build'" and ", ".join(TABLE) in e.value.hint


def test_resolve_refuses_a_name_nothing_knows(manager):
    with pytest.raises(UnknownReleaseError, match="unknown MXNet release '3.0.0'"):
        manager.resolve("3.0.0")


def test_the_table_wins_over_a_folder_of_the_same_name(manager):
    imposter = releases.custom_release("imposter", python="3.11", spec="mxnet==1.8.0")
    fake_env(manager, "1.9.1", imposter)
    assert manager.resolve("1.9.1") is releases.RELEASES["1.9.1"]


# -- environments on disk -----------------------------------------------------------------------
def test_listed_environments_sort_like_releases_then_custom_names(manager):
    for name in ("rc-build", "1.10.0", "2.0.0b1", "alpha", "1.9.1", "0.11.0", "1.0.0.post4"):
        fake_env(manager, name, releases.custom_release("x" + name, python="3.11", spec="mxnet==1.9.1"))
    (manager.home.envs / ".tmp-build").mkdir()  # hidden: not an environment
    (manager.home.envs / "notes.txt").write_text("a file, not an environment")
    assert [e.name for e in manager.list()] == [
        "0.11.0",
        "1.0.0.post4",
        "1.9.1",
        "1.10.0",
        "2.0.0b1",
        "alpha",
        "rc-build",
    ]


def test_an_environment_is_ready_broken_or_incomplete(manager):
    r = releases.get("1.9.1")
    fake_env(manager, "1.9.1", r)
    fake_env(manager, "1.5.1", releases.get("1.5.1"), python=False)
    fake_env(manager, "1.4.1")
    states = {e.name: (e.state, e.release.name if e.release else None) for e in manager.list()}
    assert states == {"1.4.1": ("incomplete", None), "1.5.1": ("broken", "1.5.1"), "1.9.1": ("ready", "1.9.1")}
    assert manager.ready_env("1.9.1").python == manager.home.env_dir("1.9.1") / "bin" / "python"


def test_an_empty_home_lists_nothing(manager):
    assert manager.list() == []


# -- release order ------------------------------------------------------------------------------
def test_sort_key_puts_table_releases_in_release_order_then_custom_names_alphabetically():
    names = ["rc-build", "2.0.0b1", "1.10.0", "local-1.6", "1.9.1", "1.9.1rc1", "2.0.0a0", "0.11.0", "1.0.0.post4"]
    assert sorted(names, key=versions.sort_key) == [
        "0.11.0",
        "1.0.0.post4",
        "1.9.1rc1",
        "1.9.1",
        "1.10.0",
        "2.0.0a0",
        "2.0.0b1",
        "local-1.6",
        "rc-build",
    ]
    assert sorted(names, key=versions.sort_key, reverse=True)[:3] == ["rc-build", "local-1.6", "2.0.0b1"]


def test_sort_key_values():
    assert versions.sort_key("1.9.1") == (0, ((1, 9, 1), (3, 0), (0, 0)), "1.9.1")
    assert versions.sort_key("1.0.0.post4") == (0, ((1, 0, 0), (3, 0), (1, 4)), "1.0.0.post4")
    assert versions.sort_key("2.0.0b1") == (0, ((2, 0, 0), (1, 1), (0, 0)), "2.0.0b1")
    assert versions.sort_key("rc-build") == (1, ((), (), (0, 0)), "rc-build")


@pytest.mark.parametrize(
    "saved,loaded,expected",
    [
        ("1.0.0.post4", "1.9.1", "backward"),
        ("1.9.1", "1.0.0.post4", "forward"),
        ("1.9.1", "1.9.1", "same"),
        ("1.9.1", "2.0.0b1", "backward"),
        ("2.0.0a0", "2.0.0b1", "backward"),
        ("2.0.0b1", "2.0.0a0", "forward"),
        ("1.7.0", "1.7.0.post2", "backward"),
        ("1.10.0", "1.9.1", "forward"),  # numbers, not text
        ("0.11.0", "1.0.0.post4", "backward"),
    ],
)
def test_direction_follows_release_order(saved, loaded, expected):
    assert versions.direction(saved, loaded) == expected


def test_direction_of_a_custom_name_is_unknown():
    assert versions.direction("rc-build", "1.9.1") == "unknown"
    assert versions.direction("1.9.1", "rc-build") == "unknown"
