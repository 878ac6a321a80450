#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Exports the breadth suite (bench/breadth/run.py): torchvision's families and transformers
written in torch, at several opsets, with real inputs, into one folder.

Every model has random weights (seeded: the machine reaches no model hub) and is exported with
Debian's python3-torch / python3-torchvision 0.14, so that kiln and ONNX Runtime run the very same
file. Families:

  classification  AlexNet, VGG-16, ResNet-18/34/50, Wide ResNet-50-2, ResNeXt-50, DenseNet-121,
                  SqueezeNet 1.1, GoogLeNet, Inception v3 (299x299), MobileNetV2, MobileNetV3
                  large and small, ShuffleNetV2 x0.5 and x1.0, MNASNet 0.5 and 1.0,
                  EfficientNet-B0, EfficientNetV2-S, RegNetX-400MF, RegNetY-800MF, ConvNeXt-T,
                  ViT-B/16 and B/32, Swin-T, MaxViT-T: input [N,3,224,224], symbolic batch
  segmentation    FCN-ResNet50, DeepLabV3-ResNet50 and DeepLabV3-MobileNetV3 (dilated
                  convolutions), LR-ASPP: input [N,3,256,256], output "out" only
  detection       SSDlite320-MobileNetV3, SSD300-VGG16, Faster R-CNN MobileNetV3-320-FPN,
                  RetinaNet-ResNet50-FPN, FCOS-ResNet50-FPN: the N images of a [N,3,S,S] input
                  (S = 320, 300 for SSD300) are the model's image list, so each batch size is
                  its own file; outputs boxes, scores and labels of every image
  video           R3D-18, MC3-18 and R(2+1)D-18 on an 8-frame 112x112 clip ([N,3,8,112,112]),
                  S3D on a 16-frame 224x224 clip
  transformer     encoder_base (12 layers, hidden 768, 12 heads, FFN 3072) and encoder_small
                  (6 layers, 384, 6 heads, 1536) on token ids and an attention mask, sequence
                  128, written op by op (LayerNorm, GELU, attention) as a user's model is;
                  encoder_torch, the same shape as encoder_small built from torch's own
                  nn.TransformerEncoder (nn.LayerNorm: LayerNormalization at opset 17);
                  decoder_kv, a GPT-style decoder (6 layers, hidden 512, 8 heads, vocabulary
                  8192) running one decode step: the new token's id [N,1] and the key / value
                  cache [6,N,8,128,64] in, logits and the cache grown by one position out;
                  decoder_chunk, the same decoder prefilling a 32-token chunk of a prompt after
                  96 cached tokens (a causal mask over the chunk).

