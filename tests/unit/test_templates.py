"""Templates: immutable revisions, sandboxed rendering, locale fallback, deploy gate."""

from __future__ import annotations

import dataclasses
import json
import traceback
from pathlib import Path
from typing import Any

import pytest

from tidings.templates import compiled as compiled_mod
from tidings.templates.compiled import RenderCache
from tidings.templates.files import EXAMPLES_DIR, load_revision_file, validate_files
from tidings.templates.locale_fallback import choose_revision
from tidings.templates.model import (
    Problem,
    RenderError,
    RevisionNotFoundError,
    TemplateError,
    TemplateRevision,
    TemplateValidationError,
    normalize_locale,
)
from tidings.templates.render import render
from tidings.templates.validate import ensure_valid, validate_revision

SECRET = "tok_9f8e7d6c5b4a3210SECRET"
SECRET_LINK = f"https://play.example.test/reset?t={SECRET}"


def rev(**overrides: Any) -> TemplateRevision:
    base: dict[str, Any] = {
        "tenant_id": "t1",
        "name": "password_reset",
        "revision": 1,
        "channel": "sms",
        "locale": "en",
        "subject": None,
        "body": "{{ game_name }}: reset within 15 min: {{ reset_link }}",
        "required_variables": ("game_name", "reset_link"),
        "attachment_policy": "none",
        "provider_template_ids": {},
    }
    base.update(overrides)
    return TemplateRevision(**base)


def email(**overrides: Any) -> TemplateRevision:
    base: dict[str, Any] = {
        "channel": "email",
        "subject": "Reset your {{ game_name }} password",
        "body": "Hi {{ player }},\nUse {{ reset_link }}",
        "required_variables": ("game_name", "player", "reset_link"),
    }
    base.update(overrides)
    return rev(**base)


def assert_no_leak(err: BaseException, *secrets: str) -> None:
    text = "".join(traceback.format_exception(err))
    for secret in secrets:
        assert secret not in str(err)
        assert secret not in repr(err)
        assert secret not in text
    assert err.__cause__ is None
    assert err.__context__ is None


# ------------------------------------------------------------------ model


def test_revision_is_immutable_and_hashable() -> None:
    r = rev()
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.body = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        r.provider_template_ids["twilio"] = "HX1"  # type: ignore[index]
    assert hash(r) == hash(rev())
    assert isinstance(r.required_variables, tuple)


def test_content_hash_covers_content_not_identity() -> None:
    a = rev()
    assert len(a.content_hash) == 64
    assert a.content_hash == rev(revision=7, tenant_id="other", name="other").content_hash
    assert a.content_hash == rev(required_variables=["reset_link", "game_name"]).content_hash
    assert a.content_hash == rev(locale="EN").content_hash
    assert (
        rev(provider_template_ids={"a": "1", "b": "2"}).content_hash
        == rev(provider_template_ids={"b": "2", "a": "1"}).content_hash
    )
    for changed in (
        rev(body=a.body + "!"),
        rev(locale="de"),
        rev(channel="email"),
        rev(attachment_policy="optional"),
        rev(provider_template_ids={"twilio": "HX1"}),
        rev(required_variables=("game_name",)),
    ):
        assert changed.content_hash != a.content_hash


def test_content_hash_cannot_be_supplied() -> None:
    with pytest.raises(TypeError):
        TemplateRevision(  # type: ignore[call-arg]
            "t", "n", 1, "sms", "en", None, "b", content_hash="0" * 64
        )


def test_normalize_locale() -> None:
    assert normalize_locale("de_at") == "de-AT"
    assert normalize_locale("EN") == "en"
    assert normalize_locale("zh-hant-tw") == "zh-Hant-TW"
    assert normalize_locale("es-419") == "es-419"


def test_error_hierarchy() -> None:
    assert issubclass(RenderError, TemplateError)
    assert issubclass(TemplateValidationError, TemplateError)
    assert issubclass(RevisionNotFoundError, TemplateError)
    err = TemplateValidationError([Problem("X", "body", "m"), Problem("Y", "f", "w", "warning")])
    assert [p.code for p in err.errors] == ["X"]
    assert "X" in str(err)


# ------------------------------------------------------------------ render


def test_render_sms() -> None:
    out = render(rev(), {"game_name": "Skyforge", "reset_link": "https://x.test/r?a=1&b=<2>"})
    assert out.body == "Skyforge: reset within 15 min: https://x.test/r?a=1&b=<2>"
    assert out.subject is None
    assert out.html_body is None


