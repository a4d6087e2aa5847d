#!/usr/bin/python3
"""Reference values for nitro's optimizer rules, schedules and SAM, computed with PyTorch.

Run offline (Debian's python3-torch; torch 1.13 here):  /usr/bin/python3 tests/data/optim/make_fixtures.py
It rewrites rules.json, schedules.json and sam.json beside this script; tests/unit/test_optim.cpp
reads them. Every number is float32 arithmetic in torch (float64 for schedules), written with
enough digits to round-trip.

Conventions shared with the C++ test:
  * a case's parameters are leaves "a" [4, 3] and "b" [6]; each leaf is stored flat in torch's
    order (elementwise rules and global norms do not depend on the layout);
  * grads[s] is the gradient handed to step s+1; params[s] the parameters after it;
  * schedule values are listed per optimizer step: values[t-1] is what step t uses.
"""
import json
import math
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 8


def flat(ts):
    return [[float(x) for x in t.detach().reshape(-1).tolist()] for t in ts]


def make_params(gen):
    a = torch.randn(4, 3, generator=gen) * 0.5
    b = torch.randn(6, generator=gen) * 0.5
    return [a.requires_grad_(), b.requires_grad_()]


def run_case(name, make_opt, hyper, clip=0.0, sched=None, steps=STEPS, seed=0, manual=None):
    gen = torch.Generator().manual_seed(1000 + seed)
    params = make_params(gen)
    init = flat(params)
    opt = make_opt(params) if make_opt else None
    scheduler = sched(opt) if sched else None
    grads, after, lrs, betas = [], [], [], []
    for s in range(steps):
        g = [torch.randn(p.shape, generator=gen) for p in params]
        grads.append(flat(g))
        for p, gi in zip(params, g):
            p.grad = gi.clone()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        if opt is not None:
            lrs.append(opt.param_groups[0]["lr"])
            if "betas" in opt.param_groups[0]:
                betas.append(opt.param_groups[0]["betas"][0])
            opt.step()
        else:
            manual(params, s + 1)
        if scheduler is not None:
            scheduler.step()
        after.append(flat(params))
    return {"name": name, "hyper": hyper, "clip": clip, "steps": steps, "init": init, "grads": grads,
            "params": after, "lrs": lrs, "beta1s": betas}


def lion_reference(lr, b1, b2, wd):
    """Lion as in the paper's Algorithm 2 / lucidrains' lion-pytorch (torch 1.13 has no Lion)."""
    state = {}

    def step(params, t):
        with torch.no_grad():
            for i, p in enumerate(params):
                m = state.setdefault(i, torch.zeros_like(p))
                p.mul_(1 - lr * wd)
                update = (m * b1 + p.grad * (1 - b1)).sign_()
                p.add_(update, alpha=-lr)
                m.mul_(b2).add_(p.grad, alpha=1 - b2)
    return step


def rules():
    cases = []
    cases.append(run_case("sgd", lambda ps: torch.optim.SGD(ps, lr=0.1), {"eta": 0.1}, seed=1))
    cases.append(run_case("sgd_momentum_dampening", lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.1),
                          {"eta": 0.05, "momentum": 0.9, "dampening": 0.1}, seed=2))
    # momentum 0: PyTorch keeps no buffer and ignores dampening, so the step is plain SGD
    cases.append(run_case("sgd_dampening_no_momentum", lambda ps: torch.optim.SGD(ps, lr=0.05, dampening=0.5),
                          {"eta": 0.05, "dampening": 0.5}, seed=10))
    cases.append(run_case("sgd_nesterov_weight_decay",
                          lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
                          {"eta": 0.05, "momentum": 0.9, "weight_decay": 0.01}, seed=3))
    cases.append(run_case("adam", lambda ps: torch.optim.Adam(ps, lr=1e-2), {"eta": 1e-2}, seed=4))
    cases.append(run_case("adam_weight_decay", lambda ps: torch.optim.Adam(ps, lr=1e-2, betas=(0.8, 0.99), weight_decay=0.1),
                          {"eta": 1e-2, "beta1": 0.8, "beta2": 0.99, "weight_decay": 0.1}, seed=5))
    cases.append(run_case("adamw", lambda ps: torch.optim.AdamW(ps, lr=1e-2, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1),
                          {"eta": 1e-2, "beta1": 0.8, "beta2": 0.95, "eps": 1e-6, "lambda": 0.1}, seed=6))
    cases.append(run_case("lion", None, {"eta": 1e-3, "beta1": 0.9, "beta2": 0.99, "lambda": 0.5}, seed=7,
                          manual=lion_reference(1e-3, 0.9, 0.99, 0.5)))
    cases.append(run_case("clip_adamw", lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.01),
                          {"eta": 1e-2, "lambda": 0.01}, clip=0.5, seed=8))
    cases.append(run_case("adamw_one_cycle", lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.01),
                          {"max": 0.05, "lambda": 0.01},
                          sched=lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.05, total_steps=20),
                          steps=20, seed=9))
    return cases


