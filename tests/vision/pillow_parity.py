#!/usr/bin/python3
"""The vision preprocessing against an independent reference: Pillow (Debian's python3-pil)
driving the released preprocessing math, written here in Python.

1. Token plans of 1,000 random sizes plus the extremes (1x1, 1x100000, exactly 8:1, primes),
   both span layouts: `flashserve image-info --sizes` must equal the reference exactly.
2. Pixels: pictures in every accepted format and mode (PNG RGB/RGBA/L/P/16-bit, JPEG with each
   EXIF orientation, WebP lossy and lossless, GIF, BMP) decoded, oriented, padded or stretched:
   within one level of Pillow's on at least 99.9% of values, identical plans.

Usage: pillow_parity.py FLASHSERVE_BINARY. Exit 77 (skipped) when Pillow or numpy is missing."""
import json

import os
import random
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from PIL import Image
    from vision_reference import MAX_WH, plan, reference_pixels
except ImportError as e:
    print(f"SKIP: {e} (scripts/setup.sh installs python3-pil and python3-numpy)")
    sys.exit(77)

def check_plans(binary, rng):
    sizes = [(1, 1), (1, 100000), (100000, 1), (8, 1), (800, 100), (801, 100), (7919, 7907), (13, 1009),
             (1009, 13), (2, 3), (65535, 65535), (1920, 1080), (1080, 1920), (378, 378), (14, 14 * 8)]
    for _ in range(1000):
        kind = rng.random()
        if kind < 0.4:
            sizes.append((rng.randint(1, 5000), rng.randint(1, 5000)))
        elif kind < 0.7:
            sizes.append((rng.randint(1, 400), rng.randint(1, 400)))
        else:
            w = rng.randint(1, 3000)
            sizes.append((w, max(1, int(w / rng.uniform(0.05, 20)))))
    text = "".join(f"{w} {h}\n" for w, h in sizes)
    for layout in ("v41", "vision-exp"):
        out = subprocess.run([binary, "image-info", "--sizes", "--layout", layout], input=text,
                             capture_output=True, text=True, check=True).stdout.splitlines()
        assert len(out) == len(sizes), f"{layout}: {len(out)} plans for {len(sizes)} sizes"
        for (w, h), line in zip(sizes, out):
            got, want = json.loads(line), plan(w, h, layout)
            assert got == want, f"{layout} {w}x{h}: flashserve {got} != reference {want}"
    print(f"plans: {len(sizes)} sizes x 2 layouts identical")


def picture(rng, w, h):
    """Smooth shapes plus noise, so resampling and codecs both have work to do."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    r = 127 + 120 * np.sin(x / max(w, 1) * rng.uniform(1, 12) + rng.uniform(0, 6))
    g = 127 + 120 * np.cos(y / max(h, 1) * rng.uniform(1, 12))
    b = (x * rng.uniform(0, 3) + y * rng.uniform(0, 3)) % 256
    rgb = np.stack([r, g, b], axis=-1) + np.asarray(
        [[[rng.gauss(0, 1) for _ in range(3)]]], dtype=np.float32) * 0
    noise = np.random.default_rng(rng.randint(0, 1 << 30)).normal(0, 12, (h, w, 3))
    return np.clip(rgb + noise, 0, 255).astype(np.uint8)


def write_pictures(folder, rng):
    sizes = [(640, 480), (1, 1), (3, 500), (500, 3), (1600, 200), (2000, 100), (801, 100), (1023, 769),
             (97, 89), (1920, 1080), (300, 2400), (14, 14), (2600, 1900)]
    sizes += [(rng.randint(1, 1500), rng.randint(1, 1500)) for _ in range(12)]
    files = []
    for i, (w, h) in enumerate(sizes):
        base = Image.fromarray(picture(rng, w, h), "RGB")
        kinds = ["png-rgb", "jpeg", "webp-lossless"]
        if i % 3 == 0 and w * h < 4e6:
            kinds += ["png-rgba", "png-l", "png-p", "png-16", "webp-lossy", "gif", "bmp"]
        for kind in kinds:
            path = os.path.join(folder, f"{i:02d}-{kind}." + kind.split("-")[0])
            if kind == "png-rgb":
                base.save(path)
            elif kind == "png-rgba":
                alpha = Image.fromarray((np.arange(w * h).reshape(h, w) % 256).astype(np.uint8), "L")
                rgba = base.copy()
                rgba.putalpha(alpha)
                rgba.save(path)
            elif kind == "png-l":
                base.convert("L").save(path)
            elif kind == "png-p":
                base.convert("P", palette=Image.Palette.ADAPTIVE, colors=200).save(path)
            elif kind == "png-16":
                arr16 = np.asarray(base, dtype=np.uint16) * 257 + 91
                import zlib, struct
                raw = b"".join(b"\0" + row.astype(">u2").tobytes() for row in arr16)
                def chunk(tag, data):
                    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))
                with open(path, "wb") as f:
                    f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0))
                            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
            elif kind == "jpeg":
                exif = Image.Exif()
                exif[0x0112] = i % 8 + 1
                base.save(path, quality=rng.choice([60, 85, 95]), exif=exif.tobytes())
            elif kind == "webp-lossless":
                base.save(path, lossless=True)
            elif kind == "webp-lossy":
                base.save(path, quality=80)
            elif kind == "gif":
                base.save(path)
            elif kind == "bmp":
                base.save(path)
            files.append(path)
    return files


def check_pixels(binary, rng, folder):
    files = write_pictures(folder, rng)
    out_dir = os.path.join(folder, "out")
    os.mkdir(out_dir)
    run = subprocess.run([binary, "image-info", "--pixels-dir", out_dir, *files], capture_output=True, text=True)
    assert run.returncode == 0, f"image-info failed:\n{run.stderr}"
    lines = run.stdout.splitlines()
    assert len(lines) == len(files)
    total = within = exact = 0
    worst = (2.0, "")
    for path, line in zip(files, lines):
        got = json.loads(line)
        want_plan, want = reference_pixels(path)
        for key in ("resized", "stretch", "vit_grid", "llm_grid", "tokens"):
            assert got[key] == want_plan[key], f"{path}: {key} {got[key]} != {want_plan[key]}"
        bw, bh = want_plan["resized"]
        mine = np.fromfile(got["pixels"], dtype=np.uint8).reshape(bh, bw, 3)
        diff = np.abs(mine.astype(np.int16) - want.astype(np.int16))
        total += diff.size
        within += int((diff <= 1).sum())
        exact += int((diff == 0).sum())
        share = float((diff <= 1).mean())
        worst = min(worst, (share, os.path.basename(path)))
        assert share >= 0.999, f"{path}: only {share:.5f} of values within one level (max diff {diff.max()})"
    print(f"pixels: {len(files)} pictures, {total} values, {within / total:.6f} within one level, "
          f"{exact / total:.6f} identical; worst {worst[1]} {worst[0]:.6f}")


def main():
    binary = sys.argv[1]
    rng = random.Random(20261205)
    check_plans(binary, rng)
    with tempfile.TemporaryDirectory() as folder:
        check_pixels(binary, rng, folder)


if __name__ == "__main__":
    main()
