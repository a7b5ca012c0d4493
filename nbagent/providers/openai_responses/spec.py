"""The Responses API wire's facts (see ``providers/wire_spec.py``)."""

from ..wire_spec import WireSpec

SPEC = WireSpec(
    package="openai_responses",
    prefixes=("openai-responses",),
    factory="nbagent.providers.openai_responses.provider:OpenAIResponsesProvider",
    default_model="gpt-5-mini",
    key_variables=("OPENAI_API_KEY",),
    pricing_id="openai",
    token_names={
        "prompt_token_count": "input_tokens",
        "cached_content_token_count": "input_tokens_details.cached_tokens",
        "cache_write_token_count": "input_tokens_details.cache_write_tokens",
        "thoughts_token_count": "output_tokens_details.reasoning_tokens",
        "candidates_token_count": "output_tokens - output_tokens_details.reasoning_tokens",
        "total_token_count": "total_tokens",
    },
    usage_paths=("response.usage",),
    model_prefixes=(),  # a bare "gpt-…" goes to Chat Completions
    otel_name="openai",
)
