"""The one colour of each verdict: the summary's heatmaps and the notebooks' plots draw with it."""

from kit.common.verdicts import CLOSE, CORRUPT, DRIFT, IDENTICAL, INFER_ERROR, LOAD_ERROR, MISMATCH, UNSUPPORTED

#: every verdict's colour, green (it loads as saved) through red (it does not load) to purple (corrupt)
VERDICT_COLOURS = {
    IDENTICAL: "#1a9850",
    CLOSE: "#91cf60",
    UNSUPPORTED: "#d9d9d9",
    DRIFT: "#fdae61",
    MISMATCH: "#f46d43",
    INFER_ERROR: "#d73027",
    LOAD_ERROR: "#a50026",
    CORRUPT: "#762a83",
}
#: what is not a verdict (a name the palette does not know)
OTHER = "#7f7f7f"
#: the verdicts dark enough that their text is white
DARK = (INFER_ERROR, LOAD_ERROR, CORRUPT)


def colour(verdict):
    """``verdict``'s colour; :data:`OTHER` for anything else."""
    return VERDICT_COLOURS.get(verdict, OTHER)


def text_colour(verdict):
    """The colour of text drawn on ``verdict``'s colour."""
    return "white" if verdict in DARK else "black"
