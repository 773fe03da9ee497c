"""Templates: publish immutable revisions, list the newest of each."""

from __future__ import annotations

from fastapi import APIRouter

from tidings.api.auth import Admin
from tidings.api.openapi import WITH_BODY, responses
from tidings.api.problems import InvalidRequest
from tidings.api.schemas.admin import (
    TemplateIn,
    TemplateList,
    TemplateOut,
    TemplateProblem,
    TemplatePublished,
)
from tidings.templates.model import Problem, TemplateRevision
from tidings.templates.validate import validate_revision

router = APIRouter(prefix="/v1/templates", tags=["templates"])


@router.post("", status_code=201, responses=responses(*WITH_BODY), summary="Publish a revision")
def publish_template(body: TemplateIn, caller: Admin) -> TemplatePublished:
    found = validate_revision(
        _draft(caller.tenant, body),
        body.required_providers,
        caller.tidings.settings.render_limits(),
    )
    _refuse_errors(found)
    stored = caller.tidings.publish_template(
        body.name,
        channel=body.channel,
        body=body.body,
        locale=body.locale,
        subject=body.subject,
        html_body=body.html_body,
        required_variables=body.required_variables,
        dispatch_variables=body.dispatch_variables,
        attachment_policy=body.attachment_policy,
        provider_template_ids=body.provider_template_ids,
        required_providers=tuple(body.required_providers),
        actor=caller.actor,
    )
    warnings = [TemplateProblem(**p.to_dict()) for p in found if not p.is_error]
    return TemplatePublished(
        name=stored.name,
        revision=stored.revision,
        channel=stored.channel,
        locale=stored.locale,
        content_hash=stored.content_hash,
        warnings=warnings,
    )


@router.get("", responses=responses(), summary="The newest revision per name, channel, locale")
def list_templates(caller: Admin) -> TemplateList:
    return TemplateList(items=[TemplateOut.of(r) for r in caller.tidings.latest_templates()])


def _refuse_errors(found: list[Problem]) -> None:
    """A 422 listing every problem (warnings too) when any is an error."""
    first = next((p for p in found if p.is_error), None)
    if first is not None:
        raise InvalidRequest(
            f"{first.field}: {first.message}",
            field=first.field,
            errors=[p.to_dict() for p in found],
        )


def _draft(tenant: str, body: TemplateIn) -> TemplateRevision:
    return TemplateRevision(
        tenant_id=tenant,
        name=body.name,
        revision=1,
        channel=body.channel,
        locale=body.locale,
        subject=body.subject,
        body=body.body,
        html_body=body.html_body,
        required_variables=tuple(body.required_variables),
        dispatch_variables=tuple(body.dispatch_variables),
        attachment_policy=body.attachment_policy,
        provider_template_ids=body.provider_template_ids,
    )
