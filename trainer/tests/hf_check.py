"""Loads a `mill-train export` folder with transformers and compares its logits with
ours. Usage: hf_check.py FOLDER OURS.safetensors (tensors `ids` and `logits`).
Prints a JSON line; exits 1 when the logits differ by more than 1e-4."""
import json
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer, LlamaForCausalLM

folder, ours = sys.argv[1], sys.argv[2]
ref = load_file(ours)
model = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
model.eval()
with torch.no_grad():
    logits = model(ref["ids"]).logits
diff = (logits - ref["logits"]).abs().max().item()
tokenizer = AutoTokenizer.from_pretrained(folder)
print(json.dumps({
    "max_abs_diff": diff,
    "logits_shape": list(logits.shape),
    "tokenizer_ids": tokenizer("w1 w2 w3")["input_ids"],
    "eos_token_id": tokenizer.eos_token_id,
    "tied": model.config.tie_word_embeddings,
}))
sys.exit(0 if diff <= 1e-4 else 1)
