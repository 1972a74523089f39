"""An independent reference of the DeepSeek-V4 vision preprocessing and tower, for the tests:
the published plan arithmetic and Pillow's resize/pad (reference_pixels), and the ViT + aligner
in numpy (float64) on weights read straight from the safetensors files (tower)."""
import glob
import json
import math
import os

import numpy as np
from PIL import Image, ImageOps

PATCH, RATIO, MAX_TOKENS, MIN_PIXELS, MAX_WH = 14, 3, 384, 147456, 8
PAD_TO = 4


def v41_grid(bh, bw):
    h, w = math.ceil((bh // PATCH) / RATIO), math.ceil((bw // PATCH) / RATIO)
    return h, w, h * (w + 1) + 2


def largest_grid(height, width, budget):
    """The unrounded aligner grid (w, h) of this aspect ratio that spends the token budget."""
    r = height / width
    max_w = math.sqrt((budget - 2) / r + 0.25) - 0.5
    return max_w, max_w * r


def v41_solve(height, width, budget):
    max_w, max_h = largest_grid(height, width, budget)
    cell = PATCH * RATIO
    if max_w < 1.0:
        return (budget - 2) // 2 * cell, cell
    if max_h < 1.0:
        return cell, (budget - 3) * cell
    beta = min(math.floor(max_w) * cell / width, math.floor(max_h) * cell / height)
    return math.floor(height * beta / PATCH) * PATCH, math.floor(width * beta / PATCH) * PATCH


def exp_grid(bh, bw):
    h, w, n = v41_grid(bh, bw)
    if h % 2 == 1:
        n += w + 1
    n += (h + 1) // 2 * (w + 1) % 2 * 2
    return h, w, n


def exp_solve(height, width, budget):
    max_w_f, max_h_f = largest_grid(height, width, budget)
    cell = PATCH * RATIO
    if max_w_f < 1.0:
        max_h = (budget - 2) // 2
        max_h -= max_h % 2
        return max_h * cell, cell
    if max_h_f < 2.0:
        return 2 * cell, ((budget - 2) // 2 - 1) * cell
    max_w, max_h = math.floor(max_w_f), math.floor(max_h_f)
    max_h -= max_h % 2
    beta = min(max_w * cell / width, max_h * cell / height)
    return math.floor(height * beta / PATCH) * PATCH, math.floor(width * beta / PATCH) * PATCH


def plan(width0, height0, layout):
    width, height = width0, height0
    if width > height * MAX_WH:
        width = height * MAX_WH
    if 0 < width * height < MIN_PIXELS:
        ratio = (MIN_PIXELS / (width * height)) ** 0.5
        width, height = int(width * ratio), int(height * ratio)
    bw, bh = math.ceil(width / PATCH) * PATCH, math.ceil(height / PATCH) * PATCH
    if layout == "v41":
        gh, gw, n = v41_grid(bh, bw)
        if n > MAX_TOKENS:
            bh, bw = v41_solve(height, width, MAX_TOKENS)
            gh, gw, n = v41_grid(bh, bw)
    else:
        limit = MAX_TOKENS - (PAD_TO - 1)
        gh, gw, n = exp_grid(bh, bw)
        budget = limit
        while n > limit:
            bh, bw = exp_solve(height, width, budget)
            gh, gw, n = exp_grid(bh, bw)
            budget -= 1
    return {"width": width0, "height": height0, "resized": [bw, bh], "stretch": width0 >= MAX_WH * height0,
            "vit_grid": [bh // PATCH, bw // PATCH], "llm_grid": [gh, gw], "tokens": n}


def reference_pixels(path):
    image = ImageOps.exif_transpose(Image.open(path))
    image = image.convert("RGB")
    p = plan(image.width, image.height, "v41")
    bw, bh = p["resized"]
    if image.width >= MAX_WH * image.height:
        image = image.resize((bw, bh))
    else:
        image = ImageOps.pad(image, (bw, bh), color=(127, 127, 127))
    return p, np.asarray(image, dtype=np.uint8)



def patches_of(pixels, patch=PATCH):
    """[vit_h * vit_w, 3 * p * p] in reading order, channel-major inside a patch, normalised
    ((v / 255) - 0.5) / 0.5 and rounded to bfloat16 as the released preprocessing does."""
    h, w, _ = pixels.shape
    x = (pixels.astype(np.float32) / np.float32(255) - np.float32(0.5)) / np.float32(0.5)
    bits = x.view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    x = bits.astype(np.uint32).view(np.float32)
    x = x.transpose(2, 0, 1).reshape(3, h // patch, patch, w // patch, patch)
    return x.transpose(1, 3, 0, 2, 4).reshape((h // patch) * (w // patch), 3 * patch * patch).astype(np.float64)


def load_tensors(model_dir, prefixes=("vision.", "aligner.", "image_")):
    """The named tensors of a checkpoint's safetensors files, as float64 arrays."""
    out = {}
    for path in sorted(glob.glob(os.path.join(model_dir, "*.safetensors"))):
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size))
            base = 8 + size
            for name, info in header.items():
                if name == "__metadata__" or not name.startswith(prefixes):
                    continue
                begin, end = info["data_offsets"]
                f.seek(base + begin)
                raw = f.read(end - begin)
                if info["dtype"] == "BF16":
                    arr = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
                elif info["dtype"] == "F32":
                    arr = np.frombuffer(raw, dtype=np.float32)
                else:
                    raise ValueError(f"{name}: unexpected dtype {info['dtype']}")
                out[name] = arr.astype(np.float64).reshape(info["shape"])
    return out


def rms_norm(x, weight, eps=1e-6):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * weight


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def tower(t, patches, vit_h, vit_w, cfg):
    """ViT + aligner of vLLM's deepseek_v4/common/vision.py, in float64."""
    dim, heads, ratio = cfg["hidden_size"], cfg["num_attention_heads"], cfg["downsample_ratio"]
    hd = dim // heads
    rope_dim = hd // 2
    inv_freq = 1.0 / (cfg["rope_theta"] ** (np.arange(0, rope_dim, 2) / rope_dim))
    hpos, wpos = np.divmod(np.arange(vit_h * vit_w), vit_w)
    freqs = np.concatenate([hpos[:, None] * inv_freq, wpos[:, None] * inv_freq], axis=-1)[:, None, :]
    cos, sin = np.cos(freqs), np.sin(freqs)
    x = patches @ t["vision.patch_embed.proj.weight"].T + t["vision.patch_embed.proj.bias"]
    n = x.shape[0]
    for i in range(cfg["num_hidden_layers"]):
        p = f"vision.blocks.{i}."
        qkv = rms_norm(x, t[p + "norm1.weight"]) @ t[p + "attn.wqkv.weight"].T + t[p + "attn.wqkv.bias"]
        q, k, v = (a.reshape(n, heads, hd) for a in np.split(qkv, 3, axis=-1))
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        scores = np.einsum("ihc,jhc->hij", q, k) / math.sqrt(hd)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        o = np.einsum("hij,jhc->ihc", scores, v).reshape(n, dim)
        x = x + o @ t[p + "attn.wo.weight"].T + t[p + "attn.wo.bias"]
        gate_up = rms_norm(x, t[p + "norm2.weight"]) @ t[p + "mlp.w1.weight"].T
        g, u = np.split(gate_up, 2, axis=-1)
        x = x + (g / (1 + np.exp(-g)) * u) @ t[p + "mlp.w2.weight"].T
    vit = rms_norm(x, t["vision.norm.weight"])
    grid = vit.reshape(vit_h, vit_w, dim)
    rows, cols = -(-vit_h // ratio), -(-vit_w // ratio)
    padded = np.zeros((rows * ratio, cols * ratio, dim))
    padded[:vit_h, :vit_w] = grid
    # unfold: channel-major groups of ratio x ratio, cells in reading order
    merged = padded.reshape(rows, ratio, cols, ratio, dim).transpose(0, 2, 4, 1, 3).reshape(rows * cols, -1)
    hidden = merged @ t["aligner.w1.weight"].T + t["aligner.w1.bias"]
    hidden = 0.5 * hidden * (1 + np.vectorize(math.erf)(hidden / math.sqrt(2)))
    aligner = hidden @ t["aligner.w2.weight"].T + t["aligner.w2.bias"]
    return vit, aligner
