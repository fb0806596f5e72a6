"""An artifact remedied into the loading release's native form, and the record that proves it loads there.

``python -m kit.kernel.entry.convert REQUEST.json`` runs in the loading release's environment. It applies a
remedy (kit.kernel.remedies.attempts) to a copy of the artifact, writes the result as an artifact of its own
(edited graph and files; or, for a parameter mapping, the model's parameters saved with
``save_parameters`` of this release), then reloads that artifact through the release's ordinary load
path, with no remedy, on the saving release's reference cases: ``record.json`` beside it says whether
it loads natively and how close it is.
"""

import os
import shutil
import sys

from kit.common import artifacts, verdicts
from kit.common.capabilities import C_PREDICT_API
from kit.common.errors import KitError
from kit.common.main_protocol import serve
from kit.kernel.models import zoo
from kit.kernel.mx import mxapi
from kit.kernel.remedies import attempts
from kit.kernel.remedies.base import LOADING_MODE, by_name
from kit.kernel.saving import adapters

RECORD = "record.json"


def _reference_measure(spec, model, reference, overrides):
    from kit.kernel.saving.measure import measure

    return lambda predictor: measure(spec, model, reference, predictor, overrides)


def convert(release, saved, model, api, folder, out, remedy, error_text, overrides=None, check_api=None):
    """Write the artifact ``folder`` remedied by ``remedy`` into ``out``; reload it natively (through
    ``check_api``, default the artifact's own API); the record."""
    mxapi.prepare_kernel()
    manifest = artifacts.verified_manifest(folder, "nothing was converted")
    reference = artifacts.load_reference(os.path.join(folder, artifacts.REFERENCE))
    spec = zoo.MODELS.get(model)
    adapter = adapters.ADAPTERS[api]
    first = remedy.split("+")[0]
    measure = _reference_measure(spec, model, reference, overrides)
    with attempts.remedied(first, spec, adapter, release, saved, api, folder, manifest, error_text, measure) as (
        attempt,
        work,
        mode,
    ):
        if attempt["verdict"] not in verdicts.PASSING:
            raise KitError(
                "remedy %s does not fix %s/%s/%s in MXNet %s here: %s"
                % (first, model, api, saved, release, attempt.get("reason") or attempt["verdict"])
            )
        chain = [by_name(n) for n in attempt["remedies"]]
        if all(r.changes == LOADING_MODE for r in chain):
            raise KitError(
                "%s changes how the artifact is loaded, not its files: there is nothing to convert" % attempt["name"],
                hint="load it with this code instead:\n" + attempt["user_code"],
            )
        os.makedirs(out)  # a fresh folder the host chose (kit.debug.convert): never one that holds anything
        new_api, load, files = _write(work, api, out)
        for name in (artifacts.REFERENCE, (manifest.get("architecture") or {}).get("file")):
            if name and os.path.isfile(os.path.join(folder, name)):
                shutil.copy(os.path.join(folder, name), os.path.join(out, name))
                files.append(name)
        converted = dict(manifest)
        converted.update(
            api=new_api,
            load=load,
            files=artifacts.hash_files(out, files),
            converted={
                "from": {"saved_with": saved, "model": model, "api": api, "artifact": folder},
                "for_release": release,
                "remedy": attempt["name"],
                "changed": attempt["changed"],
                "verdict_under_remedy": attempt["verdict"],
                "user_code": attempt["user_code"],
            },
        )
        artifacts.write_json_atomic(os.path.join(out, artifacts.MANIFEST), converted)
    from kit.kernel.entry.reload_run import check_artifact

    rec = check_artifact(release, saved, model, check_api if check_api == C_PREDICT_API else new_api, out, overrides)
    rec["converted"] = converted["converted"]
    rec["native"] = rec["verdict"] in verdicts.PASSING and rec.get("remedy") is None
    artifacts.write_json_atomic(os.path.join(out, RECORD), rec)
    return rec


def _write(work, api, out):
    """Write the remedied files into ``out``: ``(api, load info, file names)``."""
    net = getattr(work, "net", None)
    if net is not None:  # a parameter mapping: the model of this release holds the weights; save them natively
        net.save_parameters(os.path.join(out, adapters.PREFIX + ".params"))
        return "save_parameters", {"param_file": adapters.PREFIX + ".params"}, [adapters.PREFIX + ".params"]
    names = [n for n in work.files() if n]
    for name in names:
        shutil.copy(work.path(name), os.path.join(out, name))
    return api, work.manifest["load"], names


def from_request(req):
    """``python -m kit.kernel.entry.convert REQUEST.json``: answers the record (kit.common.main_protocol); exit 3
    with ``{"error", "hint"}`` when the remedy cannot be turned into files."""
    return convert(
        req["release"],
        req["saved"],
        req["model"],
        req["api"],
        req["folder"],
        req["out"],
        req["remedy"],
        req.get("error") or "",
        req.get("tolerance"),
        req.get("check_api"),
    )


if __name__ == "__main__":
    sys.exit(serve(from_request))
