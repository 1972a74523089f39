#!/usr/bin/python3
"""The CPU vision tower against an independent numpy reference: a random tiny-v41 checkpoint with
its two-layer tower, pictures of several shapes (padded, stretched, upscaled), and
`flashserve image-info --model` writing the patches, the ViT output and the aligner rows. The
patches must equal the reference's bit for bit; the ViT and aligner outputs must match the
float64 reference to a relative error of 1e-4 (and a cosine above 0.999999).

The checked-in fixture (fixtures/tower_tiny_v41_seed7.npz: the reference's ViT and aligner
outputs for fixtures/noise_33x17.png on the seed-7 checkpoint) must match both the tower and
the live reference, so neither can drift unnoticed. `--write-fixtures` rewrites it (only when the
generated checkpoint changes on purpose).

Usage: tower_reference.py FLASHSERVE TOKENIZER [--write-fixtures]. Exit 77 (skipped) without
numpy, Pillow or the tokenizer."""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from PIL import Image
    from vision_reference import load_tensors, patches_of, reference_pixels, tower
except ImportError as e:
    print(f"SKIP: {e} (scripts/setup.sh installs python3-pil and python3-numpy)")
    sys.exit(77)


def compare(name, got, want):
    err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
    cos = float((got * want).sum() / np.sqrt((got * got).sum() * (want * want).sum()))
    assert err < 1e-4 and cos > 0.999999, f"{name}: relative error {err:.3g}, cosine {cos:.9f}"
    return err


HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "tower_tiny_v41_seed7.npz")
FIXTURE_PICTURE = os.path.join(HERE, "fixtures", "noise_33x17.png")


def check_fixture(binary, model, cfg, weights, out, write):
    """The tower and the live reference against the checked-in reference outputs."""
    run = subprocess.run([binary, "image-info", "--model", model, "--tower-out", out, FIXTURE_PICTURE],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    vit_h, vit_w = json.loads(run.stdout.splitlines()[0])["vit_grid"]
    _, pixels = reference_pixels(FIXTURE_PICTURE)
    want_vit, want_aligner = tower(weights, patches_of(pixels, cfg["patch_size"]), vit_h, vit_w, cfg)
    if write:
        np.savez_compressed(FIXTURE, vit=want_vit.astype(np.float32), aligner=want_aligner.astype(np.float32))
        print(f"wrote {FIXTURE}")
    fixture = np.load(FIXTURE)
    name = os.path.join(out, os.path.basename(FIXTURE_PICTURE))
    got_vit = np.fromfile(name + ".vit.f32", dtype=np.float32).astype(np.float64)
    got_aligner = np.fromfile(name + ".aligner.f32", dtype=np.float32).astype(np.float64)
    for part, got, live in (("vit", got_vit, want_vit), ("aligner", got_aligner, want_aligner)):
        stored = fixture[part].astype(np.float64)
        assert stored.size == got.size, f"fixture {part}: {stored.size} values, the tower gives {got.size}"
        compare(f"fixture {part} vs the live reference (regenerate with --write-fixtures only if the "
                f"generated checkpoint changed on purpose)", live.reshape(stored.shape), stored)
        compare(f"fixture {part} vs the tower", got.reshape(stored.shape), stored)
    print(f"fixture: {os.path.basename(FIXTURE_PICTURE)} -> vit {vit_h}x{vit_w}, "
          f"{fixture['aligner'].shape[0]} aligner rows, matched")


def main():
    binary, tokenizer = sys.argv[1], sys.argv[2]
    write = "--write-fixtures" in sys.argv[3:]
    if not os.path.exists(tokenizer):
        print(f"SKIP: tokenizer {tokenizer} missing (run scripts/setup.sh)")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as folder:
        model = os.path.join(folder, "model")
        subprocess.run([binary, "make-model", "--preset", "tiny-v41", "--out", model, "--tokenizer", tokenizer,
                        "--seed", "7"], check=True, capture_output=True)
        cfg = json.load(open(os.path.join(model, "config.json")))["vision_config"]
        weights = load_tensors(model)
        rng = np.random.default_rng(5)
        pictures = []
        for i, (w, h) in enumerate([(200, 120), (90, 700), (1600, 150), (33, 17)]):
            path = os.path.join(folder, f"pic{i}.png")
            Image.fromarray((rng.random((h, w, 3)) * 255).astype(np.uint8)).save(path)
            pictures.append(path)
        out = os.path.join(folder, "out")
        os.mkdir(out)
        run = subprocess.run([binary, "image-info", "--model", model, "--tower-out", out, *pictures],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        worst = 0.0
        for path, line in zip(pictures, run.stdout.splitlines()):
            info = json.loads(line)
            vit_h, vit_w = info["vit_grid"]
            _, pixels = reference_pixels(path)
            want_patches = patches_of(pixels, cfg["patch_size"])
            name = os.path.join(out, os.path.basename(path))
            got_patches = np.fromfile(name + ".patches.f32", dtype=np.float32).astype(np.float64)
            assert np.array_equal(got_patches, want_patches.reshape(-1)), f"{path}: patches differ"
            want_vit, want_aligner = tower(weights, want_patches, vit_h, vit_w, cfg)
            got_vit = np.fromfile(name + ".vit.f32", dtype=np.float32).astype(np.float64).reshape(want_vit.shape)
            got_aligner = np.fromfile(name + ".aligner.f32", dtype=np.float32).astype(np.float64)
            assert got_aligner.size == want_aligner.size, f"{path}: {got_aligner.size} aligner values"
            worst = max(worst, compare(f"{path} vit", got_vit, want_vit),
                        compare(f"{path} aligner", got_aligner.reshape(want_aligner.shape), want_aligner))
            print(f"{os.path.basename(path)}: {info['width']}x{info['height']} -> vit {vit_h}x{vit_w}, "
                  f"aligner {info['llm_grid']}, tokens {info['tokens']}")
        print(f"tower: {len(pictures)} pictures, worst relative error {worst:.3g}")
        check_fixture(binary, model, cfg, weights, out, write)


if __name__ == "__main__":
    main()
