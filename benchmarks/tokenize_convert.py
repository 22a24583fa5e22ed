"""tokenizer.json files for the peers, which only take `tokenizers` objects.

- The SentencePiece model: transformers' SpmConverter with legacy=True (the setting
  FIELD-NOTES found exact; `legacy=False` is not).
- Tekken: a byte-level BPE whose merges are ranked by the rank of the merged token
  (what tiktoken does), the tekken split regex, and the reserved special tokens as the
  first ids, so ids equal tiktoken ranks + the number of special tokens.

Both are written once into benchmarks/work/tok/ and checked against the reference on a
sample in the benchmark itself (every contender's ids must be identical).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path


def mistral_file(name: str) -> Path:
    import importlib.util

    spec = importlib.util.find_spec("mistral_common")
    if spec is None or spec.origin is None:
        raise SystemExit("pip install --no-deps mistral-common (the tokenizers ship in its wheel)")
    return Path(spec.origin).parent / "data" / name


def spm_to_json(model: Path, out: Path) -> Path:
    from sentencepiece import sentencepiece_model_pb2 as pb
    from transformers.convert_slow_tokenizer import SpmConverter

    proto = pb.ModelProto()
    proto.ParseFromString(model.read_bytes())
    vocab = {p.piece: i for i, p in enumerate(proto.pieces)}
    tok = SpmConverter.build_tokenizer_from_spm_proto(proto, vocab, legacy=True)
    specials = [p.piece for p in proto.pieces if p.type in (2, 3)]  # unknown, control
    from tokenizers import AddedToken

    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    tok.save(str(out))
    return out


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map, which ByteLevel uses."""
    bs = list(range(ord("!"), ord("~") + 1))
    bs += list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs), strict=True))


def tekken_to_json(path: Path, out: Path) -> Path:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    data = json.loads(path.read_text())
    config = data["config"]
    n_special = config["default_num_special_tokens"]
    inner = config["default_vocab_size"] - n_special
    to_chr = _bytes_to_unicode()
    ranks = {}
    for entry in data["vocab"][:inner]:
        raw = base64.b64decode(entry["token_bytes"])
        ranks["".join(to_chr[b] for b in raw)] = entry["rank"]
    merges = []
    for token, rank in ranks.items():
        local = [
            (token[:i], token[i:], rank)
            for i in range(1, len(token))
            if token[:i] in ranks and token[i:] in ranks
        ]
        local.sort(key=lambda m: (ranks[m[0]], ranks[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: m[2])
    vocab = {t: r + n_special for t, r in ranks.items()}
    listed = data.get("special_tokens") or [  # files of format <= v7 list none
        {"rank": i, "token_str": t}
        for i, t in enumerate(["<unk>", "<s>", "</s>", "[INST]", "[/INST]"])
    ]
    specials = {t["rank"]: t["token_str"] for t in listed}
    names = [specials.get(i, f"<SPECIAL_{i}>") for i in range(n_special)]
    for i, name in enumerate(names):
        vocab[name] = i
    bpe = models.BPE(vocab=vocab, merges=[(a, b) for a, b, _ in merges], ignore_merges=False)
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(config["pattern"]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(n, special=True, normalized=False) for n in names])
    tok.save(str(out))
    return out


def prepare(kind: str, work: Path) -> tuple[Path, Path]:
    """(the original file curate and the limit read, a tokenizer.json for the peers)."""
    work.mkdir(parents=True, exist_ok=True)
    if kind == "spm":
        original = mistral_file("tokenizer.model.v1")
        out = work / "mistral-v1-spm.tokenizer.json"
        if not out.exists():
            spm_to_json(original, out)
    else:
        original = mistral_file("tekken_240911.json")
        out = work / "tekken_240911.tokenizer.json"
        if not out.exists():
            tekken_to_json(original, out)
    return original, out
