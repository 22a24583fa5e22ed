"""Hostile chat templates (issue 14): budgets that are counted, not timed.

Each hostile construct runs only for a conversation whose user says "boom", so a run has
a record over budget beside records that render normally: the over-budget one is removed
with a fixed reason (the budget's name, no content) on every machine, and the others
render byte-identically to the plain sandbox. A template over budget on every record
fails the run; a template's own runtime errors are reasons, not crashes; the sandbox
offers nothing that differs between two runs (`random`, `lipsum`, memory addresses).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest

from curate.chat.reader import messages_array
from curate.chat.template import Renderer, TemplateText
from curate.errors import CurateError
from curate.stages.base import StageContext
from curate.stages.chat_template import ChatTemplate, ChatTemplateParams

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chat_fixtures import CHATML, chat_tokenizer

# what each hostile construct does without budgets at the starting commit is in the comment
HOSTILE = {
    # hangs: 10^10 iterations
    "nested_range": (
        "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
        "steps",
    ),
    # 300 MB string, then the output holds it
    "string_times_int": ("{{ 'A' * 300000000 }}", "string_size"),
    # gigabytes of indentation
    "tojson_indent": ("{{ messages|tojson(indent=50000000) }}", "string_size"),
    # RecursionError: the run crashed with a traceback
    "macro_recursion": ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "call_depth"),
    "loop_recursion": ("{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}", "call_depth"),
    # OverflowError from jinja's safe_range: the run crashed
    "range_10_9": ("{% for i in range(10**9) %}{% endfor %}", "range"),
    # a namespace doubling its string: 2^40 characters
    "namespace_doubling": (
        "{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
        "{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}",
        "string_size",
    ),
    "set_block_doubling": (
        "{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
        "{% set ns.s %}{{ ns.s }}{{ ns.s }}{% endset %}{% endfor %}",
        "string_size",
    ),
    "str_method_width": ("{{ 'a'.ljust(10**9) }}", "string_size"),
    "percent_width": ("{{ '%0999999999d' % 1 }}", "string_size"),
    "format_width": ("{{ '{:>999999999}'.format(1) }}", "string_size"),
    "center_filter": ("{{ 'a'|center(1000000000) }}", "string_size"),
    "join_of_copies": ("{{ (['aaaa' * 1000] * 100000)|join('x') }}", "string_size"),
    "repr_of_copies": ("{{ [messages[0]['content'] * 100000] * 1000 }}", "string_size"),
    "huge_integer": ("{{ 10 ** 100000000 }}", "integer_size"),
    "squaring": (
        "{% set ns = namespace(x=3) %}{% for i in range(40) %}"
        "{% set ns.x = ns.x * ns.x %}{% endfor %}{{ ns.x }}",
        "integer_size",
    ),
    # textwrap splits its text into a list of chunks, a Python loop over them: ten seconds
    # and a gigabyte for two megabytes of 'a ', within the output's size
    "wordwrap_chunks": ("{{ ('a ' * 1000000)|wordwrap(1) }}", "sequence_size"),
    "deep_nesting": (
        "{% set ns = namespace(x=1) %}{% for i in range(100000) %}"
        "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}",
        "nesting_depth",
    ),
}


def boom(hostile: str) -> str:
    """ChatML, plus `hostile` when the first message says "boom"."""
    return "{% if messages[0]['content'] == 'boom' %}" + hostile + "{% endif %}" + CHATML


def batch_of(convs: list[list[tuple[str, str]]]) -> pa.RecordBatch:
    ids = pa.array([f"c{i}" for i in range(len(convs))])
    return pa.RecordBatch.from_arrays([ids, messages_array(convs)], ["id", "messages"])


def stage_for(folder: Path, template: str) -> ChatTemplate:
    chat_tokenizer(folder, template, eos_token="</s>")
    stage = ChatTemplate(ChatTemplateParams(source=str(folder)), StageContext())
    stage.setup()
    return stage


FINE = [("user", "hello there"), ("assistant", "hi, how can I help?")]
BOOM = [("user", "boom"), ("assistant", "ok")]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_record_over_budget_is_removed_with_the_budget_as_reason(
    tmp_path: Path, case: str
) -> None:
    hostile, which = HOSTILE[case]
    stage = stage_for(tmp_path / "tok", boom(hostile))
    out = stage.process(batch_of([FINE, BOOM, FINE]))
    assert out.batch.column("id").to_pylist() == ["c0", "c2"]
    assert out.removed is not None
    assert out.removed.column("reason").to_pylist() == [f"template_budget_exceeded: {which}"]
    plain = stage_for(tmp_path / "plain", CHATML).process(batch_of([FINE, FINE]))
    assert out.batch.column("input_ids").equals(plain.batch.column("input_ids"))


@pytest.mark.timeout(120)
def test_a_template_over_budget_on_every_record_fails_the_run(tmp_path: Path) -> None:
    with pytest.raises(CurateError, match=r"over its budget \(steps\)"):
        stage_for(tmp_path / "tok", HOSTILE["nested_range"][0] + CHATML)


@pytest.mark.timeout(120)
def test_a_hostile_record_in_a_run_is_rejected_and_the_run_completes(tmp_path: Path) -> None:
    """End to end: before, the recursion's RecursionError ended the run with a traceback."""
    from conftest import write_recipe

    import curate

    chat_tokenizer(tmp_path / "tok", boom(HOSTILE["macro_recursion"][0]), eos_token="</s>")
    data = tmp_path / "data" / "chat.jsonl"
    data.parent.mkdir()
    rows = [FINE, BOOM, FINE]
    data.write_text("".join(
        json.dumps({"id": f"c{i}", "messages": [{"role": r, "content": c} for r, c in convo]})
        + "\n" for i, convo in enumerate(rows)
    ))  # fmt: skip
    recipe = write_recipe(tmp_path, inputs=["data/chat.jsonl"], chat={"shape": "messages"},
                          stages=[{"chat_template": {"source": "tok"}}],
                          output={"root": "out", "fsync": False, "rejected": True})  # fmt: skip
    version = curate.run(recipe)
    assert version.counts["written"] == 2
    rejected = version.rejected().to_pylist()
    assert [(r["id"], r["reason"]) for r in rejected] == [
        ("c1", "template_budget_exceeded: call_depth")
    ]


