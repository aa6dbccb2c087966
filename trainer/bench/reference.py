"""The PyTorch baseline of trainer/gpu-check.sh: the same Llama-style model as mill-train
(RMSNorm, RoPE on head halves, SwiGLU, grouped-query attention through SDPA, tied
embeddings), bf16 autocast with f32 weights, AdamW, random tokens. With --device cpu (the
check's proof on a machine without a GPU) the arithmetic is f32 and the peak memory is the
process's resident size.
Usage: reference.py PRESET STEPS MICRO SEQ [--compile] [--device cuda|cpu]. Prints one
JSON line."""
import argparse, contextlib, json, math, platform, resource, time
import torch
import torch.nn.functional as F

PRESETS = {  # dim, layers, heads, kv_heads, ffn: as trainer/src/model.rs
    "tiny": (64, 2, 4, 2, 176), "125m": (768, 12, 12, 4, 2048), "350m": (1024, 24, 16, 8, 2816),
    "1b": (2048, 16, 32, 8, 5632), "7b": (4096, 32, 32, 8, 11008)}
PEAKS = {"H200": 989.4e12, "H100": 989.4e12, "A100": 312e12, "L40S": 362.05e12}
VOCAB = 256_000

class Block(torch.nn.Module):
    def __init__(s, d, h, kv, f):
        super().__init__()
        s.h, s.kv, s.hd = h, kv, d // h
        s.n1, s.n2 = torch.nn.RMSNorm(d, eps=1e-5), torch.nn.RMSNorm(d, eps=1e-5)
        s.wq = torch.nn.Linear(d, h * s.hd, bias=False)
        s.wk = torch.nn.Linear(d, kv * s.hd, bias=False)
        s.wv = torch.nn.Linear(d, kv * s.hd, bias=False)
        s.wo = torch.nn.Linear(h * s.hd, d, bias=False)
        s.gate = torch.nn.Linear(d, f, bias=False)
        s.up = torch.nn.Linear(d, f, bias=False)
        s.down = torch.nn.Linear(f, d, bias=False)

    def forward(s, x, cos, sin):
        b, t, _ = x.shape
        h = s.n1(x)
        def heads(lin, n):
            return lin(h).view(b, t, n, s.hd).transpose(1, 2)
        def rope(y):
            y1, y2 = y.chunk(2, dim=-1)
            return y * cos + torch.cat((-y2, y1), dim=-1) * sin
        q, k, v = rope(heads(s.wq, s.h)), rope(heads(s.wk, s.kv)), heads(s.wv, s.kv)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + s.wo(a.transpose(1, 2).reshape(b, t, -1))
        h = s.n2(x)
        return x + s.down(F.silu(s.gate(h)) * s.up(h))

class Llama(torch.nn.Module):
    def __init__(s, d, layers, h, kv, f, seq):
        super().__init__()
        s.embed = torch.nn.Embedding(VOCAB, d)
        s.blocks = torch.nn.ModuleList(Block(d, h, kv, f) for _ in range(layers))
        s.norm = torch.nn.RMSNorm(d, eps=1e-5)
        hd = d // h
        inv = torch.exp(torch.arange(hd // 2) * (-2.0 / hd * math.log(10000.0)))
        ang = torch.outer(torch.arange(seq).float(), inv)
        ang = torch.cat((ang, ang), dim=-1)
        s.register_buffer("cos", ang.cos(), persistent=False)
        s.register_buffer("sin", ang.sin(), persistent=False)
        for p in s.parameters():
            if p.dim() >= 2:
                torch.nn.init.normal_(p, std=0.02)

    def forward(s, ids):
        x = s.embed(ids)
        cos, sin = s.cos[: ids.shape[1]].to(x.dtype), s.sin[: ids.shape[1]].to(x.dtype)
        for blk in s.blocks:
            x = blk(x, cos, sin)
        return s.norm(x) @ s.embed.weight.t()

def flops_per_token(d, layers, h, kv, f, seq):
    hd = d // h
    mm = layers * (d * h * hd * 2 + d * kv * hd * 2 + 3 * d * f) + VOCAB * d
    return 6 * mm + 12 * layers * d * seq

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset", choices=PRESETS)
    parser.add_argument("steps", type=int)
    parser.add_argument("micro", type=int)
    parser.add_argument("seq", type=int)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    preset, steps, micro, seq, compiled, dev = args.preset, args.steps, args.micro, args.seq, args.compile, args.device
    cuda = dev == "cuda"
    d, layers, h, kv, f = PRESETS[preset]
    torch.manual_seed(1)
    model = Llama(d, layers, h, kv, f, seq).to(dev)
    # Fused AdamW on the GPU (what a PyTorch user runs there); the default on the CPU.
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=True if cuda else None)
    fwd = torch.compile(model) if compiled else model
    ids = torch.randint(0, VOCAB, (micro, seq + 1), device=dev)
    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext():
            logits = fwd(ids[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), ids[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    warm = min(10, steps // 4)
    for _ in range(warm):
        step()
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    for _ in range(steps - warm):
        loss = step()
    sync()
    secs = time.perf_counter() - t
    tps = (steps - warm) * micro * seq / secs
    if cuda:
        name = torch.cuda.get_device_name()
        peak_mem = torch.cuda.max_memory_allocated() / 2**30
    else:
        name = platform.processor() or platform.machine()
        peak_mem = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    peak = next((v for k, v in PEAKS.items() if k in name), None) if cuda else None
    mfu = tps * flops_per_token(d, layers, h, kv, f, seq) / peak if peak else None
    print(json.dumps({"tool": "pytorch" + ("+compile" if compiled else ""), "preset": preset,
                      "tokens_per_s": tps, "mfu": mfu, "loss": loss.item(),
                      "peak_mem_gib": peak_mem, "gpu": name}))

if __name__ == "__main__":
    main()
