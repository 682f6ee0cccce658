"""A small architecture that ships nowhere: a bag-of-context encoder (each token's embedding plus
the mean of its row's, then one GELU layer) trained by its own masked-LM objective. It exists to
show that adding an architecture is this one folder plus two registry lines
(tests/test_adding_an_architecture.py registers it the way `_BUILT` would)."""
