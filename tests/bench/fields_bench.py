#!/usr/bin/env python3
"""Sample fields, per server core, against torchvision's DataLoader doing the
same work per worker core, in one run on the standard photo set:

  detection: decode, IoU crop (SSD's), horizontal flip, resize_pad(512),
             boxes and labels moved with the image (COCO-like: the photos
             with 7 random boxes each in an instances file);
  clip:      random_resized_crop(224) + flip, and the caption tokenised with a
             SentencePiece model (WebDataset shards of jpg + txt).

Stoker: one stoker-server with one worker thread, driven by stoker-bench over
loopback (uint8 batches of 64). torchvision: Debian's torch 1.13 /
torchvision 0.14 DataLoader with one worker process; its 0.14 has no
transforms.v2, so the IoU crop is the same algorithm written over torch's RNG
and PIL, and tokenisation is PyPI's sentencepiece. Also prints the fields'
wire overhead (their bytes over the image bytes) for the COCO-like data.
Goals: >= 2x for both pipelines; overhead < 2 %.

Usage (the build's pyenv has sentencepiece; `make pyenv`):
  build/pyenv/bin/python tests/bench/fields_bench.py build   # BENCH_IMAGES=1000 by default
"""
import io
import json
import math
import os
import random
import re
import subprocess
import sys
import tarfile
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BATCH = 64
CAPTION_WORDS = "a photo of the red blue green small large dog cat car tree house sky river city night".split()


def photos(n):
    out = os.path.join(ROOT, ".bench", f"photos-{n}")
    subprocess.run([os.path.join(ROOT, "..", "shared", "bench", "photoset.sh"), out, str(n)], check=True)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs if f.endswith(".jpg"))
    for f in files:  # warm the page cache for every contender
        with open(f, "rb") as fh:
            fh.read()
    return files


def caption(rng, i):
    return " ".join(rng.choice(CAPTION_WORDS) for _ in range(8 + i % 9)) + f" number {i}"


def make_data(files, root):
    """root/coco/{images/, instances.json}, root/pairs/*.tar, root/tok.model."""
    from PIL import Image
    import sentencepiece as spm

    rng = random.Random(1)
    os.makedirs(os.path.join(root, "coco", "images"))
    images, annotations = [], []
    for i, f in enumerate(files):
        name = f"{i:06d}.jpg"
        os.link(f, os.path.join(root, "coco", "images", name))
        w, h = Image.open(f).size
        images.append({"id": i + 1, "file_name": name, "width": w, "height": h})
        for _ in range(7):
            bw, bh = rng.uniform(0.05, 0.5) * w, rng.uniform(0.05, 0.5) * h
            x, y = rng.uniform(0, w - bw), rng.uniform(0, h - bh)
            annotations.append({"id": len(annotations) + 1, "image_id": i + 1, "category_id": rng.randint(1, 80),
                                "bbox": [x, y, bw, bh], "iscrowd": 0, "area": bw * bh})
    with open(os.path.join(root, "coco", "instances.json"), "w") as out:
        json.dump({"images": images, "annotations": annotations,
                   "categories": [{"id": c, "name": f"c{c}"} for c in range(1, 81)]}, out)
    os.makedirs(os.path.join(root, "pairs"))
    captions = []
    for shard in range(0, len(files), 250):
        with tarfile.open(os.path.join(root, "pairs", f"pairs-{shard // 250:06d}.tar"), "w") as tar:
            for i in range(shard, min(shard + 250, len(files))):
                captions.append(caption(rng, i))
                tar.add(files[i], arcname=f"{i:06d}.jpg")
                data = captions[-1].encode()
                info = tarfile.TarInfo(f"{i:06d}.txt")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    with open(os.path.join(root, "corpus.txt"), "w") as out:
        out.write("\n".join(captions) + "\n")
    spm.SentencePieceTrainer.train(input=os.path.join(root, "corpus.txt"), model_prefix=os.path.join(root, "tok"),
                                   vocab_size=48, model_type="unigram", minloglevel=2)