def test_render_email_text_is_not_escaped_html_is() -> None:
    r = email(html_body='<p>Hi {{ player }}</p><a href="{{ reset_link }}">reset</a>')
    out = render(r, {"game_name": "A&B", "player": "<Zoë>", "reset_link": "https://x/?a=1&b=2"})
    assert out.subject == "Reset your A&B password"
    assert out.body == "Hi <Zoë>,\nUse https://x/?a=1&b=2"
    assert out.html_body == '<p>Hi &lt;Zoë&gt;</p><a href="https://x/?a=1&amp;b=2">reset</a>'


def test_rendered_message_repr_hides_content() -> None:
    out = render(rev(), {"game_name": "G", "reset_link": SECRET_LINK})
    assert SECRET not in repr(out)
    assert SECRET not in str(out)


def test_subject_newlines_are_collapsed() -> None:
    out = render(email(), {"game_name": "G\r\nBcc: evil@x.test", "player": "p", "reset_link": "l"})
    assert out.subject is not None
    assert "\n" not in out.subject and "\r" not in out.subject


def test_missing_required_variable_names_it_without_values() -> None:
    with pytest.raises(RenderError) as info:
        render(email(), {"game_name": SECRET, "player": SECRET_LINK})
    err = info.value
    assert err.reason == "missing_variable"
    assert err.missing == ("reset_link",)
    assert "reset_link" in str(err)
    assert_no_leak(err, SECRET)


def test_strict_undefined_names_variable_without_leaking_values() -> None:
    # 'greeting' is used but not declared (a revision that skipped the gate).
    r = rev(body="{{ reset_link }}\n{{ greeting }}", required_variables=("reset_link",))
    with pytest.raises(RenderError) as info:
        render(r, {"reset_link": SECRET_LINK, "other": SECRET})
    err = info.value
    assert err.reason == "undefined_variable"
    assert err.variable == "greeting"
    assert err.lineno == 2
    assert "'greeting'" in str(err)
    assert_no_leak(err, SECRET)


def test_undefined_item_does_not_echo_a_secret_key() -> None:
    r = rev(body="{{ lookup[key] }}", required_variables=("lookup", "key"))
    with pytest.raises(RenderError) as info:
        render(r, {"lookup": {}, "key": SECRET})
    assert info.value.reason == "undefined_attribute"
    assert_no_leak(info.value, SECRET)


def test_evaluation_error_does_not_leak() -> None:
    r = rev(body="{{ (n / 0) }} {{ s }}", required_variables=("n", "s"))
    with pytest.raises(RenderError) as info:
        render(r, {"n": 1, "s": SECRET})
    assert info.value.reason == "evaluation_error"
    assert "ZeroDivisionError" in str(info.value)
    assert_no_leak(info.value, SECRET)


def test_none_value_is_an_error_not_the_text_none() -> None:
    with pytest.raises(RenderError) as info:
        render(rev(), {"game_name": "G", "reset_link": None})
    assert info.value.reason == "none_value"


def test_none_is_fine_in_a_condition() -> None:
    r = rev(
        body="{% if code %}code {{ code }}{% else %}no code{% endif %}",
        required_variables=("code",),
    )
    assert render(r, {"code": None}).body == "no code"


@pytest.mark.parametrize(
    "body",
    [
        "{{ ''.__class__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ x.__class__.__base__ }}",
        "{% if ''.__class__ %}x{% endif %}",
        "{{ items.append(1) }}",
        "{{ 'x' * 10000000 }}",
        "{{ 10 ** 100000 }}",
    ],
)
def test_sandbox_blocks_internals(body: str) -> None:
    r = rev(body=body, required_variables=("x", "items"))
    items = [1, 2]
    with pytest.raises(RenderError) as info:
        render(r, {"x": SECRET, "items": items})
    assert info.value.reason == "sandbox_violation"
    assert items == [1, 2]
    assert_no_leak(info.value, SECRET)


def test_syntax_error_at_render_time_is_a_render_error() -> None:
    with pytest.raises(RenderError) as info:
        render(rev(body="{{ reset_link }"), {"game_name": "g", "reset_link": "l"})
    assert info.value.reason == "syntax_error"
    assert info.value.part == "body"


