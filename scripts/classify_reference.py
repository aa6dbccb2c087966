#!/usr/bin/env python3
"""The reference mill-classify's transformer scores are checked against: Hugging Face
transformers' AutoModelForSequenceClassification, on models transformers itself
creates with random weights.

  classify_reference.py models OUT_DIR CORPUS.jsonl
      Trains a WordPiece tokenizer (BERT's kind) and a Unigram one (XLM-R's kind) on the
      texts of CORPUS.jsonl (one {"text": ...} per line) and saves four sequence
      classifiers with random weights, each a folder as save_pretrained writes it
      (config.json, model.safetensors, tokenizer.json, tokenizer_config.json):
      bert-regression, bert-labels (2 labels), xlmr-regression, xlmr-labels (2 labels).
      Sizes: BERT's and XLM-R's layout with hidden 128, 2 layers, 2 heads of 64, and
      the 512-token position tables, so that truncation is exercised.

  classify_reference.py models OUT_DIR CORPUS.jsonl --base
      Also bert-base-regression: FineWeb-Edu's classifier's shape (BERT base: hidden
      768, 12 layers of 12 heads, 3072 wide, 110M parameters, a regression head) with
      random weights and a 30,522-entry WordPiece vocabulary trained on the corpus.

  classify_reference.py synthetic OUT.jsonl N WORDS
      N texts of WORDS random words each (a fixed vocabulary, seeded): documents past
      512 tokens for the GPU check, which has no real text.

  classify_reference.py score MODEL_DIR TEXTS.jsonl OUT.jsonl [--threads N] [--batch B]
                              [--device cpu|cuda] [--dtype f32|bf16]
      Scores each text as FineWeb-Edu's annotation did (tokenizer(..., truncation=True,
      padding="longest") in batches, f32 on CPU) and writes {"logits": [...]} per line,
      in input order. With --time, prints documents per second (texts sorted by length
      into batches, as mill-classify does).

Run with the trainer's torch venv (trainer/setup-torch.sh): torch 2.11, transformers.
"""

import argparse
import json
import os
import sys
import time


def read_texts(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def make_models(out, corpus, base):
    import torch
    from tokenizers import (
        SentencePieceUnigramTokenizer,
        processors,
    )
    from tokenizers.implementations import BertWordPieceTokenizer
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        PreTrainedTokenizerFast,
        XLMRobertaConfig,
        XLMRobertaForSequenceClassification,
    )

    texts = read_texts(corpus)
    os.makedirs(out, exist_ok=True)

    def wordpiece(vocab_size):
        wp = BertWordPieceTokenizer(lowercase=True)
        wp.train_from_iterator(
            texts,
            vocab_size=vocab_size,
            special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
            show_progress=False,
        )
        return PreTrainedTokenizerFast(
            tokenizer_object=wp._tokenizer,
            model_max_length=512,
            unk_token="[UNK]",
            pad_token="[PAD]",
            cls_token="[CLS]",
            sep_token="[SEP]",
            mask_token="[MASK]",
        )

    bert_tok = wordpiece(3000)

    sp = SentencePieceUnigramTokenizer()
    sp.train_from_iterator(
        texts,
        vocab_size=3000,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        unk_token="<unk>",
        show_progress=False,
    )
    sp._tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)],
    )
    xlmr_tok = PreTrainedTokenizerFast(
        tokenizer_object=sp._tokenizer,
        model_max_length=512,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        cls_token="<s>",
        sep_token="</s>",
        mask_token="<mask>",
    )

    shapes = dict(
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=512,
        initializer_range=0.1,
    )
    torch.manual_seed(1234)
    todo = [
        ("bert-regression", BertForSequenceClassification, BertConfig, bert_tok, 1, shapes),
        ("bert-labels", BertForSequenceClassification, BertConfig, bert_tok, 2, shapes),
        ("xlmr-regression", XLMRobertaForSequenceClassification, XLMRobertaConfig, xlmr_tok, 1, shapes),
        ("xlmr-labels", XLMRobertaForSequenceClassification, XLMRobertaConfig, xlmr_tok, 2, shapes),
    ]
    if base:
        bert_base = dict(
            hidden_size=768,
            num_hidden_layers=12,
            num_attention_heads=12,
            intermediate_size=3072,
            initializer_range=0.02,
        )
        todo.append(
            ("bert-base-regression", BertForSequenceClassification, BertConfig, wordpiece(30522), 1, bert_base)
        )
    for name, make, conf, tok, labels, dims in todo:
        extra = {}
        if conf is XLMRobertaConfig:
            extra = dict(
                max_position_embeddings=514,
                pad_token_id=1,
                bos_token_id=0,
                eos_token_id=2,
                type_vocab_size=1,
                layer_norm_eps=1e-5,
            )
        else:
            extra = dict(max_position_embeddings=512, pad_token_id=0)
        vocab = 30522 if name == "bert-base-regression" else len(tok)
        config = conf(vocab_size=vocab, num_labels=labels, **dims, **extra)
        if labels == 1:
            config.problem_type = "regression"
        model = make(config).eval()
        # Norms and biases start at 1 and 0: move them, so that their code is tested.
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if pname.endswith("LayerNorm.weight"):
                    p.add_(0.1 * torch.randn_like(p))
                elif pname.endswith("bias"):
                    p.copy_(0.1 * torch.randn_like(p))
        folder = os.path.join(out, name)
        model.save_pretrained(folder, safe_serialization=True)
        tok.save_pretrained(folder)
        print(f"{folder}: {sum(p.numel() for p in model.parameters())} parameters")


