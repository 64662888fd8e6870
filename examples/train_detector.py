#!/usr/bin/env python3
"""Train torchvision's Faster R-CNN (MobileNetV3 backbone) on a COCO dataset
served by Stoker: boxes and labels arrive with each image, already moved by
the servers' IoU crop, flip and letterbox resize.

  python3 examples/train_detector.py --servers 127.0.0.1:50051 --dataset coco/train2017 \\
      --annotations coco/annotations/instances_train2017.json --steps 1000

Each batch is a dict: "image" [N, 3, S, S] (normalized), "boxes" [N, K, 4]
(xyxy, output pixels) and "labels" [N, K] (0..C-1), padded, with
"boxes_count" [N]. torchvision's detection models take a list of images and
a list of per-image targets, with label 0 kept for the background.
"""
import argparse
import math
import time

import torch
import torchvision

import stoker


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--servers", default="", help="host:port,host:port (empty: local workers only)")
    p.add_argument("--local-workers", type=int, default=0, help="decode in this process too (local mode)")
    p.add_argument("--data-root", default=".", help="where local workers find the dataset and annotations")
    p.add_argument("--dataset", required=True, help="the image directory, as CocoDetection's root")
    p.add_argument("--annotations", required=True, help="the instances JSON, under --data-root")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--image-size", type=int, default=320, help="resize_pad output, pixels")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto, cuda, cuda:N or cpu")
    return p.parse_args()


def targets_of(batch):
    """torchvision's per-image targets from the padded batch (label 0 is the background)."""
    out = []
    for boxes, labels, count in zip(batch["boxes"], batch["labels"], batch["boxes_count"].tolist()):
        out.append({"boxes": boxes[:count].float(), "labels": labels[:count].long() + 1})
    return out


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    loader = stoker.Loader(servers=args.servers or None, local_workers=args.local_workers, data_root=args.data_root,
                           dataset=args.dataset, annotations=args.annotations, batch_size=args.batch_size,
                           seed=args.seed, device=args.device, fields=["image", "boxes", "labels"],
                           pipeline=f"random_iou_crop(), random_horizontal_flip(0.5), resize_pad({args.image_size})")
    device = torch.device(loader.device_path)
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=len(loader.class_names) + 1,
        min_size=args.image_size, max_size=args.image_size).to(device)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    step, epoch, start = 0, 0, time.perf_counter()
    while step < args.steps:
        loader.set_epoch(epoch)
        for batch in loader:
            losses = model(list(batch["image"]), targets_of(batch))
            loss = sum(losses.values())
            if not math.isfinite(loss.item()):
                raise SystemExit(f"step {step + 1}: loss is {loss.item()}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            boxes = int(batch["boxes_count"].sum())
            print(f"step {step}: loss {loss.item():.4f} ({boxes} boxes; " +
                  ", ".join(f"{k} {v.item():.3f}" for k, v in losses.items()) + ")", flush=True)
            if step == args.steps:
                break
        epoch += 1
    stats = loader.stats()
    print(f"done: {step} steps in {time.perf_counter() - start:.1f} s, starved {stats['starved_percent']:.1f}%, "
          f"bottleneck: {stats['bottleneck']}")


if __name__ == "__main__":
    main()
