"""stoker.diagnose with a real torch training step names a bottleneck induced
on the server: one worker thread running an expensive augmentation (two colour jitters on
small source images, so that augmenting costs well over decoding)."""

import json

import torch

import stoker
from conftest import make_images


def test_diagnose_with_a_torch_step_names_an_induced_augmentation_bottleneck(start_server, tmp_path):
    root = tmp_path / "data"
    make_images(str(root / "ds"), classes=8, per_class=32, min_side=160, max_side=256)
    server = start_server("--workers=1", root=str(root))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=4), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(8, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    calls = [0]

    def train_step(images, labels):
        assert images.shape == (32, 3, 224, 224) and images.dtype == torch.float32
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        calls[0] += 1

    html, js = tmp_path / "ladder.html", tmp_path / "ladder.json"
    result = stoker.diagnose(
        dict(servers=server.address, dataset="ds", batch_size=32, device="cpu",
             pipeline="random_resized_crop(224), color_jitter(0.4, 0.4, 0.4, 0.1), color_jitter(0.4, 0.4, 0.4, 0.1)"),
        train_step, steps=8, warmup=2, html=str(html), json=str(js))
    names = [s["step"] for s in result["steps"]]
    assert names == ["device-cached", "host-cached", "server-cached batch", "server-cached decoded",
                     "server-cached raw", "full pipeline"]
    rates = ", ".join(f"{s['step']} {s['images_per_second']:.0f}/s" for s in result["steps"])
    assert result["bottleneck"] == "augment", rates
    # Every step ran the caller's own training step: device-cached and each
    # server step with their warm-up, host-cached without.
    assert calls[0] == (2 + 8) + 8 + 4 * (2 + 8)
    assert json.loads(js.read_text())["bottleneck"] == "augment"
    page = html.read_text()
    assert "<svg" in page and "augment" in page
    assert "bottleneck: augment" in result["table"]
