from kit.common.capabilities import APIS, apis_of, has_api, has_feature, load_path


def test_api_availability_matches_measured_releases():
    assert apis_of("1.0.0.post4") == ("export", "save_params", "module_checkpoint")
    assert apis_of("1.1.0") == ("export", "save_params", "module_checkpoint")
    assert apis_of("1.2.1") == APIS
    assert apis_of("1.9.1") == APIS
    assert apis_of("2.0.0a0") == ("export", "save_parameters")
    assert apis_of("2.0.0b1") == ("export", "save_parameters")


def test_removed_apis_say_so():
    ok, reason = has_api("2.0.0b1", "module_checkpoint")
    assert not ok and reason == "the Module API (mx.mod) was removed in MXNet 2.0"
    ok, reason = has_api("2.0.0a0", "save_params")
    assert not ok and "removed in MXNet 2.0" in reason
    assert has_feature("1.9.1", "module_api") == (True, None)
    assert not has_feature("2.0.0b1", "module_api")[0]
    assert has_feature("2.0.0b1", "gluon2")[0] and not has_feature("1.9.1", "gluon2")[0]


def test_load_paths_by_release():
    assert load_path("1.1.0", "export") == ("SymbolBlock(sym.load) + load_params", None)
    assert load_path("1.9.1", "export") == ("SymbolBlock.imports", None)
    assert load_path("1.9.1", "module_checkpoint") == ("mx.model.load_checkpoint + Module", None)
    # the 2.0 migration paths: Module checkpoints through SymbolBlock.imports, parameters into the port
    assert load_path("2.0.0b1", "module_checkpoint") == ("SymbolBlock.imports", None)
    assert load_path("2.0.0a0", "checkpoint") == ("SymbolBlock + load_dict", None)  # a foreign checkpoint
    assert load_path("2.0.0b1", "save_parameters") == ("Gluon 2.0 port + load_parameters", None)
    path, reason = load_path("2.0.0b1", "save_params")
    assert path is None and "removed in MXNet 2.0" in reason and "workaround" in reason
    path, reason = load_path("1.1.0", "save_parameters")
    assert path is None and "1.2" in reason


def test_missing_api_says_why():
    ok, reason = has_api("1.1.0", "save_parameters")
    assert not ok and "1.2" in reason
    assert has_api("1.2.1", "save_parameters") == (True, None)


def test_features():
    assert not has_feature("1.0.0.post4", "gluon_transforms")[0]
    assert has_feature("1.1.0", "gluon_transforms")[0]
    assert not has_feature("1.1.0", "symbolblock_imports")[0]
    assert has_feature("1.2.1", "symbolblock_imports")[0]
    assert not has_feature("1.4.1", "runtime_features")[0]
    assert has_feature("1.5.1", "runtime_features")[0]


def test_unknown_api_is_an_error():
    try:
        has_api("1.9.1", "pickle")
    except KeyError as e:
        assert "export" in str(e)
    else:
        raise AssertionError("no error for an unknown API")


def test_a_model_can_be_pinned_to_an_architecture():
    from kit.common.capabilities import expand_models, pins, split_pin

    assert split_pin("mobilenet_v2@548903f9") == ("mobilenet_v2", "548903f9")
    assert split_pin("lenet") == ("lenet", None)
    assert expand_models(["lenet@5bc5", "mlp"]) == (["lenet@5bc5", "mlp"], [])
    assert expand_models(["nope@1234"]) == ([], ["nope@1234"])
    assert pins(["lenet@5bc5", "mlp"]) == {"lenet": "5bc5"}
