"""Detection targets end to end against references no one here wrote: a
COCO dataset whose masks (polygons, compressed and uncompressed RLE) equal
pycocotools' annToMask before augmentation, and whose boxes and masks after
crop, flip and resize equal Albumentations' given the same parameters (boxes
within 1e-3 px, masks exactly). Real stoker-server processes; run by ctest's
python_reference_parity with the build's pyenv (PyPI's pycocotools and
Albumentations, installed by `make pyenv`)."""

import importlib
import json
import os

import numpy as np
import pytest

import stoker
from conftest import Server

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # no network here


def _require(module):
    if os.environ.get("STOKER_REQUIRE_REFERENCES"):  # required: a missing reference fails the test
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"{module} (PyPI) is not installed here; `make pyenv` installs it")


# (width, height) of each image: every side at least 48 (the crops below).
SIZES = [(72, 50), (60, 72), (72, 72), (72, 64), (49, 72)]


def _blob(rng, h, w):
    """A random filled ellipse as a 0/1 mask."""
    yy, xx = np.mgrid[0:h, 0:w]
    cy, cx = rng.uniform(0.3 * h, 0.7 * h), rng.uniform(0.3 * w, 0.7 * w)
    ry, rx = rng.uniform(4, 0.4 * h), rng.uniform(4, 0.4 * w)
    return (((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1).astype(np.uint8)


def _uncompressed_counts(mask):
    flat = np.asfortranarray(mask).reshape(-1, order="F")
    counts, value, run = [], 0, 0
    for v in flat:
        if v == value:
            run += 1
        else:
            counts.append(run)
            value, run = v, 1
    counts.append(run)
    return counts


@pytest.fixture(scope="module")
def coco_root(tmp_path_factory):
    from PIL import Image

    mask_api = _require("pycocotools.mask")
    root = tmp_path_factory.mktemp("coco")
    os.makedirs(root / "images")
    rng = np.random.default_rng(5)
    images, annotations = [], []
    for i, (w, h) in enumerate(SIZES):
        image_id = 100 - 7 * i  # ids not in file order: samples follow the ids
        Image.fromarray(rng.integers(0, 255, size=(h, w, 3), dtype=np.uint8)).save(root / "images" / f"{i}.jpg")
        images.append({"id": image_id, "file_name": f"{i}.jpg", "width": w, "height": h})
        for k in range(3):
            ann = {"id": len(annotations) + 1, "image_id": image_id, "category_id": [3, 17, 90][k], "iscrowd": 0}
            if k == 0:  # polygons: a random hexagon and a triangle, merged
                cx, cy = rng.uniform(15, w - 15), rng.uniform(15, h - 15)
                angles = np.sort(rng.uniform(0, 2 * np.pi, 6))
                hexagon = np.stack([cx + 12 * np.cos(angles), cy + 10 * np.sin(angles)], 1).round(2).ravel().tolist()
                triangle = [2.5, 3.25, 14.75, 5.5, 6.0, 16.0]
                ann["segmentation"] = [hexagon, triangle]
            elif k == 1:  # compressed RLE
                rle = mask_api.encode(np.asfortranarray(_blob(rng, h, w)))
                ann["segmentation"] = {"counts": rle["counts"].decode("ascii"), "size": [h, w]}
                ann["iscrowd"] = 1
            else:  # uncompressed RLE
                ann["segmentation"] = {"counts": _uncompressed_counts(_blob(rng, h, w)), "size": [h, w]}
                ann["iscrowd"] = 1
            x0, y0 = rng.uniform(0, w / 2), rng.uniform(0, h / 2)
            ann["bbox"] = [round(x0, 3), round(y0, 3), round(rng.uniform(4, w - x0), 3), round(rng.uniform(4, h - y0), 3)]
            annotations.append(ann)
    categories = [{"id": 90, "name": "c90"}, {"id": 3, "name": "c3"}, {"id": 17, "name": "c17"}]
    with open(root / "instances.json", "w") as f:
        json.dump({"images": images, "annotations": annotations, "categories": categories}, f)
    return str(root)


@pytest.fixture(scope="module")
def coco_server(coco_root, tmp_path_factory):
    server = Server(coco_root, str(tmp_path_factory.mktemp("logs")), "--workers=2")
    yield server.address
    server.stop()


def detection_loader(address, pipeline, fields=("image", "boxes", "labels", "iscrowd", "masks")):
    return stoker.Loader(servers=address, dataset="images", annotations="instances.json", pipeline=pipeline,
                         fields=list(fields), batch_size=len(SIZES), seed=1, device="cpu", dtype="uint8",
                         layout="nhwc", ordered=True, drop_last=False)


def _coco(root):
    coco_api = _require("pycocotools.coco")
    return coco_api.COCO(os.path.join(root, "instances.json"))


def test_masks_before_augmentation_equal_pycocotools(coco_root, coco_server):
    coco = _coco(coco_root)
    ids = sorted(coco.imgs)  # CocoDetection's order
    cats = sorted(coco.cats)
    # resize_pad(72) leaves every image (longer side 72) at its size, padded at the bottom right.
    seen = 0
    loader = detection_loader(coco_server, "resize_pad(72)")
    batch = next(iter(loader))
    indices = loader.last_batch["sample_indices"]
    for row, index in enumerate(indices):
        image_id = ids[index]
        anns = coco.loadAnns(coco.getAnnIds(imgIds=[image_id]))
        img = coco.imgs[image_id]
        h, w = img["height"], img["width"]
        count = int(batch["masks_count"][row])
        assert count == len(anns) == int(batch["boxes_count"][row])
        for k, ann in enumerate(anns):
            expected = coco.annToMask(ann)
            mine = batch["masks"][row, k].numpy()
            assert np.array_equal(mine[:h, :w], expected), (image_id, ann["id"])
            assert not mine[h:, :].any() and not mine[:, w:].any()
            x, y, bw, bh = ann["bbox"]
            assert np.allclose(batch["boxes"][row, k].numpy(), [x, y, min(x + bw, w), min(y + bh, h)], atol=1e-3)
            assert int(batch["labels"][row, k]) == cats.index(ann["category_id"])
            assert int(batch["iscrowd"][row, k]) == ann["iscrowd"]
            seen += 1
    assert seen == 3 * len(SIZES)


def _albumentations(transforms):
    A = _require("albumentations")
    return A.Compose(transforms(A), bbox_params=A.BboxParams(format="pascal_voc", label_fields=["keys"],
                                                             min_visibility=0.0, min_area=0.0))


@pytest.mark.parametrize("pipeline, transforms", [
    # Stoker's centre crop box is torchvision's (round); given to Albumentations as a plain crop.
    ("center_crop(48), random_horizontal_flip(1), resize_pad(60)",
     lambda A, w, h: [A.Crop(x_min=round((w - 48) / 2), y_min=round((h - 48) / 2),
                             x_max=round((w - 48) / 2) + 48, y_max=round((h - 48) / 2) + 48),
                      A.HorizontalFlip(p=1), A.Resize(60, 60)]),
    ("random_vertical_flip(1), resize_pad(56)",
     lambda A, w, h: [A.VerticalFlip(p=1), A.LongestMaxSize(56),
                      A.PadIfNeeded(56, 56, position="top_left", border_mode=0, fill=0, fill_mask=0)]),
])
def test_boxes_and_masks_after_crop_flip_resize_equal_albumentations(coco_root, coco_server, pipeline, transforms):
    import cv2

    coco = _coco(coco_root)
    ids = sorted(coco.imgs)
    loader = detection_loader(coco_server, pipeline)
    batch = next(iter(loader))
    compared = 0
    for row, index in enumerate(loader.last_batch["sample_indices"]):
        image_id = ids[index]
        img = coco.imgs[image_id]
        anns = coco.loadAnns(coco.getAnnIds(imgIds=[image_id]))
        image = cv2.cvtColor(cv2.imread(os.path.join(coco_root, "images", img["file_name"])), cv2.COLOR_BGR2RGB)
        boxes = [[a["bbox"][0], a["bbox"][1], min(a["bbox"][0] + a["bbox"][2], img["width"]),
                  min(a["bbox"][1] + a["bbox"][3], img["height"])] for a in anns]
        compose = _albumentations(lambda A: transforms(A, img["width"], img["height"]))
        out = compose(image=image, bboxes=boxes, keys=list(range(len(anns))))
        # Each mask on its own through `mask=` (the transforms are not random here): this
        # Albumentations version resizes a `masks=` list otherwise than its `mask=` path.
        masks = [np.asarray(compose(image=image, mask=coco.annToMask(a), bboxes=[], keys=[])["mask"]) for a in anns]
        kept = [int(k) for k in out["keys"]]
        count = int(batch["boxes_count"][row])
        assert count == len(kept), (image_id, count, kept)
        for k, key in enumerate(kept):
            assert np.allclose(batch["boxes"][row, k].numpy(), out["bboxes"][k], atol=1e-3), (image_id, key)
            assert np.array_equal(batch["masks"][row, k].numpy(), masks[key]), (image_id, key)
            compared += 1
    assert compared >= len(SIZES)


def test_iou_crop_keeps_boxes_inside_and_is_deterministic(coco_server):
    pipeline = "random_iou_crop(), random_horizontal_flip(0.5), resize_pad(64)"
    a = next(iter(detection_loader(coco_server, pipeline, fields=("image", "boxes", "labels"))))
    b = next(iter(detection_loader(coco_server, pipeline, fields=("image", "boxes", "labels"))))
    assert np.array_equal(a["boxes"].numpy(), b["boxes"].numpy())
    assert np.array_equal(a["image"].numpy(), b["image"].numpy())
    boxes, counts = a["boxes"].numpy(), a["boxes_count"].numpy()
    for row, count in enumerate(counts):
        assert 0 <= count <= 3
        live = boxes[row, :count]
        assert (live >= 0).all() and (live <= 64).all()
        assert (live[:, 2] > live[:, 0]).all() and (live[:, 3] > live[:, 1]).all()
    assert a["labels"].shape[:2] == a["boxes"].shape[:2]


@pytest.mark.parametrize("angle", [30.0, -115.0])
def test_boxes_and_masks_follow_a_rotation_as_torchvision_rotates_them(coco_server, angle):
    """rotate() moves the targets with the pixels: each box is the box around
    its rotated corners (torchvision v2's rule), clipped to the image; each
    mask equals torchvision's F.rotate of the unrotated mask (nearest) but
    for pixels at exact ties."""
    import torch
    import torchvision.transforms.functional as F

    plain_loader = detection_loader(coco_server, "resize_pad(72)")
    plain = next(iter(plain_loader))
    turned_loader = detection_loader(coco_server, f"resize_pad(72), rotate(degrees={angle}:{angle})")
    turned = next(iter(turned_loader))
    assert plain_loader.last_batch["sample_indices"] == turned_loader.last_batch["sample_indices"]
    a = np.deg2rad(angle)
    c = 36.0  # the centre of the 72x72 image
    compared = 0
    for row in range(len(SIZES)):
        expected_boxes, expected_masks = [], []
        for k in range(int(plain["boxes_count"][row])):
            x1, y1, x2, y2 = plain["boxes"][row, k].tolist()
            corners = np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]]) - c
            # Counter-clockwise as seen (y points down): x' = x cos + y sin, y' = -x sin + y cos.
            xs = corners[:, 0] * np.cos(a) + corners[:, 1] * np.sin(a) + c
            ys = -corners[:, 0] * np.sin(a) + corners[:, 1] * np.cos(a) + c
            box = np.clip([xs.min(), ys.min(), xs.max(), ys.max()], 0, 72)
            if (box[2] - box[0]) * (box[3] - box[1]) <= 0:
                continue
            expected_boxes.append(box)
            mask = torch.from_numpy(plain["masks"][row, k].numpy())[None]
            expected_masks.append(F.rotate(mask, angle, interpolation=F.InterpolationMode.NEAREST)[0].numpy())
        assert int(turned["boxes_count"][row]) == len(expected_boxes)
        for k, box in enumerate(expected_boxes):
            assert np.allclose(turned["boxes"][row, k].numpy(), box, atol=1e-3), (row, k)
            mine = turned["masks"][row, k].numpy()
            assert (mine != expected_masks[k]).mean() < 0.01, (row, k)
            assert mine.sum() > 0
            compared += 1
    assert compared >= len(SIZES)


