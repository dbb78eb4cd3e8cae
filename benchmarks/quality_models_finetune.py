"""quality_models.py's corpus-adapted MiniLM: training pairs mined from a corpus alone (a comment or docstring and the
code after it; a docs heading and its section) and one epoch of MultipleNegativesRankingLoss on them."""

from __future__ import annotations

import json
import random
import re
import sys
import time
from pathlib import Path

from quality_cv_data import Dataset
from ctxrag.tasks.embedding.embed import packaged_model_path
from ctxrag.tasks.embedding.embedder_spec import DEFAULT_MAX_SEQ_LENGTH

COMMENT = re.compile(r"^\s*(///|//!|//|#(?![\[!])|\*|/\*\*|/\*|--)\s?(.*)$")


def mined_pairs(data: Dataset, kind: str, per_chunk: int = 3, seed: int = 0) -> list[tuple[str, str]]:
    """Training pairs from the corpus alone. Code: a comment / docstring block (>= 4 words) and the code that follows
    it in the chunk (up to the next comment block, <= 40 lines, >= 2 non-empty lines). Docs: the section's heading
    (with the page's title from the structural context) and the section's text without its heading."""
    chunks = data.searcher.index.chunks
    pairs = []
    for context, content, heading in zip(chunks["context"].to_pylist(), chunks["content"].to_pylist(), chunks["heading"].to_pylist()):
        found = []
        if kind == "docs":
            lines = content.split("\n")
            title = (heading or lines[0]).strip()
            body = "\n".join(lines[1:]).strip() if lines and lines[0].strip() == title else content
            page = next((line[6:].strip(" .") for line in (context or "").split("\n") if line.startswith("Page: ")), "")
            if title and len(body.split()) >= 5:
                found.append((f"{title} ({page})" if page else title, body))
        else:
            lines = content.split("\n")
            index = 0
            while index < len(lines):
                block = []
                while index < len(lines) and COMMENT.match(lines[index]):
                    block.append(COMMENT.match(lines[index]).group(2).strip().strip("*/").strip())
                    index += 1
                if block:
                    code = []
                    while index < len(lines) and not COMMENT.match(lines[index]) and len(code) < 40:
                        code.append(lines[index])
                        index += 1
                    text = " ".join(part for part in block if part)
                    if len(text.split()) >= 4 and sum(1 for line in code if line.strip()) >= 2:
                        found.append((text[:500], "\n".join(code).strip()))
                    continue
                # a Python docstring opening a definition: the docstring and the definition's code
                if re.match(r'^\s*(def|class|async def)\s', lines[index]) and index + 1 < len(lines) and lines[index + 1].strip().startswith(('"""', "'''")):
                    quote = lines[index + 1].strip()[:3]
                    doc, cursor = [lines[index + 1].strip().strip(quote)], index + 2
                    if not lines[index + 1].strip().endswith(quote) or len(lines[index + 1].strip()) <= 3:
                        while cursor < len(lines) and quote not in lines[cursor]:
                            doc.append(lines[cursor].strip())
                            cursor += 1
                        cursor += 1
                    code = [lines[index]] + lines[cursor : cursor + 39]
                    text = " ".join(part for part in doc if part)
                    if len(text.split()) >= 4:
                        found.append((text[:500], "\n".join(code).strip()))
                index += 1
        random.Random(f"{seed}-{len(pairs)}").shuffle(found)
        pairs += found[:per_chunk]
    random.Random(seed).shuffle(pairs)
    return pairs


def finetune(data: Dataset, kind: str, cache: Path) -> tuple[Path, dict]:
    """MiniLM + MultipleNegativesRankingLoss, 1 epoch, batch 32 without duplicates, lr 2e-5, 10% warm-up, seed 0."""
    target = cache / f"minilm-ft-{data.name}"
    info_path = target / "ctxrag_finetune.json"
    if info_path.exists():
        return target, json.loads(info_path.read_text())
    import torch
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.losses import MultipleNegativesRankingLoss
    from sentence_transformers.training_args import BatchSamplers

    torch.manual_seed(0)
    pairs = mined_pairs(data, kind)
    model = SentenceTransformer(str(packaged_model_path()), device="cpu", local_files_only=True)
    model.max_seq_length = 256
    train = Dataset.from_dict({"anchor": [a for a, _ in pairs], "positive": [p for _, p in pairs]})
    args = SentenceTransformerTrainingArguments(
        output_dir=str(cache / "ft-tmp"), num_train_epochs=1, per_device_train_batch_size=32, learning_rate=2e-5,
        warmup_ratio=0.1, batch_sampler=BatchSamplers.NO_DUPLICATES, seed=0, save_strategy="no", logging_steps=10,
        report_to=[], use_cpu=True, dataloader_num_workers=0,
    )
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=train, loss=MultipleNegativesRankingLoss(model))
    started = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    model.max_seq_length = DEFAULT_MAX_SEQ_LENGTH
    model.save(str(target))
    info = {"pairs": len(pairs), "train_seconds": seconds, "steps": trainer.state.global_step, "example": list(pairs[0])}
    info_path.write_text(json.dumps(info))
    print(f"fine-tuned on {data.name}: {len(pairs)} pairs, {seconds:.0f} s", file=sys.stderr, flush=True)
    return target, info
