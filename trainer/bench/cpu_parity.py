"""The PyTorch side of scripts/bench-trainer-cpu.sh: reference.py's model (the same
Llama as mill-train) at any shape, on the CPU in f32, trained on random tokens with
AdamW and gradient clipping as mill-train does; each step timed as forward, backward
and optimiser. Usage: cpu_parity.py DIM LAYERS HEADS KV FFN VOCAB SEQ MICRO STEPS THREADS.
Prints one JSON line: steady-state tokens/s and seconds per step by phase (the mean
over the steps after the first quarter)."""
import json, os, sys, time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402  (the model)


def main():
    dim, layers, heads, kv, ffn, vocab, seq, micro, steps, threads = map(int, sys.argv[1:11])
    torch.set_num_threads(threads)
    reference.VOCAB = vocab  # the model reads it when built
    torch.manual_seed(1)
    model = reference.Llama(dim, layers, heads, kv, ffn, seq)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    rows = []
    for _ in range(steps):
        ids = torch.randint(1, vocab, (micro, seq + 1))
        t0 = time.perf_counter()
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.view(-1, vocab), ids[:, 1:].reshape(-1))
        loss_value = loss.item()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        rows.append((t1 - t0, t2 - t1, t3 - t2, loss_value))
    tail = rows[len(rows) // 4:]
    mean = lambda i: sum(r[i] for r in tail) / len(tail)
    seconds = mean(0) + mean(1) + mean(2)
    print(json.dumps({"tool": "pytorch", "tokens_per_s": micro * seq / seconds,
                      "step_s": seconds, "forward_s": mean(0), "backward_s": mean(1),
                      "optimizer_s": mean(2), "data_wait_s": 0.0, "loss": rows[-1][3],
                      "parameters": sum(p.numel() for p in model.parameters()),
                      "threads": threads, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