def test_detection_sessions_refuse_what_they_cannot_serve(coco_server):
    with pytest.raises(stoker.InvalidArgument, match="random_iou_crop chooses its crop by the boxes"):
        detection_loader(coco_server, "random_iou_crop(), resize_pad(64)", fields=("image", "labels"))
    with pytest.raises(stoker.NotFound, match="annotations 'missing.json' not found"):
        stoker.Loader(servers=coco_server, dataset="images", annotations="missing.json", pipeline="resize_pad(64)",
                      fields=["image", "boxes"], batch_size=2, device="cpu")


@pytest.fixture(scope="module")
def seg_root(tmp_path_factory):
    """images/ + masks/: palette PNG masks whose colours are all alike (only the indices carry the classes)."""
    from PIL import Image

    root = tmp_path_factory.mktemp("seg")
    rng = np.random.default_rng(9)
    for i, (w, h) in enumerate(SIZES):
        os.makedirs(root / "ds" / "images" / "part", exist_ok=True)
        os.makedirs(root / "ds" / "masks" / "part", exist_ok=True)
        Image.fromarray(rng.integers(0, 255, size=(h, w, 3), dtype=np.uint8)).save(root / "ds" / "images" / "part" / f"{i}.jpg")
        classes = (_blob(rng, h, w) * rng.integers(1, 20) + _blob(rng, h, w) * 7).astype(np.uint8)
        classes[0, :] = 255  # VOC's "ignore" border value
        mask = Image.fromarray(classes, mode="P")
        mask.putpalette([40, 50, 60] * 256)
        mask.save(root / "ds" / "masks" / "part" / f"{i}.png")
    return str(root)