def test_html_body_ignored_for_sms() -> None:
    out = render(rev(html_body="<b>{{ game_name }}</b>"), {"game_name": "g", "reset_link": "l"})
    assert out.html_body is None


def test_compile_once_and_reuse_by_content_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    compiles = 0
    real = compiled_mod._compile

    def counting(r: TemplateRevision) -> compiled_mod.CompiledRevision:
        nonlocal compiles
        compiles += 1
        return real(r)

    monkeypatch.setattr(compiled_mod, "_compile", counting)
    cache = RenderCache()
    r = rev()
    for i in range(2000):
        render(r, {"game_name": f"g{i}", "reset_link": "l"}, cache=cache)
    # a new revision number with identical content shares the compiled form
    render(rev(revision=2), {"game_name": "g", "reset_link": "l"}, cache=cache)
    assert compiles == 1
    info = cache.info()
    assert (info.misses, info.hits, info.size) == (1, 2000, 1)
    render(
        rev(body="other {{ game_name }} {{ reset_link }}"),
        {"game_name": "g", "reset_link": "l"},
        cache=cache,
    )
    assert compiles == 2


def test_cache_is_bounded() -> None:
    cache = RenderCache(maxsize=2)
    for i in range(5):
        render(
            rev(body=f"{i} {{{{ game_name }}}} {{{{ reset_link }}}}"),
            {"game_name": "g", "reset_link": "l"},
            cache=cache,
        )
    assert cache.info().size == 2
    cache.clear()
    assert cache.info() == (0, 0, 0, 2)


def test_default_cache_used() -> None:
    compiled_mod.clear_cache()
    render(rev(), {"game_name": "g", "reset_link": "l"})
    render(rev(), {"game_name": "g", "reset_link": "l"})
    info = compiled_mod.cache_info()
    assert info.misses == 1 and info.hits == 1


# ------------------------------------------------------------------ locale


def locales(*tags: str, revision: int = 1) -> list[TemplateRevision]:
    return [
        rev(locale=t, revision=revision, body=f"[{t}] {{{{ game_name }}}} {{{{ reset_link }}}}")
        for t in tags
    ]


@pytest.mark.parametrize(
    ("available", "wanted", "expected"),
    [
        (("en", "de", "de-AT"), "de-AT", "de-AT"),
        (("en", "de", "de-AT"), "de_at", "de-AT"),
        (("en", "de"), "de-AT", "de"),
        (("en", "de-CH", "de-DE"), "de-AT", "de-CH"),
        (("en", "fr"), "de-AT", "en"),
        (("en", "fr"), None, "en"),
        (("en-GB", "fr"), "pt-BR", "en-GB"),
        (("en", "de"), "DE", "de"),
    ],
)
def test_choose_revision_fallback(
    available: tuple[str, ...], wanted: str | None, expected: str
) -> None:
    cands = locales(*available)
    assert choose_revision(cands, wanted).locale == expected
    assert choose_revision(list(reversed(cands)), wanted).locale == expected


def test_choose_revision_custom_default_and_highest_revision() -> None:
    cands = locales("de", "fr") + locales("de", revision=3) + locales("de", revision=2)
    chosen = choose_revision(cands, "it", default_locale="de")
    assert (chosen.locale, chosen.revision) == ("de", 3)


def test_choose_revision_none_found() -> None:
    with pytest.raises(RevisionNotFoundError):
        choose_revision(locales("fr"), "de-AT")
    with pytest.raises(RevisionNotFoundError):
        choose_revision([], "en")


# ------------------------------------------------------------------ validation


def codes(problems: list[Problem]) -> set[str]:
    return {p.code for p in problems}


def test_clean_revision_has_no_problems() -> None:
    assert validate_revision(rev()) == []
    assert validate_revision(email(attachment_policy="required")) == []