def lr_series(make_sched, steps, base=0.1, momentum=False):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=base, momentum=0.9 if momentum else 0)
    s = make_sched(opt)
    lrs, moms = [], []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        moms.append(opt.param_groups[0]["momentum"])
        opt.step()
        s.step()
    return lrs, moms


def schedules():
    S = torch.optim.lr_scheduler
    out = {}
    lrs, moms = lr_series(lambda o: S.OneCycleLR(o, max_lr=0.01, total_steps=100), 100, momentum=True)
    out["one_cycle_default"] = {"total": 100, "max": 0.01, "lr": lrs, "momentum": moms}
    lrs, moms = lr_series(lambda o: S.OneCycleLR(o, max_lr=0.3, total_steps=57, pct_start=0.25, div_factor=10,
                                                 final_div_factor=100, three_phase=True, anneal_strategy="linear",
                                                 base_momentum=0.8, max_momentum=0.9), 57, momentum=True)
    out["one_cycle_three_phase_linear"] = {"total": 57, "max": 0.3, "lr": lrs, "momentum": moms}
    out["linear"] = {"total": 15, "lr": lr_series(lambda o: S.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=10), 15)[0]}
    out["cosine"] = {"total": 30, "lr": lr_series(lambda o: S.CosineAnnealingLR(o, T_max=30, eta_min=0.001), 30)[0]}
    out["step"] = {"total": 30, "lr": lr_series(lambda o: S.StepLR(o, step_size=7, gamma=0.5), 30)[0]}
    out["exponential"] = {"total": 20, "lr": lr_series(lambda o: S.ExponentialLR(o, gamma=0.9), 20)[0]}
    out["warmup_cosine"] = {"total": 30, "lr": lr_series(
        lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=5),
                                     S.CosineAnnealingLR(o, T_max=25, eta_min=1e-4)], milestones=[5]), 30)[0]}
    return out


def sam_case(adaptive, steps=3):
    """Two passes per step on a linear layer with a mean-squared-error loss: SAM (davda54/sam's
    first_step/second_step) and ASAM with T = |w| + eta on the weight (rank 2), T = 1 on the bias."""
    gen = torch.Generator().manual_seed(77 if adaptive else 66)
    x = torch.randn(8, 3, generator=gen)
    y = torch.randn(8, 2, generator=gen)
    lin = torch.nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(2, 3, generator=gen) * 0.5)
        lin.bias.copy_(torch.randn(2, generator=gen) * 0.5)
    rho, eta_a = (0.5, 0.01) if adaptive else (0.05, 0.0)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
    init = {"weight": lin.weight.detach().reshape(-1).tolist(), "bias": lin.bias.detach().tolist()}
    after, losses = [], []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(lin(x), y)
        losses.append(float(loss))
        loss.backward()
        with torch.no_grad():
            T = {id(lin.weight): (lin.weight.abs() + eta_a) if adaptive else torch.ones_like(lin.weight),
                 id(lin.bias): torch.ones_like(lin.bias)}
            norm = torch.norm(torch.stack([(T[id(p)] * p.grad).norm(p=2) for p in lin.parameters()]), p=2)
            saved = [p.clone() for p in lin.parameters()]
            for p in lin.parameters():
                p.add_(T[id(p)] ** 2 * p.grad * (rho / (norm + 1e-12)))
        opt.zero_grad()
        torch.nn.functional.mse_loss(lin(x), y).backward()
        with torch.no_grad():
            for p, s in zip(lin.parameters(), saved):
                p.copy_(s)
        opt.step()
        after.append({"weight": lin.weight.detach().reshape(-1).tolist(), "bias": lin.bias.detach().tolist()})
    return {"adaptive": adaptive, "rho": rho, "adaptive_eta": eta_a, "eta": 0.1, "momentum": 0.9,
            "x": x.reshape(-1).tolist(), "y": y.reshape(-1).tolist(), "init": init, "params": after, "losses": losses}


def write(name, obj):
    with open(os.path.join(HERE, name), "w") as f:
        json.dump(obj, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    torch.set_default_dtype(torch.float32)
    write("rules.json", {"torch": torch.__version__, "cases": rules()})
    write("schedules.json", {"torch": torch.__version__, "schedules": schedules()})
    write("sam.json", {"torch": torch.__version__, "cases": [sam_case(False), sam_case(True)]})
