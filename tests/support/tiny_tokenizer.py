"""A small byte-level BPE tokenizer trained in the test with `tokenizers` (no download), saved as
a Hugging Face tokenizer folder: tokenizer.json plus a tokenizer_config.json with a chat template."""

from __future__ import annotations

import json
from pathlib import Path

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] | trim + eos_token + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<s>", "</s>", "<|user|>", "<|assistant|>"]


def _corpus(writings: int) -> list[str]:
    from mrcr_gen import OfflineWriter
    from mrcr_gen.recipes.openai_mrcr._catalog import load_catalog

    catalog = load_catalog()
    asks = [f"write a {f.name} about {e}" for f in catalog.formats for e in catalog.entities[:40]]
    writer = OfflineWriter(0)
    texts = [writer.compose(ask, 0) for ask in writer.asks()[:writings]]
    return asks + [f.guidance for f in catalog.formats] * 3 + texts


def _v2_turns() -> list[str]:
    """MRCR v2 turn seams ("...\n\nUser: Write a ..."), so a tokenizer without a pre-split learns merges across them."""
    from mrcr_gen.recipes.mrcr_v2 import V2OfflineWriter

    writer = V2OfflineWriter(0)
    keys = [(key, 0) for key in writer.catalog.needle_keys[:60]]
    return ["".join(f"{w.text[-80:]}\n\nUser: {key.ask}\n\nAssistant: {w.text[:80]}" for (key, _), w in zip(keys, writer.writings(keys)))]


def write_tiny_tokenizer(folder: Path, vocab_size: int = 600, writings: int = 0, pre_split: bool = True) -> Path:
    """Train the tokenizer into `folder` (created); returns the folder. With `writings` offline
    writings in the corpus and a larger vocabulary it counts close to o200k (a stand-in for a
    real model's tokenizer); the default small one counts about twice as many tokens. Without
    `pre_split` the text is not cut into words first (as SentencePiece-style BPE), so merges run
    across MRCR v2's turn seams and counts of the parts do not add up to the whole."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=pre_split)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(writings) + ([] if pre_split else _v2_turns()), trainer=trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "bos_token": "<s>",
        "eos_token": {"content": "</s>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": True},
        "chat_template": CHAT_TEMPLATE,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder
