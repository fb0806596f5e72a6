"""Check your own model: a checkpoint the kit did not train, referenced in one release, reloaded in others."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from kit.common import artifacts, run_layout
from kit.common.capabilities import EXIT_ARTIFACTS, MODEL_NAMES
from kit.common.capabilities import FOREIGN_API as API
from kit.common.errors import UsageError
from kit.common.names import SAFE_NAME
from kit.envs.manager import EnvManager
from kit.home import KitHome
from kit.results import leaving

DTYPES = ("float32", "float64", "float16", "uint8", "int32", "int64")


def parse_input(text: str) -> dict:
    """``NAME:SHAPE[:DTYPE]`` (shape as 1,3,224,224 or 1x3x224x224) to ``{"name", "shape", "dtype", "kind"}``."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[0]:
        raise UsageError(f"--input {text!r} is not NAME:SHAPE[:DTYPE]", hint="e.g. --input data:1,3,224,224:float32")
    try:
        shape = [int(d) for d in re.split(r"[,x]", parts[1]) if d]
    except ValueError:
        raise UsageError(f"--input {text!r}: the shape must be integers, e.g. 1,3,224,224") from None
    if not shape or any(d <= 0 for d in shape):
        raise UsageError(f"--input {text!r}: every dimension must be positive (the first one is the batch)")
    dtype = parts[2] if len(parts) == 3 else "float32"
    if dtype not in DTYPES:
        raise UsageError(f"--input {text!r}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    return {"name": parts[0], "shape": shape, "dtype": dtype, "kind": "float" if dtype.startswith("float") else "int"}


def parse_preprocess(text: str | None) -> dict:
    """``resize=224,224;mean=0.485,0.456,0.406;std=0.229,0.224,0.225;layout=NCHW``."""
    out: dict = {}
    for item in filter(None, (text or "").split(";")):
        key, _, value = item.partition("=")
        key = key.strip()
        if key in ("resize", "mean", "std"):
            try:
                out[key] = [float(v) if key != "resize" else int(v) for v in value.split(",")]
            except ValueError:
                raise UsageError(f"--preprocess {key}= takes comma-separated numbers") from None
        elif key in ("layout", "dtype"):
            out[key] = value.strip()
        else:
            raise UsageError(f"--preprocess: unknown key {key!r}", hint="use resize, mean, std, layout, dtype")
    return out


def checkpoint_files(prefix: str, epoch: int) -> tuple[Path, Path]:
    sym, params = Path(f"{prefix}-symbol.json"), Path(f"{prefix}-{epoch:04d}.params")
    missing = [str(p) for p in (sym, params) if not p.is_file()]
    if missing:
        raise UsageError(
            f"checkpoint files not found: {', '.join(missing)}",
            hint="PREFIX is the path without -symbol.json; --epoch picks PREFIX-NNNN.params",
        )
    return sym, params


def model_name(prefix: str, name: str | None) -> str:
    """The name the checkpoint is checked under: ``--name``, else the prefix's last part (a usage error if the
    store could not hold it or a zoo model has it)."""
    name = name or Path(prefix).name
    if not SAFE_NAME.match(name) or name in MODEL_NAMES:
        raise UsageError(
            f"model name {name!r} is not usable",
            hint="pass --name with letters, digits, '.', '_', '+', '=', '-' that is not a zoo model's name",
        )
    return name


def check_inputs(inputs: list[dict], data: str | None, image: str | None) -> None:
    """Inputs are declared, and the files named for them exist (usage errors, before any work)."""
    if not inputs and not image:
        raise UsageError("declare the model's inputs with --input NAME:SHAPE[:DTYPE] (or give --image)")
    for path in (data, image):
        if path and not Path(path).is_file():
            raise UsageError(f"file not found: {path}")


def prepare(
    prefix: str,
    epoch: int,
    *,
    name: str | None,
    reference: str,
    inputs: list[dict],
    label_names: list[str],
    store: Path,
    home: KitHome,
    data: str | None = None,
    image: str | None = None,
    preprocess: dict | None = None,
    seed: int = 0,
) -> dict:
    """Stage the checkpoint as an artifact of ``reference`` in ``store`` and compute its reference outputs
    in that release's environment. Problems with the inputs are usage errors, raised before any run."""
    sym_file, params_file = checkpoint_files(prefix, epoch)
    name = model_name(prefix, name)
    check_inputs(inputs, data, image)
    env = EnvManager(home).ready_env(reference)
    final = Path(artifacts.artifact_dir(store, reference, name, API))
    staged = Path(artifacts.staging_dir(str(final)))
    try:
        shutil.copyfile(sym_file, staged / "model-symbol.json")
        shutil.copyfile(params_file, staged / "model-0000.params")
        spec = {
            "name": name,
            "inputs": inputs or [{"name": "data", "shape": [1], "dtype": "float32", "kind": "float"}],
            "label_names": label_names,
            "data": str(Path(data).resolve()) if data else None,
            "image": str(Path(image).resolve()) if image else None,
            "preprocess": preprocess or {},
            "seed": seed,
            "source": {"prefix": str(Path(prefix).resolve()), "epoch": epoch},
        }
        env.run_main(
            "kit.kernel.entry.check_model",
            {"release": reference, "folder": str(staged), "spec": spec},
            f"computing the reference in MXNet {reference}",
        )
        archive = Path(artifacts.archive_dir(str(store), reference, name, API))
        artifacts.commit_dir(str(staged), str(final), archive=str(archive))
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return json.loads((final / artifacts.MANIFEST).read_text())


def keep_exit(run_dir: Path, model: str, prefix: str, exit_api: str) -> list[str]:
    """The checkpoint's way out through ``exit_api`` beside it: the file its runtime ran (``PREFIX.onnx``;
    OpenVINO's ``PREFIX.xml``/``.bin``; TorchScript's ``PREFIX.pt``), or the remedied one where only a remedy
    gets there, and ``PREFIX.<exit>.json`` (its record: verdict, max abs, opset, versions); the lines that say
    what was written."""
    suffixes, record_suffix, title = EXIT_ARTIFACTS[exit_api], f".{exit_api}.json", leaving.EXIT_TITLES[exit_api]
    lines = []
    records = Path(run_layout.records_dir(run_dir))
    for path in sorted(records.glob(artifacts.record_name("*", model, exit_api, "*"))):  # every release's
        rec = json.loads(path.read_text())
        target = Path(f"{prefix}{suffixes[0]}")
        record = Path(f"{prefix}{record_suffix}")
        info = rec.get("onnx") or {}
        passed = rec["verdict"] in ("identical", "close")  # a file that runs and gives wrong numbers is not handed on
        source = (info.get("artifact") or info.get("file")) if passed else None
        remedy = rec.get("remedy") or {}
        verdict = rec["verdict"]
        if not source and remedy.get("fixed"):  # only a remedy gets there: keep the newest such file, said so
            remedied = (Path(run_dir) / "onnx" / rec["saved_with"] / model).rglob("*" + suffixes[0])
            newest = max(remedied, key=lambda p: p.stat().st_mtime, default=None)
            source = str(newest) if newest else None
            verdict = f"the export with remedy {remedy['name']}: {remedy['verdict']}"
        if source and Path(source).is_file():
            for suffix in suffixes:  # OpenVINO's weights beside its .xml
                shutil.copyfile(str(Path(source).with_suffix(suffix)), f"{prefix}{suffix}")
            lines.append(f"{target}: {verdict} in {title}" + _how(rec))
        else:
            fix = f"; remedy {remedy['name']}: {remedy['verdict']}" if remedy.get("fixed") else ""
            lines.append(f"no {target}: {rec['verdict']}: {rec.get('reason')}{fix}" + _how(rec))
        artifacts.write_json_atomic(str(record), rec)
        lines.append(f"{record}: the record ({rec['saved_with']} reference, exported by MXNet {rec['loaded_with']})")
    return lines


def _how(rec: dict) -> str:
    info = rec.get("onnx") or {}
    summary = rec.get("summary") or (rec.get("remedy") or {}).get("summary") or {}
    parts = []
    if summary.get("max_abs") is not None:
        parts.append(f"max abs {summary['max_abs']:.2g}")
    if info.get("opset"):  # the export ran (a failed one names only the runtime)
        parts.append(f"opset {info['opset']}, onnx {info.get('onnx')}")
    if leaving.runtime_version(rec):
        parts.append(leaving.runtime_version(rec))
    return f" ({'; '.join(parts)})" if parts else ""
