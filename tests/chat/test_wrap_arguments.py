"""``dpllm.wrap`` refuses a careless ``allow="Emily"`` (a string is a collection of letters)."""

from __future__ import annotations

import openai
import pytest

from dpllm.chat.wrapper import NoRedaction, wrap
from dpllm.errors import ConfigError


def test_allow_must_be_a_list_of_terms_not_one_string() -> None:
    client = openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match=r"allow=\['Emily Clark'\]"):
        wrap(client, redactor=NoRedaction(), allow="Emily Clark")
    wrap(client, redactor=NoRedaction(), allow=["Emily Clark"])
