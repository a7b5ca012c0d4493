"""The Messages API wire's facts (see ``providers/wire_spec.py``)."""

from ..wire_spec import WireSpec

_INPUT = "input_tokens + cache_read_input_tokens + cache_creation_input_tokens"

SPEC = WireSpec(
    package="anthropic",
    prefixes=("anthropic", "claude"),
    factory="nbagent.providers.anthropic.provider:AnthropicProvider",
    default_model="claude-sonnet-4-5",
    key_variables=("ANTHROPIC_API_KEY",),
    pricing_id="anthropic",
    token_names={
        "prompt_token_count": _INPUT,  # input_tokens alone leaves out the cache reads and writes
        "cached_content_token_count": "cache_read_input_tokens",
        "cache_write_token_count": "cache_creation_input_tokens",
        "thoughts_token_count": "output_tokens_details.thinking_tokens",
        "candidates_token_count": "output_tokens - output_tokens_details.thinking_tokens",
        "total_token_count": _INPUT + " + output_tokens",  # the wire has no total
    },
    usage_paths=("message.usage", "usage"),  # message_start, then message_delta
    model_prefixes=("claude",),
    otel_name="anthropic",
)