Real inputs: the images are crops of one photograph (scipy's `face`), normalized as torchvision's
ImageNet weights expect, a different crop per batch item; the clip is a panning sequence of crops;
the token ids come from an English sentence hashed into the vocabulary.

  bench/breadth/export_models.py --out build/breadth-models [--models resnet50,decoder_kv]
                                 [--opsets 13,17] [--batches 1,8]

Writes <name>-op<opset>[-b<batch>].onnx, the inputs as .npy next to them, and manifest.json
(every file with its family, opset, batches and inputs). A model file that already exists is kept
(delete it, or pass --force, to re-export). An architecture that does not export is reported and
skipped; the exit status is 1 if any did.
"""
import argparse
import hashlib
import json
import os
import sys
import time
import traceback

IMAGE_MEAN = (0.485, 0.456, 0.406)
IMAGE_STD = (0.229, 0.224, 0.225)
SEQ = 128
SENTENCE = ("a server never has its cores to itself and a user brings their own model so the engine "
            "must be fast on every architecture not only the four it was tuned on while other "
            "work shares the machine and the requests keep arriving from many clients at once")

# name: (family, image side in pixels; None for the transformers).
MODELS = {
    "alexnet": ("classification", 224),
    "vgg16": ("classification", 224),
    "resnet18": ("classification", 224),
    "resnet34": ("classification", 224),
    "resnet50": ("classification", 224),
    "wide_resnet50_2": ("classification", 224),
    "resnext50_32x4d": ("classification", 224),
    "densenet121": ("classification", 224),
    "squeezenet1_1": ("classification", 224),
    "googlenet": ("classification", 224),
    "inception_v3": ("classification", 299),
    "mobilenet_v2": ("classification", 224),
    "mobilenet_v3_large": ("classification", 224),
    "mobilenet_v3_small": ("classification", 224),
    "shufflenet_v2_x0_5": ("classification", 224),
    "shufflenet_v2_x1_0": ("classification", 224),
    "mnasnet0_5": ("classification", 224),
    "mnasnet1_0": ("classification", 224),
    "efficientnet_b0": ("classification", 224),
    "efficientnet_v2_s": ("classification", 224),
    "regnet_x_400mf": ("classification", 224),
    "regnet_y_800mf": ("classification", 224),
    "convnext_tiny": ("classification", 224),
    "vit_b_16": ("classification", 224),
    "vit_b_32": ("classification", 224),
    "swin_t": ("classification", 224),
    "maxvit_t": ("classification", 224),
    "fcn_resnet50": ("segmentation", 256),
    "deeplabv3_resnet50": ("segmentation", 256),
    "deeplabv3_mobilenet_v3_large": ("segmentation", 256),
    "lraspp_mobilenet_v3_large": ("segmentation", 256),
    "ssdlite320_mobilenet_v3_large": ("detection", 320),
    "ssd300_vgg16": ("detection", 300),
    "fasterrcnn_mobilenet_v3_large_320_fpn": ("detection", 320),
    "retinanet_resnet50_fpn": ("detection", 320),
    "fcos_resnet50_fpn": ("detection", 320),
    "r3d_18": ("video", 112),
    "mc3_18": ("video", 112),
    "r2plus1d_18": ("video", 112),
    "s3d": ("video", 224),
    "encoder_base": ("transformer", None),
    "encoder_small": ("transformer", None),
    "encoder_torch": ("transformer", None),
    "decoder_kv": ("transformer", None),
    "decoder_chunk": ("transformer", None),
}
ENCODERS = {"encoder_base": (12, 768, 12, 3072), "encoder_small": (6, 384, 6, 1536),
            "encoder_torch": (6, 384, 6, 1536)}
VOCAB = 8192
DECODER = dict(layers=6, hidden=512, heads=8, ffn=2048, past=SEQ)
# Decode step: 1 new token after 128 cached; chunk: 32 prompt tokens after 96 cached.
DECODER_STEPS = {"decoder_kv": (SEQ, 1), "decoder_chunk": (96, 32)}
CLIP_FRAMES = {"s3d": 16}  # frames per clip (default 8)


# --- inputs -------------------------------------------------------------------------------------

def photo():
    """One real photograph, HxWx3 uint8 (scipy's bundled raccoon face, 768x1024)."""
    import numpy as np
    try:
        from scipy import datasets
        return np.asarray(datasets.face())
    except Exception:  # noqa: BLE001 (older scipy: the picture ships with scipy.misc)
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from scipy import misc
            return np.asarray(misc.face())


def crop(img, size, index, frames=None):
    """A size x size crop of `img`, its place chosen by `index`, resized with bilinear
    interpolation from a square of 1.5 x size, as float CHW in [0, 1]."""
    import numpy as np
    import torch
    h, w, _ = img.shape
    side = min(h, w, int(size * 1.5) + 64)
    y = (index * 97) % (h - side + 1)
    x = (index * 211 + (frames or 0) * 9) % (w - side + 1)
    patch = torch.from_numpy(np.ascontiguousarray(img[y:y + side, x:x + side])).float() / 255.0
    patch = patch.permute(2, 0, 1).unsqueeze(0)
    out = torch.nn.functional.interpolate(patch, size=(size, size), mode="bilinear",
                                          align_corners=False)
    return out[0]


def normalize(chw):
    import torch
    mean = torch.tensor(IMAGE_MEAN).view(3, 1, 1)
    std = torch.tensor(IMAGE_STD).view(3, 1, 1)
    return (chw - mean) / std


def token_ids(batch, length, vocab):
    """Token ids of SENTENCE's words (a stable hash into the vocabulary), one rotation of the
    sentence per batch item, id 1 first as a [CLS]-like token."""
    import numpy as np
    words = SENTENCE.split()
    ids = np.zeros((batch, length), dtype=np.int64)
    for b in range(batch):
        for t in range(length):
            if t == 0:
                ids[b, t] = 1
                continue
            word = words[(t - 1 + 3 * b) % len(words)]
            ids[b, t] = 2 + int(hashlib.sha1(word.encode()).hexdigest(), 16) % (vocab - 2)
    return ids


def make_inputs(name, batch):
    """Real inputs of model `name` at `batch`: {input name: numpy array}."""
    import numpy as np
    import torch
    family, size = MODELS[name]
    if family in ("classification", "segmentation"):
        img = photo()
        x = torch.stack([normalize(crop(img, size, i)) for i in range(batch)])
        return {"input": x.numpy().astype(np.float32)}
    if family == "detection":
        img = photo()
        x = torch.stack([crop(img, size, i) for i in range(batch)])  # detectors normalize
        return {"images": x.numpy().astype(np.float32)}
    if family == "video":
        img = photo()
        frames = CLIP_FRAMES.get(name, 8)
        clips = [torch.stack([normalize(crop(img, size, i, frames=f)) for f in range(frames)],
                             dim=1) for i in range(batch)]
        return {"input": torch.stack(clips).numpy().astype(np.float32)}
    if name in ENCODERS:
        ids = token_ids(batch, SEQ, VOCAB)
        mask = np.ones((batch, SEQ), dtype=np.int64)
        for b in range(batch):  # a padded tail on every other item
            if b % 2 == 1:
                mask[b, SEQ - 16 * (1 + b % 4):] = 0
        return {"input_ids": ids, "attention_mask": mask}
    if name in DECODER_STEPS:
        # The cache a prefill of SENTENCE's tokens left: run the torch decoder over the prompt.
        past, new = DECODER_STEPS[name]
        module = build_module(name)
        ids = token_ids(batch, past + new, VOCAB)
        with torch.no_grad():
            k, v = module.prefill(torch.from_numpy(ids[:, :past]))
        return {"input_ids": ids[:, past:], "past_key": k.numpy().astype(np.float32),
                "past_value": v.numpy().astype(np.float32)}
    raise KeyError(name)


# --- modules ------------------------------------------------------------------------------------

def _layer_norm_module(torch, d):
    nn = torch.nn

    class LayerNorm(nn.Module):
        """LayerNorm written out (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add)."""

        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d) + 0.1 * torch.randn(d))
            self.bias = nn.Parameter(0.1 * torch.randn(d))

        def forward(self, x):
            mean = x.mean(-1, keepdim=True)
            var = (x - mean).pow(2).mean(-1, keepdim=True)
            return (x - mean) / torch.sqrt(var + 1e-12) * self.weight + self.bias

    return LayerNorm()


