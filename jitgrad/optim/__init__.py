"""Optimizers (``SGD``, ``Adam``, ``AdamW``, ``Adamax``, ``NAdam``, ``RAdam``, ``RMSprop``,
``Adagrad``, ``Adadelta``, ``ASGD``, ``Rprop``, ``Adafactor``, ``SparseAdam``, ``LBFGS``),
learning-rate schedules and weight averaging (``swa_utils``), as ``torch.optim``.

>>> import jitgrad
>>> model = jitgrad.nn.Linear(3, 1)
>>> opt = jitgrad.optim.AdamW(model.parameters(), lr=1e-2)
>>> loss = model(jitgrad.ones(4, 3)).pow(2).mean()
>>> loss.backward(); opt.step(); opt.zero_grad()
"""

from . import lr_scheduler, swa_utils
from .adadelta import Adadelta
from .adafactor import Adafactor
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD
from .sparse_adam import SparseAdam

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad",
           "Adadelta", "ASGD", "Rprop", "Adafactor", "SparseAdam", "LBFGS", "lr_scheduler",
           "swa_utils"]
