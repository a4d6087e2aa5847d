# Generates torch_reference.json: PyTorch's outputs and gradients for small layer cases, read by
# tests/unit/test_layers.cpp. Run with /usr/bin/python3 (torch, numpy); the output is committed.
#
# nitro's tensors are column-major with the batch last ([W, H, C, B]); PyTorch's are row-major with
# the batch first ([B, C, H, W]). The two hold the same bytes, so every array below is PyTorch's
# contiguous data, flattened, and each "shape" is nitro's (PyTorch's reversed).
import json
import torch

torch.manual_seed(7)
torch.set_default_dtype(torch.float64)


def flat(t):
    return [float(v) for v in t.detach().contiguous().reshape(-1)]


def shape(t):
    return list(reversed(t.shape))


def case(**tensors):
    return {k: {"shape": shape(v), "data": flat(v)} for k, v in tensors.items()}


out = {}

# conv2d<3, 4, 3, 2, 1> on 7 x 6 images (width != height, so a swapped axis shows)
x = torch.randn(2, 3, 6, 7, requires_grad=True)
conv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1)
y = conv(x)
r = torch.randn_like(y)
(y * r).sum().backward()
out["conv2d"] = case(x=x, weight=conv.weight, bias=conv.bias, y=y, r=r, dx=x.grad, dweight=conv.weight.grad, dbias=conv.bias.grad)

# max_pool<2> and avg_pool<3, 2> on the same kind of input
for name, pool in (("max_pool", torch.nn.MaxPool2d(2)), ("avg_pool", torch.nn.AvgPool2d(3, stride=2))):
    x = torch.randn(2, 3, 6, 7, requires_grad=True)
    y = pool(x)
    r = torch.randn_like(y)
    (y * r).sum().backward()
    out[name] = case(x=x, y=y, r=r, dx=x.grad)

# batch_norm<3> on WHCN images: one training step, then evaluation with the updated statistics
bn = torch.nn.BatchNorm2d(3)
with torch.no_grad():
    bn.weight.copy_(torch.randn(3))
    bn.bias.copy_(torch.randn(3))
x = torch.randn(2, 3, 4, 5, requires_grad=True)
bn.train()
y = bn(x)
r = torch.randn_like(y)
(y * r).sum().backward()
bn.eval()
x_eval = torch.randn(2, 3, 4, 5)
y_eval = bn(x_eval)
out["batch_norm"] = case(x=x, weight=bn.weight, bias=bn.bias, y=y, r=r, dx=x.grad, dweight=bn.weight.grad, dbias=bn.bias.grad,
                         running_mean=bn.running_mean, running_var=bn.running_var, x_eval=x_eval, y_eval=y_eval)

# batch_norm<5> on [features, batch]
bn1 = torch.nn.BatchNorm1d(5)
x = torch.randn(4, 5, requires_grad=True)
y = bn1(x)
out["batch_norm_1d"] = case(x=x, y=y, running_mean=bn1.running_mean, running_var=bn1.running_var)

# layer_norm<5> on [features, batch]
ln = torch.nn.LayerNorm(5)
with torch.no_grad():
    ln.weight.copy_(torch.randn(5))
    ln.bias.copy_(torch.randn(5))
x = torch.randn(3, 5, requires_grad=True)
y = ln(x)
r = torch.randn_like(y)
(y * r).sum().backward()
out["layer_norm"] = case(x=x, weight=ln.weight, bias=ln.bias, y=y, r=r, dx=x.grad, dweight=ln.weight.grad, dbias=ln.bias.grad)

with open(__file__.replace("make_reference.py", "torch_reference.json"), "w") as f:
    f.write("{\n" + ",\n".join(json.dumps(k) + ": " + json.dumps(v, separators=(",", ":")) for k, v in out.items()) + "\n}\n")
