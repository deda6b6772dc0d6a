"""Stream learners (Nevis'22 baselines): the contract (:mod:`.base`: :class:`TaskView` — the context a
learner sees —, :class:`ComputeLedger`, :class:`StreamLearner`), the search learner
(:mod:`.search`), the baselines (:mod:`.baselines`, :mod:`.mt`, :mod:`.bhpo`), PT-MT pre-training
(:mod:`.pretrain`), the registry (:func:`register_learner`, alias :func:`register_method`) and the
settings (:mod:`.options`, torch-free).

Names are imported on first use, so ``vistabench.learners.stream.options`` can be read (to build
and print a config) without importing torch.
"""

from ..._lazy import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {
    "TaskView": "base", "ComputeLedger": "base", "StreamLearner": "base", "save_checkpoint": "base",
    "SearchLearner": "search", "SearchTrainer": "search", "TrialEngine": "search",
    "Indep": "baselines", "Ensemble": "baselines", "FTPrev": "baselines", "FTD": "baselines", "PT": "baselines",
    "MT": "mt", "BHPO": "bhpo",
    "register_learner": "registry", "register_method": "registry", "stream_learners": "catalog",
    "learner_names": "catalog", "make_learner": "catalog", "learner_class": "catalog",
    "LearnerConfig": "options", "batch_size_for": "options", "eval_points": "options",
    "pretrain_meta_train": "pretrain",
})
