"""Optimizers (``SGD``, ``Adam``, ``AdamW``, ``Adamax``, ``NAdam``, ``RAdam``, ``RMSprop``,
``Adagrad``, ``Adadelta``, ``LBFGS``) and
learning-rate schedules, as ``torch.optim``.

>>> import jitgrad
>>> model = jitgrad.nn.Linear(3, 1)
>>> opt = jitgrad.optim.AdamW(model.parameters(), lr=1e-2)
>>> loss = model(jitgrad.ones(4, 3)).pow(2).mean()
>>> loss.backward(); opt.step(); opt.zero_grad()
"""

from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad",
           "Adadelta", "LBFGS", "lr_scheduler"]
