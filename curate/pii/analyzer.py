"""The Presidio analyzer for a `pii` configuration, built offline, and per-document gates.

The NLP engine is Presidio's `no_op` engine (no model, nothing to download) unless the
recipe names a spaCy pipeline that is already installed or saved in a folder; then
spaCy's entities (PERSON, LOCATION, ...) become available. Recognizers are Presidio's
predefined ones for the chosen languages, and `analyze` is asked only for the chosen
entities.

Speed, without changing a result (tests compare with plain Presidio on every document):
- the phone recognizer shares one scan between its regions and remembers verdicts
  (`phone.py`); pattern recognizers read only slices around triggers (`windows.py`);
- an entity whose recognizers all have a trigger that is absent from a document is not
  asked for; a document with nothing to ask for is not analysed at all.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curate.errors import CurateError, shown
from curate.pii import lean, offline, quiet
from curate.pii.spans import Span

log = logging.getLogger(__name__)

# phonenumbers' candidate pattern needs a digit as Python's `re` defines one.
_DIGIT = re.compile(r"\d")

# A value of each default entity type (made up; reserved or test numbers), analysed once in
# `Analysis.__init__` so that what recognizers build on their first text (the phone regions'
# metadata and filters, each pattern compiled with the recognizer's flags: about 0.09 CPU-s)
# is built in setup: the local engine's forked workers inherit it from the driver instead of
# each building its own, and the driver's examples find it built.
_WARM_UP = (
    "Call +1 (415) 555-0123 or 020 7946 0958, mail a.b@example.com, host 192.0.2.1 or "
    "2001:db8::1, IBAN DE89 3704 0044 0532 0130 00, card 4111 1111 1111 1111, SSN "
    "078-05-1120, wallet 1BoatSLRHtKNngkdXEeobR76b53LETtpyT"
)


@dataclass(frozen=True)
class AnalyzerConfig:
    languages: tuple[str, ...]
    entities: tuple[str, ...]
    score_threshold: float | None
    allow_list: tuple[str, ...] = ()
    allow_list_match: str = "exact"
    spacy_model: str | None = None  # a folder path (absolute) or an installed package name
    fast: bool = True  # False: plain Presidio, the reference the fast path is tested against


def resolve_spacy_model(name: str, base_dir: str) -> str:
    """A folder (relative to the recipe) or an installed package; never a download."""
    path = Path(name) if Path(name).is_absolute() else Path(base_dir, name)
    if path.is_dir():
        return str(path.resolve())
    import spacy.util

    if spacy.util.is_package(name):
        return name
    raise CurateError(
        f"pii: spacy_model '{name}' is neither a folder (looked in {shown(path)}) nor an installed "
        "package; curate never downloads models: install the pipeline's package or save "
        "one with nlp.to_disk(folder)"
    )


class Analysis:
    """A built analyzer and the gates in front of it; one per worker (built in `setup()`)."""

    def __init__(self, config: AnalyzerConfig) -> None:
        offline.prepare()
        quiet.install()
        try:
            with lean.presidio_import():
                from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
                from presidio_analyzer.nlp_engine import NlpEngineProvider
        except ImportError:
            raise CurateError("the pii stage needs Presidio: pip install 'curate[pii]'") from None

        with quiet.building():
            self._build(config, AnalyzerEngine, RecognizerRegistry, NlpEngineProvider)
        self.gates: dict[str, dict[str, list[Callable[[str], bool]] | None]] = {}
        self.phones: list[Any] = []  # the phone recognizers' shared matchers (`phone.share`)
        if config.fast:
            self._speed_up()
        if "EMAIL_ADDRESS" in config.entities:
            offline.warm()
        if config.fast:
            self.analyze(_WARM_UP)  # results unused: only what the recognizers remember
            self.learnt()  # every process built so knows these: none to tell
        log.debug("pii: analyzer built in process %d", os.getpid())

    def _build(self, config: AnalyzerConfig, engine: Any, registry_cls: Any, provider: Any) -> None:
        self.config = config
        langs = list(config.languages)
        if config.spacy_model is None:
            nlp_conf: dict[str, Any] = {
                "nlp_engine_name": "no_op",
                "models": [{"lang_code": lang, "model_name": "no_op"} for lang in langs],
            }
        else:
            nlp_conf = {
                "nlp_engine_name": "spacy",
                "models": [{"lang_code": lang, "model_name": config.spacy_model} for lang in langs],
            }
        nlp = provider(nlp_configuration=nlp_conf).create_engine()
        registry = registry_cls(supported_languages=langs)
        registry.load_predefined_recognizers(languages=langs, nlp_engine=nlp)
        if config.spacy_model is not None:
            registry.add_nlp_recognizer(nlp_engine=nlp)
        enhancer = None
        if config.fast and config.spacy_model is None and _contexts_are_words(registry):
            enhancer = _no_tokens_enhancer()
        self.engine = engine(
            registry=registry,
            nlp_engine=nlp,
            supported_languages=langs,
            context_aware_enhancer=enhancer,
        )
        self.supported = {
            lang: [e for e in config.entities if e in self.engine.get_supported_entities(lang)]
            for lang in langs
        }
        missing = sorted(set(config.entities) - {e for es in self.supported.values() for e in es})
        if missing:
            hint = (
                " (entities found by NER need a spaCy pipeline: set spacy_model)"
                if config.spacy_model is None
                else ""
            )
            raise CurateError(
                f"pii: no recognizer for {', '.join(missing)} in languages {', '.join(langs)}{hint}"
            )

    def _speed_up(self) -> None:
        from curate.pii.phone import share
        from curate.pii.windows import window

        checks_of: dict[str, Callable[[str], bool] | None] = {}
        for rec in self.engine.registry.recognizers:
            shared = share(rec)
            if shared is not None:
                self.phones.append(shared)
                checks_of[rec.id] = _has_digit
            else:
                windowed = window(rec)
                checks_of[rec.id] = windowed.has_trigger if windowed is not None else None
        for lang in self.config.languages:
            gates: dict[str, list[Callable[[str], bool]] | None] = {}
            for entity in self.supported[lang]:
                recs = self.engine.registry.get_recognizers(language=lang, entities=[entity])
                found = [checks_of.get(rec.id) for rec in recs]
                checks = [c for c in found if c is not None]
                # One recognizer without a known necessary condition: always ask.
                gates[entity] = checks if len(checks) == len(found) else None
            self.gates[lang] = gates

    def learnt(self) -> dict[int | str, Any] | None:
        """What the phone recognizers' memos gained since last asked: by recognizer (their
        order is the registry's, the same in every process built from this configuration),
        and under "module" what the phone module keeps for all of them."""
        from curate.pii.phone import MODULE_JOURNAL

        news: dict[int | str, Any] = {
            i: n for i, phone in enumerate(self.phones) if (n := phone.journal.news())
        }
        if self.phones and (module := MODULE_JOURNAL.news()):
            news["module"] = module
        return news or None

    def learn(self, learnt: dict[int | str, Any]) -> int:
        """Take in what another process's `learnt()` told; returns the entries added."""
        from curate.pii.phone import MODULE_JOURNAL

        added = 0
        for i, news in learnt.items():
            if i == "module":
                added += MODULE_JOURNAL.take(news)
            elif isinstance(i, int) and 0 <= i < len(self.phones):
                added += self.phones[i].journal.take(news)
        return added

    def entities_for(self, text: str, language: str) -> list[str]:
        """The entities worth asking for in this text: those some recognizer could find."""
        gates = self.gates.get(language)
        if gates is None:
            return list(self.supported[language])
        out = []
        for entity in self.supported[language]:
            checks = gates[entity]
            if checks is None or any(check(text) for check in checks):
                out.append(entity)
        return out

    def analyze(self, text: str) -> tuple[list[Span], bool]:
        """Detected spans (in Presidio's order) and whether the analyzer ran at all."""
        spans: list[Span] = []
        ran = False
        c = self.config
        for lang in c.languages:
            entities = self.entities_for(text, lang)
            if not entities:
                continue
            ran = True
            with quiet.silenced():
                results = self.engine.analyze(
                    text,
                    language=lang,
                    entities=entities,
                    score_threshold=c.score_threshold,
                    allow_list=list(c.allow_list) or None,
                    allow_list_match=c.allow_list_match,
                )
            spans.extend(Span(r.start, r.end, r.entity_type, r.score) for r in results)
        return spans, ran


