"""The Chat Completions wire's facts (see ``providers/wire_spec.py``)."""

from ..wire_spec import WireSpec

SPEC = WireSpec(
    package="openai_chat",
    prefixes=("openai",),
    factory="nbagent.providers.openai_chat.provider:OpenAIProvider",
    default_model="gpt-4.1-mini",
    key_variables=("OPENAI_API_KEY",),
    pricing_id="openai",
    token_names={
        "prompt_token_count": "prompt_tokens",
        # DeepSeek says prompt_cache_hit_tokens; OpenRouter reports cache writes
        "cached_content_token_count": "prompt_tokens_details.cached_tokens|prompt_cache_hit_tokens",
        "cache_write_token_count": "prompt_tokens_details.cache_write_tokens",
        "thoughts_token_count": "completion_tokens_details.reasoning_tokens",
        "candidates_token_count": "completion_tokens - completion_tokens_details.reasoning_tokens",
        "total_token_count": "total_tokens",
    },
    usage_paths=("usage",),
    model_prefixes=("gpt-", "o1", "o3", "o4", "chatgpt"),
    otel_name="openai",
)
