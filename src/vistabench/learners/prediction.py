"""Prediction with a fitted :class:`~.trainer.Trainer`: its model run over images in eval mode,
without gradients, in batches whose size does not grow with the set (logits or features, or any
function of the normalised batch). A mixin of :class:`~.trainer.Trainer`, which supplies ``model``,
``cfg``, ``normaliser``, ``batch``, ``autocast``, ``threads`` and ``_forward``."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np
import torch

from ..errors import InputError
from .sources import StreamSource
from .tensors import check_images

__all__ = ["Predicting"]


class Predicting:
    """The predicting half of :class:`~.trainer.Trainer` (see the module)."""

    def eval_batch(self, images: Any) -> int:
        """Images per prediction batch: ``cfg.eval_batch_size`` for in-memory arrays (the set is in
        memory already); for image files on disk, at most the training ``batch_size`` too, so that
        predicting never holds more decoded images or activations than a training step and its peak
        memory does not grow with the test set (the logits excepted). A row's logits may differ in the
        last bits with the size of the batch it was computed in (on some CPUs the convolutions split
        their work by the batch: up to 1.5e-7 for cnn28 on a 2-core Xeon), so the same images as
        files and as arrays agree to float32 rounding; in batches of one size they are the same bits."""
        from ..data.image_files import ImageFiles

        if isinstance(images, ImageFiles):
            return min(self.cfg.eval_batch_size, self.cfg.batch_size)
        return self.cfg.eval_batch_size

    def _check_predict(self, images: np.ndarray, name: str) -> np.ndarray:
        if self.normaliser is None:
            raise InputError(f"{name}: call fit() before predicting (the input normalisation comes from training)")
        images = check_images(images, name, in_channels=self.in_channels, allow_empty=True)
        self.normaliser.check_compatible(images, name)
        return images

    @torch.no_grad()
    def _run(self, images: np.ndarray, fn: Callable[[torch.Tensor], torch.Tensor], width: int) -> np.ndarray:
        was_training = self.model.training
        self.model.eval()
        out = np.empty((len(images), width), dtype=np.float32)  # the only per-image state
        bs = self.eval_batch(images)
        try:
            with self.threads():
                if self.cfg.loader == "stream" and self.cfg.workers > 0 and len(images):  # decoded by the workers
                    raws = StreamSource(self, images, self.cfg.workers).predict_batches(bs)
                    parts: Iterator = ((slice(s, s + bs), raw, slice(None)) for s, raw in zip(range(0, len(images), bs), raws))
                else:
                    parts = ((slice(s, s + bs), images, slice(s, s + bs)) for s in range(0, len(images), bs))
                for where, src, idx in parts:
                    x = self.batch(src, idx)
                    with self.autocast():
                        out[where] = fn(x).float().cpu().numpy()
        finally:
            self.model.train(was_training)
        return out

    def apply(self, images: np.ndarray, fn: Callable[[torch.Tensor], torch.Tensor], *, width: int) -> np.ndarray:
        """``fn(x)`` on the normalised (N, H, W, B) ``images`` in eval mode, without gradients, in
        batches of ``cfg.eval_batch_size``: float32 ndarray of shape (N, width), ``fn`` returning
        (n, width) per batch (e.g. several feature maps concatenated)."""
        images = self._check_predict(images, "images")
        return self._run(images, fn, width)

    def predict_logits(self, images: np.ndarray) -> np.ndarray:
        """Logits, float32 ndarray of shape (N, C), for (N, H, W, B) images (eval mode)."""
        images = self._check_predict(images, "images")
        return self._run(images, self._forward, int(self.num_classes))

    def features(self, images: np.ndarray) -> np.ndarray:
        """Penultimate features ``model.features(x)``, float32 ndarray of shape (N, D)."""
        images = self._check_predict(images, "images")
        if not hasattr(self.model, "features"):
            raise InputError("model: has no .features(x) method")
        return self._run(images, self.model.features, int(self.model.feature_dim))
