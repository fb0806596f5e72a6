"""What a zoo model is: its inputs, how to build it and its data, which releases can build it."""

from kit.common.capabilities import has_feature

NO_PORT = "no Gluon 2.0 port of this model"


class InputSpec(object):
    """One model input: its name, per-sample shape, dtype and value kind (float, tokens, pixels)."""

    def __init__(self, name, shape, dtype, kind, vocab=None):
        self.name, self.shape, self.dtype, self.kind, self.vocab = name, tuple(shape), dtype, kind, vocab

    def to_dict(self):
        return {
            "name": self.name,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "kind": self.kind,
            "vocab": self.vocab,
        }


class ModelSpec(object):
    """What a zoo model is, how to build it and its data, and which releases can build it."""

    def __init__(
        self,
        name,
        version,
        kind,
        description,
        inputs,
        n_classes,
        make_data,
        build,
        epochs=4,
        lr=0.01,
        batch_size=32,
        needs=(),
        graph_needs=(),
        label_names=(),
        n_train=512,
        n_heldout=256,
        internals_samples=2,
        fused_front=False,
        variant=None,
        calibrate_batchnorm=False,
        initializer=None,
        tolerance=None,
        port=None,
        port_kind="gluon",
        port_initializer=None,
        stored=None,
    ):
        self.name, self.version, self._kind, self.description = name, version, kind, description
        self.inputs, self.n_classes = inputs, n_classes
        self.make_data, self._build = make_data, build
        # the Gluon 2.0 port (kit.kernel.models.zoo_gluon2): built instead of ``build`` from MXNet 2.0 on
        self._port, self._port_kind, self._port_initializer = port, port_kind, port_initializer
        self.epochs, self.lr, self.batch_size = epochs, lr, batch_size
        self.needs, self.graph_needs, self.label_names = tuple(needs), tuple(graph_needs), tuple(label_names)
        # big models train on fewer samples and record internals for fewer samples (sizes, not semantics)
        self.n_train, self.n_heldout, self.internals_samples = n_train, n_heldout, internals_samples
        # a parameter-free ``front`` (data transforms) before a trainable ``classifier``
        self.fused_front = fused_front
        # after training, BatchNorm running statistics from one pass over training data (short trainings)
        self.calibrate_batchnorm = calibrate_batchnorm
        # a Module model's values a checkpoint converted from another framework stores beside the trained ones:
        # ``stored(arg_params)`` edits them after training (values MXNet ignores by an attribute)
        self.stored = stored
        self._initializer = initializer
        self._variant = variant
        # the model's own tolerance defaults (kit.common.tolerance), below any a run gives
        self.tolerance = tolerance

    @property
    def kind(self):
        """``gluon`` or ``symbol`` (a Module-API model) as the kit's 1.x code builds it."""
        return self._kind

    def kind_in(self, release):
        """What ``release`` builds: its port's kind from MXNet 2.0 on (the Module model is a SymbolBlock there)."""
        return self._port_kind if has_feature(release, "gluon2")[0] else self._kind

    def build(self, release, variant=None):
        """The network as ``release`` builds it (in ``variant``): the 1.x code, or the Gluon 2.0 port."""
        if has_feature(release, "gluon2")[0]:
            if self._port is None:
                raise KeyError("%s: %s" % (self.name, NO_PORT))
            return self._port(release, variant)
        return self._build(release, variant)

    def initializer(self, release=None):
        """The weight initializer training starts from (MXNet's Xavier unless the spec says otherwise)."""
        import mxnet as mx

        if release and self._port_initializer and has_feature(release, "gluon2")[0]:
            return self._port_initializer()
        return self._initializer() if self._initializer else mx.init.Xavier()

    def variant(self, release):
        """What differs in how ``release`` builds this model (recorded in the manifest; ``{}`` when nothing)."""
        return self._variant(release) if self._variant else {}

    def data(self, n, seed, release):
        """``(x, y)``: ``n`` samples of this model's synthetic data, as ``release`` builds the model."""
        return self.make_data(n, seed, release)

    def supported(self, release, variant=None):
        """``(True, None)`` when ``release`` can build this model (in ``variant``), else ``(False, reason)``."""
        if has_feature(release, "gluon2")[0] and self._port is None:
            return False, NO_PORT
        needs = self.needs + (("batched_image_transforms",) if (variant or {}).get("batched") else ())
        for feature in needs:
            ok, reason = has_feature(release, feature)
            if not ok:
                return False, reason
        return True, None

    def has_graph(self, release):
        """``(True, None)`` when ``release`` can trace this model to a symbol graph (export, Module)."""
        for feature in self.graph_needs:
            ok, reason = has_feature(release, feature)
            if not ok:
                return False, reason
        return True, None

    def input_specs(self, release):
        """The inputs as ``release`` builds the model (the end-to-end model's shape depends on it)."""
        if callable(self.inputs):
            return self.inputs(release)
        return self.inputs
