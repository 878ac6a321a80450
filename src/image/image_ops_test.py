#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kiln's image decoding and transforms (src/image) against Pillow and torchvision.

Writes test images with Pillow (PNG: RGB, RGBA, gray, gray+alpha, palette, 16-bit, interlaced;
JPEG: RGB at two qualities, gray, progressive), runs build/src/image/kiln_image_check on each
with a chain of steps, and compares its .npy with what Pillow (and torchvision's transforms, where
Debian's python3-torchvision is installed) computes on the same file:
  decode                 exactly (same libjpeg-turbo and libpng; PNG is lossless)
  resize, every filter   exactly (Pillow's fixed-point resampling reproduced), up and down
  torchvision pipeline   Resize(256) -> CenterCrop(224) -> ToTensor -> Normalize: within 1e-6

Usage: image_ops_test.py --check build/src/image/kiln_image_check
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

failures = []


def check(ok, what):
    print(("PASS  " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def kiln(tool, path, *steps):
    out = path + ".npy"
    r = subprocess.run([tool, path, out, *steps], capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    return np.load(out), ""


def make_images(tmp):
    rng = np.random.default_rng(0)
    h, w = 61, 83
    yy, xx = np.mgrid[0:h, 0:w]
    smooth = np.stack([(xx * 3) % 256, (yy * 4) % 256, (xx + yy) % 256], -1)
    noisy = np.clip(smooth + rng.integers(-40, 40, smooth.shape), 0, 255).astype(np.uint8)
    rgb = Image.fromarray(noisy, "RGB")
    files = {}

    def save(name, img, **kw):
        p = os.path.join(tmp, name)
        img.save(p, **kw)
        files[name] = p

    save("rgb.png", rgb)
    save("rgba.png", Image.fromarray(np.dstack([noisy, rng.integers(0, 255, (h, w), np.uint8)]),
                                     "RGBA"))
    save("gray.png", rgb.convert("L"))
    save("gray_alpha.png", rgb.convert("LA"))
    save("palette.png", rgb.convert("P", palette=Image.ADAPTIVE, colors=50))
    save("interlaced.png", rgb, interlace=1)
    save("gray16.png", Image.fromarray((noisy[..., 0].astype(np.uint16) * 257 + 3), "I;16"))
    save("q90.jpg", rgb, quality=90)
    save("q50.jpg", rgb, quality=50, subsampling=2)
    save("gray.jpg", rgb.convert("L"), quality=85)
    save("progressive.jpg", rgb, quality=80, progressive=True)
    big = Image.fromarray(np.clip(np.kron(noisy, np.ones((5, 4, 1))), 0, 255).astype(np.uint8))
    save("big.jpg", big, quality=92)  # 305 x 332, for the torchvision pipeline
    return files


def pil_rgb(path):
    img = Image.open(path)
    if img.mode in ("I", "I;16"):  # 16-bit gray: kiln keeps the high byte (Pillow's convert clips)
        a = (np.asarray(img).astype(np.uint32) >> 8).astype(np.uint8)
        return Image.fromarray(a, "L").convert("RGB")
    return img.convert("RGB")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = make_images(tmp)
        # Decoding.
        for name, path in files.items():
            got, err = kiln(args.check, path)
            want = np.asarray(pil_rgb(path))
            check(got is not None and got.shape == want.shape and np.array_equal(got, want),
                  f"decode {name}: equals Pillow's RGB {err}"
                  + ("" if got is None or got.shape != want.shape else
                     f" (max diff {int(np.abs(got.astype(int) - want).max())})"))
        got, err = kiln(args.check, files["q90.jpg"], "--gray")
        want = np.asarray(Image.open(files["q90.jpg"]).convert("L"))[..., None]
        check(got is not None and np.array_equal(got, want), f"decode --gray equals convert('L') {err}")
        # Resizing, each filter, down and up, non-integer ratios.
        filters = {"nearest": Image.NEAREST, "bilinear": Image.BILINEAR, "area": Image.BOX,
                   "bicubic": Image.BICUBIC}
        for name in ("rgb.png", "gray.png"):
            src = pil_rgb(files[name])
            for fname, f in filters.items():
                for (oh, ow) in ((24, 32), (61, 40), (100, 151), (7, 3), (122, 83)):
                    got, err = kiln(args.check, files[name], "--resize", str(oh), str(ow), fname)
                    want = np.asarray(src.resize((ow, oh), f))
                    ok = got is not None and got.shape == want.shape and np.array_equal(got, want)
                    diff = "" if got is None or got.shape != want.shape else \
                        f" (max diff {int(np.abs(got.astype(int) - want).max())})"
                    check(ok, f"resize {name} -> {oh}x{ow} {fname}: equals Pillow {err}{diff}")
        # The torchvision pipeline.
        try:
            import torch  # noqa: F401
            from torchvision import transforms
        except Exception as e:  # noqa: BLE001
            print(f"SKIP  torchvision pipeline: torchvision not importable ({e})")
        else:
            mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
            t = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                                    transforms.ToTensor(), transforms.Normalize(mean, std)])
            want = t(Image.open(files["big.jpg"]).convert("RGB")).numpy()
            got, err = kiln(args.check, files["big.jpg"], "--shorter", "256", "bilinear",
                            "--crop", "224", "224", "--normalize", ",".join(map(str, mean)),
                            ",".join(map(str, std)))
            check(got is not None and got.shape == want.shape
                  and float(np.abs(got - want).max()) <= 1e-6,
                  f"torchvision Resize/CenterCrop/ToTensor/Normalize within 1e-6 {err}"
                  + ("" if got is None or got.shape != want.shape else
                     f" (max diff {float(np.abs(got - want).max()):.2e})"))
        # Refusals.
        got, err = kiln(args.check, files["rgb.png"], "--max-pixels", "100")
        check(got is None and "over the limit of 100 pixels" in err, f"pixel limit: {err}")
        bad = os.path.join(tmp, "bad.png")
        with open(files["rgb.png"], "rb") as f:
            data = bytearray(f.read())
        with open(bad, "wb") as f:
            f.write(data[: len(data) // 2])
        got, err = kiln(args.check, bad)
        check(got is None and "corrupt PNG image" in err, f"truncated PNG: {err}")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
