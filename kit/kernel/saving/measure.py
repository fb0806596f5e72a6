"""A loaded model measured: its predictor run on the recorded reference cases and compared with the saving
release's outputs at the run's tolerance (what reload, a remedy, convert and investigate all measure with)."""

import traceback

from kit.common import metrics, tolerance, verdicts


class InferenceFailed(Exception):
    """Inference raised on one reference case: the case, the exception and its traceback."""

    verdict = verdicts.INFER_ERROR

    def __init__(self, case, cause, tb):
        Exception.__init__(self, "case %r: %s: %s" % (case, type(cause).__name__, cause))
        self.case, self.cause, self.tb = case, cause, tb


def measure(spec, model, reference, predictor, overrides=None):
    """Run ``predictor`` on every reference case and compare: ``{"cases", "verdict", "reason", "summary"}``.

    Raises :class:`InferenceFailed` when a case raises.
    """
    outputs = {}
    for case in sorted(reference):
        try:
            outputs[case] = predictor(reference[case]["input"])
        except Exception as e:
            raise InferenceFailed(case, e, traceback.format_exc())
    cases, all_metrics = {}, []
    own = getattr(spec, "tolerance", None)
    for case in sorted(reference):
        expected, got = reference[case]["output"], outputs[case]
        if len(got) != len(expected):
            reason = "case %r: %d outputs, reference has %d" % (case, len(got), len(expected))
            return {"cases": {}, "verdict": verdicts.MISMATCH, "reason": reason, "summary": None}
        cases[case] = [
            metrics.compare(actual, exp, tolerance.resolve(exp.dtype, model, overrides, own))
            for actual, exp in zip(got, expected)
        ]
        all_metrics.extend(cases[case])
    verdict, reason = verdicts.from_metrics(all_metrics)
    return {"cases": cases, "verdict": verdict, "reason": reason, "summary": metrics.summarize(all_metrics)}