def test_segmentation_masks_follow_the_pipeline_as_albumentations_moves_them(seg_root, tmp_path):
    from PIL import Image

    A = _require("albumentations")
    server = Server(seg_root, str(tmp_path), "--workers=1")
    try:
        loader = stoker.Loader(servers=server.address, dataset="ds", fields=["image", "mask"], batch_size=len(SIZES),
                               pipeline="center_crop(48), random_vertical_flip(1), resize_pad(40)", device="cpu",
                               dtype="uint8", layout="nhwc")
        batch = next(iter(loader))
        files = sorted(f"{i}" for i in range(len(SIZES)))
        assert tuple(batch["mask"].shape) == (len(SIZES), 40, 40)
        for row, index in enumerate(loader.last_batch["sample_indices"]):
            name = files[index]
            mask = np.array(Image.open(os.path.join(seg_root, "ds", "masks", "part", name + ".png")))
            h, w = mask.shape
            top, left = round((h - 48) / 2), round((w - 48) / 2)
            out = A.Compose([A.Crop(x_min=left, y_min=top, x_max=left + 48, y_max=top + 48), A.VerticalFlip(p=1),
                             A.Resize(40, 40)])(image=np.zeros((h, w, 3), np.uint8), mask=mask)["mask"]
            assert np.array_equal(batch["mask"][row].numpy(), np.asarray(out)), name
    finally:
        server.stop()


