"""Transforms split off (kit.kernel.saving.split_front): the end-to-end model's network alone, on eager transforms.

Needs mxnet: runs inside the environments. Where the running release cannot build the
end-to-end model (0.11, 1.0: no gluon transforms) the artifact tests return early.
"""

import json
import os
import shutil
import tempfile

import numpy as np

from kit.common import artifacts, cases, verdicts
from kit.kernel.models import zoo
from kit.kernel.mx import mxapi
from kit.kernel.mx.training import Trained
from kit.kernel.saving import adapters, split_front


def _running():
    import mxnet as mx

    return mx.__version__


def _ops(sym):
    return [n["op"] for n in json.loads(sym.tojson())["nodes"]]


def _e2e_artifact(api, folder, variant=None):
    """An ``e2e`` artifact of ``api`` in ``folder`` as ``train_run._save_one`` writes it, untrained weights.

    Returns ``(spec, release, manifest, adapter, reference, net)``, or None where this release cannot.
    """
    import mxnet as mx

    release = _running()
    spec = zoo.get("e2e")
    adapter = adapters.ADAPTERS[api]
    if not spec.supported(release, variant)[0] or not adapter.supports(release, spec)[0]:
        return None
    mxapi.prepare_kernel()
    mx.random.seed(0)
    net = spec.build(release, variant)
    net.initialize(spec.initializer(release), mx.cpu())
    net.hybridize()
    variant = variant or spec.variant(release)
    single = not variant.get("batched", True)
    input_specs = spec.input_specs(release)
    if single and input_specs[0].kind != "pixels_single":  # the single-image variant in a batched release
        input_specs = [zoo.InputSpec("data", (zoo.E2E_NET_SIZE, zoo.E2E_NET_SIZE, 3), "uint8", "pixels_single")]
    size = input_specs[0].shape[0]
    x = np.random.RandomState(1).randint(0, 256, size=(4, size, size, 3)).astype(np.uint8)
    trained = Trained(spec, release, net=net)
    ref_cases = cases.reference_cases(input_specs, {"data": x})
    for inputs in ref_cases.values():  # the cached graph export needs
        mxapi.to_numpy(net(mxapi.array(inputs["data"])))
    load_info = adapter.save(trained, folder)
    manifest = {
        "status": "saved",
        "model": spec.name,
        "api": api,
        "inputs": [i.to_dict() for i in input_specs],
        "load": dict((k, v) for k, v in load_info.items() if k != "files"),
        "variant": variant,
    }
    predictor = adapter.load(spec, release, folder, manifest)
    outputs = dict((c, predictor(inputs)) for c, inputs in ref_cases.items())
    path = os.path.join(folder, artifacts.REFERENCE)
    artifacts.save_reference(path, ref_cases, outputs, outputs)
    return spec, release, manifest, adapter, artifacts.load_reference(path), net


def _with_artifact(api, check, variant=None):
    folder = tempfile.mkdtemp(prefix="mxcompat-split-")
    try:
        made = _e2e_artifact(api, folder, variant)
        if made is not None:
            check(folder, *made)
        return made is not None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_cut_network_on_a_hand_built_graph():
    """Every release: data -> expand_dims -> FullyConnected; the cut leaves the FC on a new variable."""
    import mxnet as mx

    x = mx.sym.Variable("data")
    x = mx.sym.expand_dims(x, axis=0, name="batch_axis")
    sym = mx.sym.FullyConnected(x, num_hidden=2, name="fc")
    network, name, cut = split_front.cut_network(sym)
    assert (name, cut) == ("transformed_data", "batch_axis")
    assert network.list_arguments() == ["transformed_data", "fc_weight", "fc_bias"]
    assert _ops(network) == ["null", "null", "null", "FullyConnected"]
    assert split_front.front_ops(sym) == ["expand_dims"]


