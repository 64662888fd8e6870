#!/usr/bin/python3
"""The loader most users run today, measured on the same images and transforms.

torchvision ImageFolder + DataLoader with RandomResizedCrop(224) and
RandomHorizontalFlip, either the standard float output (ToTensor + Normalize)
or uint8 (PILToTensor). Prints one JSON line with images/s. Run with Debian's
/usr/bin/python3 (python3-torchvision).
"""
import argparse
import json
import time

import torch
import torchvision
from torchvision import transforms as T


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("data", help="ImageFolder root")
    p.add_argument("--workers", type=int, default=1, help="DataLoader worker processes")
    p.add_argument("--output", choices=["float", "uint8"], default="float")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--warmup-batches", type=int, default=2, help="left out of the rate (worker start-up)")
    p.add_argument("--recipe", choices=["basic", "randaugment", "trivialaugment"], default="basic",
                   help="basic: RandomResizedCrop(224) + flip; randaugment / trivialaugment: + RandAugment(2, 9) or "
                        "TrivialAugmentWide, and RandomErasing(0.25, value='random') on the float output")
    args = p.parse_args()

    ops = [T.RandomResizedCrop(224), T.RandomHorizontalFlip()]
    if args.recipe == "randaugment":
        ops.append(T.RandAugment(2, 9))
    elif args.recipe == "trivialaugment":
        ops.append(T.TrivialAugmentWide())
    if args.output == "float":
        ops += [T.ToTensor(), T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])]
        if args.recipe != "basic":
            ops.append(T.RandomErasing(0.25, value="random"))
    else:
        ops += [T.PILToTensor()]
    dataset = torchvision.datasets.ImageFolder(args.data, transform=T.Compose(ops))
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                                         num_workers=args.workers, persistent_workers=False)
    images = 0
    start = None
    for i, (x, _) in enumerate(loader):
        if i == args.warmup_batches - 1 or (args.warmup_batches == 0 and start is None):
            start = time.perf_counter()
            if args.warmup_batches > 0:
                continue
        if start is not None and i >= args.warmup_batches:
            images += x.shape[0]
    seconds = time.perf_counter() - start
    print(json.dumps({"workers": args.workers, "output": args.output, "images": images,
                      "seconds": round(seconds, 3), "images_per_second": round(images / seconds, 1)}))


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
