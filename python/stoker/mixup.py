"""MixUp and CutMix with timm's ``Mixup`` semantics in batch mode (one
lambda and one box per batch; the batch mixed with itself reversed; soft
targets with label smoothing), as torch ops.

``stoker.Loader(mixup_alpha=..., cutmix_alpha=...)`` does not use these ops:
it mixes in the C++ client's stager (client/device/mixup.h), fused into the
uint8-to-float conversion (a CUDA kernel on a GPU, the CPU otherwise). This
module is the same mixing written with torch, for batches a user already
holds and as the tests' bridge: given the same draws it equals timm's
``Mixup`` (``python/tests/test_mixup.py``), and the loader's batches equal
it bit for bit in float32. The draws (whether to mix, MixUp or CutMix,
lambda, the box's centre) are the client's, seeded by (seed, epoch, batch
index), so a batch is mixed the same way whoever made it and on resume.
"""

from dataclasses import dataclass


@dataclass
class MixDraw:
    """One batch's draws: `lam` is the weight of the batch itself (1: not
    mixed); `box` (y_low, y_high, x_low, x_high) when CutMix pasted a box."""
    lam: float = 1.0
    cutmix: bool = False
    box: tuple = None
    raw: tuple = ()  # the draws in timm's order (rand, [rand,] beta, [randint, randint]), for tests


class Mixup:
    """timm.data.Mixup(mixup_alpha, cutmix_alpha, prob=mix_prob, switch_prob,
    mode="batch", correct_lam=True, label_smoothing, num_classes)."""

    def __init__(self, mixup_alpha=0.8, cutmix_alpha=1.0, mix_prob=1.0, switch_prob=0.5, label_smoothing=0.1,
                 num_classes=1000, seed=0):
        for name, value in (("mixup_alpha", mixup_alpha), ("cutmix_alpha", cutmix_alpha)):
            if not value >= 0:
                raise ValueError(f"{name} = {value}; need >= 0 (0 turns it off)")
        if mixup_alpha == 0 and cutmix_alpha == 0:
            raise ValueError("mixup_alpha and cutmix_alpha are both 0: nothing to mix")
        for name, value in (("mix_prob", mix_prob), ("switch_prob", switch_prob), ("label_smoothing", label_smoothing)):
            if not 0 <= value <= 1:
                raise ValueError(f"{name} = {value}; allowed range is 0..1")
        if not (isinstance(num_classes, int) and num_classes >= 1):
            raise ValueError(f"num_classes = {num_classes!r}; give the number of classes (soft targets are "
                             "[N, num_classes])")
        self.mixup_alpha, self.cutmix_alpha = float(mixup_alpha), float(cutmix_alpha)
        self.mix_prob, self.switch_prob = float(mix_prob), float(switch_prob)
        self.label_smoothing, self.num_classes, self.seed = float(label_smoothing), num_classes, int(seed)

    def draw(self, epoch, batch, height, width):
        """The draws for batch `batch` of `epoch`, in timm's order: the C++
        client's (client/device/mixup.cc: timm's rand_bbox, lam corrected to the
        pasted area)."""
        from . import _stoker_ext

        lam, cutmix, box, raw = _stoker_ext.mix_draw(self.mixup_alpha, self.cutmix_alpha, self.mix_prob,
                                                     self.switch_prob, self.seed, int(epoch), int(batch),
                                                     int(height), int(width))
        if cutmix:  # the box's centre was an integer draw
            raw = list(raw[:-2]) + [int(raw[-2]), int(raw[-1])]
        return MixDraw(lam=lam, cutmix=cutmix, box=tuple(box) if cutmix else None, raw=tuple(raw))

    def apply(self, images, labels, draw, channels_last=False):
        """Mixes a float image batch in place ([N, C, H, W], or [N, H, W, C]
        with `channels_last`) and returns (images, soft targets [N,
        num_classes] float32 on the images' device)."""
        import torch

        if not images.is_floating_point():
            raise TypeError("MixUp and CutMix mix float images: ask the loader for dtype float32, float16 or bfloat16")
        if draw.lam != 1.0:
            if draw.cutmix:
                yl, yh, xl, xh = draw.box
                if channels_last:
                    images[:, yl:yh, xl:xh, :] = images.flip(0)[:, yl:yh, xl:xh, :]
                else:
                    images[:, :, yl:yh, xl:xh] = images.flip(0)[:, :, yl:yh, xl:xh]
            else:
                flipped = images.flip(0).mul_(1.0 - draw.lam)
                images.mul_(draw.lam).add_(flipped)
        labels = labels.to(device=images.device, dtype=torch.int64)
        off = self.label_smoothing / self.num_classes
        on = 1.0 - self.label_smoothing + off
        def one_hot(y):
            return torch.full((y.shape[0], self.num_classes), off, device=images.device).scatter_(1, y.view(-1, 1), on)
        targets = one_hot(labels) * draw.lam + one_hot(labels.flip(0)) * (1.0 - draw.lam)
        return images, targets