def test_cut_graph_keeps_old_formats_and_reindexes():
    """1.1-style JSON ("attr", no node_row_ptr needed); an unused node and the raw input drop out."""
    graph = {
        "nodes": [
            {"op": "null", "name": "data", "inputs": []},
            {"op": "_image_to_tensor", "name": "tt", "inputs": [[0, 0, 0]]},
            {"op": "_image_normalize", "name": "norm", "attr": {"mean": "(0.5,)"}, "inputs": [[1, 0, 0]]},
            {"op": "null", "name": "unused", "inputs": []},
            {"op": "null", "name": "w", "inputs": []},
            {"op": "FullyConnected", "name": "fc", "attr": {"num_hidden": "2"}, "inputs": [[2, 0, 0], [4, 0, 0]]},
        ],
        "arg_nodes": [0, 3, 4],
        "node_row_ptr": [0, 1, 2, 3, 4, 5, 6],
        "heads": [[5, 0, 0]],
        "attrs": {"mxnet_version": ["int", 10100]},
    }
    out, name, cut, ops = split_front.cut_graph(graph)
    assert (name, cut, ops) == ("transformed_data", "norm", ["_image_to_tensor", "_image_normalize"])
    assert [n["name"] for n in out["nodes"]] == ["transformed_data", "w", "fc"]
    assert out["nodes"][2]["inputs"] == [[0, 0, 0], [1, 0, 0]] and out["nodes"][2]["attr"] == {"num_hidden": "2"}
    assert out["arg_nodes"] == [0, 1] and out["heads"] == [[2, 0, 0]]
    assert "node_row_ptr" not in out and out["attrs"] == graph["attrs"]
    assert len(graph["nodes"]) == 6  # the input is not changed


def test_cut_graph_refuses_what_it_cannot_split():
    def refused(graph):
        try:
            split_front.cut_graph(graph)
        except ValueError as e:
            return str(e)
        return None

    data = {"op": "null", "name": "data", "inputs": []}
    plain = {"nodes": [data, {"op": "relu", "name": "r", "inputs": [[0, 0, 0]]}], "heads": [[1, 0, 0]]}
    assert "no fused transform" in refused(plain)
    skip = {
        "nodes": [
            data,
            {"op": "_image_to_tensor", "name": "tt", "inputs": [[0, 0, 0]]},
            {"op": "elemwise_add", "name": "add", "inputs": [[1, 0, 0], [0, 0, 0]]},
        ],
        "heads": [[2, 0, 0]],
    }
    assert "reads the raw input data" in refused(skip)
    two = {
        "nodes": [
            data,
            {"op": "_image_to_tensor", "name": "a", "inputs": [[0, 0, 0]]},
            {"op": "_image_to_tensor", "name": "b", "inputs": [[0, 0, 0]]},
            {"op": "elemwise_add", "name": "add", "inputs": [[1, 0, 0], [2, 0, 0]]},
        ],
        "heads": [[3, 0, 0]],
    }
    assert "end in 2 nodes" in refused(two)


def test_only_end_to_end_models_and_releases_that_build_them():
    mlp = split_front.check_network_only(zoo.get("mlp"), _running(), None, {}, adapters.ADAPTERS["export"], {})
    assert mlp is None
    e2e = zoo.get("e2e")
    old = split_front.check_network_only(e2e, "1.0.0.post4", None, {}, adapters.ADAPTERS["export"], {})
    assert old["verdict"] == verdicts.UNSUPPORTED and "1.1" in old["reason"]
    batched = split_front.check_network_only(
        e2e, "1.4.1", None, {"variant": {"batched": True}}, adapters.ADAPTERS["export"], {}
    )
    assert batched["verdict"] == verdicts.UNSUPPORTED and "1.5" in batched["reason"], batched


