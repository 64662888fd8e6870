"""An Albumentations recipe as a Python transform stage
(python/tests/test_user_transforms_albumentations.py): the team's own
augmentation, run on the data servers as python(stoker_albu_recipes:strong_aug)."""
import os

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # no update check over the network

import albumentations as A  # noqa: E402

_RECIPE = A.Compose([
    A.HorizontalFlip(p=0.5),
    A.RandomBrightnessContrast(brightness_limit=0.3, contrast_limit=0.3, p=0.8),
    A.HueSaturationValue(p=0.5),
    A.GaussNoise(p=0.5),
    A.CoarseDropout(num_holes_range=(1, 4), hole_height_range=(4, 8), hole_width_range=(4, 8), p=0.5),
])


def strong_aug(sample, rng):
    """The recipe with its generators seeded from the sample's: the same seed, epoch and index give the same pixels."""
    _RECIPE.set_random_seed(int(rng.integers(2**32)))
    sample["image"] = _RECIPE(image=sample["image"])["image"]
    return sample
