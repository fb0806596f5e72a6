"""`mxcompat check-model`: your own checkpoint, checked like the zoo's.

(MXNet's own checker's models come in through `mxcompat store import-mbcc`, in the store group.)
"""

from __future__ import annotations

from pathlib import Path

import click

from kit.cli.options import (
    csv_list,
    handle_errors,
    matrix_options,
    store_option,
)
from kit.cli.run import report_outcome
from kit.common import artifacts
from kit.common.capabilities import FOREIGN_API
from kit.common.errors import UsageError
from kit.envs import onnx_path
from kit.envs.limits import Limits
from kit.envs.manager import EnvManager
from kit.envs.release_selection import HELP as SELECTION_HELP
from kit.home import KitHome


@click.command("check-model", short_help="Check your own checkpoint on the releases you upgrade to.")
@click.argument("prefix")
@click.option("--epoch", default=0, show_default=True, type=click.IntRange(0), help="Picks PREFIX-NNNN.params.")
@click.option(
    "--input",
    "inputs",
    multiple=True,
    metavar="NAME:SHAPE[:DTYPE]",
    help="A graph input and its shape with the batch first, e.g. data:1,3,224,224 (repeatable).",
)
@click.option("--label-names", metavar="N,...", help="Label inputs of loss heads such as SoftmaxOutput.")
@click.option(
    "--saved-with",
    "saved_with",
    required=True,
    metavar="RELEASE",
    help="The release whose outputs are the reference.",
)
@click.option(
    "--load",
    "load",
    metavar="V,...",
    help="Releases to reload the checkpoint in: " + SELECTION_HELP + ".",
)
@click.option(
    "--to",
    "to",
    metavar="EXIT,...",
    help="Leave MXNet: export the checkpoint to ONNX (with 1.9.1's exporter; onnx-RELEASE: RELEASE's) and check "
    "it in each exit: onnx (ONNX Runtime: writes PREFIX.onnx), openvino (OpenVINO's IR: PREFIX.xml/.bin), torch "
    "(TorchScript: PREFIX.pt), each with its record PREFIX.EXIT.json, beside the checkpoint.",
)
@click.option(
    "--preflight",
    "preflight_only",
    is_flag=True,
    help="With --to: list the graph's operators and what will block or give wrong numbers in each exit (and the "
    "remedy for each), then stop: nothing is exported.",
)
@click.option("--name", metavar="NAME", help="Model name in the store and the records (default: PREFIX's name).")
@click.option("--data", metavar="FILE", help="Inputs from a .npy (first input) or .npz (by name) instead of generated.")
@click.option("--image", metavar="FILE", help="An image file as the input, decoded by MXNet, see --preprocess.")
@click.option(
    "--preprocess",
    metavar="SPEC",
    help="For --image: 'resize=224,224;mean=0.485,0.456,0.406;std=0.229,0.224,0.225;layout=NCHW'.",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the generated inputs.")
@store_option(help="Local store to keep the checkpoint's reference in (default: the kit home's store/).")
@click.option("--forward", is_flag=True, help="Also reload in releases older than the reference.")
@matrix_options
@handle_errors
def check_model_cmd(
    prefix,
    epoch,
    inputs,
    label_names,
    saved_with,
    load,
    name,
    data,
    image,
    preprocess,
    seed,
    store,
    to,
    run_id,
    runs_dir,
    jobs,
    tolerance,
    allow_list,
    step_timeout,
    cell_timeout,
    kernel_memory,
    forward,
    preflight_only,
):
    """Will this checkpoint give the same outputs on the releases I upgrade to?

    PREFIX-symbol.json + PREFIX-NNNN.params (a Module checkpoint or a Gluon export, any
    release, legacy formats included) gets reference outputs in --saved-with on
    deterministic inputs (or --data / --image), then the same run as `mxcompat run`:
    records, summary, bundles, exit codes.

    \b
      mxcompat check-model ./resnet --epoch 12 --input data:1,3,224,224 \\
          --label-names softmax_label --saved-with 1.4.1 --load 1.6.0,1.9.1
      mxcompat check-model ./resnet --input data:1,3,224,224 --saved-with 1.4.1 --to onnx
    """
    from kit.envs import release_selection as selection
    from kit.foreign import check_model
    from kit.orchestrate import matrix, request
    from kit.store import open_store

    home = KitHome()
    parsed = [check_model.parse_input(i) for i in inputs]
    if not load and not to:
        raise UsageError("name the releases to reload in (--load) or where the model goes (--to onnx), or both")
    if preflight_only and not to:
        raise UsageError("--preflight checks the exits: name them with --to (onnx, openvino, torch)")
    exits = csv_list(to)
    wrong = [e for e in exits if not onnx_path.exit_of(e)]
    if wrong:
        raise UsageError(
            f"--to {', '.join(wrong)}: not a destination", hint="onnx, openvino, torch or onnx-RELEASE, e.g. --to onnx"
        )
    loads = selection.expand(load, EnvManager(home), flag="--load") + exits
    req = request.RunRequest(
        save=[saved_with],
        load=loads,
        models=[],
        apis=[check_model.API],
        forward=forward,
        tolerance=request.parse_tolerance(tolerance),
        allow_list=allow_list,
        store=store,
        foreign=True,
        limits=Limits.from_options(step_timeout, cell_timeout, kernel_memory).to_dict(),
    )
    request.validate(req.normalized(), EnvManager(home))
    if store and open_store(store).remote:
        raise UsageError(
            "check-model keeps its reference in a local store; push it afterwards with mxcompat store push"
        )

    def reference_first() -> None:
        """Stage the checkpoint and compute its reference (while the run takes or starts its kernels); the
        pre-flight."""
        manifest = check_model.prepare(
            prefix,
            epoch,
            name=name,
            reference=saved_with,
            inputs=parsed,
            label_names=csv_list(label_names),
            store=open_store(store, home=home).root,
            home=home,
            data=data,
            image=image,
            preprocess=check_model.parse_preprocess(preprocess),
            seed=seed,
        )
        recorded = manifest.get("symbol_mxnet_version") or "unrecorded (a legacy symbol file)"
        click.echo(
            f"{manifest['model']}: symbol saved by MXNet {recorded}; reference computed in {saved_with} "
            f"({len(manifest['reference']['cases']['batch']['outputs'])} output(s), "
            f"param_version {manifest['param_version']})"
        )
        if exits:  # before anything is exported: what will block, what would give wrong numbers, which remedy
            from kit.foreign import preflight

            staged = artifacts.artifact_dir(
                str(open_store(store, home=home).root), saved_with, manifest["model"], FOREIGN_API
            )
            for found in preflight.run(home, Path(staged), exits):
                for line in preflight.lines(found):
                    click.echo(line)

    check_model.checkpoint_files(prefix, epoch)  # usage errors before the run starts anything
    req.models = [check_model.model_name(prefix, name)]
    check_model.check_inputs(parsed, data, image)
    if preflight_only:
        reference_first()
        return
    outcome = matrix.run_matrix(
        req,
        run_id=run_id,
        jobs=jobs,
        runs_dir=runs_dir,
        on_event=click.echo,
        home=home,
        progress_line=None,
        meanwhile=reference_first,
    )
    for exit_api in dict.fromkeys(onnx_path.exit_of(e) for e in exits):
        for line in check_model.keep_exit(outcome.run_dir, req.models[0], prefix, exit_api):
            click.echo(line)
    report_outcome(outcome)