def _same_release_is_identical(folder, spec, release, manifest, adapter, reference, net):
    sym = adapter.load_graph(spec, release, folder, manifest)[0]
    network, name, cut = split_front.cut_network(sym)
    assert name == "transformed_data"
    assert sorted(network.list_arguments()) == sorted([name] + list(net.collect_params().keys()))
    assert not net.front.collect_params().keys()  # the transforms have no parameters
    assert not set(_ops(network)) & set(split_front.TRANSFORM_OPS), _ops(network)
    expected = ["_image_to_tensor", "_image_normalize"]
    expected = ["_image_resize"] + expected if manifest["variant"]["batched"] else expected + ["expand_dims"]
    assert split_front.front_ops(sym) == expected
    result = split_front.check_network_only(spec, release, folder, manifest, adapter, reference)
    assert result["verdict"] == verdicts.IDENTICAL, (release, manifest["api"], result["verdict"], result["reason"])
    assert result["cut_after"] == cut and result["front_ops"] == expected
    module = manifest["api"] == "module_checkpoint" and not mxapi.gluon2()
    assert result["network_path"] == ("module" if module else "symbol_block"), result["network_path"]
    assert sorted(result["cases"]) == sorted(reference) and result["summary"]["max_abs"] == 0.0
    assert result["transforms"]["verdict"] in verdicts.PASSING, result["transforms"]
    json.dumps(result)  # a record's field


def test_e2e_network_alone_is_identical_in_the_saving_release():
    spec, running = zoo.get("e2e"), _running()
    apis = ("export", "module_checkpoint")
    done = [api for api in apis if _with_artifact(api, _same_release_is_identical)]
    able = [a for a in apis if spec.supported(running)[0] and adapters.ADAPTERS[a].supports(running, spec)[0]]
    assert done == able, (done, able)
    assert done or not spec.supported(running)[0]


def test_the_single_image_variant_too():
    """A release with batched transforms also loads 1.1-1.4's single-image artifacts."""
    single = {"batched": False, "transforms": ["ToTensor", "Normalize", "AddBatchAxis"]}
    _with_artifact("export", _same_release_is_identical, variant=single)


def _wrong_front(folder, spec, release, manifest, adapter, reference, net):
    from kit.kernel.mx.mxapi import children

    def without_normalize(spec_, release_, variant=None):
        front = split_front.eager_front.original(spec_, release_, variant)
        kept = [b for b in children(front) if type(b).__name__ != "Normalize"]
        assert len(kept) == len(children(front)) - 1
        from mxnet.gluon import nn

        return mxapi.add(nn.Sequential(), *kept)

    original = split_front.eager_front
    without_normalize.original = original
    split_front.eager_front = without_normalize
    try:
        result = split_front.check_network_only(spec, release, folder, manifest, adapter, reference)
    finally:
        split_front.eager_front = original
    assert result["verdict"] in (verdicts.DRIFT, verdicts.MISMATCH), result["verdict"]
    assert result["transforms"]["verdict"] == verdicts.MISMATCH, result["transforms"]["verdict"]
    # the full graph, fused transforms and all, still gives the reference
    predictor = adapter.load(spec, release, folder, manifest)
    for case in reference:
        for got, exp in zip(predictor(reference[case]["input"]), reference[case]["output"]):
            assert np.array_equal(got, exp), case


def test_a_wrong_eager_front_shows_in_the_network_alone_and_not_in_the_full_graph():
    _with_artifact("export", _wrong_front)


def _failures(folder, spec, release, manifest, adapter, reference, net):
    def broken(spec_, release_, variant=None):
        raise RuntimeError("no transforms today")

    original = split_front.eager_front
    split_front.eager_front = broken
    try:
        result = split_front.check_network_only(spec, release, folder, manifest, adapter, reference)
    finally:
        split_front.eager_front = original
    assert result["verdict"] == verdicts.LOAD_ERROR and "no transforms today" in result["reason"], result

    class Failing(object):
        def __init__(self, block):
            self.block = block

        def __call__(self, x):
            raise RuntimeError("cannot run")

    split_front.eager_front = lambda spec_, release_, variant=None: Failing(original(spec_, release_, variant))
    try:
        result = split_front.check_network_only(spec, release, folder, manifest, adapter, reference)
    finally:
        split_front.eager_front = original
    assert result["verdict"] == verdicts.INFER_ERROR and "eager transforms" in result["reason"], result
    assert result["error"] == "cannot run" and result["cut_after"]
    os.remove(os.path.join(folder, manifest["load"]["symbol_file"]))
    result = split_front.check_network_only(spec, release, folder, manifest, adapter, reference)
    assert result["verdict"] == verdicts.LOAD_ERROR and result["error"], result


def test_failures_become_verdicts():
    _with_artifact("export", _failures)