@pytest.mark.parametrize("mode,border", [("edge", 1), ("reflect", 4), ("symmetric", 2), ("constant", 0)])
def test_masks_are_padded_in_the_images_padding_mode_as_albumentations_pads_them(seg_root, tmp_path, mode, border):
    """Issue 49: pad(padding_mode=edge|reflect|symmetric) once mirrored the pixels but
    padded the mask with zeros (class 0). Albumentations' Pad pads a mask with the
    image's border mode (cv2: 1 replicate, 4 reflect-101, 2 reflect)."""
    from PIL import Image

    A = _require("albumentations")
    server = Server(seg_root, str(tmp_path), "--workers=1")
    try:
        loader = stoker.Loader(servers=server.address, dataset="ds", fields=["image", "mask"], batch_size=len(SIZES),
                               pipeline=f"center_crop(48), pad(padding=1:2:5:4, padding_mode={mode}), "
                               "center_crop(54)", device="cpu", dtype="uint8", layout="nhwc")
        batch = next(iter(loader))
        files = sorted(f"{i}" for i in range(len(SIZES)))
        border_classes = 0
        for row, index in enumerate(loader.last_batch["sample_indices"]):
            mask = np.array(Image.open(os.path.join(seg_root, "ds", "masks", "part", files[index] + ".png")))
            h, w = mask.shape
            top, left = round((h - 48) / 2), round((w - 48) / 2)
            out = A.Compose([A.Crop(x_min=left, y_min=top, x_max=left + 48, y_max=top + 48),
                             A.Pad(padding=(1, 2, 5, 4), border_mode=border, fill=0, fill_mask=0)])(
                                 image=np.zeros((h, w, 3), np.uint8), mask=mask)["mask"]
            assert np.asarray(out).shape == (54, 54)
            assert np.array_equal(batch["mask"][row].numpy(), np.asarray(out)), (mode, files[index])
            padded = np.ones((54, 54), bool)
            padded[2:50, 1:49] = False  # the 48 x 48 crop
            border_classes += int(np.count_nonzero(np.asarray(out)[padded]))
        assert (border_classes > 0) == (mode != "constant")  # mirrored classes in the border, not zeros
    finally:
        server.stop()