@pytest.mark.parametrize(
    ("overrides", "providers", "code", "severity"),
    [
        ({"body": "{{ game_name }"}, (), "SYNTAX_ERROR", "error"),
        ({"body": "{% if x %}no end"}, (), "SYNTAX_ERROR", "error"),
        (
            {"body": "{{ game_name }} {{ reset_link }} {{ extra }}"},
            (),
            "UNDECLARED_VARIABLE",
            "error",
        ),
        (
            {"required_variables": ("game_name", "reset_link", "unused")},
            (),
            "UNUSED_VARIABLE",
            "warning",
        ),
        (
            {"required_variables": ("game_name", "reset_link", "reset_link")},
            (),
            "DUPLICATE_VARIABLE",
            "error",
        ),
        (
            {"required_variables": ("game_name", "reset_link", "a.b")},
            (),
            "INVALID_VARIABLE_NAME",
            "error",
        ),
        ({"channel": "email", "subject": None}, (), "SUBJECT_REQUIRED", "error"),
        ({"channel": "email", "subject": "  "}, (), "SUBJECT_REQUIRED", "error"),
        ({"subject": "Hi"}, (), "SUBJECT_NOT_ALLOWED", "error"),
        ({"html_body": "<b>{{ game_name }}</b>"}, (), "HTML_NOT_ALLOWED", "error"),
        ({}, ("twilio",), "PROVIDER_MAPPING_MISSING", "error"),
        ({"provider_template_ids": {"twilio": " "}}, (), "INVALID_PROVIDER_TEMPLATE_ID", "error"),
        ({"attachment_policy": "always"}, (), "INVALID_ATTACHMENT_POLICY", "error"),
        ({"attachment_policy": "required"}, (), "ATTACHMENT_NOT_SUPPORTED", "error"),
        ({"channel": "fax"}, (), "INVALID_CHANNEL", "error"),
        ({"locale": "english"}, (), "INVALID_LOCALE", "error"),
        ({"name": "bad name!"}, (), "INVALID_NAME", "error"),
        ({"revision": -1}, (), "INVALID_REVISION", "error"),
        ({"body": "  "}, (), "BODY_REQUIRED", "error"),
        (
            {"body": "{% include 'x' %}{{ game_name }}{{ reset_link }}"},
            (),
            "UNSUPPORTED_TAG",
            "error",
        ),
        ({"body": "{% extends 'x' %}"}, (), "UNSUPPORTED_TAG", "error"),
        (
            {"body": "{% import 'm' as m %}{{ game_name }}{{ reset_link }}"},
            (),
            "UNSUPPORTED_TAG",
            "error",
        ),
    ],
)
def test_validation_problem_codes(
    overrides: dict[str, Any], providers: tuple[str, ...], code: str, severity: str
) -> None:
    problems = validate_revision(rev(**overrides), providers)
    found = [p for p in problems if p.code == code]
    assert found, problems
    assert all(p.severity == severity for p in found)
    assert all(p.message and p.field is not None for p in found)


def test_undeclared_variable_in_subject_and_html_is_found() -> None:
    r = email(subject="Hi {{ who }}", html_body="<p>{{ what }}</p>{{ game_name }}")
    msgs = [p.message for p in validate_revision(r) if p.code == "UNDECLARED_VARIABLE"]
    assert any("'who'" in m for m in msgs) and any("'what'" in m for m in msgs)


def test_loop_and_set_variables_and_globals_are_not_undeclared() -> None:
    r = rev(
        body="{% set n = 2 %}{% for i in range(n) %}{{ loop.index }}{{ i }}{% endfor %}"
        "{{ game_name }}{{ reset_link }}"
    )
    assert validate_revision(r) == []


def test_provider_mapping_present_passes() -> None:
    r = rev(provider_template_ids={"twilio": "HX0123"})
    assert validate_revision(r, ["twilio"]) == []
    assert codes(validate_revision(r, ["twilio", "vonage"])) == {"PROVIDER_MAPPING_MISSING"}


def test_unused_not_reported_when_a_part_does_not_parse() -> None:
    problems = validate_revision(rev(body="{{ game_name "))
    assert codes(problems) == {"SYNTAX_ERROR"}


def test_ensure_valid() -> None:
    warnings = ensure_valid(rev(required_variables=("game_name", "reset_link", "spare")))
    assert codes(warnings) == {"UNUSED_VARIABLE"}
    with pytest.raises(TemplateValidationError) as info:
        ensure_valid(rev(), ["twilio"])
    assert codes(info.value.errors) == {"PROVIDER_MAPPING_MISSING"}


# ------------------------------------------------------------------ files and examples

