"""Neural-network ops, each declared once in the registry: GELU, ``addmm`` (``linear``),
embedding, layer/batch normalisation and the losses with their own backward nodes; plus the
in-place tensor methods the optimizers use. ``jitgrad.nn.functional`` is their public face."""

from . import (  # noqa: F401 - registers ops and attaches methods
    activation,
    ctc,
    elman_layer,
    elu,
    embedding,
    gru_layer,
    linear,
    losses,
    nll,
    norm,
    pointwise,
    rnn_cells,
    rnn_layer,
    tensor_methods,
)
