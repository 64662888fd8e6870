#!/usr/bin/env python3
"""Distributed data-parallel training fed by Stoker: one loader per rank.

Each rank's loader takes its rank and world size from torch.distributed and
receives its own share of every epoch (DistributedSampler semantics), so the
ranks together see each sample once per epoch. Each rank checkpoints its
loader position with the model; a job killed mid-epoch and restarted with
--resume sees exactly the batches it had not trained on, with the same bytes.

  torchrun --nproc_per_node 2 examples/ddp.py --servers 127.0.0.1:50051 --dataset imagenet/train
  python -m torch.distributed.run --nproc_per_node 2 examples/ddp.py --data-root .demo/data --dataset demo
(the second: no server, each rank decodes its own share here; from a virtual
environment use `python -m torch.distributed.run`, since Debian's
/usr/bin/torchrun runs /usr/bin/python3 and does not see the venv;
gloo on CPUs; NCCL and one GPU per rank where GPUs exist)
"""
import argparse
import contextlib
import os
import signal

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
from torch.nn.parallel import DistributedDataParallel

import stoker
from train_classifier import log_batch


def small_model(classes):
    """A few convolutions: for trying the example on a laptop's CPU."""
    return torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, stride=2), torch.nn.ReLU(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, classes))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--servers", default="",
                   help="host:port,host:port or dns:///name:port; empty: no servers, local mode (--local-workers)")
    p.add_argument("--dataset", required=True, help="dataset name under the servers' (or --data-root's) root")
    p.add_argument("--local-workers", type=int, default=1,
                   help="local mode (no --servers): threads per rank that read, decode and augment here")
    p.add_argument("--data-root", default=".", help="local mode: the directory holding --dataset")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64, help="images per batch and rank")
    p.add_argument("--image-size", type=int, default=224, help="RandomResizedCrop output, pixels")
    p.add_argument("--model", choices=["resnet18", "small"], default="resnet18")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--checkpoint-dir", default="checkpoints", help="one file per rank: rank<N>.pt")
    p.add_argument("--checkpoint-every", type=int, default=100, help="batches between checkpoints")
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint-dir")
    p.add_argument("--crash-after-batches", type=int, default=0,
                   help="test: checkpoint, then every rank kills itself (SIGKILL) after this many batches")
    p.add_argument("--log-dir", help="each rank appends a JSON line per batch to <dir>/rank<N>.jsonl")
    return p.parse_args()


def main():
    args = parse_args()
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(device)
    loader = stoker.Loader(servers=args.servers or None, dataset=args.dataset,
                           local_workers=0 if args.servers else args.local_workers, data_root=args.data_root,
                           pipeline=f"random_resized_crop({args.image_size}), random_horizontal_flip(0.5)",
                           batch_size=args.batch_size, seed=args.seed, drop_last=True, device=device,
                           dtype=torch.bfloat16 if cuda else torch.float32)
    classes = len(loader.class_names)
    torch.manual_seed(args.seed)
    model = (torchvision.models.resnet18(num_classes=classes) if args.model == "resnet18"
             else small_model(classes)).to(device)
    model = DistributedDataParallel(model, device_ids=[device] if cuda else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    checkpoint = os.path.join(args.checkpoint_dir, f"rank{rank}.pt")
    start_epoch = 0
    if args.resume and os.path.exists(checkpoint):
        state = torch.load(checkpoint, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        loader.load_state_dict(state["loader"])
        start_epoch = state["epoch"]

    def save(epoch):
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "loader": loader.state_dict(), "epoch": epoch}, checkpoint + ".tmp")
        os.replace(checkpoint + ".tmp", checkpoint)

    log = None
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
        log = open(os.path.join(args.log_dir, f"rank{rank}.jsonl"), "a")
    batches = 0
    for epoch in range(start_epoch, args.epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:
            with (torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext()):
                loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            batches += 1
            if log:
                log_batch(log, loader, images)
            if batches % args.checkpoint_every == 0:
                save(epoch)
            if args.crash_after_batches and batches == args.crash_after_batches:
                save(epoch)
                dist.barrier()  # every rank has its checkpoint
                os.kill(os.getpid(), signal.SIGKILL)
        save(epoch)
        if rank == 0:
            s = loader.stats()
            print(f"epoch {epoch}: rank 0 {s['images_per_second']:.1f} images/s, starved {s['starved_percent']:.1f}%, "
                  f"bottleneck: {s['bottleneck']}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
