"""The model zoo: what a model is and its builders (1.x Gluon, the Gluon 2.0 port, vision, MXNet's checker's models)."""
