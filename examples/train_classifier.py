#!/usr/bin/env python3
"""Train a torchvision ResNet-18 from a Stoker loader.

Batches arrive as tensors on the training device (bfloat16 with AMP on a GPU,
float32 on the CPU), normalized with ImageNet's mean and std. Each epoch
prints images/s, the share of time the loop starved for input and the
bottleneck verdict. A checkpoint (model, optimizer, loader position) is
written every --checkpoint-every batches and at the end of each epoch;
--resume continues from it with exactly the batches not yet trained on.

  python3 examples/train_classifier.py --servers 127.0.0.1:50051 --dataset imagenet/train --epochs 90
  python3 examples/train_classifier.py --data-root .demo/data --dataset demo    # no server: local mode

--recipe timm trains with the augmentation of timm's ImageNet recipes on the
data servers (RandomResizedCrop, flip, RandAugment(2, 9), RandomErasing 0.25
with per-pixel noise) and MixUp 0.8 / CutMix 1.0 with label smoothing 0.1 on
the device (the loss then takes soft targets).
"""
import argparse
import contextlib
import hashlib
import json
import os
import time

import torch
import torch.nn.functional as F
import torchvision

import stoker


def digest(images):
    """A hash of a batch's bytes (any dtype), to compare runs."""
    t = images.detach().cpu().contiguous()
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()]
    return hashlib.blake2b(t.view(view).numpy().tobytes(), digest_size=16).hexdigest()


def log_batch(log, loader, images):
    """One JSON line: which batch this was, its samples and a digest of its bytes."""
    info = loader.last_batch
    log.write(json.dumps({"epoch": info["epoch"], "batch": info["batch"], "samples": info["sample_indices"],
                          "digest": digest(images)}) + "\n")
    log.flush()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--servers", default="",
                   help="host:port,host:port or dns:///name:port; empty: no servers, local mode (--local-workers)")
    p.add_argument("--dataset", required=True, help="dataset name under the servers' (or --data-root's) root")
    p.add_argument("--local-workers", type=int, default=2,
                   help="local mode (no --servers): threads that read, decode and augment here")
    p.add_argument("--data-root", default=".", help="local mode: the directory holding --dataset")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64, help="images per batch")
    p.add_argument("--image-size", type=int, default=224, help="RandomResizedCrop output, pixels")
    p.add_argument("--lr", type=float, default=0.1, help="SGD learning rate")
    p.add_argument("--seed", type=int, default=42, help="fixes sample order and augmentation")
    p.add_argument("--device", default="auto", help="auto (cuda if available), cuda, cuda:N or cpu")
    p.add_argument("--checkpoint", default="checkpoint.pt", help="checkpoint file")
    p.add_argument("--checkpoint-every", type=int, default=100, help="batches between checkpoints")
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint if it exists")
    p.add_argument("--stop-after-batches", type=int, default=0,
                   help="checkpoint and exit after this many batches in this run (to try --resume)")
    p.add_argument("--log-batches", help="append a JSON line per batch (epoch, batch, samples, digest) here")
    p.add_argument("--metrics-port", type=int, help="serve the loader's Prometheus metrics on this port")
    p.add_argument("--recipe", choices=("basic", "timm"), default="basic",
                   help="basic: random_resized_crop + flip; timm: + rand_augment, random_erasing, MixUp/CutMix")
    return p.parse_args()


def main():
    args = parse_args()
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    amp = device.startswith("cuda")
    torch.manual_seed(args.seed)
    pipeline = f"random_resized_crop({args.image_size}), random_horizontal_flip(0.5)"
    mixing = {}
    if args.recipe == "timm":
        pipeline += ", rand_augment(num_ops=2, magnitude=9), random_erasing(p=0.25, value_random=true)"
        mixing = dict(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1)
    loader = stoker.Loader(servers=args.servers or None, dataset=args.dataset,
                           local_workers=0 if args.servers else args.local_workers, data_root=args.data_root, pipeline=pipeline,
                           batch_size=args.batch_size, seed=args.seed, drop_last=True, device=device,
                           dtype=torch.bfloat16 if amp else torch.float32, layout="nchw", normalize="imagenet",
                           metrics_port=args.metrics_port, **mixing)
    model = torchvision.models.resnet18(num_classes=len(loader.class_names)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    start_epoch = 0
    if args.resume and os.path.exists(args.checkpoint):
        checkpoint = torch.load(args.checkpoint, map_location=device)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        loader.load_state_dict(checkpoint["loader"])
        start_epoch = checkpoint["epoch"]
        print(f"resumed from {args.checkpoint}: epoch {start_epoch}", flush=True)

    def save(epoch):
        tmp = args.checkpoint + ".tmp"
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "loader": loader.state_dict(), "epoch": epoch}, tmp)
        os.replace(tmp, args.checkpoint)

    log = open(args.log_batches, "a") if args.log_batches else None
    print(f"{loader.num_samples} samples, {len(loader.class_names)} classes, {len(loader)} batches per epoch, "
          f"device {device} ({loader.device_path} path), {'AMP bfloat16' if amp else 'float32'}", flush=True)
    batches = 0
    for epoch in range(start_epoch, args.epochs):
        loader.set_epoch(epoch)
        model.train()
        before, start, images_seen, loss = loader.stats(), time.perf_counter(), 0, None
        for images, labels in loader:
            with (torch.autocast("cuda", dtype=torch.bfloat16) if amp else contextlib.nullcontext()):
                loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            batches += 1
            images_seen += len(labels)
            if log:
                log_batch(log, loader, images)
            if batches % args.checkpoint_every == 0:
                save(epoch)
            if args.stop_after_batches and batches == args.stop_after_batches:
                save(epoch)
                print(f"stopped after {batches} batches; checkpoint in {args.checkpoint}", flush=True)
                return
        if amp:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        after = loader.stats()
        if images_seen:
            starved = 100 * (after["next_seconds"] - before["next_seconds"]) / seconds
            print(f"epoch {epoch}: {images_seen / seconds:.1f} images/s, starved {starved:.1f}%, "
                  f"loss {loss.item():.3f}, bottleneck: {after['bottleneck']} ({after['bottleneck_explanation']})",
                  flush=True)
        save(epoch)


if __name__ == "__main__":
    main()
