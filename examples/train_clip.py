#!/usr/bin/env python3
"""A CLIP-style contrastive step from image + caption pairs (WebDataset shards).

The servers decode and augment the images and pass each caption through as
text; the training loop embeds both and pulls matching pairs together with
the symmetric InfoNCE loss of CLIP. The encoders are deliberately small (a
few convolutions; a bag of UTF-8 byte bigrams) so that the example runs on a
CPU in seconds: swap in your own (a ViT, a tokenizer and a transformer) and
keep the loop.

  python3 examples/train_clip.py --servers 127.0.0.1:50051 --dataset laion-subset --steps 1000
  python3 examples/train_clip.py --local-workers 2 --data-root /data --dataset laion-subset   # no server
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import stoker


class ImageEncoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
                                 nn.Conv2d(64, 128, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                 nn.Linear(128, dim))

    def forward(self, images):
        return self.net(images)


class TextEncoder(nn.Module):
    """Hashed UTF-8 byte bigrams -> a mean embedding (no tokenizer needed)."""

    buckets = 1 << 14

    def __init__(self, dim):
        super().__init__()
        self.embed = nn.EmbeddingBag(self.buckets, dim, mode="mean")

    def forward(self, captions):
        ids, offsets = [], []
        for text in captions:
            data = text.encode("utf-8") or b" "
            offsets.append(len(ids))
            ids.extend((a * 257 + b) % self.buckets for a, b in zip(data, data[1:] + b"\0"))
        device = self.embed.weight.device
        return self.embed(torch.tensor(ids, device=device), torch.tensor(offsets, device=device))


def clip_loss(image_features, text_features, logit_scale):
    image_features = F.normalize(image_features, dim=-1)
    text_features = F.normalize(text_features, dim=-1)
    logits = logit_scale.exp() * image_features @ text_features.t()
    target = torch.arange(len(logits), device=logits.device)
    return (F.cross_entropy(logits, target) + F.cross_entropy(logits.t(), target)) / 2


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--servers", default="", help="host:port,host:port (empty: local workers only)")
    p.add_argument("--local-workers", type=int, default=0, help="decode in this process too (local mode)")
    p.add_argument("--data-root", default=".", help="where local workers find --dataset")
    p.add_argument("--dataset", required=True, help="WebDataset shards (jpg/png/webp + txt members)")
    p.add_argument("--steps", type=int, default=100, help="training steps")
    p.add_argument("--batch-size", type=int, default=64, help="pairs per batch")
    p.add_argument("--image-size", type=int, default=224, help="RandomResizedCrop output, pixels")
    p.add_argument("--dim", type=int, default=128, help="embedding size")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto, cuda, cuda:N or cpu")
    return p.parse_args()


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    loader = stoker.Loader(servers=args.servers or None, local_workers=args.local_workers, data_root=args.data_root,
                           dataset=args.dataset, batch_size=args.batch_size, seed=args.seed, device=args.device,
                           fields={"image": "jpg;png;webp", "caption": "txt"}, drop_last=True,
                           pipeline=f"random_resized_crop({args.image_size}), random_horizontal_flip(0.5)")
    device = torch.device(loader.device_path)
    images_net, text_net = ImageEncoder(args.dim).to(device), TextEncoder(args.dim).to(device)
    logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07), device=device))
    optimizer = torch.optim.AdamW([*images_net.parameters(), *text_net.parameters(), logit_scale], lr=args.lr)
    step, epoch, start = 0, 0, time.perf_counter()
    while step < args.steps:
        loader.set_epoch(epoch)
        for batch in loader:
            loss = clip_loss(images_net(batch["image"]), text_net(batch["caption"]), logit_scale)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            if step % 10 == 0 or step == 1 or step == args.steps:
                print(f"step {step}: loss {loss.item():.4f} ({len(batch['caption'])} pairs)", flush=True)
            if step == args.steps:
                break
        epoch += 1
    stats = loader.stats()
    print(f"done: {step} steps in {time.perf_counter() - start:.1f} s, starved {stats['starved_percent']:.1f}%, "
          f"bottleneck: {stats['bottleneck']}")


if __name__ == "__main__":
    main()
