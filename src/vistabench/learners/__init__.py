"""Torch learners shared by every protocol: models, the trainer, FLOP accounting, losses and the
long-tailed reference methods. Importing :mod:`vistabench.learners` imports torch; the metrics
package never does.

Modules: :mod:`.models` (registry ``models``, :func:`~.models.build_model`), :mod:`.trainer`
(:class:`~.trainer.Trainer`; re-exports :mod:`.train_config`'s :class:`~.train_config.TrainConfig`
and :class:`~.train_config.TrainResult`), :mod:`.schedules` (learning rates), :mod:`.sampling`
(epoch orders, batches), :mod:`.tensors` (input conversion),
:mod:`.flops` (FLOP counting), :mod:`.losses`, :mod:`.longtail` (registry ``lt_methods``).
"""
