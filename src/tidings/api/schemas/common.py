"""Field types every request shares: storable text and JSON, bounded moments."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

from tidings.domain.moments import bounds_text, within_bounds
from tidings.domain.storable import json_problem, text_problem

MAX_INT4 = 2**31 - 1
DATE_OUT_OF_RANGE_ERROR = "date_out_of_range"


def clean_text(value: str) -> str:
    # PostgreSQL text cannot hold NUL, and a lone surrogate cannot be encoded:
    # refuse both here rather than fail in the database.
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def clean_json(value: Any) -> Any:
    """Check a free-form JSON value can be stored as jsonb as it is, and is
    bounded in depth and size (`tidings.domain.storable`)."""
    problem = json_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def bounded_moment(value: datetime) -> datetime:
    # The range every reader can decode (domain/moments.py); its own error
    # type, so the problem answer carries the stable DATE_OUT_OF_RANGE code.
    if not within_bounds(value):
        raise PydanticCustomError(DATE_OUT_OF_RANGE_ERROR, bounds_text())
    return value


Text = Annotated[str, AfterValidator(clean_text)]
# Every time a tenant supplies: with a UTC offset, within 1970..9000.
Moment = Annotated[AwareDatetime, AfterValidator(bounded_moment)]
JsonObject = Annotated[dict[str, Any], AfterValidator(clean_json)]
ChannelName = Literal["sms", "email"]


class RequestModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