def build_encoder(layers, hidden, heads, ffn):
    import torch
    nn = torch.nn

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
            self.o = nn.Linear(hidden, hidden)
            self.ln1 = _layer_norm_module(torch, hidden)
            self.up, self.down = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)
            self.ln2 = _layer_norm_module(torch, hidden)

        def forward(self, x, bias):
            n, t, _ = x.shape
            split = lambda y: y.view(n, t, heads, hidden // heads).transpose(1, 2)  # noqa: E731
            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / float((hidden // heads) ** 0.5)
            ctx = torch.matmul(torch.softmax(scores + bias, dim=-1), v)
            x = self.ln1(x + self.o(ctx.transpose(1, 2).reshape(n, t, hidden)))
            h = self.up(x)
            h = 0.5 * h * (1.0 + torch.erf(h / 1.4142135623730951))
            return self.ln2(x + self.down(h))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(VOCAB, hidden)
            self.pos = nn.Embedding(SEQ, hidden)
            self.ln = _layer_norm_module(torch, hidden)
            self.layers = nn.ModuleList(Layer() for _ in range(layers))

        def forward(self, input_ids, attention_mask):
            t = input_ids.shape[1]
            x = self.ln(self.tok(input_ids) + self.pos(torch.arange(t).unsqueeze(0)))
            bias = (1.0 - attention_mask.to(torch.float32)).unsqueeze(1).unsqueeze(2) * -10000.0
            for layer in self.layers:
                x = layer(x, bias)
            return x

    return Encoder()


def build_torch_encoder(layers, hidden, heads, ffn):
    """An encoder of torch's own modules (nn.TransformerEncoderLayer: nn.MultiheadAttention,
    nn.LayerNorm, GELU), post-norm as BERT, with a key padding mask."""
    import torch
    nn = torch.nn

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(VOCAB, hidden)
            self.pos = nn.Embedding(SEQ, hidden)
            self.ln = nn.LayerNorm(hidden)
            layer = nn.TransformerEncoderLayer(hidden, heads, ffn, dropout=0.0,
                                               activation="gelu", batch_first=True)
            self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

        def forward(self, input_ids, attention_mask):
            t = input_ids.shape[1]
            x = self.ln(self.tok(input_ids) + self.pos(torch.arange(t).unsqueeze(0)))
            return self.enc(x, src_key_padding_mask=attention_mask == 0)

    return Encoder()


def build_decoder(layers, hidden, heads, ffn, past):
    import torch
    nn = torch.nn
    head = hidden // heads

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = _layer_norm_module(torch, hidden)
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.o = nn.Linear(hidden, hidden)
            self.ln2 = _layer_norm_module(torch, hidden)
            self.up, self.down = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

        def forward(self, x, past_k, past_v):
            n, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(hidden, dim=-1)
            split = lambda y: y.view(n, t, heads, head).transpose(1, 2)  # noqa: E731
            q, k, v = split(q), split(k), split(v)
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
            scores = torch.matmul(q, k.transpose(-1, -2)) / float(head ** 0.5)
            if t > 1:  # causal mask for the prompt; one new token sees everything
                total = k.shape[2]
                # Query i (at position total - t + i) sees keys j <= total - t + i; written
                # without triu, which opset 13 lacks.
                later = torch.arange(total).unsqueeze(0) > \
                    torch.arange(t).unsqueeze(1) + (total - t)
                mask = later.to(torch.float32) * -10000.0
                scores = scores + mask
            ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
            x = x + self.o(ctx.transpose(1, 2).reshape(n, t, hidden))
            h = self.up(self.ln2(x))
            h = 0.5 * h * (1.0 + torch.erf(h / 1.4142135623730951))
            return x + self.down(h), k, v

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(VOCAB, hidden)
            self.pos = nn.Embedding(past + 64, hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = _layer_norm_module(torch, hidden)
            self.head = nn.Linear(hidden, VOCAB, bias=False)

        def forward(self, input_ids, past_key, past_value):
            start = past_key.shape[3]
            positions = torch.arange(input_ids.shape[1]) + start
            x = self.tok(input_ids) + self.pos(positions).unsqueeze(0)
            keys, values = [], []
            for i, block in enumerate(self.blocks):
                x, k, v = block(x, past_key[i], past_value[i])
                keys.append(k)
                values.append(v)
            return self.head(self.ln(x)), torch.stack(keys), torch.stack(values)

        def prefill(self, ids):
            n = ids.shape[0]
            empty = torch.zeros(layers, n, heads, 0, head)
            _, k, v = self.forward(ids, empty, empty)
            return k, v

    return Decoder()


def build_module(name):
    """The eval-mode torch module of `name`, weights seeded by the name."""
    import torch
    import torchvision
    torch.manual_seed(int(hashlib.sha1(name.encode()).hexdigest(), 16) % (2 ** 31))
    family, _ = MODELS[name]
    nn = torch.nn
    if name == "encoder_torch":
        m = build_torch_encoder(*ENCODERS[name])
    elif name in ENCODERS:
        m = build_encoder(*ENCODERS[name])
    elif name in DECODER_STEPS:
        m = build_decoder(**DECODER)
    elif family == "classification":
        kwargs = {"aux_logits": False, "init_weights": True} \
            if name in ("googlenet", "inception_v3") else {}
        m = getattr(torchvision.models, name)(weights=None, **kwargs)
    elif family == "segmentation":
        seg = getattr(torchvision.models.segmentation, name)(weights=None,
                                                             weights_backbone=None)

        class Seg(nn.Module):
            def __init__(self):
                super().__init__()
                self.m = seg

            def forward(self, x):
                return self.m(x)["out"]

        m = Seg()
    elif family == "detection":
        # The ResNet-50 detectors resize to 800 pixels by default: keep the 320x320 input.
        sizes = {"min_size": 320, "max_size": 320} if "resnet50" in name else {}
        det = getattr(torchvision.models.detection, name)(weights=None, weights_backbone=None,
                                                          **sizes)

        class Det(nn.Module):
            def __init__(self):
                super().__init__()
                self.m = det

            def forward(self, images):
                outs = self.m(list(images.unbind(0)))
                flat = []
                for o in outs:
                    flat += [o["boxes"], o["scores"], o["labels"]]
                return tuple(flat)

        m = Det()
    elif family == "video":
        m = getattr(torchvision.models.video, name)(weights=None)
    else:
        raise KeyError(name)
    return m.eval()


def io_names(name, batch):
    family, _ = MODELS[name]
    if name in ENCODERS:
        return ["input_ids", "attention_mask"], ["hidden"]
    if name in DECODER_STEPS:
        return ["input_ids", "past_key", "past_value"], ["logits", "present_key",
                                                         "present_value"]
    if family == "detection":
        outs = []
        for i in range(batch):
            outs += [f"boxes_{i}", f"scores_{i}", f"labels_{i}"]
        return ["images"], outs
    return ["input"], ["output"]


def per_batch_file(name):
    """Detection models trace their image list with a fixed length: one file per batch."""
    return MODELS[name][0] == "detection"


def export(name, opset, batch, path):
    import torch
    module = build_module(name)
    inputs = make_inputs(name, batch)
    args = tuple(torch.from_numpy(a) for a in inputs.values())
    in_names, out_names = io_names(name, batch)
    dynamic = None
    if not per_batch_file(name):
        dynamic = {n: {0: "batch"} for n in in_names}
        if name in DECODER_STEPS:
            dynamic = {"input_ids": {0: "batch"}, "past_key": {1: "batch", 3: "past"},
                       "past_value": {1: "batch", 3: "past"}, "logits": {0: "batch"},
                       "present_key": {1: "batch", 3: "total"},
                       "present_value": {1: "batch", 3: "total"}}
        else:
            dynamic.update({n: {0: "batch"} for n in out_names})
    tmp = path + ".tmp"
    # With gradients on: under no_grad, nn.MultiheadAttention takes its fused fast path
    # (aten::_native_multi_head_attention), which has no ONNX export.
    with torch.enable_grad():
        torch.onnx.export(module, args, tmp, opset_version=opset, input_names=in_names,
                          output_names=out_names, dynamic_axes=dynamic, do_constant_folding=True)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for the models, inputs and manifest")
    ap.add_argument("--models", default=",".join(MODELS),
                    help="comma-separated subset (default: all %d)" % len(MODELS))
    ap.add_argument("--opsets", default="13,17")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--force", action="store_true", help="re-export files that exist")
    args = ap.parse_args()
    names = args.models.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)} (known: {', '.join(MODELS)})")
    opsets = [int(o) for o in args.opsets.split(",")]
    batches = [int(b) for b in args.batches.split(",")]
    os.makedirs(args.out, exist_ok=True)
    import numpy as np
    import torch
    import warnings
    warnings.filterwarnings("ignore")
    torch.set_num_threads(os.cpu_count() or 1)

    manifest_path = os.path.join(args.out, "manifest.json")
    manifest = {}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = {e["id"]: e for e in json.load(f)["models"]}
    failed = []
    for name in names:
        family, _ = MODELS[name]
        inputs = {}
        for batch in batches:
            arrays = make_inputs(name, batch)
            inputs[batch] = []
            for key, a in arrays.items():
                npy = os.path.join(args.out, f"{name}-b{batch}-{key}.npy")
                np.save(npy, a)
                inputs[batch].append({"name": key, "file": os.path.basename(npy),
                                      "shape": list(a.shape), "dtype": str(a.dtype)})
        for opset in opsets:
            files = [(b, f"{name}-op{opset}-b{b}.onnx") for b in batches] \
                if per_batch_file(name) else [(None, f"{name}-op{opset}.onnx")]
            for batch, fname in files:
                path = os.path.join(args.out, fname)
                entry_batches = [batch] if batch is not None else batches
                if os.path.exists(path) and not args.force:
                    status = "kept"
                else:
                    t0 = time.time()
                    try:
                        export(name, opset, batch or batches[0], path)
                        status = f"exported in {time.time() - t0:.0f} s"
                    except Exception as e:  # noqa: BLE001 (report and go on with the others)
                        traceback.print_exc(limit=3)
                        print(f"export_models: {fname}: {type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr)
                        failed.append(fname)
                        continue
                print(f"export_models: {fname}: {status}", file=sys.stderr, flush=True)
                mid = fname[:-len(".onnx")]
                manifest[mid] = {"id": mid, "model": name, "family": family, "opset": opset,
                                 "file": fname, "batches": entry_batches,
                                 "inputs": {str(b): inputs[b] for b in entry_batches}}
        with open(manifest_path, "w") as f:
            json.dump({"models": sorted(manifest.values(), key=lambda e: e["id"])}, f, indent=1)
    print(f"export_models: {len(manifest)} model files in {args.out}"
          + (f"; failed: {', '.join(failed)}" if failed else ""), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