EXAMPLE_VARS: dict[str, dict[str, str]] = {
    "waitlist_offer": {
        "studio_name": "Northside Yoga",
        "class_name": "Vinyasa Flow",
        "class_start": "Tue 18:30",
        "offer_expires": "17:45",
        "claim_link": "https://studio.example.test/o/abc",
    },
    "report_ready": {
        "recipient_name": "Dana",
        "report_name": "Media Monitoring",
        "period": "May 2025",
        "report_revision": "7",
        "report_link": "https://reports.example.test/r/8421/7",
    },
    "report_notice": {"org_name": "Acme", "report_name": "Media Monitoring", "period": "May 2025"},
    "password_reset": {
        "player_name": "Kim",
        "game_name": "Skyforge",
        "expires_in_minutes": "15",
        "reset_link": SECRET_LINK,
    },
}


def test_examples_validate_clean() -> None:
    report = validate_files(EXAMPLES_DIR, {"sms": ["twilio"], "email": ["sendgrid", "postmark"]})
    assert report.ok, report.format_text()
    assert report.error_count == 0 and report.warning_count == 0
    got = {(r.name, r.channel, r.locale) for r in report.revisions}
    assert got == {
        ("waitlist_offer", "sms", "en"),
        ("waitlist_offer", "sms", "de"),
        ("report_ready", "email", "en"),
        ("report_notice", "sms", "en"),
        ("password_reset", "email", "en"),
        ("password_reset", "sms", "en"),
    }
    by_key = {(r.name, r.channel): r for r in report.revisions}
    assert by_key[("report_ready", "email")].attachment_policy == "required"
    assert "reset_link" in by_key[("password_reset", "email")].required_variables
    assert "reset_link" in by_key[("password_reset", "sms")].required_variables


def test_examples_render() -> None:
    for r in validate_files(EXAMPLES_DIR).revisions:
        out = render(r, EXAMPLE_VARS[r.name])
        assert out.body.strip()
        if r.channel == "email":
            assert out.subject
        if r.name == "password_reset":
            assert SECRET_LINK in out.body


def test_validate_files_reports_file_problems(tmp_path: Path) -> None:
    good = {
        "name": "n",
        "channel": "sms",
        "locale": "en",
        "body": "{{ a }}",
        "required_variables": ["a"],
    }
    (tmp_path / "a.json").write_text(json.dumps(good))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.json").write_text(json.dumps(good))  # duplicate
    (tmp_path / "c.json").write_text("{not json")
    (tmp_path / "d.json").write_text(json.dumps({"name": "m", "chanel": "sms", "body": 3}))
    (tmp_path / "e.json").write_text(json.dumps([1]))
    report = validate_files(tmp_path)
    assert not report.ok
    by_path = {f.path: codes(f.problems) for f in report.files}
    assert by_path["a.json"] == set()
    assert by_path[str(Path("sub") / "b.json")] == {"DUPLICATE_TEMPLATE"}
    assert by_path["c.json"] == {"INVALID_JSON"}
    assert {"UNKNOWN_FIELD", "MISSING_FIELD", "INVALID_FIELD"} <= by_path["d.json"]
    assert by_path["e.json"] == {"INVALID_FIELD"}
    doc = report.to_dict()
    assert doc["ok"] is False and doc["errors"] == report.error_count
    assert "FAILED" in report.format_text()


def test_validate_files_missing_and_empty(tmp_path: Path) -> None:
    assert codes(validate_files(tmp_path / "nope").problems) == {"PATH_NOT_FOUND"}
    assert codes(validate_files(tmp_path).problems) == {"NO_TEMPLATES"}
    assert not validate_files(tmp_path).ok


def test_validate_single_file_and_load() -> None:
    path = EXAMPLES_DIR / "password_reset.sms.en.json"
    assert validate_files(path).ok
    loaded = load_revision_file(path, tenant_id="t9", revision=4)
    assert (loaded.tenant_id, loaded.revision, loaded.channel) == ("t9", 4, "sms")


def test_load_revision_file_raises(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "x", "channel": "email", "locale": "en", "body": "hi"}))
    with pytest.raises(TemplateValidationError) as info:
        load_revision_file(bad)
    assert codes(info.value.errors) == {"SUBJECT_REQUIRED"}


def test_a_template_file_without_locale_is_english(tmp_path: Path) -> None:
    """As the API's TemplateIn: `locale` defaults to "en" (issue 40)."""
    path = tmp_path / "hello.json"
    path.write_text(json.dumps({"name": "hello", "channel": "sms", "body": "Hello"}))
    assert load_revision_file(path).locale == "en"
    report = validate_files(path)
    assert report.ok, report.format_text()
    assert report.revisions[0].locale == "en"