def run_stoker(build, root, args):
    server = subprocess.Popen([os.path.join(build, "server", "stoker-server"), "--host=127.0.0.1", "--port=0",
                               "--metrics-port=-1", "--workers=1", f"--data-root={root}"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = None
        for line in server.stdout:
            m = re.search(r"listening on [\d.]+:(\d+)", line)
            if m:
                port = m.group(1)
                break
        out = subprocess.run([os.path.join(build, "client", "stoker-bench"), f"--servers=127.0.0.1:{port}",
                              f"--batch-size={BATCH}", "--epochs=2", "--warmup-batches=2", "--device=none",
                              "--metrics-port=-1", "--slowest=0", "--window=4", *args],
                             capture_output=True, text=True, timeout=1800, check=True).stdout
    finally:
        server.terminate()
        server.wait()
    rate = float(re.search(r"images/s\s+([\d.]+)", out).group(1))
    if os.environ.get("BENCH_VERBOSE"):
        print(out)
    fields = {m.group(1): float(m.group(2)) for m in re.finditer(r"^\s+(\w+)\s+\d+ bytes\s+[\d.]+ per sample\s+([\d.]+)% of the image", out, re.M)}
    return rate, fields, out


def iou_crop_box(boxes, w, h, generator):
    """torchvision.transforms.v2.RandomIoUCrop's draw (0.15+), over torch's RNG, bounded as Stoker's."""
    import torch

    options = [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]
    for _ in range(50):
        min_iou = options[int(torch.randint(0, len(options), (1,), generator=generator))]
        if min_iou >= 1.0:
            return None
        for _ in range(40):
            r = 0.3 + 0.7 * torch.rand(2, generator=generator)
            nw, nh = int(w * r[0]), int(h * r[1])
            if nh == 0 or not 0.5 <= nw / nh <= 2:
                continue
            r = torch.rand(2, generator=generator)
            left, top = int((w - nw) * r[0]), int((h - nh) * r[1])
            if nw == 0 or nh == 0:
                continue
            cx, cy = (boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2
            inside = (left < cx) & (cx < left + nw) & (top < cy) & (cy < top + nh)
            if not inside.any():
                continue
            b = boxes[inside]
            iw = (torch.minimum(b[:, 2], torch.tensor(left + nw)) - torch.maximum(b[:, 0], torch.tensor(left))).clamp(min=0)
            ih = (torch.minimum(b[:, 3], torch.tensor(top + nh)) - torch.maximum(b[:, 1], torch.tensor(top))).clamp(min=0)
            inter = iw * ih
            iou = inter / ((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) + nw * nh - inter)
            if iou.max() >= min_iou:
                return left, top, nw, nh, inside
    return None


def torchvision_rate(kind, root, files):
    import torch
    import torchvision.transforms.functional as F
    from PIL import Image
    from torchvision import transforms as T

    if kind == "detection":
        with open(os.path.join(root, "coco", "instances.json")) as f:
            coco = json.load(f)
        anns = {}
        for a in coco["annotations"]:
            anns.setdefault(a["image_id"], []).append(a)

        class Detection(torch.utils.data.Dataset):
            def __len__(self):
                return len(coco["images"])

            def __getitem__(self, i):
                info = coco["images"][i]
                img = Image.open(os.path.join(root, "coco", "images", info["file_name"])).convert("RGB")
                a = anns[info["id"]]
                boxes = torch.tensor([[b["bbox"][0], b["bbox"][1], b["bbox"][0] + b["bbox"][2],
                                       b["bbox"][1] + b["bbox"][3]] for b in a])
                labels = torch.tensor([b["category_id"] for b in a])
                g = torch.Generator().manual_seed(i)
                crop = iou_crop_box(boxes, img.width, img.height, g)
                if crop:
                    left, top, nw, nh, inside = crop
                    img = img.crop((left, top, left + nw, top + nh))
                    boxes, labels = boxes[inside] - torch.tensor([left, top, left, top]), labels[inside]
                    boxes[:, 0::2] = boxes[:, 0::2].clamp(0, nw)
                    boxes[:, 1::2] = boxes[:, 1::2].clamp(0, nh)
                if torch.rand(1, generator=g) < 0.5:
                    img = F.hflip(img)
                    boxes = torch.stack([img.width - boxes[:, 2], boxes[:, 1], img.width - boxes[:, 0], boxes[:, 3]], 1)
                scale = 512 / max(img.width, img.height)
                size = (max(1, round(img.height * scale)), max(1, round(img.width * scale)))
                img = F.resize(img, list(size))
                boxes = boxes * scale
                out = torch.zeros(3, 512, 512, dtype=torch.uint8)
                t = F.pil_to_tensor(img)
                out[:, :t.shape[1], :t.shape[2]] = t
                return out, boxes, labels

        dataset, collate = Detection(), lambda batch: (torch.stack([b[0] for b in batch]), [b[1:] for b in batch])
    else:
        import sentencepiece as spm

        tokenizer = spm.SentencePieceProcessor(model_file=os.path.join(root, "tok.model"))
        members = []
        for shard in sorted(f for f in os.listdir(os.path.join(root, "pairs")) if f.endswith(".tar")):
            with tarfile.open(os.path.join(root, "pairs", shard)) as tar:
                pending = {}
                for m in tar.getmembers():
                    key, ext = m.name.split(".", 1)
                    pending.setdefault(key, {})[ext] = (shard, m.offset_data, m.size)
                members += [pending[k] for k in sorted(pending)]
        transform = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])

        def read(where):
            shard, offset, size = where
            with open(os.path.join(root, "pairs", shard), "rb") as f:
                f.seek(offset)
                return f.read(size)

        class Pairs(torch.utils.data.Dataset):
            def __len__(self):
                return len(members)

            def __getitem__(self, i):
                img = Image.open(io.BytesIO(read(members[i]["jpg"]))).convert("RGB")
                ids = torch.tensor(tokenizer.encode(read(members[i]["txt"]).decode()))
                return transform(img), ids

        dataset = Pairs()
        collate = lambda batch: (torch.stack([b[0] for b in batch]),
                                 torch.nn.utils.rnn.pad_sequence([b[1] for b in batch], batch_first=True))
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=True, num_workers=1,
                                         collate_fn=collate, persistent_workers=True)
    images, start = 0, None
    for epoch in range(2):
        for i, (x, _) in enumerate(loader):
            if start is None and epoch == 0 and i == 1:
                start = time.perf_counter()
                continue
            if start is not None:
                images += x.shape[0]
    return images / (time.perf_counter() - start)


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    n = int(os.environ.get("BENCH_IMAGES", "1000"))
    files = photos(n)
    with tempfile.TemporaryDirectory() as root:
        make_data(files, root)
        det_args = ["--dataset=coco/images", "--annotations=coco/instances.json", "--fields=image, boxes, labels",
                    "--pipeline=random_iou_crop(), random_horizontal_flip(0.5), resize_pad(512)"]
        clip_args = ["--dataset=pairs", "--fields=image=jpg, ids=tokens:txt", "--tokenizer=tok.model",
                     "--pipeline=random_resized_crop(224), random_horizontal_flip(0.5)"]
        results = {}
        for kind, args in (("detection", det_args), ("clip", clip_args)):
            rate, fields, _ = run_stoker(build, root, args)
            tv = torchvision_rate(kind, root, files)
            results[kind] = {"stoker_images_per_second": round(rate, 1), "torchvision_images_per_second": round(tv, 1),
                             "ratio": round(rate / tv, 2), "field_overhead_percent": fields}
            print(f"{kind}: stoker-server 1 worker {rate:.1f} images/s, torchvision DataLoader 1 worker "
                  f"{tv:.1f} images/s: {rate / tv:.2f}x (goal 2x); fields' share of the image bytes: "
                  + ", ".join(f"{k} {v:.3f}%" for k, v in fields.items()), flush=True)
        det = results["detection"]["field_overhead_percent"]
        print(f"detection wire overhead (boxes + labels over image bytes): {sum(det.values()):.3f}% (goal < 2%)")
        print(json.dumps(results))


if __name__ == "__main__":
    main()
