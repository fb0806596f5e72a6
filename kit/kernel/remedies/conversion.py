"""Remedies of a conversion out of ONNX that fails: what a user leaving MXNet for PyTorch adds to onnx2torch."""

from kit.common.capabilities import GLUON2, TORCH_API
from kit.kernel.remedies.base import EXPORT_SETTING, Remedy, register


@register
class KitTorchConverters(Remedy):
    """onnx2torch 1.5 has no converter for ONNX's LSTM, GRU and ReverseSequence, and its Pad hands torch a tensor
    where torch wants a number (every SwapAxis MXNet exports pads a shape that way). The kit's converters
    (``kit/kernel/exits/torch_converters.py``) rebuild an RNN as ``torch.nn.LSTM``/``GRU`` from the exported
    weights, the gates reordered, reverse sequences by a gather, and give Pad its number."""

    name = "onnx2torch_kit_converters"
    title = (
        "convert with the kit's onnx2torch converters: LSTM/GRU rebuilt as torch.nn.LSTM/GRU (gates reordered "
        "from ONNX's), ReverseSequence, Pad's constant given as a number"
    )
    changes = EXPORT_SETTING
    directions = ("backward", "same", "forward")
    apis = (TORCH_API,)
    loading = ("1.3.0", GLUON2)
    error = r"Converter is not implemented .*operation_type='(LSTM|GRU|ReverseSequence)'|pad\(\): argument 'value'"
    edits_artifact = True  # a setting in the work copy's manifest, which the exit's adapter reads: chains
    user_code = """
import onnx, torch
from onnx2torch import convert
import torch_converters  # the kit's kit/kernel/exits/torch_converters.py, beside this script
torch_converters.make_shapes_traceable()  # a traced Shape stays dynamic: the .pt runs any batch size
torch_converters.use(True)  # LSTM, GRU as torch.nn modules; ReverseSequence; Pad's constant as a number
model = torch_converters.fold_rnn_weights(onnx.load("model.onnx"))  # the RNN weights as stored tensors
module = convert(model).eval()
inputs = {inputs}  # numpy arrays, in the model's input order
traced = torch.jit.trace(module, tuple(torch.from_numpy(x) for x in inputs))
torch.jit.save(traced, "model.pt")  # torch.jit.load("model.pt") needs neither onnx2torch nor the kit
"""

    def apply(self, work, error_text):
        work.manifest["onnx2torch_kit_converters"] = True
        return "converted with the kit's onnx2torch converters (LSTM/GRU as torch.nn modules, ReverseSequence, Pad)"

    def code(self, work):
        inputs = ", ".join(i["name"] for i in work.manifest.get("inputs") or [])
        return self.user_code.strip().format(inputs="[%s]" % inputs)