def synthetic(out, n, words):
    import random

    rng = random.Random(45)
    vocab = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
        for _ in range(20000)
    ]
    with open(out, "w") as f:
        for i in range(n):
            text = " ".join(rng.choice(vocab) for _ in range(words))
            f.write(json.dumps({"id": f"s{i:06}", "text": text}) + "\n")


def score(model_dir, texts_path, out, threads, batch, timed, device="cpu", dtype="f32"):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.set_num_threads(threads)
    texts = read_texts(texts_path)
    tok = AutoTokenizer.from_pretrained(model_dir)
    kind = torch.bfloat16 if dtype == "bf16" else torch.float32
    model = (
        AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=kind)
        .to(device)
        .eval()
    )
    order = list(range(len(texts)))
    if timed:
        # Sorted by length, as mill-classify batches: the least padding.
        lengths = [len(tok(t, truncation=True)["input_ids"]) for t in texts]
        order.sort(key=lambda i: lengths[i])
    logits = [None] * len(texts)
    start = time.perf_counter()
    with torch.inference_mode():
        for b in range(0, len(order), batch):
            idx = order[b : b + batch]
            enc = tok(
                [texts[i] for i in idx],
                return_tensors="pt",
                padding="longest",
                truncation=True,
            )
            enc = {k: v.to(device) for k, v in enc.items()}
            out_logits = model(**enc).logits.float().cpu()
            for i, row in zip(idx, out_logits.tolist()):
                logits[i] = row
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    with open(out, "w") as f:
        for row in logits:
            f.write(json.dumps({"logits": row}) + "\n")
    if timed:
        print(
            json.dumps(
                {
                    "documents": len(texts),
                    "seconds": seconds,
                    "docs_per_second": len(texts) / seconds,
                    "threads": threads,
                    "batch": batch,
                    "device": device,
                    "dtype": dtype,
                }
            )
        )


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("models")
    m.add_argument("out")
    m.add_argument("corpus")
    m.add_argument("--base", action="store_true")
    s = sub.add_parser("score")
    s.add_argument("model")
    s.add_argument("texts")
    s.add_argument("out")
    s.add_argument("--threads", type=int, default=1)
    s.add_argument("--batch", type=int, default=16)
    s.add_argument("--time", action="store_true")
    s.add_argument("--device", default="cpu")
    s.add_argument("--dtype", default="f32")
    y = sub.add_parser("synthetic")
    y.add_argument("out")
    y.add_argument("n", type=int)
    y.add_argument("words", type=int)
    args = ap.parse_args()
    if args.cmd == "models":
        make_models(args.out, args.corpus, args.base)
    elif args.cmd == "synthetic":
        synthetic(args.out, args.n, args.words)
    else:
        score(args.model, args.texts, args.out, args.threads, args.batch, args.time, args.device, args.dtype)


if __name__ == "__main__":
    sys.exit(main())