def _has_digit(text: str) -> bool:
    return _DIGIT.search(text) is not None


def _contexts_are_words(registry: Any) -> bool:
    return all(all(word for word in (rec.context or ())) for rec in registry.recognizers)


def _no_tokens_enhancer() -> Any:
    """Presidio's default context enhancer as it behaves with the no-op NLP engine.

    `LemmaContextAwareEnhancer` looks for a recognizer's context words among the words
    around a result; the no-op engine yields no words (the surroundings are `[""]`) and
    curate passes no explicit context, so no non-empty context word is ever found and
    every score stays as it is: the enhancer returns a deep copy of its input. This one
    returns the input list as it is (no copy), which is what the analyzer then uses.
    Used only with the no-op engine and when every recognizer's context words are
    non-empty; tests compare the results with Presidio's own.
    """
    from presidio_analyzer.context_aware_enhancers import ContextAwareEnhancer

    class NoTokensEnhancer(ContextAwareEnhancer):
        def __init__(self) -> None:
            super().__init__(
                context_similarity_factor=0.35, min_score_with_context_similarity=0.4,
                context_prefix_count=5, context_suffix_count=0,
            )  # fmt: skip

        def enhance_using_context(
            self, text: str, raw_results: Any, *args: Any, **kwargs: Any
        ) -> Any:
            return list(raw_results)

    return NoTokensEnhancer()
