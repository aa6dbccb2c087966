"""Loads a `mill-train export` folder with transformers and scores multiple-choice
continuations as lm-eval-harness does (the last max_position_embeddings + 1 tokens of
context and continuation; the summed log-probability of the continuation's tokens).
Usage: tasks_check.py FOLDER PAIRS.json, where PAIRS.json holds
{"pairs": [[context ids, continuation ids, our log-likelihood], ...]}.
Prints a JSON line; exits 1 when a log-likelihood differs by more than 1e-4."""
import json
import sys

import torch
from transformers import LlamaForCausalLM

folder, pairs = sys.argv[1], json.load(open(sys.argv[2]))["pairs"]
model = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
model.eval()
max_len = model.config.max_position_embeddings
diffs = []
with torch.no_grad():
    for context, continuation, ours in pairs:
        seq = (context + continuation)[-(max_len + 1):]
        inputs = torch.tensor([seq[:-1]])
        logp = torch.log_softmax(model(inputs).logits[0].float(), dim=-1)
        n = len(continuation)
        targets = torch.tensor(seq[-n:])
        theirs = logp[-n:].gather(1, targets[:, None]).sum().item()
        diffs.append(abs(theirs - ours))
print(json.dumps({"pairs": len(pairs), "max_abs_diff": max(diffs)}))
sys.exit(0 if max(diffs) <= 1e-4 else 1)