def test_keypoints_after_crop_and_resize_equal_albumentations_and_flip_about_the_edges(coco_root, coco_server):
    """Keypoints are continuous coordinates like boxes (pixel edges): crops and resizes equal
    Albumentations'; a flip maps x to W - x, where Albumentations, counting pixel indices, maps it to
    W - 1 - x (so the two differ by one after a flip, by convention)."""
    A = _require("albumentations")
    coco = _coco(coco_root)
    ids = sorted(coco.imgs)
    rng = np.random.default_rng(2)
    anns = []
    for image_id in ids:
        img = coco.imgs[image_id]
        kps = []
        for _ in range(3):
            kps += [round(float(rng.uniform(1, img["width"] - 1)), 2), round(float(rng.uniform(1, img["height"] - 1)), 2), 2]
        anns.append({"id": len(anns) + 1, "image_id": image_id, "category_id": 1, "iscrowd": 0,
                     "bbox": [0, 0, img["width"], img["height"]], "keypoints": kps, "num_keypoints": 3})
    with open(os.path.join(coco_root, "keypoints.json"), "w") as f:
        json.dump({"images": list(coco.imgs.values()), "annotations": anns,
                   "categories": [{"id": 1, "name": "p", "keypoints": ["a", "b", "c"]}]}, f)

    def served(pipeline):
        loader = stoker.Loader(servers=coco_server, dataset="images", annotations="keypoints.json", pipeline=pipeline,
                               fields=["image", "boxes", "keypoints"], batch_size=len(SIZES), device="cpu",
                               dtype="uint8", layout="nhwc")
        batch = next(iter(loader))
        return loader.last_batch["sample_indices"], batch["keypoints"].numpy()

    def reference(transforms, image_id, points):
        img = coco.imgs[image_id]
        out = A.Compose(transforms(img["width"], img["height"]),
                        keypoint_params=A.KeypointParams(format="xy", remove_invisible=False))(
            image=np.zeros((img["height"], img["width"], 3), np.uint8), keypoints=points)
        return np.asarray(out["keypoints"], dtype=np.float64)

    crop_resize = lambda w, h: [A.Crop(x_min=round((w - 48) / 2), y_min=round((h - 48) / 2),
                                       x_max=round((w - 48) / 2) + 48, y_max=round((h - 48) / 2) + 48),
                                A.Resize(60, 60)]
    indices, mine = served("center_crop(48), resize_pad(60)")
    for row, index in enumerate(indices):
        points = np.asarray(anns[index]["keypoints"], dtype=np.float64).reshape(-1, 3)
        expected = reference(crop_resize, ids[index], points[:, :2].tolist())
        assert np.allclose(mine[row, 0, :, :2], expected, atol=1e-3), (ids[index], mine[row, 0], expected)
    indices, flipped = served("center_crop(48), resize_pad(60), random_horizontal_flip(1)")
    for row, index in enumerate(indices):
        points = np.asarray(anns[index]["keypoints"], dtype=np.float64).reshape(-1, 3)
        expected = reference(lambda w, h: crop_resize(w, h) + [A.HorizontalFlip(p=1)], ids[index], points[:, :2].tolist())
        assert np.allclose(flipped[row, 0, :, 0], expected[:, 0] + 1, atol=1e-3)  # W - x vs W - 1 - x
        assert np.allclose(flipped[row, 0, :, 1], expected[:, 1], atol=1e-3)
