"""Old notebook parameter names keep working, moved to the new ones with a warning."""

import warnings

from kit.common import parameters


def test_old_names_move_to_the_new_ones_with_a_warning():
    namespace = {
        "release": "1.9.1",
        "mxnet_version": "1.4.1",
        "out_dir": "/tmp/store",
        "retrain": False,
        "overwrite": True,
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        given = parameters.accept_renamed(namespace, "train")
    assert sorted(given) == ["mxnet_version", "out_dir", "overwrite"]
    assert namespace["release"] == "1.4.1" and namespace["store"] == "/tmp/store" and namespace["retrain"] is True
    assert "mxnet_version" not in namespace and len(caught) == 3
    assert all(issubclass(w.category, DeprecationWarning) for w in caught)


def test_out_dir_means_the_run_folder_in_reload():
    namespace = {"out_dir": "runs/x", "saved_versions": ["1.0.0.post4"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parameters.accept_renamed(namespace, "reload")
    assert namespace == {"run_dir": "runs/x", "saved_with": ["1.0.0.post4"]}


def test_new_names_alone_are_left_as_they_are():
    namespace = {"release": "1.9.1", "store": "s"}
    assert parameters.accept_renamed(namespace, "train") == [] and namespace == {"release": "1.9.1", "store": "s"}