def test_runtime_errors_of_a_template_are_reasons_naming_the_type_only(tmp_path: Path) -> None:
    """`1 / 0` or `int` of a word used to end the run; the message may quote the record."""
    stage = stage_for(tmp_path / "tok", boom("{{ 1 / 0 }}{{ 'secret' * 1.5 }}"))
    out = stage.process(batch_of([FINE, BOOM]))
    assert out.removed is not None
    assert out.removed.column("reason").to_pylist() == ["template_runtime_error: ZeroDivisionError"]


def render(template: str, messages: list[dict[str, str]]) -> str:
    return Renderer(TemplateText(template, "t"), datetime(2026, 1, 1), {}).render(messages)[0]


def test_budgets_are_sized_from_the_conversation_so_long_ones_render_as_before() -> None:
    """5,000 turns and 8 MB of content: over every fixed budget, within its conversation's."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    template = (
        "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
        "{% for w in m['content'].split(' ')[:50] %}{{ w|upper }}{% endfor %}"
        "{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}"
        "{% endfor %}{{ messages|tojson(indent=2) }}{{ ns.n }}"
    )
    words = " ".join(f"w{i}" for i in range(400))
    convo = [{"role": "user" if i % 2 else "assistant", "content": words} for i in range(5000)]
    plain = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    plain.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False,
                                                               indent=indent)  # fmt: skip
    expected = plain.from_string(template).render(messages=convo)
    assert len(expected) > 16 * 2**20
    assert render(template, convo) == expected


def test_the_sandbox_offers_nothing_that_differs_between_runs() -> None:
    import jinja2

    with pytest.raises(jinja2.exceptions.TemplateAssertionError, match="random"):
        render("{{ [1, 2, 3]|random }}", [])
    with pytest.raises(jinja2.exceptions.UndefinedError, match="lipsum"):
        render("{{ lipsum() }}", [])
    shown = render(
        "{{ raise_exception }} {{ strftime_now }} {{ range }} {{ dict }} {{ dict.fromkeys }} "
        "{{ cycler(1) }} {{ joiner() }} {{ 'a'.upper }} {{ messages[0].get }} "
        "{{ 'a'.format }} {{ namespace }} {{ [messages[0]['content'].strip] }}",
        [{"role": "user", "content": "x"}],
    )
    assert "0x" not in shown, shown


def test_a_budget_is_counted_the_same_on_every_rendering() -> None:
    """Same template, same record: the same budget, the same step, every time."""
    from curate.chat.budget import MAX_STEPS, RenderRefused

    template = "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"
    renderer = Renderer(TemplateText(template, "t"), datetime(2026, 1, 1), {})
    seen = set()
    for _ in range(2):
        with pytest.raises(RenderRefused):
            renderer.render([])
        seen.add(renderer.env.budget.steps)
    assert seen == {MAX_STEPS + 1}
