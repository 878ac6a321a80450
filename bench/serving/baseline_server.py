#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The naive baseline of the serving suite: what a team writes by hand. PyTorch eager behind
FastAPI/uvicorn (Debian's python3-torch, python3-fastapi, python3-uvicorn), one request = one
forward pass, no batching, JSON in and out. It speaks just enough of KServe v2 HTTP (model
metadata, config, JSON infer) for `kiln bench --http-json` to drive it like kiln.

    baseline_server.py --weights mobilenet_v2.pt --port 9000 [--threads 2]

The model is torchvision's MobileNetV2 with the state dict saved by run.py (random weights,
the same ones exported to ONNX for kiln).
"""
import argparse

import numpy as np
import torch
import torchvision
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

MODEL = "mobilenet_v2"


def build_app(weights, threads):
    torch.set_num_threads(threads)
    net = torchvision.models.mobilenet_v2(weights=None)
    net.load_state_dict(torch.load(weights))
    net.eval()
    app = FastAPI()
    meta = {"name": MODEL, "versions": ["1"], "platform": "pytorch_eager",
            "inputs": [{"name": "input", "datatype": "FP32", "shape": [-1, 3, 224, 224]}],
            "outputs": [{"name": "output", "datatype": "FP32", "shape": [-1, 1000]}]}

    @app.get("/v2/health/ready")
    def ready():
        return {}

    @app.get(f"/v2/models/{MODEL}")
    def metadata():
        return meta

    @app.get(f"/v2/models/{MODEL}/config")
    def config():
        return {"name": MODEL, "max_batch_size": 8}

    @app.post(f"/v2/models/{MODEL}/infer")
    async def infer(request: Request):
        body = await request.json()
        inp = body["inputs"][0]
        x = torch.from_numpy(np.asarray(inp["data"], dtype=np.float32).reshape(inp["shape"]))
        with torch.no_grad():
            y = net(x)
        return JSONResponse({"model_name": MODEL, "model_version": "1", "outputs": [
            {"name": "output", "datatype": "FP32", "shape": list(y.shape),
             "data": y.flatten().tolist()}]})

    return app


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    args = ap.parse_args()
    uvicorn.run(build_app(args.weights, args.threads), host="127.0.0.1", port=args.port,
                log_level="warning")


if __name__ == "__main__":
    main()
